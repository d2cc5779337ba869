"""The engine's control plane: sessions, idempotent appends, stage requests,
barge-in, detach and resume, cleanup. It imports the runtime only through
``.duplex_session`` and builds every value with the engine's own classes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .contracts import DuplexInputMode, DuplexRuntimeCapabilities
from .duplex_session import DuplexFenceMismatchError, DuplexSessionRuntimeManager
from .lease import DuplexLeaseActivity, DuplexLeaseConfig
from .messages import DuplexFence

#: The stage that serves input (the engine's thinker).
INPUT_STAGE = 0


@dataclass
class FakeEngine:
    """The stages' request books: what was submitted and what aborted."""

    submitted: list[str] = field(default_factory=list)
    aborted: list[str] = field(default_factory=list)

    def submit(self, request_id: str) -> None:
        self.submitted.append(request_id)

    def abort(self, request_ids) -> None:
        self.aborted.extend(request_ids)

    def live(self) -> set[str]:
        return set(self.submitted) - set(self.aborted)


class ControlPlane:
    """One engine's sessions. Every answer is a dict with a ``status``, as a
    wire reply would be; the runtime's exceptions become statuses here."""

    def __init__(self, *, clock, max_sessions: int | None = None) -> None:
        self.manager = DuplexSessionRuntimeManager(clock=clock, max_sessions=max_sessions)
        self.engine = FakeEngine()
        #: Sessions whose appends wait for the reaper after a local failure.
        self.blocked: set[str] = set()

    # ----- sessions ------------------------------------------------------

    def open(
        self,
        fence: DuplexFence,
        *,
        modes=(DuplexInputMode.APPEND_AUDIO_CHUNK,),
        session_config: dict[str, Any] | None = None,
        runtime_config: dict[str, Any] | None = None,
        lease: DuplexLeaseConfig | None = None,
    ) -> dict[str, Any]:
        try:
            session = self.manager.open_session(
                fence,
                capabilities=DuplexRuntimeCapabilities(input_modes=set(modes)),
                session_config=session_config,
                runtime_config=runtime_config,
                lease_config=lease,
            )
        except TypeError as err:
            return {"status": "invalid_argument", "error": str(err)}
        except ValueError as err:
            return {"status": "already_exists", "error": str(err)}
        except RuntimeError as err:
            return {"status": "capacity_exhausted", "error": str(err)}
        return {"status": "ok", "session": session, "generation": session.lease.generation}

    def heartbeat(self, fence: DuplexFence) -> dict[str, Any]:
        session = self.manager.require(fence.session_id)
        try:
            session.touch(fence, DuplexLeaseActivity.HEARTBEAT)
        except DuplexFenceMismatchError as err:
            return {"status": "stale_fence", "error": str(err)}
        return {"status": "ok"}

    # ----- input ---------------------------------------------------------

    def append(
        self, fence: DuplexFence, operation_id: str, *, mode=DuplexInputMode.APPEND_AUDIO_CHUNK, final: bool = False
    ) -> dict[str, Any]:
        """An idempotent append: a retry of a completed operation gets its
        results again; a new one is prepared, submitted to the input stage,
        committed and recorded. A local failure after the submit releases
        the request and blocks the session's appends until cleanup."""
        session = self.manager.get(fence.session_id)
        if session is None:
            return {"status": "unknown_session"}
        if fence.session_id in self.blocked:
            return {"status": "blocked"}
        try:
            cached = session.completed_append(operation_id, fence=fence, mode=mode, final=final)
        except DuplexFenceMismatchError as err:
            return {"status": "stale_fence", "error": str(err)}
        except ValueError as err:
            return {"status": "invalid_argument", "error": str(err)}
        if cached is not None:
            return {"status": "ok", "results": cached, "replayed": True}
        session.begin_operation(fence, operation_id)
        try:
            try:
                reservation = session.prepare_append(mode=mode, fence=fence)
            except ValueError as err:
                return {"status": "unsupported_mode", "error": str(err)}
            request_id = f"{fence.session_id}/{fence.epoch}/{reservation.update.seq}"
            session.reserve_stage_request(INPUT_STAGE, request_id, fence=fence)
            self.engine.submit(request_id)
            session.bind_stage_request(INPUT_STAGE, request_id, fence=fence)
            try:
                update = session.commit_append(reservation)
            except Exception as err:  # noqa: BLE001 - any local failure compensates
                session.release_request_ids([request_id])
                self.engine.abort([request_id])
                self.blocked.add(fence.session_id)
                return {"status": "internal_error", "error": str(err)}
            results = [{"request_id": request_id, "seq": update.seq, "turn_seq": update.turn_seq}]
            session.record_completed_append(operation_id, fence=fence, mode=mode, final=final, stage_results=results)
            session.touch(fence, DuplexLeaseActivity.APPEND)
            return {"status": "ok", "results": results, "replayed": False}
        finally:
            session.end_operation(fence, operation_id)

    # ----- output and barge-in ---------------------------------------------

    def start_response(self, fence: DuplexFence, stage_id: int, request_id: str) -> dict[str, Any]:
        session = self.manager.require(fence.session_id)
        session.reserve_stage_request(stage_id, request_id, fence=fence)
        self.engine.submit(request_id)
        session.bind_stage_request(stage_id, request_id, fence=fence)
        return {"status": "ok"}

    def barge_in(self, old: DuplexFence, new: DuplexFence) -> dict[str, Any]:
        """The user spoke over the model: the old turn's requests are aborted
        once, after the fence has moved on."""
        session = self.manager.require(old.session_id)
        stale = session.prepare_cancel_fence(old, new)
        self.engine.abort(stale)
        session.release_fence(old)
        return {"status": "ok", "cancelled": stale}

    # ----- connection ------------------------------------------------------

    def disconnect(self, fence: DuplexFence) -> None:
        self.manager.require(fence.session_id).detach(fence)

    def resume(self, fence: DuplexFence, generation: int) -> dict[str, Any]:
        session = self.manager.get(fence.session_id)
        if session is None:
            return {"status": "unknown_session"}
        try:
            return {"status": "ok", "generation": session.resume(fence, expected_lease_generation=generation)}
        except ValueError as err:
            return {"status": "generation_mismatch", "error": str(err)}

    def close(self, fence: DuplexFence) -> dict[str, Any]:
        session = self.manager.close_session(fence, reason="client_close")
        return {"status": "ok" if session is not None else "unknown_session"}

    # ----- cleanup -----------------------------------------------------------

    def fail_requests(self, request_ids: list[str]) -> dict[str, list[str]]:
        """A stage lost these requests: their sessions close, and every request
        they held is aborted."""
        closing = self.manager.close_sessions_for_request_ids(request_ids)
        for ids in closing.values():
            self.engine.abort(ids)
        self.manager.finalize_closed_sessions(closing.keys())
        return closing

    def reap(self, now: float | None = None) -> list:
        """Expired sessions and sessions blocked by a local failure close;
        their requests are aborted."""
        expired = self.manager.collect_expired(now)
        for expiry in expired:
            self.engine.abort(expiry.submitted_request_ids + expiry.reserved_request_ids)
        self.manager.finalize_closed_sessions([e.session_id for e in expired])
        for session_id in sorted(self.blocked):
            session = self.manager.get(session_id)
            if session is not None:
                closing = self.manager.begin_close_session(session.fence, reason="local_failure")
                self.engine.abort(closing.resource_request_ids())
                self.manager.finalize_close_session(closing)
            self.blocked.discard(session_id)
        return expired
