//! Every typed state transition, on the device: open, detach, resume,
//! begin_close, finalize, close, expire and recycle, with the fence rules
//! and expiry through an injected clock.
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

/// An audio session at t=0: 10 s idle TTL, 2 s disconnect grace.
fn open(clock: &ManualClock) -> Result<Session<Open>, Error> {
    let lease = LeaseConfig::new(Some(Duration::from_secs(10)), Duration::from_secs(2))?;
    let opts = OpenOptions::default()
        .modes(Modes::only(AUDIO))
        .lease(lease)
        .completed_limit(2);
    Session::open(fence(), opts, clock.now())
}

fn open_detach_resume() -> Outcome {
    let clock = ManualClock::new(Instant::ZERO);
    let mut s = ok!(open(&clock));
    check_eq!(ok!(s.append(&fence(), AUDIO)).seq, 1);
    clock.advance(Duration::from_millis(100));
    let d = ok!(s.detach(&fence(), clock.now()));
    check_eq!(d.kind(), StateKind::Detached);
    check_eq!(d.state().since(), Instant::from_millis(100));
    // A resume names the generation it holds; each resume advances it.
    let (s, generation) = ok!(d.resume(&fence(), 0, clock.now()));
    check_eq!(generation, 1);
    check_eq!(s.lease_generation(), 1);
    // The append sequence survived the disconnect.
    let mut s = s;
    check_eq!(ok!(s.append(&fence(), AUDIO)).seq, 2);
    Ok(())
}

fn a_resume_with_an_old_generation_is_refused_and_changes_nothing() -> Outcome {
    let clock = ManualClock::new(Instant::ZERO);
    let d = ok!(ok!(open(&clock)).detach(&fence(), clock.now()));
    let (s, _) = ok!(d.resume(&fence(), 0, clock.now()));
    let d = ok!(s.detach(&fence(), clock.now()));
    let Err(rejected) = d.resume(&fence(), 0, clock.now()) else {
        check!(false);
        return Ok(());
    };
    check_eq!(
        rejected.error,
        Error::GenerationMismatch {
            expected: 1,
            actual: 0
        }
    );
    check_eq!(rejected.session.kind(), StateKind::Detached);
    check_eq!(rejected.session.lease_generation(), 1);
    Ok(())
}

fn begin_close_then_finalize_releases_every_request_once() -> Outcome {
    let clock = ManualClock::new(Instant::ZERO);
    let mut s = ok!(open(&clock));
    ok!(s.bind(&fence(), 0, &id("llm")));
    ok!(s.reserve(&fence(), 1, &id("voc")));
    let closing = ok!(s.begin_close(&fence(), CloseReason::ClientClose));
    check_eq!(closing.kind(), StateKind::Closing);
    check_eq!(closing.state().reason(), CloseReason::ClientClose);
    let (closed, released) = closing.finalize();
    check_eq!(released.as_slice(), [id("llm"), id("voc")]);
    check_eq!(closed.kind(), StateKind::Closed);
    check_eq!(closed.close_reason(), CloseReason::ClientClose);
    Ok(())
}

fn a_detached_session_closes_too() -> Outcome {
    let clock = ManualClock::new(Instant::ZERO);
    let mut s = ok!(open(&clock));
    ok!(s.bind(&fence(), 0, &id("llm")));
    let d = ok!(s.detach(&fence(), clock.now()));
    let (closed, released) = ok!(d.close(&fence(), CloseReason::ExplicitClose));
    check_eq!(released.as_slice(), [id("llm")]);
    check_eq!(closed.close_reason(), CloseReason::ExplicitClose);
    Ok(())
}

fn idle_ttl_expires_through_the_clock() -> Outcome {
    let clock = ManualClock::new(Instant::ZERO);
    let mut s = ok!(open(&clock));
    check_eq!(s.deadline(), Some(Instant::from_millis(10_000)));
    clock.advance(Duration::from_millis(9_999));
    check_eq!(s.due(clock.now()), None);
    // Activity moves the deadline.
    ok!(s.touch(&fence(), Activity::Heartbeat, clock.now()));
    clock.advance(Duration::from_millis(9_999));
    let Err(s) = s.expire(clock.now()) else {
        check!(false);
        return Ok(());
    };
    clock.advance(Duration::from_millis(1));
    check_eq!(s.due(clock.now()), Some(CloseReason::IdleTtlExpired));
    let Ok(closing) = s.expire(clock.now()) else {
        check!(false);
        return Ok(());
    };
    check_eq!(closing.state().reason(), CloseReason::IdleTtlExpired);
    Ok(())
}

fn an_active_operation_holds_idle_expiry_off() -> Outcome {
    let clock = ManualClock::new(Instant::ZERO);
    let mut s = ok!(open(&clock));
    ok!(s.begin_operation(&fence(), &id("gen"), clock.now()));
    check_eq!(s.deadline(), None);
    clock.advance(Duration::from_secs(60));
    check_eq!(s.due(clock.now()), None);
    ok!(s.end_operation(&fence(), &id("gen"), clock.now()));
    check_eq!(s.deadline(), Some(Instant::from_millis(70_000)));
    Ok(())
}

fn the_disconnect_grace_expires_a_detached_session() -> Outcome {
    let clock = ManualClock::new(Instant::ZERO);
    let d = ok!(ok!(open(&clock)).detach(&fence(), clock.now()));
    check_eq!(d.deadline(), Some(Instant::from_millis(2_000)));
    clock.advance(Duration::from_millis(2_000));
    check_eq!(
        d.due(clock.now()),
        Some(CloseReason::DisconnectGraceExpired)
    );
    let Ok(closing) = d.expire(clock.now()) else {
        check!(false);
        return Ok(());
    };
    check_eq!(
        closing.state().reason(),
        CloseReason::DisconnectGraceExpired
    );
    Ok(())
}

fn barge_in_cancels_the_old_epoch_and_fences_it_out() -> Outcome {
    let clock = ManualClock::new(Instant::ZERO);
    let mut s = ok!(open(&clock));
    ok!(s.append(&fence(), AUDIO));
    ok!(s.bind(&fence(), 0, &id("tts-1")));
    let next = fence().with_epoch(1);
    let cancelled = ok!(s.cancel(&fence(), &next));
    check_eq!(cancelled.as_slice(), [id("tts-1")]);
    check_eq!(s.fence(), &next);
    // The old epoch's late chunk is refused as stale; the new epoch restarts.
    check_eq!(
        s.append(&fence(), AUDIO).map_err(|e| e.kind()),
        Err(ErrorKind::FenceMismatch)
    );
    check_eq!(ok!(s.append(&next, AUDIO)).seq, 1);
    // The fence never moves backwards: cancelling towards epoch 0 is refused.
    check!(s.cancel(&next, &fence()).is_err());
    Ok(())
}

fn prepare_and_commit_in_two_phases() -> Outcome {
    let clock = ManualClock::new(Instant::ZERO);
    let mut s = ok!(open(&clock));
    let first = ok!(s.prepare_append(&fence(), AUDIO));
    let second = ok!(s.prepare_append(&fence(), AUDIO));
    check_eq!(ok!(s.commit_append(&first)).seq, 1);
    // The second reservation saw the same sequence: it is stale now.
    check_eq!(
        s.commit_append(&second).map_err(|e| e.kind()),
        Err(ErrorKind::StaleReservation)
    );
    check_eq!(s.input_seq(), 1);
    Ok(())
}

fn completed_appends_are_answered_from_the_cache() -> Outcome {
    let clock = ManualClock::new(Instant::ZERO);
    let mut s = ok!(open(&clock));
    let op = id("op-1");
    check_eq!(
        ok!(s.completed(&fence(), &op, AUDIO, Finality::Final)),
        None
    );
    ok!(s.record_completed(&fence(), &op, AUDIO, Finality::Final, &[7, 8]));
    check_eq!(
        ok!(s.completed(&fence(), &op, AUDIO, Finality::Final)),
        Some(&[7i64, 8][..])
    );
    // The window keeps the newest `completed_limit` (2) records.
    ok!(s.record_completed(&fence(), &id("op-2"), AUDIO, Finality::Final, &[]));
    ok!(s.record_completed(&fence(), &id("op-3"), AUDIO, Finality::Final, &[]));
    check_eq!(
        ok!(s.completed(&fence(), &op, AUDIO, Finality::Final)),
        None
    );
    Ok(())
}

fn a_closed_session_is_recycled_in_place() -> Outcome {
    let clock = ManualClock::new(Instant::ZERO);
    let s = ok!(open(&clock));
    let (closed, _) = ok!(s.close(&fence(), CloseReason::ExplicitClose));
    let mut any = AnySession::from(closed);
    let next = Fence::new(id("speaker"), 0);
    ok!(any.recycle(next.clone(), OpenOptions::default(), clock.now()));
    check_eq!(any.kind(), StateKind::Open);
    check_eq!(any.fence(), &next);
    Ok(())
}

tests!(
    lifecycle: open_detach_resume,
    a_resume_with_an_old_generation_is_refused_and_changes_nothing,
    begin_close_then_finalize_releases_every_request_once,
    a_detached_session_closes_too,
    idle_ttl_expires_through_the_clock,
    an_active_operation_holds_idle_expiry_off,
    the_disconnect_grace_expires_a_detached_session,
    barge_in_cancels_the_old_epoch_and_fences_it_out,
    prepare_and_commit_in_two_phases,
    completed_appends_are_answered_from_the_cache,
    a_closed_session_is_recycled_in_place,
);
