// Capacity: capacities are part of the type; a fence of a 16-byte-id profile cannot be used with a session of the default 32-byte profile.
use duplex_core::*;

fn main() {
    let small: Fence<16> = Fence::new(Id::<16>::new("s").unwrap(), 0);
    let mut s = Session::open(Fence::new(Id::new("s").unwrap(), 0), OpenOptions::default(), Instant::ZERO).unwrap();
    s.touch(&small, Activity::Heartbeat, Instant::ZERO);
}
