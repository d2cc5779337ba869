"""A host that keeps its own ``messages``, ``lease`` and ``contracts`` modules
and swaps only its ``duplex_session.py``: its control-plane flow runs on the
package exactly as on the seed. Every test runs on both (``host_fixture``)."""

from __future__ import annotations

import os

import pytest

import duplex_session as pkg
from host_fixture import install, seed_root


class Clock:
    """Whole milliseconds as float seconds (exact on both sides)."""

    def __init__(self) -> None:
        self.ms = 100_000

    def __call__(self) -> float:
        return self.ms / 1000

    def advance(self, ms: int) -> None:
        self.ms += ms


@pytest.fixture(scope="session")
def host_root(tmp_path_factory):
    return tmp_path_factory.mktemp("hosts")


@pytest.fixture(params=["package", "seed"])
def host(request, host_root):
    if request.param == "seed" and seed_root() is None:
        if os.environ.get("DUPLEX_REQUIRE_SEED") == "1":
            pytest.fail("DUPLEX_REQUIRE_SEED=1 but the seed module is not found (DUPLEX_SEED_PATH)")
        pytest.skip("the seed module is not here (../shared/reference or DUPLEX_SEED_PATH)")
    return install(host_root, request.param)


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def plane(host, clock):
    return host.control_plane.ControlPlane(clock=clock)


def open_one(host, plane, name="caller-1", **kwargs):
    fence = host.messages.DuplexFence(name)
    reply = plane.open(fence, session_config={"voice": "alto"}, runtime_config={"temperature": 0.7}, **kwargs)
    assert reply["status"] == "ok", reply
    return fence, reply["session"]


AUDIO = "APPEND_AUDIO_CHUNK"


def audio(host):
    return getattr(host.contracts.DuplexInputMode, AUDIO)


# ----- the host's value classes ----------------------------------------------


def test_the_module_is_the_host_runtime(host):
    rt = host.duplex_session
    assert rt.DuplexFence is host.messages.DuplexFence
    assert rt.DuplexLeaseActivity is host.lease.DuplexLeaseActivity
    assert rt.DuplexSessionExpiry is host.lease.DuplexSessionExpiry
    assert rt.DuplexInputMode is host.contracts.DuplexInputMode
    for name in rt.__all__:
        assert hasattr(rt, name), name


def test_open_takes_and_gives_the_host_classes(host, plane):
    fence, session = open_one(host, plane)
    assert session.fence is fence
    assert session.session_config == {"voice": "alto"}
    assert session.runtime_config == {"temperature": 0.7}
    assert isinstance(session.lease, host.lease.DuplexLeaseState)
    assert isinstance(session.lease.config, host.lease.DuplexLeaseConfig)
    assert session.lease.config == host.lease.DuplexLeaseConfig()
    assert isinstance(session.capabilities, host.contracts.DuplexRuntimeCapabilities)
    assert session.capabilities.input_modes == {audio(host)}
    assert plane.manager.require(fence.session_id) is session
    # Equal by the host class's equality, hashable by its hash.
    assert session.fence == host.messages.DuplexFence("caller-1")
    assert {session.fence: 1}[host.messages.DuplexFence("caller-1")] == 1


def test_objects_of_a_wrong_type_are_refused_as_the_seed_refuses(host, plane):
    manager = plane.manager
    for wrong in (object(), pkg.DuplexFence("caller-1"), "caller-1"):
        with pytest.raises(TypeError) as err:
            manager.open_session(wrong)
        assert str(err.value) == "open_session requires DuplexFence"
        with pytest.raises(TypeError) as err:
            manager.close_session(wrong)
        assert str(err.value) == "close_session requires DuplexFence"
        with pytest.raises(TypeError) as err:
            manager.begin_close_session(wrong)
        assert str(err.value) == "begin_close_session requires DuplexFence"
    # The control plane's answer for it, and nothing opened.
    assert plane.open(pkg.DuplexFence("x"))["status"] == "invalid_argument"
    assert manager.get("x") is None
    fence, session = open_one(host, plane)
    for wrong in (pkg.DuplexLeaseActivity.HEARTBEAT, "heartbeat", None):
        with pytest.raises(TypeError) as err:
            session.touch(fence, wrong)
        assert str(err.value) == "lease activity must be DuplexLeaseActivity"
    session.touch(fence, host.lease.DuplexLeaseActivity.HEARTBEAT)


def test_lease_config_given_is_the_one_kept(host, plane, clock):
    config = host.lease.DuplexLeaseConfig(idle_ttl_s=60.0, disconnect_grace_s=5.0)
    fence, session = open_one(host, plane, lease=config)
    assert session.lease.config is config
    assert session.lease.expires_at == clock() + 60.0
    assert session.lease.generation == 0


# ----- appends -----------------------------------------------------------------


def test_idempotent_appends_by_operation_id(host, plane):
    fence, session = open_one(host, plane)
    first = plane.append(fence, "op-1", mode=audio(host))
    assert first["status"] == "ok" and not first["replayed"]
    assert first["results"][0]["seq"] == 1
    again = plane.append(fence, "op-1", mode=audio(host))
    assert again == {"status": "ok", "results": first["results"], "replayed": True}
    second = plane.append(fence, "op-2", mode=audio(host))
    assert second["results"][0]["seq"] == 2 and second["results"][0]["turn_seq"] == 2
    assert session.input_seq == 2
    # The same id with other metadata is refused with the seed's message.
    reused = plane.append(fence, "op-1", mode=audio(host), final=True)
    assert reused["status"] == "invalid_argument"
    assert reused["error"] == "duplex append operation 'op-1' was reused with different metadata"
    completed = session.completed_appends
    assert list(completed) == ["op-1", "op-2"]
    assert completed["op-1"].mode is audio(host)
    assert completed["op-1"].fence == fence
    assert session.lease.active_operations == set()


def test_two_phase_append_gives_the_host_values(host, plane):
    fence, session = open_one(host, plane)
    reservation = session.prepare_append(mode=audio(host), fence=fence)
    assert reservation.fence is fence and reservation.mode is audio(host)
    assert reservation.base_fence is fence
    assert isinstance(reservation, host.duplex_session.DuplexAppendReservation)
    update = session.commit_append(reservation)
    assert (update.seq, update.turn_seq, update.turn_id) == (1, 1, 0)
    with pytest.raises(RuntimeError) as err:
        session.commit_append(reservation)
    assert str(err.value) == "duplex append reservation is stale"
    with pytest.raises(ValueError) as err:
        session.prepare_append(mode=host.contracts.DuplexInputMode.APPEND_TOKENS, fence=fence)
    assert str(err.value) == "Duplex input mode 'append_tokens' is not supported by session caller-1"


def test_a_failed_commit_is_compensated(host, plane):
    """A session method patched to fail (the host test's way of injecting a
    local failure): the submitted request is released and aborted, appends
    are blocked until the reaper closes the session."""
    fence, session = open_one(host, plane)
    assert plane.append(fence, "op-1", mode=audio(host))["status"] == "ok"

    def fail_commit(reservation):
        raise RuntimeError("injected commit failure")

    session.commit_append = fail_commit
    reply = plane.append(fence, "op-2", mode=audio(host))
    assert reply == {"status": "internal_error", "error": "injected commit failure"}
    assert session.input_seq == 1
    assert session.resource_request_ids() == ["caller-1/0/1"]
    assert "caller-1/0/2" in plane.engine.aborted
    assert plane.append(fence, "op-3", mode=audio(host)) == {"status": "blocked"}
    assert session.lease.active_operations == set()
    # Deleting the shadow restores the method.
    del session.commit_append
    assert session.commit_append(session.prepare_append(mode=audio(host), fence=fence)).seq == 2
    # The reaper closes the blocked session and aborts what it held.
    plane.reap()
    assert plane.manager.get(fence.session_id) is None
    assert session.lease.terminal_reason == "local_failure"
    assert plane.engine.live() == set()
    assert plane.append(fence, "op-4", mode=audio(host)) == {"status": "unknown_session"}


def test_a_patched_method_is_what_composites_call(host, plane):
    fence, session = open_one(host, plane)
    calls = []
    original = session.prepare_append

    def counting(*, mode, fence):
        calls.append(mode)
        return original(mode=mode, fence=fence)

    session.prepare_append = counting
    assert session.append_input(mode=audio(host), fence=fence).seq == 1
    assert calls == [audio(host)]
    del session.prepare_append
    assert session.append_input(mode=audio(host), fence=fence).seq == 2
    assert len(calls) == 1
    # A cleanup step that fails: the manager's close calls the session's.
    session.finalize_close = lambda: (_ for _ in ()).throw(RuntimeError("cleanup failed"))
    with pytest.raises(RuntimeError, match="cleanup failed"):
        plane.manager.close_session(fence, reason="client_close")
    del session.finalize_close
    # The manager's own steps shadowed: finalize_closed_sessions calls it.
    finalized = []
    plane.manager.finalize_close_session = finalized.append
    plane.manager.finalize_closed_sessions([fence.session_id])
    assert finalized == [session]


def test_state_stays_read_only(host, plane):
    if host.side == "seed":
        pytest.skip("the seed's dataclass lets a host assign its state; the package keeps it in Rust")
    fence, session = open_one(host, plane)
    with pytest.raises(AttributeError):
        session.fence = host.messages.DuplexFence("other")
    with pytest.raises(AttributeError) as err:
        session.input_seq = 5
    assert str(err.value) == "attribute 'input_seq' of 'duplex_session.DuplexSessionRuntimeState' objects is not writable"
    assert session.input_seq == 0 and session.fence is fence


# ----- stage requests and barge-in ------------------------------------------------


def test_reserve_bind_and_barge_in(host, plane):
    fence, session = open_one(host, plane)
    plane.append(fence, "op-1", mode=audio(host))
    session.reserve_stage_request(1, "talker-1", fence=fence)
    assert session.resource_request_ids(submitted=False) == ["talker-1"]
    assert plane.start_response(fence, 2, "code2wav-1")["status"] == "ok"
    assert session.stage_request_ids() == ["caller-1/0/1", "code2wav-1"]
    assert session.resource_request_ids(submitted=True) == ["caller-1/0/1", "code2wav-1"]
    binding = session.stage_bindings[2]
    assert binding.fence is fence and binding.request_id == "code2wav-1"
    # The user talks over the model.
    new = fence.next_epoch()
    reply = plane.barge_in(fence, new)
    assert sorted(reply["cancelled"]) == ["caller-1/0/1", "code2wav-1", "talker-1"]
    assert session.fence is new and session.epoch == 1 and session.input_seq == 0
    assert session.resource_request_ids() == []
    # A late chunk of the old turn is refused with the seed module's error.
    with pytest.raises(host.duplex_session.DuplexFenceMismatchError) as err:
        session.prepare_append(mode=audio(host), fence=fence)
    assert err.value.expected is new and err.value.actual is fence
    assert plane.append(fence, "op-late", mode=audio(host))["status"] == "stale_fence"
    assert plane.append(new, "op-2", mode=audio(host))["results"][0]["seq"] == 1
    # A barge-in that goes backwards is refused.
    with pytest.raises(host.duplex_session.DuplexFenceMismatchError):
        session.prepare_cancel_fence(new, fence)


def test_request_cleanup_closes_the_session(host, plane):
    fence, session = open_one(host, plane)
    plane.append(fence, "op-1", mode=audio(host))
    other, _ = open_one(host, plane, "caller-2")
    plane.append(other, "op-1", mode=audio(host))
    closed = plane.fail_requests(["caller-1/0/1"])
    assert closed == {"caller-1": ["caller-1/0/1"]}
    assert plane.manager.get("caller-1") is None and plane.manager.get("caller-2") is not None
    assert session.lease.terminal_reason == "request_cleanup"
    assert plane.engine.live() == {"caller-2/0/1"}


# ----- the connection ---------------------------------------------------------------


def test_detach_resume_and_expiry(host, plane, clock):
    fence, session = open_one(host, plane, lease=host.lease.DuplexLeaseConfig(idle_ttl_s=300.0, disconnect_grace_s=5.0))
    plane.append(fence, "op-1", mode=audio(host))
    plane.disconnect(fence)
    assert session.lease.detached_at == clock()
    clock.advance(2_000)
    wrong = plane.resume(fence, 7)
    assert wrong == {"status": "generation_mismatch", "error": "duplex lease generation mismatch: expected 0, got 7"}
    assert plane.resume(fence, 0) == {"status": "ok", "generation": 1}
    assert session.lease.detached_at is None and session.lease.last_activity == clock()
    plane.disconnect(fence)
    clock.advance(4_999)
    assert plane.reap() == []
    clock.advance(1)
    (expiry,) = plane.reap()
    assert isinstance(expiry, host.lease.DuplexSessionExpiry)
    assert expiry == host.lease.DuplexSessionExpiry(
        session_id="caller-1",
        fence=fence,
        lease_generation=2,
        reason="disconnect_grace_expired",
        submitted_request_ids=("caller-1/0/1",),
        reserved_request_ids=(),
    )
    assert expiry.fence is fence
    assert plane.manager.get("caller-1") is None
    assert plane.engine.live() == set()


def test_idle_expiry_spares_the_excluded(host, plane, clock):
    fence, _ = open_one(host, plane, lease=host.lease.DuplexLeaseConfig(idle_ttl_s=10.0, disconnect_grace_s=5.0))
    other, _ = open_one(host, plane, "caller-2", lease=host.lease.DuplexLeaseConfig(idle_ttl_s=10.0))
    clock.advance(10_000)
    expired = plane.manager.collect_expired(excluded_session_ids={"caller-2"})
    assert [(e.session_id, e.reason) for e in expired] == [("caller-1", "idle_ttl_expired")]
    plane.manager.finalize_closed_sessions(["caller-1"])
    assert plane.manager.get("caller-2") is not None


def test_close_and_capacity(host, clock):
    plane = host.control_plane.ControlPlane(clock=clock, max_sessions=1)
    fence, session = open_one(host, plane)
    refused = plane.open(host.messages.DuplexFence("caller-2"))
    assert refused == {"status": "capacity_exhausted", "error": "duplex_session_capacity_exhausted: limit=1"}
    again = plane.open(host.messages.DuplexFence("caller-1"))
    assert again == {"status": "already_exists", "error": "Duplex session already exists: caller-1"}
    assert plane.close(fence) == {"status": "ok"}
    assert session.lease.terminal_reason == "client_close"
    assert plane.close(fence) == {"status": "unknown_session"}
    assert plane.open(host.messages.DuplexFence("caller-2"))["status"] == "ok"
    with pytest.raises(KeyError) as err:
        plane.manager.require("caller-1")
    assert err.value.args[0] == "Unknown duplex session: caller-1"


def test_begin_close_then_finalize(host, plane):
    fence, session = open_one(host, plane)
    plane.append(fence, "op-1", mode=audio(host))
    closing = plane.manager.begin_close_session(fence, reason="drain")
    assert closing is session and session.lease.terminal_reason == "drain"
    assert plane.manager.begin_close_session(fence, reason="again") is session
    assert session.lease.terminal_reason == "drain"
    assert session.resource_request_ids() == ["caller-1/0/1"]
    plane.manager.finalize_closed_sessions(["caller-1"])
    assert plane.manager.get("caller-1") is None
    assert session.resource_request_ids() == []
