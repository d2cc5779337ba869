//! Unit tests of the typed session, grouped by state, with fixtures and
//! explicit time. The conformance traces cover the rules broadly; these pin
//! the finer points of the seed one by one.

extern crate std;

use std::vec::Vec;

use crate::*;

fn id(s: &str) -> Id {
    Id::new(s).unwrap()
}

fn fence() -> Fence {
    Fence::new(id("s"), 1)
}

fn at(ms: u64) -> Instant {
    Instant::from_millis(ms)
}

const AUDIO: InputMode = InputMode::AppendAudioChunk;

/// An open audio session at t=0 with a 10 s idle TTL and a 2 s grace.
fn session_open() -> Session<Open> {
    let lease = LeaseConfig::new(Some(Duration::from_secs(10)), Duration::from_secs(2)).unwrap();
    let opts = OpenOptions::default()
        .modes(Modes::only(AUDIO))
        .lease(lease)
        .completed_limit(2);
    Session::open(fence(), opts, at(0)).unwrap()
}

fn session_detached() -> Session<Detached> {
    session_open().detach(&fence(), at(100)).unwrap()
}

fn session_closing() -> Session<Closing> {
    let mut s = session_open();
    s.bind(&fence(), 0, &id("llm")).unwrap();
    s.reserve(&fence(), 1, &id("voc")).unwrap();
    s.begin_close(&fence(), CloseReason::ClientClose).unwrap()
}

#[track_caller]
fn ids<'a>(it: impl Iterator<Item = &'a Id>) -> Vec<&'a str> {
    it.map(Id::as_str).collect()
}

mod open {
    use super::*;

    #[test]
    fn a_higher_turn_with_a_lower_response_is_stale_within_an_epoch() {
        let mut s = session_open();
        s.accept_fence(&fence().with_turn(1).with_response(3))
            .unwrap();
        let err = s.append(&fence().with_turn(2), AUDIO).unwrap_err();
        assert!(matches!(
            err,
            Error::FenceMismatch {
                rule: FenceRule::Stale,
                ..
            }
        ));
        // A higher epoch may carry any turn and response.
        s.append(&fence().with_epoch(1), AUDIO).unwrap();
    }

    #[test]
    fn another_incarnation_is_refused_with_the_identity_rule() {
        let mut s = session_open();
        let err = s
            .touch(&Fence::new(id("s"), 2), Activity::Heartbeat, at(5))
            .unwrap_err();
        assert!(matches!(
            err,
            Error::FenceMismatch {
                rule: FenceRule::Identity,
                ..
            }
        ));
        assert_eq!(s.last_activity(), at(0), "nothing changed");
    }

    #[test]
    fn the_mode_is_checked_before_the_fence() {
        let s = session_open();
        let stale_and_unsupported = Fence::new(id("s"), 9);
        let err = s
            .prepare_append(&stale_and_unsupported, InputMode::AppendTokens)
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::UnsupportedMode);
    }

    #[test]
    fn a_new_epoch_resets_the_cursor_and_the_completed_cache() {
        let mut s = session_open();
        s.append(&fence(), AUDIO).unwrap();
        s.record_completed(&fence(), &id("op"), AUDIO, Finality::Partial, &[1])
            .unwrap();
        s.accept_fence(&fence().with_epoch(1)).unwrap();
        assert_eq!((s.input_seq(), s.input_turn_seq()), (0, 0));
        assert_eq!(s.completed_operations().count(), 0);
    }

    #[test]
    fn a_reservation_made_before_an_epoch_change_is_stale() {
        let mut s = session_open();
        let r = s.prepare_append(&fence(), AUDIO).unwrap();
        s.accept_fence(&fence().with_epoch(1)).unwrap();
        assert_eq!(
            s.commit_append(&r).unwrap_err().kind(),
            ErrorKind::StaleReservation
        );
    }

    #[test]
    fn begin_operation_is_all_or_nothing_at_capacity() {
        let mut s = session_open();
        for op in ["a", "b", "c", "d"] {
            s.begin_operation(&fence(), &id(op), at(1)).unwrap();
        }
        let err = s.begin_operation(&fence(), &id("e"), at(2)).unwrap_err();
        assert_eq!(
            err,
            Error::Full {
                table: Table::ActiveOperations,
                capacity: 4
            }
        );
        assert_eq!(s.last_activity(), at(1));
        // A duplicate is reported as such even when full.
        assert_eq!(
            s.begin_operation(&fence(), &id("a"), at(2)),
            Err(Error::OperationActive)
        );
    }

    #[test]
    fn the_idle_deadline_follows_activity_and_operations() {
        let mut s = session_open();
        assert_eq!(s.deadline(), Some(at(10_000)));
        s.touch(&fence(), Activity::Append, at(4_000)).unwrap();
        assert_eq!(s.deadline(), Some(at(14_000)));
        s.begin_operation(&fence(), &id("gen"), at(5_000)).unwrap();
        assert_eq!(s.deadline(), None);
        s.end_operation(&fence(), &id("gen"), at(6_000)).unwrap();
        assert_eq!(s.deadline(), Some(at(16_000)));
        assert_eq!(s.due(at(15_999)), None);
        assert_eq!(s.due(at(16_000)), Some(CloseReason::IdleTtlExpired));
    }

    #[test]
    fn deadlines_saturate_instead_of_overflowing() {
        let lease = LeaseConfig::new(
            Some(Duration::from_millis(u64::MAX)),
            Duration::from_millis(u64::MAX),
        )
        .unwrap();
        let s: Session =
            Session::open(fence(), OpenOptions::default().lease(lease), Instant::MAX).unwrap();
        assert_eq!(s.deadline(), Some(Instant::MAX));
        assert_eq!(s.due(Instant::MAX), Some(CloseReason::IdleTtlExpired));
    }
}

mod requests {
    use super::*;

    #[test]
    fn reserve_conflicts_only_across_epochs() {
        let mut s = session_open();
        s.reserve(&fence(), 0, &id("r")).unwrap();
        s.reserve(&fence().with_turn(3), 0, &id("r")).unwrap(); // same epoch: no-op
        assert_eq!(s.resources().count(), 1);
        s.accept_fence(&fence().with_epoch(1)).unwrap();
        let err = s.reserve(&fence().with_epoch(1), 0, &id("r")).unwrap_err();
        assert_eq!(
            err,
            Error::ResourceConflict {
                stage: 0,
                held_epoch: 0,
                requested_epoch: 1
            }
        );
    }

    #[test]
    fn a_replaced_binding_keeps_its_stage_place() {
        let mut s = session_open();
        s.bind(&fence(), 0, &id("a")).unwrap();
        s.bind(&fence(), 1, &id("b")).unwrap();
        s.bind(&fence(), 0, &id("c")).unwrap();
        let bound: Vec<(u32, &str)> = s.bindings().map(|(st, r)| (st, r.as_str())).collect();
        assert_eq!(bound, [(0, "c"), (1, "b")]);
        // Releasing a bound request drops its binding; re-binding goes last.
        s.release(&[id("c")]);
        s.bind(&fence(), 0, &id("d")).unwrap();
        let bound: Vec<(u32, &str)> = s.bindings().map(|(st, r)| (st, r.as_str())).collect();
        assert_eq!(bound, [(1, "b"), (0, "d")]);
    }

    #[test]
    fn bind_full_is_checked_after_the_seed_errors() {
        let mut s = session_open();
        for stage in 0..4 {
            s.bind(&fence(), stage, &id("r")).unwrap();
        }
        // Stale fence first, then full.
        let stale = Fence::new(id("s"), 0);
        assert_eq!(
            s.bind(&stale, 9, &id("x")).unwrap_err().kind(),
            ErrorKind::FenceMismatch
        );
        assert_eq!(
            s.bind(&fence(), 9, &id("x")).unwrap_err().kind(),
            ErrorKind::Full
        );
        // Re-binding a bound stage needs no new binding slot.
        s.bind(&fence(), 3, &id("x")).unwrap();
    }

    #[test]
    fn ids_filter_by_exact_fence_and_are_unique() {
        let mut s = session_open();
        let later = fence().with_turn(1);
        s.bind(&fence(), 0, &id("r")).unwrap();
        s.bind(&fence(), 1, &id("r")).unwrap();
        s.reserve(&later, 2, &id("q")).unwrap();
        assert_eq!(ids(s.resource_request_ids(None, None)), ["r", "q"]);
        assert_eq!(
            ids(s.stage_request_ids(None)),
            ["r", "r"],
            "one per stage, as the seed"
        );
        assert_eq!(ids(s.resource_request_ids(Some(&later), None)), ["q"]);
        assert_eq!(
            ids(s.resource_request_ids(Some(&Fence::new(id("s"), 7)), None)),
            Vec::<&str>::new()
        );
    }

    #[test]
    fn release_fence_ignores_other_identities() {
        let mut s = session_open();
        s.bind(&fence(), 0, &id("r")).unwrap();
        assert!(s.release_fence(&Fence::new(id("other"), 1)).is_empty());
        assert_eq!(s.release_fence(&fence()).as_slice(), [id("r")]);
    }

    #[test]
    fn a_late_cancel_never_moves_the_session_backwards() {
        let mut s = session_open();
        let e1 = fence().with_epoch(1);
        let e2 = fence().with_epoch(2);
        s.bind(&e1, 0, &id("r1")).unwrap();
        s.accept_fence(&e2).unwrap();
        // Cancel e1 -> e2 arrives after e2: releases e1's requests only.
        assert_eq!(s.cancel(&e1, &e2).unwrap().as_slice(), [id("r1")]);
        assert_eq!(s.fence(), &e2);
        // A cancel of a fence ahead of the session is refused.
        let ahead = fence().with_epoch(3);
        let err = s.cancel(&ahead, &fence().with_epoch(4)).unwrap_err();
        assert!(matches!(
            err,
            Error::FenceMismatch {
                rule: FenceRule::Ahead,
                ..
            }
        ));
        // next must advance past the cancelled epoch.
        let err = s.cancel(&e2, &e2).unwrap_err();
        assert!(matches!(
            err,
            Error::FenceMismatch {
                rule: FenceRule::NotAdvancing,
                ..
            }
        ));
    }
}

mod completed {
    use super::*;

    #[test]
    fn recording_replaces_moves_to_newest_and_evicts_at_the_limit() {
        let mut s = session_open(); // limit 2
        s.record_completed(&fence(), &id("a"), AUDIO, Finality::Partial, &[1])
            .unwrap();
        s.record_completed(&fence(), &id("b"), AUDIO, Finality::Partial, &[2])
            .unwrap();
        s.record_completed(&fence(), &id("a"), AUDIO, Finality::Final, &[3])
            .unwrap();
        assert_eq!(ids(s.completed_operations()), ["b", "a"]);
        s.record_completed(&fence(), &id("c"), AUDIO, Finality::Partial, &[])
            .unwrap();
        assert_eq!(ids(s.completed_operations()), ["a", "c"]);
        assert_eq!(
            s.completed(&fence(), &id("a"), AUDIO, Finality::Final)
                .unwrap(),
            Some(&[3][..])
        );
    }

    #[test]
    fn a_record_under_another_fence_reads_as_reuse() {
        let mut s = session_open();
        // Recording does not validate; looking up does, and compares the whole fence.
        s.record_completed(
            &Fence::new(id("other"), 1),
            &id("a"),
            AUDIO,
            Finality::Partial,
            &[],
        )
        .unwrap();
        s.record_completed(
            &fence().with_turn(1),
            &id("b"),
            AUDIO,
            Finality::Partial,
            &[],
        )
        .unwrap();
        assert_eq!(
            s.completed(&fence(), &id("a"), AUDIO, Finality::Partial),
            Err(Error::OperationReused)
        );
        assert_eq!(
            s.completed(&fence(), &id("b"), AUDIO, Finality::Partial),
            Err(Error::OperationReused)
        );
    }

    #[test]
    fn too_many_stage_results_is_full_and_changes_nothing() {
        let mut s = session_open();
        let err = s
            .record_completed(
                &fence(),
                &id("a"),
                AUDIO,
                Finality::Partial,
                &[1, 2, 3, 4, 5],
            )
            .unwrap_err();
        assert_eq!(
            err,
            Error::Full {
                table: Table::StageResults,
                capacity: 4
            }
        );
        assert_eq!(s.completed_operations().count(), 0);
    }
}

mod detached {
    use super::*;

    #[test]
    fn grace_expiry_comes_before_idle_expiry() {
        let s = session_detached();
        assert_eq!(s.deadline(), Some(at(2_100)));
        assert_eq!(s.due(at(2_099)), None);
        assert_eq!(s.due(at(2_100)), Some(CloseReason::DisconnectGraceExpired));
        assert_eq!(s.due(at(20_000)), Some(CloseReason::DisconnectGraceExpired));
    }

    #[test]
    fn engine_work_may_finish_while_detached() {
        let mut s = session_detached();
        s.bind(&fence(), 0, &id("llm")).unwrap();
        s.touch(&fence(), Activity::ModelOutput, at(200)).unwrap();
        assert_eq!(s.last_activity(), at(200));
        assert_eq!(s.state().since(), at(100));
    }

    #[test]
    fn a_refused_resume_gives_the_session_back_unchanged() {
        let s = session_detached();
        let rejected = s.resume(&fence(), 3, at(500)).unwrap_err();
        assert_eq!(
            rejected.error,
            Error::GenerationMismatch {
                expected: 0,
                actual: 3
            }
        );
        let s = rejected.session;
        assert_eq!((s.lease_generation(), s.last_activity()), (0, at(100)));
        let (open, generation) = s.resume(&fence(), 0, at(500)).unwrap();
        assert_eq!((generation, open.deadline()), (1, Some(at(10_500))));
    }

    #[test]
    fn a_resume_asked_again_changes_nothing_and_only_the_last_one_counts() {
        let (a, b) = (id("ctl-a"), id("ctl-b"));
        let mut s = AnySession::from(session_detached());
        assert_eq!(s.resume_idempotent(&fence(), 0, &a, at(200)), Ok(1));
        s.detach(&fence(), at(300)).unwrap();
        // Asked again, whatever generation it names: the first answer, and
        // the session stays detached with its activity.
        for expected in [0, 1, 9] {
            assert_eq!(s.resume_idempotent(&fence(), expected, &a, at(400)), Ok(1));
        }
        assert_eq!(
            (s.kind(), s.as_detached().map(Session::last_activity)),
            (StateKind::Detached, Some(at(300)))
        );
        // Asked again with a stale fence: refused as any call is.
        let stale = Fence::new(id("s"), 0);
        assert_eq!(
            s.resume_idempotent(&stale, 0, &a, at(400))
                .map_err(|e| e.kind()),
            Err(ErrorKind::FenceMismatch)
        );
        // Another resume moves on and replaces the control id; so does a
        // resume without one.
        assert_eq!(s.resume_idempotent(&fence(), 1, &b, at(500)), Ok(2));
        assert_eq!(
            s.resume_idempotent(&fence(), 1, &a, at(500))
                .map_err(|e| e.kind()),
            Err(ErrorKind::GenerationMismatch)
        );
        assert_eq!(s.resume(&fence(), 2, at(600)), Ok(3));
        assert_eq!(s.resumed_by(), None);
        assert_eq!(
            s.resume_idempotent(&fence(), 2, &b, at(600))
                .map_err(|e| e.kind()),
            Err(ErrorKind::GenerationMismatch)
        );
        // A close forgets it.
        s.resume_idempotent(&fence(), 3, &a, at(700)).unwrap();
        s.begin_close(&fence(), CloseReason::ClientClose).unwrap();
        assert_eq!(s.resumed_by(), None);
        assert_eq!(
            s.resume_idempotent(&fence(), 4, &a, at(800))
                .map_err(|e| e.kind()),
            Err(ErrorKind::WrongState)
        );
    }
}

mod closing {
    use super::*;

    #[test]
    fn closing_keeps_resources_and_clears_operations_and_detach() {
        let s = session_closing();
        assert_eq!(s.lease_generation(), 1);
        assert_eq!(ids(s.resource_request_ids(None, None)), ["llm", "voc"]);
        assert_eq!(s.active_operations().count(), 0);
        assert_eq!(s.state().reason(), CloseReason::ClientClose);
    }

    #[test]
    fn begin_close_again_accepts_a_newer_fence_and_keeps_the_first_reason() {
        let s = session_closing()
            .begin_close(&fence().with_epoch(1), CloseReason::RequestCleanup)
            .unwrap();
        assert_eq!(s.fence().epoch, 1);
        assert_eq!(s.state().reason(), CloseReason::ClientClose);
        let rejected = s
            .begin_close(&fence(), CloseReason::ExplicitClose)
            .unwrap_err();
        assert_eq!(rejected.error.kind(), ErrorKind::FenceMismatch);
        let s = rejected.session;
        assert_eq!(s.fence().epoch, 1, "a refused close changes nothing");
        assert_eq!(s.lease_generation(), 1, "closing bumps the generation once");
    }

    #[test]
    fn release_still_works_and_finalize_returns_the_rest() {
        let mut s = session_closing();
        s.release(&[id("voc")]);
        let (closed, released) = s.finalize();
        assert_eq!(released.as_slice(), [id("llm")]);
        assert_eq!(closed.close_reason(), CloseReason::ClientClose);
        assert_eq!(closed.fence(), &fence());
    }
}

mod migrate {
    use super::*;

    #[test]
    fn a_detached_session_moves_with_its_facts_and_a_fresh_grace() {
        let mut s = session_detached();
        s.bind(&fence(), 0, &id("llm")).unwrap();
        let mut any = AnySession::from(s);
        let new = any.migrate(2, at(50_000)).unwrap().clone();
        assert_eq!(new, Fence::new(id("s"), 2));
        let d = any.as_detached().unwrap();
        // Times are the new owner's: the grace counts from the migration.
        assert_eq!(d.state().since(), at(50_000));
        assert_eq!(d.deadline(), Some(at(52_000)));
        assert_eq!(ids(d.resource_request_ids(None, None)), ["llm"]);
        // The old owner's fence is now another identity; the new one resumes.
        let refused = any.resume(&fence(), 0, at(50_001)).unwrap_err();
        assert!(matches!(
            refused,
            Error::FenceMismatch {
                rule: FenceRule::Identity,
                ..
            }
        ));
        assert_eq!(any.kind(), StateKind::Detached);
        let generation = any.resume(&new, 0, at(50_001)).unwrap();
        assert_eq!((any.kind(), generation), (StateKind::Open, 1));
    }

    #[test]
    fn a_refused_migration_changes_nothing() {
        let mut any = AnySession::from(session_open());
        let err = any.migrate(1, at(9)).unwrap_err();
        assert_eq!(
            err,
            Error::FenceMismatch {
                rule: FenceRule::Migration,
                expected: fence().stamp(),
                actual: fence().stamp(),
            }
        );
        assert_eq!(any.fence(), &fence());
        assert_eq!(any.as_open().unwrap().last_activity(), at(0));
    }

    #[test]
    fn closing_migrates_and_closed_is_refused() {
        let mut any = AnySession::from(session_closing());
        assert_eq!(any.migrate(5, at(1)).unwrap().incarnation, 5);
        assert_eq!(any.kind(), StateKind::Closing);
        let released = any.finalize().unwrap();
        assert_eq!(released.len(), 2);
        assert_eq!(
            any.migrate(6, at(2)).unwrap_err().kind(),
            ErrorKind::WrongState
        );
    }
}
