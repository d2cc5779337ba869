//! The cluster's decisions, as pure functions of what the store holds of a
//! session (its record), what this node holds (its local copy and that
//! copy's shadow) and what this node is doing with it (closing, claiming).
//!
//! The async drivers (`durable`, `recovery`, `adoption`) read the facts,
//! ask here what to do, and do it: no decision below awaits, reads a
//! clock or touches Redis, so each is tested over every combination of its
//! facts (`tests` at the end).
//!
//! | decision | facts | steps |
//! |---|---|---|
//! | [`resume`] | record, local copy, closing, claiming | write back, resume here, refuse, wait, take over |
//! | [`token`] | the stored generation, the token's check | current, newer (the store is behind), wrong |
//! | [`loss_window`], [`after_nodes`], [`newer_token`] | time since the store's loss, grace, liveness TTL, the nodes' write-backs | refused, try again, state lost |
//! | [`adopt`] | record, the dead node, a local copy | settled, later, take over |
//! | [`vouch`] | record, this node, the copy's incarnation | read the log, drop the copy |
//! | [`save_failure`] | the directory's refusal | write back, keep and resend, drop |
//! | [`moved_away`] | the copy's incarnation, the notice's | drop the copy or not |

use std::time::Duration;

use crate::cluster::{DirectoryError, Record};

/// What a decision reads of the store's record of a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Seen<'a> {
    /// The node that owns it.
    pub(crate) node: &'a str,
    /// Its incarnation (the fencing token).
    pub(crate) incarnation: u64,
}

impl<'a> Seen<'a> {
    /// What a decision reads of `record` (`None`: the store has none).
    pub(crate) fn of(record: Option<&'a Record>) -> Option<Self> {
        record.map(|r| Seen {
            node: &r.node,
            incarnation: r.incarnation,
        })
    }
}

/// What this node holds of a session, and is doing with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Held {
    /// The local copy's incarnation (`None`: no copy here).
    pub(crate) incarnation: Option<u64>,
    /// The copy has a shadow (this node knows what the store holds of its
    /// log and releases).
    pub(crate) shadow: bool,
    /// A close of it at the record's incarnation is not stored yet.
    pub(crate) closing: bool,
    /// A takeover or adoption of it is in progress here.
    pub(crate) claiming: bool,
}

/// What a resume does with a session, given the store's record and this
/// node's copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ResumeStep {
    /// The copy here is newer than what the store holds (or the store has
    /// none): write it back; written, it resumes here.
    WriteBack,
    /// Neither the store nor this node has it: a tombstone refuses it,
    /// else the store's recent loss decides (see [`loss_window`]).
    Unknown,
    /// This node holds it at the stored incarnation: resume it here
    /// (reading its shadow from the store first if it has none).
    Here {
        /// The copy has no shadow yet (held since a takeover whose answer
        /// was lost).
        load_shadow: bool,
    },
    /// Closed or expired here, its close not stored yet: not revived.
    Refuse,
    /// Another resume of it is taking it over here: that one decides.
    Wait,
    /// Take it over from the record (restore, check the token, claim).
    TakeOver {
        /// A stale copy here goes first (its requests are the record's
        /// owner's to release).
        drop_local: bool,
    },
}

/// What a resume does with a session: the store's record (`None`: the store
/// has none) against this node's copy.
pub(crate) fn resume(record: Option<Seen<'_>>, me: &str, held: Held) -> ResumeStep {
    let Some(record) = record else {
        // A copy here of a session the store does not have: the store lost
        // it (a closed one leaves a tombstone, and the write-back refuses
        // it).
        return if held.incarnation.is_some() {
            ResumeStep::WriteBack
        } else {
            ResumeStep::Unknown
        };
    };
    match held.incarnation {
        // Held at a later incarnation than the store's: the store lost this
        // node's takeover (a failover to a replica that missed it).
        Some(inc) if inc > record.incarnation => ResumeStep::WriteBack,
        Some(inc) if inc == record.incarnation && record.node == me => ResumeStep::Here {
            load_shadow: !held.shadow,
        },
        None if record.node == me && held.closing => ResumeStep::Refuse,
        _ if held.claiming => ResumeStep::Wait,
        local => ResumeStep::TakeOver {
            drop_local: local.is_some(),
        },
    }
}

/// A resume token against the stored image's lease generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Token {
    /// It resumes the stored generation.
    Current,
    /// It resumes one of the next `lookahead` generations: it was handed
    /// out after the state the store holds (the store lost the newer one).
    Newer,
    /// It resumes none of them.
    Wrong,
}

/// Checks a token (`verifies(g)`: it resumes generation `g`) against the
/// stored `generation` and the `lookahead` generations after it.
pub(crate) fn token(generation: u64, lookahead: u64, verifies: impl Fn(u64) -> bool) -> Token {
    if verifies(generation) {
        Token::Current
    } else if (1..=lookahead).any(|d| verifies(generation.saturating_add(d))) {
        Token::Newer
    } else {
        Token::Wrong
    }
}

/// Why a resume could not take a session over from the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// No such session, a wrong token, or another node moved first.
    Refused,
    /// The gateway is full.
    Full,
    /// The store has no such session and lost its data a moment ago: the
    /// session may have been lost with it.
    StateLost,
    /// Redis did not answer, or the store is being repaired: try again.
    Unavailable,
}

/// What to answer a resume the store cannot serve (no record, or a token of
/// a newer generation than the record's), by how long ago the store lost
/// data (`None`: not lately), against the session grace and the nodes'
/// liveness TTL. `None`: ask the nodes ([`after_nodes`]).
pub(crate) fn loss_window(
    since: Option<Duration>,
    grace: Duration,
    ttl: Duration,
) -> Option<Refusal> {
    match since {
        None => Some(Refusal::Refused),
        // Long after: within the grace, the session would have expired.
        Some(since) if since > grace + ttl * 2 => Some(Refusal::Refused),
        // Every live node announces itself each quarter TTL: by half of it,
        // each has seen the store's new generation. Before, try again.
        Some(since) if since < ttl / 2 => Some(Refusal::Unavailable),
        Some(_) => None,
    }
}

/// The answer once the nodes were asked whether a live one has not yet
/// written back what it held: try again while one has not; once all have,
/// the session was lost with the store.
pub(crate) fn after_nodes(a_live_node_is_still_writing_back: bool) -> Refusal {
    if a_live_node_is_still_writing_back {
        Refusal::Unavailable
    } else {
        Refusal::StateLost
    }
}

/// The answer to a token of a newer generation than the stored image's,
/// given what the store's recent loss says ([`loss_window`],
/// [`after_nodes`]): a store that did not lose data lately still lost this
/// session's newest state (a replica that missed writes was promoted).
pub(crate) fn newer_token(after_loss: Refusal) -> Refusal {
    match after_loss {
        Refusal::Refused => Refusal::StateLost,
        other => other,
    }
}

/// What an adoption does with one session a dead node owned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AdoptStep {
    /// Nothing to adopt: closed, or taken over by another node meanwhile.
    Settled,
    /// Not now: a copy here is being taken over by a resume.
    Later,
    /// Restore it from the record, release the dead node's requests, claim.
    TakeOver,
}

/// What to do with `record` (the store's record of a session `dead` owned)
/// when this node may hold a copy of it (`held_here`).
pub(crate) fn adopt(record: Option<Seen<'_>>, dead: &str, held_here: bool) -> AdoptStep {
    match record {
        None => AdoptStep::Settled,
        Some(r) if r.node != dead => AdoptStep::Settled,
        Some(_) if held_here => AdoptStep::Later,
        Some(_) => AdoptStep::TakeOver,
    }
}

/// Whether a copy held without a shadow is the session: only if the store
/// holds it as this node's at the copy's incarnation (the open, takeover or
/// adoption that made it did run). Otherwise this node cannot vouch for its
/// log and drops it, rather than fence out a holder that can.
pub(crate) fn vouch(record: Option<Seen<'_>>, me: &str, incarnation: u64) -> bool {
    record.is_some_and(|r| r.node == me && r.incarnation == incarnation)
}

/// What a save the directory refused means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SaveFailure {
    /// The store lost the session's state (no record and no tombstone, or
    /// a shorter log than this node stored): write it back.
    StoreLost,
    /// The store did not answer, or no replica confirmed: not acknowledged;
    /// the copy is kept and its next save sends the change again.
    Unanswered,
    /// Refused for good (another node owns it now, or it was closed): the
    /// copy here is dropped, or kept detached where the refusal may hide a
    /// script that ran (see `durable`'s `failed`).
    Refused,
}

/// Classifies a save's refusal.
pub(crate) fn save_failure(e: &DirectoryError) -> SaveFailure {
    match e {
        DirectoryError::Missing { .. } | DirectoryError::Behind { .. } => SaveFailure::StoreLost,
        DirectoryError::Redis(_) | DirectoryError::Unreplicated { .. } => SaveFailure::Unanswered,
        _ => SaveFailure::Refused,
    }
}

/// Whether a notice that another node took the session over at `notice`
/// makes the copy here (at `local`, `None`: no copy) stale.
pub(crate) fn moved_away(local: Option<u64>, notice: u64) -> bool {
    local.is_some_and(|inc| inc < notice)
}

#[cfg(test)]
mod tests;
