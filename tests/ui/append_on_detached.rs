// Lifecycle: a Detached session refuses new client input; append exists only on Session<Open>.
use duplex_core::*;

fn open() -> (Session<Open>, Fence) {
    let f = Fence::new(Id::new("s").unwrap(), 0);
    (Session::open(f.clone(), OpenOptions::default(), Instant::ZERO).unwrap(), f)
}

fn main() {
    let (s, f) = open();
    let mut d = s.detach(&f, Instant::ZERO).unwrap();
    d.append(&f, InputMode::TurnCommitOnly);
}
