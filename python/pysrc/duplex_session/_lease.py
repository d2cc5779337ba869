"""``session.lease``: the seed's ``DuplexLeaseState``, as a view of the
session's lease in Rust. Reading it reads the session; its methods act on
the session (with the session's own fence), as the seed's lease methods act
on the lease the session holds.

The view is an instance of the host's ``DuplexLeaseState`` (the package's
own, or the class of the host's ``lease`` module, see ``_host``):
:func:`view_of` makes the view class for a state class."""

from __future__ import annotations

from ._types import INVALID_ARGUMENT, DuplexLeaseState, _error, _shape_methods


#: The lease's values, in the order ``_lease_values`` returns them.
_NAMES = (
    "config", "generation", "last_activity", "detached_at", "active_operations", "terminal_reason", "resumed_by"
)


@_shape_methods("touch", "detach", "resume", "begin_operation", "end_operation", "mark_terminal")
class _LeaseView:
    """A live view: every attribute reads the session now. Mixed in before
    a ``DuplexLeaseState`` class (:func:`view_of`), whose other methods
    (``expires_at``, ``idle_expired``, ``disconnect_grace_expired``) then
    read the view."""

    __slots__ = ()
    _state_class = DuplexLeaseState

    def __init__(self, session) -> None:  # noqa: D107 - a view, not a dataclass instance
        object.__setattr__(self, "_session", session)

    @property
    def config(self):
        return self._session._lease_values()[0]

    @property
    def generation(self) -> int:
        return self._session._lease_values()[1]

    @property
    def last_activity(self) -> float:
        return self._session._lease_values()[2]

    @property
    def detached_at(self):
        return self._session._lease_values()[3]

    @property
    def active_operations(self) -> set:
        return self._session._lease_values()[4]

    @property
    def terminal_reason(self):
        return self._session._lease_values()[5]

    @property
    def resumed_by(self):
        return self._session._lease_values()[6]

    def __setattr__(self, name, value):
        raise _error(AttributeError, f"session.lease.{name} is read-only; use the session's operations", INVALID_ARGUMENT)

    def _fields(self) -> tuple:
        """The state class's fields the view has: the seed's six, and
        ``resumed_by`` where the class has it (vllm-omni 0.30's does)."""
        known = getattr(self._state_class, "__dataclass_fields__", {})
        return _NAMES if "resumed_by" in known else _NAMES[:6]

    def __repr__(self) -> str:
        values = dict(zip(_NAMES, self._session._lease_values()))
        shown = ", ".join(f"{n}={values[n]!r}" for n in self._fields())
        return f"DuplexLeaseState({shown})"

    def __eq__(self, other):
        if not isinstance(other, self._state_class):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in self._fields())

    __hash__ = None

    def touch(self, now, activity) -> None:
        self._session._lease_op("touch", now, activity)

    def detach(self, now) -> None:
        self._session._lease_op("detach", now, None)

    def resume(self, now, *, expected_generation: int, control_id=None) -> int:
        return self._session._lease_op("resume", now, expected_generation, control_id)

    def begin_operation(self, now, operation_id: str) -> None:
        self._session._lease_op("begin", now, operation_id)

    def end_operation(self, now, operation_id: str) -> None:
        self._session._lease_op("end", now, operation_id)

    def mark_terminal(self, reason: str) -> bool:
        return self._session._lease_mark_terminal(reason)


def view_of(state_class: type) -> type:
    """The class of ``session.lease`` for a host whose lease state is
    ``state_class``: a subclass of it, so ``isinstance(session.lease,
    state_class)`` holds, with the view's attributes and methods."""
    return type(
        state_class.__name__,
        (_LeaseView, state_class),
        {"__slots__": ("_session",), "_state_class": state_class, "__module__": state_class.__module__,
         "__qualname__": state_class.__qualname__, "__doc__": _LeaseView.__doc__},
    )


#: The view of the package's own ``DuplexLeaseState``.
SessionLease = view_of(DuplexLeaseState)
