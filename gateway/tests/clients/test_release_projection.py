"""The gateway's input events against vllm-omni 0.30.0's own projection
(``vllm_omni/engine/duplex/realtime_events.py`` of the released wheel,
loaded unedited without the package's ``__init__``, which imports vllm):
the same client events go to both, and on the contract's socket the
gateway sends what the release's serving layer sends, in its order:
``speech_started`` at a turn's first chunk, ``speech_stopped`` before the
commit's item, the turn's ``transcript`` hints joined on the item and
told by ``conversation.item.input_audio_transcription.completed``.

Item and event ids are each side's own (the release draws uuids), so they
are compared by where they first appear. Without the wheel
(``DUPLEX_VLLM_OMNI_WHEEL``) the test is skipped, unless
``DUPLEX_REQUIRE_RELEASE=1`` (CI), when that is a failure.
"""

from __future__ import annotations

import asyncio
import base64
import json

import websockets

from conftest import release_packages

CHUNK = base64.b64encode(bytes(640)).decode()

# What a client does: appends (with a transcript hint or none), commits
# without a response, clears the buffer.
SCRIPT = [
    ("append", "hello"), ("append", "hello"), ("append", " world"), ("commit", None),
    ("append", None), ("append", None), ("commit", None),
    ("append", "dropped"), ("clear", None), ("append", "kept "), ("commit", None),
]

# What the comparison looks at: the event's type and these members.
COMPARED = ("item_id", "previous_item_id", "audio_start_ms", "audio_end_ms", "content_index", "transcript")


def release_projection():
    release_packages("vllm_omni", "vllm_omni.engine", "vllm_omni.engine.duplex")
    from vllm_omni.engine.duplex import realtime_events
    from vllm_omni.engine.duplex.commands import Commit

    return realtime_events, Commit


def oracle(rte, Commit) -> list[dict]:
    """The events the release's serving layer sends for ``SCRIPT``."""
    state = rte.RealtimeProjectionState(session_id="oracle")
    out = []
    for op, hint in SCRIPT:
        if op == "append":
            payload = {"type": "input_audio_buffer.append", "audio": CHUNK}
            if hint is not None:
                payload["transcript"] = hint
            out += rte.note_input_append(state, payload)
        elif op == "clear":
            rte.clear_input_buffer(state)
            out.append(rte.InputCleared())
        else:
            resolved = rte.resolve_commit(state, Commit(create_response=False))
            out += resolved.events
            transcript = resolved.payload.get("transcript")
            part = {"type": "audio_url", "audio_url": {"url": "native-duplex:input-audio"}}
            if transcript:
                part["transcript"] = transcript
            # What the session emits once the engine took the turn
            # (helpers.audio_committed_payload).
            committed = {"type": "input.committed", "session_id": "oracle", "turn_id": 0, "epoch": 0,
                         "history_len": 0, "native_audio": True,
                         "message": {"role": "user", "content": [part]},
                         "realtime_item_id": resolved.payload["realtime_item_id"]}
            if transcript:
                committed["transcript"] = transcript
            out += rte.project_internal_event(state, committed)
    return [e.to_realtime() for e in out]


async def gateway_events(url: str) -> list[dict]:
    async with websockets.connect(url + "/v1/realtime?duplex=1&autostart=0", max_size=None) as ws:
        async def until(kind: str) -> list[dict]:
            seen = []
            while True:
                event = json.loads(await asyncio.wait_for(ws.recv(), timeout=10))
                assert event["type"] != "error", event
                seen.append(event)
                if event["type"] == kind:
                    return seen

        await ws.send(json.dumps({"type": "session.update", "session": {"session_id": "projection-1"}}))
        await until("session.updated")
        out = []
        for i, (op, hint) in enumerate(SCRIPT):
            if op == "append":
                event = {"type": "input_audio_buffer.append", "event_id": f"c{i}", "audio": CHUNK}
                if hint is not None:
                    event["transcript"] = hint
                await ws.send(json.dumps(event))
            elif op == "clear":
                await ws.send(json.dumps({"type": "input_audio_buffer.clear"}))
                out += await until("input_audio_buffer.cleared")
            else:
                await ws.send(json.dumps({"type": "input_audio_buffer.commit", "response_create": False}))
                out += await until("conversation.item.done")
        return out


def shape(events: list[dict]) -> list[tuple]:
    """Each event's type and compared members, item ids by first sight."""
    names: dict[str, str] = {}

    def name(value):
        if isinstance(value, str) and value.startswith("item"):
            return names.setdefault(value, f"item#{len(names)}")
        return value

    out = []
    for event in events:
        members = tuple((k, name(event[k])) for k in COMPARED if k in event)
        item = event.get("item")
        if isinstance(item, dict):
            content = tuple((p.get("type"), p.get("transcript") or "") for p in item.get("content", []))
            members += (("item", name(item["id"]), item.get("role"), item.get("status"), content),)
        out.append((event["type"], members))
    return out


def test_input_events_are_the_release_s(gateway):
    rte, Commit = release_projection()
    expected = shape(oracle(rte, Commit))
    gw = gateway()
    seen = shape(asyncio.run(asyncio.wait_for(gateway_events(gw.url), timeout=60)))
    assert seen == expected, "\n".join(f"{a}\n  {b}" for a, b in zip(seen, expected))
    kinds = [kind for kind, _ in seen]
    # The script reaches every event under test.
    assert kinds.count("input_audio_buffer.speech_started") == 4, kinds
    assert kinds.count("conversation.item.input_audio_transcription.completed") == 2, kinds
