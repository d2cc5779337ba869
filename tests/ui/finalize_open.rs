// Lifecycle: finalize is Closing -> Closed; an Open session must begin_close first.
use duplex_core::*;

fn open() -> (Session<Open>, Fence) {
    let f = Fence::new(Id::new("s").unwrap(), 0);
    (Session::open(f.clone(), OpenOptions::default(), Instant::ZERO).unwrap(), f)
}

fn main() {
    let (s, _f) = open();
    s.finalize();
}
