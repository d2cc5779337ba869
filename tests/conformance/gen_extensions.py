#!/usr/bin/env python3
"""Generates the extension traces (../FORMAT.md, "Extensions"): sequences
of input budget, overlap and named-resume operations, with the seed's
detach, cancel and open around them, whose expectations come from
vllm-omni 0.30.0's own session code where it has the rule:

- budgets: `DuplexEngineSession.reserve_input_bytes`,
  `reserve_pending_turn`, `release_input_bytes`, `release_pending_turn`,
  `release_all_input_bytes`, `cancel_pending_input`, with the limits given
  per call as the release's runner does;
- overlap: `overlap_policy.decide` over that session (a session that
  supports barge-in and answers when asked), and its
  `reset_overlap_speech`, which a barge-in also calls.

What the release has no rule for is ours, as docs/guarantees.md says: the
fence is checked first (a stale one is `fence_mismatch`), deciding and
reserving need an open session (`wrong_state` while detached), a refused
reservation is `input_backpressure`, and a resume named by the control id
of the last one answers its generation again.

    DUPLEX_VLLM_OMNI_WHEEL=... python3 tests/conformance/gen_extensions.py OUT_DIR [--seed N] [--traces N] [--ops N]

Needs the wheel, numpy, pybase64, prettytable and regex (the release's
session and overlap modules import them), and pytest (the loader in
python/tests/release.py).
"""

import argparse
import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python", "tests"))

from release import release_module  # noqa: E402

SESSIONS = ("a", "b")
WORDS = ("barge_in", "interrupt", "listen", "continue", "ack", "drop", "ignore", "maybe")
# Tokens without spaces, so that the device's script carries them.
TRANSCRIPTS = ("okay", "嗯嗯", "yes!", "tomorrow?", "go-on")
POLICIES = ("listen_only", "barge_in_on_speech", "thresholds")


class Session:
    """What the generator knows of one session: the seed's part (state,
    fence, lease) by its own rules, the rest in the release's session."""

    def __init__(self, es, config_module, name, incarnation, limits, rule):
        self.name, self.incarnation = name, incarnation
        self.state, self.epoch, self.generation, self.resumed_by = "open", 0, 0, None
        self.limits = limits
        config = config_module.DuplexSessionConfig(
            overlap_short_ack_ms=rule["short_ack_ms"], overlap_barge_in_ms=rule["barge_in_ms"]
        )
        # The release's configuration keeps only its two names; its
        # threshold rule is what `decide` does for any other value.
        config.overlap_policy = rule["policy"]
        self.release = es.DuplexEngineSession(session_id=name, config=config)

    def fence(self, stale=False):
        epoch = self.epoch - 1 if stale else self.epoch
        return {"session": self.name, "incarnation": self.incarnation, "epoch": epoch, "turn": 0, "response": 0}

    def pending(self):
        return {"bytes": self.release.pending_input_bytes, "turns": self.release.pending_input_turns}


def ok(value):
    return {"ok": value}


def error(kind):
    return {"error": kind}


class Generator:
    def __init__(self, rng):
        self.rng = rng
        self.limits = {"bytes": rng.choice([0, 1_280, 6_400, 64_000]), "turns": rng.choice([0, 1, 2, 4])}
        self.rule = {
            "policy": rng.choice(POLICIES),
            "short_ack_ms": rng.choice([0, 300, 700]),
            "barge_in_ms": rng.choice([0, 900, 1_200]),
        }
        self.es = release_module("vllm_omni.engine.duplex.session.engine_session")
        self.policy = release_module("vllm_omni.engine.duplex.session.overlap_policy")
        self.config = release_module("vllm_omni.engine.duplex.config")
        self.sessions = {}
        self.incarnations = {name: 0 for name in SESSIONS}

    def manager(self):
        return {"op": "manager", "input_limits": self.limits, "overlap": self.rule, "expect": ok(None)}

    def open(self, name):
        self.incarnations[name] += 1
        s = Session(self.es, self.config, name, self.incarnations[name], self.limits, self.rule)
        self.sessions[name] = s
        return {"op": "open", "fence": s.fence(), "expect": ok(None)}

    def fenced(self, s, op, needs_open, body):
        """An operation that takes the session's fence: a stale one now and
        then (refused, nothing changes); `needs_open` ones refused while
        detached; else `body()` gives the release's answer."""
        stale = s.epoch > 0 and self.rng.random() < 0.1
        op["fence"] = s.fence(stale)
        if needs_open and s.state != "open":
            op["expect"] = error("wrong_state")
        elif stale:
            op["expect"] = error("fence_mismatch")
        else:
            op["expect"] = body()
        return op

    def step(self):
        rng = self.rng
        name = rng.choice(SESSIONS)
        s = self.sessions.get(name)
        if s is None:
            return self.open(name)
        roll = rng.random()
        es = s.release
        if roll < 0.16:
            size = rng.choice([0, 640, 1_280, 3_200, 20_000])

            def reserve():
                admitted = es.reserve_input_bytes(size, limit=s.limits["bytes"])
                return ok(s.pending()) if admitted else error("input_backpressure")

            return self.fenced(s, {"op": "reserve_input", "bytes": size}, True, reserve)
        if roll < 0.24:

            def turn():
                admitted = es.reserve_pending_turn(limit=s.limits["turns"])
                return ok(s.pending()) if admitted else error("input_backpressure")

            return self.fenced(s, {"op": "reserve_turn"}, True, turn)
        if roll < 0.30:
            size = rng.choice([0, 640, 5_000])
            es.release_input_bytes(size)
            return {"op": "release_input", "session": name, "bytes": size, "expect": ok(s.pending())}
        if roll < 0.34:
            es.release_pending_turn()
            return {"op": "release_turn", "session": name, "expect": ok(s.pending())}
        if roll < 0.37:
            held = es.pending_input_bytes
            es.release_all_input_bytes()
            return {"op": "release_all_input", "session": name, "expect": ok({"bytes": held})}
        if roll < 0.40:
            held = s.pending()
            es.cancel_pending_input()
            return {"op": "cancel_pending_input", "session": name, "expect": ok(held)}
        if roll < 0.70:
            return self.decide(s)
        if roll < 0.75:
            heard = es.reset_overlap_speech()
            return {"op": "reset_overlap_speech", "session": name, "expect": ok({"heard": heard})}
        if roll < 0.82:
            # A barge-in: the epoch moves on; the release's runner forgets
            # the overlapping speech (ours: the epoch change does).
            cancelled = s.fence()
            s.epoch += 1
            es.reset_overlap_speech()
            return {"op": "cancel", "cancelled": cancelled, "next": s.fence(), "expect": ok({"ids": []})}
        if roll < 0.88:
            if s.state != "open":
                return {"op": "detach", "fence": s.fence(), "expect": error("wrong_state")}
            s.state = "detached"
            return {"op": "detach", "fence": s.fence(), "expect": ok(None)}
        if roll < 0.97:
            return self.resume_by(s)
        # Closed: opened again under a new incarnation.
        del self.sessions[name]
        return {"op": "close", "fence": s.fence(), "reason": "client_close", "expect": ok({"closed": True, "ids": []})}

    def decide(self, s):
        rng = self.rng
        duration = rng.choice([0, 20, 100, 300, 700, 701, 1_000])
        speech = rng.random() < 0.75
        op = {"op": "decide_overlap", "duration_ms": duration, "speech": speech}
        event = {"duration_ms": duration, "is_speech": speech}
        if rng.random() < 0.15:
            op["request"] = event["overlap_action"] = rng.choice(WORDS)
        for flag in ("force_barge_in", "force_listen"):
            if rng.random() < 0.08:
                op[flag] = event[flag] = True
        if rng.random() < 0.15:
            started = rng.random() < 0.5
            op["vad_speech_started"] = started
            event["vad"] = {"speech_started": started}
        if rng.random() < 0.15:
            op["transcript"] = event["transcript"] = rng.choice(TRANSCRIPTS)

        def body():
            payload = {"type": "audio", "is_speech": speech}
            d = self.policy.decide(s.release, dict(event), payload, auto_responds=False)
            listen = d["action"] == "listen"
            return ok(
                {
                    "action": d["action"],
                    "reason": d["reason"],
                    "duration_ms": duration,
                    "overlap_speech_ms": s.release.overlap_speech_ms,
                    "buffer_audio": bool(d.get("buffer_audio", True)),
                    "defer_append": listen and bool(d.get("defer_runtime_append", True)),
                    "force_listen": listen and d.get("force_listen", True) is True,
                }
            )

        return self.fenced(s, op, True, body)

    def resume_by(self, s):
        control = self.rng.choice(["ctl-1", "ctl-2", "ctl-3"])
        expected = s.generation if self.rng.random() < 0.8 else s.generation + 1
        op = {"op": "resume_by", "expected_generation": expected, "control_id": control}

        def body():
            if control == s.resumed_by:
                return ok({"generation": s.generation})
            if expected != s.generation:
                return error("generation_mismatch")
            s.generation += 1
            s.resumed_by = control
            s.state = "open"
            return ok({"generation": s.generation})

        return self.fenced(s, op, False, body)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--traces", type=int, default=8)
    parser.add_argument("--ops", type=int, default=150)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for k in range(args.traces):
        seed = args.seed * 100_000 + k
        gen = Generator(random.Random(seed))
        lines = [{"op": "comment", "text": f"extension trace, seed {seed}: expectations from vllm-omni 0.30.0's session code"}]
        lines += [gen.manager()] + [gen.step() for _ in range(args.ops)]
        path = os.path.join(args.out, f"extensions-{seed}.jsonl")
        with open(path, "w", encoding="utf-8") as f:
            for line in lines:
                f.write(json.dumps(line, ensure_ascii=False) + "\n")
        print(path)


if __name__ == "__main__":
    main()
