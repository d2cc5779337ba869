"""The seed's names, value types, enums and their messages."""

import dataclasses
import fractions
import gc
import pickle
import re

import pytest

import duplex_session as d

SEED_NAMES = {
    "DuplexFenceMismatchError",
    "DuplexStageBinding",
    "DuplexRequestResource",
    "DuplexInputAppend",
    "DuplexAppendReservation",
    "DuplexCompletedAppend",
    "DuplexSessionRuntimeState",
    "DuplexSessionRuntimeManager",
    "DuplexFence",
    "DuplexInputMode",
    "DuplexRuntimeCapabilities",
    "DuplexLeaseActivity",
    "DuplexLeaseConfig",
    "DuplexLeaseState",
    "DuplexSessionExpiry",
}


def test_every_seed_name_is_exported():
    assert SEED_NAMES <= set(d.__all__)
    for name in SEED_NAMES:
        assert getattr(d, name).__name__ == name


def test_fence_is_a_frozen_slotted_value():
    f = d.DuplexFence("s", epoch=1)
    assert (f.session_id, f.epoch, f.turn_id, f.response_seq, f.incarnation) == ("s", 1, 0, 0, 0)
    assert f == d.DuplexFence("s", 1, 0, 0, 0)
    assert hash(f) == hash(d.DuplexFence("s", epoch=1))
    assert not hasattr(f, "__dict__")
    with pytest.raises(dataclasses.FrozenInstanceError):
        f.epoch = 2
    assert dataclasses.replace(f, turn_id=3) == d.DuplexFence("s", 1, 3)
    assert [x.name for x in dataclasses.fields(f)] == ["session_id", "epoch", "turn_id", "response_seq", "incarnation"]
    assert repr(f) == "DuplexFence(session_id='s', epoch=1, turn_id=0, response_seq=0, incarnation=0)"


def test_enums_have_the_seed_values():
    assert d.DuplexInputMode("append_audio_chunk") is d.DuplexInputMode.APPEND_AUDIO_CHUNK
    assert [m.value for m in d.DuplexInputMode] == [
        "append_tokens",
        "append_audio_chunk",
        "replace_latest_chunk",
        "reencode_context",
        "rollback_to_checkpoint",
        "turn_commit_only",
    ]
    assert [a.value for a in d.DuplexLeaseActivity] == [
        "append", "signal", "playback_ack", "heartbeat", "attach", "detach", "resume", "model_output",
    ]
    assert d.DuplexLeaseActivity.HEARTBEAT == "heartbeat"


def test_capabilities_default_to_turn_commit_only():
    caps = d.DuplexRuntimeCapabilities()
    assert caps.input_modes == {d.DuplexInputMode.TURN_COMMIT_ONLY}
    assert caps.implementation_level == "serving_session_adapter"
    assert d.DuplexRuntimeCapabilities().input_modes is not caps.input_modes


def test_lease_config_defaults_and_refusals():
    c = d.DuplexLeaseConfig()
    assert (c.idle_ttl_s, c.disconnect_grace_s) == (300.0, 30.0)
    assert d.DuplexLeaseConfig(idle_ttl_s=None).idle_ttl_s is None
    with pytest.raises(ValueError, match="^idle_ttl_s must be positive or null$") as e:
        d.DuplexLeaseConfig(idle_ttl_s=0)
    assert e.value.kind == "invalid_config"
    with pytest.raises(ValueError, match="^disconnect_grace_s must be positive$"):
        d.DuplexLeaseConfig(disconnect_grace_s=-1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.idle_ttl_s = 1


def test_lease_configs_are_the_same_whichever_way_they_are_built():
    """Plain positive numbers take the constructor's native path; anything
    else the Python ``__init__``. Both give the same values, and only a
    config of plain numbers (which can be in no cycle) is left off the
    cycle collector's list."""
    built = [
        d.DuplexLeaseConfig(),
        d.DuplexLeaseConfig(5),
        d.DuplexLeaseConfig(5, 2.5),
        d.DuplexLeaseConfig(idle_ttl_s=None, disconnect_grace_s=3),
        d.DuplexLeaseConfig(disconnect_grace_s=3, idle_ttl_s=7.5),
    ]
    assert [(c.idle_ttl_s, c.disconnect_grace_s) for c in built] == [(300.0, 30.0), (5, 30.0), (5, 2.5), (None, 3), (7.5, 3)]
    assert not any(gc.is_tracked(c) for c in built)
    by_python = [d.DuplexLeaseConfig(True, 1.5), d.DuplexLeaseConfig(2**70), d.DuplexLeaseConfig(fractions.Fraction(1, 2))]
    assert [c.idle_ttl_s for c in by_python] == [True, 2**70, fractions.Fraction(1, 2)]
    assert gc.is_tracked(by_python[2])
    assert dataclasses.replace(built[2], idle_ttl_s=9) == d.DuplexLeaseConfig(9, 2.5)
    assert pickle.loads(pickle.dumps(built[2])) == built[2] and hash(built[2]) == hash(d.DuplexLeaseConfig(5, 2.5))

    class Sub(d.DuplexLeaseConfig):
        pass

    assert Sub(4) == Sub(4) and Sub(4).idle_ttl_s == 4 and type(Sub(4)) is Sub
    for args, kwargs, cls, message in [
        ((1, 2, 3), {}, TypeError, "takes from 1 to 3 positional arguments but 4 were given"),
        ((), {"foo": 1}, TypeError, "unexpected keyword argument 'foo'"),
        ((1,), {"idle_ttl_s": 2}, TypeError, "got multiple values for argument 'idle_ttl_s'"),
        (("x",), {}, TypeError, "idle_ttl_s must be a number of seconds or None, got str"),
        ((float("nan"),), {}, ValueError, "idle_ttl_s must be positive or null"),
    ]:
        with pytest.raises(cls, match=re.escape(message)) as e:
            d.DuplexLeaseConfig(*args, **kwargs)
        assert e.value.kind in ("invalid_argument", "invalid_config")


def test_mismatch_error_carries_both_fences():
    a, b = d.DuplexFence("s", 1), d.DuplexFence("s")
    e = d.DuplexFenceMismatchError(a, b)
    assert isinstance(e, RuntimeError)
    assert (e.expected, e.actual, e.kind) == (a, b, "fence_mismatch")
    assert str(e) == f"duplex fence mismatch: expected {a!r}, got {b!r}"


def test_value_dataclasses_have_the_seed_fields():
    f = d.DuplexFence("s")
    assert d.DuplexInputAppend(1, 2, 3) == d.DuplexInputAppend(seq=1, turn_seq=2, turn_id=3)
    assert d.DuplexStageBinding("r", f).request_id == "r"
    assert d.DuplexRequestResource(0, "r", f).submitted is False
    expiry = d.DuplexSessionExpiry("s", f, 1, "idle_ttl_expired", ("a",), ())
    with pytest.raises(dataclasses.FrozenInstanceError):
        expiry.reason = "x"
    completed = d.DuplexCompletedAppend(f, d.DuplexInputMode.APPEND_TOKENS, True, ({"v": 1},))
    assert completed.final is True
