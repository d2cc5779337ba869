"""Calls of the wrong shape, and assignments the package refuses.

A call with too many positional arguments, a missing or unknown keyword, or
an argument given twice raises the `TypeError` Python raises for it, with
Python's message, and `.kind == "invalid_argument"`: for every public method
of the manager, the session and its lease, every constructor the package
exports, and the enums. Assigning to an attribute the package keeps
read-only raises `AttributeError` (a frozen dataclass's
`FrozenInstanceError`) with the same kind. None of them changes anything."""

import dataclasses
import enum

import pytest

import duplex_session as d

from conftest import AUDIO


def public_methods(obj):
    return [name for name in dir(obj) if not name.startswith("_") and callable(getattr(obj, name))]


def refused(exc, call, match=None):
    with pytest.raises(exc, match=match) as e:
        call()
    assert type(e.value) is exc or issubclass(type(e.value), exc)
    assert e.value.kind == "invalid_argument", (e.value, getattr(e.value, "kind", None))
    return e.value


def state(manager, session):
    return (len(manager), session.input_seq, session.fence, session.lease.generation,
            session.lease.last_activity, session.stage_bindings, session.request_resources,
            session.completed_appends)


def test_every_method_refuses_extra_and_unknown_arguments(manager, session, fence):
    session.bind_stage_request(0, "r", fence=fence)
    before = state(manager, session)
    objects = {"DuplexSessionRuntimeManager": manager, "DuplexSessionRuntimeState": session,
               "lease": session.lease}
    checked = 0
    for label, obj in objects.items():
        methods = public_methods(obj)
        assert methods, label
        for name in methods:
            method = getattr(obj, name)
            e = refused(TypeError, lambda: method(*([fence] * 9)))
            assert "positional argument" in str(e) or "takes no arguments" in str(e), (label, name, str(e))
            e = refused(TypeError, lambda: method(no_such_argument=1))
            assert "no_such_argument" in str(e) or "no keyword arguments" in str(e), (label, name, str(e))
            checked += 1
    assert checked >= 40
    assert state(manager, session) == before


def test_the_messages_are_pythons(manager, session, fence):
    e = refused(TypeError, lambda: session.touch(fence))
    assert str(e) == ("DuplexSessionRuntimeState.touch() missing 1 required positional argument: 'activity'")
    e = refused(TypeError, lambda: session.touch(fence, d.DuplexLeaseActivity.HEARTBEAT, fence=fence))
    assert str(e) == "DuplexSessionRuntimeState.touch() got multiple values for argument 'fence'"
    e = refused(TypeError, lambda: session.append_input(AUDIO, fence))
    assert str(e) == "DuplexSessionRuntimeState.append_input() takes 0 positional arguments but 2 were given"
    e = refused(TypeError, lambda: manager.get())
    assert str(e) == "DuplexSessionRuntimeManager.get() missing 1 required positional argument: 'session_id'"
    # A parameter PyO3 converts itself: its conversion error carries the kind.
    refused(TypeError, lambda: manager.finalize_close_session("not a session"))
    assert session.input_seq == 0 and manager.get(fence.session_id) is session


def test_a_method_without_arguments_refuses_any(manager, session, fence):
    session.begin_close(fence, reason="explicit_close")
    e = refused(TypeError, lambda: session.finalize_close(1))
    assert str(e) == "DuplexSessionRuntimeState.finalize_close() takes no arguments (1 given)"
    e = refused(TypeError, lambda: session.finalize_close(reason="x"))
    assert str(e) == "DuplexSessionRuntimeState.finalize_close() takes no keyword arguments"
    bound = session.finalize_close
    refused(TypeError, lambda: bound(1, 2))
    assert session.finalize_close() == []


def test_constructors(clock, fence):
    for name in d.__all__:
        cls = getattr(d, name)
        if isinstance(cls, enum.EnumMeta):
            continue
        e = refused(TypeError, lambda: cls(no_such_argument=1))
        assert "no_such_argument" in str(e), (name, str(e))
        refused(TypeError, lambda: cls(*([fence] * 20)))
    e = refused(TypeError, lambda: d.DuplexFence())
    assert str(e) == "DuplexFence.__init__() missing 1 required positional argument: 'session_id'"
    e = refused(TypeError, lambda: d.DuplexFence("a", session_id="b"))
    assert "multiple values for argument 'session_id'" in str(e)
    e = refused(TypeError, lambda: d.DuplexSessionRuntimeManager(clock))
    assert str(e) == "DuplexSessionRuntimeManager.__new__() takes 0 positional arguments but 1 was given"
    refused(TypeError, lambda: d.DuplexFenceMismatchError(fence))
    # The constructors still construct.
    assert d.DuplexFence("a", incarnation=2) == d.DuplexFence("a", 0, 0, 0, 2)
    assert d.DuplexLeaseConfig(disconnect_grace_s=5.0).disconnect_grace_s == 5.0
    assert len(d.DuplexSessionRuntimeManager(clock=clock, max_sessions=3)) == 0


def test_the_package_s_own_refusals_keep_their_kind(clock):
    # A constructor refusal the package raises itself is not relabelled.
    with pytest.raises(TypeError) as e:
        d.DuplexSessionRuntimeManager(clock=clock, max_sessions="10")
    assert e.value.kind == "invalid_config"
    with pytest.raises(ValueError) as e:
        d.DuplexLeaseConfig(idle_ttl_s=-1.0)
    assert e.value.kind == "invalid_config"


def test_enums():
    assert d.DuplexInputMode("append_tokens") is d.DuplexInputMode.APPEND_TOKENS
    assert d.DuplexLeaseActivity("heartbeat") is d.DuplexLeaseActivity.HEARTBEAT
    assert isinstance(d.DuplexInputMode, enum.EnumMeta)
    e = refused(ValueError, lambda: d.DuplexInputMode("append_everything"))
    assert str(e) == "'append_everything' is not a valid DuplexInputMode"
    refused(ValueError, lambda: d.DuplexLeaseActivity(3))
    refused(TypeError, lambda: d.DuplexLeaseActivity())


def test_read_only_attributes(manager, session, fence):
    before = state(manager, session)
    e = refused(AttributeError, lambda: setattr(session, "input_seq", 5))
    assert str(e) == "attribute 'input_seq' of 'duplex_session.DuplexSessionRuntimeState' objects is not writable"
    e = refused(AttributeError, lambda: setattr(manager, "no_such_attribute", 1))
    assert str(e) == "'duplex_session.DuplexSessionRuntimeManager' object has no attribute 'no_such_attribute'"
    refused(AttributeError, lambda: delattr(session, "fence"))
    refused(AttributeError, lambda: delattr(manager, "profile"))
    refused(AttributeError, lambda: setattr(session.lease, "generation", 7))
    assert state(manager, session) == before
    config = d.DuplexLeaseConfig()
    e = refused(dataclasses.FrozenInstanceError, lambda: setattr(fence, "epoch", 3))
    assert str(e) == "cannot assign to field 'epoch'"
    refused(dataclasses.FrozenInstanceError, lambda: delattr(config, "idle_ttl_s"))
    assert fence.epoch == 0 and config.idle_ttl_s == 300.0
    # The mutable dataclasses stay mutable, as the seed's.
    caps = d.DuplexRuntimeCapabilities()
    caps.implementation_level = "x"
    assert caps.implementation_level == "x"


def test_a_clocks_exception_reaches_the_caller(fence):
    class Broken(Exception):
        pass

    def clock():
        raise Broken("clock gone")

    manager = d.DuplexSessionRuntimeManager(clock=clock)
    with pytest.raises(Broken) as e:
        manager.open_session(fence)
    assert not hasattr(e.value, "kind") and len(manager) == 0


def test_the_kind_survives_the_interpreters_call_specialization(session, fence):
    # A call site run often is specialized to call the method's C entry
    # point directly; the refusal is the same on every pass.
    kinds = set()
    for _ in range(200):
        try:
            session.touch(fence)
        except TypeError as e:
            kinds.add(e.kind)
        try:
            session.finalize_close(fence)
        except TypeError as e:
            kinds.add(e.kind)
    assert kinds == {"invalid_argument"}


def test_only_the_packages_classes_are_wrapped():
    from duplex_session import _native

    class Outside:
        def __init__(self, x):
            self.x = x

    for cls in (int, Outside):
        e = refused(TypeError, lambda: _native.wrap_init(cls))
        assert str(e).startswith("wrap_init takes a class of duplex_session, got ")
    # Refused means untouched: their own call-shape errors stay Python's.
    with pytest.raises(TypeError) as e:
        Outside()
    assert not hasattr(e.value, "kind")
    assert int("7") == 7
