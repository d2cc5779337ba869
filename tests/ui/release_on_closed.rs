// Lifecycle: a Closed session only reports its final facts; its tables are gone.
use duplex_core::*;

fn open() -> (Session<Open>, Fence) {
    let f = Fence::new(Id::new("s").unwrap(), 0);
    (Session::open(f.clone(), OpenOptions::default(), Instant::ZERO).unwrap(), f)
}

fn main() {
    let (s, f) = open();
    let (mut closed, _ids) = s.close(&f, CloseReason::ClientClose).unwrap();
    closed.release(&[Id::new("r").unwrap()]);
}
