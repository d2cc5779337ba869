// Lifecycle: a Closing session keeps its requests for cleanup but binds no new ones.
use duplex_core::*;

fn open() -> (Session<Open>, Fence) {
    let f = Fence::new(Id::new("s").unwrap(), 0);
    (Session::open(f.clone(), OpenOptions::default(), Instant::ZERO).unwrap(), f)
}

fn main() {
    let (s, f) = open();
    let mut c = s.begin_close(&f, CloseReason::ClientClose).unwrap();
    c.bind(&f, 0, &Id::new("late").unwrap());
}
