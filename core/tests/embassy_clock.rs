//! `EmbassyClock` reads embassy-time's clock (here its mock driver, on the
//! host) and a session's lease follows it.

use duplex_core::{
    Clock, CloseReason, EmbassyClock, Fence, Id, InputMode, LeaseConfig, Modes, OpenOptions,
    Session,
};
use embassy_time::{Duration, MockDriver};

#[test]
fn the_clock_follows_embassy_time_and_a_lease_expires_by_it() {
    let clock = EmbassyClock;
    let start = clock.now();
    MockDriver::get().advance(Duration::from_millis(1_500));
    assert_eq!(clock.now().as_millis() - start.as_millis(), 1_500);

    let fence = Fence::new(Id::new("mic-0").unwrap(), 0);
    let lease = LeaseConfig::new(None, duplex_core::Duration::from_secs(5)).unwrap();
    let opts = OpenOptions::default()
        .modes(Modes::only(InputMode::AppendAudioChunk))
        .lease(lease);
    let session = Session::open(fence.clone(), opts, clock.now()).unwrap();
    let detached = session
        .detach(&fence, clock.now())
        .map_err(|r| r.error)
        .unwrap();
    MockDriver::get().advance(Duration::from_secs(4));
    let detached = detached
        .expire(clock.now())
        .expect_err("4 s of a 5 s grace");
    MockDriver::get().advance(Duration::from_secs(1));
    let closing = detached.expire(clock.now()).expect("the grace ran out");
    let (closed, _) = closing.finalize();
    assert_eq!(closed.close_reason(), CloseReason::DisconnectGraceExpired);
}
