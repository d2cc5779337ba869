"""Differential: a session's input budgets beside vllm-omni 0.30.0's own
`DuplexEngineSession` (`vllm_omni/engine/duplex/session/engine_session.py`,
imported from the released wheel unmodified, with `vllm.logger` stubbed:
the one thing of vllm it imports) over generated sequences of
reservations and releases of bytes and turns, input clears and cancels.

The release passes the limits per call from its runtime configuration;
ours holds them per session, given to the manager under the release's
names. The same limits go to both. `release.py` says how the wheel is
found and loaded.

Where ours differs on purpose (docs/guarantees.md): a refusal raises
`input_backpressure` (the release answers False), and a reservation takes
the session's fence.
"""

import importlib
import random

import pytest

import duplex_session as d
from release import release_module


def release_engine_session():
    """The release's session module (see `release.py`)."""
    return release_module("vllm_omni.engine.duplex.session.engine_session")


def test_the_module_is_the_release_s_own():
    es = release_engine_session()
    assert es.__file__.endswith("vllm_omni/engine/duplex/session/engine_session.py")
    assert ".whl" in es.__file__


def admits(reserve) -> bool:
    """Whether our reservation was admitted: the release's answer is a
    bool, ours a value or `input_backpressure`."""
    try:
        reserve()
        return True
    except RuntimeError as e:
        assert e.kind == "input_backpressure"
        return False


def test_input_budgets_match_the_release():
    es = release_engine_session()
    config = importlib.import_module("vllm_omni.engine.duplex.config")
    for seed in range(300):
        rng = random.Random(seed)
        max_bytes = rng.choice([0, 3_200, 64_000, 16 * 1024 * 1024])
        max_turns = rng.choice([0, 1, 4])
        manager = d.DuplexSessionRuntimeManager(
            max_pending_input_bytes_per_session=max_bytes,
            max_pending_turns_per_session=max_turns,
        )
        fence = d.DuplexFence(f"session-{seed}")
        ours = manager.open_session(fence)
        theirs = es.DuplexEngineSession(session_id=f"session-{seed}", config=config.DuplexSessionConfig())
        for step in range(60):
            op = rng.choice(["reserve", "reserve", "reserve", "turn", "turn", "release", "release_turn", "release_all", "cancel"])
            size = rng.choice([0, 1, 640, 3_200, 32_000, 70_000])
            where = f"seed {seed} step {step} {op} {size}"
            if op == "reserve":
                admitted = theirs.reserve_input_bytes(size, limit=max_bytes)
                assert admits(lambda: ours.reserve_input_bytes(fence, size)) == admitted, where
            elif op == "turn":
                admitted = theirs.reserve_pending_turn(limit=max_turns)
                assert admits(lambda: ours.reserve_pending_turn(fence)) == admitted, where
            elif op == "release":
                theirs.release_input_bytes(size)
                ours.release_input_bytes(size)
            elif op == "release_turn":
                theirs.release_pending_turn()
                ours.release_pending_turn()
            elif op == "release_all":
                held = theirs.pending_input_bytes
                theirs.release_all_input_bytes()
                assert ours.release_all_input_bytes() == held, where
            else:
                held = (theirs.pending_input_bytes, theirs.pending_input_turns)
                theirs.cancel_pending_input()
                assert ours.cancel_pending_input() == {"bytes": held[0], "turns": held[1]}, where
            assert (ours.pending_input_bytes, ours.pending_input_turns) == (
                theirs.pending_input_bytes,
                theirs.pending_input_turns,
            ), where


def test_a_refused_reservation_changes_nothing_and_says_why(manager, fence):
    small = d.DuplexSessionRuntimeManager(max_pending_input_bytes_per_session=1_000, max_pending_turns_per_session=1)
    s = small.open_session(fence)
    assert s.reserve_input_bytes(fence, 600) == 600
    with pytest.raises(RuntimeError) as refused:
        s.reserve_input_bytes(fence, 401)
    assert refused.value.kind == "input_backpressure"
    assert "600 pending input bytes held, 401 more asked, limit 1000" in str(refused.value)
    assert s.pending_input_bytes == 600
    assert s.reserve_pending_turn(fence) == 1
    with pytest.raises(RuntimeError):
        s.reserve_pending_turn(fence)
    assert s.pending_input_turns == 1
    # Released as the model consumes it, never below zero.
    assert s.release_input_bytes(1_000) == 0
    assert s.release_pending_turn() == 0


def test_limits_default_to_the_release_s_and_are_checked(fence):
    s = d.DuplexSessionRuntimeManager().open_session(fence)
    assert s.reserve_input_bytes(fence, 16 * 1024 * 1024) == 16 * 1024 * 1024
    with pytest.raises(RuntimeError):
        s.reserve_input_bytes(fence, 1)
    for bad in (-1, 2**32):
        with pytest.raises(ValueError) as refused:
            d.DuplexSessionRuntimeManager(max_pending_input_bytes_per_session=bad)
        assert refused.value.kind == "invalid_config"
    with pytest.raises(TypeError):
        d.DuplexSessionRuntimeManager(max_pending_turns_per_session="4")


def test_a_detached_session_reserves_nothing_but_releases(fence):
    s = d.DuplexSessionRuntimeManager().open_session(fence)
    s.reserve_input_bytes(fence, 640)
    s.detach(fence)
    with pytest.raises(RuntimeError) as refused:
        s.reserve_input_bytes(fence, 640)
    assert refused.value.kind == "wrong_state"
    assert s.release_input_bytes(640) == 0
