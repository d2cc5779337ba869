// Lifecycle: a Closed session only reports its final facts; request ids were handed back by finalize.
use duplex_core::*;

fn open() -> (Session<Open>, Fence) {
    let f = Fence::new(Id::new("s").unwrap(), 0);
    (Session::open(f.clone(), OpenOptions::default(), Instant::ZERO).unwrap(), f)
}

fn main() {
    let (s, f) = open();
    let (closed, _ids) = s.close(&f, CloseReason::ClientClose).unwrap();
    let _ = closed.resource_request_ids(None, None);
}
