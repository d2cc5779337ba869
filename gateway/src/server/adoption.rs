//! Adoption: the sessions of a node that stopped announcing itself
//! become a live node's, detached, with the dead node's engine requests
//! released in the script that moves them.

use crate::Id;

use crate::cluster::{DirectoryError, Node};
use crate::server::durable::Stored;
use crate::server::policy::{self, AdoptStep, Seen};
use crate::server::state::Shared;
use crate::stats::bump;

use duplex_std::Sessions as _;

use crate::server::durable::Image;

impl Shared {
    /// Adopts the sessions of nodes that stopped announcing themselves:
    /// each becomes this node's, detached, with its previous engine's
    /// requests released; it expires here after the grace unless its
    /// client resumes (here, or anywhere: a takeover moves it on).
    pub(crate) async fn adopt_dead(&self) {
        let Some(node) = &self.node else { return };
        // Right after the store lost data, a node that looks dead may only
        // have been cut off with everyone, and the records may be older
        // than the copies live nodes are writing back: nothing is adopted
        // until they are done.
        if self.repairing(node).await {
            return;
        }
        let Ok(nodes) = node.directory.nodes().await else {
            return;
        };
        for dead in nodes {
            if dead == node.directory.node() || node.directory.is_live(&dead).await.unwrap_or(true)
            {
                continue;
            }
            let Ok(sessions) = node.directory.owned_by(&dead).await else {
                continue;
            };
            let mut done = true;
            for session in sessions {
                match self.adopt(node, &dead, &session).await {
                    Ok(true) => {}
                    // Full here: left for a later round or another node.
                    Ok(false) => done = false,
                    Err(e) => {
                        tracing::warn!(%session, "adoption from {dead} not finished: {e}");
                        done = false;
                    }
                }
            }
            if done {
                if let Err(e) = node.directory.forget(&dead).await {
                    tracing::warn!("cannot forget dead node {dead}: {e}");
                }
            }
        }
    }

    /// Adopts one session of `dead`: whether it is settled (adopted here,
    /// or not `dead`'s any more); `false` leaves it for a later round.
    async fn adopt(&self, node: &Node, dead: &str, session: &str) -> Result<bool, DirectoryError> {
        let record = node.directory.load(session).await?;
        let Ok(id) = Id::new(session) else {
            tracing::error!(%session, "a directory entry that is not a session id");
            return Ok(true);
        };
        let seen = Seen::of(record.as_ref());
        let held_here = self.manager.with_session(&id, |_| ()).is_some();
        let record = match (policy::adopt(seen, dead, held_here), record) {
            (AdoptStep::TakeOver, Some(record)) => record,
            // A copy here is being taken over by a resume.
            (AdoptStep::Later, _) => return Ok(false),
            // Closed or taken over meanwhile.
            (AdoptStep::Settled | AdoptStep::TakeOver, _) => return Ok(true),
        };
        let restored = match Image::restore_with_capacities(&record.image) {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(%session, "stored image refused, not adopted: {e}");
                return Ok(true);
            }
        };
        let Ok(fence) = self
            .manager
            .import(restored, record.incarnation.saturating_add(1))
        else {
            return Ok(false); // full here: a later round, or another node
        };
        let released = self.release_previous(&id);
        // Its client is not connected here: the grace starts now.
        let _ = self.manager.detach(&fence);
        match self.claim(node, &id, &record, released).await {
            Ok(()) => {
                bump(&self.stats.adopted);
                Ok(true)
            }
            // Another node moved first: settled, by it.
            Err(Stored::Lost | Stored::Yes) => Ok(true),
            Err(Stored::Unavailable) => Ok(false),
        }
    }
}
