//! Arbitrary bytes as the messages one client sends the gateway (split at
//! each 0xFF byte, which UTF-8 never contains; each piece decoded lossily
//! as text), run through a connection beside another client's session:
//! any panic is a crash, and a reply that is not a server event, too many
//! replies to one message, or a change to the other session aborts with
//! its description.
//!
//! The decoder is fuzzed through the same path (every message goes
//! through `protocol::decode` first). Protocol-shaped seeds are in
//! `seeds/gateway_events`: `cargo +nightly fuzz run gateway_events
//! corpus/gateway_events seeds/gateway_events`.

#![no_main]

use duplex_gateway::fuzzing::frames_keep_to_their_session;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let frames: Vec<String> = data
        .split(|&b| b == 0xff)
        .take(32)
        .map(|piece| String::from_utf8_lossy(piece).into_owned())
        .collect();
    if let Err(broken) = frames_keep_to_their_session(&frames) {
        panic!("gateway rule broken: {broken}\nframes: {frames:#?}");
    }
});
