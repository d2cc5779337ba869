// Overlap: a decision is about input from an attached client, so a Detached
// session makes none (forgetting what was heard is still permitted: see
// pass/lifecycle.rs).
use duplex_core::overlap::Overlap;
use duplex_core::*;

fn open() -> (Session<Open>, Fence) {
    let f = Fence::new(Id::new("s").unwrap(), 0);
    (Session::open(f.clone(), OpenOptions::default(), Instant::ZERO).unwrap(), f)
}

fn main() {
    let (s, f) = open();
    let mut d = s.detach(&f, Instant::ZERO).unwrap();
    let _ = d.decide_overlap(&f, &Overlap::speech(300));
}
