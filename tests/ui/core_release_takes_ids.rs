// One id type per layer: the core takes the Ids it hands out, not strings (the std manager takes both).
use duplex_core::*;

fn open() -> (Session<Open>, Fence) {
    let f = Fence::new(Id::new("s").unwrap(), 0);
    (Session::open(f.clone(), OpenOptions::default(), Instant::ZERO).unwrap(), f)
}

fn main() {
    let (mut s, _f) = open();
    s.release(&["tts-1"]);
}
