// Lifecycle: a resume asked again is still a resume; a Closing session
// answers neither.
use duplex_core::*;

fn open() -> (Session<Open>, Fence) {
    let f = Fence::new(Id::new("s").unwrap(), 0);
    (Session::open(f.clone(), OpenOptions::default(), Instant::ZERO).unwrap(), f)
}

fn main() {
    let (s, f) = open();
    let c = s.begin_close(&f, CloseReason::ClientClose).unwrap();
    let _ = c.resume_idempotent(&f, 1, &Id::new("ctl").unwrap(), Instant::ZERO);
}
