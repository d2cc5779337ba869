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

use crate::append::StageResults;
use crate::id::IdText;
use crate::profile::{IdOf, Profile, ResultsRow, Tables};
use crate::storage::StoredId;
use serde::{Deserialize, Serialize};

use super::any::AnySession;
use super::state::{Closing, Detached, Open, State, Unfinished};
use super::Session;
use crate::append::Cursor;
use crate::completed::Completed;
use crate::error::Error;
use crate::fence::{Fence, Position};
use crate::lease::{ActiveOps, CloseReason, Lease, LeaseConfig};
use crate::mode::Modes;
use crate::requests::Requests;
use crate::time::{Duration, Instant};

mod parts;

/// The image format's version, the first byte of every image. Version 3
/// added the control id of the session's last resume, version 4 the input
/// limits and what is pending against them, version 5 the overlap policy
/// and the overlapping speech heard; restore reads versions 2 to 5 (an
/// older image restores with no control id, the default limits and
/// overlap policy, nothing pending and nothing heard) and refuses any
/// other.
///
/// ```
/// # use duplex_core::*;
/// let s = Session::open(Fence::new(Id::new("s")?, 0), OpenOptions::default(), Instant::ZERO)?;
/// let mut buf = [0u8; Session::<Open>::SNAPSHOT_MAX];
/// assert_eq!(s.snapshot(&mut buf)?[0], SNAPSHOT_VERSION);
/// # Ok::<(), Box<dyn core::error::Error>>(())
/// ```
#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
pub const SNAPSHOT_VERSION: u8 = 5;

/// The oldest image version restore reads.
const OLDEST_VERSION: u8 = 2;

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

/// A completed append as the image holds it (its results are a sequence,
/// at most the profile's `STAGE_RESULTS`).
#[derive(Serialize)]
struct RecordImage<'a> {
    op: &'a str,
    position: PositionImage,
    results: &'a [i64],
    meta: u8,
}

/// Writes an image's fields one after another into the caller's buffer,
/// in postcard's encoding: a struct is its fields in order, a sequence its
/// length (a varint) and its elements. Field by field, so no sequence of a
/// profile's capacity is built on the stack.
struct Out<'b> {
    buf: &'b mut [u8],
    at: usize,
    needed: usize,
}

impl<'b> Out<'b> {
    /// Writes one field. Never inlined: each type's writer is one function
    /// that every field of that type calls (the image's sections and the
    /// cursor share the `[u64; 4]` one), where inlined copies made the
    /// opt-level-3 firmware kilobytes larger.
    #[inline(never)]
    fn put<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), SnapshotError> {
        let rest = self.buf.get_mut(self.at..).unwrap_or_default();
        let written = postcard::to_slice(value, rest)
            .map_err(|_| SnapshotError::BufferTooSmall {
                needed: self.needed,
            })?
            .len();
        self.at += written;
        Ok(())
    }

    fn finish(self) -> &'b mut [u8] {
        let at = self.at;
        self.buf.get_mut(..at).unwrap_or_default()
    }
}

/// Reads an image's fields one after another (the inverse of [`Out`]);
/// anything that does not decode is [`SnapshotError::Malformed`].
#[derive(Clone, Copy)]
struct In<'de> {
    rest: &'de [u8],
}

impl<'de> In<'de> {
    fn take<T: Deserialize<'de>>(&mut self) -> Result<T, SnapshotError> {
        let (value, rest) =
            postcard::take_from_bytes(self.rest).map_err(|_| SnapshotError::Malformed)?;
        self.rest = rest;
        Ok(value)
    }

    /// A sequence's length, refused beyond `capacity` (a table over
    /// capacity is not a snapshot of this profile).
    fn len(&mut self, capacity: usize) -> Result<usize, SnapshotError> {
        let len: usize = self.take()?;
        if len > capacity {
            return Err(SnapshotError::Malformed);
        }
        Ok(len)
    }

    /// A completed append: its op id, position, results and meta byte.
    fn record<T: Tables>(
        &mut self,
    ) -> Result<(&'de str, Position, StageResults<T>, u8), SnapshotError> {
        let op: &'de str = self.take()?;
        let position: PositionImage = self.take()?;
        let count = self.len(T::STAGE_RESULTS)?;
        let mut values = T::Results::default();
        for slot in values.slots_mut().iter_mut().take(count) {
            *slot = self.take()?;
        }
        let results = values
            .slots()
            .get(..count)
            .map(StageResults::new)
            .ok_or(SnapshotError::Malformed)?
            .map_err(|_| SnapshotError::Malformed)?;
        let meta: u8 = self.take()?;
        Ok((op, Position::from(&position), results, meta))
    }
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
        + id_len(id_len_max) // the control id of the last resume (version 3)
        + 1 + 2 * (varint(32) + varint(16)) // input limits and pending input (version 4)
        + 1 + 1 + 2 * varint(16) + varint(32) // overlap policy, thresholds, speech heard (version 5)
}

impl<S: State, P: Profile> Session<S, P> {
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
    pub const SNAPSHOT_MAX: usize = max_snapshot_len(
        <P::Tables as Tables>::RESOURCES,
        <P::Tables as Tables>::COMPLETED,
        <P::Tables as Tables>::ACTIVE_OPS,
        <P::Tables as Tables>::ID_LEN,
        <P::Tables as Tables>::STAGE_RESULTS,
    );

    /// This type's capacity profile as an image records it.
    const PROFILE: [u16; 6] = [
        <P::Tables as Tables>::RESOURCES as u16,
        <P::Tables as Tables>::BINDINGS as u16,
        <P::Tables as Tables>::COMPLETED as u16,
        <P::Tables as Tables>::ACTIVE_OPS as u16,
        <P::Tables as Tables>::ID_LEN as u16,
        <P::Tables as Tables>::STAGE_RESULTS as u16,
    ];

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
        P::SessionConfig: Serialize,
        P::RuntimeConfig: Serialize,
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
        let (seq, turn_seq, key_turn, key_response) = self.cursor.parts();
        let mut out = Out {
            buf,
            at: 0,
            needed: Self::SNAPSHOT_MAX,
        };
        out.put(&SNAPSHOT_VERSION)?;
        out.put(&Self::PROFILE)?;
        out.put(&state)?;
        out.put(self.fence.session.as_str())?;
        out.put(&self.fence.incarnation)?;
        out.put(&self.fence.epoch)?;
        out.put(&self.fence.turn)?;
        out.put(&self.fence.response)?;
        out.put(&self.lease.config.idle_ttl().map_or(0, Duration::as_millis))?;
        out.put(&self.lease.config.disconnect_grace().as_millis())?;
        out.put(&self.lease.generation)?;
        out.put(&self.lease.last_activity.as_millis())?;
        out.put(&self.lease.active.len())?;
        for op in self.lease.active.iter() {
            out.put(op.text())?;
        }
        out.put(&self.completed.modes().bits())?;
        out.put(&[seq, turn_seq, key_turn, key_response])?;
        out.put(&self.requests.rows().count())?;
        for row in self.requests.rows() {
            out.put(&ResourceImage {
                stage: row.stage,
                request: row.request.text(),
                position: row.position.into(),
                state: row.state_byte(),
            })?;
        }
        out.put(&self.requests.bound())?;
        out.put(&self.completed.len())?;
        for (op, position, results, meta) in self.completed.records() {
            out.put(&RecordImage {
                op: op.text(),
                position: position.into(),
                results,
                meta,
            })?;
        }
        out.put(&u16::try_from(self.completed.limit()).unwrap_or(u16::MAX))?;
        out.put(&self.config_generation)?;
        out.put(self.resumed_by().unwrap_or_default())?;
        parts::put_input(&mut out, &self.input)?;
        parts::put_overlap(&mut out, self.overlap, self.overlap_policy)?;
        out.put(&self.session_config)?;
        out.put(&self.runtime_config)?;
        Ok(out.finish())
    }
}

/// An id from an image.
fn id<I: IdText>(text: &str) -> Result<I, SnapshotError> {
    I::new(text).map_err(SnapshotError::Invalid)
}

impl<P: Profile> AnySession<P> {
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
        P::SessionConfig: Serialize,
        P::RuntimeConfig: Serialize,
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
    /// use duplex_core::profile::Device;
    /// let s = Session::<Open, Device>::open_with_capacities(Fence::new(Id::new("mic")?, 0), OpenOptions::default(), Instant::ZERO)?;
    /// let mut buf = [0u8; Session::<Open, Device>::SNAPSHOT_MAX];
    /// let image = s.snapshot(&mut buf)?;
    /// assert!(AnySession::<Device>::restore_with_capacities(image).is_ok());
    /// // An image of one profile is refused by another.
    /// assert!(matches!(AnySession::restore(image), Err(SnapshotError::Profile { .. })));
    /// # Ok::<(), Box<dyn core::error::Error>>(())
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
    pub fn restore_with_capacities<'de>(bytes: &'de [u8]) -> Result<Self, SnapshotError>
    where
        P::SessionConfig: Deserialize<'de>,
        P::RuntimeConfig: Deserialize<'de>,
    {
        // The header first: an image of another version or profile is named
        // as such even when the rest would not parse as this type's.
        let mut input = In { rest: bytes };
        let version: u8 = input.take()?;
        let profile = input.take::<[u16; 6]>();
        if !(OLDEST_VERSION..=SNAPSHOT_VERSION).contains(&version) {
            return Err(SnapshotError::Version {
                found: version,
                expected: SNAPSHOT_VERSION,
            });
        }
        let profile = profile?;
        let expected = Session::<Open, P>::PROFILE;
        if profile != expected {
            return Err(SnapshotError::Profile {
                found: profile,
                expected,
            });
        }
        // The structure first: bytes that do not decode are malformed
        // whatever their values; then the values, in the session's order.
        let state: StateImage = input.take()?;
        let session: &str = input.take()?;
        let [incarnation, epoch, turn, response]: [u64; 4] =
            [input.take()?, input.take()?, input.take()?, input.take()?];
        let idle_ttl_ms: u64 = input.take()?;
        let grace_ms: u64 = input.take()?;
        let generation: u64 = input.take()?;
        let last_activity_ms: u64 = input.take()?;
        let active_count = input.len(<P::Tables as Tables>::ACTIVE_OPS)?;
        let active_at = input;
        for _ in 0..active_count {
            input.take::<&str>()?;
        }
        let modes: u8 = input.take()?;
        let [seq, turn_seq, key_turn, key_response]: [u64; 4] = input.take()?;
        let count = input.len(<P::Tables as Tables>::RESOURCES)?;
        let first = input;
        for _ in 0..count {
            input.take::<ResourceImage<'de>>()?;
        }
        let bound: u8 = input.take()?;
        let count_records = input.len(<P::Tables as Tables>::COMPLETED)?;
        let records_at = input;
        for _ in 0..count_records {
            input.record::<P::Tables>()?;
        }
        let completed_limit: u16 = input.take()?;
        let config_generation: u64 = input.take()?;
        // Version 2 kept no control id: its resumes were not named.
        let resumed_by: &str = if version >= 3 { input.take()? } else { "" };
        let budget = parts::take_input(version, &mut input)?;
        let (overlap, overlap_policy) = parts::take_overlap(version, &mut input)?;
        let session_config: P::SessionConfig = input.take()?;
        let runtime_config: P::RuntimeConfig = input.take()?;

        let fence = Fence {
            session: id(session)?,
            incarnation,
            epoch,
            turn,
            response,
        };
        let idle = (idle_ttl_ms != 0).then(|| Duration::from_millis(idle_ttl_ms));
        let config = LeaseConfig::new(idle, Duration::from_millis(grace_ms))
            .map_err(SnapshotError::Invalid)?;
        let mut active = ActiveOps::new();
        let mut again = active_at;
        for _ in 0..active_count {
            let op = id(again.take::<&str>()?)?;
            if active.contains(&op) {
                return Err(SnapshotError::Inconsistent(
                    "an active operation appears twice",
                ));
            }
            let _ = active.push(op);
        }
        let mut control = <P::Tables as Tables>::StoredId::default();
        if !resumed_by.is_empty() {
            control.set(&id(resumed_by)?);
        }
        let lease = Lease {
            config,
            generation,
            last_activity: Instant::from_millis(last_activity_ms),
            active,
            resumed_by: control,
        };
        let modes =
            Modes::from_bits(modes).ok_or(SnapshotError::Inconsistent("unknown input modes"))?;
        let cursor = Cursor::from_parts(seq, turn_seq, key_turn, key_response).ok_or(
            SnapshotError::Inconsistent("an append cursor that cannot arise"),
        )?;
        let mut again = first;
        for _ in 0..count {
            id::<IdOf<P>>(again.take::<ResourceImage<'de>>()?.request)?;
        }
        let mut again = first;
        let rows = (0..count).filter_map(|_| {
            let r: ResourceImage<'de> = again.take().ok()?;
            Some((
                r.stage,
                id(r.request).ok()?,
                Position::from(&r.position),
                r.state,
            ))
        });
        let requests =
            Requests::<P::Tables>::from_rows(rows, bound).map_err(SnapshotError::Inconsistent)?;
        // `bind` accepts its fence, and the fence never moves backwards, so
        // a binding is never ahead of the session: one that is was bound
        // under a fence this session never held (another session's).
        let at = fence.position();
        if requests.bindings().any(|b| at.is_behind(b.position)) {
            return Err(SnapshotError::Inconsistent(
                "a binding ahead of the session's fence, bound under a fence this session never held",
            ));
        }
        let mut again = records_at;
        for _ in 0..count_records {
            id::<IdOf<P>>(again.record::<P::Tables>()?.0)?;
        }
        let mut again = records_at;
        let records = (0..count_records).filter_map(|_| {
            let (op, position, results, meta) = again.record::<P::Tables>().ok()?;
            Some((id(op).ok()?, position, results, meta))
        });
        let completed = Completed::<P::Tables>::from_records(completed_limit, modes, records)
            .map_err(SnapshotError::Inconsistent)?;
        let session = Session {
            state: Open,
            fence,
            lease,
            cursor,
            requests,
            completed,
            input: budget,
            overlap,
            overlap_policy,
            config_generation,
            session_config,
            runtime_config,
        };
        match state {
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
