// SPEC §6: the tables are private; released request ids cannot be forged into a session's resource table.
use duplex_core::*;

fn main() {
    let f = Fence::new(Id::new("s").unwrap(), 0);
    let mut s: Session = Session::open(f, OpenOptions::default(), Instant::ZERO).unwrap();
    s.requests.resources.clear();
}
