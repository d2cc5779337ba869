//! What a gateway that is a node of a cluster writes to the Redis
//! directory, and when (see [`cluster`](crate::cluster) for the layout and
//! the fencing).
//!
//! - **Every acknowledgement follows a store.** An append, a bind, a
//!   release, a barge-in, a detach: the session's image and the facts of
//!   the change (applied input, bound and released engine requests) are
//!   written in one script before the client hears of it. A node killed
//!   at any instant has lost nothing it acknowledged.
//! - **Refused means gone; unanswered means kept.** If Redis refuses a
//!   write (another node owns the session now, or it was closed), the
//!   local copy is dropped: the stored state stands, and the client's next
//!   resume takes the session over from it. If Redis does not answer, the
//!   change is not acknowledged, the session is detached and kept here,
//!   and its next save carries the change again (the node's shadow of the
//!   session, `cluster::shadow`, makes a save sent twice count once).
//! - **A store that lost data is written back.** A save that finds the
//!   record gone without a tombstone, or the applied log shorter than this
//!   node stored, and a store generation that changed (checked at every
//!   heartbeat), mean the store lost what it held (restarted empty, failed
//!   over to a replica that missed writes): this node writes back every
//!   session it holds, fenced so a session another node took over or
//!   closed meanwhile is not overwritten.
//! - **Requests are released once.** The engine requests a session holds
//!   belong to the engine of the node that owns it. A takeover or an
//!   adoption releases those of the previous owner in the same script that
//!   moves ownership; the previous owner's later releases are refused with
//!   the rest of its writes. The directory counts every release, and a
//!   count above one shows in `releases_doubled`.

use crate::profile::Fence;
use crate::GatewayProfile;
use crate::Id;
use duplex_core::AnySession;
use duplex_std::Sessions;

use crate::cluster::{Batch, DirectoryError, Node, Record, Save};
use crate::server::ownership::Owner;
use crate::server::policy::{self, Held, Refusal, ResumeStep, SaveFailure, Seen, Token};
use crate::server::state::Shared;
use crate::stats::{add, bump};

/// The largest image of a gateway session: the core's bound for the
/// default profile, and the owner's 16-byte nonce with its length.
const IMAGE_MAX: usize = duplex_core::Session::<duplex_core::Open>::SNAPSHOT_MAX + 32;

/// What became of a write to the directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stored {
    /// Stored (or nothing to store: a lone gateway).
    Yes,
    /// Another node owns the session now (or another session has the id):
    /// the local copy was dropped.
    Lost,
    /// Redis did not answer: not acknowledged. The session is kept here
    /// and its next save carries the change again (a takeover, an
    /// adoption or an open that was not stored is dropped: its stored
    /// state stands).
    Unavailable,
}

/// The facts of one change, beside the new image.
#[derive(Debug, Default)]
pub(crate) struct Changes {
    pub(crate) applied: Vec<String>,
    pub(crate) bound: Vec<String>,
    pub(crate) released: Vec<String>,
}

impl Changes {
    fn save<'a>(&'a self, image: &'a [u8], version: u64) -> Save<'a> {
        Save {
            image,
            version,
            applied: &self.applied,
            bound: &self.bound,
            released: &self.released,
            base: None,
        }
    }
}

fn batch_save<'a>(batch: &'a Batch, image: &'a [u8], version: u64) -> Save<'a> {
    Save {
        image,
        version,
        applied: &batch.applied,
        bound: &batch.bound,
        released: &batch.released,
        base: batch.base,
    }
}

/// What a resume of a session in a cluster found it to be.
#[derive(Debug)]
pub(crate) enum Resumed {
    /// Taken over from the store: its fence, owner and new lease
    /// generation.
    TakenOver(Fence, Owner, u64),
    /// This node's, with a current local copy (or a lone gateway): resume
    /// it here as a lone gateway would.
    Here,
}

/// The longest pause between two tries of a close the store did not take.
const CLOSE_RETRY_MAX: std::time::Duration = std::time::Duration::from_secs(1);

/// How many lease generations past the stored image a resume token is
/// checked for: a token that verifies for one of them was handed out after
/// the state the store holds (the store lost the newer one).
const TOKEN_LOOKAHEAD: u64 = 8;

/// A restored gateway session.
pub(super) type Image = AnySession<GatewayProfile>;

fn owner_of(s: &Image) -> Option<Owner> {
    s.as_open()
        .map(|o| *o.session_config())
        .or_else(|| s.as_detached().map(|d| *d.session_config()))
}

impl Shared {
    /// The session's image, incarnation and image version, all taken under
    /// its shard lock (so a later state has a larger version).
    pub(crate) fn image(&self, node: &Node, session: &Id) -> Option<(Vec<u8>, u64, u64)> {
        self.manager
            .with_session(session, |s| {
                let mut buf = vec![0u8; IMAGE_MAX];
                let len = match s.snapshot(&mut buf) {
                    Ok(image) => image.len(),
                    Err(e) => {
                        tracing::error!(%session, "cannot take the session's image: {e}");
                        return None;
                    }
                };
                buf.truncate(len);
                Some((buf, s.fence().incarnation, node.next_version()))
            })
            .flatten()
    }

    /// Forgets the local copy of a session the directory no longer lets
    /// this node write (its requests are the new owner's to release).
    pub(crate) fn drop_local(&self, session: &Id) {
        // The exported session is dropped here: its requests are not
        // released by this node. Its answers stop and the engine forgets
        // it, as at a close.
        if self.manager.export(session.as_str()).is_ok() {
            tracing::debug!(%session, "local copy dropped");
            self.ended(session);
        }
        if let Some(node) = &self.node {
            node.shadows.forget(session);
        }
    }

    /// Drops this node's adoption hint for a session it does not hold (the
    /// set would otherwise grow with every session that moved away).
    async fn disown(&self, node: &Node, session: &Id) {
        if let Err(e) = node.directory.disown(session.as_str()).await {
            tracing::warn!(%session, "adoption hint not removed: {e}");
        }
    }

    fn count_releases(&self, released: &[String], counts: &[u64]) {
        for (request, &n) in released.iter().zip(counts) {
            if n != 1 {
                bump(&self.stats.releases_doubled);
                tracing::error!(%request, times = n, "an engine request was released more than once");
            }
        }
    }

    /// Requests this node released a second time.
    fn released_again(&self, again: &[String]) {
        for request in again {
            bump(&self.stats.releases_doubled);
            tracing::error!(%request, "an engine request was released twice by this node");
        }
    }

    /// An open, a takeover or an adoption whose script failed. Refused:
    /// the copy here is dropped. Unanswered: the script may still have run
    /// (Redis stalled, or the answer was lost), so the copy is kept,
    /// detached: if the store has it as this node's, it expires here after
    /// the grace (or its client resumes it here) and its record goes with
    /// it; if not, its close is refused and it is dropped then. Dropping it
    /// now would leave a record no node holds.
    async fn failed(&self, node: &Node, session: &Id, e: &DirectoryError) -> Stored {
        if let DirectoryError::Lost { .. } = e {
            self.drop_local(session);
            bump(&self.stats.moved_away);
            tracing::debug!(%session, "moved to another node: {e}");
            self.disown(node, session).await;
            Stored::Lost
        } else {
            if let Some(fence) = self.manager.with_session(session, |s| s.fence().clone()) {
                let _ = self.manager.detach(&fence);
            }
            bump(&self.stats.store_failed);
            tracing::warn!(%session, "not stored (kept here, detached): {e}");
            Stored::Unavailable
        }
    }

    /// Stores the session's state with the facts of a change. A lone
    /// gateway has nothing to store.
    pub(crate) async fn store(&self, session: &Id, changes: Changes) -> Stored {
        let Some(node) = &self.node else {
            return Stored::Yes;
        };
        let Some((image, inc, version)) = self.image(node, session) else {
            return Stored::Lost;
        };
        let Changes {
            applied,
            bound,
            released,
        } = changes;
        let batch = node.shadows.batch(session, applied, bound, released);
        self.released_again(&batch.again);
        let since = std::time::Instant::now();
        let saved = node
            .directory
            .save(session.as_str(), inc, batch_save(&batch, &image, version))
            .await;
        self.metrics.stored(since);
        match saved {
            Ok(counts) => {
                self.count_releases(&batch.released, &counts);
                node.shadows.stored(session, &batch, &counts);
                Stored::Yes
            }
            Err(e) => match policy::save_failure(&e) {
                SaveFailure::StoreLost => {
                    tracing::warn!(%session, "the store lost this session's state: {e}");
                    self.write_back(node, session).await
                }
                SaveFailure::Unanswered => {
                    bump(&self.stats.store_failed);
                    tracing::warn!(%session, "not stored (kept here, sent again with the next save): {e}");
                    Stored::Unavailable
                }
                SaveFailure::Refused => self.failed(node, session, &e).await,
            },
        }
    }

    /// Records a session just opened here as this node's. `Lost` if the id
    /// already has a record (a live session on another node).
    pub(crate) async fn store_new(&self, session: &Id) -> Stored {
        let Some(node) = &self.node else {
            return Stored::Yes;
        };
        let Some((image, inc, version)) = self.image(node, session) else {
            return Stored::Lost;
        };
        let save = Save {
            image: &image,
            version,
            ..Save::default()
        };
        // The adoption hint first: a node killed between the two leaves a
        // hint without a record (harmless: adoption finds nothing), never a
        // record no live node would find.
        if let Err(e) = node.directory.own(session.as_str()).await {
            return self.failed(node, session, &e).await;
        }
        match node.directory.create_at(session.as_str(), inc, save).await {
            Ok(Some(0)) => {
                node.shadows.start(session, Vec::new(), Vec::new());
                Stored::Yes
            }
            // An earlier session of this id left its log: the shadow
            // continues it.
            Ok(Some(_)) => match self.load_shadow(node, session).await {
                Ok(()) => Stored::Yes,
                Err(e) => self.failed(node, session, &e).await,
            },
            Ok(None) => {
                self.drop_local(session);
                self.disown(node, session).await;
                Stored::Lost
            }
            Err(e) => self.failed(node, session, &e).await,
        }
    }

    /// A session closed here (by its client, by expiry, at shutdown): its
    /// record goes, with the requests the close released. Retried while
    /// Redis does not answer, so the record is not left behind.
    pub(crate) async fn store_close(
        &self,
        session: &str,
        incarnation: u64,
        released: Vec<String>,
    ) -> Stored {
        let Some(node) = &self.node else {
            return Stored::Yes;
        };
        let _closing = node.closing(session, incarnation);
        let id = Id::new(session).ok();
        let batch = match &id {
            Some(id) => {
                let batch = node.shadows.batch(id, Vec::new(), Vec::new(), released);
                self.released_again(&batch.again);
                batch
            }
            None => Batch {
                released,
                ..Default::default()
            },
        };
        // Retried for about 10 s: longer than a Sentinel failover takes
        // to promote a replica.
        let mut wait = std::time::Duration::from_millis(50);
        for _ in 0..14 {
            match node
                .directory
                .close(session, incarnation, batch_save(&batch, &[], 0))
                .await
            {
                Ok(counts) => {
                    tracing::debug!(%session, incarnation, "closed");
                    self.count_releases(&batch.released, &counts);
                    if let Some(id) = &id {
                        node.shadows.close(id, incarnation);
                    }
                    if let Err(e) = node.directory.disown(session).await {
                        tracing::warn!(%session, "adoption hint not removed: {e}");
                    }
                    return Stored::Yes;
                }
                Err(DirectoryError::Lost { .. }) => {
                    tracing::debug!(%session, incarnation, "close refused: another node holds it, or it was closed");
                    if let Some(id) = &id {
                        node.shadows.forget(id);
                    }
                    return Stored::Lost;
                }
                // The store lost the session: it is written back closed
                // (its log, release counts and tombstone), which is the
                // close.
                Err(e @ (DirectoryError::Missing { .. } | DirectoryError::Behind { .. })) => {
                    tracing::warn!(%session, "the store lost this session's state before its close: {e}");
                    let Some(id) = &id else { return Stored::Lost };
                    match self.write_back_closed(node, id, incarnation).await {
                        Stored::Unavailable => {
                            tokio::time::sleep(wait).await;
                            wait = (wait * 2).min(CLOSE_RETRY_MAX);
                        }
                        done => return done,
                    }
                }
                Err(e) => {
                    tracing::warn!(%session, "close not stored yet, retrying in {wait:?}: {e}");
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(CLOSE_RETRY_MAX);
                }
            }
        }
        bump(&self.stats.store_failed);
        if let Some(id) = &id {
            node.shadows.close(id, incarnation);
        }
        Stored::Unavailable
    }

    /// A resume of a session whose current state is in the directory:
    /// unless this node holds it at its stored incarnation, restore the
    /// image, check the client's token against it, take the session over
    /// (one more incarnation, compare-and-set on the stored one), release
    /// the previous owner's engine requests, and resume. Each round reads
    /// the facts and does what [`policy::resume`] decides.
    pub(crate) async fn take_over(&self, session: &Id, token: &str) -> Result<Resumed, Refusal> {
        let Some(node) = &self.node else {
            return Ok(Resumed::Here);
        };
        // A store that lost data lately (restarted empty, or failed over
        // to a replica that missed writes) may hold an older record than
        // the node that holds the session live: no takeover acts on a
        // record until every live node has written back what it holds.
        // The generation is asked now, not at the next heartbeat, so that
        // a loss seen first here counts at once.
        // A generation not read (the connection broke: the next command
        // may reach a new primary whose loss this node has not seen, and
        // whose stale loss notes would let the takeover through) waits
        // too.
        if !self.check_store_quietly().await || self.repairing(node).await {
            tracing::debug!(%session, "resume waits for the write-backs after the store's loss");
            return Err(Refusal::Unavailable);
        }
        // A race (another node moved first, or the owner stored a change
        // after the read) means: read again. A few rounds settle it.
        for _ in 0..4 {
            let record = match node.directory.load(session.as_str()).await {
                Ok(record) => record,
                Err(e) => {
                    tracing::warn!(%session, "cannot read the directory: {e}");
                    return Err(Refusal::Unavailable);
                }
            };
            let seen = Seen::of(record.as_ref());
            let held = Held {
                incarnation: self
                    .manager
                    .with_session(session, |s| s.fence().incarnation),
                shadow: node.shadows.has(session),
                closing: record
                    .as_ref()
                    .is_some_and(|r| node.is_closing(session.as_str(), r.incarnation)),
                claiming: node.is_claiming(session.as_str()),
            };
            match policy::resume(seen, node.directory.node(), held) {
                ResumeStep::WriteBack => {
                    tracing::warn!(%session, stored = ?seen.map(|r| r.incarnation), "the store does not hold this node's copy: writing the session back");
                    match self.write_back(node, session).await {
                        Stored::Yes => return Ok(Resumed::Here),
                        // Dropped instead (another node holds it, or this
                        // node cannot vouch for its log): read again.
                        Stored::Lost => continue,
                        Stored::Unavailable => return Err(Refusal::Unavailable),
                    }
                }
                // Unknown to the store. If it just lost its data, the
                // session may be on its way back (the node holding it
                // writes it back within a few heartbeats): try again. After
                // that, and within the grace, it was lost with the store.
                ResumeStep::Unknown => {
                    match node.directory.was_closed(session.as_str()).await {
                        Ok(true) => return Err(Refusal::Refused),
                        Ok(false) => {}
                        Err(_) => return Err(Refusal::Unavailable),
                    }
                    self.check_store().await;
                    tracing::debug!(%session, "resume of a session the store does not have");
                    return Err(self.after_loss(node).await);
                }
                // Held here since a takeover whose answer was lost: what
                // the store holds of it is read now.
                ResumeStep::Here { load_shadow } => {
                    if load_shadow {
                        if let Err(e) = self.load_shadow(node, session).await {
                            tracing::warn!(%session, "cannot read the directory: {e}");
                            return Err(Refusal::Unavailable);
                        }
                    }
                    return Ok(Resumed::Here);
                }
                ResumeStep::Refuse => {
                    tracing::debug!(%session, "resume of a session closing here: refused");
                    return Err(Refusal::Refused);
                }
                ResumeStep::Wait => return Err(Refusal::Unavailable),
                ResumeStep::TakeOver { drop_local } => {
                    if drop_local {
                        self.drop_local(session);
                    }
                }
            }
            let Some(record) = record else {
                return Err(Refusal::Refused);
            };
            match self.take_over_from(node, session, token, &record).await {
                Ok(resumed) => return Ok(resumed),
                Err(None) => {}
                Err(Some(refusal)) => return Err(refusal),
            }
        }
        Err(Refusal::Refused)
    }

    /// Takes `session` over from `record`: restores its image, checks the
    /// token, imports and resumes it, and claims the record. `Err(None)`:
    /// another node moved first; read again.
    async fn take_over_from(
        &self,
        node: &Node,
        session: &Id,
        token: &str,
        record: &Record,
    ) -> Result<Resumed, Option<Refusal>> {
        let restored = match Image::restore_with_capacities(&record.image) {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(%session, "stored image refused: {e}");
                return Err(Some(Refusal::Refused));
            }
        };
        let Some(owner) = owner_of(&restored) else {
            return Err(Some(Refusal::Refused));
        };
        let generation = restored.lease_generation();
        if restored.id() != session {
            return Err(Some(Refusal::Refused));
        }
        let verdict = policy::token(generation, TOKEN_LOOKAHEAD, |g| {
            self.keys.verify(session.as_str(), &owner, g, token)
        });
        match verdict {
            Token::Current => {}
            Token::Newer => {
                tracing::debug!(%session, generation, "resume token of a later generation than the stored image");
                return Err(Some(policy::newer_token(self.after_loss(node).await)));
            }
            Token::Wrong => {
                tracing::debug!(%session, generation, "resume token not of the stored generation");
                return Err(Some(Refusal::Refused));
            }
        }
        let fence = match self
            .manager
            .import(restored, record.incarnation.saturating_add(1))
        {
            Ok(fence) => fence,
            Err(refused) if refused.error.kind() == duplex_core::ErrorKind::CapacityExhausted => {
                return Err(Some(Refusal::Full))
            }
            Err(_) => return Err(Some(Refusal::Refused)),
        };
        let released = self.release_previous(session);
        let Ok(next) = self.manager.resume(&fence, generation) else {
            self.drop_local(session);
            return Err(Some(Refusal::Refused));
        };
        match self.claim(node, session, record, released).await {
            Ok(()) => {
                tracing::debug!(%session, incarnation = fence.incarnation, "taken over");
                bump(&self.stats.taken_over);
                Ok(Resumed::TakenOver(fence, owner, next))
            }
            Err(Stored::Lost) => Err(None),
            Err(Stored::Unavailable | Stored::Yes) => Err(Some(Refusal::Unavailable)),
        }
    }

    /// Releases every engine request the session holds (they were the
    /// previous owner's engine's); their ids.
    pub(super) fn release_previous(&self, session: &Id) -> Vec<String> {
        let ids: Vec<String> = self
            .manager
            .update(session, AnySession::release_all)
            .map(|ids| ids.iter().map(|id| id.as_str().to_owned()).collect())
            .unwrap_or_default();
        add(&self.stats.requests_taken_over, ids.len());
        ids
    }

    /// Moves the directory's record of `session`, as `read` found it, to
    /// the local copy's incarnation, with the local image and the released
    /// requests; drops the local copy if the record changed since.
    pub(super) async fn claim(
        &self,
        node: &Node,
        session: &Id,
        read: &Record,
        released: Vec<String>,
    ) -> Result<(), Stored> {
        // From here until the record is moved (or not), a write-back
        // leaves the imported copy alone. Nothing awaits between the
        // import and this point.
        let _claiming = node.claiming(session.as_str());
        let Some((image, _, version)) = self.image(node, session) else {
            return Err(Stored::Lost);
        };
        let changes = Changes {
            released,
            ..Changes::default()
        };
        // The adoption hint first (see `store_new`).
        if let Err(e) = node.directory.own(session.as_str()).await {
            return Err(self.failed(node, session, &e).await);
        }
        match node
            .directory
            .take_over(session.as_str(), read, changes.save(&image, version))
            .await
        {
            Ok(taken) => {
                self.count_releases(&changes.released, &taken.counts);
                // What the store holds of it, for its saves and a
                // write-back.
                node.shadows.start(session, taken.applied, taken.releases);
                Ok(())
            }
            Err(DirectoryError::Raced { .. }) => {
                self.drop_local(session);
                self.disown(node, session).await;
                Err(Stored::Lost)
            }
            Err(e) => Err(self.failed(node, session, &e).await),
        }
    }

    /// Starts the session's shadow from what the store holds of it.
    pub(super) async fn load_shadow(
        &self,
        node: &Node,
        session: &Id,
    ) -> Result<(), DirectoryError> {
        let applied = node.directory.applied_log(session.as_str()).await?;
        let counts = node.directory.releases(session.as_str()).await?;
        node.shadows.start(session, applied, counts);
        Ok(())
    }

    /// Hands every session off at shutdown, within `deadline`: its engine
    /// requests released (this engine stops), detached, stored; then this
    /// node stops announcing itself, so the others adopt at once what no
    /// client resumes. A session not stored by the deadline keeps its last
    /// stored state, which every acknowledgement so far is in.
    pub(crate) async fn drain(&self, deadline: std::time::Duration) {
        let Some(node) = &self.node else { return };
        self.draining
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let hand_off = async {
            for id in self.manager.session_ids() {
                let released: Vec<String> = self
                    .manager
                    .update(&id, AnySession::release_all)
                    .map(|ids| ids.iter().map(|r| r.as_str().to_owned()).collect())
                    .unwrap_or_default();
                if let Some(fence) = self.manager.with_session(&id, |s| s.fence().clone()) {
                    let _ = self.manager.detach(&fence);
                }
                let n = released.len();
                let changes = Changes {
                    released,
                    ..Changes::default()
                };
                if self.store(&id, changes).await == Stored::Yes {
                    bump(&self.stats.drained);
                    add(&self.stats.requests_closed, n);
                }
            }
        };
        if tokio::time::timeout(deadline, hand_off).await.is_err() {
            tracing::warn!(
                "drain not finished within {deadline:?}: the sessions left keep their last stored state"
            );
        }
        if let Err(e) = node.directory.leave().await {
            tracing::warn!("cannot withdraw the liveness key: {e}");
        }
    }
}
