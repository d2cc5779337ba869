//! `duplex-sim`: the load-and-fault simulator. Many simulated voice clients
//! against one `SessionManager`, in seeded virtual time, with a checker that
//! verifies the session rules at every step. Exit code 1 on any violation or
//! leak, with the first violating step printed so it can be replayed.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use duplex_sim::{run, Faults, Report, SimConfig};
use indicatif::{ProgressBar, ProgressStyle};

/// Simulate many full-duplex voice clients against one session manager,
/// inject faults, and check every session rule.
#[derive(Debug, Parser)]
#[command(name = "duplex-sim", version)]
struct Args {
    /// RNG seed; the same seed replays the same run.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Number of simulated clients.
    #[arg(long, default_value_t = 2_000)]
    sessions: usize,
    /// The manager's admission limit (sessions, closing ones included).
    #[arg(long, default_value_t = 1_800, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    max_sessions: usize,
    /// Virtual duration in seconds (20 ms per step).
    #[arg(long, default_value_t = 120)]
    duration_s: u64,
    /// Faults to inject: none, all, or a comma-separated list of duplicate,
    /// late, reorder, stale-resume, replayed-resume, takeover, vanish, burst,
    /// cleanup-fail, flood.
    #[arg(long, default_value = "all")]
    faults: Faults,
    /// Worker threads: 1 drives one single-threaded manager (the same seed
    /// gives the same counts); more drive one shared manager from that many
    /// threads, with the same checks.
    #[arg(long, default_value_t = 1, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=256))]
    threads: usize,
    /// Print a machine-readable JSON report instead of the table.
    #[arg(long)]
    json: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let config = SimConfig {
        seed: args.seed,
        sessions: args.sessions,
        max_sessions: args.max_sessions,
        duration_s: args.duration_s,
        faults: args.faults,
        threads: args.threads,
    };
    let bar = if std::io::stderr().is_terminal() && !args.json {
        let bar = ProgressBar::new(1);
        bar.set_style(
            ProgressStyle::with_template(
                "{spinner} virtual {msg} [{bar:40}] {percent}% ({elapsed})",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        bar.enable_steady_tick(Duration::from_millis(200));
        bar
    } else {
        ProgressBar::hidden()
    };
    let report = run(&config, |step, total| {
        bar.set_length(total);
        bar.set_position(step);
        bar.set_message(format!("{}s", step * duplex_sim::STEP_MS / 1_000));
    });
    bar.finish_and_clear();
    if args.json {
        println!("{}", json(&config, &report));
    } else {
        print_table(&config, &report);
    }
    if let Some(v) = &report.first_violation {
        println!("first violation: {v}");
        println!(
            "replay: cargo run --release -p duplex-sim -- --seed {} --sessions {} --max-sessions {} --duration-s {} --faults {} --threads {}",
            config.seed, config.sessions, config.max_sessions, config.duration_s, config.faults, config.threads
        );
    }
    if !args.json {
        println!("{}", report.summary_line());
    }
    if report.is_clean() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn print_table(config: &SimConfig, r: &Report) {
    let rows: [(&str, String); 25] = [
        ("seed", config.seed.to_string()),
        ("clients", config.sessions.to_string()),
        ("max sessions", config.max_sessions.to_string()),
        (
            "virtual time",
            format!("{} s ({} steps of 20 ms)", config.duration_s, r.steps),
        ),
        ("faults", config.faults.to_string()),
        ("threads", config.threads.to_string()),
        ("sessions opened", r.sessions.to_string()),
        ("appends accepted", r.appends.to_string()),
        ("retries answered from cache", r.duplicates.to_string()),
        ("stale operations refused", r.stale_rejected.to_string()),
        ("barge-ins", r.barge_ins.to_string()),
        ("resumed within grace", r.resumed.to_string()),
        ("resumes asked again", r.replayed_resumes.to_string()),
        ("chunks refused (backpressure)", r.backpressure.to_string()),
        ("floods refused", r.floods_refused.to_string()),
        (
            "overlapping chunks (barge-ins)",
            format!("{} ({})", r.overlaps, r.overlap_barge_ins),
        ),
        (
            "drains (late outputs routed)",
            format!("{} ({})", r.drained, r.late_outputs),
        ),
        ("expired (reaped)", r.expired.to_string()),
        ("closed for request cleanup", r.request_cleanups.to_string()),
        ("cleanup retries", r.cleanup_retries.to_string()),
        ("admission refused", r.admission_refused.to_string()),
        (
            "request ids (leaked)",
            format!("{} ({})", r.requests, r.leaked),
        ),
        ("violations", r.violations.to_string()),
        ("manager operations", r.ops.to_string()),
        (
            "wall time",
            format!("{:.2} s ({} ops/s)", r.wall_s, r.ops_per_s()),
        ),
    ];
    let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    for (k, v) in rows {
        println!("{k:<width$}  {v}");
    }
}

fn json(config: &SimConfig, r: &Report) -> serde_json::Value {
    serde_json::json!({
        "seed": config.seed,
        "clients": config.sessions,
        "max_sessions": config.max_sessions,
        "duration_s": config.duration_s,
        "faults": config.faults.to_string(),
        "threads": config.threads,
        "steps": r.steps,
        "sessions": r.sessions,
        "appends": r.appends,
        "duplicates": r.duplicates,
        "stale_rejected": r.stale_rejected,
        "barge_ins": r.barge_ins,
        "resumed": r.resumed,
        "replayed_resumes": r.replayed_resumes,
        "backpressure": r.backpressure,
        "floods_refused": r.floods_refused,
        "overlaps": r.overlaps,
        "overlap_barge_ins": r.overlap_barge_ins,
        "drained": r.drained,
        "late_outputs": r.late_outputs,
        "expired": r.expired,
        "request_cleanups": r.request_cleanups,
        "cleanup_retries": r.cleanup_retries,
        "admission_refused": r.admission_refused,
        "requests": r.requests,
        "leaked": r.leaked,
        "violations": r.violations,
        "first_violation": r.first_violation.as_ref().map(|v| serde_json::json!({
            "seed": v.seed, "step": v.step, "session": v.session,
            "operation": v.operation, "expected": v.expected, "actual": v.actual,
        })),
        "ops": r.ops,
        "wall_s": r.wall_s,
        "ops_per_s": r.ops_per_s(),
    })
}
