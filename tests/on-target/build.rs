//! Puts the board's memory layout where cortex-m-rt's `link.x` looks for
//! `memory.x`: the micro:bit for thumbv6m (Cortex-M0), the Netduino Plus 2
//! for thumbv7em (Cortex-M4F). With the `defmt` feature, links defmt's
//! symbol table too.
use std::{env, fs, path::PathBuf};

fn main() {
    let target = env::var("TARGET").unwrap_or_default();
    let board = match target.as_str() {
        "thumbv6m-none-eabi" => Some("microbit"),
        "thumbv7em-none-eabihf" | "thumbv7em-none-eabi" => Some("netduinoplus2"),
        _ => None,
    };
    println!("cargo:rerun-if-changed=boards");
    println!("cargo:rerun-if-env-changed=DUPLEX_REPLAY_SCRIPT");
    println!("cargo:rustc-check-cfg=cfg(board, values(\"microbit\", \"netduinoplus2\"))");
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    // The replay image's script (replay/traces.py encode): empty unless given.
    let script = out.join("replay.txt");
    match env::var_os("DUPLEX_REPLAY_SCRIPT") {
        Some(path) => {
            println!("cargo:rerun-if-changed={}", PathBuf::from(&path).display());
            fs::copy(&path, &script).expect("DUPLEX_REPLAY_SCRIPT names a readable file");
        }
        None => fs::write(&script, "").expect("OUT_DIR is writable"),
    }
    let Some(board) = board else { return };
    fs::copy(format!("boards/{board}.x"), out.join("memory.x")).expect("board layout");
    println!("cargo:rustc-link-search={}", out.display());
    println!("cargo:rustc-env=DUPLEX_BOARD={board}");
    println!("cargo:rustc-cfg=board=\"{board}\"");
    if env::var_os("CARGO_FEATURE_DEFMT").is_some() {
        println!("cargo:rustc-link-arg=-Tdefmt.x");
    }
}
