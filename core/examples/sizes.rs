//! RAM of a session, per state and profile: `size_of` of each typed
//! session and of the state enum, for the device and the default profile.
//!
//! `cargo run -p duplex-core --example sizes` (with `--features serde`, the
//! largest snapshot of each profile too)

use core::mem::size_of;

use duplex_core::profile::Device;
use duplex_core::{AnySession, Closed, Closing, Detached, Open, Session};

type DeviceAny = AnySession<Device>;

fn main() {
    println!("| profile | Session<Open> | Session<Detached> | Session<Closing> | Session<Closed> | AnySession |");
    println!("|---|---:|---:|---:|---:|---:|");
    println!(
        "| device | {} | {} | {} | {} | {} |",
        size_of::<Session<Open, Device>>(),
        size_of::<Session<Detached, Device>>(),
        size_of::<Session<Closing, Device>>(),
        size_of::<Session<Closed, Device>>(),
        size_of::<DeviceAny>(),
    );
    println!(
        "| default | {} | {} | {} | {} | {} |",
        size_of::<Session<Open>>(),
        size_of::<Session<Detached>>(),
        size_of::<Session<Closing>>(),
        size_of::<Session<Closed>>(),
        size_of::<AnySession>(),
    );
    #[cfg(feature = "serde")]
    println!(
        "\nlargest snapshot (SNAPSHOT_MAX): device {} bytes, default {} bytes",
        Session::<Open, Device>::SNAPSHOT_MAX,
        Session::<Open>::SNAPSHOT_MAX,
    );
}
