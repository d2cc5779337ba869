// Draining: a barge-in needs a live session (a closing one takes no new
// epoch), so a Closing session cannot drain; routing its requests' output
// and releasing what drains are still permitted (see pass/lifecycle.rs).
use duplex_core::*;

fn open() -> (Session<Open>, Fence) {
    let f = Fence::new(Id::new("s").unwrap(), 0);
    (Session::open(f.clone(), OpenOptions::default(), Instant::ZERO).unwrap(), f)
}

fn main() {
    let (s, f) = open();
    let mut c = s.begin_close(&f, CloseReason::ClientClose).unwrap();
    let _ = c.drain(&f, &f.clone().with_epoch(1), |_| true);
}
