//! Every decision over every combination of its facts: each rule of the
//! cluster stated once as an assertion over all of them, then the named
//! cases the cluster's history taught.

use std::time::Duration;

use super::*;

const ME: &str = "node-a";
const OTHER: &str = "node-b";

/// Every record a decision can read: none, or this node's or another's at
/// incarnations 1 to 3.
fn records() -> Vec<Option<Seen<'static>>> {
    let mut all = vec![None];
    for node in [ME, OTHER] {
        for incarnation in 1..=3 {
            all.push(Some(Seen { node, incarnation }));
        }
    }
    all
}

/// Every local state: no copy or a copy at incarnations 1 to 3, each with
/// and without a shadow, closing, claiming.
fn helds() -> Vec<Held> {
    let mut all = Vec::new();
    for incarnation in [None, Some(1), Some(2), Some(3)] {
        for bits in 0..8u8 {
            all.push(Held {
                incarnation,
                shadow: bits & 1 != 0,
                closing: bits & 2 != 0,
                claiming: bits & 4 != 0,
            });
        }
    }
    all
}

fn every_resume() -> impl Iterator<Item = (Option<Seen<'static>>, Held, ResumeStep)> {
    records().into_iter().flat_map(|record| {
        helds()
            .into_iter()
            .map(move |held| (record, held, resume(record, ME, held)))
    })
}

#[test]
fn a_copy_newer_than_the_store_is_written_back_whatever_else_holds() {
    let mut seen = 0;
    for (record, held, step) in every_resume() {
        let newer = match (record, held.incarnation) {
            (None, Some(_)) => true,
            (Some(r), Some(inc)) => inc > r.incarnation,
            (_, None) => false,
        };
        assert_eq!(
            step == ResumeStep::WriteBack,
            newer,
            "{record:?} {held:?} -> {step:?}"
        );
        seen += usize::from(newer);
    }
    assert!(seen > 0);
}

#[test]
fn a_session_neither_side_has_is_unknown() {
    for (record, held, step) in every_resume() {
        assert_eq!(
            step == ResumeStep::Unknown,
            record.is_none() && held.incarnation.is_none(),
            "{record:?} {held:?} -> {step:?}"
        );
    }
}

#[test]
fn a_session_resumes_here_only_when_this_node_holds_the_stored_incarnation() {
    for (record, held, step) in every_resume() {
        let current_here =
            record.is_some_and(|r| r.node == ME && held.incarnation == Some(r.incarnation));
        assert_eq!(
            matches!(step, ResumeStep::Here { .. }),
            current_here,
            "{record:?} {held:?} -> {step:?}"
        );
        if let ResumeStep::Here { load_shadow } = step {
            assert_eq!(load_shadow, !held.shadow, "{held:?}");
        }
    }
}

#[test]
fn a_session_closing_here_is_never_revived_from_its_record() {
    for (record, held, step) in every_resume() {
        if let Some(r) = record {
            if r.node == ME && held.closing && held.incarnation.is_none() {
                assert_eq!(step, ResumeStep::Refuse, "{record:?} {held:?}");
            }
        }
        if step == ResumeStep::Refuse {
            assert!(held.closing && held.incarnation.is_none(), "{held:?}");
            assert_eq!(record.map(|r| r.node), Some(ME));
        }
    }
}

#[test]
fn a_takeover_never_runs_beside_another_one_here() {
    for (record, held, step) in every_resume() {
        if held.claiming {
            assert!(
                !matches!(step, ResumeStep::TakeOver { .. }),
                "{record:?} {held:?} -> {step:?}"
            );
        }
        if step == ResumeStep::Wait {
            assert!(held.claiming);
        }
    }
}

#[test]
fn a_takeover_reads_a_record_no_older_than_the_copy_and_drops_the_copy_first() {
    let mut taken = 0;
    for (record, held, step) in every_resume() {
        if let ResumeStep::TakeOver { drop_local } = step {
            taken += 1;
            let r = record.expect("a takeover has a record to take over from");
            assert!(held.incarnation.is_none_or(|inc| inc <= r.incarnation));
            assert_eq!(drop_local, held.incarnation.is_some(), "{held:?}");
            assert!(!held.claiming);
        }
    }
    assert!(taken > 0);
}

#[test]
fn named_resumes() {
    let rec = |node, incarnation| Some(Seen { node, incarnation });
    let held = |incarnation| Held {
        incarnation,
        ..Held::default()
    };
    // The store failed over to a replica that missed this node's takeover.
    assert_eq!(
        resume(rec(OTHER, 1), ME, held(Some(2))),
        ResumeStep::WriteBack
    );
    // The store restarted empty under a node that holds the session.
    assert_eq!(resume(None, ME, held(Some(1))), ResumeStep::WriteBack);
    // A client back on the node that owns its session.
    assert_eq!(
        resume(
            rec(ME, 2),
            ME,
            Held {
                shadow: true,
                ..held(Some(2))
            }
        ),
        ResumeStep::Here { load_shadow: false }
    );
    // A takeover whose answer was lost: held here, no shadow yet.
    assert_eq!(
        resume(rec(ME, 2), ME, held(Some(2))),
        ResumeStep::Here { load_shadow: true }
    );
    // A client moving to this node from another.
    assert_eq!(
        resume(rec(OTHER, 2), ME, held(None)),
        ResumeStep::TakeOver { drop_local: false }
    );
    // A copy left here by an earlier move away, the record moved on.
    assert_eq!(
        resume(rec(OTHER, 3), ME, held(Some(1))),
        ResumeStep::TakeOver { drop_local: true }
    );
    // Expired here, the close not stored yet.
    assert_eq!(
        resume(
            rec(ME, 2),
            ME,
            Held {
                closing: true,
                ..held(None)
            }
        ),
        ResumeStep::Refuse
    );
    // Two resumes of one session racing on this node.
    assert_eq!(
        resume(
            rec(OTHER, 2),
            ME,
            Held {
                claiming: true,
                ..held(None)
            }
        ),
        ResumeStep::Wait
    );
}

#[test]
fn a_token_is_current_newer_or_wrong_by_the_generation_it_resumes() {
    for stored in [0, 1, 5, u64::MAX - 2, u64::MAX] {
        for resumes in [
            None,
            Some(0),
            Some(stored),
            Some(stored.saturating_add(1)),
            Some(stored.saturating_add(8)),
            Some(stored.saturating_add(9)),
        ] {
            let verdict = token(stored, 8, |g| Some(g) == resumes);
            let expected = match resumes {
                Some(g) if g == stored => Token::Current,
                Some(g) if g > stored && g - stored <= 8 => Token::Newer,
                _ => Token::Wrong,
            };
            assert_eq!(verdict, expected, "stored {stored}, token for {resumes:?}");
        }
    }
    // No lookahead: only the stored generation.
    assert_eq!(token(3, 0, |g| g == 4), Token::Wrong);
}

#[test]
fn the_loss_window_waits_then_asks_then_refuses() {
    let grace = Duration::from_secs(30);
    let ttl = Duration::from_secs(4);
    let at = Duration::from_millis;
    assert_eq!(loss_window(None, grace, ttl), Some(Refusal::Refused));
    for ms in [0, 1, 1_999] {
        assert_eq!(
            loss_window(Some(at(ms)), grace, ttl),
            Some(Refusal::Unavailable),
            "{ms} ms"
        );
    }
    for ms in [2_000, 10_000, 38_000] {
        assert_eq!(loss_window(Some(at(ms)), grace, ttl), None, "{ms} ms");
    }
    for ms in [38_001, 3_600_000] {
        assert_eq!(
            loss_window(Some(at(ms)), grace, ttl),
            Some(Refusal::Refused),
            "{ms} ms"
        );
    }
    assert_eq!(after_nodes(true), Refusal::Unavailable);
    assert_eq!(after_nodes(false), Refusal::StateLost);
}

#[test]
fn a_newer_token_is_state_lost_unless_the_store_is_still_being_repaired() {
    assert_eq!(newer_token(Refusal::Refused), Refusal::StateLost);
    for other in [Refusal::Unavailable, Refusal::StateLost, Refusal::Full] {
        assert_eq!(newer_token(other), other);
    }
}

#[test]
fn adoption_takes_only_what_the_dead_node_still_owns_and_nobody_here_holds() {
    for record in records() {
        for held_here in [false, true] {
            let step = adopt(record, OTHER, held_here);
            let expected = match record {
                Some(r) if r.node == OTHER && held_here => AdoptStep::Later,
                Some(r) if r.node == OTHER => AdoptStep::TakeOver,
                _ => AdoptStep::Settled,
            };
            assert_eq!(step, expected, "{record:?} held_here={held_here}");
        }
    }
}

#[test]
fn a_copy_without_its_log_is_vouched_for_only_by_the_store() {
    for record in records() {
        for incarnation in 1..=3 {
            assert_eq!(
                vouch(record, ME, incarnation),
                record
                    == Some(Seen {
                        node: ME,
                        incarnation
                    }),
                "{record:?} at {incarnation}"
            );
        }
    }
}

#[test]
fn a_refused_save_is_told_by_its_kind() {
    let session = "s".to_owned();
    let cases = [
        (
            DirectoryError::Missing {
                session: session.clone(),
            },
            SaveFailure::StoreLost,
        ),
        (
            DirectoryError::Behind {
                session: session.clone(),
                holds: 1,
                expected: 2,
            },
            SaveFailure::StoreLost,
        ),
        (
            DirectoryError::Redis(redis::RedisError::from((
                redis::ErrorKind::Io,
                "connection reset",
            ))),
            SaveFailure::Unanswered,
        ),
        (
            DirectoryError::Lost {
                session: session.clone(),
                incarnation: 1,
            },
            SaveFailure::Refused,
        ),
    ];
    for (error, expected) in cases {
        assert_eq!(save_failure(&error), expected, "{error}");
    }
}

#[test]
fn a_copy_is_stale_only_behind_the_notice() {
    for notice in 0..=3 {
        assert!(!moved_away(None, notice));
        for local in 0..=3 {
            assert_eq!(moved_away(Some(local), notice), local < notice);
        }
    }
}
