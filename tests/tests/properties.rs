//! Property tests: random operation sequences against the std manager, the
//! invariants of `duplex_tests::model` checked after every step.
//!
//! Operations address sessions by index and fences relative to the
//! session's current fence, and ids come from small sets, so a shrunk
//! failure reads as a short script.

use duplex_tests::model::{run, Op, Rel, SESSIONS};
use proptest::prelude::*;

fn rel() -> impl Strategy<Value = Rel> {
    let small = prop_oneof![6 => Just(0i64), 3 => Just(1i64), 1 => Just(-1i64)];
    let inc = prop_oneof![12 => Just(0i64), 1 => Just(1i64), 1 => Just(-1i64)];
    (inc, small.clone(), small.clone(), small).prop_map(|(incarnation, epoch, turn, response)| {
        Rel {
            incarnation,
            epoch,
            turn,
            response,
        }
    })
}

/// Ids from a small set, now and then empty or over the 32-byte limit.
fn text(prefix: &'static str) -> impl Strategy<Value = String> {
    prop_oneof![
        30 => (0u8..6).prop_map(move |i| format!("{prefix}{i}")),
        1 => Just(String::new()),
        1 => Just("x".repeat(33)),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let s = 0..SESSIONS.len();
    let mode = prop_oneof![Just(0u8), Just(1u8), Just(5u8)];
    prop_oneof![
        4 => (s.clone(), 0u64..3, 1u8..64, prop::option::weighted(0.8, 1u64..5_000), 1u64..3_000)
            .prop_map(|(s, incarnation, modes, ttl, grace)| Op::Open { s, incarnation, modes, ttl, grace }),
        3 => (0u64..4_000).prop_map(|ms| Op::Advance { ms }),
        3 => (s.clone(), rel(), 0u8..8).prop_map(|(s, f, activity)| Op::Touch { s, f, activity }),
        2 => (s.clone(), rel()).prop_map(|(s, f)| Op::Detach { s, f }),
        2 => (s.clone(), rel(), -1i64..2).prop_map(|(s, f, generation_delta)| Op::Resume { s, f, generation_delta }),
        2 => (s.clone(), rel(), -1i64..2, text("ctl")).prop_map(|(s, f, generation_delta, control)| Op::ResumeBy { s, f, generation_delta, control }),
        2 => (s.clone(), rel(), text("op")).prop_map(|(s, f, op)| Op::BeginOp { s, f, op }),
        2 => (s.clone(), rel(), text("op")).prop_map(|(s, f, op)| Op::EndOp { s, f, op }),
        6 => (s.clone(), rel(), mode.clone()).prop_map(|(s, f, mode)| Op::Append { s, f, mode }),
        3 => (s.clone(), rel(), mode.clone()).prop_map(|(s, f, mode)| Op::Prepare { s, f, mode }),
        3 => (0usize..8).prop_map(|handle| Op::Commit { handle }),
        2 => (s.clone(), rel(), text("c"), mode.clone(), any::<bool>())
            .prop_map(|(s, f, op, mode, final_)| Op::Completed { s, f, op, mode, final_ }),
        3 => (s.clone(), rel(), text("c"), mode, any::<bool>(), prop::collection::vec(0i64..100, 0..6))
            .prop_map(|(s, f, op, mode, final_, results)| Op::Record { s, f, op, mode, final_, results }),
        4 => (s.clone(), rel(), 0u32..6, text("r")).prop_map(|(s, f, stage, request)| Op::Reserve { s, f, stage, request }),
        5 => (s.clone(), rel(), 0u32..6, text("r")).prop_map(|(s, f, stage, request)| Op::Bind { s, f, stage, request }),
        2 => (s.clone(), prop::collection::vec(text("r"), 0..4)).prop_map(|(s, requests)| Op::Release { s, requests }),
        2 => (s.clone(), rel()).prop_map(|(s, f)| Op::ReleaseFence { s, f }),
        2 => (s.clone(), rel()).prop_map(|(s, f)| Op::Accept { s, f }),
        // Mostly from the current fence, where the requests are bound.
        3 => (s.clone(), prop_oneof![3 => Just(Rel::CURRENT), 1 => rel()], 0i64..2, 0i64..2, any::<u8>())
            .prop_map(|(s, f, epoch, turn, keep)| Op::Drain {
            s,
            f,
            next: Rel { epoch, turn, ..Rel::CURRENT },
            keep,
        }),
        2 => s.clone().prop_map(|s| Op::ReleaseDrained { s }),
        3 => (s.clone(), rel(), 0i64..3).prop_map(|(s, f, epochs)| Op::Cancel {
            s,
            f,
            next: Rel { epoch: epochs, ..Rel::CURRENT },
        }),
        1 => (s.clone(), prop::option::of(0u8..3), prop::option::of(0u8..3))
            .prop_map(|(s, session, runtime)| Op::ReplaceConfigs { s, session, runtime }),
        1 => (s.clone(), rel(), 0u8..5).prop_map(|(s, f, reason)| Op::BeginClose { s, f, reason }),
        1 => (s.clone(), rel(), 0u8..5).prop_map(|(s, f, reason)| Op::Close { s, f, reason }),
        1 => s.clone().prop_map(|s| Op::Finalize { s }),
        3 => prop::option::of(s.clone()).prop_map(|excluded| Op::CollectExpired { excluded }),
        1 => prop::collection::vec(text("r"), 1..3).prop_map(|requests| Op::CloseForRequests { requests }),
        1 => prop::collection::vec(s.clone(), 1..4).prop_map(|sessions| Op::FinalizeClosed { sessions }),
        1 => (s.clone(), 0u8..3).prop_map(|(s, skip)| Op::Migrate { s, skip }),
        3 => (s.clone(), rel(), 0u16..700).prop_map(|(s, f, bytes)| Op::ReserveInput { s, f, bytes }),
        2 => (s.clone(), rel()).prop_map(|(s, f)| Op::ReserveTurn { s, f }),
        2 => (s.clone(), 0u16..700).prop_map(|(s, bytes)| Op::ReleaseInput { s, bytes }),
        2 => s.clone().prop_map(|s| Op::ReleaseTurn { s }),
        1 => (s.clone(), any::<bool>()).prop_map(|(s, turns_too)| Op::DropInput { s, turns_too }),
        3 => (s.clone(), rel(), 0u16..700, any::<bool>(), 0u8..10)
            .prop_map(|(s, f, ms, speech, request)| Op::DecideOverlap { s, f, ms, speech, request }),
        1 => s.clone().prop_map(|s| Op::ResetOverlap { s }),
        3 => (s, rel(), 0u8..24, text("op")).prop_map(|(s, f, what, op)| Op::Keyed { s, f, what, op }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn invariants_hold_after_every_step(ops in prop::collection::vec(op(), 1..160)) {
        run(&ops).map_err(TestCaseError::fail)?;
    }
}

/// Found by the `manager_ops` fuzzer: at the top incarnation there is none
/// to migrate to, and the session (with its request) stays where it is.
#[test]
fn a_session_at_the_top_incarnation_is_not_migrated() {
    let ops = [
        Op::Open {
            s: 1,
            incarnation: u64::MAX,
            modes: 0xFF,
            ttl: None,
            grace: 1_000,
        },
        Op::Reserve {
            s: 1,
            f: Rel::CURRENT,
            stage: 2,
            request: "r".into(),
        },
        Op::Migrate { s: 1, skip: 2 },
        Op::Migrate { s: 2, skip: 0 },
    ];
    run(&ops).expect("invariants hold");
}

/// A barge-in that lets the speaker's stage drain: its request stays,
/// stale, and is released once, by `release_drained`.
#[test]
fn a_drain_keeps_the_stages_it_names_until_released() {
    let bind = |stage: u32, request: &str| Op::Bind {
        s: 0,
        f: Rel::CURRENT,
        stage,
        request: request.into(),
    };
    let ops = [
        Op::Open {
            s: 0,
            incarnation: 0,
            modes: 0xFF,
            ttl: None,
            grace: 1_000,
        },
        bind(1, "llm"),
        bind(2, "tts"),
        Op::Drain {
            s: 0,
            f: Rel::CURRENT,
            next: Rel {
                epoch: 1,
                ..Rel::CURRENT
            },
            keep: 0b100,
        },
        bind(2, "tts-next"),
        Op::ReleaseDrained { s: 0 },
        Op::ReleaseDrained { s: 0 },
    ];
    run(&ops).expect("every invariant holds");
}
