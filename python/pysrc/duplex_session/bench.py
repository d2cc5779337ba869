"""Side by side with the seed: ``python -m duplex_session.bench``.

Runs the workloads of the seed's ``seed_bench.py`` through the seed module
and through this package in the same process, with the same Python code
(building fences, calling the clock, the loop), each side measured
``--runs`` times (3 by default), alternating, and prints one line per
workload, ``NAME seed ours ratio seed_range ours_range`` (the medians, the
ratio of the medians, and each side's lowest-highest), under a header naming
the columns and the unit:

- the six hot workloads with their setup outside the timing, then the same
  six as ``seed_bench.py`` writes them, setup (opening the sessions, 10,000
  of them for ``collect_idle_10k``) inside;
- bytes per session at a typical load (4 stage bindings, 8 completed
  appends, session and request ids of 46 to 74 bytes) at 1,000, 10,000 and
  50,000 sessions, and at the seed's default ``completed_append_limit=256``
  with 256 completed appends at 1,000 and 10,000 (tracemalloc, plus the
  extension's own count of what it holds in Rust; measured once);
- ``chunk_flow``: a control plane's path per 20 ms chunk, the session
  opened once: touch, the completed-append check, prepare and commit, the
  record; a barge-in (``prepare_cancel_fence``, ``release_fence``) every 50
  chunks;
- the cost of opening sessions: 1,000, 10,000 and 50,000 into an empty
  manager, with a fresh ``DuplexLeaseConfig`` each time and with one shared
  config, per open.

The seed is ``--seed-path DIR``, else ``$DUPLEX_SEED_PATH``, else the
first ``shared/reference`` found beside the working directory or one of
its parents (a checkout with ``../shared`` beside it finds it from any of
its folders). The full run takes under 3 minutes on 2 cores and peaks at
6.5 GiB resident (the 50,000-session rows hold both implementations'
sessions); ``--scale 0.25`` takes under a minute and 1.7 GiB. Exit status 1 if a ratio is beyond its floor (``--check``).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import statistics
import sys
import time
import tracemalloc
from types import SimpleNamespace

# The floors a release holds (`--check`): seed / ours for times, ours / seed
# for memory.
AS_WRITTEN = [
    ("append_input", 200_000, 5.0),
    ("touch", 200_000, 1.5),
    ("bind_release", 100_000, 3.0),
    ("completed_hit", 200_000, 2.0),
    ("open_close", 50_000, 2.0),
    ("collect_idle_10k", 20, 3.0),
]
SIZES = (1_000, 10_000, 50_000)
# The full window is 130 KB a session in the seed: 50,000 of them, twice,
# would need 12 GB, so that row stops at 10,000.
FULL_WINDOW_SIZES = (1_000, 10_000)
TYPICAL_BYTES_FLOOR = 0.5
FULL_WINDOW_BYTES_FLOOR = 0.75
OPEN_FLOOR = 2.0

# Workload: (name, iterations, floor ratio).
WORKLOADS = [
    ("append_input", 200_000, 5.0),
    ("touch", 200_000, 1.3),
    ("bind_release", 100_000, 3.0),
    ("completed_hit", 200_000, 2.0),
    ("open_close", 50_000, 2.0),
    ("collect_idle_10k", 200, 1000.0),
    ("chunk_flow", 100_000, 1.0),
]


SEED_MODULE = os.path.join("vllm_omni", "experimental", "fullduplex", "engine", "duplex_session.py")


def find_seed(given: str | None) -> str:
    """Where the seed's reference tree is: ``given``, ``$DUPLEX_SEED_PATH``,
    or ``shared/reference`` beside the working directory or a parent."""
    if given:
        candidates = [given]
    elif os.environ.get("DUPLEX_SEED_PATH"):
        candidates = [os.environ["DUPLEX_SEED_PATH"]]
    else:
        candidates = []
        here = os.path.abspath(os.getcwd())
        while True:
            candidates += [os.path.join(here, "shared", "reference"), os.path.join(here, "..", "shared", "reference")]
            parent = os.path.dirname(here)
            if parent == here:
                break
            here = parent
    for path in candidates:
        if os.path.isfile(os.path.join(path, SEED_MODULE)):
            return os.path.abspath(path)
    raise SystemExit(
        "the seed was not found: expected " + SEED_MODULE + " under one of "
        + ", ".join(dict.fromkeys(os.path.normpath(c) for c in candidates[:4]))
        + (" ..." if len(candidates) > 4 else "")
        + "; give its reference tree with --seed-path DIR or DUPLEX_SEED_PATH"
    )


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

    def chunk_flow(self):
        m, (f,) = self.manager_with()
        s, mode = m.get(f.session_id), self.mode
        activity, fence_class = self.m.DuplexLeaseActivity.APPEND, self.m.DuplexFence
        # The fence and the operation counter go on from run to run.
        state = {"fence": f, "op": 0}

        def run(n):
            fence, op = state["fence"], state["op"]
            for _ in range(n):
                op += 1
                operation = f"chunk-{op}"
                s.touch(fence, activity)
                if s.completed_append(operation, fence=fence, mode=mode, final=False) is None:
                    update = s.commit_append(s.prepare_append(mode=mode, fence=fence))
                    s.record_completed_append(
                        operation, fence=fence, mode=mode, final=False, stage_results=[{"seq": update.seq}]
                    )
                if op % 50 == 0:
                    barged = fence_class(fence.session_id, fence.epoch + 1)
                    s.prepare_cancel_fence(fence, barged)
                    s.release_fence(fence)
                    fence = barged
            state["fence"], state["op"] = fence, op

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


def long_id(prefix: str, i: int) -> str:
    """An id of 46 to 74 bytes, as vllm-omni's session and request ids run
    (a uuid-style body after a prefix)."""
    body = f"{prefix}-{i:08d}-6a3b-4f0e-9a57-2d8c1e4b7f30"
    return (body + "-" + "x" * 28)[: 46 + i % 29]


def native_bytes(m, ids) -> int:
    return sum(m.get(i)._native_bytes() for i in ids)


def bytes_per_session(mod: SimpleNamespace, native: bool, sessions: int, full_window: bool) -> float:
    """Bytes per session (tracemalloc, plus the extension's own accounting
    of what Rust holds): at the typical load, or with the seed's default
    limit of 256 and 256 completed appends recorded."""
    w = Workloads(mod)
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    kwargs = {"completed_append_limit": 256} if full_window else {}
    m = w.m.DuplexSessionRuntimeManager(clock=Clock(), **kwargs)
    lease = w.m.DuplexLeaseConfig(idle_ttl_s=300_000, disconnect_grace_s=30_000)
    ids = []
    for i in range(sessions):
        f = w.m.DuplexFence(long_id("session", i))
        m.open_session(f, capabilities=w.caps(), lease_config=lease)
        s = m.get(f.session_id)
        if full_window:
            for k in range(256):
                s.record_completed_append(
                    f"append:{k:08x}-6a3b-4f0e-9a57-2d8c1e4b7f30", fence=f, mode=w.mode, final=False, stage_results=[{"v": k}]
                )
        else:
            for st in range(4):
                s.bind_stage_request(st, long_id(f"req{st}", i), fence=f)
            for k in range(8):
                s.record_completed_append(f"op-{k}", fence=f, mode=w.mode, final=False, stage_results=[{"v": k}])
        ids.append(f.session_id)
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    python_bytes = sum(st.size_diff for st in after.compare_to(before, "filename"))
    total = python_bytes + (native_bytes(m, ids) if native else 0)
    del m, ids
    gc.collect()
    return total / sessions


def open_cost(mod: SimpleNamespace, sessions: int, fresh: bool) -> float:
    """ns per open, opening `sessions` new sessions into an empty manager
    (ids of 46 to 74 bytes), each with a fresh ``DuplexLeaseConfig`` or all
    with one shared config: the average over a manager growing to that
    size, collections included (the fences are made before the timing)."""
    w = Workloads(mod)
    m = w.m.DuplexSessionRuntimeManager(clock=Clock())
    shared = w.m.DuplexLeaseConfig(idle_ttl_s=300_000, disconnect_grace_s=30_000)
    config, caps = w.m.DuplexLeaseConfig, w.caps()
    fences = [w.m.DuplexFence(long_id("new", i)) for i in range(sessions)]
    gc.collect()
    t0 = time.perf_counter_ns()
    if fresh:
        for f in fences:
            m.open_session(f, capabilities=caps, lease_config=config(idle_ttl_s=300_000, disconnect_grace_s=30_000))
    else:
        for f in fences:
            m.open_session(f, capabilities=caps, lease_config=shared)
    dt = (time.perf_counter_ns() - t0) / sessions
    del m, fences
    gc.collect()
    return dt


def sides(measure_seed, measure_ours, runs: int):
    """`runs` measurements of each side, alternating: (seed median, ours
    median, seed range, ours range)."""
    seed, ours = [], []
    for _ in range(runs):
        seed.append(measure_seed())
        ours.append(measure_ours())
    return statistics.median(seed), statistics.median(ours), (min(seed), max(seed)), (min(ours), max(ours))


def span(r) -> str:
    return f"{r[0]:.0f}-{r[1]:.0f}"


def as_written(w: Workloads, name: str):
    """The workload as ``seed_bench.py`` writes it: setup inside the timing."""

    def run(n):
        getattr(w, name)()(n)

    return run


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m duplex_session.bench", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--seed-path",
        default=None,
        help="the seed's reference tree (default: $DUPLEX_SEED_PATH, else shared/reference beside this folder or a parent)",
    )
    parser.add_argument("--check", action="store_true", help="exit 1 if a ratio is under its floor")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply the iteration counts and sizes")
    parser.add_argument("--runs", type=int, default=3, help="measurements of each side per line (median and range)")
    parser.add_argument("only", nargs="*", help="workloads to run (default: all)")
    args = parser.parse_args(argv)
    seed, ours = Workloads(load_seed(find_seed(args.seed_path))), Workloads(load_ours())
    runs = max(1, args.runs)
    failed = []

    def wanted(name: str) -> bool:
        return not args.only or name in args.only

    def line(name, got, floor, higher_is_better=True):
        seed_v, ours_v, seed_r, ours_r = got
        ratio = seed_v / ours_v if higher_is_better else ours_v / seed_v
        print(f"{name} {seed_v:.1f} {ours_v:.1f} {ratio:.2f} {span(seed_r)} {span(ours_r)}", flush=True)
        if (ratio < floor) if higher_is_better else (ratio > floor):
            bound = "under the floor" if higher_is_better else "over the ceiling"
            failed.append(f"{name}: {ratio:.2f} is {bound} of {floor}")

    columns = "seed ours ratio seed_range ours_range"
    if any(wanted(name) for name, _, _ in WORKLOADS):
        print(f"# workload {columns} (ns per call, setup outside the timing; ratio seed/ours)", flush=True)
    for name, n, floor in WORKLOADS:
        if not wanted(name):
            continue
        n = max(10, int(n * args.scale))
        line(name, sides(lambda: timeit(getattr(seed, name)(), n), lambda: timeit(getattr(ours, name)(), n), runs), floor)
    if wanted("as_written"):
        print(f"# workload {columns} (ns per call, as seed_bench.py writes it: setup inside; ratio seed/ours)", flush=True)
        for name, n, floor in AS_WRITTEN:
            n = max(2, int(n * args.scale))
            got = sides(lambda: timeit(as_written(seed, name), n), lambda: timeit(as_written(ours, name), n), runs)
            line(f"as_written.{name}", got, floor)
    sizes = [max(10, int(n * args.scale)) for n in SIZES]
    if wanted("memory"):
        print(f"# workload {columns} (bytes per session; ratio ours/seed)", flush=True)
        full_sizes = [max(10, int(n * args.scale)) for n in FULL_WINDOW_SIZES]
        for full_window, name, floor, counts in (
            (False, "bytes_typical", TYPICAL_BYTES_FLOOR, sizes),
            (True, "bytes_256_completed", FULL_WINDOW_BYTES_FLOOR, full_sizes),
        ):
            for n in counts:
                # Memory does not vary from run to run: measured once.
                got = sides(lambda: bytes_per_session(seed.m, False, n, full_window), lambda: bytes_per_session(ours.m, True, n, full_window), 1)
                line(f"{name}.{n}", got, floor, higher_is_better=False)
    if wanted("open"):
        print(f"# workload {columns} (ns per open, opening that many sessions; ratio seed/ours)", flush=True)
        for fresh, name in ((True, "open_fresh_config"), (False, "open_shared_config")):
            for n in sizes:
                line(f"{name}.{n}", sides(lambda: open_cost(seed.m, n, fresh), lambda: open_cost(ours.m, n, fresh), runs), OPEN_FLOOR)
    scaled = "" if args.scale == 1 else f" (at --scale {args.scale}; the floors are set for the full run, --scale 1)"
    for f in failed:
        print(f"under the floor{scaled}: {f}", file=sys.stderr)
    return 1 if args.check and failed else 0


if __name__ == "__main__":
    sys.exit(main())
