"""The manager: identity, admission, close, expiry, request cleanup, the
clock, threads, and the conformance profile."""

import gc
import threading

import pytest

import duplex_session as d

from conftest import AUDIO, Clock


def test_get_returns_the_object_open_session_returned(manager, fence):
    s = manager.open_session(fence)
    assert manager.get(fence.session_id) is s
    assert manager.require(fence.session_id) is s
    assert manager.get("nobody") is None
    with pytest.raises(KeyError) as e:
        manager.require("nobody")
    assert e.value.args[0] == "Unknown duplex session: nobody" and e.value.kind == "unknown_session"


def test_open_refuses_duplicates_and_non_fences(manager, fence):
    manager.open_session(fence)
    with pytest.raises(ValueError) as e:
        manager.open_session(fence)
    assert str(e.value) == f"Duplex session already exists: {fence.session_id}"
    assert e.value.kind == "session_exists"
    with pytest.raises(TypeError, match="^open_session requires DuplexFence$"):
        manager.open_session(("not", "a", "fence"))
    with pytest.raises(TypeError, match="^close_session requires DuplexFence$"):
        manager.close_session("s")


def test_admission_is_exact(clock):
    m = d.DuplexSessionRuntimeManager(clock=clock, max_sessions=2)
    m.open_session(d.DuplexFence("a"))
    m.open_session(d.DuplexFence("b"))
    with pytest.raises(RuntimeError) as e:
        m.open_session(d.DuplexFence("c"))
    assert str(e.value) == "duplex_session_capacity_exhausted: limit=2" and e.value.kind == "capacity_exhausted"
    assert m.close_session(d.DuplexFence("a")) is not None
    m.open_session(d.DuplexFence("c"))


def test_signatures_are_the_seeds():
    import inspect

    params = inspect.signature(d.DuplexSessionRuntimeManager).parameters
    assert params["completed_append_limit"].default == 256
    assert params["clock"].default is None and params["max_sessions"].default is None
    close = inspect.signature(d.DuplexSessionRuntimeManager.close_session).parameters
    assert close["reason"].default == "explicit_close" and close["reason"].kind is inspect.Parameter.KEYWORD_ONLY


def test_constructor_refusals():
    with pytest.raises(ValueError, match="^max_sessions must be positive or null$"):
        d.DuplexSessionRuntimeManager(max_sessions=0)
    with pytest.raises(ValueError, match="^completed_append_limit must be positive$"):
        d.DuplexSessionRuntimeManager(completed_append_limit=0)
    with pytest.raises(ValueError) as e:
        d.DuplexSessionRuntimeManager(completed_append_limit=257)
    assert e.value.kind == "invalid_config"
    with pytest.raises(ValueError):
        d.DuplexSessionRuntimeManager(profile="tiny")


def test_close_session_returns_the_session_once(manager, fence):
    s = manager.open_session(fence)
    s.bind_stage_request(0, "r", fence=fence)
    assert manager.close_session(fence, reason="client_close") is s
    assert manager.get(fence.session_id) is None
    assert s.lease.terminal_reason == "client_close" and s.lease.generation == 1
    assert s.stage_request_ids() == [] and s.fence == fence
    assert manager.close_session(fence) is None
    # The id can be used again, by a new session.
    again = manager.open_session(d.DuplexFence(fence.session_id, incarnation=1))
    assert again is not s and again.fence.incarnation == 1


def test_two_step_close_for_cleanup_retry(manager, fence):
    s = manager.open_session(fence)
    s.bind_stage_request(0, "r", fence=fence)
    assert manager.begin_close_session(fence, reason="request_cleanup") is s
    assert manager.close_session(fence) is None
    assert s.resource_request_ids() == ["r"]
    manager.finalize_close_session(s)
    assert manager.get(fence.session_id) is None and s.resource_request_ids() == []


def test_collect_expired_grace_then_idle(clock):
    m = d.DuplexSessionRuntimeManager(clock=clock)
    short = d.DuplexLeaseConfig(idle_ttl_s=10.0, disconnect_grace_s=2.0)
    a, b = d.DuplexFence("a"), d.DuplexFence("b")
    sa = m.open_session(a, lease_config=short)
    m.open_session(b, lease_config=short)
    sa.bind_stage_request(0, "ra", fence=a)
    sa.detach(a)
    clock.now += 1.999
    assert m.collect_expired() == []
    clock.now += 0.001
    (expiry,) = m.collect_expired()
    assert expiry == d.DuplexSessionExpiry("a", a, 1, "disconnect_grace_expired", ("ra",), ())
    assert m.get("a") is sa and sa.lease.terminal_reason == "disconnect_grace_expired"
    assert m.collect_expired() == []
    assert [e.session_id for e in m.collect_expired(now=clock.now + 100, excluded_session_ids={"b"})] == []
    (idle,) = m.collect_expired(now=clock.now + 100)
    assert (idle.session_id, idle.reason) == ("b", "idle_ttl_expired")
    m.finalize_closed_sessions(["a", "b", "nobody"])
    assert m.get("a") is None and m.get("b") is None


def test_activity_and_operations_postpone_idle_expiry(clock):
    m = d.DuplexSessionRuntimeManager(clock=clock)
    f = d.DuplexFence("s")
    s = m.open_session(f, lease_config=d.DuplexLeaseConfig(idle_ttl_s=5.0))
    clock.now += 4
    s.touch(f, d.DuplexLeaseActivity.HEARTBEAT)
    clock.now += 4
    assert m.collect_expired() == []
    s.begin_operation(f, "generate")
    clock.now += 100
    assert m.collect_expired() == []
    s.end_operation(f, "generate")
    clock.now += 5
    assert [e.reason for e in m.collect_expired()] == ["idle_ttl_expired"]


def test_close_sessions_for_request_ids(manager):
    fa, fb = d.DuplexFence("a"), d.DuplexFence("b")
    manager.open_session(fa).bind_stage_request(0, "shared", fence=fa)
    manager.open_session(fb).reserve_stage_request(0, "other", fence=fb)
    assert manager.close_sessions_for_request_ids(["shared", "x"]) == {"a": ["shared"]}
    assert manager.get("a").lease.terminal_reason == "request_cleanup"
    assert manager.get("b").lease.terminal_reason is None


def test_time_is_float_seconds_in_and_out(manager, fence, clock):
    s = manager.open_session(fence)
    assert s.lease.last_activity == 100.0
    clock.now = 100.25
    s.detach(fence)
    assert s.lease.detached_at == 100.25 and s.lease.expires_at == 400.25
    clock.now = 100.0004  # rounds to 100.000 s
    s.touch(fence, d.DuplexLeaseActivity.RESUME)
    assert s.lease.last_activity == 100.0


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -1.0])
def test_bad_clock_readings_are_refused_and_change_nothing(manager, fence, clock, bad):
    s = manager.open_session(fence)
    clock.now = bad
    with pytest.raises(ValueError) as e:
        s.touch(fence, d.DuplexLeaseActivity.HEARTBEAT)
    assert e.value.kind == "invalid_argument"
    assert s.lease.last_activity == 100.0


def test_a_raising_clock_reaches_the_caller_and_changes_nothing(fence):
    state = {"fail": False}

    def clock():
        if state["fail"]:
            raise OSError("clock gone")
        return 5.0

    m = d.DuplexSessionRuntimeManager(clock=clock)
    s = m.open_session(fence)
    state["fail"] = True
    with pytest.raises(OSError, match="clock gone"):
        s.detach(fence)
    with pytest.raises(OSError):
        m.open_session(d.DuplexFence("other"))
    state["fail"] = False
    assert s.lease.detached_at is None and m.get("other") is None
    s.detach(fence)  # no lock was left held
    assert s.lease.detached_at == 5.0


def test_threads_share_a_manager_without_corruption():
    m = d.DuplexSessionRuntimeManager(clock=Clock(0.0))
    fences = [d.DuplexFence(f"t{i}") for i in range(4)]
    caps = d.DuplexRuntimeCapabilities(input_modes={AUDIO})
    sessions = [m.open_session(f, capabilities=caps) for f in fences]
    shared, errors = fences[0], []

    def work(i):
        try:
            for n in range(2000):
                sessions[i].append_input(mode=AUDIO, fence=fences[i])
                sessions[0].append_input(mode=AUDIO, fence=shared)
                sessions[0].record_completed_append(f"op-{i}-{n}", fence=shared, mode=AUDIO, final=False, stage_results=[])
                m.get(fences[(i + 1) % 4].session_id)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(1, 4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert [s.input_seq for s in sessions[1:]] == [2000, 2000, 2000]
    assert sessions[0].input_seq == 6000
    assert len(sessions[0].completed_appends) == 256


def test_the_conformance_profile_has_the_traces_sizes(clock):
    with pytest.raises(ValueError) as e:
        d.DuplexSessionRuntimeManager(clock=clock, completed_append_limit=256, profile="conformance")
    assert e.value.kind == "invalid_config"
    m = d.DuplexSessionRuntimeManager(clock=clock, completed_append_limit=8, profile="conformance")
    assert m.profile == "conformance"
    f = d.DuplexFence("s" * 32)
    s = m.open_session(f)
    assert s.completed_append_limit == 8
    with pytest.raises(ValueError) as e:
        m.open_session(d.DuplexFence("s" * 33))
    assert e.value.kind == "invalid_id"
    with pytest.raises(RuntimeError) as e:
        s.record_completed_append("op", fence=f, mode=d.DuplexInputMode.TURN_COMMIT_ONLY, final=True, stage_results=[{}] * 5)
    assert e.value.kind == "full"
    assert d.DuplexSessionRuntimeManager().profile == "server"


def test_a_session_finalized_on_its_own_stays_listed_until_the_manager_lets_it_go(clock):
    # The seed's dict keeps a session its own close finalized: it is still
    # `get`-able, still counts for admission, and its id cannot be reopened
    # until the manager's finalize lets it go.
    m = d.DuplexSessionRuntimeManager(clock=clock, max_sessions=1)
    f = d.DuplexFence("s")
    s = m.open_session(f)
    s.bind_stage_request(0, "r", fence=f)
    assert s.terminate(f, reason="client_close") is True
    assert m.get("s") is s and len(m) == 1
    with pytest.raises(RuntimeError, match="capacity_exhausted"):
        m.open_session(d.DuplexFence("t"))
    assert m.close_session(f) is None  # already closing
    m.finalize_closed_sessions(["s"])  # the seed pops a terminal session
    assert m.get("s") is None and len(m) == 0
    assert s.lease.terminal_reason == "client_close" and s.close() == []
    m.open_session(d.DuplexFence("t"))
    # A manager's one-step close of another session frees its slot at once,
    # and the closed object keeps what the seed's shows.
    m2 = d.DuplexSessionRuntimeManager(clock=clock)
    g = d.DuplexFence("g", epoch=2)
    h = m2.open_session(g, capabilities=d.DuplexRuntimeCapabilities(input_modes={AUDIO}))
    h.append_input(mode=AUDIO, fence=g)
    assert m2.close_session(g) is h
    assert m2.get("g") is None and len(m2) == 0
    assert (h.epoch, h.input_seq, h.lease.generation, h.lease.terminal_reason) == (2, 1, 1, "explicit_close")
    assert h.fence is g
    again = m2.open_session(d.DuplexFence("g", epoch=3))
    assert again is not h and h.input_seq == 1


def test_sessions_outlive_their_manager(clock):
    m = d.DuplexSessionRuntimeManager(clock=clock)
    f = d.DuplexFence("s")
    s = m.open_session(f, capabilities=d.DuplexRuntimeCapabilities(input_modes={AUDIO}))
    del m
    gc.collect()
    # The session holds its host; it works on its own.
    assert s.append_input(mode=AUDIO, fence=f).seq == 1
    s.bind_stage_request(0, "r", fence=f)
    assert s.close() == ["r"]


def test_a_manager_and_its_sessions_are_freed(clock):
    # Each listed object holds the host that lists it; the manager's going
    # breaks that circle, so nothing is left behind.
    import weakref

    class Capabilities(d.DuplexRuntimeCapabilities):
        pass

    caps = Capabilities()
    probe = weakref.ref(caps)
    m = d.DuplexSessionRuntimeManager(clock=clock)
    for i in range(3):
        m.open_session(d.DuplexFence(f"s{i}"), capabilities=caps)
    del caps, m
    gc.collect()
    assert probe() is None
