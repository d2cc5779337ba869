"""vllm-omni's own client, unchanged: ``vllm_omni.clients.duplex.DuplexClient``
of the released wheel (vllm-omni 0.30.0), loaded from the wheel without
its package ``__init__`` (which imports vllm), talking to the gateway
with the parrot engine of ``gateway/examples/parrot.rs`` behind it.

The wheel is named by ``DUPLEX_VLLM_OMNI_WHEEL``; without it the tests
are skipped, unless ``DUPLEX_REQUIRE_RELEASE=1`` (CI), when that is a
failure.
"""

from __future__ import annotations

import asyncio
import base64
import importlib.util
import io
import json
import math
import wave

import pytest

from conftest import release_packages

# 200 ms of 16 kHz pcm16 that no two turns share.
def speech(turn: int, ms: int = 200) -> bytes:
    return bytes((i * (turn + 3)) % 251 for i in range(32 * ms))


def released_client():
    """``vllm_omni.clients.duplex`` from the wheel, as released."""
    release_packages("vllm_omni", "vllm_omni.clients")
    return importlib.import_module("vllm_omni.clients.duplex")


async def turn(client, pcm: bytes, cancel_at: int | None = None) -> tuple[bytes, object]:
    """One turn: the audio streamed and committed, then the response's
    audio (the response cancelled once ``cancel_at`` bytes were heard)."""
    await client.stream_pcm(pcm)
    await client.commit()
    async for response in client.responses():
        heard = b""
        async for chunk in response.audio():
            heard += chunk
            if cancel_at is not None and len(heard) >= cancel_at:
                cancel_at = None
                await client.cancel_response()
        return heard, response
    raise AssertionError("no response")


def test_the_released_client_hears_each_turn(parrot_url):
    duplex = released_client()

    async def run():
        async with duplex.DuplexClient(parrot_url, model="parrot") as client:
            assert client.session_id
            for n in range(3):
                said = speech(n)
                heard, response = await asyncio.wait_for(turn(client, said), 20)
                assert heard == said, f"turn {n}: the user's audio back, whole"
                assert response.done_event.raw["response"]["status"] == "completed"

    asyncio.run(run())


def test_the_released_client_resumes_a_dropped_link_and_goes_on(parrot_url):
    """The network drops under the client (its TCP connection aborted):
    the client resumes the session on a new socket, and its next commit is
    answered as before (the session's auto_response survives the resume)."""
    duplex = released_client()

    async def run():
        async with duplex.DuplexClient(parrot_url, model="parrot") as client:
            session = client.session_id
            heard, _ = await asyncio.wait_for(turn(client, speech(0)), 20)
            assert heard == speech(0)
            dropped = client._ws
            dropped.transport.abort()
            # The client reconnects by itself; a send before that fails
            # (the released client does not queue while the link is down).
            for _ in range(1000):
                if client._ws is not dropped:
                    break
                await asyncio.sleep(0.01)
            assert client._ws is not dropped, "the client reconnected"
            for n in (1, 2):
                heard, _ = await asyncio.wait_for(turn(client, speech(n)), 20)
                assert heard == speech(n), f"turn {n} after the resume"
            assert client.session_id == session

    asyncio.run(run())


def test_the_released_client_cancels_a_response_mid_speech(parrot_url):
    duplex = released_client()

    async def run():
        async with duplex.DuplexClient(parrot_url, model="parrot") as client:
            said = speech(0, ms=3000)
            heard, response = await asyncio.wait_for(turn(client, said, cancel_at=3200), 20)
            done = response.done_event.raw["response"]
            assert done["status"] == "cancelled", done
            assert 3200 <= len(heard) < len(said), "cut short"
            assert said.startswith(heard)
            # The session goes on: the next turn is answered whole.
            heard, _ = await asyncio.wait_for(turn(client, speech(1)), 20)
            assert heard == speech(1)

    asyncio.run(run())


def test_the_released_client_s_speech_over_the_answer_is_decided(parrot_url):
    """The session's overlap rule, from the released client's own
    ``SessionConfig.overlap_policy``: each chunk it sends over the parrot's
    answer gets the contract's ``overlap.decision``; silence (the client's
    ``is_speech``) is dropped and the answer goes on, speech barges in and
    the answer ends cancelled; the next turn is answered whole."""
    duplex = released_client()

    async def decided(client, pcm: bytes, **hints) -> dict:
        waiter = asyncio.create_task(client.wait_for("overlap.decision", timeout_s=10))
        await asyncio.sleep(0)  # subscribed before the chunk goes
        await client.append_audio(pcm, **hints)
        return (await waiter).raw

    async def run():
        config = duplex.SessionConfig(overlap_policy="barge_in_on_speech")
        async with duplex.DuplexClient(parrot_url, model="parrot", config=config) as client:
            await client.stream_pcm(speech(0, ms=3000), realtime=False)
            await client.commit()
            async for response in client.responses():
                quiet = await decided(client, speech(1, ms=100), is_speech=False)
                loud = await decided(client, speech(1, ms=100))
                await response.wait(10)
                done = response.done_event.raw["response"]
                break
            heard, _ = await asyncio.wait_for(turn(client, speech(2)), 20)
            return quiet, loud, done, heard

    quiet, loud, done, heard = asyncio.run(run())
    assert (quiet["action"], quiet["reason"]) == ("drop", "silence_or_noise"), quiet
    assert (loud["action"], loud["reason"]) == ("barge_in", "policy_barge_in_on_speech"), loud
    # The client's own duration hint, and the rule its config named.
    assert (loud["policy"], loud["metadata"]["duration_ms"]) == ("barge_in_on_speech", 100), loud
    assert done["status"] == "cancelled", done
    # The chunk that barged in began the next turn: the parrot says it back
    # before the turn's own audio.
    assert heard == speech(1, ms=100) + speech(2)


def reference_voice(seconds: float = 5.0, rate: int = 24_000) -> str:
    """A reference voice as vllm-omni's presets send it: a WAV data URL
    (5 s at 24 kHz: about 320 KB, five times the gateway's other events)."""
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(b"".join(
            int(8000 * math.sin(2 * math.pi * 220 * i / rate)).to_bytes(2, "little", signed=True)
            for i in range(int(seconds * rate))
        ))
    return "data:audio/wav;base64," + base64.b64encode(out.getvalue()).decode()


def test_the_released_client_opens_with_a_reference_voice(parrot_url):
    duplex = released_client()
    voice = reference_voice()
    assert len(voice) > 300_000

    async def run():
        config = duplex.SessionConfig(ref_audio=voice, instructions="Say it back.")
        async with duplex.DuplexClient(parrot_url, model="parrot", config=config) as client:
            assert client.session_id
            heard, _ = await asyncio.wait_for(turn(client, speech(0)), 20)
            assert heard == speech(0)

    asyncio.run(run())


def test_the_released_client_s_acks_heartbeats_refusals_and_close(parrot_url):
    """Heartbeats every 50 ms, each answered; a playback ack, answered;
    each refusal the client can meet with the contract's code, raised by
    the client as such; a close the server confirms, after which the
    session's resume token is refused with a code the client treats as
    the end of the session."""
    duplex = released_client()
    import websockets

    async def expect_refused(client, code: str, event: dict) -> None:
        # The client raises a refusal from its responses' iterator (a
        # refused request makes no response to wait for).
        await client.send(event)
        with pytest.raises(duplex.DuplexProtocolError) as refused:
            async for _ in client.responses():
                raise AssertionError("a response instead of the refusal")
        assert refused.value.code == code, refused.value.raw

    async def run():
        async with duplex.DuplexClient(parrot_url, model="parrot", heartbeat_interval_s=0.05) as client:
            session, token = client.session_id, client.resume_token
            for _ in range(3):
                await client.wait_for("session.heartbeat_ack", timeout_s=5)
            await client.ack_playback(200)
            acked = await client.wait_for("playback.acknowledged", timeout_s=5)
            assert acked.raw["event"]["played_ms"] == 200, acked.raw
            await expect_refused(client, "input_audio_buffer_empty", {"type": "input_audio_buffer.commit"})
            await expect_refused(client, "response_not_active", {"type": "response.cancel"})
            await expect_refused(client, "item_not_found", {"type": "conversation.item.truncate",
                                                            "item_id": "item_never", "content_index": 0,
                                                            "audio_end_ms": 10})
            await expect_refused(client, "event_too_large", {"type": "input_audio_buffer.append",
                                                             "audio": "A" * 70_000})
            # The session still answers a turn after every refusal.
            heard, _ = await asyncio.wait_for(turn(client, speech(0)), 20)
            assert heard == speech(0)
            token = client.resume_token
            closed = asyncio.create_task(client.wait_for("session.closed", timeout_s=10))
            await asyncio.sleep(0)
            await client.close()
            assert (await closed).raw["reason"] == "client_close"
        async with websockets.connect(parrot_url + "/v1/realtime?duplex=1&resume=1") as ws:
            await ws.send(json.dumps({"type": "session.resume", "session_id": session, "resume_token": token,
                                      "last_received_server_event_seq": 0}))
            refused = json.loads(await asyncio.wait_for(ws.recv(), timeout=10))
        assert refused["type"] == "error", refused
        assert refused["error"]["code"] == "session_resume_expired", refused
        assert refused["error"]["code"] in duplex._FATAL_RESUME_CODES

    asyncio.run(run())


def test_the_released_client_resumes_mid_response_with_nothing_missing_or_twice(parrot_url):
    """The TCP connection is aborted while the parrot is still speaking: the
    client resumes by itself, the journal replays what the dead socket
    missed, and the response's audio arrives whole, each byte once; the
    next turn is answered after it."""
    duplex = released_client()

    async def run():
        async with duplex.DuplexClient(parrot_url, model="parrot") as client:
            said = speech(0, ms=3000)
            await client.stream_pcm(said)
            await client.commit()
            heard = b""
            async for response in client.responses():
                dropped = None
                async for chunk in response.audio():
                    heard += chunk
                    if dropped is None and len(heard) >= 16_000:
                        dropped = client._ws
                        dropped.transport.abort()
                assert dropped is not None and client._ws is not dropped, "the client resumed"
                assert response.done_event.raw["response"]["status"] == "completed"
                break
            assert heard == said, f"{len(heard)} bytes heard of {len(said)}"
            heard, _ = await asyncio.wait_for(turn(client, speech(1)), 20)
            assert heard == speech(1)

    asyncio.run(asyncio.wait_for(run(), 60))
