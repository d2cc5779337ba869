// API guarantee: session states are sealed; no crate can add a state (or a way around the rules).
use duplex_core::*;

#[derive(Debug)]
struct Zombie;

impl State for Zombie {
    const KIND: StateKind = StateKind::Open;
}

fn main() {}
