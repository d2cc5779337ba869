//! Arbitrary bytes restored as a session: never a panic, and anything that
//! restores is a session the core itself could produce: its image restores
//! to the same facts, and it still takes operations under every rule of
//! the model harness (`duplex_tests::model::check_restored`).

#![no_main]

use duplex_core::{AnySession, Open, Session};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    let Ok(session) = AnySession::restore(bytes) else {
        return;
    };
    let mut buf = [0u8; Session::<Open>::SNAPSHOT_MAX];
    let image = session
        .snapshot(&mut buf)
        .expect("a restored session fits in SNAPSHOT_MAX");
    let again = AnySession::restore(image).expect("a restored session's image restores");
    if let Err(broken) = duplex_tests::model::check_restored(&session, again) {
        panic!("invariant broken: {broken}");
    }
});
