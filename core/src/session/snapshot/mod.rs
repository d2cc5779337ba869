//! Persisting a session (feature `serde`): a compact, versioned byte image
//! written with postcard into the caller's buffer, and a restore that
//! checks everything a corrupted or hostile image could break before a
//! session exists.
//!
//! The image holds every field of the session in its current state (not
//! `Closed`: a closed session has released everything). Restore yields the
//! [`AnySession`] of the state it was saved in, or a [`SnapshotError`] that
//! says what was wrong; it never panics and never builds a session that
//! breaks an invariant of the tables, the cursor or the lease.

use crate::storage::{Storage, StoredId};
use serde::{Deserialize, Serialize};

use super::any::AnySession;
use super::state::{Closing, Detached, Open, State, Unfinished};
use super::Session;
use crate::append::Cursor;
use crate::completed::Completed;
use crate::error::Error;
use crate::fence::{Fence, Position};
use crate::id::Id;
use crate::lease::{ActiveOps, CloseReason, Lease, LeaseConfig};
use crate::mode::Modes;
use crate::requests::Requests;
use crate::time::{Duration, Instant};

/// The image format's version, the first byte of every image: restore
/// refuses any other.
///
/// ```
/// # use duplex_core::*;
/// let s = Session::open(Fence::new(Id::new("s")?, 0), OpenOptions::default(), Instant::ZERO)?;
/// let mut buf = [0u8; Session::<Open>::SNAPSHOT_MAX];
/// assert_eq!(s.snapshot(&mut buf)?[0], SNAPSHOT_VERSION);
/// # Ok::<(), Box<dyn core::error::Error>>(())
/// ```
#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
pub const SNAPSHOT_VERSION: u8 = 2;

/// Why a snapshot could not be written or restored. Nothing is restored
/// from an image that fails any check.
///
/// # Examples
///
/// ```
/// use duplex_core::SnapshotError;
///
/// let e = SnapshotError::Version { found: 9, expected: 1 };
/// assert_eq!(e.to_string(), "snapshot format version 9, expected 1");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
pub enum SnapshotError {
    /// The buffer given to `snapshot` cannot hold the image.
    #[error("the buffer is too small for the snapshot (at most {needed} bytes)")]
    BufferTooSmall {
        /// The profile's largest image, a size that always suffices (with
        /// configurations that serialize to nothing).
        needed: usize,
    },
    /// The bytes are not a snapshot: truncated, a table longer than its
    /// capacity, an id that is not UTF-8, an unknown tag.
    #[error("the bytes are not a snapshot (truncated, a table over capacity, or corrupt)")]
    Malformed,
    /// Another version of the format.
    #[error("snapshot format version {found}, expected {expected}")]
    Version {
        /// The image's version.
        found: u8,
        /// This build's.
        expected: u8,
    },
    /// A session of another capacity profile `[R, B, D, A, L, K]`.
    #[error("snapshot of capacity profile {found:?}, but this session type is {expected:?}")]
    Profile {
        /// The image's profile.
        found: [u16; 6],
        /// This type's.
        expected: [u16; 6],
    },
    /// A value the session would refuse (an empty or over-long id, a zero
    /// lease duration).
    #[error("invalid value in the snapshot: {0}")]
    Invalid(Error),
    /// Values that cannot belong together in a session (two bindings on one
    /// stage, a cursor ahead of itself, an operation active while closing).
    #[error("inconsistent snapshot: {0}")]
    Inconsistent(&'static str),
}

#[derive(Serialize, Deserialize)]
enum StateImage {
    Open,
    Detached { since_ms: u64 },
    Closing { reason: u8 },
}

#[derive(Serialize, Deserialize)]
struct PositionImage {
    epoch: u64,
    turn: u64,
    response: u64,
}

impl From<Position> for PositionImage {
    fn from(p: Position) -> Self {
        PositionImage {
            epoch: p.epoch,
            turn: p.turn,
            response: p.response,
        }
    }
}

impl From<&PositionImage> for Position {
    fn from(p: &PositionImage) -> Self {
        Position {
            epoch: p.epoch,
            turn: p.turn,
            response: p.response,
        }
    }
}

#[derive(Serialize, Deserialize)]
struct ResourceImage<'a> {
    stage: u32,
    request: &'a str,
    position: PositionImage,
    state: u8,
}

#[derive(Serialize, Deserialize)]
struct RecordImage<'a, const K: usize> {
    op: &'a str,
    position: PositionImage,
    results: heapless::Vec<i64, K>,
    meta: u8,
}

/// Every field of a session, in a fixed order (the wire format of
/// [`SNAPSHOT_VERSION`]).
#[derive(Serialize, Deserialize)]
#[serde(bound(
    serialize = "SC: Serialize, RC: Serialize",
    deserialize = "SC: Deserialize<'de>, RC: Deserialize<'de>"
))]
struct Image<'a, SC, RC, const R: usize, const D: usize, const A: usize, const K: usize> {
    version: u8,
    profile: [u16; 6],
    state: StateImage,
    session: &'a str,
    incarnation: u64,
    epoch: u64,
    turn: u64,
    response: u64,
    idle_ttl_ms: u64,
    grace_ms: u64,
    generation: u64,
    last_activity_ms: u64,
    #[serde(borrow)]
    active: heapless::Vec<&'a str, A>,
    modes: u8,
    cursor: [u64; 4],
    #[serde(borrow)]
    resources: heapless::Vec<ResourceImage<'a>, R>,
    bound: u8,
    #[serde(borrow)]
    completed: heapless::Vec<RecordImage<'a, K>, D>,
    completed_limit: u16,
    config_generation: u64,
    session_config: SC,
    runtime_config: RC,
}

/// Postcard's largest encoding of an unsigned integer of `bits` bits.
const fn varint(bits: usize) -> usize {
    bits.div_ceil(7)
}

/// The largest encoding of an id of up to `l` bytes.
const fn id_len(l: usize) -> usize {
    varint(16) + l
}

/// The largest image of a session with `resources` (`R`), `completed`
/// (`D`), `active_ops` (`A`), ids of up to `id_len_max` bytes (`L`) and
/// `results` per completed append (`K`), whose configurations serialize to
/// nothing (add their own largest encodings otherwise).
///
/// ```
/// use duplex_core::{max_snapshot_len, Open, Session};
/// assert_eq!(max_snapshot_len(8, 8, 4, 32, 4), Session::<Open>::SNAPSHOT_MAX);
/// ```
#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
pub const fn max_snapshot_len(
    resources: usize,
    completed: usize,
    active_ops: usize,
    id_len_max: usize,
    results: usize,
) -> usize {
    let u64v = varint(64);
    let position = 3 * u64v;
    1 // version
        + 6 * varint(16) // profile
        + 1 + u64v // state
        + id_len(id_len_max) + 4 * u64v // fence
        + 4 * u64v // lease
        + varint(16) + active_ops * id_len(id_len_max) // active operations
        + 1 // modes
        + 4 * u64v // cursor
        + varint(16) + resources * (varint(32) + id_len(id_len_max) + position + 1) // resources
        + 1 // bound
        + varint(16) + completed * (id_len(id_len_max) + position + varint(16) + results * u64v + 1) // completed
        + varint(16) // completed-append limit (up to 256)
        + u64v // config generation
}

impl<
        S: State,
        SC,
        RC,
        const R: usize,
        const B: usize,
        const D: usize,
        const A: usize,
        const L: usize,
        const K: usize,
        M: Storage,
    > Session<S, SC, RC, R, B, D, A, L, K, M>
{
    /// The largest snapshot of this session type, when its configurations
    /// serialize to nothing: a buffer of this size always suffices, so
    /// firmware can size it statically.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let mut buf = [0u8; Session::<Open>::SNAPSHOT_MAX];
    /// let s = Session::open(Fence::new(Id::new("s")?, 0), OpenOptions::default(), Instant::ZERO)?;
    /// assert!(s.snapshot(&mut buf).is_ok());
    /// # Ok::<(), Box<dyn core::error::Error>>(())
    /// ```
    pub const SNAPSHOT_MAX: usize = max_snapshot_len(R, D, A, L, K);

    /// This type's capacity profile as an image records it.
    const PROFILE: [u16; 6] = [R as u16, B as u16, D as u16, A as u16, L as u16, K as u16];

    /// Writes the session's image into `buf` and returns the written part.
    ///
    /// # Errors
    ///
    /// [`SnapshotError::BufferTooSmall`].
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("kitchen")?, 3);
    /// let mut s = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// s.bind(&f, 0, &Id::new("tts-1")?)?;
    /// let mut buf = [0u8; Session::<Open>::SNAPSHOT_MAX];
    /// let image = s.snapshot(&mut buf)?;
    /// // ... power off, reboot ...
    /// let restored = AnySession::restore(image)?;
    /// let open = restored.as_open().unwrap();
    /// assert_eq!((open.fence(), open.resources().count()), (&f, 1));
    /// # Ok::<(), Box<dyn core::error::Error>>(())
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
    pub fn snapshot<'b>(&self, buf: &'b mut [u8]) -> Result<&'b mut [u8], SnapshotError>
    where
        S: Unfinished,
        SC: Serialize,
        RC: Serialize,
    {
        let state = match (self.state.detached_at(), self.state.close_reason()) {
            (Some(since), _) => StateImage::Detached {
                since_ms: since.as_millis(),
            },
            (None, Some(reason)) => StateImage::Closing {
                reason: reason as u8,
            },
            (None, None) => StateImage::Open,
        };
        let mut active = heapless::Vec::new();
        for op in self.lease.active.iter() {
            let _ = active.push(op.as_str());
        }
        let mut resources = heapless::Vec::new();
        for row in self.requests.rows() {
            let _ = resources.push(ResourceImage {
                stage: row.stage,
                request: row.request.as_str(),
                position: row.position.into(),
                state: row.state_byte(),
            });
        }
        let mut completed = heapless::Vec::new();
        for (op, position, results, meta) in self.completed.records() {
            let _ = completed.push(RecordImage::<K> {
                op: op.as_str(),
                position: position.into(),
                results: heapless::Vec::from_slice(results).unwrap_or_default(),
                meta,
            });
        }
        let (seq, turn_seq, key_turn, key_response) = self.cursor.parts();
        let image = Image::<'_, &SC, &RC, R, D, A, K> {
            version: SNAPSHOT_VERSION,
            profile: Self::PROFILE,
            state,
            session: self.fence.session.as_str(),
            incarnation: self.fence.incarnation,
            epoch: self.fence.epoch,
            turn: self.fence.turn,
            response: self.fence.response,
            idle_ttl_ms: self.lease.config.idle_ttl().map_or(0, Duration::as_millis),
            grace_ms: self.lease.config.disconnect_grace().as_millis(),
            generation: self.lease.generation,
            last_activity_ms: self.lease.last_activity.as_millis(),
            active,
            modes: self.completed.modes().bits(),
            cursor: [seq, turn_seq, key_turn, key_response],
            resources,
            bound: self.requests.bound(),
            completed,
            completed_limit: u16::try_from(self.completed.limit()).unwrap_or(u16::MAX),
            config_generation: self.config_generation,
            session_config: &self.session_config,
            runtime_config: &self.runtime_config,
        };
        postcard::to_slice(&image, buf).map_err(|_| SnapshotError::BufferTooSmall {
            needed: Self::SNAPSHOT_MAX,
        })
    }
}

/// An id from an image.
fn id<const L: usize>(text: &str) -> Result<Id<L>, SnapshotError> {
    Id::new(text).map_err(SnapshotError::Invalid)
}

impl<
        SC,
        RC,
        const R: usize,
        const B: usize,
        const D: usize,
        const A: usize,
        const L: usize,
        const K: usize,
        M: Storage,
    > AnySession<SC, RC, R, B, D, A, L, K, M>
{
    /// Writes the image of the session, whatever its state but `Closed`.
    ///
    /// # Errors
    ///
    /// [`SnapshotError::BufferTooSmall`]; [`SnapshotError::Inconsistent`]
    /// for a closed session (it has nothing left to persist).
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = AnySession::from(Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?);
    /// s.detach(&f, Instant::from_millis(40))?;
    /// let mut buf = [0u8; Session::<Open>::SNAPSHOT_MAX];
    /// let back = AnySession::restore(s.snapshot(&mut buf)?)?;
    /// assert_eq!(back.as_detached().map(|d| d.state().since()), Some(Instant::from_millis(40)));
    /// # Ok::<(), Box<dyn core::error::Error>>(())
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
    pub fn snapshot<'b>(&self, buf: &'b mut [u8]) -> Result<&'b mut [u8], SnapshotError>
    where
        SC: Serialize,
        RC: Serialize,
    {
        if let Some(s) = self.as_open() {
            s.snapshot(buf)
        } else if let Some(s) = self.as_detached() {
            s.snapshot(buf)
        } else if let Some(s) = self.as_closing() {
            s.snapshot(buf)
        } else {
            Err(SnapshotError::Inconsistent(
                "a closed session has nothing to persist",
            ))
        }
    }

    /// Restores a session of any configuration types and capacity profile
    /// (named by the type; see [`AnySession::restore`] for the default).
    ///
    /// # Errors
    ///
    /// As [`AnySession::restore`].
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_core::profile::DeviceSession;
    /// type Device = AnySession<(), (), 4, 2, 4, 2, 16, 2>;
    /// let s = DeviceSession::open_with_capacities(Fence::new(Id::new("mic")?, 0), OpenOptions::default(), Instant::ZERO)?;
    /// let mut buf = [0u8; DeviceSession::<Open>::SNAPSHOT_MAX];
    /// let image = s.snapshot(&mut buf)?;
    /// assert!(Device::restore_with_capacities(image).is_ok());
    /// // An image of one profile is refused by another.
    /// assert!(matches!(AnySession::restore(image), Err(SnapshotError::Profile { .. })));
    /// # Ok::<(), Box<dyn core::error::Error>>(())
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
    pub fn restore_with_capacities<'de>(bytes: &'de [u8]) -> Result<Self, SnapshotError>
    where
        SC: Deserialize<'de>,
        RC: Deserialize<'de>,
    {
        // The header first: an image of another version or profile is named
        // as such even when the rest would not parse as this type's.
        let ((version, profile), _) = postcard::take_from_bytes::<(u8, [u16; 6])>(bytes)
            .map_err(|_| SnapshotError::Malformed)?;
        if version != SNAPSHOT_VERSION {
            return Err(SnapshotError::Version {
                found: version,
                expected: SNAPSHOT_VERSION,
            });
        }
        let expected = Session::<Open, SC, RC, R, B, D, A, L, K, M>::PROFILE;
        if profile != expected {
            return Err(SnapshotError::Profile {
                found: profile,
                expected,
            });
        }
        let image: Image<'de, SC, RC, R, D, A, K> =
            postcard::from_bytes(bytes).map_err(|_| SnapshotError::Malformed)?;
        let fence = Fence {
            session: id(image.session)?,
            incarnation: image.incarnation,
            epoch: image.epoch,
            turn: image.turn,
            response: image.response,
        };
        let idle = (image.idle_ttl_ms != 0).then(|| Duration::from_millis(image.idle_ttl_ms));
        let config = LeaseConfig::new(idle, Duration::from_millis(image.grace_ms))
            .map_err(SnapshotError::Invalid)?;
        let mut active = ActiveOps::new();
        for op in &image.active {
            let op = id(op)?;
            if active.contains(&op) {
                return Err(SnapshotError::Inconsistent(
                    "an active operation appears twice",
                ));
            }
            let _ = active.push(op);
        }
        let lease = Lease {
            config,
            generation: image.generation,
            last_activity: Instant::from_millis(image.last_activity_ms),
            active,
        };
        let modes = Modes::from_bits(image.modes)
            .ok_or(SnapshotError::Inconsistent("unknown input modes"))?;
        let [seq, turn_seq, key_turn, key_response] = image.cursor;
        let cursor = Cursor::from_parts(seq, turn_seq, key_turn, key_response).ok_or(
            SnapshotError::Inconsistent("an append cursor that cannot arise"),
        )?;
        let mut rows = heapless::Vec::<_, R>::new();
        for r in &image.resources {
            let _ = rows.push((
                r.stage,
                id(r.request)?,
                Position::from(&r.position),
                r.state,
            ));
        }
        let requests = Requests::<R, B, L, M>::from_rows(rows.into_iter(), image.bound)
            .map_err(SnapshotError::Inconsistent)?;
        // `bind` accepts its fence, and the fence never moves backwards, so
        // a binding is never ahead of the session: one that is was bound
        // under a fence this session never held (another session's).
        let at = fence.position();
        if requests.bindings().any(|b| at.is_behind(b.position)) {
            return Err(SnapshotError::Inconsistent(
                "a binding ahead of the session's fence, bound under a fence this session never held",
            ));
        }
        let mut records = heapless::Vec::<_, D>::new();
        for r in &image.completed {
            let _ = records.push((
                id(r.op)?,
                Position::from(&r.position),
                r.results.as_slice(),
                r.meta,
            ));
        }
        let completed = Completed::<D, L, K, M>::from_records(
            image.completed_limit,
            modes,
            records.into_iter(),
        )
        .map_err(SnapshotError::Inconsistent)?;
        let session = Session {
            state: Open,
            fence,
            lease,
            cursor,
            requests,
            completed,
            config_generation: image.config_generation,
            session_config: image.session_config,
            runtime_config: image.runtime_config,
        };
        match image.state {
            StateImage::Open => Ok(AnySession::from(session)),
            // Any instant: the core takes `now` from its caller and does
            // not require it to be monotonic, so none is impossible.
            StateImage::Detached { since_ms } => Ok(AnySession::from(
                session.into_state(Detached::new(Instant::from_millis(since_ms))),
            )),
            StateImage::Closing { reason } => {
                let reason = CloseReason::ALL
                    .get(usize::from(reason))
                    .copied()
                    .ok_or(SnapshotError::Inconsistent("an unknown close reason"))?;
                if !session.lease.active.is_empty() || session.lease.generation == 0 {
                    return Err(SnapshotError::Inconsistent(
                        "a closing session with active operations or a generation that closing never reached",
                    ));
                }
                Ok(AnySession::from(session.into_state(Closing::new(reason))))
            }
        }
    }
}

impl AnySession {
    /// Restores a session of the default profile without configurations
    /// from its image, in the state it was saved in, after checking the
    /// format version, the capacity profile, every id, the lease durations,
    /// every table's length and consistency, the cursor and the state's own
    /// data. (Other types: [`restore_with_capacities`](Self::restore_with_capacities).)
    ///
    /// # Errors
    ///
    /// [`SnapshotError`]: what was wrong with the bytes. Nothing is built
    /// from an image that fails a check.
    ///
    /// ```
    /// # use duplex_core::*;
    /// assert_eq!(AnySession::restore(&[]).unwrap_err(), SnapshotError::Malformed);
    /// assert_eq!(AnySession::restore(&[9, 8, 4, 8, 4, 32, 4]).unwrap_err(), SnapshotError::Version { found: 9, expected: SNAPSHOT_VERSION });
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
    pub fn restore(bytes: &[u8]) -> Result<Self, SnapshotError> {
        Self::restore_with_capacities(bytes)
    }
}

#[cfg(test)]
mod tests;
