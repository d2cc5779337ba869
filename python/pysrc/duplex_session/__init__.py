"""duplex_session: vllm-omni's full-duplex session runtime, in Rust.

A drop-in for the seed module
``vllm_omni.experimental.fullduplex.engine.duplex_session`` and the names it
imports from its siblings (``messages``, ``contracts``, ``lease``)::

    from duplex_session import DuplexSessionRuntimeManager, DuplexFence
    from duplex_session import DuplexInputMode, DuplexRuntimeCapabilities
    from duplex_session import DuplexLeaseActivity, DuplexLeaseConfig

Sessions and the manager are Rust (``_native``); the value types, enums and
exceptions are the seed's Python classes (``_types``). Every exception the
package raises carries ``.kind``, the error kind of the conformance traces.
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

# A constructor call of the wrong shape carries `.kind` too (the native
# classes' are wrapped when `_native` loads; see its `shapes` module).
for _class in (
    DuplexAppendReservation,
    DuplexCompletedAppend,
    DuplexFence,
    DuplexFenceMismatchError,
    DuplexInputAppend,
    DuplexLeaseConfig,
    DuplexLeaseState,
    DuplexRequestResource,
    DuplexRuntimeCapabilities,
    DuplexSessionExpiry,
    DuplexStageBinding,
):
    wrap_init(_class)
del _class, wrap_init

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
