"""The engine's wire-level identity."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class DuplexFence:
    """Which session, epoch, turn and response an event belongs to."""

    session_id: str
    epoch: int = 0
    turn_id: int = 0
    response_seq: int = 0
    incarnation: int = 0

    def next_epoch(self) -> "DuplexFence":
        """The fence after a barge-in: the next epoch, turn 0."""
        return DuplexFence(self.session_id, self.epoch + 1, 0, 0, self.incarnation)

    def next_turn(self) -> "DuplexFence":
        return DuplexFence(self.session_id, self.epoch, self.turn_id + 1, 0, self.incarnation)
