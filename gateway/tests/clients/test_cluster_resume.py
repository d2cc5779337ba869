"""A realtime session across the death of its node: two gateways over one
Redis, the client's node SIGKILLed mid-response, the client resumes on the
other node. What the dead node had sent is replayed from the journal it
stored, nothing twice; the response its engine was producing ends
``failed``; the session goes on."""

from __future__ import annotations

import asyncio
import signal

from conftest import CHUNK
from test_duplex_contract import Client, contiguous, run

KEY = "cluster-resume-key-of-at-least-32-bytes"


def test_a_resume_after_the_node_is_killed(gateway, redis_url):
    a = gateway("--redis", redis_url, "--resume-key", KEY, "--node", "a")
    b = gateway("--redis", redis_url, "--resume-key", KEY, "--node", "b")

    async def talk():
        c = Client(a.url)
        await c.open("call-across")
        for i in range(4):
            await c.send({"type": "input_audio_buffer.append", "event_id": f"chunk-{i}", "audio": CHUNK})
        await c.send({"type": "input_audio_buffer.commit", "response_create": True})
        await c.until("response.output_text.delta")
        await c.until("response.output_text.delta")
        received = c.last_seq
        a.process.send_signal(signal.SIGKILL)
        a.process.wait()
        c.drop()
        c.url = b.url + "/v1/realtime?duplex=1&model=duplex-stand-in&autostart=0"
        resumed = await c.resume()
        failed = await c.until("response.done")
        # The session goes on, on the node that has it now.
        await c.send({"type": "input_audio_buffer.append", "event_id": "chunk-after", "audio": CHUNK})
        await c.send({"type": "input_audio_buffer.commit", "response_create": True})
        done = await c.until("response.done")
        return c, received, resumed, failed, done

    c, received, resumed, failed, done = run(talk())
    assert resumed["type"] == "session.resumed", resumed
    assert resumed["last_server_event_seq"] >= received
    contiguous(c.events)
    assert failed["response"]["status"] == "failed"
    assert failed["response"]["status_details"]["reason"] == "node_lost"
    assert done["response"]["status"] == "completed"
    first, second = failed["response_id"], done["response_id"]
    assert first != second
    # Nothing of the first response after its end.
    end = next(s for s, e in c.events.items() if e is failed)
    late = [e for s, e in c.events.items() if s > end and e.get("response_id") == first]
    assert late == []


def test_a_resume_elsewhere_after_a_drain_replays_the_journal(gateway, redis_url):
    a = gateway("--redis", redis_url, "--resume-key", KEY, "--node", "a")
    b = gateway("--redis", redis_url, "--resume-key", KEY, "--node", "b")

    async def talk():
        c = Client(a.url)
        await c.open("call-drained")
        await c.send({"type": "input_audio_buffer.append", "event_id": "chunk-0", "audio": CHUNK})
        await c.send({"type": "input_audio_buffer.commit", "response_create": True})
        await c.until("rate_limits.updated")
        # The client missed the last events (its cursor is behind).
        c.last_seq -= 3
        for seq in list(c.events):
            if seq > c.last_seq:
                del c.events[seq]
        a.process.send_signal(signal.SIGTERM)
        await asyncio.sleep(0.5)
        c.drop()
        c.url = b.url + "/v1/realtime?duplex=1&model=duplex-stand-in&autostart=0"
        resumed = await c.resume()
        for _ in range(3):
            await c.recv()
        return c, resumed

    c, resumed = run(talk())
    assert resumed["type"] == "session.resumed", resumed
    contiguous(c.events)
    assert c.events[max(c.events)]["type"] == "rate_limits.updated"
