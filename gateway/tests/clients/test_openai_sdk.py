"""The official ``openai`` SDK's realtime client against the gateway, as a
user writes it: ``base_url=http://HOST:PORT/v1``, the JWT as ``api_key``."""

from __future__ import annotations

import asyncio

import pytest
from openai import AsyncOpenAI

from conftest import CHUNK, SECRET, jwt



def client(gw, key: str = "anonymous") -> AsyncOpenAI:
    return AsyncOpenAI(base_url=gw.http + "/v1", api_key=key, max_retries=0)


async def until(conn, kind: str, seen: list, limit: int = 200):
    """Reads events into ``seen`` until one of type ``kind``."""
    for _ in range(limit):
        event = await asyncio.wait_for(conn.recv(), timeout=10)
        seen.append(event)
        if event.type == kind:
            return event
    raise AssertionError(f"no {kind} in {[e.type for e in seen]}")


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, timeout=60))


def test_a_conversation(gateway):
    gw = gateway()

    async def talk():
        async with client(gw).realtime.connect(model="duplex-stand-in") as conn:
            seen = []
            created = await until(conn, "session.created", seen)
            assert created.session.id and created.session.model == "duplex-stand-in"
            await conn.session.update(session={"type": "realtime", "instructions": "Be brief."})
            await until(conn, "session.updated", seen)
            for _ in range(10):
                await conn.input_audio_buffer.append(audio=CHUNK)
            await conn.input_audio_buffer.commit()
            await until(conn, "input_audio_buffer.committed", seen)
            await conn.response.create()
            done = await until(conn, "response.done", seen)
            # Nothing else is in flight: the next answer is the heartbeat's.
            await conn.send({"type": "session.heartbeat"})
            await until(conn, "session.heartbeat_ack", seen)
            return seen, done

    seen, done = run(talk())
    kinds = [e.type for e in seen]
    assert done.response.status == "completed"
    assert kinds.count("response.created") == 1, kinds
    deltas = [e.delta for e in seen if e.type == "response.output_text.delta"]
    assert len(deltas) == 8
    text_done = next(e for e in seen if e.type == "response.output_text.done")
    assert text_done.text == "".join(deltas)
    order = [k for k in kinds if k.startswith("response.")]
    assert order[0] == "response.created" and order[-1] == "response.done"
    assert order.index("response.output_item.added") < order.index("response.content_part.added")
    assert order.index("response.content_part.added") < order.index("response.output_text.delta")
    assert done.response.id == seen[kinds.index("response.created")].response.id


def test_a_barge_in(gateway):
    gw = gateway()

    async def talk():
        async with client(gw).realtime.connect(model="duplex-stand-in") as conn:
            seen = []
            await until(conn, "session.created", seen)
            for _ in range(5):
                await conn.input_audio_buffer.append(audio=CHUNK)
            await conn.input_audio_buffer.commit()
            await conn.response.create()
            await until(conn, "response.output_text.delta", seen)
            await conn.response.cancel()
            done = await until(conn, "response.done", seen)
            after = len(seen)
            # Longer than the rest of the response would take.
            await asyncio.sleep(0.5)
            await conn.send({"type": "session.heartbeat"})
            await until(conn, "session.heartbeat_ack", seen)
            # The session goes on: a new turn gets a whole response.
            await conn.input_audio_buffer.append(audio=CHUNK)
            await conn.input_audio_buffer.commit()
            await conn.response.create()
            second = await until(conn, "response.done", seen)
            return seen, done, after, second

    seen, done, after, second = run(talk())
    assert done.response.status == "cancelled"
    assert done.response.status_details.reason == "client_cancelled"
    cancelled = done.response.id
    late = [e for e in seen[after:] if getattr(e, "response_id", None) == cancelled]
    assert late == [], [e.type for e in late]
    assert second.response.status == "completed" and second.response.id != cancelled


def test_a_bad_event_leaves_the_connection_usable(gateway):
    gw = gateway()

    async def talk():
        async with client(gw).realtime.connect(model="duplex-stand-in") as conn:
            seen = []
            await until(conn, "session.created", seen)
            await conn.send({"type": "no.such.event", "event_id": "bad-1"})
            error = await until(conn, "error", seen)
            await conn.send({"type": "session.update", "session": {"type": "realtime", "turn_detection": {"type": "server_vad"}}})
            vad = await until(conn, "error", seen)
            await conn.input_audio_buffer.append(audio="%%% not base64")
            audio = await until(conn, "error", seen)
            await conn.send({"type": "session.heartbeat"})
            ack = await until(conn, "session.heartbeat_ack", seen)
            return error, vad, audio, ack

    error, vad, audio, ack = run(talk())
    assert error.error.code == "unknown_event_type" and error.error.event_id == "bad-1"
    assert error.error.type == "invalid_request_error"
    assert vad.error.code == "unsupported_turn_detection"
    assert audio.error.code == "invalid_audio"
    assert ack.type == "session.heartbeat_ack"


def test_a_refused_jwt(gateway):
    gw = gateway("--auth-secret", SECRET)

    async def connect(key):
        async with client(gw, key).realtime.connect(model="duplex-stand-in") as conn:
            seen = []
            return await until(conn, "session.created", seen)

    with pytest.raises(Exception) as refused:
        run(connect(jwt("alice", secret="another-secret-entirely-of-32-bytes")))
    assert "401" in str(refused.value)
    created = run(connect(jwt("alice")))
    assert created.session.id
