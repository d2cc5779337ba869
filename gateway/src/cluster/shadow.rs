//! What a node knows the store holds for each session it holds live: the
//! session's applied log and its engine requests' release counts, with
//! which of them are stored and which are still to be (a save that went
//! unanswered). Every save continues from what is known stored, so a save
//! sent again adds nothing twice; and when the store loses a session, the
//! node writes it back from here ([`Directory::write_back`]).
//!
//! A session closed here is kept a while longer
//! ([`ClusterConfig::closed_retention`]): a store that loses its data
//! within that time gets the closed session's log back too.
//!
//! It costs what the store keeps per session, once more on the node that
//! holds it: about 60 bytes per applied chunk and per engine request, for
//! the session's life on this node and the retention after.
//!
//! [`ClusterConfig::closed_retention`]: crate::cluster::ClusterConfig::closed_retention
//!
//! [`Directory::write_back`]: crate::cluster::Directory::write_back

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::Id;

/// One session's shadow.
#[derive(Debug, Default)]
struct Shadow {
    /// The whole applied log, oldest first.
    applied: Vec<String>,
    /// How many of `applied` the store is known to hold.
    stored: usize,
    /// Every engine request: release count as the store should hold it,
    /// and whether this node released it.
    requests: HashMap<String, (u64, bool)>,
    /// Requests bound, and released, not yet known stored.
    bound: Vec<String>,
    released: Vec<String>,
}

/// One save's lists, as sent: what it carries beyond what is known stored.
#[derive(Debug, Default)]
pub(crate) struct Batch {
    /// The log length known stored before this save (`None`: the session
    /// has no shadow; nothing is deduplicated).
    pub(crate) base: Option<u64>,
    pub(crate) applied: Vec<String>,
    pub(crate) bound: Vec<String>,
    pub(crate) released: Vec<String>,
    /// Requests this node released a second time (a bug: counted as
    /// doubled, not sent).
    pub(crate) again: Vec<String>,
}

/// Everything to write a session back with.
#[derive(Debug, Default, Clone)]
pub(crate) struct Everything {
    pub(crate) applied: Vec<String>,
    pub(crate) requests: Vec<(String, u64, bool)>,
}

/// The shadows of every session a node holds, sharded so sessions on
/// different shards never contend.
#[derive(Debug)]
pub(crate) struct Shadows {
    shards: Vec<Mutex<HashMap<Id, Shadow>>>,
    /// Sessions closed here, oldest first: when, which, at which
    /// incarnation, and their log and requests.
    closed: Mutex<VecDeque<(Instant, Id, u64, Everything)>>,
    retention: Duration,
}

impl Default for Shadows {
    fn default() -> Self {
        Shadows::new(Duration::ZERO)
    }
}

impl Shadows {
    /// Shadows that keep closed sessions for `retention`.
    pub(crate) fn new(retention: Duration) -> Self {
        Shadows {
            shards: (0..64).map(|_| Mutex::new(HashMap::new())).collect(),
            closed: Mutex::new(VecDeque::new()),
            retention,
        }
    }

    /// The session was closed here at `incarnation`: its shadow is kept
    /// for the retention (a store that loses its data meanwhile gets its
    /// log back), then forgotten.
    pub(crate) fn close(&self, session: &Id, incarnation: u64) {
        let Some(s) = self.shard(session).remove(session) else {
            return;
        };
        if self.retention.is_zero() {
            return;
        }
        let all = Everything {
            applied: s.applied,
            requests: s
                .requests
                .into_iter()
                .map(|(r, (n, mine))| (r, n, mine))
                .collect(),
        };
        let mut closed = self.closed.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        while closed
            .front()
            .is_some_and(|(at, ..)| now.duration_since(*at) > self.retention)
        {
            closed.pop_front();
        }
        closed.push_back((now, session.clone(), incarnation, all));
    }

    /// The sessions closed here within the retention, oldest first.
    pub(crate) fn recently_closed(&self) -> Vec<(Id, u64, Everything)> {
        let closed = self.closed.lock().unwrap_or_else(PoisonError::into_inner);
        closed
            .iter()
            .filter(|(at, ..)| at.elapsed() <= self.retention)
            .map(|(_, id, inc, all)| (id.clone(), *inc, all.clone()))
            .collect()
    }

    fn shard(&self, session: &Id) -> MutexGuard<'_, HashMap<Id, Shadow>> {
        let h = session
            .as_str()
            .bytes()
            .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
            });
        let shard = &self.shards[(h % self.shards.len() as u64) as usize];
        shard.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts (or restarts) a session's shadow from what the store holds:
    /// its applied log and release counts.
    pub(crate) fn start(&self, session: &Id, applied: Vec<String>, counts: Vec<(String, u64)>) {
        let stored = applied.len();
        let shadow = Shadow {
            applied,
            stored,
            requests: counts.into_iter().map(|(r, n)| (r, (n, false))).collect(),
            ..Shadow::default()
        };
        self.shard(session).insert(session.clone(), shadow);
    }

    /// Whether the session has a shadow here.
    pub(crate) fn has(&self, session: &Id) -> bool {
        self.shard(session).contains_key(session)
    }

    /// Forgets a session (closed, or no longer this node's).
    pub(crate) fn forget(&self, session: &Id) {
        self.shard(session).remove(session);
    }

    /// Adds a change and returns what the next save of the session
    /// carries: everything not yet known stored.
    pub(crate) fn batch(
        &self,
        session: &Id,
        applied: Vec<String>,
        bound: Vec<String>,
        released: Vec<String>,
    ) -> Batch {
        let mut shard = self.shard(session);
        let Some(s) = shard.get_mut(session) else {
            return Batch {
                base: None,
                applied,
                bound,
                released,
                again: Vec::new(),
            };
        };
        s.applied.extend(applied);
        for r in bound {
            s.requests.entry(r.clone()).or_insert((0, false));
            s.bound.push(r);
        }
        let mut again = Vec::new();
        for r in released {
            let entry = s.requests.entry(r.clone()).or_insert((0, false));
            if entry.1 {
                // This node released it before: a second release (the
                // store counts a releaser once, so it is told here).
                again.push(r);
                continue;
            }
            *entry = (entry.0 + 1, true);
            s.released.push(r);
        }
        Batch {
            base: Some(s.stored as u64),
            applied: s.applied[s.stored..].to_vec(),
            bound: s.bound.clone(),
            released: s.released.clone(),
            again,
        }
    }

    /// A save carrying `batch` was stored, with `counts` per released
    /// request.
    pub(crate) fn stored(&self, session: &Id, batch: &Batch, counts: &[u64]) {
        let mut shard = self.shard(session);
        let Some(s) = shard.get_mut(session) else {
            return;
        };
        if let Some(base) = batch.base {
            let upto = usize::try_from(base).unwrap_or(usize::MAX) + batch.applied.len();
            s.stored = s.stored.max(upto.min(s.applied.len()));
        }
        s.bound.retain(|r| !batch.bound.contains(r));
        s.released.retain(|r| !batch.released.contains(r));
        for (r, &n) in batch.released.iter().zip(counts) {
            if let Some(entry) = s.requests.get_mut(r) {
                entry.0 = n;
            }
        }
    }

    /// Everything the session's write-back carries (`None`: no shadow).
    pub(crate) fn everything(&self, session: &Id) -> Option<Everything> {
        let shard = self.shard(session);
        let s = shard.get(session)?;
        Some(Everything {
            applied: s.applied.clone(),
            requests: s
                .requests
                .iter()
                .map(|(r, &(n, mine))| (r.clone(), n, mine))
                .collect(),
        })
    }

    /// A write-back carrying `back` was stored: all of it is known stored.
    pub(crate) fn written_back(&self, session: &Id, back: &Everything) {
        let mut shard = self.shard(session);
        let Some(s) = shard.get_mut(session) else {
            return;
        };
        s.stored = s.stored.max(back.applied.len().min(s.applied.len()));
        let known = |r: &String| back.requests.iter().any(|(w, _, _)| w == r);
        s.bound.retain(|r| !known(r));
        s.released.retain(|r| !known(r));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(s: &str) -> Id {
        Id::new(s).unwrap()
    }

    #[test]
    fn a_batch_carries_everything_not_known_stored() {
        let shadows = Shadows::default();
        let s = id("s");
        shadows.start(&s, vec!["0:1:a".into()], vec![("r0".into(), 1)]);
        let first = shadows.batch(&s, vec!["0:2:b".into()], vec!["r1".into()], vec![]);
        assert_eq!((first.base, first.applied.len()), (Some(1), 1));
        // The first save went unanswered: the next carries it again.
        let second = shadows.batch(&s, vec!["0:3:c".into()], vec![], vec!["r1".into()]);
        assert_eq!(second.base, Some(1));
        assert_eq!(second.applied, ["0:2:b", "0:3:c"]);
        assert_eq!((second.bound.len(), second.released.len()), (1, 1));
        // A second release by this node is told apart, not sent.
        let twice = shadows.batch(&s, vec![], vec![], vec!["r1".into()]);
        assert_eq!(
            (twice.released.len(), twice.again.as_slice()),
            (1, &["r1".to_owned()][..])
        );
        shadows.stored(&s, &second, &[1]);
        let third = shadows.batch(&s, vec![], vec![], vec![]);
        assert_eq!(third.base, Some(3));
        assert!(third.applied.is_empty() && third.bound.is_empty() && third.released.is_empty());
        // A late answer to the first save moves nothing back.
        shadows.stored(&s, &first, &[]);
        assert_eq!(shadows.batch(&s, vec![], vec![], vec![]).base, Some(3));
        let all = shadows.everything(&s).unwrap();
        assert_eq!(all.applied.len(), 3);
        let mut requests = all.requests;
        requests.sort();
        assert_eq!(requests, [("r0".into(), 1, false), ("r1".into(), 1, true)]);
    }

    #[test]
    fn a_session_without_a_shadow_is_sent_as_is() {
        let shadows = Shadows::default();
        let b = shadows.batch(&id("x"), vec!["0:1:a".into()], vec![], vec![]);
        assert_eq!((b.base, b.applied.len()), (None, 1));
        assert!(shadows.everything(&id("x")).is_none());
    }

    #[test]
    fn a_closed_session_is_kept_for_the_retention_only() {
        let kept = Shadows::new(Duration::from_secs(60));
        let s = id("s");
        kept.start(&s, vec!["0:1:a".into()], vec![]);
        kept.close(&s, 3);
        let closed = kept.recently_closed();
        assert_eq!(closed.len(), 1);
        assert_eq!((closed[0].1, closed[0].2.applied.len()), (3, 1));
        assert!(kept.everything(&s).is_none(), "no longer live here");
        let none = Shadows::new(Duration::ZERO);
        none.start(&s, vec![], vec![]);
        none.close(&s, 0);
        assert!(none.recently_closed().is_empty());
    }

    #[test]
    fn a_write_back_counts_as_stored() {
        let shadows = Shadows::default();
        let s = id("s");
        shadows.start(&s, vec![], vec![]);
        let _ = shadows.batch(&s, vec!["0:1:a".into()], vec!["r1".into()], vec![]);
        let all = shadows.everything(&s).unwrap();
        shadows.written_back(&s, &all);
        let next = shadows.batch(&s, vec![], vec![], vec![]);
        assert_eq!(next.base, Some(1));
        assert!(next.bound.is_empty());
    }
}
