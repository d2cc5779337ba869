// Obligations: finalize hands back request ids the engine must release; ignoring them is an error under deny(unused_must_use).
#![deny(unused_must_use)]
use duplex_core::*;

fn open() -> (Session<Open>, Fence) {
    let f = Fence::new(Id::new("s").unwrap(), 0);
    (Session::open(f.clone(), OpenOptions::default(), Instant::ZERO).unwrap(), f)
}

fn main() {
    let (s, f) = open();
    let c = s.begin_close(&f, CloseReason::ClientClose).unwrap();
    c.finalize();
}
