//! Runs every committed conformance trace (tests/conformance/traces) through
//! the std manager; fails with the runner's report if any line differs.

use std::path::PathBuf;

use duplex_tests::conformance::{run_files, run_trace, trace_files};

/// Runs `files` and fails with the runner's report if any trace fails.
fn all_pass(files: &[PathBuf]) {
    let mut report = Vec::new();
    let (passed, failed) = run_files(files, &mut report).expect("traces are readable");
    assert_eq!(
        failed,
        0,
        "{failed} of {} traces failed:\n{}",
        passed + failed,
        String::from_utf8_lossy(&report)
    );
}

/// The public sample, and beside it the extension traces
/// (`tests/conformance/FORMAT.md`, "Extensions"): input budgets, overlap
/// decisions and named resumes, their expectations from vllm-omni 0.30.0's
/// own session code.
#[test]
fn committed_traces_pass() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("conformance/traces");
    let files = trace_files(&[dir]).expect("trace folder is readable");
    let extensions = files
        .iter()
        .filter(|f| {
            f.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("extensions-"))
        })
        .count();
    assert!(
        files.len() - extensions >= 44 && extensions >= 8,
        "expected the public sample and the extension traces, found {} and {extensions}",
        files.len() - extensions
    );
    all_pass(&files);
}

#[test]
fn a_wrong_expectation_is_reported_with_its_line() {
    let trace = concat!(
        r#"{"op":"manager","expect":{"ok":null}}"#,
        "\n",
        r#"{"op":"open","fence":{"session":"s","incarnation":0,"epoch":0,"turn":0,"response":0},"expect":{"ok":null}}"#,
        "\n",
        r#"{"op":"detach","fence":{"session":"s","incarnation":0,"epoch":0,"turn":0,"response":0},"expect":{"error":"wrong_state"}}"#,
    );
    let failures = run_trace(trace);
    assert_eq!(failures.len(), 1);
    assert_eq!((failures[0].line, failures[0].op.as_str()), (3, "detach"));
    assert_eq!(failures[0].actual, r#"{"ok":null}"#);
}

#[test]
fn malformed_lines_fail_without_panicking() {
    for line in [
        "not json",
        "[1,2]",
        r#"{"op":"nonsense","expect":{"ok":null}}"#,
        r#"{"op":"append","fence":{"session":"s"},"mode":"yodel","expect":{"ok":null}}"#,
        r#"{"op":"commit_append","handle":"never-made","expect":{"ok":null}}"#,
        r#"{"op":"profile","max_resources":9,"max_bindings":4,"max_completed":8,"max_active_ops":4,"max_id_len":32,"max_stage_results":4}"#,
        r#"{"op":"advance","ms":-5,"expect":{"ok":null}}"#,
    ] {
        let failures = run_trace(line);
        assert_eq!(failures.len(), 1, "line {line:?} should fail once");
    }
}
