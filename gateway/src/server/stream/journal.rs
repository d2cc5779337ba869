//! A session's journal: the texts of its numbered events, back to back in
//! one ring of bytes.
//!
//! An event is copied in as it is sent (the message keeps its own buffer,
//! freed once written), and an acknowledgement drops a run of events by
//! moving the ring's start: journaling costs no allocation of its own (the
//! ring grows by doubling), and trimming frees nothing.
//! Only a replay makes texts again.

use std::collections::VecDeque;

/// Capacity a quiet session's ring keeps (about 16 events).
///
/// A ring emptied by an acknowledgement keeps its capacity while the
/// session streams, and gives back what it did not use: down to twice the
/// most it held since it was last emptied (at least this), once that was
/// a quarter of its capacity or less. So a session whose client
/// acknowledges every 64 events reuses one ring (it used to be cut to
/// this at every acknowledgement and grown again by doubling: three
/// reallocations and about 60 KB of fresh memory per 64 events), and a
/// session that goes quiet is back to this after its next
/// acknowledgement, or when its socket detaches ([`Journal::spare`]).
const KEEP: usize = 4 * 1024;

/// The journaled events of one session, oldest first.
#[derive(Debug, Default)]
pub(super) struct Journal {
    /// `(seq, length)` of each event.
    index: VecDeque<(u64, usize)>,
    /// Their texts, in the same order.
    text: VecDeque<u8>,
    /// The most text bytes held since the ring was last emptied.
    peak: usize,
}

impl Journal {
    /// Keeps `text` as event `seq` (the newest).
    pub(super) fn push(&mut self, seq: u64, text: &str) {
        self.index.push_back((seq, text.len()));
        self.text.extend(text.as_bytes());
        self.peak = self.peak.max(self.text.len());
    }

    /// Drops the oldest event: its number and length.
    pub(super) fn pop_front(&mut self) -> Option<(u64, usize)> {
        let (seq, len) = self.index.pop_front()?;
        self.text.drain(..len.min(self.text.len()));
        if self.index.is_empty() {
            // What the last run of events used decides what is kept.
            if self.text.capacity() > KEEP && self.peak.saturating_mul(4) <= self.text.capacity() {
                self.text.shrink_to(KEEP.max(self.peak.saturating_mul(2)));
            }
            self.peak = 0;
        }
        Some((seq, len))
    }

    /// Gives back the capacity the kept events do not use, down to
    /// [`KEEP`]: the session's socket went away, and a ring sized for its
    /// stream would wait unused.
    pub(super) fn spare(&mut self) {
        self.text.shrink_to(KEEP.max(self.text.len()));
        self.index.shrink_to_fit();
        self.peak = self.text.len();
    }

    /// The oldest event's number.
    pub(super) fn first(&self) -> Option<u64> {
        self.index.front().map(|(seq, _)| *seq)
    }

    /// How many events are kept.
    pub(super) fn len(&self) -> usize {
        self.index.len()
    }

    /// Forgets every event.
    pub(super) fn clear(&mut self) {
        self.index.clear();
        self.text.clear();
        self.text.shrink_to(KEEP);
        self.peak = 0;
    }

    /// The kept events' numbers, oldest first.
    pub(super) fn seqs(&self) -> impl Iterator<Item = u64> + '_ {
        self.index.iter().map(|(seq, _)| *seq)
    }

    /// The events numbered `from` on, as texts, oldest first.
    pub(super) fn texts_from(&self, from: u64) -> impl Iterator<Item = (u64, String)> + '_ {
        let mut at = 0;
        self.index.iter().filter_map(move |&(seq, len)| {
            let start = at;
            at += len;
            if seq < from {
                return None;
            }
            let bytes: Vec<u8> = self.text.range(start..at).copied().collect();
            // Only whole `&str`s go in, so each range is UTF-8.
            String::from_utf8(bytes).ok().map(|text| (seq, text))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::Journal;

    #[test]
    fn texts_come_back_in_order_after_trims_wrap_the_ring() {
        let mut j = Journal::default();
        for seq in 1..=2_000u64 {
            j.push(
                seq,
                &format!(
                    "{{\"n\":{seq},\"é\":\"{}\"}}",
                    "x".repeat(seq as usize % 97)
                ),
            );
            if seq % 7 == 0 {
                while j.first().is_some_and(|s| s + 10 <= seq) {
                    j.pop_front();
                }
            }
        }
        let kept: Vec<(u64, String)> = j.texts_from(0).collect();
        assert_eq!(kept.len(), j.len());
        assert_eq!(kept.first().map(|(s, _)| *s), j.first());
        for (seq, text) in &kept {
            let expected = format!(
                "{{\"n\":{seq},\"é\":\"{}\"}}",
                "x".repeat(*seq as usize % 97)
            );
            assert_eq!(text, &expected);
        }
        let tail: Vec<u64> = j.texts_from(1_995).map(|(s, _)| s).collect();
        assert_eq!(tail, (1_995..=2_000).collect::<Vec<_>>());
        assert_eq!(j.seqs().last(), Some(2_000));
    }

    #[test]
    fn a_ring_emptied_at_every_acknowledgement_is_reused() {
        // A client that acknowledges every 64 events empties the ring each
        // time: after the first run, the ring is never reallocated.
        let mut j = Journal::default();
        let event = "e".repeat(250);
        let mut seq = 0;
        let mut capacity = None;
        for _ in 0..20 {
            for _ in 0..64 {
                seq += 1;
                j.push(seq, &event);
            }
            while j.pop_front().is_some() {}
            let now = j.text.capacity();
            assert!(now >= 64 * 250, "{now}");
            assert_eq!(*capacity.get_or_insert(now), now);
        }
    }

    #[test]
    fn an_emptied_ring_gives_back_a_grown_backlog() {
        let mut j = Journal::default();
        for seq in 1..=1_000u64 {
            j.push(seq, &"y".repeat(500));
        }
        while j.pop_front().is_some() {}
        assert_eq!(j.len(), 0);
        // The session goes quiet: its next run is one event.
        j.push(1_001, "{}");
        j.pop_front();
        assert!(
            j.text.capacity() <= 2 * super::KEEP,
            "{}",
            j.text.capacity()
        );
        assert_eq!(j.texts_from(0).count(), 0);
    }

    #[test]
    fn a_detached_ring_keeps_what_its_events_need() {
        let mut j = Journal::default();
        for seq in 1..=200u64 {
            j.push(seq, &"z".repeat(500));
        }
        while j.first().is_some_and(|s| s <= 190) {
            j.pop_front();
        }
        j.spare();
        assert!(
            j.text.capacity() <= 2 * super::KEEP,
            "{}",
            j.text.capacity()
        );
        let kept: Vec<u64> = j.texts_from(0).map(|(s, _)| s).collect();
        assert_eq!(kept, (191..=200).collect::<Vec<_>>());
    }
}
