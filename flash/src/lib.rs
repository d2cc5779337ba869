//! # duplex-flash
//!
//! A device keeps its `duplex-core` session across a power cut, a
//! brown-out or a battery swap: the session's snapshot image (the core's
//! `serde` feature) is stored in NOR flash through
//! [`sequential-storage`](https://docs.rs/sequential-storage)'s map, which
//! levels wear over its pages, protects each item with a CRC, and is
//! designed so that a write cut at any point leaves the old value or the
//! new one. At boot the last complete image comes back, or none; never a
//! corrupt one (and the core's restore refuses what it cannot trust
//! anyway).
//!
//! `#![no_std]`, no allocation, no `unsafe`. The store's buffer is sized at
//! compile time from the image's bound ([`buffer_len`] of the profile's
//! `SNAPSHOT_MAX`), over any `embedded-storage-async` [`NorFlash`].
//!
//! ```
//! use duplex_core::profile::Device;
//! use duplex_core::{AnySession, Fence, Id, Instant, Open, OpenOptions, Session};
//! use duplex_flash::{buffer_len, SnapshotFlash};
//! # use sequential_storage::mock_flash::{MockFlashBase, WriteCountCheck};
//! # type Flash = MockFlashBase<4, 4, 256>;
//! # futures::executor::block_on(async {
//!
//! // The device profile's largest image, on a flash of 4-byte words.
//! const BUF: usize = buffer_len(Session::<Open, Device>::SNAPSHOT_MAX, 4);
//! # let flash = Flash::new(WriteCountCheck::Twice, None, false);
//! let mut store = SnapshotFlash::<_, BUF>::new(flash, 0..4096)?;
//!
//! let fence = Fence::new(Id::new("mic-0")?, 0);
//! let session = Session::<Open, Device>::open_with_capacities(fence, OpenOptions::default(), Instant::ZERO)?;
//! let mut image = [0u8; Session::<Open, Device>::SNAPSHOT_MAX];
//! store.save(session.snapshot(&mut image)?).await?;
//!
//! // After the power comes back:
//! let restored = match store.load().await? {
//!     Some(image) => Some(AnySession::<Device>::restore_with_capacities(image)?),
//!     None => None,
//! };
//! assert_eq!(restored.map(|s| s.id().clone()), Some(Id::new("mic-0")?));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```
#![no_std]
#![forbid(unsafe_code)]

use core::fmt::Debug;
use core::ops::Range;

pub use embedded_storage_async::nor_flash::NorFlash;
use sequential_storage::cache::{Cache, Uncached};
use sequential_storage::map::{MapConfig, MapStorage};

/// The map key the session image is stored under (one image per map).
const SLOT: u8 = 0;

/// How large a store's buffer must be for images of up to `image_max`
/// bytes on a flash of `word_size`-byte words: the key's byte and the
/// image, rounded up to a whole word.
///
/// ```
/// assert_eq!(duplex_flash::buffer_len(743, 4), 744);
/// assert_eq!(duplex_flash::buffer_len(744, 4), 748);
/// ```
pub const fn buffer_len(image_max: usize, word_size: usize) -> usize {
    (image_max + 1).div_ceil(word_size) * word_size
}

/// Why the store refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum FlashError<E: Debug> {
    /// The flash range cannot hold a map: it must start and end on page
    /// boundaries and span at least two pages.
    #[error("flash range {start:#x}..{end:#x} cannot hold the map: {why:?} (it needs at least two whole erase pages)")]
    Range {
        /// The range's start.
        start: u32,
        /// The range's end.
        end: u32,
        /// What `sequential-storage` said.
        why: sequential_storage::map::MapConfigError,
    },
    /// The image is larger than the store's buffer holds.
    #[error("an image of {len} bytes does not fit the store's buffer of {capacity} (size it with buffer_len)")]
    TooLarge {
        /// The image's length.
        len: usize,
        /// What the buffer holds.
        capacity: usize,
    },
    /// The flash or the map failed (the previous image, if any, is still
    /// the one a load returns).
    #[error("flash: {0}")]
    Storage(sequential_storage::Error<E>),
}

/// What one save cost, for wear figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Saved {
    /// The image's bytes.
    pub image: usize,
    /// Bytes of flash the item takes: its header, the key and the image,
    /// each rounded up to whole words.
    pub flash_bytes: usize,
}

/// A session image kept in a range of NOR flash.
pub struct SnapshotFlash<S: NorFlash, const BUF: usize> {
    map: MapStorage<u8, S, Cache<Uncached, Uncached, Uncached, u8>>,
    buf: [u8; BUF],
}

impl<S: NorFlash, const BUF: usize> Debug for SnapshotFlash<S, BUF> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SnapshotFlash")
            .field("buffer", &BUF)
            .finish_non_exhaustive()
    }
}

impl<S: NorFlash, const BUF: usize> SnapshotFlash<S, BUF>
where
    S::Error: Debug,
{
    /// A store over `range` of `flash` (whole erase pages, at least two).
    ///
    /// ```
    /// # use duplex_flash::{SnapshotFlash, FlashError};
    /// # use sequential_storage::mock_flash::{MockFlashBase, WriteCountCheck};
    /// # type Flash = MockFlashBase<4, 4, 256>;
    /// # futures::executor::block_on(async {
    /// # let flash = Flash::new(WriteCountCheck::Twice, None, false);
    /// // Pages of 1 KiB here: one page is too small for a map.
    /// assert!(matches!(
    ///     SnapshotFlash::<_, 64>::new(flash.clone(), 0..1024),
    ///     Err(FlashError::Range { .. })
    /// ));
    /// let store = SnapshotFlash::<_, 64>::new(flash, 0..4096)?;
    /// # Ok::<(), FlashError<_>>(())
    /// # }).unwrap();
    /// ```
    ///
    /// # Errors
    ///
    /// [`FlashError::Range`].
    pub fn new(flash: S, range: Range<u32>) -> Result<Self, FlashError<S::Error>> {
        let config = MapConfig::try_new(range.clone()).map_err(|why| FlashError::Range {
            start: range.start,
            end: range.end,
            why,
        })?;
        Ok(SnapshotFlash {
            map: MapStorage::new(flash, config, Cache::new_uncached()),
            buf: [0; BUF],
        })
    }

    /// Saves `image` as the session's image: after it returns, a load
    /// returns it; if the power is cut during it, a load after the next
    /// boot returns this image or the one saved before, never a mix.
    ///
    /// ```
    /// # use duplex_flash::{SnapshotFlash, FlashError, Saved};
    /// # use sequential_storage::mock_flash::{MockFlashBase, WriteCountCheck};
    /// # type Flash = MockFlashBase<4, 4, 256>;
    /// # futures::executor::block_on(async {
    /// # let flash = Flash::new(WriteCountCheck::Twice, None, false);
    /// let mut store = SnapshotFlash::<_, 64>::new(flash, 0..4096)?;
    /// // Header (8), key and image (1 + 10, rounded to 12).
    /// assert_eq!(store.save(&[7; 10]).await?, Saved { image: 10, flash_bytes: 20 });
    /// assert!(matches!(store.save(&[7; 64]).await, Err(FlashError::TooLarge { len: 64, .. })));
    /// assert_eq!(store.load().await?, Some(&[7u8; 10][..]));
    /// # Ok::<(), FlashError<_>>(())
    /// # }).unwrap();
    /// ```
    ///
    /// # Errors
    ///
    /// [`FlashError::TooLarge`] (nothing is written), or
    /// [`FlashError::Storage`].
    pub async fn save(&mut self, image: &[u8]) -> Result<Saved, FlashError<S::Error>> {
        if buffer_len(image.len(), S::WRITE_SIZE) > BUF {
            return Err(FlashError::TooLarge {
                len: image.len(),
                capacity: BUF,
            });
        }
        self.map
            .store_item(&mut self.buf, &SLOT, &image)
            .await
            .map_err(FlashError::Storage)?;
        Ok(Saved {
            image: image.len(),
            flash_bytes: item_bytes(image.len(), S::WRITE_SIZE),
        })
    }

    /// The last image saved completely, or `None` (never saved, or the
    /// range was erased).
    ///
    /// # Errors
    ///
    /// [`FlashError::Storage`].
    pub async fn load(&mut self) -> Result<Option<&[u8]>, FlashError<S::Error>> {
        self.map
            .fetch_item::<&[u8]>(&mut self.buf, &SLOT)
            .await
            .map_err(FlashError::Storage)
    }

    /// Erases the range: the next load returns `None`.
    ///
    /// ```
    /// # use duplex_flash::{SnapshotFlash, FlashError};
    /// # use sequential_storage::mock_flash::{MockFlashBase, WriteCountCheck};
    /// # type Flash = MockFlashBase<4, 4, 256>;
    /// # futures::executor::block_on(async {
    /// # let flash = Flash::new(WriteCountCheck::Twice, None, false);
    /// let mut store = SnapshotFlash::<_, 64>::new(flash, 0..4096)?;
    /// store.save(b"image").await?;
    /// store.erase().await?;
    /// assert_eq!(store.load().await?, None);
    /// # Ok::<(), FlashError<_>>(())
    /// # }).unwrap();
    /// ```
    ///
    /// # Errors
    ///
    /// [`FlashError::Storage`].
    pub async fn erase(&mut self) -> Result<(), FlashError<S::Error>> {
        self.map.erase_all().await.map_err(FlashError::Storage)
    }

    /// The flash back, for another use or to read it; a new store over
    /// it (a reboot) loads what this one saved.
    ///
    /// ```
    /// # use duplex_flash::{SnapshotFlash, FlashError};
    /// # use sequential_storage::mock_flash::{MockFlashBase, WriteCountCheck};
    /// # type Flash = MockFlashBase<4, 4, 256>;
    /// # futures::executor::block_on(async {
    /// # let flash = Flash::new(WriteCountCheck::Twice, None, false);
    /// let mut store = SnapshotFlash::<_, 64>::new(flash, 0..4096)?;
    /// store.save(b"image").await?;
    /// let mut rebooted = SnapshotFlash::<_, 64>::new(store.into_flash(), 0..4096)?;
    /// assert_eq!(rebooted.load().await?, Some(&b"image"[..]));
    /// # Ok::<(), FlashError<_>>(())
    /// # }).unwrap();
    /// ```
    pub fn into_flash(self) -> S {
        self.map.destroy().0
    }
}

/// The flash bytes one stored item of an `image`-byte image takes:
/// `sequential-storage`'s item header (8 bytes, rounded up to the word)
/// and the key and image, rounded up to the word.
fn item_bytes(image: usize, word: usize) -> usize {
    8usize.div_ceil(word) * word + buffer_len(image, word)
}
