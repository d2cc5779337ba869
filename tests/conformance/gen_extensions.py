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
  `reset_overlap_speech`, which a barge-in also calls;
- draining: its `bind_stage_request`, `complete_model_turn`,
  `bind_draining_request`, `is_draining_request`, `pop_draining_request`
  and `release_resources_for_request_ids`, driven at a new turn as its
  runner drives them (the previous requests of the stages that do not
  drain are dropped, those of the draining stage drain under the previous
  response).

What the release has no rule for is ours, as docs/guarantees.md says: the
fence is checked first (a stale one is `fence_mismatch`), deciding and
reserving need an open session (`wrong_state` while detached), a refused
reservation is `input_backpressure`, a resume named by the control id
of the last one answers its generation again, and a barge-in that keeps
the draining stage's request leaves it bound, stale, until released.

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
STAGES = (0, 1, 2)
#: The stage whose request drains (a plugin's `draining_stage_ids`).
DRAINING = (2,)
#: The conformance profile's request resources (`RESOURCES`).
RESOURCES = 8


class Session:
    """What the generator knows of one session: the seed's part (state,
    fence, lease) by its own rules, the rest in the release's session."""

    def __init__(self, es, config_module, name, incarnation, limits, rule):
        self.name, self.incarnation = name, incarnation
        self.state, self.epoch, self.generation, self.resumed_by = "open", 0, 0, None
        self.turn = 0
        #: Requests kept bound across a barge-in: (stage, id, epoch, turn),
        #: oldest first (the release forgets them at its barge-in).
        self.stale = []
        self.limits = limits
        config = config_module.DuplexSessionConfig(
            overlap_short_ack_ms=rule["short_ack_ms"], overlap_barge_in_ms=rule["barge_in_ms"]
        )
        # The release's configuration keeps only its two names; its
        # threshold rule is what `decide` does for any other value.
        config.overlap_policy = rule["policy"]
        self.release = es.DuplexEngineSession(session_id=name, config=config)
        self.release.begin_response()

    def fence(self, stale=False):
        epoch = self.epoch - 1 if stale else self.epoch
        return {"session": self.name, "incarnation": self.incarnation, "epoch": epoch, "turn": self.turn, "response": 0}

    def rows(self):
        """Every request held, oldest first: (stage, id, epoch, turn)."""
        live = [(r.stage_id, r.request_id, r.fence.epoch, r.fence.turn_id) for r in self.release.request_resources.values()]
        return self.stale + live

    def held(self):
        return list(dict.fromkeys(rid for _, rid, _, _ in self.rows()))

    def route(self, request):
        """Where `request`'s output goes: the release says which drain;
        what a barge-in kept is stale."""
        for stage, rid, epoch, turn in self.rows():
            if rid != request:
                continue
            if epoch < self.epoch:
                owner = "stale"
            elif self.release.is_draining_request(rid):
                owner = "draining"
            else:
                owner = "current"
            return {"owner": owner, "stage": stage, "epoch": epoch, "turn": turn, "response": 0}
        return None

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
        self.contracts = release_module("vllm_omni.engine.duplex.contracts")
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
        if roll < 0.56:
            return self.decide(s)
        if roll < 0.59:
            heard = es.reset_overlap_speech()
            return {"op": "reset_overlap_speech", "session": name, "expect": ok({"heard": heard})}
        if roll < 0.63:
            return self.barge_in(s, keep=rng.random() < 0.5)
        if roll < 0.86:
            return self.drain_step(s)
        if roll < 0.90:
            if s.state != "open":
                return {"op": "detach", "fence": s.fence(), "expect": error("wrong_state")}
            s.state = "detached"
            return {"op": "detach", "fence": s.fence(), "expect": ok(None)}
        if roll < 0.98:
            return self.resume_by(s)
        # Closed: opened again under a new incarnation.
        del self.sessions[name]
        return {"op": "close", "fence": s.fence(), "reason": "client_close", "expect": ok({"closed": True, "ids": s.held()})}

    def drain_step(self, s):
        """Draining: a stage's request bound, a new turn that lets the
        speaker drain, a request's route, a drained request finished, or
        everything that drains released."""
        rng, es = self.rng, s.release
        roll = rng.random()
        if roll < 0.35:
            stage = rng.choice(STAGES)
            rid = f"e{s.epoch}t{s.turn}s{stage}"
            op = {"op": "bind", "fence": s.fence(), "stage": stage, "request_id": rid}
            if rid not in s.held() and len(s.rows()) >= RESOURCES:
                # The conformance profile's resource table is full.
                op["expect"] = error("full")
                return op
            es.bind_stage_request(stage, rid, fence=self.contract_fence(s))
            op["expect"] = ok(None)
            return op
        if roll < 0.55:
            # The next turn starts while the answer plays (the release's
            # concurrent-turn branch, with the previous response active).
            cancelled = s.fence()
            before = list(es.request_resources.keys())
            at = [rid for (_, rid), r in es.request_resources.items() if r.fence.turn_id == s.turn and r.fence.epoch == s.epoch]
            prior = es.active_response_id
            es.complete_model_turn(s.turn)
            dropped = []
            for sid, rid in before:
                if sid not in DRAINING:
                    es.request_resources.pop((sid, rid), None)
                    dropped.append(rid)
                elif prior is not None and not es.is_draining_request(rid):
                    es.bind_draining_request(rid, prior)
            es.begin_response(turn_id=es.turn_id)
            s.turn = es.turn_id
            ids = [rid for rid in dict.fromkeys(dropped) if rid in at]
            return {"op": "drain", "cancelled": cancelled, "next": s.fence(), "keep": list(DRAINING), "expect": ok({"ids": ids})}
        if roll < 0.8:
            known = [rid for _, rid, _, _ in s.rows()] + ["nobody"]
            not_current = [rid for rid in known[:-1] if s.route(rid)["owner"] != "current"]
            rid = rng.choice(not_current if not_current and rng.random() < 0.6 else known)
            return {"op": "route_output", "session": s.name, "request_id": rid, "expect": ok(s.route(rid))}
        if roll < 0.9:
            draining = [rid for rid in es.draining_request_ids() if es.is_draining_request(rid)]
            if draining:
                # A draining request finished (the release's end of turn).
                rid = rng.choice(draining)
                es.pop_draining_request(rid)
                es.release_resources_for_request_ids([rid])
                return {"op": "release", "session": s.name, "request_ids": [rid], "expect": ok(None)}
        ids = [rid for rid in s.held() if s.route(rid)["owner"] != "current"]
        for rid in ids:
            es.pop_draining_request(rid)
        es.release_resources_for_request_ids(ids)
        s.stale = []
        return {"op": "release_drained", "session": s.name, "expect": ok({"ids": ids})}

    def contract_fence(self, s):
        return self.contracts.DuplexFence(s.name, epoch=s.epoch, turn_id=s.turn)

    def barge_in(self, s, keep):
        """A barge-in: the epoch moves on; the cancelled fence's requests
        are released (those of the draining stage kept bound, stale, when
        `keep`); the release's runner forgets the overlapping speech and
        what drained (ours: the epoch change does the first)."""
        es = s.release
        cancelled = s.fence()
        at = [(r.stage_id, rid) for (_, rid), r in es.request_resources.items() if r.fence.epoch == s.epoch and r.fence.turn_id == s.turn]
        released = list(dict.fromkeys(rid for stage, rid in at if not (keep and stage in DRAINING)))
        # Everything else the release held becomes stale (it forgets what
        # drained); the released ones leave.
        s.stale += [row for row in s.rows()[len(s.stale):] if row[1] not in released]
        es.request_resources.clear()
        es.barge_in()
        es.begin_response()
        es.reset_overlap_speech()
        s.epoch += 1
        op = {"op": "drain", "cancelled": cancelled, "next": s.fence(), "keep": list(DRAINING) if keep else []}
        op["expect"] = ok({"ids": released})
        return op

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
