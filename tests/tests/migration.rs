//! A session moving between hosts: exported from one manager, carried as
//! bytes (the core's snapshot), imported into another under a new
//! incarnation. The old owner's messages are refused, everything the
//! session owns arrives, and its requests are released exactly once.

use duplex_core::{
    AnySession, CloseReason, Duration, ErrorKind, Fence, FenceRule, Finality, Id, InputMode,
    Instant, LeaseConfig, ManualClock, Modes, Open, OpenOptions, Session, StateKind,
};
use duplex_std::Sessions as _;
use duplex_std::{Error, ManagerConfig, SessionManager};

type Manager<'c> = SessionManager<&'c ManualClock>;

const AUDIO: InputMode = InputMode::AppendAudioChunk;

fn id(s: &str) -> Id {
    Id::new(s).expect("test ids are valid")
}

fn manager(clock: &ManualClock) -> Manager<'_> {
    SessionManager::new(clock, ManagerConfig::default()).expect("default config is valid")
}

/// The bytes a host would send to another: the exported session's image.
fn over_the_wire(session: &AnySession) -> AnySession {
    let mut buf = [0u8; Session::<Open>::SNAPSHOT_MAX];
    let image = session
        .snapshot(&mut buf)
        .expect("an image fits SNAPSHOT_MAX");
    AnySession::restore(image).expect("an image restores")
}

/// A busy audio session on `m`: appends, a binding, a reservation, a
/// completed append; 10 s idle TTL, 2 s grace.
fn busy(m: &mut Manager<'_>, f: &Fence) {
    let lease = LeaseConfig::new(Some(Duration::from_secs(10)), Duration::from_secs(2)).unwrap();
    let opts = OpenOptions::default()
        .modes(Modes::only(AUDIO))
        .lease(lease);
    m.open(f.clone(), opts).unwrap();
    m.append(f, AUDIO).unwrap();
    m.append(f, AUDIO).unwrap();
    m.bind(f, 0, "llm-1").unwrap();
    m.reserve(f, 1, "voc-1").unwrap();
    m.record_completed(f, "op-9", AUDIO, Finality::Final, &[4, 2])
        .unwrap();
}

#[test]
fn a_detached_session_moves_hosts_and_resumes_under_its_new_incarnation() {
    let (old_clock, new_clock) = (ManualClock::default(), ManualClock::default());
    let (mut old_host, mut new_host) = (manager(&old_clock), manager(&new_clock));
    let f = Fence::new(id("call"), 1).with_epoch(3);
    busy(&mut old_host, &f);
    old_clock.advance(Duration::from_millis(500));
    old_host.detach(&f).unwrap();

    let exported = old_host.export("call").unwrap();
    assert!(old_host.is_empty() && old_host.get(&f.session).is_none());
    // The new host's clock is far from the old one's: times restart there.
    new_clock.advance(Duration::from_secs(3_600));
    // What travelled is the session now; `exported` is only the old
    // host's copy of the same facts.
    let moved = new_host.import(over_the_wire(&exported), 2).unwrap();
    assert_eq!(moved, Fence::new(id("call"), 2).with_epoch(3));

    let s = new_host.get(&f.session).unwrap();
    assert_eq!(s.kind(), StateKind::Detached);
    assert_eq!(s.deadline(), Some(Instant::from_millis(3_602_000)));
    assert_eq!(s.lease_generation(), 0);

    // Every message for the old owner is refused as another identity.
    for refused in [
        new_host.resume(&f, 0).map(|_| ()),
        new_host.bind(&f, 2, "late"),
        new_host.close(&f, CloseReason::ClientClose).map(|_| ()),
    ] {
        assert!(matches!(
            refused,
            Err(Error::Session(duplex_core::Error::FenceMismatch {
                rule: FenceRule::Identity,
                ..
            }))
        ));
    }

    // The new owner carries on where the old one stopped.
    assert_eq!(new_host.resume(&moved, 0).unwrap(), 1);
    assert_eq!(
        new_host
            .completed(&moved, "op-9", AUDIO, Finality::Final)
            .unwrap()
            .as_deref(),
        Some(&[4, 2][..]),
        "the completed append's result survives the move"
    );
    assert_eq!(new_host.append(&moved, AUDIO).unwrap().seq, 3);
    let released = new_host
        .close(&moved, CloseReason::ClientClose)
        .unwrap()
        .unwrap();
    let mut ids: Vec<&str> = released.iter().map(Id::as_str).collect();
    ids.sort_unstable();
    assert_eq!(ids, ["llm-1", "voc-1"], "released once, by the new owner");
    assert!(new_host.is_empty());
}

#[test]
fn a_refused_import_changes_neither_manager_and_hands_the_session_back() {
    let clock = ManualClock::default();
    let (mut a, mut b) = (manager(&clock), manager(&clock));
    let f = Fence::new(id("call"), 5);
    busy(&mut a, &f);
    let session = a.export("call").unwrap();

    // Not a newer incarnation: refused with the stamps that say why.
    let refused = b.import(session, 5).unwrap_err();
    assert!(matches!(
        refused.error,
        Error::Session(duplex_core::Error::FenceMismatch {
            rule: FenceRule::Migration,
            ..
        })
    ));
    assert!(b.is_empty());
    let session = refused.session;
    assert_eq!(session.fence(), &f, "the refused session is unchanged");

    // Full: refused, unchanged; then it goes home under a new incarnation.
    let config = ManagerConfig {
        max_sessions: Some(1),
        ..ManagerConfig::default()
    };
    let mut full = SessionManager::new(&clock, config).unwrap();
    full.open(Fence::new(id("other"), 0), OpenOptions::default())
        .unwrap();
    let refused = full.import(session, 6).unwrap_err();
    assert_eq!(refused.error.kind(), ErrorKind::CapacityExhausted);
    let home = a.import(refused.session, 6).unwrap();
    assert_eq!(home.incarnation, 6);
    assert_eq!(a.inspect(&f.session).unwrap().bindings, [(0, id("llm-1"))]);

    // Exporting what is not there, or an invalid id, is a typed refusal.
    assert_eq!(
        b.export("nobody").unwrap_err().kind(),
        ErrorKind::UnknownSession
    );
    assert_eq!(
        b.export("x".repeat(33)).unwrap_err().kind(),
        ErrorKind::InvalidId
    );
}

#[test]
fn the_reaper_sees_an_imported_session_and_releases_it_once() {
    let clock = ManualClock::default();
    let (mut a, mut b) = (manager(&clock), manager(&clock));
    let f = Fence::new(id("call"), 0);
    busy(&mut a, &f);
    let moved = b.import(a.export("call").unwrap(), 1).unwrap();
    assert!(a.collect_expired([]).is_empty());

    clock.advance(Duration::from_secs(10));
    let expired = b.collect_expired([]);
    assert_eq!(expired.len(), 1);
    assert_eq!(expired[0].fence, moved.clone());
    assert_eq!(expired[0].reason, CloseReason::IdleTtlExpired);
    let mut held: Vec<&str> = expired[0]
        .submitted
        .iter()
        .chain(expired[0].reserved.iter())
        .map(Id::as_str)
        .collect();
    held.sort_unstable();
    assert_eq!(held, ["llm-1", "voc-1"]);
    let finalized = b.finalize_closed([&moved.session]);
    assert_eq!(finalized.len(), 1);
    let mut released: Vec<&str> = finalized[0].ids.iter().map(Id::as_str).collect();
    released.sort_unstable();
    assert_eq!(released, held, "finalizing releases what expiry announced");
    assert!(b.is_empty());
}
