"""The lease: standalone, as the seed's lease module has it, and as the
view of a session's lease (`session.lease`)."""

import pytest

import duplex_session as d


def lease():
    return d.DuplexLeaseState(config=d.DuplexLeaseConfig(idle_ttl_s=10.0), generation=0, last_activity=1.0)


def test_standalone_lease_follows_the_seed():
    ls = lease()
    assert ls.expires_at == 11.0 and not ls.idle_expired(10.9) and ls.idle_expired(11.0)
    ls.detach(2.0)
    assert ls.detached_at == 2.0 and ls.disconnect_grace_expired(32.0)
    assert ls.resume(3.0, expected_generation=0) == 1 and ls.detached_at is None
    with pytest.raises(ValueError) as e:
        ls.resume(3.0, expected_generation=0)
    assert str(e.value) == "duplex lease generation mismatch: expected 1, got 0" and e.value.kind == "generation_mismatch"
    ls.begin_operation(4.0, "op")
    assert not ls.idle_expired(100.0)
    with pytest.raises(ValueError, match="^duplex lease operation already active: op$"):
        ls.begin_operation(4.0, "op")
    with pytest.raises(ValueError, match="^duplex lease operation_id must not be empty$"):
        ls.begin_operation(4.0, "")
    ls.end_operation(5.0, "op")
    with pytest.raises(KeyError) as e:
        ls.end_operation(5.0, "op")
    assert e.value.args[0] == "duplex lease operation is not active: op"
    with pytest.raises(TypeError, match="^lease activity must be DuplexLeaseActivity$"):
        ls.touch(6.0, "heartbeat")
    assert ls.mark_terminal("explicit_close") is True and ls.generation == 2
    assert ls.mark_terminal("again") is False
    with pytest.raises(RuntimeError, match="^duplex lease is terminal: explicit_close$"):
        ls.touch(7.0, d.DuplexLeaseActivity.HEARTBEAT)


def test_a_sessions_lease_is_a_live_view(session, fence, clock):
    ls = session.lease
    assert isinstance(ls, d.DuplexLeaseState)
    assert ls.config == d.DuplexLeaseConfig() and ls.generation == 0
    session.begin_operation(fence, "gen-1")
    assert ls.active_operations == {"gen-1"}
    clock.now = 150.0
    session.detach(fence)
    assert (ls.detached_at, ls.last_activity) == (150.0, 150.0)
    with pytest.raises(AttributeError):
        ls.generation = 5


def test_the_views_methods_act_on_the_session(session, fence):
    ls = session.lease
    ls.touch(120.0, d.DuplexLeaseActivity.HEARTBEAT)
    assert session.lease.last_activity == 120.0
    ls.begin_operation(121.0, "op")
    with pytest.raises(ValueError) as e:
        ls.begin_operation(121.0, "op")
    assert str(e.value) == "duplex lease operation already active: op"
    ls.end_operation(122.0, "op")
    with pytest.raises(KeyError) as e:
        ls.end_operation(122.0, "op")
    assert e.value.args[0] == "duplex lease operation is not active: op"
    ls.detach(123.0)
    assert session.lease.detached_at == 123.0
    with pytest.raises(ValueError) as e:
        ls.resume(124.0, expected_generation=7)
    assert str(e.value) == "duplex lease generation mismatch: expected 0, got 7"
    assert ls.resume(124.0, expected_generation=0) == 1
    assert ls.mark_terminal("explicit_close") is True
    assert ls.mark_terminal("again") is False
    with pytest.raises(RuntimeError, match="^duplex lease is terminal: explicit_close$"):
        ls.touch(125.0, d.DuplexLeaseActivity.HEARTBEAT)


def test_a_resume_asked_again_with_its_control_id_changes_nothing(session, fence, clock):
    # vllm-omni 0.30's `resumed_by`: the caller lost the first answer.
    session.detach(fence)
    clock.now = 200.0
    assert session.resume(fence, expected_lease_generation=0, control_id="ctl-1") == 1
    clock.now = 210.0
    session.detach(fence)
    clock.now = 220.0
    assert session.resume(fence, expected_lease_generation=0, control_id="ctl-1") == 1
    assert session.lease.generation == 1 and session.lease.detached_at == 210.0
    with pytest.raises(ValueError) as e:
        session.resume(fence, expected_lease_generation=0, control_id="ctl-2")
    assert e.value.kind == "generation_mismatch"
    assert session.resume(fence, expected_lease_generation=1, control_id="ctl-2") == 2
    # Without a control id, a resume is never a replay.
    with pytest.raises(ValueError):
        session.resume(fence, expected_lease_generation=1)
    with pytest.raises(ValueError) as e:
        session.resume(fence, expected_lease_generation=2, control_id="x" * 200)
    assert e.value.kind == "invalid_id"


def test_the_lease_names_the_resume_that_produced_its_generation(session, fence, clock):
    ls = session.lease
    assert ls.resumed_by is None
    assert ls.resume(120.0, expected_generation=0, control_id="ctl-1") == 1
    assert ls.resumed_by == "ctl-1" and "resumed_by='ctl-1'" in repr(ls)
    assert ls.resume(121.0, expected_generation=0, control_id="ctl-1") == 1  # asked again
    assert (ls.generation, ls.last_activity) == (1, 120.0)
    assert ls == d.DuplexLeaseState(config=ls.config, generation=1, last_activity=120.0, resumed_by="ctl-1")
    assert ls.resume(122.0, expected_generation=1) == 2 and ls.resumed_by is None
    standalone = lease()
    assert standalone.resume(2.0, expected_generation=0, control_id="c") == 1
    assert standalone.resume(3.0, expected_generation=0, control_id="c") == 1
    assert standalone.mark_terminal("client_close") and standalone.resumed_by is None
