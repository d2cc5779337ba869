//! What keeping a device's session in flash costs: bytes written and page
//! erases per save, measured with sequential-storage's mock flash (its
//! operation counters), for a session's typical life, then the flash
//! written per hour and the lifetime that implies for a part rated at
//! 10,000 erase cycles.
//!
//! The firmware saves on every state change (open, a barge-in, a dropped
//! link, a resume, a close), never on a 20 ms chunk. The hour modelled: a
//! barge-in every 30 s (120), a dropped link and its resume every 10
//! minutes (12), a new session every 15 minutes (4 opens and 4 closes):
//! 140 saves an hour.
//!
//! `cargo run --release -p duplex-flash --example wear`

// A printed report's arithmetic.
#![allow(clippy::cast_precision_loss)]

use duplex_core::profile::Device;
use duplex_core::{AnySession, Session};
use duplex_core::{
    CloseReason, Duration, Fence, Id, InputMode, Instant, LeaseConfig, Modes, Open, OpenOptions,
};
use duplex_flash::{buffer_len, SnapshotFlash};
use futures::executor::block_on;
use sequential_storage::mock_flash::{MockFlashBase, WriteCountCheck};

/// Eight 4 KiB pages (32 KiB) of 4-byte words: a sector range of a
/// typical on-chip or SPI NOR flash.
type Flash = MockFlashBase<8, 4, 1024>;
const PAGES: u64 = 8;
const BUF: usize = buffer_len(Session::<Open, Device>::SNAPSHOT_MAX, 4);
const SAVES_PER_HOUR: u64 = 140;
const RATED_CYCLES: u64 = 10_000;
const AUDIO: InputMode = InputMode::AppendAudioChunk;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut store = SnapshotFlash::<_, BUF>::new(
        Flash::new(WriteCountCheck::Twice, None, true),
        0..(PAGES as u32) * 4096,
    )?;
    let lease = LeaseConfig::new(Some(Duration::from_secs(30)), Duration::from_secs(5))?;
    let opts = OpenOptions::default()
        .modes(Modes::only(AUDIO))
        .lease(lease);
    let mut image = [0u8; Session::<Open, Device>::SNAPSHOT_MAX];
    let (mut saves, mut image_bytes, mut item_bytes) = (0u64, 0u64, 0u64);
    let mut save = |store: &mut SnapshotFlash<Flash, BUF>,
                    bytes: &[u8]|
     -> Result<(), Box<dyn std::error::Error>> {
        let saved = block_on(store.save(bytes))?;
        saves += 1;
        image_bytes += saved.image as u64;
        item_bytes += saved.flash_bytes as u64;
        Ok(())
    };

    let before = {
        let flash = store.into_flash();
        let stats = flash.stats_snapshot();
        store = SnapshotFlash::new(flash, 0..(PAGES as u32) * 4096)?;
        stats
    };
    // 200 sessions of a typical life: open, turns with barge-ins, a
    // dropped link resumed, a close; a save at each state change.
    let mut now = 0;
    for n in 0..200u64 {
        let mut fence = Fence::new(Id::new(&format!("mic-{n}"))?, n);
        let mut s = Session::<Open, Device>::open_with_capacities(
            fence.clone(),
            opts.clone(),
            Instant::from_millis(now),
        )?;
        save(&mut store, s.snapshot(&mut image)?)?;
        for turn in 1..=30u64 {
            for _ in 0..50 {
                s.append(&fence, AUDIO)?;
                now += 20;
            }
            s.bind(&fence, 0, &Id::new("tts")?)?;
            let next = fence.clone().with_epoch(turn);
            let cancelled = s.cancel(&fence, &next)?; // the barge-in
            assert_eq!(cancelled.len(), 1);
            fence = next;
            save(&mut store, s.snapshot(&mut image)?)?;
            if turn % 10 == 0 {
                let d = s
                    .detach(&fence, Instant::from_millis(now))
                    .map_err(|r| r.error)?;
                save(&mut store, d.snapshot(&mut image)?)?;
                now += 1_500;
                let generation = d.lease_generation();
                let (open, _) = d
                    .resume(&fence, generation, Instant::from_millis(now))
                    .map_err(|r| r.error)?;
                s = open;
                save(&mut store, s.snapshot(&mut image)?)?;
            }
        }
        let closing = s
            .begin_close(&fence, CloseReason::ClientClose)
            .map_err(|r| r.error)?;
        save(&mut store, closing.snapshot(&mut image)?)?;
        let _ = closing.finalize();
    }
    let flash = store.into_flash();
    let used = before.compare_to(flash.stats_snapshot());
    // The image that comes back is the last one saved.
    let mut store = SnapshotFlash::<_, BUF>::new(flash, 0..(PAGES as u32) * 4096)?;
    let last = block_on(store.load())?.ok_or("nothing loaded")?;
    assert_eq!(
        AnySession::<Device>::restore_with_capacities(last)?.kind(),
        duplex_core::StateKind::Closing
    );

    let written_per_save = used.bytes_written as f64 / saves as f64;
    let erases_per_save = used.erases as f64 / saves as f64;
    let erases_per_hour = erases_per_save * SAVES_PER_HOUR as f64;
    // Wear levelling spreads the erases over the range's pages.
    let hours = RATED_CYCLES as f64 * PAGES as f64 / erases_per_hour;
    println!("saves                   {saves}");
    println!(
        "image per save          {:.1} bytes (at most {})",
        image_bytes as f64 / saves as f64,
        Session::<Open, Device>::SNAPSHOT_MAX
    );
    println!(
        "flash item per save     {:.1} bytes (header, key and image in whole words)",
        item_bytes as f64 / saves as f64
    );
    println!("flash written per save  {written_per_save:.1} bytes (items, page states, items moved on a page change)");
    println!(
        "page erases per save    {erases_per_save:.4} (one every {:.0} saves)",
        1.0 / erases_per_save
    );
    println!("an hour at {SAVES_PER_HOUR} saves      {:.1} KiB written, {erases_per_hour:.2} page erases", written_per_save * SAVES_PER_HOUR as f64 / 1024.0);
    println!(
        "lifetime at {RATED_CYCLES} cycles  {hours:.0} hours of sessions ({:.1} years around the clock) over {PAGES} pages of 4 KiB",
        hours / 24.0 / 365.0
    );
    Ok(())
}
