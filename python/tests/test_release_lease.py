"""Differential: a session's lease beside vllm-omni 0.30.0's own
`DuplexLeaseState` (`vllm_omni/engine/duplex/session/lease.py`, loaded from
the released wheel unmodified) over generated sequences of touches,
detaches, resumes with and without a control id, and closes.

The wheel is named by `DUPLEX_VLLM_OMNI_WHEEL`; without it the test is
reported skipped, unless `DUPLEX_REQUIRE_RELEASE=1` (CI), where it fails.

Where ours differs on purpose (docs/guarantees.md): a resume's fence is
checked first, and a closed session refuses with `wrong_state`; neither
shows here, where every call carries the session's fence.
"""

import importlib.util
import os
import random
import sys
import types
import zipfile

import pytest

import duplex_session as d

LEASE = "vllm_omni/engine/duplex/session/lease.py"


def release_lease():
    """The release's lease module, loaded from the wheel without its
    package `__init__` (which imports vllm)."""
    wheel = os.environ.get("DUPLEX_VLLM_OMNI_WHEEL")
    if not wheel or not os.path.exists(wheel):
        if os.environ.get("DUPLEX_REQUIRE_RELEASE") == "1":
            pytest.fail("DUPLEX_VLLM_OMNI_WHEEL does not name vllm-omni 0.30.0's wheel")
        pytest.skip("needs vllm-omni 0.30.0's wheel (DUPLEX_VLLM_OMNI_WHEEL)")
    source = zipfile.ZipFile(wheel).read(LEASE).decode()
    name = "vllm_omni.engine.duplex.session.lease"
    for parent in ("vllm_omni", "vllm_omni.engine", "vllm_omni.engine.duplex", "vllm_omni.engine.duplex.session"):
        sys.modules.setdefault(parent, types.ModuleType(parent))
    spec = importlib.util.spec_from_loader(name, loader=None)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    exec(compile(source, LEASE, "exec"), module.__dict__)
    return module


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def outcome(call):
    """What a call answered: its value, or the kind of its refusal."""
    try:
        return ("ok", call())
    except ValueError as e:
        return ("mismatch" if "generation mismatch" in str(e) else "value_error", None)
    except RuntimeError:
        return ("terminal", None)


def test_resume_with_control_ids_matches_the_release():
    rel = release_lease()
    controls = [None, "ctl-a", "ctl-b"]
    for seed in range(300):
        rng = random.Random(seed)
        clock = Clock()
        manager = d.DuplexSessionRuntimeManager(clock=clock)
        fence = d.DuplexFence(f"session-{seed}")
        ours = manager.open_session(fence)
        theirs = rel.DuplexLeaseState(
            config=rel.DuplexLeaseConfig(), generation=0, last_activity=clock.now
        )
        attached, closed = True, False
        for step in range(40):
            clock.now += rng.choice([0.0, 0.5, 2.0])
            op = rng.choice(["touch", "detach", "resume", "resume", "resume", "close"] if step > 30 else ["touch", "detach", "resume", "resume"])
            where = f"seed {seed} step {step} {op}"
            if op == "touch":
                mine = outcome(lambda: ours.touch(fence, d.DuplexLeaseActivity.HEARTBEAT))
                their = outcome(lambda: theirs.touch(clock.now, rel.DuplexLeaseActivity.HEARTBEAT))
            elif op == "detach":
                if not attached or closed:
                    continue
                mine = outcome(lambda: ours.detach(fence))
                their = outcome(lambda: theirs.detach(clock.now))
                attached = False
            elif op == "resume":
                before = theirs.generation
                expected = before + rng.choice([-1, 0, 0, 1])
                control = rng.choice(controls)
                mine = outcome(
                    lambda: ours.resume(fence, expected_lease_generation=expected, control_id=control)
                )
                their = outcome(
                    lambda: theirs.resume(clock.now, expected_generation=expected, control_id=control)
                )
                # A resume asked again leaves the session where it was.
                if mine[0] == "ok" and theirs.generation != before:
                    attached = True
            else:
                if closed:
                    continue
                mine = outcome(lambda: ours.begin_close(fence, reason="client_close"))
                their = outcome(lambda: theirs.mark_terminal("client_close"))
                closed = True
                mine, their = (mine[0], None), (their[0], None)
            if closed and op != "close":
                # Both refuse; the kinds are each side's own.
                assert mine[0] != "ok" and their[0] != "ok", where
                continue
            assert mine == their, where
            assert ours.lease.generation == theirs.generation, where
            if not closed:
                assert ours.lease.detached_at == theirs.detached_at, where
                assert ours.lease.last_activity == theirs.last_activity, where
                assert ours.lease.resumed_by == theirs.resumed_by, where


def test_the_standalone_lease_matches_the_release():
    """The package's `DuplexLeaseState` (the seed's, with the release's
    `resumed_by`) beside the release's own, call for call: the same answers,
    the same exceptions with the same messages, the same state."""
    rel = release_lease()
    fields = ("generation", "last_activity", "detached_at", "active_operations", "terminal_reason", "resumed_by")

    def call(f):
        try:
            return ("ok", f())
        except Exception as e:  # noqa: BLE001 - the class and message are compared
            return (type(e).__name__, str(e))

    for seed in range(300):
        rng = random.Random(seed)
        ttl = rng.choice([None, 30.0])
        mine = d.DuplexLeaseState(config=d.DuplexLeaseConfig(idle_ttl_s=ttl), generation=0, last_activity=0.0)
        theirs = rel.DuplexLeaseState(config=rel.DuplexLeaseConfig(idle_ttl_s=ttl), generation=0, last_activity=0.0)
        now = 0.0
        for step in range(60):
            now += rng.choice([0.0, 1.0, 40.0])
            op = rng.choice(["touch", "detach", "resume", "resume", "begin", "end", "terminal", "expired"])
            control = rng.choice([None, "ctl-a", "ctl-b"])
            expected = theirs.generation + rng.choice([-1, 0, 0, 1])
            name = rng.choice(["op-1", "op-2"])
            outcomes = []
            for lease, module in ((mine, d), (theirs, rel)):
                if op == "touch":
                    outcomes.append(call(lambda: lease.touch(now, module.DuplexLeaseActivity.HEARTBEAT)))
                elif op == "detach":
                    outcomes.append(call(lambda: lease.detach(now)))
                elif op == "resume":
                    outcomes.append(
                        call(lambda: lease.resume(now, expected_generation=expected, control_id=control))
                    )
                elif op == "begin":
                    outcomes.append(call(lambda: lease.begin_operation(now, name)))
                elif op == "end":
                    outcomes.append(call(lambda: lease.end_operation(now, name)))
                elif op == "terminal":
                    outcomes.append(call(lambda: lease.mark_terminal("client_close")))
                else:
                    outcomes.append(
                        call(lambda: (lease.expires_at, lease.idle_expired(now), lease.disconnect_grace_expired(now)))
                    )
            where = f"seed {seed} step {step} {op}"
            assert outcomes[0] == outcomes[1], where
            assert [getattr(mine, f) for f in fields] == [getattr(theirs, f) for f in fields], where
