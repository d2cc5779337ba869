//! `AnySession`: one variable for a session in any state, the same
//! operations checked at run time, transitions in place that leave the
//! session unchanged on refusal, on the device.
#![no_std]
#![no_main]

use duplex_core::*;
use duplex_on_target::{check, check_eq, ok, tests, Outcome};

const AUDIO: InputMode = InputMode::AppendAudioChunk;

fn id(s: &str) -> Id {
    Id::new(s).expect("a short id")
}

fn fence() -> Fence {
    Fence::new(id("mic"), 1)
}

fn open_any(clock: &ManualClock) -> Result<AnySession, Error> {
    let lease = LeaseConfig::new(Some(Duration::from_secs(10)), Duration::from_secs(2))?;
    let opts = OpenOptions::default()
        .modes(Modes::only(AUDIO))
        .lease(lease);
    Ok(AnySession::from(Session::open(fence(), opts, clock.now())?))
}

fn every_state_in_one_variable() -> Outcome {
    let clock = ManualClock::new(Instant::ZERO);
    let mut s = ok!(open_any(&clock));
    check_eq!(s.kind(), StateKind::Open);
    ok!(s.append(&fence(), AUDIO));
    ok!(s.bind(&fence(), 0, &id("llm")));
    ok!(s.detach(&fence(), clock.now()));
    check_eq!(s.kind(), StateKind::Detached);
    check!(s.as_detached().is_some() && s.as_open().is_none());
    check_eq!(ok!(s.resume(&fence(), 0, clock.now())), 1);
    check_eq!(s.kind(), StateKind::Open);
    ok!(s.begin_close(&fence(), CloseReason::RequestCleanup));
    check_eq!(s.kind(), StateKind::Closing);
    check_eq!(s.close_reason(), Some(CloseReason::RequestCleanup));
    check_eq!(ok!(s.finalize()).as_slice(), [id("llm")]);
    check_eq!(s.kind(), StateKind::Closed);
    // Release happens once: a second finalize is refused.
    check!(s.finalize().is_err());
    Ok(())
}

fn refused_transitions_leave_the_session_as_it_was() -> Outcome {
    let clock = ManualClock::new(Instant::ZERO);
    let mut s = ok!(open_any(&clock));
    ok!(s.detach(&fence(), clock.now()));
    check_eq!(
        s.resume(&fence(), 7, clock.now()),
        Err(Error::GenerationMismatch {
            expected: 0,
            actual: 7
        })
    );
    check_eq!(s.kind(), StateKind::Detached);
    check_eq!(s.lease_generation(), 0);
    let other = Fence::new(id("mic"), 2);
    check!(s.begin_close(&other, CloseReason::ExplicitClose).is_err());
    check_eq!(s.kind(), StateKind::Detached);
    check!(s.finalize().is_err());
    check_eq!(s.kind(), StateKind::Detached);
    Ok(())
}

fn close_in_place_returns_what_it_released() -> Outcome {
    let clock = ManualClock::new(Instant::ZERO);
    let mut s = ok!(open_any(&clock));
    ok!(s.reserve(&fence(), 1, &id("voc")));
    let mut held = RequestIds::new();
    s.held_request_ids(&mut held);
    check_eq!(held.as_slice(), [id("voc")]);
    let mut released = RequestIds::new();
    ok!(s.close_into(&fence(), CloseReason::ExplicitClose, &mut released));
    check_eq!(released.as_slice(), [id("voc")]);
    check_eq!(s.kind(), StateKind::Closed);
    check_eq!(s.close_reason(), Some(CloseReason::ExplicitClose));
    // Closed: every operation but recycle is refused.
    check!(matches!(
        s.close(&fence(), CloseReason::ExplicitClose),
        Err(Error::WrongState { .. })
    ));
    Ok(())
}

fn expire_reports_what_the_host_must_release() -> Outcome {
    let clock = ManualClock::new(Instant::ZERO);
    let mut s = ok!(open_any(&clock));
    ok!(s.bind(&fence(), 0, &id("llm")));
    ok!(s.detach(&fence(), clock.now()));
    check_eq!(s.deadline(), Some(Instant::from_millis(2_000)));
    clock.advance(Duration::from_millis(1_999));
    check!(s.expire(clock.now()).is_none());
    clock.advance(Duration::from_millis(1));
    let Some(expiry) = s.expire(clock.now()) else {
        check!(false);
        return Ok(());
    };
    check_eq!(expiry.session, id("mic"));
    check_eq!(expiry.reason, CloseReason::DisconnectGraceExpired);
    // Closing retires the generation a resume would have needed.
    check_eq!(expiry.lease_generation, 1);
    check_eq!(s.kind(), StateKind::Closing);
    check_eq!(ok!(s.finalize()).as_slice(), [id("llm")]);
    Ok(())
}

fn typed_access_round_trips() -> Outcome {
    let clock = ManualClock::new(Instant::ZERO);
    let s = ok!(open_any(&clock));
    let Ok(mut open) = s.into_open() else {
        check!(false);
        return Ok(());
    };
    check_eq!(ok!(open.append(&fence(), AUDIO)).seq, 1);
    let any = AnySession::from(open);
    check_eq!(any.as_open().map(Session::input_seq), Some(1));
    Ok(())
}

tests!(
    any_session: every_state_in_one_variable,
    refused_transitions_leave_the_session_as_it_was,
    close_in_place_returns_what_it_released,
    expire_reports_what_the_host_must_release,
    typed_access_round_trips,
);
