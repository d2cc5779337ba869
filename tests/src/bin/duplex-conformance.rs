//! Runs conformance traces: `duplex-conformance PATH...` (trace files or
//! folders of `*.jsonl`). Prints every failing line with file, line number,
//! op, expected and actual; the last line is `N passed, M failed` (traces).
//! Exits non-zero if any trace fails or cannot be read.

use std::path::PathBuf;
use std::process::ExitCode;

use duplex_tests::conformance::{run_files, trace_files};

fn main() -> ExitCode {
    let paths: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    if paths.is_empty() {
        eprintln!("usage: duplex-conformance PATH... (trace files or folders of *.jsonl)");
        return ExitCode::from(2);
    }
    let files = match trace_files(&paths) {
        Ok(files) => files,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let mut stdout = std::io::stdout();
    match run_files(&files, &mut stdout) {
        Ok((passed, failed)) => {
            println!("{passed} passed, {failed} failed");
            if failed == 0 && passed > 0 {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
