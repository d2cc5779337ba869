// Lease: idle TTL and grace must be positive; a LeaseConfig can only be made through LeaseConfig::new.
use duplex_core::{Duration, LeaseConfig};

fn main() {
    let _lease = LeaseConfig { idle_ttl: Duration::ZERO, disconnect_grace: Duration::ZERO };
}
