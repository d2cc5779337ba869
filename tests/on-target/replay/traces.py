#!/usr/bin/env python3
"""Conformance traces on the device: encode, then compare.

`encode OUT MAX_BYTES MAX_HANDLES TRACE...`: turns trace files (../shared/conformance/FORMAT.md)
into one compact line-oriented script the replay firmware embeds
(src/bin/replay.rs): one line per operation, fields as space-separated
tokens in a fixed order, defaults resolved here, handles numbered, lists
prefixed with their length. `~` is the empty string, `-` an absent value.
Whole traces are packed into parts of at most MAX_BYTES (one firmware
image each, for boards whose flash holds only part of the set): OUT.0,
OUT.1, ..., each with an index (OUT.0.index.json, ...) that compare reads;
the part names are printed, one a line.

`compare SCRIPT_INDEX OUTPUT`: reads the firmware's output (one line per
operation: `<n> <JSON outcome>`) and compares each outcome with the trace's
`expect` by JSON equality, as FORMAT.md says; prints each mismatch, one
summary line per trace, and exits 1 on any failure or missing line.
"""
import json
import sys



def s(v):
    if v is None:
        return "-"
    if not isinstance(v, str):
        raise ValueError(f"expected a string, got {v!r}")
    if v == "":
        return "~"
    if any(c.isspace() for c in v) or v in ("-", "~"):
        raise ValueError(f"string {v!r} cannot be a token")
    return v


def n(v):
    if not isinstance(v, int) or v < 0:
        raise ValueError(f"expected a non-negative integer, got {v!r}")
    return str(v)


def fence(f):
    if f is None:
        return "-"
    return " ".join([s(f["session"])] + [n(f.get(k, 0)) for k in ("incarnation", "epoch", "turn", "response")])


def strings(v):
    return " ".join([str(len(v))] + [s(x) for x in v])


def ints(v):
    return " ".join([str(len(v))] + [str(int(x)) for x in v])


def flag(v):
    return "1" if v else "0"


def encode_line(o, handles, max_handles):
    op = o["op"]
    if op == "profile":
        keys = ("max_resources", "max_bindings", "max_completed", "max_active_ops", "max_id_len", "max_stage_results")
        return "profile " + " ".join(n(o[k]) for k in keys)
    if op == "manager":
        handles.clear()
        ms = o.get("max_sessions")
        line = f"manager {'-' if ms is None else n(ms)} {n(o.get('completed_append_limit', 8))} {n(o.get('start_ms', 0))}"
        # The extensions' input limits and overlap rule (both, or neither).
        limits, rule = o.get("input_limits"), o.get("overlap")
        if limits is None and rule is None:
            return line + " -"
        limits = limits or {"bytes": 16 * 1024 * 1024, "turns": 4}
        rule = rule or {"policy": "listen_only", "short_ack_ms": 700, "barge_in_ms": 1200}
        return f"{line} {n(limits['bytes'])} {n(limits['turns'])} {s(rule['policy'])} {n(rule['short_ack_ms'])} {n(rule['barge_in_ms'])}"
    if op == "advance":
        return f"advance {n(o['ms'])}"
    if op == "open":
        modes = o.get("modes")
        modes = "-" if modes is None else strings(modes)
        ttl = o.get("idle_ttl_ms", 300000)
        ttl = "-" if ttl is None else n(ttl)
        return f"open {fence(o['fence'])} {modes} {ttl} {n(o.get('grace_ms', 30000))}"
    if op == "touch":
        return f"touch {fence(o['fence'])} {s(o['activity'])}"
    if op in ("detach", "release_fence", "accept_fence"):
        return f"{op} {fence(o['fence'])}"
    if op == "resume":
        return f"resume {fence(o['fence'])} {n(o['expected_generation'])}"
    if op in ("begin_op", "end_op"):
        return f"{op} {fence(o['fence'])} {s(o['operation_id'])}"
    if op == "append":
        return f"append {fence(o['fence'])} {s(o['mode'])}"
    if op == "prepare_append":
        # Numbers are reused once a handle's last commit has run, so a few
        # reservation slots serve the whole trace.
        if o["handle"] not in handles:
            free = min(set(range(max_handles)) - set(handles.values()), default=None)
            if free is None:
                raise ValueError(f"more than {max_handles} append reservations live at once (the board's limit)")
            handles[o["handle"]] = free
        return f"prepare_append {fence(o['fence'])} {s(o['mode'])} {handles[o['handle']]}"
    if op == "commit_append":
        if o["handle"] not in handles:
            raise ValueError(f"unknown handle {o['handle']!r}")
        return f"commit_append {handles[o['handle']]}"
    if op == "completed":
        return f"completed {fence(o['fence'])} {s(o['operation_id'])} {s(o['mode'])} {flag(o['final'])}"
    if op == "record_completed":
        return f"record_completed {fence(o['fence'])} {s(o['operation_id'])} {s(o['mode'])} {flag(o['final'])} {ints(o['results'])}"
    if op in ("reserve", "bind"):
        return f"{op} {fence(o['fence'])} {n(o['stage'])} {s(o['request_id'])}"
    if op == "stage_ids":
        return f"stage_ids {s(o['session'])} {fence(o.get('fence'))}"
    if op == "resource_ids":
        sub = o.get("submitted")
        return f"resource_ids {s(o['session'])} {fence(o.get('fence'))} {'-' if sub is None else flag(sub)}"
    if op == "release":
        return f"release {s(o['session'])} {strings(o['request_ids'])}"
    if op == "cancel":
        return f"cancel {fence(o['cancelled'])} {fence(o['next'])}"
    if op == "replace_configs":
        return f"replace_configs {s(o['session'])} {flag('session_config' in o)} {flag('runtime_config' in o)}"
    if op in ("begin_close", "close"):
        return f"{op} {fence(o['fence'])} {s(o.get('reason', 'explicit_close'))}"
    if op in ("finalize", "inspect"):
        return f"{op} {s(o['session'])}"
    if op == "collect_expired":
        return f"collect_expired {strings(o.get('excluded', []))}"
    if op == "close_for_requests":
        return f"close_for_requests {strings(o['request_ids'])}"
    if op == "finalize_closed":
        return f"finalize_closed {strings(o['sessions'])}"
    if op == "sessions":
        return "sessions"
    # The extensions (tests/conformance/FORMAT.md).
    if op in ("reserve_input", "reserve_turn"):
        return f"{op} {fence(o['fence'])}" + (f" {n(o['bytes'])}" if op == "reserve_input" else "")
    if op == "release_input":
        return f"release_input {s(o['session'])} {n(o['bytes'])}"
    if op in ("release_turn", "release_all_input", "cancel_pending_input", "reset_overlap_speech"):
        return f"{op} {s(o['session'])}"
    if op == "decide_overlap":
        vad = o.get("vad_speech_started")
        return (
            f"decide_overlap {fence(o['fence'])} {n(o['duration_ms'])} {flag(o['speech'])} {s(o.get('request'))} "
            f"{flag(o.get('force_barge_in'))} {flag(o.get('force_listen'))} {'-' if vad is None else flag(vad)} {s(o.get('transcript'))}"
        )
    if op == "drain":
        return f"drain {fence(o['cancelled'])} {fence(o['next'])} {ints(o['keep'])}"
    if op == "route_output":
        return f"route_output {s(o['session'])} {s(o['request_id'])}"
    if op == "release_drained":
        return f"release_drained {s(o['session'])}"
    if op == "resume_by":
        return f"resume_by {fence(o['fence'])} {n(o['expected_generation'])} {s(o['control_id'])}"
    raise ValueError(f"unknown op {op!r}")


def encode(out, max_bytes, max_handles, paths):
    """Writes the script parts and, beside each, an index: for each script
    line, the trace file, its line number and the expected outcome."""
    parts = [([], [])]
    for path in paths:
        script, index = ["trace"], [{"trace": path, "line": 0}]
        handles = {}
        with open(path) as f:
            lines = [(number, json.loads(text)) for number, text in enumerate(f, 1) if text.strip()]
        last_use = {o["handle"]: i for i, (_, o) in enumerate(lines) if "handle" in o}
        for i, (number, o) in enumerate(lines):
            if o["op"] == "comment":
                continue
            try:
                script.append(encode_line(o, handles, max_handles))
            except (KeyError, ValueError) as e:
                sys.exit(f"{path}:{number}: cannot encode: {e}")
            index.append({"trace": path, "line": number, "op": o["op"], "expect": o.get("expect")})
            for name in [h for h in handles if last_use[h] <= i]:
                del handles[name]
        size = sum(len(l) + 1 for l in script)
        if size > max_bytes:
            sys.exit(f"{path}: {size} bytes encoded, more than a part holds ({max_bytes})")
        if parts[-1][0] and sum(len(l) + 1 for l in parts[-1][0]) + size > max_bytes:
            parts.append(([], []))
        parts[-1][0].extend(script)
        parts[-1][1].extend(index)
    for i, (script, index) in enumerate(parts):
        name = f"{out}.{i}"
        with open(name, "w") as f:
            f.write("\n".join(script) + "\n")
        with open(name + ".index.json", "w") as f:
            json.dump(index, f)
        print(name)


def compare(index_path, output_path):
    index = json.load(open(index_path))
    got = {}
    for text in open(output_path, errors="replace"):
        head, _, rest = text.strip().partition(" ")
        if head.isdigit():
            got[int(head)] = rest
    failures, traces = {}, []
    for i, entry in enumerate(index):
        if entry["line"] == 0:
            traces.append(entry["trace"])
            failures.setdefault(entry["trace"], 0)
            continue
        where = f"{entry['trace']}:{entry['line']}: op {entry['op']}"
        if i not in got:
            print(f"{where}\n  expected {json.dumps(entry['expect'])}\n  actual   (no output: the firmware stopped)")
            failures[entry["trace"]] += 1
            continue
        try:
            actual = json.loads(got[i])
        except json.JSONDecodeError:
            actual = got[i]
        want = entry["expect"]
        if entry["op"] == "profile":
            want = {"ok": None}
        if actual != want:
            print(f"{where}\n  expected {json.dumps(want)}\n  actual   {got[i]}")
            failures[entry["trace"]] += 1
    bad = sum(1 for t in traces if failures[t])
    print(f"traces on the device: {len(traces) - bad} passed, {bad} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) >= 5 and sys.argv[1] == "encode":
        encode(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5:])
    elif len(sys.argv) == 4 and sys.argv[1] == "compare":
        sys.exit(compare(sys.argv[2], sys.argv[3]))
    else:
        sys.exit(__doc__)
