"""Side by side with the seed: ``python -m duplex_session.bench``.

Runs the workloads of the seed's ``seed_bench.py`` through the seed module
and through this package, one after the other in the same process, with the
same Python code (building fences, calling the clock, the loop), and prints
one line per workload: ``NAME seed_ns ours_ns ratio``. Then the memory of a
session at the seed's default ``completed_append_limit=256`` with 256
completed appends recorded.

The seed is looked up in ``../shared/reference`` (or ``--seed-path DIR``).
Each workload's setup (opening the sessions) is outside the timed loop, for
both. Exit status 1 if a ratio is under its floor (``--check``).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import sys
import time
import tracemalloc
from types import SimpleNamespace

# Workload: (name, iterations, floor ratio).
WORKLOADS = [
    ("append_input", 200_000, 5.0),
    ("touch", 200_000, 1.3),
    ("bind_release", 100_000, 3.0),
    ("completed_hit", 200_000, 2.0),
    ("open_close", 50_000, 2.0),
    ("collect_idle_10k", 200, 1000.0),
]


def load_seed(path: str) -> SimpleNamespace:
    """The seed's classes, imported from its reference tree at ``path``."""
    sys.path.insert(0, os.path.abspath(path))
    base = "vllm_omni.experimental.fullduplex.engine."
    contracts = importlib.import_module(base + "contracts")
    session = importlib.import_module(base + "duplex_session")
    lease = importlib.import_module(base + "lease")
    messages = importlib.import_module(base + "messages")
    return SimpleNamespace(
        DuplexInputMode=contracts.DuplexInputMode,
        DuplexRuntimeCapabilities=contracts.DuplexRuntimeCapabilities,
        DuplexSessionRuntimeManager=session.DuplexSessionRuntimeManager,
        DuplexLeaseActivity=lease.DuplexLeaseActivity,
        DuplexLeaseConfig=lease.DuplexLeaseConfig,
        DuplexFence=messages.DuplexFence,
    )


def load_ours() -> SimpleNamespace:
    import duplex_session as d

    return SimpleNamespace(**{name: getattr(d, name) for name in d.__all__})


class Clock:
    """The seed bench's clock: a number the workload sets."""

    now = 0

    def __call__(self):
        return self.now


class Workloads:
    """The seed bench's workloads, written once against either module."""

    def __init__(self, mod: SimpleNamespace) -> None:
        self.m = mod
        self.mode = mod.DuplexInputMode.APPEND_AUDIO_CHUNK
        self.caps = lambda: mod.DuplexRuntimeCapabilities(input_modes={self.mode})

    def manager_with(self, n_sessions: int = 1, **kwargs):
        m = self.m.DuplexSessionRuntimeManager(clock=Clock(), **kwargs)
        fences = []
        lease = self.m.DuplexLeaseConfig(idle_ttl_s=300_000, disconnect_grace_s=30_000)
        for i in range(n_sessions):
            f = self.m.DuplexFence(f"session-{i}")
            m.open_session(f, capabilities=self.caps(), lease_config=lease)
            fences.append(f)
        return m, fences

    # Each returns a function of n that runs the timed loop.

    def append_input(self):
        m, (f,) = self.manager_with()
        s, mode = m.get(f.session_id), self.mode

        def run(n):
            for _ in range(n):
                s.append_input(mode=mode, fence=f)

        return run

    def touch(self):
        m, (f,) = self.manager_with()
        s, heartbeat = m.get(f.session_id), self.m.DuplexLeaseActivity.HEARTBEAT

        def run(n):
            for _ in range(n):
                s.touch(f, heartbeat)

        return run

    def bind_release(self):
        m, (f,) = self.manager_with()
        s = m.get(f.session_id)

        def run(n):
            for _ in range(n):
                s.bind_stage_request(0, "req-stage0", fence=f)
                s.bind_stage_request(1, "req-stage1", fence=f)
                s.release_request_ids(["req-stage0", "req-stage1"])

        return run

    def completed_hit(self):
        m, (f,) = self.manager_with()
        s, mode = m.get(f.session_id), self.mode
        for i in range(8):
            s.record_completed_append(f"op-{i}", fence=f, mode=mode, final=False, stage_results=[{"v": i}])

        def run(n):
            for _ in range(n):
                s.completed_append("op-3", fence=f, mode=mode, final=False)

        return run

    def open_close(self):
        m = self.m.DuplexSessionRuntimeManager(clock=Clock())
        fence, caps = self.m.DuplexFence, self.caps()
        start = [0]

        def run(n):
            base = start[0]
            for i in range(base, base + n):
                f = fence("churn", incarnation=i)
                m.open_session(f, capabilities=caps)
                m.close_session(f)
            start[0] = base + n

        return run

    def collect_idle_10k(self):
        m, _ = self.manager_with(10_000)

        def run(n):
            for _ in range(n):
                m.collect_expired()

        return run


def timeit(run, n: int) -> float:
    """Best of three, in ns per iteration, after a warm-up."""
    run(min(n, 1000))
    best = None
    for _ in range(3):
        t0 = time.perf_counter_ns()
        run(n)
        dt = (time.perf_counter_ns() - t0) / n
        best = dt if best is None else min(best, dt)
    return best


def bytes_per_session(mod: SimpleNamespace, native: bool, sessions: int = 50) -> float:
    """Bytes per session with the seed's default limit of 256 and 256
    completed appends recorded (tracemalloc, plus the extension's own
    accounting of what Rust holds)."""
    w = Workloads(mod)
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    m, fences = w.manager_with(sessions, completed_append_limit=256)
    for f in fences:
        s = m.get(f.session_id)
        for i in range(256):
            s.record_completed_append(
                f"append:{i:08x}-6a3b-4f0e-9a57-2d8c1e4b7f30", fence=f, mode=w.mode, final=False, stage_results=[{"v": i}]
            )
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    python_bytes = sum(st.size_diff for st in after.compare_to(before, "filename"))
    native_bytes = sum(m.get(f.session_id)._native_bytes() for f in fences) if native else 0
    del m
    return (python_bytes + native_bytes) / sessions


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m duplex_session.bench", description=__doc__.splitlines()[0])
    parser.add_argument("--seed-path", default=os.path.join("..", "shared", "reference"))
    parser.add_argument("--check", action="store_true", help="exit 1 if a ratio is under its floor")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply the iteration counts")
    parser.add_argument("only", nargs="*", help="workloads to run (default: all)")
    args = parser.parse_args(argv)
    seed, ours = Workloads(load_seed(args.seed_path)), Workloads(load_ours())
    failed = []
    for name, n, floor in WORKLOADS:
        if args.only and name not in args.only:
            continue
        n = max(10, int(n * args.scale))
        seed_ns = timeit(getattr(seed, name)(), n)
        ours_ns = timeit(getattr(ours, name)(), n)
        ratio = seed_ns / ours_ns
        print(f"{name} {seed_ns:.1f} {ours_ns:.1f} {ratio:.1f}", flush=True)
        if ratio < floor:
            failed.append(f"{name}: {ratio:.1f}x is under the floor of {floor}x")
    if not args.only or "memory" in args.only:
        seed_b = bytes_per_session(seed.m, native=False)
        ours_b = bytes_per_session(ours.m, native=True)
        print(f"bytes_per_session_256 {seed_b:.0f} {ours_b:.0f} {seed_b / ours_b:.2f}", flush=True)
        if ours_b > seed_b:
            failed.append(f"memory: {ours_b:.0f} bytes per session is more than the seed's {seed_b:.0f}")
    for f in failed:
        print(f"under the floor: {f}", file=sys.stderr)
    return 1 if args.check and failed else 0


if __name__ == "__main__":
    sys.exit(main())
