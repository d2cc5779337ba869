//! Arbitrary bytes decoded into manager operations (ids of any length,
//! times up to `u64::MAX`, every mode, activity and close reason), run
//! through the model harness: any panic is a crash, and any broken
//! invariant (see `duplex_tests::model`) aborts with its description.

#![no_main]

use duplex_tests::model::{run, Op};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|ops: Vec<Op>| {
    if let Err(broken) = run(&ops) {
        panic!("invariant broken: {broken}\nops: {ops:#?}");
    }
});
