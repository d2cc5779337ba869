//! The responses in flight, by session. A response belongs to its session,
//! not to the socket whose commit started it: after a client resumes on a
//! new socket, a barge-in there cancels the response the old socket
//! started (with a real model, that is GPU time given back at once).
//!
//! Every entry is removed exactly once, by whoever gets there first: the
//! response's own task when it ends, or a barge-in, a close or a shutdown,
//! which also abort its task. A session with nothing in flight has no
//! entry, so the map holds only sessions that are answering now.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::Id;
use tokio::task::AbortHandle;

/// A response being generated.
#[derive(Debug)]
pub(crate) struct Active {
    /// The request bound for it on the session's response stage.
    pub(crate) request: Id,
    /// The epoch and turn of the user turn it answers.
    pub(crate) epoch: u64,
    pub(crate) turn: u64,
    /// Its task (the engine's future).
    pub(crate) task: AbortHandle,
}

type Shard = HashMap<Id, Vec<Active>>;

/// The responses in flight of every session, sharded by session id so
/// sessions on different shards never contend. Each shard's lock is held
/// only for map work and, in a cancel, for the manager's shard lock
/// inside it (always in that order).
#[derive(Debug)]
pub(crate) struct Responses {
    hasher: RandomState,
    shards: Box<[Mutex<Shard>]>,
}

impl Default for Responses {
    fn default() -> Self {
        Responses {
            hasher: RandomState::new(),
            shards: (0..64).map(|_| Mutex::default()).collect(),
        }
    }
}

impl Responses {
    /// The responses of `session`, locked.
    pub(crate) fn of<'a>(&'a self, session: &'a Id) -> InFlight<'a> {
        let at = self.hasher.hash_one(session) as usize % self.shards.len();
        let shard = self.shards[at]
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        InFlight { shard, session }
    }

    /// How many sessions have a response in flight.
    #[cfg(test)]
    pub(crate) fn sessions(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().unwrap_or_else(PoisonError::into_inner).len())
            .sum()
    }
}

/// One session's responses in flight, under its shard's lock.
pub(crate) struct InFlight<'a> {
    shard: MutexGuard<'a, Shard>,
    session: &'a Id,
}

impl InFlight<'_> {
    /// Adds a response.
    pub(crate) fn push(&mut self, active: Active) {
        if let Some(list) = self.shard.get_mut(self.session) {
            list.push(active);
        } else {
            self.shard.insert(self.session.clone(), vec![active]);
        }
    }

    /// The responses in flight.
    #[cfg(test)]
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Active> {
        self.shard.get(self.session).into_iter().flatten()
    }

    /// Removes `request`'s entry (its task ended it); whether it was
    /// there (a barge-in or a close did not get there first).
    pub(crate) fn finish(&mut self, request: &Id) -> bool {
        self.remove_where(|a| a.request == *request).is_some()
    }

    /// Aborts and removes every response `cancel` picks; what it removed.
    pub(crate) fn cancel(&mut self, cancel: impl Fn(&Active) -> bool) -> Vec<Active> {
        let mut removed = Vec::new();
        while let Some(active) = self.remove_where(&cancel) {
            active.task.abort();
            removed.push(active);
        }
        removed
    }

    /// Aborts and removes every response (a close, a shutdown, the session
    /// gone from this node); what it removed.
    pub(crate) fn stop(&mut self) -> Vec<Active> {
        self.cancel(|_| true)
    }

    fn remove_where(&mut self, pick: impl Fn(&Active) -> bool) -> Option<Active> {
        let list = self.shard.get_mut(self.session)?;
        let at = list.iter().position(pick)?;
        let active = list.swap_remove(at);
        if list.is_empty() {
            self.shard.remove(self.session);
        }
        Some(active)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(s: &str) -> Id {
        Id::new(s).unwrap()
    }

    fn active(request: &str, epoch: u64) -> Active {
        let task = tokio::spawn(std::future::pending::<()>());
        Active {
            request: id(request),
            epoch,
            turn: 0,
            task: task.abort_handle(),
        }
    }

    #[tokio::test]
    async fn each_entry_is_removed_once_and_empty_sessions_leave() {
        let responses = Responses::default();
        let (a, b) = (id("a"), id("b"));
        responses.of(&a).push(active("r1", 0));
        responses.of(&a).push(active("r2", 1));
        responses.of(&b).push(active("r3", 0));
        assert_eq!(responses.sessions(), 2);
        assert!(responses.of(&a).finish(&id("r1")));
        assert!(!responses.of(&a).finish(&id("r1")), "removed once");
        assert!(!responses.of(&b).finish(&id("r2")), "another session's");
        let cancelled = responses.of(&a).cancel(|r| r.epoch < 2);
        assert_eq!(cancelled.len(), 1);
        assert_eq!(cancelled[0].request, id("r2"));
        assert!(
            !responses.of(&a).finish(&id("r2")),
            "a cancel got there first"
        );
        assert_eq!(responses.sessions(), 1);
        assert_eq!(responses.of(&b).stop().len(), 1);
        assert_eq!(responses.sessions(), 0);
        assert_eq!(responses.of(&b).iter().count(), 0);
    }

    #[tokio::test]
    async fn a_cancel_aborts_what_it_removes_and_keeps_the_rest() {
        let responses = Responses::default();
        let s = id("s");
        responses.of(&s).push(active("old", 3));
        responses.of(&s).push(active("new", 4));
        let cancelled = responses.of(&s).cancel(|r| r.epoch < 4);
        assert_eq!(cancelled.len(), 1);
        assert_eq!(cancelled[0].request, id("old"));
        tokio::task::yield_now().await;
        assert!(cancelled[0].task.is_finished(), "its task was aborted");
        let kept: Vec<_> = responses.of(&s).iter().map(|a| a.request.clone()).collect();
        assert_eq!(kept, vec![id("new")]);
        for a in responses.of(&s).stop() {
            assert_eq!(a.request, id("new"));
        }
    }
}
