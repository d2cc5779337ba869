//! When the store itself loses data (see `cluster::directory` for the
//! signs): this node writes back what it holds, and follows the takeovers
//! of its sessions by other nodes so that it never writes back a copy
//! another node has moved on from.

use std::sync::atomic::Ordering;

use crate::Id;
use futures_util::StreamExt;

use crate::cluster::{Node, WriteBack};
use crate::server::durable::Stored;
use crate::server::policy::{self, Refusal, Seen};
use crate::server::state::Shared;
use crate::stats::bump;

impl Shared {
    /// Writes back a session this node holds, after the store lost it or
    /// some of its writes: `Yes` once the store holds everything this node
    /// acknowledged of it; `Lost` (dropped here) if another node took it
    /// over or closed it meanwhile.
    pub(crate) async fn write_back(&self, node: &Node, session: &Id) -> Stored {
        // Being taken over or adopted here: imported, its record not moved
        // yet. Written back now, it would move the record around the
        // takeover's compare-and-set; the next sweep finds it settled.
        if node.is_claiming(session.as_str()) {
            return Stored::Unavailable;
        }
        let Some((image, inc, version)) = self.image(node, session) else {
            self.drop_local(session);
            return Stored::Lost;
        };
        // Held without a shadow: an open, a takeover or an adoption whose
        // script went unanswered. Only the store can say whether it ran:
        // if it holds the session as this node's at this incarnation, the
        // copy is the session and its log is read from there; if not (the
        // script never ran, or the store lost it since), this node cannot
        // vouch for the session's log. Written back anyway, at an
        // incarnation past the previous holder's, it would fence that
        // holder out and replace its log with an empty one: the copy is
        // dropped, and the holder writes the session back (or, if none
        // holds it, its client is told it was lost).
        if !node.shadows.has(session) {
            match node.directory.load(session.as_str()).await {
                Ok(r) if policy::vouch(Seen::of(r.as_ref()), node.directory.node(), inc) => {
                    if let Err(e) = self.load_shadow(node, session).await {
                        bump(&self.stats.store_failed);
                        tracing::warn!(%session, "not written back yet (its log not read): {e}");
                        return Stored::Unavailable;
                    }
                }
                Ok(_) => {
                    tracing::debug!(%session, incarnation = inc, "not written back: held without its log, and the store does not have it as this node's");
                    bump(&self.stats.unvouched);
                    self.drop_local(session);
                    return Stored::Lost;
                }
                Err(e) => {
                    bump(&self.stats.store_failed);
                    tracing::warn!(%session, "not written back yet (its record not read): {e}");
                    return Stored::Unavailable;
                }
            }
        }
        let Some(all) = node.shadows.everything(session) else {
            return Stored::Unavailable;
        };
        let back = WriteBack {
            image: &image,
            version,
            applied: &all.applied,
            requests: &all.requests,
        };
        match node.directory.write_back(session.as_str(), inc, back).await {
            Ok(true) => {
                tracing::debug!(%session, incarnation = inc, "written back");
                node.shadows.written_back(session, &all);
                bump(&self.stats.written_back);
                if let Err(e) = node.directory.own(session.as_str()).await {
                    tracing::warn!(%session, "adoption hint not written back: {e}");
                }
                Stored::Yes
            }
            Ok(false) => {
                tracing::debug!(%session, "not written back: another node took it over, or it was closed");
                bump(&self.stats.moved_away);
                self.drop_local(session);
                Stored::Lost
            }
            Err(e) => {
                bump(&self.stats.store_failed);
                tracing::warn!(%session, "not written back yet: {e}");
                Stored::Unavailable
            }
        }
    }

    /// Asks the store for its generation (at every heartbeat); if it
    /// changed, the store lost its data: every session held here is
    /// written back. `false` if the generation could not be read: what
    /// the store holds then may be a new primary's that this node has not
    /// seen yet, and no takeover or adoption may act on it.
    pub(crate) async fn check_store(&self) -> bool {
        self.check_store_as(true).await
    }

    /// As [`check_store`](Self::check_store), without a warning when the
    /// store does not answer (a resume's check: the heartbeat's says it).
    pub(crate) async fn check_store_quietly(&self) -> bool {
        self.check_store_as(false).await
    }

    async fn check_store_as(&self, warn: bool) -> bool {
        let Some(node) = &self.node else { return true };
        let read = match node.store_lost().await {
            Ok(false) => true,
            Ok(true) => {
                tracing::warn!(
                    "the session store lost its data (its generation changed): writing back every session held here"
                );
                bump(&self.stats.store_losses);
                true
            }
            Err(e) => {
                if warn {
                    tracing::warn!("cannot read the store's generation: {e}");
                } else {
                    tracing::debug!("cannot read the store's generation: {e}");
                }
                false
            }
        };
        // Noted for the others until the store takes it (a new primary
        // refuses writes until a replica joins it).
        if node.loss_unnoted.load(Ordering::SeqCst) {
            match node.directory.note_loss().await {
                Ok(()) => node.loss_unnoted.store(false, Ordering::SeqCst),
                Err(e) => tracing::debug!("cannot note the store's loss yet: {e}"),
            }
        }
        // A write-back the store did not answer is tried again at the
        // next check; only a complete one is noted.
        if node.sweep_due.swap(false, Ordering::SeqCst) {
            if self.write_back_all(node).await {
                node.recovering.store(false, Ordering::SeqCst);
            } else {
                node.sweep_due.store(true, Ordering::SeqCst);
            }
        }
        read
    }

    /// Whether a takeover or an adoption must wait: this node, or another
    /// live one, is still writing back what it held when the store lost
    /// data.
    pub(crate) async fn repairing(&self, node: &Node) -> bool {
        node.recovering.load(Ordering::SeqCst)
            || node.loss_unnoted.load(Ordering::SeqCst)
            || self.after_loss(node).await == Refusal::Unavailable
    }

    /// Writes back every session held here, and the logs of those closed
    /// here lately; then notes it for the others. `false` if the store did
    /// not answer for some of them.
    async fn write_back_all(&self, node: &Node) -> bool {
        let mut complete = true;
        for id in self.manager.session_ids() {
            complete &= self.write_back(node, &id).await != Stored::Unavailable;
        }
        for (id, incarnation, _) in node.shadows.recently_closed() {
            complete &= self.write_back_closed(node, &id, incarnation).await != Stored::Unavailable;
        }
        // A close not stored yet leaves the store's older record of that
        // session open: this node is not done until the close lands.
        complete &= !node.closes_pending();
        // The others now know that what this node held is back.
        if complete {
            if let Err(e) = node.directory.mark_recovered(&node.generation()).await {
                tracing::warn!("cannot note the write-back done: {e}");
                complete = false;
            }
        }
        complete
    }

    /// Writes back a session this node is closing (or closed within the
    /// retention) at `incarnation`: its log, release counts and tombstone,
    /// no record. A session held without a shadow (its open, takeover or
    /// adoption went unanswered) is not: this node cannot vouch for its
    /// log, and a tombstone would fence out a previous holder that can
    /// (see [`write_back`](Self::write_back)). It is forgotten (`Lost`).
    pub(crate) async fn write_back_closed(
        &self,
        node: &Node,
        session: &Id,
        incarnation: u64,
    ) -> Stored {
        let all = node.shadows.everything(session).or_else(|| {
            node.shadows
                .recently_closed()
                .into_iter()
                .rev()
                .find(|(id, inc, _)| id == session && *inc == incarnation)
                .map(|(_, _, all)| all)
        });
        let Some(all) = all else {
            tracing::debug!(%session, incarnation, "closed without its log, which the store does not have: nothing to write back");
            bump(&self.stats.unvouched);
            return Stored::Lost;
        };
        let back = WriteBack {
            applied: &all.applied,
            requests: &all.requests,
            ..WriteBack::default()
        };
        match node
            .directory
            .write_back(session.as_str(), incarnation, back)
            .await
        {
            Ok(true) => {
                tracing::debug!(%session, incarnation, "written back closed");
                bump(&self.stats.written_back);
                node.shadows.close(session, incarnation);
                Stored::Yes
            }
            Ok(false) => {
                tracing::debug!(%session, incarnation, "not written back closed: another node holds it, or it was closed");
                node.shadows.forget(session);
                Stored::Lost
            }
            Err(e) => {
                tracing::warn!(%session, "closed session not written back yet: {e}");
                Stored::Unavailable
            }
        }
    }

    /// What to answer a resume of a session the store does not hold at
    /// the client's state, if the store lost data lately: `Unavailable`
    /// (try again) while a live node may still be writing it back,
    /// `StateLost` once every live node has written back what it held,
    /// `Refused` long after (within the grace, it would have expired).
    pub(crate) async fn after_loss(&self, node: &Node) -> Refusal {
        let directory = &node.directory;
        let Ok(since) = directory.since_loss().await else {
            return Refusal::Unavailable;
        };
        if let Some(answer) = policy::loss_window(since, self.config.grace, node.liveness_ttl) {
            return answer;
        }
        let (Ok(nodes), Ok(done)) = (
            directory.nodes().await,
            directory.recovered(&node.generation()).await,
        ) else {
            return Refusal::Unavailable;
        };
        let mut still_writing_back = false;
        for other in nodes.iter().filter(|n| !done.contains(n)) {
            if directory.is_live(other).await.unwrap_or(true) {
                still_writing_back = true;
                break;
            }
        }
        policy::after_nodes(still_writing_back)
    }

    /// Follows the notices of this node's sessions taken over elsewhere
    /// (resubscribing whenever the store's connection breaks) until
    /// `stopped`, dropping each copy left behind.
    pub(crate) async fn follow_moves(&self, mut stopped: tokio::sync::watch::Receiver<bool>) {
        let Some(node) = &self.node else { return };
        let mut quiet = false;
        loop {
            match node.directory.moved_notices().await {
                Ok(notices) => {
                    quiet = false;
                    let mut notices = std::pin::pin!(notices);
                    loop {
                        let notice = tokio::select! {
                            _ = stopped.wait_for(|s| *s) => return,
                            notice = notices.next() => notice,
                        };
                        match notice {
                            Some(Some((session, incarnation))) => {
                                self.moved(&session, incarnation).await;
                            }
                            Some(None) => {}
                            None => break,
                        }
                    }
                }
                // Said once per outage, not at every retry.
                Err(e) if !quiet => {
                    quiet = true;
                    tracing::warn!("cannot follow this node's sessions moving away: {e}");
                }
                Err(_) => {}
            }
            tokio::select! {
                _ = stopped.wait_for(|s| *s) => return,
                () = tokio::time::sleep(std::time::Duration::from_millis(200)) => {}
            }
        }
    }

    /// Another node took `session` over at `incarnation`: a copy here at
    /// an older incarnation is dropped (its requests are the new owner's).
    async fn moved(&self, session: &str, incarnation: u64) {
        let Ok(id) = Id::new(session) else { return };
        let local = self.manager.with_session(&id, |s| s.fence().incarnation);
        if policy::moved_away(local, incarnation) {
            tracing::debug!(%session, incarnation, "taken over elsewhere: the copy here is dropped");
            bump(&self.stats.moved_away);
            self.drop_local(&id);
            self.journals.remove(&id).await;
        }
    }
}
