"""duplex_session: vllm-omni's full-duplex session runtime, in Rust.

A drop-in for the seed module
``vllm_omni.experimental.fullduplex.engine.duplex_session`` and the names it
imports from its siblings (``messages``, ``contracts``, ``lease``)::

    from duplex_session import DuplexSessionRuntimeManager, DuplexFence
    from duplex_session import DuplexInputMode, DuplexRuntimeCapabilities
    from duplex_session import DuplexLeaseActivity, DuplexLeaseConfig

A host that keeps its own ``messages``, ``lease`` and ``contracts`` modules
(as vllm-omni's engine does) swaps only its ``duplex_session.py``, for a file
that binds the package to them::

    from duplex_session import bind_host

    bind_host(globals())

Sessions and the manager are Rust (``_native``); the value types, enums and
exceptions are the seed's Python classes (``_types``), or a bound host's own
(``_host``). Every exception the package raises carries ``.kind``, the error
kind of the conformance traces.
"""

from ._types import (
    DuplexAppendReservation,
    DuplexCompletedAppend,
    DuplexFence,
    DuplexFenceMismatchError,
    DuplexInputAppend,
    DuplexInputMode,
    DuplexLeaseActivity,
    DuplexLeaseConfig,
    DuplexLeaseState,
    DuplexRequestResource,
    DuplexRuntimeCapabilities,
    DuplexSessionExpiry,
    DuplexStageBinding,
)
from ._native import DuplexSessionRuntimeManager, DuplexSessionRuntimeState, wrap_init
from ._host import bind_host

# The seed's names and its companions (`bind_host` is the package's own,
# outside the seed's star-import).
__all__ = [
    "DuplexAppendReservation",
    "DuplexCompletedAppend",
    "DuplexFence",
    "DuplexFenceMismatchError",
    "DuplexInputAppend",
    "DuplexInputMode",
    "DuplexLeaseActivity",
    "DuplexLeaseConfig",
    "DuplexLeaseState",
    "DuplexRequestResource",
    "DuplexRuntimeCapabilities",
    "DuplexSessionExpiry",
    "DuplexSessionRuntimeManager",
    "DuplexSessionRuntimeState",
    "DuplexStageBinding",
]

# A constructor call of the wrong shape carries `.kind` too: the native
# classes' constructors are wrapped when `_native` loads (its `shapes`
# module), the Python classes' here. The enums' metaclass does their own.
def _wrap_constructors() -> None:
    from enum import EnumMeta

    for name in __all__:
        cls = globals()[name]
        if isinstance(cls, type) and cls.__module__ == "duplex_session._types" and not isinstance(cls, EnumMeta):
            wrap_init(cls)


_wrap_constructors()
del _wrap_constructors, wrap_init
