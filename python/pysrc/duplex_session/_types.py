"""The seed's plain value types, exceptions and enums, as the seed module and
its companions (``messages``, ``contracts``, ``lease``) define them.

The session and manager classes are in Rust (``_native``); everything here is
plain Python data with the seed's fields, defaults, equality and messages.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from enum import Enum, EnumMeta
from typing import Any

# The kind of a call of the wrong shape, an argument of the wrong type and
# an assignment to a read-only attribute: the package's one kind beyond the
# traces' (SPEC §8 has no kind for a malformed call).
INVALID_ARGUMENT = "invalid_argument"


def _error(cls: type, message: str, kind: str) -> BaseException:
    """An exception of the seed's class with the project's ``kind``."""
    err = cls(message)
    err.kind = kind
    return err


def _ensure_kind(err: BaseException) -> None:
    if not hasattr(err, "kind"):
        err.kind = INVALID_ARGUMENT


def _shaped(method):
    """``method``, with a ``TypeError`` it raises (a call of the wrong
    shape, which Python raises before the body runs, or an argument of the
    wrong type) given ``.kind``. For methods off the hot path only: the
    wrapper is a Python call."""

    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        try:
            return method(*args, **kwargs)
        except TypeError as err:
            _ensure_kind(err)
            raise

    return wrapper


def _shape_methods(*names: str):
    """Class decorator: wraps the named methods with :func:`_shaped`."""

    def decorate(cls):
        for name in names:
            setattr(cls, name, _shaped(cls.__dict__[name]))
        return cls

    return decorate


def _frozen_kind(cls):
    """Class decorator for a frozen dataclass: assigning or deleting a field
    raises the dataclass's ``FrozenInstanceError``, with ``.kind``."""
    set_field, del_field = cls.__setattr__, cls.__delattr__

    def __setattr__(self, name, value):
        try:
            set_field(self, name, value)
        except AttributeError as err:
            _ensure_kind(err)
            raise

    def __delattr__(self, name):
        try:
            del_field(self, name)
        except AttributeError as err:
            _ensure_kind(err)
            raise

    cls.__setattr__, cls.__delattr__ = __setattr__, __delattr__
    return cls


class _EnumType(EnumMeta):
    """The enums' metaclass: a lookup of a value that is not a member (or a
    call of the wrong shape) raises Enum's ``ValueError`` (``TypeError``),
    with ``.kind``."""

    def __call__(cls, *args, **kwargs):
        try:
            return super().__call__(*args, **kwargs)
        except (TypeError, ValueError) as err:
            _ensure_kind(err)
            raise


class DuplexInputMode(str, Enum, metaclass=_EnumType):
    APPEND_TOKENS = "append_tokens"
    APPEND_AUDIO_CHUNK = "append_audio_chunk"
    REPLACE_LATEST_CHUNK = "replace_latest_chunk"
    REENCODE_CONTEXT = "reencode_context"
    ROLLBACK_TO_CHECKPOINT = "rollback_to_checkpoint"
    TURN_COMMIT_ONLY = "turn_commit_only"


@dataclass
class DuplexRuntimeCapabilities:
    input_modes: set = field(default_factory=lambda: {DuplexInputMode.TURN_COMMIT_ONLY})
    implementation_level: str = "serving_session_adapter"


@_frozen_kind
@dataclass(frozen=True, slots=True, init=False)
class DuplexFence:
    session_id: str
    epoch: int = 0
    turn_id: int = 0
    response_seq: int = 0
    incarnation: int = 0


def _fence_init():
    """``DuplexFence.__init__``: the generated one, but setting the five
    slots through their descriptors directly (a frozen dataclass's own
    ``__init__`` looks ``object.__setattr__`` up for each field; this is
    about 40% faster, and fences are built per turn)."""
    setters = [DuplexFence.__dict__[name].__set__ for name in ("session_id", "epoch", "turn_id", "response_seq", "incarnation")]
    set_session, set_epoch, set_turn, set_response, set_incarnation = setters

    def __init__(self, session_id: str, epoch: int = 0, turn_id: int = 0, response_seq: int = 0, incarnation: int = 0) -> None:
        set_session(self, session_id)
        set_epoch(self, epoch)
        set_turn(self, turn_id)
        set_response(self, response_seq)
        set_incarnation(self, incarnation)

    __init__.__qualname__ = "DuplexFence.__init__"
    return __init__


DuplexFence.__init__ = _fence_init()


class DuplexLeaseActivity(str, Enum, metaclass=_EnumType):
    APPEND = "append"
    SIGNAL = "signal"
    PLAYBACK_ACK = "playback_ack"
    HEARTBEAT = "heartbeat"
    ATTACH = "attach"
    DETACH = "detach"
    RESUME = "resume"
    MODEL_OUTPUT = "model_output"


@_frozen_kind
@dataclass(frozen=True, slots=True)
class DuplexLeaseConfig:
    idle_ttl_s: float | None = 300.0
    disconnect_grace_s: float = 30.0

    # Two plain positive numbers (or None for the TTL) are stored by the
    # extension's `tp_init` for this class (`shapes.rs`), which leaves such
    # a config off the cycle collector's list; anything else comes here.
    def __post_init__(self) -> None:
        # A value that cannot be compared with 0 is a configuration error
        # too: it names the field and what was expected, instead of the
        # comparison's bare "'>' not supported". Whatever the seed accepts
        # is accepted.
        for name, none_ok in (("idle_ttl_s", True), ("disconnect_grace_s", False)):
            value = getattr(self, name)
            if value is None and none_ok:
                continue
            try:
                positive = value > 0
            except TypeError:
                what = "a number of seconds or None" if none_ok else "a number of seconds"
                raise _error(TypeError, f"{name} must be {what}, got {type(value).__name__}", "invalid_config") from None
            if not positive:
                raise _error(ValueError, f"{name} must be positive" + (" or null" if none_ok else ""), "invalid_config")


def _check_open(lease) -> None:
    if lease.terminal_reason is not None:
        raise _error(RuntimeError, f"duplex lease is terminal: {lease.terminal_reason}", "wrong_state")


@_shape_methods(
    "touch", "detach", "resume", "begin_operation", "end_operation", "disconnect_grace_expired", "idle_expired", "mark_terminal"
)
@dataclass
class DuplexLeaseState:
    """A lease on its own, as the seed's ``lease.py`` has it. A session's
    lease (``session.lease``) is a view of the session's lease in Rust with
    the same attributes and methods."""

    config: DuplexLeaseConfig
    generation: int
    last_activity: float
    detached_at: float | None = None
    active_operations: set = field(default_factory=set)
    terminal_reason: str | None = None
    #: The control id of the resume that produced ``generation`` (vllm-omni
    #: 0.30's lease): a resume asked again with it gets ``generation`` and
    #: changes nothing. ``None`` after the open, a resume without one, or
    #: the end.
    resumed_by: str | None = None

    @property
    def expires_at(self) -> float | None:
        ttl = self.config.idle_ttl_s
        return None if ttl is None else self.last_activity + ttl

    def touch(self, now: float, activity: DuplexLeaseActivity) -> None:
        _check_open(self)
        if not isinstance(activity, DuplexLeaseActivity):
            raise _error(TypeError, "lease activity must be DuplexLeaseActivity", "invalid_argument")
        self.last_activity = now

    def detach(self, now: float) -> None:
        self.touch(now, DuplexLeaseActivity.DETACH)
        self.detached_at = now

    def resume(self, now: float, *, expected_generation: int, control_id: str | None = None) -> int:
        _check_open(self)
        if control_id is not None and control_id == self.resumed_by:
            # The same resume asked again: its answer, nothing changes.
            return self.generation
        if expected_generation != self.generation:
            raise _error(
                ValueError,
                f"duplex lease generation mismatch: expected {self.generation}, got {expected_generation}",
                "generation_mismatch",
            )
        self.generation += 1
        self.resumed_by = control_id
        self.detached_at = None
        self.last_activity = now
        return self.generation

    def begin_operation(self, now: float, operation_id: str) -> None:
        _check_open(self)
        if not operation_id:
            raise _error(ValueError, "duplex lease operation_id must not be empty", "invalid_id")
        if operation_id in self.active_operations:
            raise _error(ValueError, f"duplex lease operation already active: {operation_id}", "operation_active")
        self.active_operations.add(operation_id)
        self.last_activity = now

    def end_operation(self, now: float, operation_id: str) -> None:
        _check_open(self)
        if operation_id not in self.active_operations:
            raise _error(KeyError, f"duplex lease operation is not active: {operation_id}", "operation_not_active")
        self.active_operations.remove(operation_id)
        self.last_activity = now

    def disconnect_grace_expired(self, now: float) -> bool:
        return (
            self.terminal_reason is None
            and self.detached_at is not None
            and now >= self.detached_at + self.config.disconnect_grace_s
        )

    def idle_expired(self, now: float) -> bool:
        expires_at = self.expires_at
        return (
            self.terminal_reason is None
            and not self.active_operations
            and expires_at is not None
            and now >= expires_at
        )

    def mark_terminal(self, reason: str) -> bool:
        if self.terminal_reason is not None:
            return False
        self.terminal_reason = reason
        self.generation += 1
        self.resumed_by = None
        self.detached_at = None
        self.active_operations.clear()
        return True


@_frozen_kind
@dataclass(frozen=True)
class DuplexSessionExpiry:
    session_id: str
    fence: DuplexFence
    lease_generation: int
    reason: str
    submitted_request_ids: tuple[str, ...]
    reserved_request_ids: tuple[str, ...]


class DuplexFenceMismatchError(RuntimeError):
    kind = "fence_mismatch"

    def __init__(self, expected: DuplexFence, actual: DuplexFence) -> None:
        super().__init__(f"duplex fence mismatch: expected {expected!r}, got {actual!r}")
        self.expected = expected
        self.actual = actual


@dataclass
class DuplexStageBinding:
    request_id: str
    fence: DuplexFence


@dataclass
class DuplexRequestResource:
    stage_id: int
    request_id: str
    fence: DuplexFence
    submitted: bool = False


@dataclass
class DuplexInputAppend:
    seq: int
    turn_seq: int
    turn_id: int


@_frozen_kind
@dataclass(frozen=True)
class DuplexAppendReservation:
    fence: DuplexFence
    mode: DuplexInputMode
    base_fence: DuplexFence
    base_input_seq: int
    base_input_turn_seq: int
    base_append_turn_key: tuple[int, int, int] | None
    update: DuplexInputAppend


@_frozen_kind
@dataclass(frozen=True)
class DuplexCompletedAppend:
    fence: DuplexFence
    mode: DuplexInputMode
    final: bool
    stage_results: tuple[dict[str, Any], ...]
