//! The simulator at small sizes: clean under every fault, every fault
//! actually exercised, and runs replayable from their seed.

use duplex_sim::{run, Fault, Faults, Report, SimConfig};

fn small(seed: u64, faults: Faults) -> SimConfig {
    SimConfig {
        seed,
        sessions: 120,
        max_sessions: 100,
        duration_s: 30,
        faults,
        threads: 1,
    }
}

#[track_caller]
fn assert_clean(r: &Report) {
    assert!(
        r.is_clean(),
        "violations {} leaked {}: {:?}",
        r.violations,
        r.leaked,
        r.first_violation
    );
}

#[test]
fn all_faults_run_clean_across_seeds() {
    for seed in 1..=4 {
        let r = run(&small(seed, Faults::ALL), |_, _| {});
        assert_clean(&r);
        assert!(
            r.appends > 10_000 && r.sessions > 100 && r.requests > 500,
            "{r:?}"
        );
    }
}

#[test]
fn every_fault_is_exercised_on_its_own() {
    for fault in Fault::ALL {
        let faults: Faults = fault.name().parse().expect("fault names parse");
        let r = run(&small(7, faults), |_, _| {});
        assert_clean(&r);
        let evidence = match fault {
            Fault::Duplicate => r.duplicates,
            Fault::LateAppend | Fault::ReorderedCancel | Fault::StaleResume | Fault::Takeover => {
                r.stale_rejected
            }
            Fault::ReplayedResume => r.replayed_resumes,
            Fault::Vanish => r.expired,
            Fault::Burst => r.admission_refused,
            Fault::CleanupFailure => r.request_cleanups.min(r.cleanup_retries),
            Fault::BudgetFlood => r.floods_refused,
            Fault::OverlapBurst => r.overlap_barge_ins.min(r.overlaps),
            Fault::Drain => r.drained.min(r.late_outputs),
        };
        assert!(evidence > 0, "fault {} left no trace: {r:?}", fault.name());
    }
}

#[test]
fn without_faults_nothing_stale_or_duplicated_happens() {
    let r = run(&small(3, Faults::NONE), |_, _| {});
    assert_clean(&r);
    assert_eq!(
        (
            r.duplicates,
            r.stale_rejected,
            r.request_cleanups,
            r.replayed_resumes,
            r.floods_refused,
            r.overlaps
        ),
        (0, 0, 0, 0, 0, 0)
    );
}

#[test]
fn a_seed_replays_the_same_run() {
    let strip = |mut r: Report| {
        r.wall_s = 0.0;
        r
    };
    let a = strip(run(&small(11, Faults::ALL), |_, _| {}));
    let b = strip(run(&small(11, Faults::ALL), |_, _| {}));
    let c = strip(run(&small(12, Faults::ALL), |_, _| {}));
    assert_eq!(a, b);
    assert_ne!(a, c);
}

#[test]
fn the_summary_line_has_the_documented_shape() {
    let r = run(&small(1, Faults::ALL), |_, _| {});
    let line = r.summary_line();
    let keys: Vec<&str> = line
        .trim_start_matches("sim: ")
        .split(' ')
        .map(|kv| kv.split('=').next().unwrap_or(""))
        .collect();
    assert_eq!(
        keys,
        [
            "sessions",
            "appends",
            "duplicates",
            "stale_rejected",
            "expired",
            "leaked",
            "violations",
            "ops_per_s"
        ]
    );
}

#[test]
fn threads_drive_one_shared_manager_under_every_rule() {
    for threads in [2, 3] {
        let config = SimConfig {
            threads,
            ..small(7, Faults::ALL)
        };
        let r = run(&config, |_, _| {});
        assert_clean(&r);
        assert!(
            r.appends > 1_000 && r.expired > 0 && r.duplicates > 0,
            "{r:?}"
        );
        assert!(r.summary_line().starts_with("sim: sessions="));
    }
}
