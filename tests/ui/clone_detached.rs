// Linearity: a detached session is never Clone; a twin could resume while the original expires.
use duplex_core::*;

fn open() -> (Session<Open>, Fence) {
    let f = Fence::new(Id::new("s").unwrap(), 0);
    (Session::open(f.clone(), OpenOptions::default(), Instant::ZERO).unwrap(), f)
}

fn main() {
    let (s, f) = open();
    let d = s.detach(&f, Instant::ZERO).unwrap();
    let _twin = d.clone();
}
