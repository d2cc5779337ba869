// API guarantee: transitions consume the session; the Open value is gone after detach.
use duplex_core::*;

fn open() -> (Session<Open>, Fence) {
    let f = Fence::new(Id::new("s").unwrap(), 0);
    (Session::open(f.clone(), OpenOptions::default(), Instant::ZERO).unwrap(), f)
}

fn main() {
    let (s, f) = open();
    let _d = s.detach(&f, Instant::ZERO);
    let _ = s.fence();
}
