// Input budgets: a Closing session takes no more turns.
use duplex_core::*;

fn open() -> (Session<Open>, Fence) {
    let f = Fence::new(Id::new("s").unwrap(), 0);
    (Session::open(f.clone(), OpenOptions::default(), Instant::ZERO).unwrap(), f)
}

fn main() {
    let (s, f) = open();
    let mut c = s.begin_close(&f, CloseReason::ClientClose).unwrap();
    let _ = c.reserve_turn(&f);
}
