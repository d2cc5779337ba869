// Lifecycle: begin_operation starts new work and is Open-only; a Detached session may only end operations.
use duplex_core::*;

fn open() -> (Session<Open>, Fence) {
    let f = Fence::new(Id::new("s").unwrap(), 0);
    (Session::open(f.clone(), OpenOptions::default(), Instant::ZERO).unwrap(), f)
}

fn main() {
    let (s, f) = open();
    let mut d = s.detach(&f, Instant::ZERO).unwrap();
    d.begin_operation(&f, &Id::new("op").unwrap(), Instant::ZERO);
}
