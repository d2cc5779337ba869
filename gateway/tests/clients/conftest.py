"""A real duplex-gateway process for each test, and what its clients need.

The binary is ``$DUPLEX_GATEWAY`` or ``target/release/duplex-gateway`` (then
``target/debug``) of this repository; without one the tests are skipped,
unless ``DUPLEX_REQUIRE_CLIENTS=1`` (CI), when that is a failure.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import types
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SECRET = "client-tests-secret-of-at-least-32-bytes!"


def binary() -> Path | None:
    given = os.environ.get("DUPLEX_GATEWAY")
    candidates = [Path(given)] if given else []
    candidates += [ROOT / "target" / "release" / "duplex-gateway", ROOT / "target" / "debug" / "duplex-gateway"]
    return next((c for c in candidates if c.is_file()), None)


def jwt(sub: str, secret: str = SECRET, exp_in: int = 600) -> str:
    """An HS256 JSON Web Token, as an application's backend mints one."""

    def part(obj) -> str:
        raw = json.dumps(obj, separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    head = part({"alg": "HS256", "typ": "JWT"}) + "." + part({"sub": sub, "exp": int(time.time()) + exp_in})
    sig = hmac.new(secret.encode(), head.encode(), hashlib.sha256).digest()
    return head + "." + base64.urlsafe_b64encode(sig).rstrip(b"=").decode()


class Gateway:
    def __init__(self, process: subprocess.Popen, url: str) -> None:
        self.process = process
        self.url = url  # ws://127.0.0.1:PORT
        self.http = url.replace("ws://", "http://")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def gateway(request):
    """``gateway(*args)``: starts a gateway with these extra arguments."""
    exe = binary()
    if exe is None:
        if os.environ.get("DUPLEX_REQUIRE_CLIENTS") == "1":
            pytest.fail("DUPLEX_REQUIRE_CLIENTS=1 but no duplex-gateway binary (cargo build --release -p duplex-gateway)")
        pytest.skip("no duplex-gateway binary: cargo build --release -p duplex-gateway")
    started = []

    def start(*args: str, env: dict | None = None) -> Gateway:
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("DUPLEX_")}
        full_env.update(env or {})
        # Defaults a test's own arguments override.
        defaults = {"--grace-s": "5", "--deltas": "8", "--delta-ms": "40"}
        chosen = [x for flag, value in defaults.items() if flag not in args for x in (flag, value)]
        process = subprocess.Popen(
            [str(exe), "--listen", "127.0.0.1:0", *chosen, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=full_env,
        )
        seen = []
        match = None
        while match is None and len(seen) < 50:
            line = process.stdout.readline()
            if not line:
                break
            seen.append(line)
            match = re.search(r"listening on (ws://\S+)", line)
        if match is None:
            process.kill()
            raise RuntimeError(f"the gateway did not start: {''.join(seen)!r}")
        # The rest of its output is read as it comes (a full pipe would
        # stall the gateway) and kept for the test's report.
        threading.Thread(target=lambda: seen.extend(process.stdout), daemon=True).start()
        gw = Gateway(process, match.group(1))
        gw.output = seen
        started.append(gw)
        return gw

    yield start
    for gw in started:
        gw.stop()


CHUNK = base64.b64encode(b"\0\1" * 320).decode()  # 20 ms of 16 kHz pcm16


def require_release(what: str) -> None:
    """Skips the test for want of ``what``; under
    ``DUPLEX_REQUIRE_RELEASE=1`` (CI) fails it instead."""
    if os.environ.get("DUPLEX_REQUIRE_RELEASE") == "1":
        pytest.fail(f"DUPLEX_REQUIRE_RELEASE=1 but {what}")
    pytest.skip(what)


_RELEASE_ROOT: list[Path] = []


def release_packages(*names: str) -> Path:
    """vllm-omni 0.30.0's wheel (``DUPLEX_VLLM_OMNI_WHEEL``), unpacked once
    per run, with ``names`` as bare packages over it: their modules import
    as released, without the packages' ``__init__`` (which import vllm).
    Returns where it is unpacked."""
    wheel = os.environ.get("DUPLEX_VLLM_OMNI_WHEEL")
    if not wheel or not os.path.exists(wheel):
        require_release("DUPLEX_VLLM_OMNI_WHEEL does not name vllm-omni 0.30.0's wheel")
    if not _RELEASE_ROOT:
        root = Path(tempfile.mkdtemp(prefix="vllm-omni-0.30.0-"))
        zipfile.ZipFile(wheel).extractall(root)
        sys.path.insert(0, str(root))
        _RELEASE_ROOT.append(root)
    root = _RELEASE_ROOT[0]
    for name in names:
        package = types.ModuleType(name)
        package.__path__ = [str(root / name.replace(".", "/"))]
        sys.modules.setdefault(name, package)
    return root


def start_parrot(required_by: str) -> tuple[subprocess.Popen, str]:
    """The engine example of ``gateway/examples/parrot.rs`` (built by
    ``cargo build --release -p duplex-gateway --examples``), serving on a
    free port: the process and its ``ws://`` URL. Without the binary the
    test is skipped, unless ``required_by`` names an environment variable
    set to 1 (CI), when that is a failure."""
    exe = ROOT / "target" / "release" / "examples" / "parrot"
    if not exe.is_file():
        build = "cargo build --release -p duplex-gateway --examples"
        if os.environ.get(required_by) == "1":
            pytest.fail(f"{required_by}=1 but no {exe} ({build})")
        pytest.skip(f"no {exe}: {build}")
    process = subprocess.Popen([str(exe), "127.0.0.1:0"], stdout=subprocess.PIPE, text=True)
    line = process.stdout.readline()
    match = re.search(r"listening on (ws://\S+)", line)
    if match is None:
        process.kill()
        raise RuntimeError(f"the parrot did not start: {line!r}")
    return process, match.group(1)


@pytest.fixture
def parrot_url():
    """The parrot engine example serving on a free port (see
    ``start_parrot``), stopped after the test."""
    process, url = start_parrot("DUPLEX_REQUIRE_CLIENTS")
    yield url
    process.terminate()
    process.wait(timeout=10)


@pytest.fixture
def redis_url():
    """A throwaway ``redis-server`` (Debian's, from PATH) on a free port."""
    import shutil
    import socket

    exe = shutil.which("redis-server")
    if exe is None:
        if os.environ.get("DUPLEX_REQUIRE_REDIS") == "1":
            pytest.fail("DUPLEX_REQUIRE_REDIS=1 but no redis-server on PATH")
        pytest.skip("no redis-server on PATH")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    process = subprocess.Popen(
        [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
        except OSError:
            time.sleep(0.05)
    yield f"redis://127.0.0.1:{port}/"
    process.kill()
    process.wait()
