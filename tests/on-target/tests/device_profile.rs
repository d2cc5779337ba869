//! The device profile (`profile::device`): its capacities, its id length,
//! its size, and a table of device sessions in the micro:bit's 16 KiB.
#![no_std]
#![no_main]

use core::mem::size_of;

use duplex_core::profile::{device, Device as DeviceProfile};
use duplex_core::*;
use duplex_on_target::{check, check_eq, ok, tests, Outcome};

type Device = duplex_core::AnySession<DeviceProfile>;
type DeviceFence = Fence<Id<{ device::ID_LEN }>>;
type DeviceId = Id<{ device::ID_LEN }>;

const AUDIO: InputMode = InputMode::AppendAudioChunk;

fn id(s: &str) -> Result<DeviceId, Error> {
    Id::new(s)
}

fn open(name: &str) -> Result<Session<Open, DeviceProfile>, Error> {
    let opts = OpenOptions::default().modes(Modes::only(AUDIO));
    Session::<Open, DeviceProfile>::open_with_capacities(
        Fence::new(id(name)?, 0),
        opts,
        Instant::ZERO,
    )
}

fn ids_are_at_most_sixteen_bytes() -> Outcome {
    check!(id("0123456789abcdef").is_ok());
    check_eq!(
        id("0123456789abcdefX"),
        Err(Error::InvalidId { len: 17, max: 16 })
    );
    Ok(())
}

fn capacities_are_the_profile_s() -> Outcome {
    let mut s = ok!(open("mic"));
    let f: DeviceFence = s.fence().clone();
    for stage in 0..device::BINDINGS as u32 {
        ok!(s.bind(&f, stage, &ok!(id("b"))));
    }
    check_eq!(
        s.bind(&f, 9, &ok!(id("z"))),
        Err(Error::Full {
            table: Table::Bindings,
            capacity: device::BINDINGS
        })
    );
    ok!(s.begin_operation(&f, &ok!(id("o1")), Instant::ZERO));
    ok!(s.begin_operation(&f, &ok!(id("o2")), Instant::ZERO));
    check_eq!(
        s.begin_operation(&f, &ok!(id("o3")), Instant::ZERO),
        Err(Error::Full {
            table: Table::ActiveOperations,
            capacity: device::ACTIVE_OPS
        })
    );
    check_eq!(
        s.record_completed(&f, &ok!(id("op")), AUDIO, Finality::Final, &[1, 2, 3]),
        Err(Error::Full {
            table: Table::StageResults,
            capacity: device::STAGE_RESULTS
        })
    );
    check!(matches!(
        Session::<Open, DeviceProfile>::open_with_capacities(
            f.clone(),
            OpenOptions::default().completed_limit(device::COMPLETED + 1),
            Instant::ZERO
        ),
        Err(Error::InvalidConfig { .. })
    ));
    Ok(())
}

fn a_table_of_eight_sessions_fits_on_the_smallest_board() -> Outcome {
    // Eight device sessions on the stack of a 16 KiB Cortex-M0.
    let names = ["s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7"];
    let mut table: [Option<Device>; 8] = Default::default();
    for (slot, name) in table.iter_mut().zip(names) {
        *slot = Some(Device::from(ok!(open(name))));
    }
    for (n, slot) in (1u64..).zip(table.iter_mut()) {
        let Some(s) = slot else { continue };
        let f = s.fence().clone();
        for _ in 0..n {
            ok!(s.append(&f, AUDIO));
        }
    }
    let seqs = table
        .iter()
        .flatten()
        .filter_map(|s| s.as_open().map(Session::<Open, DeviceProfile>::input_seq))
        .sum::<u64>();
    check_eq!(seqs, 36);
    check!(size_of::<[Option<Device>; 8]>() <= 8 * 640);
    Ok(())
}

fn the_device_profile_snapshots_into_its_own_buffer() -> Outcome {
    let mut s = ok!(open("mic"));
    let f = s.fence().clone();
    ok!(s.append(&f, AUDIO));
    ok!(s.bind(&f, 0, &ok!(id("tts"))));
    let mut buf = [0u8; Session::<Open, DeviceProfile>::SNAPSHOT_MAX];
    let image = ok!(s.snapshot(&mut buf));
    let restored = ok!(Device::restore_with_capacities(image));
    check_eq!(
        restored
            .as_open()
            .map(Session::<Open, DeviceProfile>::input_seq),
        Some(1)
    );
    Ok(())
}

tests!(
    device_profile: ids_are_at_most_sixteen_bytes,
    capacities_are_the_profile_s,
    a_table_of_eight_sessions_fits_on_the_smallest_board,
    the_device_profile_snapshots_into_its_own_buffer,
);
