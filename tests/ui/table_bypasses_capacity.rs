// Capacity: the tables are private; request ids cannot be forged into (or wiped from) a session's resource table.
use duplex_core::*;

fn main() {
    let f = Fence::new(Id::new("s").unwrap(), 0);
    let mut s = Session::open(f, OpenOptions::default(), Instant::ZERO).unwrap();
    let _table = &mut s.requests;
}
