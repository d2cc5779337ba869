"""Fixtures: a manual clock in float seconds, managers of both profiles."""

import pytest

import duplex_session as d

AUDIO = d.DuplexInputMode.APPEND_AUDIO_CHUNK


class Clock:
    """A clock the test sets: float seconds, as the seed's clocks return."""

    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def manager(clock):
    return d.DuplexSessionRuntimeManager(clock=clock)


@pytest.fixture
def fence():
    return d.DuplexFence("session-6f1c2a9e-6a3b-4f0e-9a57-2d8c1e4b7f30")


@pytest.fixture
def session(manager, fence):
    caps = d.DuplexRuntimeCapabilities(input_modes={AUDIO, d.DuplexInputMode.TURN_COMMIT_ONLY})
    return manager.open_session(fence, capabilities=caps)
