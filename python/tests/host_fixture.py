"""The fixture host (``tests/host/voicehost``), installed twice for a test run:
``voicehost_package``, whose ``duplex_session.py`` binds the package, and
``voicehost_seed``, with the seed module in its place (its imports of
``vllm_omni.experimental.fullduplex.engine`` siblings pointed at the host's
own). Every host test runs on both and must pass on both.

The seed comes from ``$DUPLEX_SEED_PATH`` or ``../shared/reference`` beside
the repository; without it the seed's runs are skipped, unless
``DUPLEX_REQUIRE_SEED=1`` (CI), when that is a failure.
"""

from __future__ import annotations

import importlib
import os
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

HERE = Path(__file__).resolve().parent
TEMPLATE = HERE / "host" / "voicehost"
SEED_PACKAGE = "vllm_omni.experimental.fullduplex.engine"
SEED_FILE = Path(*SEED_PACKAGE.split(".")) / "duplex_session.py"


def seed_root() -> Path | None:
    """The reference folder holding the seed, if there is one."""
    given = os.environ.get("DUPLEX_SEED_PATH")
    candidates = [Path(given)] if given else []
    candidates.append(HERE.parents[2] / "shared" / "reference")
    for root in candidates:
        if (root / SEED_FILE).is_file():
            return root
    return None


def install(root: Path, side: str) -> SimpleNamespace:
    """Copies the fixture host to ``root/voicehost_{side}`` (the seed's
    module in place of ``duplex_session.py`` for ``side == "seed"``) and
    imports it."""
    name = f"voicehost_{side}"
    target = root / name
    if not target.exists():
        shutil.copytree(TEMPLATE, target, ignore=shutil.ignore_patterns("__pycache__"))
        if side == "seed":
            seed = seed_root()
            if seed is None:
                raise FileNotFoundError("the seed module (set DUPLEX_SEED_PATH)")
            text = (seed / SEED_FILE).read_text()
            (target / "duplex_session.py").write_text(text.replace(SEED_PACKAGE, name))
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    modules = {
        part: importlib.import_module(f"{name}.{part}")
        for part in ("messages", "lease", "contracts", "duplex_session", "control_plane")
    }
    return SimpleNamespace(side=side, name=name, **modules)
