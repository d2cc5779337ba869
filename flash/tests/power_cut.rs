//! Power cut at every byte a save writes or erases, with sequential-storage's
//! mock flash (its `bytes_until_shutoff`), for sessions in each state: after
//! every cut the next boot loads the image saved before or the one being
//! saved, byte for byte, the core restores it, and it takes the operations
//! its state allows. A save after the cut works, and loads back.

use duplex_core::profile::Device as DeviceProfile;
use duplex_core::{AnySession, Session};
use duplex_core::{
    CloseReason, Duration, Fence, Id, InputMode, Instant, LeaseConfig, Modes, Open, OpenOptions,
    StateKind,
};
use duplex_flash::{buffer_len, SnapshotFlash};
use futures::executor::block_on;
use sequential_storage::mock_flash::{MockFlashBase, WriteCountCheck};

/// Four 1 KiB pages of 4-byte words (a page holds the device profile's
/// largest image; small pages make a page erase come soon).
type Flash = MockFlashBase<4, 4, 256>;
const RANGE: core::ops::Range<u32> = 0..4 * 1024;
const IMAGE_MAX: usize = Session::<Open, DeviceProfile>::SNAPSHOT_MAX;
const BUF: usize = buffer_len(IMAGE_MAX, 4);
const AUDIO: InputMode = InputMode::AppendAudioChunk;

type Device = AnySession<DeviceProfile>;

fn flash() -> Flash {
    Flash::new(WriteCountCheck::Twice, None, true)
}

fn store(flash: Flash) -> SnapshotFlash<Flash, BUF> {
    SnapshotFlash::new(flash, RANGE).expect("the range holds a map")
}

fn image(session: &Device) -> Vec<u8> {
    let mut buf = [0u8; IMAGE_MAX];
    session
        .snapshot(&mut buf)
        .expect("fits SNAPSHOT_MAX")
        .to_vec()
}

/// A device session after `chunks` appends, in `state`.
fn session(chunks: u64, state: StateKind) -> Device {
    let fence = Fence::new(Id::new("mic-0").unwrap(), 3);
    let lease = LeaseConfig::new(Some(Duration::from_secs(30)), Duration::from_secs(5)).unwrap();
    let opts = OpenOptions::default()
        .modes(Modes::only(AUDIO))
        .lease(lease);
    let mut s =
        Session::<Open, DeviceProfile>::open_with_capacities(fence.clone(), opts, Instant::ZERO)
            .unwrap();
    for _ in 0..chunks {
        s.append(&fence, AUDIO).unwrap();
    }
    s.bind(&fence, 0, &Id::new("tts").unwrap()).unwrap();
    match state {
        StateKind::Open => s.into(),
        StateKind::Detached => s
            .detach(&fence, Instant::from_millis(40))
            .map_err(|r| r.error)
            .unwrap()
            .into(),
        StateKind::Closing => s
            .begin_close(&fence, CloseReason::ClientClose)
            .map_err(|r| r.error)
            .unwrap()
            .into(),
        StateKind::Closed => unreachable!("a closed session is not kept"),
    }
}

/// What a restored session must still do, by its state.
fn takes_operations(restored: Device, expected: &[u8]) {
    assert_eq!(
        image(&restored),
        expected,
        "restore and snapshot round trip"
    );
    let fence = restored.fence().clone();
    match restored.kind() {
        StateKind::Open => {
            let mut open = restored.into_open().map_err(|_| "open").unwrap();
            let before = open.input_seq();
            assert_eq!(open.append(&fence, AUDIO).unwrap().seq, before + 1);
        }
        StateKind::Detached => {
            let mut any = restored;
            let generation = any.lease_generation();
            any.resume(&fence, generation, Instant::from_millis(80))
                .unwrap();
            assert_eq!(any.kind(), StateKind::Open);
        }
        StateKind::Closing => {
            let mut any = restored;
            let released = any.finalize().unwrap();
            assert_eq!(
                released.len(),
                1,
                "the request is released once, after the boot"
            );
        }
        StateKind::Closed => unreachable!(),
    }
}

/// A flash on which `old` was saved `saves` times.
fn saved(old: &[u8], saves: usize) -> Flash {
    let mut s = store(flash());
    for _ in 0..saves {
        block_on(s.save(old)).expect("the saves before");
    }
    s.into_flash()
}

/// On `base` (where `old` is the last image saved), saves `new` with the
/// power cut after `cut` bytes written or erased; boots again. `None` once
/// `cut` is past what the save of `new` writes (it completed).
fn cut_during_save(base: &Flash, old: &[u8], new: &[u8], cut: u32) -> Option<Vec<u8>> {
    let mut f = base.clone();
    f.bytes_until_shutoff = Some(cut);
    let mut s = store(f);
    let saved = block_on(s.save(new));
    let mut f = s.into_flash();
    let completed = f.bytes_until_shutoff.is_some();
    if completed {
        saved.expect("a save that was not cut succeeds");
    }
    // Power back on.
    f.bytes_until_shutoff = None;
    let mut s = store(f);
    let loaded = block_on(s.load())
        .expect("a boot after a cut loads")
        .expect("an image was saved completely before")
        .to_vec();
    assert!(
        loaded == old || loaded == new,
        "cut after {cut} bytes: an image that was never saved"
    );
    // The store still works: a new save loads back.
    block_on(s.save(new)).expect("a save after the cut");
    assert_eq!(block_on(s.load()).unwrap().unwrap(), new);
    (!completed).then_some(loaded)
}

/// How many saves of `old` fill the flash so that the next save must
/// erase a page (and move what it keeps).
fn saves_before_an_erase(old: &[u8], new: &[u8]) -> usize {
    let mut s = store(flash());
    for prefill in 0..1_000 {
        block_on(s.save(old)).unwrap();
        let mut f = s.into_flash();
        let before = f.stats_snapshot();
        let mut probe = store(f.clone());
        block_on(probe.save(new)).unwrap();
        let erased = before
            .compare_to(probe.into_flash().stats_snapshot())
            .erases;
        if erased > 0 {
            return prefill;
        }
        f.bytes_until_shutoff = None;
        s = store(f);
    }
    panic!("no save erased a page");
}

#[test]
fn a_cut_at_every_byte_leaves_the_old_image_or_the_new() {
    for state in [StateKind::Open, StateKind::Detached, StateKind::Closing] {
        let old = image(&session(2, StateKind::Open));
        let new = image(&session(5, state));
        assert_ne!(old, new);
        // On a fresh flash, and where the save must erase a page first.
        for prefill in [0, saves_before_an_erase(&old, &new)] {
            every_cut(state, prefill, &old, &new);
        }
    }
}

fn every_cut(state: StateKind, prefill: usize, old: &[u8], new: &[u8]) {
    {
        let (mut olds, mut news) = (0, 0);
        let mut cut = 0;
        let base = saved(old, prefill + 1);
        while let Some(loaded) = cut_during_save(&base, old, new, cut) {
            let expected = if loaded == old {
                olds += 1;
                old
            } else if loaded == new {
                news += 1;
                new
            } else {
                panic!("{state:?}: cut after {cut} bytes loaded an image that was never saved");
            };
            let restored = Device::restore_with_capacities(&loaded).unwrap();
            takes_operations(restored, expected);
            cut += 1;
        }
        // Every byte of the save was a cut point; some left the old image.
        assert!(cut as usize > new.len(), "{state:?}: {cut} cut points");
        assert!(olds > 0, "{state:?}");
        println!(
            "{state:?} after {prefill} saves: {cut} cut points, {olds} left the old image, {news} the new"
        );
    }
}

/// A long life: many saves of a changing session, the power cut during
/// some of them (a deterministic spread of points, pages rolling over and
/// being erased), each boot loading the last complete image or the one
/// being saved.
#[test]
fn a_life_of_saves_with_cuts_keeps_the_last_complete_image() {
    let mut f = flash();
    let mut last: Option<Vec<u8>> = None;
    for round in 0..120u64 {
        let state =
            [StateKind::Open, StateKind::Detached, StateKind::Closing][(round % 3) as usize];
        let new = image(&session(round % 9, state));
        // Every third save is cut, at a point that walks over the save.
        let cut = (round % 3 == 1).then(|| ((round * 7_919) % 1_400) as u32);
        f.bytes_until_shutoff = cut;
        let mut s = store(f);
        let saved = block_on(s.save(&new));
        let mut back = s.into_flash();
        let completed = back.bytes_until_shutoff.is_some() || cut.is_none();
        assert_eq!(saved.is_ok(), completed, "round {round}");
        back.bytes_until_shutoff = None;
        let mut s = store(back);
        let loaded = block_on(s.load()).unwrap().map(<[u8]>::to_vec);
        match (&loaded, &last) {
            (Some(l), _) if *l == new => last = Some(new.clone()),
            (l, prev) => assert_eq!(l, prev, "round {round}: neither the last image nor the new"),
        }
        if let Some(l) = &loaded {
            Device::restore_with_capacities(l).unwrap();
        }
        f = s.into_flash();
    }
    assert!(last.is_some());
}

#[test]
fn an_empty_flash_loads_nothing_and_an_oversized_image_writes_nothing() {
    let mut s = store(flash());
    assert_eq!(block_on(s.load()).unwrap(), None);
    let too_large = vec![0u8; BUF];
    assert!(matches!(
        block_on(s.save(&too_large)),
        Err(duplex_flash::FlashError::TooLarge { .. })
    ));
    assert_eq!(block_on(s.load()).unwrap(), None);
    // One page is too small for a map.
    assert!(matches!(
        SnapshotFlash::<Flash, BUF>::new(flash(), 0..1024),
        Err(duplex_flash::FlashError::Range { .. })
    ));
}
