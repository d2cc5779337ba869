"""Conformance traces through the Python API:
``python -m duplex_session.conformance PATH...`` (trace files or folders of
``*.jsonl``, format in ``shared/conformance/FORMAT.md``, with the
extensions of ``tests/conformance/FORMAT.md``).

Each trace runs against a fresh manager of the conformance profile (the
sizes the traces are written for) driven by a manual clock in seconds.
Every failing line is printed with file, line number, op, expected and
actual; the last line is ``N passed, M failed`` (traces). Exit status 0 only
if every trace passed.

Stage results are integers in the traces; through the Python API they are
the seed's dicts, ``{"v": n}`` here and back.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from . import (
    DuplexFence,
    DuplexInputMode,
    DuplexLeaseActivity,
    DuplexLeaseConfig,
    DuplexRuntimeCapabilities,
    DuplexSessionRuntimeManager,
)

PROFILE = {
    "max_resources": 8,
    "max_bindings": 4,
    "max_completed": 8,
    "max_active_ops": 4,
    "max_id_len": 32,
    "max_stage_results": 4,
}


class TraceError(Exception):
    """A line that is not a valid operation."""


class Clock:
    """A manual clock: integer milliseconds, read as float seconds."""

    def __init__(self, ms: int = 0) -> None:
        self.ms = ms

    def __call__(self) -> float:
        return self.ms / 1000


def fence_of(v: dict) -> DuplexFence:
    return DuplexFence(
        v["session"],
        epoch=v.get("epoch", 0),
        turn_id=v.get("turn", 0),
        response_seq=v.get("response", 0),
        incarnation=v.get("incarnation", 0),
    )


def fence_json(f: DuplexFence) -> dict:
    return {
        "session": f.session_id,
        "incarnation": f.incarnation,
        "epoch": f.epoch,
        "turn": f.turn_id,
        "response": f.response_seq,
    }


def appended_json(a) -> dict:
    return {"seq": a.seq, "turn_seq": a.turn_seq, "turn_id": a.turn_id}


def ms(seconds):
    return None if seconds is None else round(seconds * 1000)


class Unknown(Exception):
    """The session is absent: the trace's ``unknown_session``."""

    kind = "unknown_session"


class Runner:
    def __init__(self) -> None:
        self.clock = Clock()
        self.manager = DuplexSessionRuntimeManager(clock=self.clock, completed_append_limit=8, profile="conformance")
        self.handles: dict = {}
        self.opened: set = set()

    def session(self, session_id: str):
        s = self.manager.get(session_id)
        if s is None:
            raise Unknown(session_id)
        return s

    def by_fence(self, op: dict, key: str = "fence"):
        f = fence_of(op[key])
        return self.session(f.session_id), f

    def run(self, op: dict):
        """The outcome of one line: ``("ok", value)`` or ``("error", kind)``;
        ``None`` for lines without one."""
        name = op["op"]
        if name == "comment":
            return None
        if name == "profile":
            for key, want in PROFILE.items():
                if op.get(key) != want:
                    raise TraceError(f"profile mismatch: trace has {key} = {op.get(key)}, this build has {want}")
            return None
        handler = getattr(self, "op_" + name, None)
        if handler is None:
            raise TraceError(f"unknown op {name!r}")
        try:
            return ("ok", handler(op))
        except Exception as e:  # every refusal carries .kind
            kind = getattr(e, "kind", None)
            if kind is None:
                raise
            return ("error", kind)

    # ----- manager and clock ------------------------------------------

    def op_manager(self, op):
        clock = Clock(op.get("start_ms", 0))
        limits, rule = op.get("input_limits") or {}, op.get("overlap") or {}
        manager = DuplexSessionRuntimeManager(
            clock=clock,
            max_sessions=op.get("max_sessions"),
            completed_append_limit=op.get("completed_append_limit", 8),
            profile="conformance",
            max_pending_input_bytes_per_session=limits.get("bytes"),
            max_pending_turns_per_session=limits.get("turns"),
            overlap_policy=rule.get("policy"),
            overlap_short_ack_ms=rule.get("short_ack_ms"),
            overlap_barge_in_ms=rule.get("barge_in_ms"),
        )
        self.clock, self.manager = clock, manager
        self.handles.clear()
        self.opened.clear()
        return None

    def op_advance(self, op):
        self.clock.ms += op["ms"]
        return None

    def op_open(self, op):
        modes = op.get("modes")
        caps = DuplexRuntimeCapabilities() if modes is None else DuplexRuntimeCapabilities(input_modes={DuplexInputMode(m) for m in modes})
        ttl = op.get("idle_ttl_ms", 300_000)
        lease = DuplexLeaseConfig(
            idle_ttl_s=None if ttl is None else ttl / 1000,
            disconnect_grace_s=op.get("grace_ms", 30_000) / 1000,
        )
        f = fence_of(op["fence"])
        self.manager.open_session(
            f,
            capabilities=caps,
            session_config=op.get("session_config"),
            runtime_config=op.get("runtime_config"),
            lease_config=lease,
        )
        self.opened.add(f.session_id)
        return None

    # ----- by fence ------------------------------------------------------

    def op_touch(self, op):
        s, f = self.by_fence(op)
        s.touch(f, DuplexLeaseActivity(op["activity"]))

    def op_detach(self, op):
        s, f = self.by_fence(op)
        s.detach(f)

    def op_resume(self, op):
        s, f = self.by_fence(op)
        return {"generation": s.resume(f, expected_lease_generation=op["expected_generation"])}

    def op_begin_op(self, op):
        s, f = self.by_fence(op)
        s.begin_operation(f, op["operation_id"])

    def op_end_op(self, op):
        s, f = self.by_fence(op)
        s.end_operation(f, op["operation_id"])

    def op_append(self, op):
        s, f = self.by_fence(op)
        return appended_json(s.append_input(mode=DuplexInputMode(op["mode"]), fence=f))

    def op_prepare_append(self, op):
        s, f = self.by_fence(op)
        r = s.prepare_append(mode=DuplexInputMode(op["mode"]), fence=f)
        self.handles[op["handle"]] = (f.session_id, r)
        return appended_json(r.update)

    def op_commit_append(self, op):
        if op["handle"] not in self.handles:
            raise TraceError(f"unknown handle {op['handle']!r}")
        session_id, r = self.handles[op["handle"]]
        return appended_json(self.session(session_id).commit_append(r))

    def op_completed(self, op):
        s, f = self.by_fence(op)
        results = s.completed_append(op["operation_id"], fence=f, mode=DuplexInputMode(op["mode"]), final=op["final"])
        return {"results": None if results is None else [r["v"] for r in results]}

    def op_record_completed(self, op):
        s, f = self.by_fence(op)
        s.record_completed_append(
            op["operation_id"],
            fence=f,
            mode=DuplexInputMode(op["mode"]),
            final=op["final"],
            stage_results=[{"v": n} for n in op["results"]],
        )

    def op_reserve(self, op):
        s, f = self.by_fence(op)
        s.reserve_stage_request(op["stage"], op["request_id"], fence=f)

    def op_bind(self, op):
        s, f = self.by_fence(op)
        s.bind_stage_request(op["stage"], op["request_id"], fence=f)

    def op_release_fence(self, op):
        s, f = self.by_fence(op)
        return {"ids": s.release_fence(f)}

    def op_accept_fence(self, op):
        s, f = self.by_fence(op)
        s.accept_fence(f)

    def op_cancel(self, op):
        s, cancelled = self.by_fence(op, "cancelled")
        return {"ids": s.cancel_fence(cancelled, fence_of(op["next"]))}

    def op_begin_close(self, op):
        s, f = self.by_fence(op)
        s.begin_close(f, reason=op.get("reason", "explicit_close"))

    def op_close(self, op):
        f = fence_of(op["fence"])
        s = self.manager.get(f.session_id)
        if s is None:
            return {"closed": False, "ids": []}
        held = s.resource_request_ids() if s.lease.terminal_reason is None else []
        closed = self.manager.close_session(f, reason=op.get("reason", "explicit_close"))
        return {"closed": closed is not None, "ids": held if closed is not None else []}

    # ----- by session ----------------------------------------------------

    def op_stage_ids(self, op):
        s = self.session(op["session"])
        fence = op.get("fence")
        return {"ids": s.stage_request_ids(None if fence is None else fence_of(fence))}

    def op_resource_ids(self, op):
        s = self.session(op["session"])
        fence = op.get("fence")
        return {"ids": s.resource_request_ids(None if fence is None else fence_of(fence), submitted=op.get("submitted"))}

    def op_release(self, op):
        self.session(op["session"]).release_request_ids(op["request_ids"])

    def op_finalize(self, op):
        s = self.session(op["session"])
        held = s.resource_request_ids()
        self.manager.finalize_close_session(s)
        return {"ids": held}

    def op_replace_configs(self, op):
        s = self.session(op["session"])
        s.replace_configs(session_config=op.get("session_config"), runtime_config=op.get("runtime_config"))
        return {"config_generation": s.config_generation}

    def op_inspect(self, op):
        s = self.manager.get(op["session"])
        if s is None:
            return {"absent": True}
        lease = s.lease
        if lease.terminal_reason is not None:
            state = "closing"
        elif lease.detached_at is not None:
            state = "detached"
        else:
            state = "open"
        return {
            "state": state,
            "fence": fence_json(s.fence),
            "input_seq": s.input_seq,
            "input_turn_seq": s.input_turn_seq,
            "lease_generation": lease.generation,
            "config_generation": s.config_generation,
            "last_activity_ms": ms(lease.last_activity),
            "detached_at_ms": ms(lease.detached_at),
            "active_operations": sorted(lease.active_operations),
            "bindings": [[stage, b.request_id] for stage, b in s.stage_bindings.items()],
            "resources": [[r.stage_id, r.request_id, r.submitted] for r in s.request_resources.values()],
            "completed": list(s.completed_appends),
            "close_reason": lease.terminal_reason,
        }

    def op_sessions(self, op):
        return {"sessions": sorted(i for i in self.opened if self.manager.get(i) is not None)}

    def op_collect_expired(self, op):
        expired = self.manager.collect_expired(excluded_session_ids=set(op.get("excluded") or []))
        rows = [
            {
                "session": e.session_id,
                "reason": e.reason,
                "lease_generation": e.lease_generation,
                "fence": fence_json(e.fence),
                "submitted": list(e.submitted_request_ids),
                "reserved": list(e.reserved_request_ids),
            }
            for e in expired
        ]
        return {"expired": sorted(rows, key=lambda r: r["session"])}

    def op_close_for_requests(self, op):
        return {"closing": self.manager.close_sessions_for_request_ids(op["request_ids"])}

    def op_finalize_closed(self, op):
        before = {i for i in op["sessions"] if self.manager.get(i) is not None}
        self.manager.finalize_closed_sessions(op["sessions"])
        return {"finalized": sorted(i for i in before if self.manager.get(i) is None)}


    # ----- extensions (tests/conformance/FORMAT.md) ------------------------

    @staticmethod
    def pending(s):
        return {"bytes": s.pending_input_bytes, "turns": s.pending_input_turns}

    def op_reserve_input(self, op):
        s, f = self.by_fence(op)
        s.reserve_input_bytes(f, op["bytes"])
        return self.pending(s)

    def op_reserve_turn(self, op):
        s, f = self.by_fence(op)
        s.reserve_pending_turn(f)
        return self.pending(s)

    def op_release_input(self, op):
        s = self.session(op["session"])
        s.release_input_bytes(op["bytes"])
        return self.pending(s)

    def op_release_turn(self, op):
        s = self.session(op["session"])
        s.release_pending_turn()
        return self.pending(s)

    def op_release_all_input(self, op):
        return {"bytes": self.session(op["session"]).release_all_input_bytes()}

    def op_cancel_pending_input(self, op):
        return self.session(op["session"]).cancel_pending_input()

    def op_decide_overlap(self, op):
        s, f = self.by_fence(op)
        d = s.decide_overlap(
            f,
            op["duration_ms"],
            op["speech"],
            overlap_action=op.get("request"),
            force_barge_in=op.get("force_barge_in"),
            force_listen=op.get("force_listen"),
            vad_speech_started=op.get("vad_speech_started"),
            transcript=op.get("transcript"),
        )
        d["defer_append"] = d.pop("defer_runtime_append")
        return d

    def op_reset_overlap_speech(self, op):
        return {"heard": self.session(op["session"]).reset_overlap_speech()}

    def op_drain(self, op):
        s, cancelled = self.by_fence(op, "cancelled")
        return {"ids": s.drain_fence(cancelled, fence_of(op["next"]), keep_stages=op["keep"])}

    def op_route_output(self, op):
        route = self.session(op["session"]).route_output(op["request_id"])
        if route is None:
            return None
        return {
            "owner": route["owner"],
            "stage": route["stage_id"],
            "epoch": route["epoch"],
            "turn": route["turn_id"],
            "response": route["response_id"],
        }

    def op_release_drained(self, op):
        return {"ids": self.session(op["session"]).release_drained()}

    def op_resume_by(self, op):
        s, f = self.by_fence(op)
        generation = s.resume(f, expected_lease_generation=op["expected_generation"], control_id=op["control_id"])
        return {"generation": generation}


def expected_of(line: dict):
    expect = line.get("expect")
    if not isinstance(expect, dict):
        raise TraceError("every line but comment and profile needs `expect`")
    if "ok" in expect:
        return ("ok", expect["ok"])
    if "error" in expect:
        return ("error", expect["error"])
    raise TraceError("`expect` must hold `ok` or `error`")


def shown(outcome) -> str:
    kind, value = outcome
    return json.dumps({kind: value}, sort_keys=True)


def run_trace(text: str) -> list:
    """The failures of one trace: ``(line, op, expected, actual)``."""
    runner, failures = Runner(), []
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            line = json.loads(raw)
            outcome = runner.run(line)
            if outcome is None:
                continue
            expected = expected_of(line)
        except (TraceError, ValueError, KeyError, TypeError) as e:
            failures.append((number, "?", "a valid line", f"{type(e).__name__}: {e}"))
            continue
        if outcome != expected:
            failures.append((number, line.get("op", "?"), shown(expected), shown(outcome)))
    return failures


def trace_files(paths) -> list:
    files = []
    for p in map(Path, paths):
        files.extend(sorted(p.glob("*.jsonl")) if p.is_dir() else [p])
    return files


def main(argv=None) -> int:
    paths = sys.argv[1:] if argv is None else argv
    if not paths:
        print("usage: python -m duplex_session.conformance PATH... (trace files or folders of *.jsonl)", file=sys.stderr)
        return 2
    passed = failed = 0
    for file in trace_files(paths):
        failures = run_trace(file.read_text())
        if failures:
            failed += 1
            for line, op, expected, actual in failures:
                print(f"{file}:{line}: op {op}\n  expected {expected}\n  actual   {actual}")
        else:
            passed += 1
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
