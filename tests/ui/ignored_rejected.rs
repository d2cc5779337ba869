// Obligations: a refused transition carries the session back; dropping the refusal drops the session.
#![deny(unused_must_use)]
use duplex_core::*;

fn open() -> (Session<Open>, Fence) {
    let f = Fence::new(Id::new("s").unwrap(), 0);
    (Session::open(f.clone(), OpenOptions::default(), Instant::ZERO).unwrap(), f)
}

fn main() {
    let (s, _f) = open();
    let stale = Fence::new(Id::new("s").unwrap(), 9);
    s.detach(&stale, Instant::ZERO).unwrap_err();
}
