"""vllm-omni 0.30.0's own duplex session code, imported from inside its
released wheel (a zip on `__path__`) without running its packages'
`__init__`, which import vllm; `vllm.logger.init_logger` is the standard
library's logger, the one thing of vllm these modules import. None of the
release's files is edited.

The wheel is named by `DUPLEX_VLLM_OMNI_WHEEL`; without it a test that
needs it is reported skipped, unless `DUPLEX_REQUIRE_RELEASE=1` (CI),
where it fails."""

import importlib
import logging
import os
import sys
import types

import pytest

PACKAGES = ("vllm_omni", "vllm_omni.engine", "vllm_omni.engine.duplex", "vllm_omni.engine.duplex.session", "vllm_omni.metrics")


def release_module(name: str):
    """The release's module `name` (dotted, under `vllm_omni`)."""
    wheel = os.environ.get("DUPLEX_VLLM_OMNI_WHEEL")
    if not wheel or not os.path.exists(wheel):
        if os.environ.get("DUPLEX_REQUIRE_RELEASE") == "1":
            pytest.fail("DUPLEX_VLLM_OMNI_WHEEL does not name vllm-omni 0.30.0's wheel")
        pytest.skip("needs vllm-omni 0.30.0's wheel (DUPLEX_VLLM_OMNI_WHEEL)")
    for package in PACKAGES:
        if package not in sys.modules:
            module = types.ModuleType(package)
            module.__path__ = [os.path.join(wheel, *package.split("."))]
            sys.modules[package] = module
    if "vllm.logger" not in sys.modules:
        vllm, logger = types.ModuleType("vllm"), types.ModuleType("vllm.logger")
        vllm.__path__ = []
        logger.init_logger = logging.getLogger
        sys.modules.setdefault("vllm", vllm)
        sys.modules["vllm.logger"] = logger
    module = importlib.import_module(name)
    assert ".whl" in module.__file__, f"{name} was not imported from the wheel: {module.__file__}"
    return module
