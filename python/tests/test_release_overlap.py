"""Differential: a session's overlap decisions beside vllm-omni 0.30.0's
own `overlap_policy.decide` over its own `DuplexEngineSession`
(`vllm_omni/engine/duplex/session/overlap_policy.py` and
`engine_session.py`, imported from the released wheel unmodified; see
`release.py`), over generated sequences of overlapping appends (speech and
silence of any length, clients' `overlap_action` words known and unknown,
`force_barge_in`, `force_listen`, a VAD's `speech_started`, transcripts),
resets at a response's end and barge-ins, under each policy and random
thresholds.

The release is called as its runner calls it for a session that answers
when asked (`auto_responds=False`) and supports barge-in, with the
append's duration and speech given on the event (`duration_ms`,
`is_speech`), as a host that measured them passes them. Compared after
every step: the action, the reason, whether the audio is kept, the
speech heard, and for a listen whether the append is held back and the
model kept listening (what the runner reads of a listen, with its
defaults).

Where ours differs on purpose (docs/guarantees.md): the `thresholds`
rule has a name (the release reaches it only through a policy value its
configuration never keeps), and thresholds are at most 65,535 ms.
"""

import random

import pytest

import duplex_session as d
from release import release_module

WORDS = ["barge_in", " Interrupt", "cancel", "listen", "continue", "continue_output", "ACK", "drop", "ignore", "silence", "maybe", ""]
TRANSCRIPTS = ["okay", "Go on", "嗯嗯", "yes!", "what about tomorrow", "", "  ", "ok ok"]


def release_modules():
    session = release_module("vllm_omni.engine.duplex.session.engine_session")
    policy = release_module("vllm_omni.engine.duplex.session.overlap_policy")
    config = release_module("vllm_omni.engine.duplex.config")
    return session, policy, config


def test_the_modules_are_the_release_s_own():
    session, policy, _ = release_modules()
    assert policy.__file__.endswith("vllm_omni/engine/duplex/session/overlap_policy.py")
    assert session.__file__.endswith("vllm_omni/engine/duplex/session/engine_session.py")


def what_the_runner_reads(decision: dict) -> tuple:
    """The parts of a decision the release's runner acts on."""
    action = decision["action"]
    listen = action == "listen"
    return (
        action,
        decision["reason"],
        bool(decision.get("buffer_audio", True)),
        listen and bool(decision.get("defer_runtime_append", True)),
        listen and decision.get("force_listen", True) is True,
    )


def event_of(rng: random.Random) -> tuple[dict, dict]:
    """An overlapping append as the release's event, and as our keywords."""
    event: dict = {"duration_ms": rng.choice([0, 20, 100, 300, 640, 700, 701, 1_000, 1_500]), "is_speech": rng.random() < 0.75}
    ours: dict = {}
    if rng.random() < 0.2:
        event["overlap_action"] = ours["overlap_action"] = rng.choice(WORDS)
    if rng.random() < 0.1:
        event["force_barge_in"] = ours["force_barge_in"] = True
    if rng.random() < 0.1:
        event["force_listen"] = ours["force_listen"] = True
    if rng.random() < 0.2:
        started = rng.random() < 0.5
        event["vad"] = {"speech_started": started}
        ours["vad_speech_started"] = started
    if rng.random() < 0.2:
        event["transcript"] = ours["transcript"] = rng.choice(TRANSCRIPTS)
    return event, ours


@pytest.mark.parametrize("policy", ["listen_only", "barge_in_on_speech", "thresholds"])
def test_overlap_decisions_match_the_release(policy):
    session_module, overlap_policy, config_module = release_modules()
    for seed in range(150):
        rng = random.Random(f"{policy}-{seed}")
        short_ack = rng.choice([0, 300, 700, 2_000])
        barge_in = rng.choice([0, 700, 1_200, 3_000])
        config = config_module.DuplexSessionConfig(overlap_short_ack_ms=short_ack, overlap_barge_in_ms=barge_in)
        # The release's configuration keeps only its two names; its
        # threshold rule is what `decide` does for any other value.
        config.overlap_policy = policy
        theirs = session_module.DuplexEngineSession(session_id=f"s{seed}", config=config)
        manager = d.DuplexSessionRuntimeManager(
            overlap_policy=policy, overlap_short_ack_ms=short_ack, overlap_barge_in_ms=barge_in
        )
        fence = d.DuplexFence(f"s{seed}")
        ours = manager.open_session(fence)
        for step in range(40):
            roll = rng.random()
            where = f"{policy} seed {seed} step {step}"
            if roll < 0.08:
                # The response ended.
                assert ours.reset_overlap_speech() == theirs.reset_overlap_speech(), where
            elif roll < 0.12:
                # A barge-in: the release's runner resets; ours moves the epoch.
                theirs.reset_overlap_speech()
                newer = d.DuplexFence(fence.session_id, epoch=fence.epoch + 1)
                ours.cancel_fence(fence, newer)
                fence = newer
            else:
                event, kwargs = event_of(rng)
                payload = {"type": "audio", "is_speech": event["is_speech"]}
                expected = overlap_policy.decide(theirs, dict(event), payload, auto_responds=False)
                got = ours.decide_overlap(fence, event["duration_ms"], event["is_speech"], **kwargs)
                assert what_the_runner_reads(got) == what_the_runner_reads(expected), f"{where}: {event} -> {got} vs {expected}"
                if "duration_ms" in expected:
                    assert got["duration_ms"] == expected["duration_ms"], where
            assert ours.overlap_speech_ms == theirs.overlap_speech_ms, where


def test_a_stale_fence_decides_nothing(manager, fence):
    s = manager.open_session(fence)
    s.decide_overlap(fence, 300, True)
    newer = d.DuplexFence(fence.session_id, epoch=1)
    s.cancel_fence(fence, newer)
    assert s.overlap_speech_ms == 0
    with pytest.raises(RuntimeError) as refused:
        s.decide_overlap(fence, 300, True)
    assert refused.value.kind == "fence_mismatch"
    assert s.overlap_speech_ms == 0


def test_the_rule_is_checked_when_the_manager_is_made():
    for bad, kind in ((dict(overlap_policy="shout"), ValueError), (dict(overlap_short_ack_ms=70_000), ValueError), (dict(overlap_barge_in_ms=-1), ValueError), (dict(overlap_policy=3), TypeError)):
        with pytest.raises(kind) as refused:
            d.DuplexSessionRuntimeManager(**bad)
        assert refused.value.kind == "invalid_config", bad
    assert d.DuplexSessionRuntimeManager().open_session(d.DuplexFence("x")).overlap_config == {
        "overlap_policy": "listen_only",
        "overlap_short_ack_ms": 700,
        "overlap_barge_in_ms": 1200,
    }


def test_arguments_of_the_wrong_type_are_refused_and_change_nothing(manager, fence):
    s = manager.open_session(fence)
    for bad in (dict(duration_ms=-1, is_speech=True), dict(duration_ms="20", is_speech=True), dict(duration_ms=20, is_speech="yes")):
        with pytest.raises((TypeError, ValueError)) as refused:
            s.decide_overlap(fence, **bad)
        assert refused.value.kind == "invalid_argument", bad
    with pytest.raises(TypeError):
        s.decide_overlap(fence, 20, True, overlap_action=1)
    assert s.overlap_speech_ms == 0
