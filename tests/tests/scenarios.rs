//! The seed's main scenarios, through the std manager with a manual clock.

use duplex_core::{
    Activity, Clock, CloseReason, Duration, ErrorKind, Fence, Finality, Id, InputMode, Instant,
    LeaseConfig, ManualClock, Modes, OpenOptions, StateKind,
};
use duplex_std::Sessions as _;
use duplex_std::{ManagerConfig, SessionManager};

type Manager<'c> = SessionManager<&'c ManualClock>;

const AUDIO: InputMode = InputMode::AppendAudioChunk;

fn id(s: &str) -> Id {
    Id::new(s).expect("test ids are valid")
}

fn fence(session: &str, incarnation: u64) -> Fence {
    Fence::new(id(session), incarnation)
}

fn manager(clock: &ManualClock) -> Manager<'_> {
    SessionManager::new(clock, ManagerConfig::default()).expect("default config is valid")
}

/// Opens `f` for audio with a 10 s idle TTL and 2 s grace.
#[track_caller]
fn open_audio(m: &mut Manager<'_>, f: &Fence) {
    let lease = LeaseConfig::new(Some(Duration::from_secs(10)), Duration::from_secs(2))
        .expect("valid lease");
    m.open(
        f.clone(),
        OpenOptions::default()
            .modes(Modes::only(AUDIO))
            .lease(lease),
    )
    .expect("open succeeds");
}

#[track_caller]
fn kind_of<T: std::fmt::Debug>(r: Result<T, duplex_std::Error>) -> ErrorKind {
    r.expect_err("operation should fail").kind()
}

#[test]
fn barge_in_cancel_rejects_a_late_append_and_accepts_the_next_epoch() {
    let clock = ManualClock::default();
    let mut m = manager(&clock);
    let turn = fence("call", 0).with_turn(1);
    open_audio(&mut m, &turn);
    assert_eq!(m.append(&turn, AUDIO).unwrap().seq, 1);
    assert_eq!(m.append(&turn, AUDIO).unwrap().seq, 2);
    m.bind(&turn, 0, "llm-1").unwrap();
    m.bind(&turn, 1, "tts-1").unwrap();

    // The user interrupts the model: epoch 1 cancels epoch 0's requests.
    let next = turn.clone().with_epoch(1).with_turn(0);
    let cancelled = m.cancel(&turn, &next).unwrap();
    assert_eq!(cancelled.as_slice(), [id("llm-1"), id("tts-1")]);
    assert!(m.stage_request_ids(&turn.session, None).unwrap().is_empty());

    // A chunk still in flight from the cancelled epoch is refused...
    assert_eq!(kind_of(m.append(&turn, AUDIO)), ErrorKind::FenceMismatch);
    // ...and the new epoch's sequence starts again at 1.
    let first = m.append(&next, AUDIO).unwrap();
    assert_eq!((first.seq, first.turn_seq, first.turn_id), (1, 1, 0));
    // A late duplicate of the cancel does not move the session backwards.
    let again = m.cancel(&turn, &next).unwrap();
    assert!(again.is_empty());
    assert_eq!(m.get(&turn.session).unwrap().fence(), &next);
}

#[test]
fn a_stale_close_keeps_the_live_session_and_its_bindings() {
    let clock = ManualClock::default();
    let mut m = manager(&clock);
    let old = fence("call", 0);
    open_audio(&mut m, &old);
    let live = old.clone().with_epoch(2);
    m.bind(&live, 0, "llm-7").unwrap();
    let before = m.inspect(&old.session).unwrap();

    // A close from the previous epoch arrives late.
    assert_eq!(
        kind_of(m.close(&old, CloseReason::ClientClose)),
        ErrorKind::FenceMismatch
    );
    assert_eq!(
        kind_of(m.begin_close(&old, CloseReason::ClientClose)),
        ErrorKind::FenceMismatch
    );
    assert_eq!(m.inspect(&old.session).unwrap(), before, "nothing changed");
    assert_eq!(
        m.stage_request_ids(&old.session, None).unwrap().as_slice(),
        [id("llm-7")]
    );

    // The current fence closes it.
    let released = m.close(&live, CloseReason::ClientClose).unwrap().unwrap();
    assert_eq!(released.as_slice(), [id("llm-7")]);
    assert!(m.is_empty());
}

#[test]
fn a_reopened_session_rejects_the_old_incarnation() {
    let clock = ManualClock::default();
    let mut m = manager(&clock);
    let first = fence("call", 1);
    open_audio(&mut m, &first);
    m.close(&first, CloseReason::ClientClose).unwrap();

    let second = fence("call", 2);
    open_audio(&mut m, &second);
    for late in [
        m.append(&first, AUDIO).map(|_| ()),
        m.touch(&first, Activity::Heartbeat),
    ] {
        assert_eq!(kind_of(late), ErrorKind::FenceMismatch);
    }
    assert_eq!(kind_of(m.bind(&first, 0, "old")), ErrorKind::FenceMismatch);
    assert_eq!(
        m.close(&first, CloseReason::ClientClose)
            .map_err(|e| e.kind()),
        Err(ErrorKind::FenceMismatch)
    );
    assert_eq!(m.append(&second, AUDIO).unwrap().seq, 1);
}

#[test]
fn turn_local_append_sequence() {
    let clock = ManualClock::default();
    let mut m = manager(&clock);
    let t1 = fence("call", 0).with_turn(1);
    open_audio(&mut m, &t1);
    let seqs = |m: &mut Manager<'_>, f: &Fence| {
        let a = m.append(f, AUDIO).unwrap();
        (a.seq, a.turn_seq, a.turn_id)
    };
    assert_eq!(seqs(&mut m, &t1), (1, 1, 1));
    assert_eq!(seqs(&mut m, &t1), (2, 2, 1));
    let t2 = t1.clone().with_turn(2);
    assert_eq!(
        seqs(&mut m, &t2),
        (3, 1, 2),
        "a new turn restarts turn_seq, not seq"
    );
    let t2r1 = t2.clone().with_response(1);
    assert_eq!(
        seqs(&mut m, &t2r1),
        (4, 1, 2),
        "a new response is a new turn key"
    );
    assert_eq!(seqs(&mut m, &t2r1), (5, 2, 2));
    assert_eq!(
        kind_of(m.append(&t2, AUDIO)),
        ErrorKind::FenceMismatch,
        "an older response is stale"
    );
}

#[test]
fn detach_grace_and_resume() {
    let clock = ManualClock::default();
    let mut m = manager(&clock);
    let f = fence("call", 0);
    open_audio(&mut m, &f);

    // Within grace: resume with the generation token.
    m.detach(&f).unwrap();
    assert_eq!(
        kind_of(m.append(&f, AUDIO)),
        ErrorKind::WrongState,
        "a detached session refuses input"
    );
    clock.advance(Duration::from_millis(1_999));
    assert!(m.collect_expired(&[]).is_empty());
    assert_eq!(kind_of(m.resume(&f, 7)), ErrorKind::GenerationMismatch);
    assert_eq!(m.resume(&f, 0).unwrap(), 1);
    assert_eq!(m.append(&f, AUDIO).unwrap().seq, 1);

    // Too late: the grace runs out and the reaper closes it.
    m.bind(&f, 0, "llm-1").unwrap();
    m.detach(&f).unwrap();
    assert_eq!(
        m.next_deadline(),
        Some(clock.now() + Duration::from_secs(2))
    );
    clock.advance(Duration::from_secs(2));
    let expired = m.collect_expired(&[]);
    assert_eq!(expired.len(), 1);
    assert_eq!(expired[0].reason, CloseReason::DisconnectGraceExpired);
    assert_eq!(expired[0].lease_generation, 2);
    assert_eq!(expired[0].submitted.as_slice(), [id("llm-1")]);
    assert_eq!(
        kind_of(m.resume(&f, 1)),
        ErrorKind::WrongState,
        "closing is irreversible"
    );
    assert_eq!(m.finalize(&f.session).unwrap().as_slice(), [id("llm-1")]);
    assert_eq!(kind_of(m.resume(&f, 1)), ErrorKind::UnknownSession);
}

#[test]
fn an_active_operation_holds_off_idle_expiry() {
    let clock = ManualClock::default();
    let mut m = manager(&clock);
    let f = fence("call", 0);
    open_audio(&mut m, &f);
    m.begin_operation(&f, "generate").unwrap();
    clock.advance(Duration::from_secs(60));
    assert!(
        m.collect_expired(&[]).is_empty(),
        "no idle expiry while an operation is active"
    );
    assert_eq!(m.next_deadline(), None);

    m.end_operation(&f, "generate").unwrap();
    assert_eq!(
        m.next_deadline(),
        Some(clock.now() + Duration::from_secs(10))
    );
    clock.advance(Duration::from_millis(9_999));
    assert!(m.collect_expired(&[]).is_empty());
    clock.advance(Duration::from_millis(1));
    let expired = m.collect_expired(&[]);
    assert_eq!(expired.len(), 1);
    assert_eq!(expired[0].reason, CloseReason::IdleTtlExpired);
}

#[test]
fn touch_pushes_idle_expiry_back_and_excluded_sessions_wait() {
    let clock = ManualClock::default();
    let mut m = manager(&clock);
    let (a, b) = (fence("a", 0), fence("b", 0));
    open_audio(&mut m, &a);
    open_audio(&mut m, &b);
    clock.advance(Duration::from_secs(6));
    m.touch(&a, Activity::Heartbeat).unwrap();
    clock.advance(Duration::from_secs(4));
    // b is due, but excluded (say, its cleanup is in flight).
    assert!(m.collect_expired([&b.session]).is_empty());
    assert_eq!(m.next_deadline(), Some(Instant::from_millis(10_000)));
    let expired = m.collect_expired(&[]);
    assert_eq!(
        expired
            .iter()
            .map(|e| e.session.as_str())
            .collect::<Vec<_>>(),
        ["b"]
    );
    assert_eq!(m.next_deadline(), Some(Instant::from_millis(16_000)));
}

#[test]
fn close_and_reaper_race_make_exactly_one_terminal_transition() {
    let clock = ManualClock::default();
    let mut m = manager(&clock);
    let f = fence("call", 0);
    open_audio(&mut m, &f);
    m.bind(&f, 0, "llm-1").unwrap();
    clock.advance(Duration::from_secs(10));

    // The reaper wins: the session is closing; a client close that arrives
    // now reports "not closed" and does not release anything twice.
    let expired = m.collect_expired(&[]);
    assert_eq!(expired.len(), 1);
    assert_eq!(m.close(&f, CloseReason::ClientClose).unwrap(), None);
    assert!(
        m.collect_expired(&[]).is_empty(),
        "a closing session never expires again"
    );
    assert_eq!(m.finalize(&f.session).unwrap().as_slice(), [id("llm-1")]);
    assert_eq!(m.close(&f, CloseReason::ClientClose).unwrap(), None);

    // The client wins: the reaper then finds nothing.
    let g = fence("call", 1);
    open_audio(&mut m, &g);
    clock.advance(Duration::from_secs(10));
    assert!(m.close(&g, CloseReason::ClientClose).unwrap().is_some());
    assert!(m.collect_expired(&[]).is_empty());
    assert!(m.is_empty());
}

#[test]
fn request_cleanup_closes_the_owner_and_finalize_hands_back_its_requests() {
    let clock = ManualClock::default();
    let mut m = manager(&clock);
    let (a, b) = (fence("a", 0), fence("b", 0));
    open_audio(&mut m, &a);
    open_audio(&mut m, &b);
    m.bind(&a, 0, "llm-a").unwrap();
    m.reserve(&a, 1, "tts-a").unwrap();
    m.bind(&b, 0, "llm-b").unwrap();

    let closing = m.close_for_requests(&["tts-a"]);
    assert_eq!(closing.len(), 1);
    assert_eq!(closing[0].session, a.session);
    assert_eq!(closing[0].ids.as_slice(), [id("llm-a"), id("tts-a")]);
    assert_eq!(m.get(&a.session).unwrap().kind(), StateKind::Closing);
    assert_eq!(m.get(&b.session).unwrap().kind(), StateKind::Open);

    // Cleanup failed once and is retried before finalize: still reported.
    assert_eq!(m.close_for_requests(&["tts-a"]).len(), 1);
    let done = m.finalize_closed([&a.session, &b.session]);
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].ids.len(), 2);
}

#[test]
fn admission_counts_closing_sessions_until_finalized() {
    let clock = ManualClock::default();
    let config = ManagerConfig {
        max_sessions: Some(1),
        ..ManagerConfig::default()
    };
    let mut m: Manager<'_> = SessionManager::new(&clock, config).unwrap();
    let a = fence("a", 0);
    open_audio(&mut m, &a);
    m.begin_close(&a, CloseReason::ExplicitClose).unwrap();
    let b = fence("b", 0);
    let refused = m.open(b.clone(), OpenOptions::default());
    assert_eq!(refused.unwrap_err().kind(), ErrorKind::CapacityExhausted);
    assert!(
        m.finalize(&a.session).unwrap().is_empty(),
        "a held no requests"
    );
    m.open(b, OpenOptions::default()).unwrap();
}

#[test]
fn failed_operations_change_nothing() {
    let clock = ManualClock::default();
    let mut m = manager(&clock);
    let f = fence("call", 0);
    open_audio(&mut m, &f);
    for (stage, request) in [(0, "q0"), (1, "q1"), (2, "q2"), (3, "q3")] {
        m.bind(&f, stage, request).unwrap();
    }
    let before = m.inspect(&f.session).unwrap();
    clock.advance(Duration::from_secs(1));
    // Bindings full; a different epoch would also have reset the cursor.
    assert_eq!(
        kind_of(m.bind(&f.clone().with_epoch(1), 4, "q4")),
        ErrorKind::Full
    );
    assert_eq!(
        kind_of(m.record_completed(&f, "op", AUDIO, Finality::Final, &[1, 2, 3, 4, 5])),
        ErrorKind::Full
    );
    assert_eq!(kind_of(m.reserve(&f, 0, "")), ErrorKind::InvalidId);
    assert_eq!(
        kind_of(m.append(&f, InputMode::AppendTokens)),
        ErrorKind::UnsupportedMode
    );
    assert_eq!(
        kind_of(m.touch(&fence("call", 9), Activity::Heartbeat)),
        ErrorKind::FenceMismatch
    );
    assert_eq!(m.inspect(&f.session).unwrap(), before);
}

#[test]
fn configurations_are_released_when_a_session_leaves() {
    // A freed slot keeps its last session for reuse only when the
    // configurations own nothing; these own a reference count.
    let clock = ManualClock::new(Instant::ZERO);
    let config = std::rc::Rc::new("voice-a");
    let mut m: SessionManager<
        &ManualClock,
        duplex_core::profile::Conformance<std::rc::Rc<&'static str>>,
    > = SessionManager::with_capacities(&clock, ManagerConfig::default()).unwrap();
    let (a, b) = (fence("a", 0), fence("b", 0));
    m.open(a.clone(), OpenOptions::new(config.clone(), ()))
        .unwrap();
    m.open(b.clone(), OpenOptions::new(config.clone(), ()))
        .unwrap();
    assert_eq!(std::rc::Rc::strong_count(&config), 3);
    assert_eq!(
        m.close(&a, CloseReason::ClientClose)
            .unwrap()
            .map(|ids| ids.len()),
        Some(0)
    );
    m.begin_close(&b, CloseReason::ExplicitClose).unwrap();
    assert!(m.finalize(&b.session).unwrap().is_empty());
    assert_eq!(
        std::rc::Rc::strong_count(&config),
        1,
        "closing released both configurations"
    );
}

#[test]
fn a_reused_slot_starts_a_fresh_session() {
    let clock = ManualClock::new(Instant::ZERO);
    let mut m = manager(&clock);
    let a = fence("a", 0);
    open_audio(&mut m, &a);
    m.append(&a, AUDIO).unwrap();
    m.bind(&a, 0, "llm").unwrap();
    m.record_completed(&a, "op", AUDIO, Finality::Final, &[1])
        .unwrap();
    let released = m.close(&a, CloseReason::ClientClose).unwrap();
    assert_eq!(released.map(|ids| ids.len()), Some(1));
    clock.advance(Duration::from_secs(1));
    // The next open takes the freed slot; nothing of `a` is visible in it.
    let b = fence("b", 7);
    m.open(b.clone(), OpenOptions::default()).unwrap();
    let snap = m.inspect(&b.session).unwrap();
    assert_eq!(
        (snap.fence, snap.input_seq, snap.lease_generation),
        (b.clone(), 0, 0)
    );
    assert!(snap.resources.is_empty() && snap.bindings.is_empty() && snap.completed.is_empty());
    assert_eq!(snap.last_activity, Instant::from_millis(1_000));
    assert_eq!(snap.modes, Modes::default());
    assert!(m.get(&a.session).is_none());
}
