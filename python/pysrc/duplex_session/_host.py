"""The value classes the package takes and gives, and a host's binding.

The seed module imports its companions from its host's sibling modules
(``messages.DuplexFence``; ``contracts.DuplexInputMode`` and
``DuplexRuntimeCapabilities``; ``lease.DuplexLeaseActivity``,
``DuplexLeaseConfig``, ``DuplexLeaseState`` and ``DuplexSessionExpiry``), so
its type checks are against the host's classes and what it builds of those
types is the host's. The package does the same once the host's own
``duplex_session.py`` binds it (:func:`bind_host`); without that, it uses its
own classes (``_types``).

A binding makes a ``DuplexSessionRuntimeManager`` subclass for the host whose
``_duplex_classes`` names the host's classes: its managers, and the sessions
they open, take and give those. The package's own manager class is not
changed, so hosts with their own classes and code using the package's live
in one process.
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType
from typing import Any, MutableMapping

from . import _types
from ._lease import SessionLease, view_of
from ._native import DuplexSessionRuntimeManager, DuplexSessionRuntimeState, HostClasses

#: The companion classes, by the sibling module the seed imports each from.
COMPANIONS = {
    "messages": ("DuplexFence",),
    "contracts": ("DuplexInputMode", "DuplexRuntimeCapabilities"),
    "lease": ("DuplexLeaseActivity", "DuplexLeaseConfig", "DuplexLeaseState", "DuplexSessionExpiry"),
}

#: The names the seed module defines itself (its ``__all__`` less the
#: companions it re-exports): always the package's.
OWN_NAMES = (
    "DuplexAppendReservation",
    "DuplexCompletedAppend",
    "DuplexFenceMismatchError",
    "DuplexInputAppend",
    "DuplexRequestResource",
    "DuplexSessionRuntimeManager",
    "DuplexSessionRuntimeState",
    "DuplexStageBinding",
)

#: The seed module's ``__all__``.
SEED_ALL = sorted(
    OWN_NAMES + ("DuplexLeaseActivity", "DuplexLeaseConfig", "DuplexLeaseState", "DuplexSessionExpiry")
)


def _classes(found: dict[str, type], *, own: bool = False) -> HostClasses:
    return HostClasses(
        fence=found["DuplexFence"],
        input_mode=found["DuplexInputMode"],
        activity=found["DuplexLeaseActivity"],
        lease_config=found["DuplexLeaseConfig"],
        lease_view=SessionLease if own else view_of(found["DuplexLeaseState"]),
        expiry=found["DuplexSessionExpiry"],
        capabilities=found["DuplexRuntimeCapabilities"],
        own=own,
    )


_OWN_FOUND = {name: getattr(_types, name) for names in COMPANIONS.values() for name in names}

#: The package's own classes.
OWN = _classes(_OWN_FOUND, own=True)

#: Each bound host's classes by its fence class: a session made by its own
#: constructor (not by a manager) takes the classes of its fence's host.
BY_FENCE: dict[type, HostClasses] = {}


def _sibling(package: str | None, name: str, given: ModuleType | None) -> ModuleType | None:
    """The host's module ``name`` beside its ``duplex_session.py``: ``given``
    if the host named it, else ``{package}.{name}`` if it exists. A module
    that exists but fails to import raises, as the seed's import would."""
    if given is not None:
        return given
    if not package:
        return None
    qualified = f"{package}.{name}"
    try:
        return importlib.import_module(qualified)
    except ModuleNotFoundError as err:
        if err.name == qualified:
            return None
        raise


def bind_host(
    namespace: MutableMapping[str, Any],
    *,
    messages: ModuleType | None = None,
    lease: ModuleType | None = None,
    contracts: ModuleType | None = None,
) -> type:
    """Binds the package to the host whose ``duplex_session.py`` calls it,
    and fills that module with the seed module's names.

    ``namespace`` is that module's ``globals()``. The host's ``messages``,
    ``lease`` and ``contracts`` modules are the ones beside it (in the same
    package, as the seed imports them), unless given here. Every companion
    class one of them defines is taken from it; the package's own stands in
    for a module or class the host does not have. The module then holds the
    seed's names (its ``__all__``, and the companions it imports), with a
    ``DuplexSessionRuntimeManager`` made for the host. Returns that manager
    class.

    Example, the whole of a host's ``engine/duplex_session.py``::

        from duplex_session import bind_host

        bind_host(globals())
    """
    package = namespace.get("__package__")
    if package is None:
        name = namespace.get("__name__", "")
        package = name.rpartition(".")[0] if "." in name else None
    given = {"messages": messages, "lease": lease, "contracts": contracts}
    found = dict(_OWN_FOUND)
    for module_name, names in COMPANIONS.items():
        module = _sibling(package, module_name, given[module_name])
        for class_name in names:
            cls = getattr(module, class_name, None) if module is not None else None
            if isinstance(cls, type):
                found[class_name] = cls
    host = _classes(found)
    manager = type(
        "DuplexSessionRuntimeManager",
        (DuplexSessionRuntimeManager,),
        {
            "__slots__": (),
            "__module__": namespace.get("__name__", __name__),
            "__doc__": DuplexSessionRuntimeManager.__doc__,
            "_duplex_classes": host,
        },
    )
    BY_FENCE[found["DuplexFence"]] = host
    exports: dict[str, Any] = {name: getattr(sys.modules["duplex_session"], name) for name in OWN_NAMES}
    exports.update(found)
    exports["DuplexSessionRuntimeManager"] = manager
    exports["DuplexSessionRuntimeState"] = DuplexSessionRuntimeState
    namespace.update(exports)
    namespace["__all__"] = list(SEED_ALL)
    return manager
