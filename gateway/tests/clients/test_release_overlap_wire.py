"""Differential, on the wire: the gateway's ``overlap.decision`` for each
chunk sent over the parrot's answer, beside what vllm-omni 0.30.0's own
``overlap_policy.decide`` makes of the same event (loaded from the wheel,
unedited, over its own ``DuplexEngineSession``).

The events carry the release's hint keys in every combination a client
may send (``duration_ms``, ``is_speech``, ``speech``, ``vad`` with
``is_speech``, probabilities and ``speech_started``, ``speech_probability``,
``overlap_action``/``overlap``, ``force_listen``, ``transcript``), values of
the wrong type among them, and audio loud or silent: what the gateway reads
of the event and of the audio (its length, its energy) must be what the
release reads. The release gets the payload its serving layer builds
(the audio converted to 16 kHz ``pcm_f32le``). No event asks for a barge-in
(the answer must outlive the events), and the thresholds rule's barge-in
threshold is out of reach; ``listen_only`` runs too.
"""

from __future__ import annotations

import asyncio
import base64
import importlib
import json
import logging
import random
import struct
import sys
import types

import pytest
import websockets

from conftest import release_packages


def release():
    release_packages("vllm_omni", "vllm_omni.engine", "vllm_omni.engine.duplex", "vllm_omni.engine.duplex.session", "vllm_omni.metrics")
    if "vllm.logger" not in sys.modules:
        vllm, logger = types.ModuleType("vllm"), types.ModuleType("vllm.logger")
        vllm.__path__ = []
        logger.init_logger = logging.getLogger
        sys.modules.setdefault("vllm", vllm)
        sys.modules["vllm.logger"] = logger
    names = ("engine_session", "overlap_policy")
    session, policy = (importlib.import_module(f"vllm_omni.engine.duplex.session.{n}") for n in names)
    return session, policy, importlib.import_module("vllm_omni.engine.duplex.config")


def pcm(ms: int, amplitude: int) -> bytes:
    return struct.pack(f"<{16 * ms}h", *([amplitude, -amplitude] * (8 * ms)))


# The corners of the release's reading, sent first, each with loud and
# with silent audio: a key present with a value of the wrong type stops
# the search there; a flag is truthy; `overlap` stands in for a falsy
# `overlap_action`; a duration is any number, truncated, at least 0.
EDGES = [
    {"vad": {"speech_probability": "high", "probability": 0.9}},
    {"vad": {"speech_probability": None, "probability": 0.9}},
    {"vad": {"probability": 0.9}},
    {"vad": {"is_speech": 0, "speech_probability": 0.7}},
    {"vad": ["is_speech"], "speech_probability": 0.6},
    {"is_speech": "yes", "speech": False},
    {"speech_probability": "x"},
    {"duration_ms": True},
    {"duration_ms": "40", "audio_duration_ms": 30},
    {"duration_ms": -5},
    {"duration_ms": 150.7},
    {"overlap_action": "", "overlap": "silence"},
    {"overlap_action": 7, "overlap": "silence"},
    {"overlap_action": " ACK "},
    {"force_listen": ""},
    {"force_listen": 1},
    {"transcript": "Go on"},
    {"transcript": "go  on"},
]


def hints(rng: random.Random) -> dict:
    """Some of the release's hint keys, of any type a client may send."""
    out: dict = {}
    pick = lambda *values: rng.choice(values)  # noqa: E731
    if rng.random() < 0.3:
        out["duration_ms"] = pick(0, 20, 150.7, 400, -5, "40", True)
    if rng.random() < 0.3:
        out["is_speech"] = pick(True, False, "yes", 1)
    if rng.random() < 0.2:
        out["speech"] = pick(True, False)
    if rng.random() < 0.3:
        vad: dict = {}
        for key, values in (("is_speech", (True, False, 0)), ("speech_probability", (0.2, 0.7, "high", None)), ("probability", (0.1, 0.9)), ("speech_started", (False, "no"))):
            if rng.random() < 0.4:
                vad[key] = rng.choice(values)
        out["vad"] = pick(vad, "loud", [vad])
    if rng.random() < 0.15:
        out["speech_probability"] = pick(0.3, 0.6, "x")
    if rng.random() < 0.2:
        out["overlap_action"] = pick("listen", "continue", "ack", "drop", "ignore", "", "maybe", 7)
    if rng.random() < 0.1:
        out["overlap"] = pick("listen", "silence", "continue_output")
    if rng.random() < 0.1:
        out["force_listen"] = pick(True, 1, "", 0)
    if rng.random() < 0.2:
        out["transcript"] = pick("okay", "Go on", "嗯嗯", "what about tomorrow", "")
    return out


@pytest.mark.parametrize("policy", ["thresholds", "listen_only"])
def test_the_gateway_decides_what_the_release_decides(parrot_url, policy):
    session_module, overlap_policy, config_module = release()
    rule = {"overlap_policy": policy, "overlap_short_ack_ms": 300, "overlap_barge_in_ms": 65_535}
    config = config_module.DuplexSessionConfig(overlap_short_ack_ms=300, overlap_barge_in_ms=65_535)
    config.overlap_policy = policy
    theirs = session_module.DuplexEngineSession(session_id="wire", config=config)
    rng = random.Random(f"wire-{policy}")

    async def talk() -> list[tuple[dict, dict, dict]]:
        url = parrot_url + "/v1/realtime?duplex=1&autostart=0"
        async with websockets.connect(url, max_size=None) as ws:

            async def until(kind: str) -> dict:
                while True:
                    event = json.loads(await asyncio.wait_for(ws.recv(), timeout=10))
                    assert event["type"] != "error", event
                    if event["type"] == kind:
                        return event

            await ws.send(json.dumps({"type": "session.update", "session": {"session_id": f"wire-{policy}", **rule}}))
            await until("session.updated")
            # Four seconds of speech, in half-second chunks: the parrot says
            # it back at its pace.
            for _ in range(8):
                await ws.send(json.dumps({"type": "input_audio_buffer.append", "audio": base64.b64encode(pcm(500, 3_000)).decode()}))
            await ws.send(json.dumps({"type": "input_audio_buffer.commit", "response_create": True}))
            await until("response.created")
            seen = []
            edges = [(edge, amplitude) for edge in EDGES for amplitude in (0, 3_000)]
            for k in range(len(edges) + 60):
                edge, amplitude = edges[k] if k < len(edges) else (hints(rng), rng.choice([0, 40, 3_000]))
                audio = pcm(rng.choice([20, 100, 320]), amplitude)
                event = {"type": "input_audio_buffer.append", "audio": base64.b64encode(audio).decode(), **edge}
                await ws.send(json.dumps(event))
                seen.append((event, audio, await until("overlap.decision")))
            return seen

    for event, audio, got in asyncio.run(talk()):
        # The payload the release's serving layer builds: 16 kHz pcm_f32le.
        f32 = struct.pack(f"<{len(audio) // 2}f", *(s / 32768.0 for s in struct.unpack(f"<{len(audio) // 2}h", audio)))
        payload = {"type": "audio", "audio": base64.b64encode(f32).decode(), "format": "pcm_f32le", "sample_rate_hz": 16_000}
        payload["is_speech"] = overlap_policy.input_looks_like_speech(theirs, event, payload)
        want = overlap_policy.decide(theirs, dict(event), payload, auto_responds=False)
        listen = want["action"] == "listen"
        shown = {k: v for k, v in event.items() if k != "audio"}
        assert (got["action"], got["reason"]) == (want["action"], want["reason"]), (shown, got, want)
        meta = got["metadata"]
        assert meta["duration_ms"] == want["duration_ms"], (shown, meta, want)
        assert meta["overlap_speech_ms"] == theirs.overlap_speech_ms, (shown, meta)
        assert meta["buffer_audio"] == bool(want.get("buffer_audio", True)), (shown, meta, want)
        if listen:
            assert meta["defer_runtime_append"] == bool(want.get("defer_runtime_append", True)), (shown, meta, want)
