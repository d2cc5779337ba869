"""Argument values the package refuses: a wrong type or a value out of
range raises the exception a Python user expects, with `.kind`, and changes
nothing. Where the seed answers instead of refusing (a lookup by an id that
is not a str, a generation that is not an int), the package answers the same."""

import pytest

import duplex_session as d

from conftest import AUDIO


def refused(exc, kind, call):
    with pytest.raises(exc) as e:
        call()
    assert e.value.kind == kind, (e.value, e.value.kind)
    return e.value


def test_stage_and_request_ids_of_the_wrong_type(session, fence):
    e = refused(TypeError, "invalid_argument", lambda: session.bind_stage_request("0", "r", fence=fence))
    assert str(e) == "stage_id must be an int, got str"
    e = refused(ValueError, "invalid_argument", lambda: session.bind_stage_request(-1, "r", fence=fence))
    assert str(e) == "stage_id must be an integer in 0..2**32, got -1"
    refused(ValueError, "invalid_argument", lambda: session.reserve_stage_request(2**32, "r", fence=fence))
    e = refused(TypeError, "invalid_argument", lambda: session.reserve_stage_request(0, 7, fence=fence))
    assert str(e) == "request_id must be a str, got int"
    assert session.resource_request_ids() == [] and session.stage_bindings == {}
    session.bind_stage_request(True, "r", fence=fence)  # a bool is an int, as in Python
    assert session.stage_request_ids() == ["r"]


def test_flags_and_operation_ids(session, fence):
    e = refused(TypeError, "invalid_argument",
                lambda: session.completed_append("op", fence=fence, mode=AUDIO, final="yes"))
    assert str(e) == "final must be a bool, got str"
    refused(TypeError, "invalid_argument",
            lambda: session.record_completed_append(3, fence=fence, mode=AUDIO, final=False, stage_results=[]))
    refused(TypeError, "invalid_argument",
            lambda: session.record_completed_append("op", fence=fence, mode=AUDIO, final=False, stage_results=5))
    assert session.completed_appends == {}
    # 0 and 1 are the bools Python compares them equal to.
    session.record_completed_append("op", fence=fence, mode=AUDIO, final=1, stage_results=[{"a": 1}])
    assert session.completed_append("op", fence=fence, mode=AUDIO, final=True) == [{"a": 1}]
    refused(TypeError, "invalid_argument", lambda: session.resource_request_ids(submitted="no"))
    session.begin_operation(fence, "op-1")
    refused(TypeError, "invalid_argument", lambda: session.begin_operation(fence, 42))
    refused(TypeError, "invalid_argument", lambda: session.end_operation(fence, None))
    assert session.lease.active_operations == {"op-1"}


def test_reasons_and_id_lists(manager, session, fence):
    refused(TypeError, "invalid_argument", lambda: session.begin_close(fence, reason=5))
    refused(TypeError, "invalid_argument", lambda: session.terminate(fence, reason=None))
    refused(TypeError, "invalid_argument", lambda: manager.close_session(fence, reason=b"x"))
    refused(TypeError, "invalid_argument", lambda: manager.begin_close_session(fence, reason=1.0))
    refused(TypeError, "invalid_argument", lambda: session.lease.mark_terminal(3))
    assert session.lease.terminal_reason is None and manager.get(fence.session_id) is session
    session.bind_stage_request(0, "r", fence=fence)
    e = refused(TypeError, "invalid_argument", lambda: session.release_request_ids(5))
    assert str(e) == "request_ids must be an iterable of str, got int"
    refused(TypeError, "invalid_argument", lambda: manager.close_sessions_for_request_ids(None))
    refused(TypeError, "invalid_argument", lambda: manager.finalize_closed_sessions(3))
    refused(TypeError, "invalid_argument", lambda: manager.collect_expired(excluded_session_ids=7))
    assert session.resource_request_ids() == ["r"] and session.lease.terminal_reason is None
    # Items that are not str name nothing, as in the seed's sets.
    session.release_request_ids([1, None, "r"])
    assert session.resource_request_ids() == []


def test_lookups_answer_as_the_seed_does(manager, session, fence):
    assert manager.get(5) is None and manager.get(None) is None
    refused(TypeError, "invalid_argument", lambda: manager.get([]))
    e = refused(KeyError, "unknown_session", lambda: manager.require(5))
    assert e.args[0] == "Unknown duplex session: 5"
    assert manager.require(fence.session_id) is session


def test_a_generation_that_is_not_one_is_a_mismatch(manager, session, fence):
    session.detach(fence)
    for given in (-1, 2**64, "0", None):
        e = refused(ValueError, "generation_mismatch",
                    lambda: session.resume(fence, expected_lease_generation=given))
        assert str(e) == f"duplex lease generation mismatch: expected 0, got {given}"
    e = refused(ValueError, "generation_mismatch", lambda: session.lease.resume(101.0, expected_generation="0"))
    assert str(e) == "duplex lease generation mismatch: expected 0, got 0"
    assert session.lease.detached_at is not None and session.lease.generation == 0
    # The fence is checked first, as the seed checks it.
    stale = d.DuplexFence(fence.session_id, incarnation=9)
    refused(d.DuplexFenceMismatchError, "fence_mismatch",
            lambda: session.resume(stale, expected_lease_generation="x"))
    assert session.resume(fence, expected_lease_generation=0) == 1


def test_times_of_the_wrong_type(session):
    refused(TypeError, "invalid_argument", lambda: session.lease.touch("now", d.DuplexLeaseActivity.HEARTBEAT))
    refused(TypeError, "invalid_argument", lambda: session.lease.detach(None))
    assert session.lease.detached_at is None


def test_configuration_of_the_wrong_type(clock, fence):
    for kwargs in ({"max_sessions": "10"}, {"completed_append_limit": 2.5}, {"profile": 1}):
        refused(TypeError, "invalid_config", lambda: d.DuplexSessionRuntimeManager(clock=clock, **kwargs))
    refused(ValueError, "invalid_config", lambda: d.DuplexSessionRuntimeManager(completed_append_limit=-2**70))
    manager = d.DuplexSessionRuntimeManager(clock=clock)
    e = refused(AttributeError, "invalid_config", lambda: manager.open_session(fence, lease_config=object()))
    assert "idle_ttl_s" in str(e)
    refused(AttributeError, "invalid_config",
            lambda: manager.open_session(fence, capabilities=d.DuplexLeaseConfig()))
    assert len(manager) == 0
    lease = d.DuplexLeaseState(config=d.DuplexLeaseConfig(), generation=0, last_activity=1.0)
    e = refused(ValueError, "invalid_config",
                lambda: d.DuplexSessionRuntimeState(fence, lease, clock, input_seq="0"))
    assert "starts empty" in str(e)
    refused(TypeError, "invalid_config",
            lambda: d.DuplexSessionRuntimeState(fence, lease, clock, completed_append_limit="8"))
    assert d.DuplexSessionRuntimeState(fence, lease, clock, input_seq=0).input_seq == 0


def test_fences_and_reservations_that_are_not_them(session, fence):
    refused(TypeError, "invalid_argument", lambda: session.append_input(mode=AUDIO, fence=object()))
    refused(AttributeError, "invalid_argument", lambda: session.commit_append(object()))
    reservation = session.prepare_append(mode=AUDIO, fence=fence)
    forged = type("Forged", (), {name: getattr(reservation, name) for name in (
        "fence", "mode", "base_fence", "base_input_seq", "base_input_turn_seq", "update")})()
    forged.base_append_turn_key = "not a key"
    refused(TypeError, "invalid_argument", lambda: session.commit_append(forged))
    assert session.input_seq == 0
    assert session.commit_append(reservation).seq == 1
