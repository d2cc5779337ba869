// Linearity: a closing session is never Clone; two finalizes would release the same request ids twice.
use duplex_core::*;

fn open() -> (Session<Open>, Fence) {
    let f = Fence::new(Id::new("s").unwrap(), 0);
    (Session::open(f.clone(), OpenOptions::default(), Instant::ZERO).unwrap(), f)
}

fn main() {
    let (s, f) = open();
    let c = s.begin_close(&f, CloseReason::ClientClose).unwrap();
    let _twin = c.clone();
}
