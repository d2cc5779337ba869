// Lifecycle: prepare_append is client input too; a reservation can only be made while Open.
use duplex_core::*;

fn open() -> (Session<Open>, Fence) {
    let f = Fence::new(Id::new("s").unwrap(), 0);
    (Session::open(f.clone(), OpenOptions::default(), Instant::ZERO).unwrap(), f)
}

fn main() {
    let (s, f) = open();
    let d = s.detach(&f, Instant::ZERO).unwrap();
    d.prepare_append(&f, InputMode::TurnCommitOnly);
}
