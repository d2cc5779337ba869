//! A session's journal: the texts of its numbered events, back to back in
//! one ring of bytes.
//!
//! An event is copied in as it is sent (the message keeps its own buffer,
//! freed once written), and an acknowledgement drops a run of events by
//! moving the ring's start: journaling costs no allocation of its own (the
//! ring grows by doubling), and trimming frees nothing.
//! Only a replay makes texts again.

use std::collections::VecDeque;

/// Capacity a ring keeps once emptied (about 16 events); a bigger one is
/// given back, so a session that went quiet holds no more than this. A
/// streaming session whose client acknowledges every 64 events grows it
/// again each time, a few reallocations per 64 events.
const KEEP: usize = 4 * 1024;

/// The journaled events of one session, oldest first.
#[derive(Debug, Default)]
pub(super) struct Journal {
    /// `(seq, length)` of each event.
    index: VecDeque<(u64, usize)>,
    /// Their texts, in the same order.
    text: VecDeque<u8>,
}

impl Journal {
    /// Keeps `text` as event `seq` (the newest).
    pub(super) fn push(&mut self, seq: u64, text: &str) {
        self.index.push_back((seq, text.len()));
        self.text.extend(text.as_bytes());
    }

    /// Drops the oldest event: its number and length.
    pub(super) fn pop_front(&mut self) -> Option<(u64, usize)> {
        let (seq, len) = self.index.pop_front()?;
        self.text.drain(..len.min(self.text.len()));
        if self.index.is_empty() && self.text.capacity() > KEEP {
            self.text.shrink_to(KEEP);
        }
        Some((seq, len))
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
    fn an_emptied_ring_gives_back_a_grown_backlog() {
        let mut j = Journal::default();
        for seq in 1..=1_000u64 {
            j.push(seq, &"y".repeat(500));
        }
        while j.pop_front().is_some() {}
        assert_eq!(j.len(), 0);
        assert!(
            j.text.capacity() <= 2 * super::KEEP,
            "{}",
            j.text.capacity()
        );
        assert_eq!(j.texts_from(0).count(), 0);
    }
}
