"""A client written to vllm-omni's Realtime Duplex API wire contract
(``/v1/realtime?duplex=1&model=M&autostart=0``, ``session.update`` to open,
``server_event_seq`` on every server event, ``session.resume`` with the
last seq received), on the ``websockets`` package as vllm-omni's
``DuplexClient`` is: a dropped socket resumes with nothing missing and
nothing twice."""

from __future__ import annotations

import asyncio
import json

import websockets

from conftest import CHUNK


class Client:
    """The contract's client side: keeps every numbered event once, by
    ``server_event_seq``, and the resume token."""

    def __init__(self, base: str) -> None:
        self.url = base + "/v1/realtime?duplex=1&model=duplex-stand-in&autostart=0"
        self.ws = None
        self.events: dict[int, dict] = {}
        self.unnumbered: list[dict] = []
        self.session_id = None
        self.token = None
        self.last_seq = 0

    async def connect(self) -> None:
        self.ws = await websockets.connect(self.url, max_size=None)

    async def send(self, event: dict) -> None:
        await self.ws.send(json.dumps(event))

    async def recv(self) -> dict:
        event = json.loads(await asyncio.wait_for(self.ws.recv(), timeout=10))
        seq = event.get("server_event_seq")
        if seq is None:
            self.unnumbered.append(event)
        else:
            assert seq not in self.events, f"event {seq} received twice"
            self.events[seq] = event
            self.last_seq = max(self.last_seq, seq)
        if "resume_token" in event:
            self.token = event["resume_token"]
        return event

    async def until(self, kind: str) -> dict:
        for _ in range(500):
            event = await self.recv()
            if event["type"] == kind:
                return event
        raise AssertionError(f"no {kind}")

    def drop(self) -> None:
        """The link goes: the TCP connection is cut, no close frame."""
        self.ws.transport.abort()

    async def open(self, session_id: str) -> dict:
        await self.connect()
        await self.send({"type": "session.update", "event_id": "evt-open", "session": {"session_id": session_id, "model": "duplex-stand-in"}})
        created = await self.until("session.created")
        self.session_id = created["session"]["id"]
        await self.until("session.updated")
        return created

    async def resume(self) -> dict:
        await self.connect()
        await self.send(
            {
                "type": "session.resume",
                "session_id": self.session_id,
                "resume_token": self.token,
                "last_received_server_event_seq": self.last_seq,
            }
        )
        return await self.recv()


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, timeout=60))


def contiguous(events: dict[int, dict]) -> None:
    seqs = sorted(events)
    assert seqs == list(range(1, len(seqs) + 1)), seqs


def test_a_dropped_socket_resumes_with_a_complete_response(gateway):
    gw = gateway()

    async def talk():
        c = Client(gw.url)
        created = await c.open("call-resume-1")
        assert created["resume_token"] and created["session"]["capabilities"]["supports_session_resume"]
        for i in range(6):
            # Event ids longer than the gateway's 128 bytes are keys too.
            await c.send({"type": "input_audio_buffer.append", "event_id": f"evt-chunk-{i:04d}-" + "x" * 130, "audio": CHUNK})
        await c.send({"type": "input_audio_buffer.commit", "event_id": "evt-commit", "response_create": True})
        await c.until("response.created")
        await c.until("response.output_text.delta")
        c.drop()
        # The response goes on while the client is away.
        await asyncio.sleep(0.25)
        resumed = await c.resume()
        assert resumed["type"] == "session.resumed", resumed
        assert resumed["session_id"] == "call-resume-1"
        assert resumed["attachment_generation"] == 2
        done = await c.until("response.done")
        return c, done

    c, done = run(talk())
    contiguous(c.events)
    assert done["response"]["status"] == "completed"
    deltas = [e["delta"] for _, e in sorted(c.events.items()) if e["type"] == "response.output_text.delta"]
    assert len(deltas) == 8
    text = next(e for e in c.events.values() if e["type"] == "response.output_text.done")["text"]
    assert text == "".join(deltas)
    assert [e["type"] for e in c.unnumbered] == ["session.created", "session.resumed"]


def test_a_retransmitted_chunk_is_applied_once(gateway):
    gw = gateway("--audit", env={"DUPLEX_ADMIN_TOKEN": "admin-token-for-the-client-tests"})

    async def talk():
        c = Client(gw.url)
        await c.open("call-dup")
        for _ in range(2):
            for i in range(3):
                await c.send({"type": "input_audio_buffer.append", "event_id": f"evt-{i}", "audio": CHUNK})
        await c.send({"type": "session.heartbeat"})
        await c.until("session.heartbeat_ack")
        # The native dialect's audit, on its own socket.
        async with websockets.connect(gw.url) as admin:
            await admin.send(json.dumps({"type": "session.audit", "session_id": "call-dup", "admin_token": "admin-token-for-the-client-tests"}))
            return json.loads(await asyncio.wait_for(admin.recv(), timeout=10))

    audit = run(talk())
    assert [entry[2] for entry in audit["applied"]] == ["evt-0", "evt-1", "evt-2"]


def test_a_resume_replaces_the_socket_that_still_holds_it(gateway):
    gw = gateway()

    async def talk():
        first = Client(gw.url)
        await first.open("call-replace")
        second = Client(gw.url)
        second.session_id, second.token, second.last_seq = first.session_id, first.token, first.last_seq
        resumed = await second.resume()
        note = await first.recv()
        return resumed, note

    resumed, note = run(talk())
    assert resumed["type"] == "session.resumed"
    assert note == {"type": "session.replaced", "session_id": "call-replace", "attachment_generation": 1}


def test_a_resume_the_journal_cannot_serve_is_announced(gateway):
    gw = gateway()

    async def talk():
        c = Client(gw.url)
        await c.open("call-resync")
        for i in range(2):
            await c.send({"type": "input_audio_buffer.append", "event_id": f"e{i}", "audio": CHUNK})
        await c.send({"type": "input_audio_buffer.commit", "response_create": True})
        await c.until("response.done")
        # Everything acknowledged: the journal is trimmed.
        await c.send({"type": "session.event_ack", "server_event_seq": c.last_seq})
        await c.send({"type": "session.heartbeat"})
        await c.until("session.heartbeat_ack")
        c.drop()
        await asyncio.sleep(0.1)
        # A cursor older than what is kept: never a silent gap.
        c.last_seq = 3
        return await c.resume()

    answer = run(talk())
    assert answer == {"type": "session.resync_required", "session_id": "call-resync", "reason": "journal_gap"}


def test_errors_in_the_contracts_shape(gateway):
    gw = gateway()

    async def talk():
        c = Client(gw.url)
        await c.connect()
        await c.send({"type": "input_audio_buffer.append", "event_id": "early", "audio": CHUNK})
        no_session = await c.recv()
        await c.send({"type": "session.update", "session": {"session_id": "call-err"}})
        await c.until("session.updated")
        # A chunk whose event_id is no idempotency key (empty) is refused
        # and changes nothing: the commit after it still finds no audio.
        await c.send({"type": "input_audio_buffer.append", "event_id": "", "audio": CHUNK})
        keyless = await c.recv()
        await c.send({"type": "input_audio_buffer.commit", "event_id": "empty"})
        empty = await c.recv()
        await c.send({"type": "barge_in"})
        barge = await c.recv()
        await c.send({"type": "playback.ack", "played_ms": 100, "committed_ms": 100})
        ack = await c.recv()
        await c.send({"type": "conversation.item.truncate", "item_id": "item_x", "content_index": 0, "audio_end_ms": 10})
        truncated = await c.recv()
        await c.send({"type": "session.close"})
        closed = await c.until("session.closed")
        return no_session, keyless, empty, barge, ack, truncated, closed

    no_session, keyless, empty, barge, ack, truncated, closed = run(talk())
    assert keyless["error"]["code"] == "invalid_id" and keyless["error"]["event_id"] == "", keyless
    assert no_session["error"]["code"] == "no_session" and no_session["error"]["event_id"] == "early"
    assert "server_event_seq" not in no_session
    # The contract's code (OpenAI's, input_audio_buffer_commit_empty, on plain /v1/realtime).
    assert empty["error"]["code"] == "input_audio_buffer_empty" and empty["error"]["event_id"] == "empty"
    # With nothing speaking, a barge-in drops the pending turn (none here).
    assert barge["type"] == "input_audio_buffer.cleared", barge
    assert ack["type"] == "playback.acknowledged"
    # The contract checks the item: the session made none of that id.
    assert truncated["error"]["code"] == "item_not_found", truncated
    assert closed["session_id"] == "call-err" and closed["reason"] == "client_close"


def test_the_controls_cancel_only_what_is_active(gateway):
    """``output_audio_buffer.clear`` mid-response says the output is cleared,
    then the response ends cancelled; with nothing speaking it only says
    so. ``input.cancel`` with no response drops the pending turn and keeps
    the epoch. A truncate names an item the session made."""
    gw = gateway()

    async def talk():
        c = Client(gw.url)
        await c.open("call-controls")
        await c.send({"type": "input_audio_buffer.append", "event_id": "a1", "audio": CHUNK})
        await c.send({"type": "input_audio_buffer.commit", "response_create": True})
        first = await c.until("input_audio_buffer.committed")
        delta = await c.until("response.output_text.delta")
        await c.send({"type": "output_audio_buffer.clear"})
        cleared = await c.until("output_audio_buffer.cleared")
        done = await c.recv()
        while done["type"] != "response.done":
            done = await c.recv()
        await c.until("rate_limits.updated")
        await c.send({"type": "output_audio_buffer.clear"})
        idle_clear = await c.recv()
        await c.send({"type": "conversation.item.truncate", "item_id": delta["item_id"], "content_index": 0,
                      "audio_end_ms": 40})
        truncated = await c.recv()
        await c.send({"type": "input_audio_buffer.append", "event_id": "a2", "audio": CHUNK})
        await c.send({"type": "input.cancel"})
        input_cleared = await c.until("input_audio_buffer.cleared")
        await c.send({"type": "input_audio_buffer.commit", "event_id": "nothing-left"})
        empty = await c.until("error")
        await c.send({"type": "input_audio_buffer.append", "event_id": "a3", "audio": CHUNK})
        await c.send({"type": "input_audio_buffer.commit", "response_create": False})
        after = await c.until("input_audio_buffer.committed")
        return first, delta, cleared, done, idle_clear, truncated, input_cleared, empty, after

    first, delta, cleared, done, idle_clear, truncated, input_cleared, empty, after = run(talk())
    assert cleared["response_id"] == delta["response_id"], (cleared, delta)
    assert done["response"]["status"] == "cancelled", done
    assert done["response"]["status_details"]["reason"] == "output_audio_buffer_clear", done
    assert idle_clear["type"] == "output_audio_buffer.cleared", idle_clear
    assert idle_clear["response_id"] == delta["response_id"], idle_clear
    assert truncated["type"] == "conversation.item.truncated" and truncated["item_id"] == delta["item_id"], truncated
    assert input_cleared["type"] == "input_audio_buffer.cleared"
    assert empty["error"]["code"] == "input_audio_buffer_empty", empty
    # The clear mid-response moved the epoch; the cancel of idle input did not.
    assert after["event"]["epoch"] == first["event"]["epoch"] + 1, (first, after)


def test_audio_past_the_session_s_budget_is_backpressure(gateway):
    """With 1 KiB held for the engine at most, a second 640-byte chunk of an
    uncommitted turn is refused ``input_backpressure`` (type
    ``rate_limit_error``, as vllm-omni's errors map it) and applied
    nowhere; a clear gives the budget back, and so does a commit, answered
    or not."""
    gw = gateway("--max-pending-input-kib", "1")

    async def talk():
        c = Client(gw.url)
        await c.open("call-budget")
        await c.send({"type": "input_audio_buffer.append", "event_id": "a1", "audio": CHUNK})
        await c.send({"type": "input_audio_buffer.append", "event_id": "a2", "audio": CHUNK})
        refused = await c.until("error")
        await c.send({"type": "input_audio_buffer.clear"})
        await c.until("input_audio_buffer.cleared")
        await c.send({"type": "input_audio_buffer.append", "event_id": "a3", "audio": CHUNK})
        await c.send({"type": "input_audio_buffer.commit", "response_create": True})
        committed = await c.until("input_audio_buffer.committed")
        await c.until("response.created")
        await c.send({"type": "input_audio_buffer.append", "event_id": "a4", "audio": CHUNK})
        await c.send({"type": "input_audio_buffer.commit", "event_id": "c2", "response_create": False})
        second = await c.until("input_audio_buffer.committed")
        # Committed without a response, the turn is the engine's all the same.
        await c.send({"type": "input_audio_buffer.append", "event_id": "a5", "audio": CHUNK})
        await c.send({"type": "input_audio_buffer.commit", "event_id": "c3", "response_create": False})
        await c.until("input_audio_buffer.committed")
        errors = [e for e in c.events.values() if e["type"] == "error"] + [
            e for e in c.unnumbered if e["type"] == "error"
        ]
        return refused, committed, second, errors

    refused, committed, second, errors = run(talk())
    assert refused["error"]["code"] == "input_backpressure", refused
    assert refused["error"]["type"] == "rate_limit_error", refused
    assert refused["error"]["event_id"] == "a2", refused
    # The one refusal; the chunks after the clear and after each commit went in.
    assert len(errors) == 1, errors
    assert second["item_id"] != committed["item_id"], (committed, second)


def test_a_chunk_sent_again_after_a_barge_in_is_not_applied_again(gateway):
    token = "admin-token-for-the-client-tests"
    gw = gateway("--audit", env={"DUPLEX_ADMIN_TOKEN": token})

    async def talk():
        c = Client(gw.url)
        await c.open("call-barge")
        await c.send({"type": "input_audio_buffer.append", "event_id": "chunk-x", "audio": CHUNK})
        await c.send({"type": "input_audio_buffer.commit", "response_create": True})
        await c.until("response.output_text.delta")
        await c.send({"type": "response.cancel"})
        cancelled = await c.until("response.done")
        # The same chunk again, now that the epoch has moved on.
        await c.send({"type": "input_audio_buffer.append", "event_id": "chunk-x", "audio": CHUNK})
        refused = await c.until("error")
        async with websockets.connect(gw.url) as admin:
            await admin.send(json.dumps({"type": "session.audit", "session_id": "call-barge", "admin_token": token}))
            audit = json.loads(await asyncio.wait_for(admin.recv(), timeout=10))
        return cancelled, refused, audit

    cancelled, refused, audit = run(talk())
    assert cancelled["response"]["status"] == "cancelled"
    assert refused["error"]["code"] == "fence_mismatch" and refused["error"]["event_id"] == "chunk-x"
    assert [entry[2] for entry in audit["applied"]] == ["chunk-x"]


def test_a_browser_authenticates_with_the_subprotocol(gateway):
    """A browser cannot set headers: its realtime client offers the JWT as
    the subprotocol ``openai-insecure-api-key.<jwt>`` beside ``realtime``."""
    from conftest import SECRET, jwt

    gw = gateway("--auth-secret", SECRET)
    url = gw.url + "/v1/realtime?model=duplex-stand-in"

    async def talk():
        offered = ["realtime", "openai-insecure-api-key." + jwt("browser-user")]
        async with websockets.connect(url, subprotocols=offered) as ws:
            chosen = ws.subprotocol
            created = json.loads(await asyncio.wait_for(ws.recv(), timeout=10))
        refused = None
        try:
            bad = ["realtime", "openai-insecure-api-key." + jwt("browser-user", secret="not-the-secret-of-the-gateway-xx")]
            async with websockets.connect(url, subprotocols=bad):
                pass
        except websockets.exceptions.InvalidStatus as err:
            refused = err.response.status_code
        return chosen, created, refused

    chosen, created, refused = run(talk())
    assert chosen == "realtime"
    # The socket's own event, as in the contract: not numbered, not journaled.
    assert created["type"] == "session.created" and "server_event_seq" not in created, created
    assert refused == 401


def test_the_contract_s_codes_and_resume_only_sockets(gateway):
    """On the contract's paths its codes; on plain /v1/realtime OpenAI's.
    A socket with ``resume=1`` opens nothing by itself; a resume on a
    socket that holds a session is refused as the contract says; a close
    says ``client_close``."""
    gw = gateway()

    async def first_error(url: str, events: list[dict]) -> dict:
        async with websockets.connect(url) as ws:
            for e in events:
                await ws.send(json.dumps(e))
            for _ in range(50):
                event = json.loads(await asyncio.wait_for(ws.recv(), timeout=10))
                if event["type"] == "error":
                    return event["error"]
        raise AssertionError("no error")

    async def talk():
        empty = [{"type": "session.update", "session": {}}, {"type": "input_audio_buffer.commit"}]
        cancel = [{"type": "session.update", "session": {}}, {"type": "response.cancel"}]
        codes = {}
        for name, url in (("contract", "/v1/realtime?duplex=1&autostart=0"), ("duplex path", "/v1/duplex?autostart=0"),
                          ("openai", "/v1/realtime?autostart=0")):
            codes[name] = ((await first_error(gw.url + url, empty))["code"],
                           (await first_error(gw.url + url, cancel))["code"])

        c = Client(gw.url)
        created = await c.open("call-codes-1")
        token = created["resume_token"]
        # A resume on the socket that holds the session.
        await c.send({"type": "session.resume", "session_id": "call-codes-1", "resume_token": token,
                      "last_received_server_event_seq": c.last_seq})
        on_attached = await c.until("error")
        # A resume-only socket: nothing opens before its session.resume.
        async with websockets.connect(gw.url + "/v1/realtime?duplex=1&resume=1") as other:
            await other.send(json.dumps({"type": "session.resume", "session_id": "call-codes-1",
                                         "resume_token": c.token, "last_received_server_event_seq": c.last_seq}))
            resumed = json.loads(await asyncio.wait_for(other.recv(), timeout=10))
            await other.send(json.dumps({"type": "session.close"}))
            for _ in range(50):
                closed = json.loads(await asyncio.wait_for(other.recv(), timeout=10))
                if closed["type"] == "session.closed":
                    break
        return codes, on_attached, resumed, closed

    codes, on_attached, resumed, closed = run(talk())
    assert codes["contract"] == ("input_audio_buffer_empty", "response_not_active"), codes
    assert codes["duplex path"] == codes["contract"], codes
    assert codes["openai"] == ("input_audio_buffer_commit_empty", "response_cancel_not_active"), codes
    assert on_attached["error"]["code"] == "unsupported_session_resume", on_attached
    assert resumed["type"] == "session.resumed" and resumed["session_id"] == "call-codes-1", resumed
    # With its session object, as session.created has it.
    assert resumed["session"]["id"] == "call-codes-1" and resumed["session"]["model"] == "duplex-stand-in", resumed
    assert closed["reason"] == "client_close", closed


def test_a_replaced_socket_is_told_and_closed(gateway):
    """A resume on a second socket while the first still holds the
    session: the first gets ``session.replaced``, then a close (1000,
    ``session_replaced``), which vllm-omni's clients wait for."""
    gw = gateway()

    async def talk():
        a = Client(gw.url)
        await a.open("call-replaced-1")
        b = Client(gw.url)
        b.session_id, b.token, b.last_seq = a.session_id, a.token, a.last_seq
        resumed = await b.resume()
        replaced = await a.until("session.replaced")
        try:
            while True:
                await a.recv()
        except websockets.ConnectionClosedOK as closed:
            return resumed, replaced, closed.rcvd
        finally:
            await b.ws.close()

    resumed, replaced, close = run(talk())
    assert resumed["type"] == "session.resumed", resumed
    assert replaced["session_id"] == "call-replaced-1"
    assert (close.code, close.reason) == (1000, "session_replaced")


def test_an_ack_past_the_last_event_is_refused_and_drops_nothing(gateway):
    gw = gateway()

    async def talk():
        c = Client(gw.url)
        await c.open("call-ack-1")
        head = c.last_seq
        await c.send({"type": "session.event_ack", "server_event_seq": head + 1000})
        refused = await c.until("error")
        # Nothing was dropped: a resume from the start replays every event.
        c.drop()
        c.events, c.last_seq = {}, 0
        resumed = await c.resume()
        for _ in range(head + 1):  # the refusal is numbered too
            await c.recv()
        return head, refused, resumed, sorted(c.events)

    head, refused, resumed, seqs = run(talk())
    assert refused["error"]["code"] == "invalid_event_ack", refused
    assert resumed["type"] == "session.resumed"
    assert seqs[: head + 1] == list(range(1, head + 2)), seqs


def test_session_ids_of_128_bytes_open_and_resume(gateway):
    """An application's own session ids (a tenant, a user, a call) up to
    128 bytes open and resume; one byte more is ``invalid_id``."""
    gw = gateway()
    longest = "tenant-0f8e7d6c5b4a3928/user-1706f5e4d3c2b1a0/call-" + "9" * 77
    assert len(longest) == 128

    async def talk():
        c = Client(gw.url)
        created = await c.open(longest)
        c.drop()
        resumed = await c.resume()
        async with websockets.connect(gw.url + "/v1/realtime?duplex=1&autostart=0") as ws:
            await ws.send(json.dumps({"type": "session.update", "session": {"session_id": longest + "9"}}))
            refused = json.loads(await asyncio.wait_for(ws.recv(), timeout=10))
        return created, resumed, refused

    created, resumed, refused = run(talk())
    assert created["session"]["id"] == longest, created
    assert resumed["type"] == "session.resumed" and resumed["session_id"] == longest, resumed
    assert refused["type"] == "error" and refused["error"]["code"] == "invalid_id", refused
