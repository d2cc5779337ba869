//! Snapshot and restore (feature `serde`) on the device: a session written
//! into a static buffer, restored in every state, corrupt and foreign
//! images refused before a session exists.
#![no_std]
#![no_main]

use duplex_core::*;
use duplex_on_target::{check, check_eq, ok, tests, Outcome};

// Each board snapshots the profile it would run: the device profile on the
// 16 KiB Cortex-M0, the default (conformance) profile on the Cortex-M4F.
#[cfg(not(board = "microbit"))]
use duplex_core::profile::conformance as board;
#[cfg(not(board = "microbit"))]
type Board = duplex_core::profile::Conformance;
#[cfg(not(board = "microbit"))]
type OtherBoard = duplex_core::profile::Device;
#[cfg(board = "microbit")]
use duplex_core::profile::device as board;
#[cfg(board = "microbit")]
type Board = duplex_core::profile::Device;
#[cfg(board = "microbit")]
type OtherBoard = duplex_core::profile::Conformance;

type S<St> = Session<St, Board>;
type Any = AnySession<Board>;
type Other<St> = Session<St, OtherBoard>;
type Id = duplex_core::Id<{ board::ID_LEN }>;
type Fence = duplex_core::Fence<Id>;

const AUDIO: InputMode = InputMode::AppendAudioChunk;

fn id(s: &str) -> Id {
    Id::new(s).expect("a short id")
}

fn fence() -> Fence {
    Fence::new(id("mic"), 1)
}

fn busy() -> Result<S<Open>, Error> {
    let opts = OpenOptions::default().modes(Modes::only(AUDIO));
    let mut s = S::open_with_capacities(fence(), opts, Instant::from_millis(5))?;
    s.append(&fence(), AUDIO)?;
    s.append(&fence(), AUDIO)?;
    s.bind(&fence(), 0, &id("llm"))?;
    s.reserve(&fence(), 1, &id("voc"))?;
    s.begin_operation(&fence(), &id("gen"), Instant::from_millis(9))?;
    s.record_completed(&fence(), &id("op"), AUDIO, Finality::Final, &[4, 2])?;
    Ok(s)
}

fn an_open_session_survives_a_reset() -> Outcome {
    let s = ok!(busy());
    let mut buf = [0u8; S::<Open>::SNAPSHOT_MAX];
    let image = ok!(s.snapshot(&mut buf));
    let restored = ok!(Any::restore_with_capacities(image));
    let Some(r) = restored.as_open() else {
        check!(false);
        return Ok(());
    };
    check_eq!(r.fence(), s.fence());
    check_eq!(r.input_seq(), 2);
    check_eq!(r.last_activity(), s.last_activity());
    check_eq!(r.bindings().count(), 1);
    check_eq!(r.resources().count(), 2);
    check_eq!(r.active_operations().count(), 1);
    check_eq!(
        ok!(r.completed(&fence(), &id("op"), AUDIO, Finality::Final)),
        Some(&[4i64, 2][..])
    );
    Ok(())
}

fn a_detached_session_keeps_its_deadline() -> Outcome {
    let mut buf = [0u8; S::<Open>::SNAPSHOT_MAX];
    let d = ok!(ok!(busy()).detach(&fence(), Instant::from_millis(50)));
    let restored = ok!(Any::restore_with_capacities(ok!(d.snapshot(&mut buf))));
    check_eq!(restored.kind(), StateKind::Detached);
    check_eq!(restored.deadline(), d.deadline());
    Ok(())
}

fn a_closing_session_still_releases_once() -> Outcome {
    let mut buf = [0u8; S::<Open>::SNAPSHOT_MAX];
    let c = ok!(ok!(busy()).begin_close(&fence(), CloseReason::ClientClose));
    let mut restored = ok!(Any::restore_with_capacities(ok!(c.snapshot(&mut buf))));
    check_eq!(restored.close_reason(), Some(CloseReason::ClientClose));
    check_eq!(ok!(restored.finalize()).as_slice(), [id("llm"), id("voc")]);
    check!(restored.finalize().is_err());
    Ok(())
}

fn a_small_buffer_and_bad_bytes_are_refused() -> Outcome {
    let s = ok!(busy());
    let mut small = [0u8; 8];
    check!(matches!(
        s.snapshot(&mut small),
        Err(SnapshotError::BufferTooSmall { .. })
    ));
    let mut buf = [0u8; S::<Open>::SNAPSHOT_MAX];
    let len = ok!(s.snapshot(&mut buf)).len();
    // Every truncation is refused, none panics.
    for cut in 0..len {
        check!(Any::restore_with_capacities(&buf[..cut]).is_err());
    }
    buf[0] = SNAPSHOT_VERSION.wrapping_add(1);
    check!(matches!(
        Any::restore_with_capacities(&buf[..len]),
        Err(SnapshotError::Version { .. })
    ));
    Ok(())
}

fn an_image_of_another_profile_is_refused() -> Outcome {
    let s = ok!(Other::<Open>::open_with_capacities(
        duplex_core::Fence::new(ok!(duplex_core::Id::new("mic")), 0),
        OpenOptions::default(),
        Instant::ZERO
    ));
    let mut buf = [0u8; Other::<Open>::SNAPSHOT_MAX];
    let image = ok!(s.snapshot(&mut buf));
    check!(matches!(
        Any::restore_with_capacities(image),
        Err(SnapshotError::Profile { .. })
    ));
    Ok(())
}

tests!(
    snapshot: an_open_session_survives_a_reset,
    a_detached_session_keeps_its_deadline,
    a_closing_session_still_releases_once,
    a_small_buffer_and_bad_bytes_are_refused,
    an_image_of_another_profile_is_refused,
);
