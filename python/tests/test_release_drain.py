"""Differential: which requests drain, beside vllm-omni 0.30.0's own
`DuplexEngineSession` (`vllm_omni/engine/duplex/session/engine_session.py`,
imported from the released wheel unmodified; see `release.py`), over
generated conversations of concurrent turns, stages that reach their
request late or not at all, draining requests that finish, and barge-ins.

The release's session is driven as its runner drives it:
- a new turn while the previous answer plays (`model_channel.py`, the
  concurrent-turn branch of the ephemeral turn commit): the turn advances
  (`complete_model_turn`), the previous requests of the stages that are
  not draining stages are dropped, those of draining stages are bound as
  draining to the previous response (`bind_draining_request`, an
  already-draining one keeping its own), and a new response begins;
- a draining request's end of turn (`model_channel.py`, `end_of_turn`):
  `pop_draining_request`, its draining-stage resources popped, and its
  resources released (`release_resources_for_request_ids`);
- a barge-in (`runner.py`, `_cancel_active_response`): the requests of
  older turns (the draining ones) released, the epoch advanced
  (`barge_in`, which forgets what drained), the cancelled fence's
  requests released.

Ours is driven with `drain_fence` for the turn, `release_request_ids` for
a drained request's end, and `cancel_fence` then `release_drained` for a
barge-in. Compared after every step: the requests each holds, which of
them drain, and `is_draining_request` for every request either ever had.
"""

import random

import pytest

import duplex_session as d
from release import release_module

STAGES = (0, 1, 2)
#: The speaker stage drains (the release's plugins declare theirs in
#: `draining_stage_ids`).
DRAINING = (2,)


def test_the_module_is_the_release_s_own():
    session = release_module("vllm_omni.engine.duplex.session.engine_session")
    assert session.__file__.endswith("vllm_omni/engine/duplex/session/engine_session.py")


class Pair:
    """The release's session and ours, driven step by step alike."""

    def __init__(self, session_module, contracts, config, name: str):
        self.contracts = contracts
        self.theirs = session_module.DuplexEngineSession(session_id=name, config=config.DuplexSessionConfig())
        self.theirs.begin_response()
        self.ours = d.DuplexSessionRuntimeManager().open_session(d.DuplexFence(name))
        self.name = name
        self.seen: set[str] = set()

    def fences(self):
        t = self.theirs
        theirs = self.contracts.DuplexFence(t.session_id, epoch=t.epoch, turn_id=t.turn_id)
        ours = d.DuplexFence(self.name, epoch=t.epoch, turn_id=t.turn_id)
        return theirs, ours

    def request(self, stage: int) -> str:
        t = self.theirs
        return f"e{t.epoch}-t{t.turn_id}-s{stage}"

    def bind(self, stage: int) -> None:
        theirs, ours = self.fences()
        rid = self.request(stage)
        self.theirs.bind_stage_request(stage, rid, fence=theirs)
        self.ours.bind_stage_request(stage, rid, fence=ours)
        self.seen.add(rid)

    def next_turn(self) -> None:
        t = self.theirs
        _, before = self.fences()
        stale_keys = list(t.request_resources.keys())
        prior_response_id = t.active_response_id
        t.complete_model_turn(t.turn_id)
        for sid, rid in stale_keys:
            if sid not in DRAINING:
                t.request_resources.pop((sid, rid), None)
            elif prior_response_id is not None and not t.is_draining_request(rid):
                t.bind_draining_request(rid, prior_response_id)
        if prior_response_id is not None:
            t.begin_response(turn_id=t.turn_id)
        else:
            t.bind_response_turn(t.turn_id)
        _, after = self.fences()
        self.ours.drain_fence(before, after, DRAINING)

    def drained(self, rid: str) -> None:
        t = self.theirs
        t.pop_draining_request(rid)
        for sid in DRAINING:
            t.request_resources.pop((sid, rid), None)
        t.release_resources_for_request_ids([rid])
        self.ours.release_request_ids([rid])

    def barge_in(self) -> None:
        t = self.theirs
        theirs_before, before = self.fences()
        cancelled = set(t.resource_request_ids(theirs_before))
        older = [rid for rid in t.draining_request_ids() if rid not in cancelled]
        t.release_resources_for_request_ids(older)
        t.barge_in()
        t.release_fence(theirs_before)
        # The interrupting turn is answered: a response begins.
        t.begin_response()
        _, after = self.fences()
        self.ours.cancel_fence(before, after)
        self.ours.release_drained()

    def check(self, where: str) -> None:
        t, o = self.theirs, self.ours
        held = set(t.resource_request_ids())
        assert set(o.resource_request_ids()) == held, where
        draining = set(t.draining_request_ids()) & held
        assert set(o.draining_request_ids()) == draining, where
        for rid in sorted(self.seen):
            want = t.is_draining_request(rid) and rid in held
            assert o.is_draining_request(rid) == want, f"{where}: {rid}"
            route = o.route_output(rid)
            if rid not in held:
                assert route is None, f"{where}: {rid} routes {route}"
            else:
                assert route["owner"] == ("draining" if want else "current"), f"{where}: {rid} {route}"


def test_draining_matches_the_release():
    session_module = release_module("vllm_omni.engine.duplex.session.engine_session")
    contracts = release_module("vllm_omni.engine.duplex.contracts")
    config = release_module("vllm_omni.engine.duplex.config")
    drained_some = barged = 0
    for seed in range(300):
        rng = random.Random(f"drain-{seed}")
        pair = Pair(session_module, contracts, config, f"s{seed}")
        for stage in STAGES:
            pair.bind(stage)
        for step in range(30):
            where = f"seed {seed} step {step}"
            roll = rng.random()
            if roll < 0.4:
                pair.next_turn()
                # The new turn's stages start, some of them not yet.
                for stage in STAGES:
                    if rng.random() < 0.6:
                        pair.bind(stage)
            elif roll < 0.65:
                waiting = [s for s in STAGES if pair.request(s) not in pair.theirs.resource_request_ids()]
                if waiting:
                    pair.bind(rng.choice(waiting))
            elif roll < 0.9:
                draining = sorted(pair.theirs.draining_request_ids())
                if draining:
                    pair.drained(rng.choice(draining))
                    drained_some += 1
            else:
                pair.barge_in()
                barged += 1
                for stage in STAGES:
                    if rng.random() < 0.5:
                        pair.bind(stage)
            pair.check(where)
    # The generated conversations reach every path.
    assert drained_some > 500 and barged > 500, (drained_some, barged)


def test_a_turn_that_lets_the_speaker_drain():
    """The case in words: the answer to turn 0 still plays when turn 1
    starts; its text stage is dropped, its speaker drains under the old
    response until it finishes."""
    m = d.DuplexSessionRuntimeManager()
    f0 = d.DuplexFence("s")
    s = m.open_session(f0)
    s.bind_stage_request(1, "llm-0", fence=f0)
    s.bind_stage_request(2, "tts-0", fence=f0)
    f1 = d.DuplexFence("s", turn_id=1)
    assert s.drain_fence(f0, f1, [2]) == ["llm-0"]
    assert s.route_output("tts-0") == {"owner": "draining", "stage_id": 2, "epoch": 0, "turn_id": 0, "response_id": 0}
    assert s.is_draining_request("tts-0") and s.draining_request_ids() == ["tts-0"]
    s.bind_stage_request(2, "tts-1", fence=f1)
    assert s.route_output("tts-1")["owner"] == "current"
    assert not s.is_draining_request("tts-1") and not s.is_draining_request(7)
    # A barge-in keeps the new speaker flushing: stale until released.
    f2 = d.DuplexFence("s", epoch=1)
    assert s.drain_fence(f1, f2, keep_stages=(2,)) == []
    assert s.route_output("tts-1")["owner"] == "stale"
    assert s.release_drained() == ["tts-0", "tts-1"]
    assert s.release_drained() == [] and s.route_output("tts-0") is None


def test_refusals_change_nothing():
    m = d.DuplexSessionRuntimeManager()
    f0 = d.DuplexFence("s")
    s = m.open_session(f0)
    s.bind_stage_request(2, "tts", fence=f0)
    with pytest.raises(TypeError, match="keep_stages must be an iterable of int"):
        s.drain_fence(f0, d.DuplexFence("s", turn_id=1), 2)
    with pytest.raises(TypeError):
        s.drain_fence(f0, d.DuplexFence("s", turn_id=1), ["2"])
    with pytest.raises(d.DuplexFenceMismatchError):
        s.drain_fence(f0, f0, [2])
    assert s.fence == f0 and s.route_output("tts")["owner"] == "current"
    with pytest.raises(TypeError, match="request_id"):
        s.route_output(3)
    s.close(f0)
    assert s.route_output("tts") is None and s.draining_request_ids() == [] and s.release_drained() == []
