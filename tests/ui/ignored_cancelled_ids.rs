// Obligations: a barge-in's cancelled request ids must reach the engine; dropping them leaks model work.
#![deny(unused_must_use)]
use duplex_core::*;

fn open() -> (Session<Open>, Fence) {
    let f = Fence::new(Id::new("s").unwrap(), 0);
    (Session::open(f.clone(), OpenOptions::default(), Instant::ZERO).unwrap(), f)
}

fn main() {
    let (mut s, f) = open();
    s.cancel(&f, &f.clone().with_epoch(1)).unwrap();
}
