// Obligations: expired sessions' requests must be cancelled in the engine and the sessions finalized; collecting and ignoring them strands both.
#![deny(unused_must_use)]
use duplex_core::{Instant, ManualClock};
use duplex_std::{ManagerConfig, SessionManager};

fn main() {
    let mut m = SessionManager::new(ManualClock::new(Instant::ZERO), ManagerConfig::default()).unwrap();
    m.collect_expired([]);
}
