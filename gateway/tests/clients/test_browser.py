"""The gateway's page in a real browser: Debian's Chromium, headless, driven
through chromedriver (Selenium's WebDriver client), with a fake microphone
that plays speech espeak-ng made for the test.

The page must reach streaming, the gateway's metrics must count the
chunks it appended, a barge-in must cancel the response, and a dropped
link must resume with the response complete (every delta once, in order).
A screenshot of the page mid-response is kept with the test's output
(``target/browser/``).

Skipped without chromium, chromedriver or espeak-ng, unless
``DUPLEX_REQUIRE_BROWSER=1`` (CI), when that is a failure.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import struct
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import ROOT, SECRET, jwt, start_parrot

OUT = ROOT / "target" / "browser"
DELTAS = 12


def tools() -> dict[str, str]:
    found = {
        "chromium": shutil.which("chromium") or shutil.which("chromium-browser"),
        "chromedriver": shutil.which("chromedriver"),
        "espeak-ng": shutil.which("espeak-ng"),
    }
    missing = [name for name, path in found.items() if path is None]
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append("selenium (pip)")
    if missing:
        if os.environ.get("DUPLEX_REQUIRE_BROWSER") == "1":
            pytest.fail(f"DUPLEX_REQUIRE_BROWSER=1 but missing: {', '.join(missing)}")
        pytest.skip(f"missing: {', '.join(missing)}")
    return found  # type: ignore[return-value]


def speech(path: Path, espeak: str) -> None:
    """A few seconds of speech as a WAV (Chromium loops it as the mic)."""
    subprocess.run(
        [espeak, "-w", str(path), "Hello gateway. This is the fake microphone speaking to the duplex session, "
         "one chunk every twenty milliseconds."],
        check=True,
    )
    assert path.stat().st_size > 10_000


def metric(url: str, name: str) -> float:
    page = urllib.request.urlopen(url, timeout=5).read().decode()
    for line in page.splitlines():
        if line.startswith(name + " "):
            return float(line.split(" ")[1])
    return 0.0


def wait(driver, what: str, script: str, timeout: float = 20.0):
    """Waits until ``script`` (an expression on the page) is truthy."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = driver.execute_script("return " + script)
        if last:
            return last
        time.sleep(0.05)
    state = driver.execute_script(
        "return {state: duplex.state, sent: duplex.sent, seq: duplex.lastSeq, "
        "log: document.getElementById('log').textContent}"
    )
    raise AssertionError(f"timed out waiting for {what} ({script!r} = {last!r}); page: {state}")


def response(driver, rid: str) -> dict:
    return driver.execute_script(
        "const r = duplex.responses[arguments[0]]; return {text: r.text, status: r.status};", rid
    )


#: Chromium that exits while starting (before any page is loaded) is
#: started again, up to this many times in all: on a loaded machine its
#: first start can lose a race with its own DevTools port. The page is not
#: under test until a session exists, so this retries nothing the tests
#: assert.
STARTS = 3


def chrome(found: dict[str, str], tmp_path: Path):
    """Headless Chromium whose microphone plays speech made for the test."""
    from selenium import webdriver
    from selenium.common.exceptions import SessionNotCreatedException
    from selenium.webdriver.chrome.service import Service

    wav = tmp_path / "speech.wav"
    speech(wav, found["espeak-ng"])
    failures = []
    for start in range(STARTS):
        options = webdriver.ChromeOptions()
        options.binary_location = found["chromium"]
        for flag in (
            "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            "--disable-quic", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--window-size=900,1000",
            "--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream",
            f"--use-file-for-fake-audio-capture={wav}",
            "--autoplay-policy=no-user-gesture-required",
            f"--user-data-dir={tmp_path / f'profile-{start}'}",
        ):
            options.add_argument(flag)
        log = tmp_path / f"chromedriver-{start}.log"
        service = Service(
            executable_path=found["chromedriver"], service_args=["--verbose"], log_output=str(log)
        )
        try:
            return webdriver.Chrome(options=options, service=service)
        except SessionNotCreatedException as error:
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else "(no log)"
            failures.append(f"start {start + 1}: {error.msg}\n{tail}")
    raise AssertionError(f"Chromium did not start in {STARTS} tries:\n" + "\n".join(failures))


def resumed_complete(driver, rid: str) -> None:
    """After a drop: the page resumes, and response ``rid`` ends complete,
    every delta once, in order, with no gap and no repeat."""
    wait(driver, "the resume", "duplex.state === 'streaming'")
    wait(driver, "the response's end", f"duplex.responses['{rid}'].status === 'completed'")
    text = response(driver, rid)["text"]
    pieces = [int(n) for n in re.findall(r"piece (\d+) of", text)]
    assert pieces == list(range(DELTAS)), f"every delta once, in order: {text!r}"
    gaps, repeats = driver.execute_script("return [duplex.gaps, duplex.repeats]")
    assert (gaps, repeats) == (0, 0), "the replay filled the drop exactly"


def test_the_page_streams_barges_in_and_resumes_in_a_real_browser(gateway, tmp_path):
    found = tools()
    from selenium.webdriver.common.by import By

    gw = gateway(
        "--metrics-listen", "127.0.0.1:0",
        "--deltas", str(DELTAS), "--delta-ms", "150",
        env={"DUPLEX_AUTH_SECRET": SECRET},
    )
    deadline = time.monotonic() + 10
    metrics_url = None
    while metrics_url is None and time.monotonic() < deadline:
        for line in list(gw.output):
            m = re.search(r"metrics on (http://\S+)", line)
            if m:
                metrics_url = m.group(1)
        time.sleep(0.05)
    assert metrics_url, "".join(gw.output)

    driver = chrome(found, tmp_path)
    OUT.mkdir(parents=True, exist_ok=True)
    try:
        token = jwt("browser-user")
        driver.get(f"{gw.http}/?access_token={token}&start=1")
        wait(driver, "streaming", "duplex.state === 'streaming' && duplex.sent >= 25")
        level = driver.execute_script("return document.getElementById('level').value")
        assert level > 0, "the fake microphone's speech reaches the level meter"

        # The gateway counted the page's chunks.
        sent = driver.execute_script("return duplex.sent")
        appended = metric(
            metrics_url, 'duplex_gateway_events_in_total{dialect="realtime",type="input_audio_buffer.append"}'
        )
        assert appended >= sent, f"metrics counted {appended} appends, the page sent {sent}"

        # A turn, then a barge-in while its response streams.
        driver.find_element(By.ID, "turn").click()
        first = wait(driver, "a response", "duplex.order.length === 1 && duplex.order[0]")
        wait(driver, "a delta", f"duplex.responses['{first}'].text.length > 0")
        driver.find_element(By.ID, "barge").click()
        wait(driver, "the cancel", f"duplex.responses['{first}'].status === 'cancelled'")
        cut = response(driver, first)["text"]
        time.sleep(0.5)
        assert response(driver, first)["text"] == cut, "no delta of a cancelled response"

        # Another turn; mid-response, the link is dropped.
        driver.find_element(By.ID, "turn").click()
        second = wait(driver, "the second response", "duplex.order.length === 2 && duplex.order[1]")
        wait(driver, "three deltas", f"(duplex.responses['{second}'].text.match(/piece/g) || []).length >= 3")
        driver.save_screenshot(str(OUT / "page.png"))
        driver.find_element(By.ID, "drop").click()
        wait(driver, "the drop", "duplex.state !== 'streaming'", timeout=5)
        resumed_complete(driver, second)
        resumed = metric(metrics_url, "duplex_gateway_resumed_total")
        assert resumed >= 1
        driver.save_screenshot(str(OUT / "page-after-resume.png"))
    finally:
        (OUT / "browser-log.txt").write_text(
            "\n".join(str(e) for e in driver.get_log("browser")) if hasattr(driver, "get_log") else ""
        )
        driver.quit()


class Proxy:
    """A TCP relay between the browser and the gateway that can fail like a
    network: ``cut()`` resets every connection through it (RST, no close
    frame, no FIN), while it keeps accepting new ones."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.live: list[socket.socket] = []
        self.lock = threading.Lock()
        self.cuts = 0
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            with self.lock:
                self.live += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self.pump, args=(a, b), daemon=True).start()

    @staticmethod
    def pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self) -> None:
        with self.lock:
            live, self.live = self.live, []
            self.cuts += 1
        for s in live:
            try:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                s.close()
            except OSError:
                pass

    def close(self) -> None:
        self.listener.close()
        self.cut()


def test_the_page_resumes_by_itself_after_a_real_network_drop(gateway, tmp_path):
    """The link fails under the page (its connections reset mid-response,
    as a network does): the page notices, reconnects, resumes, and the
    response ends complete."""
    found = tools()
    from selenium.webdriver.common.by import By

    gw = gateway("--deltas", str(DELTAS), "--delta-ms", "150")
    host, port = gw.url.removeprefix("ws://").rsplit(":", 1)
    proxy = Proxy((host, int(port)))
    driver = chrome(found, tmp_path)
    try:
        driver.get(f"http://127.0.0.1:{proxy.port}/?start=1")
        wait(driver, "streaming", "duplex.state === 'streaming' && duplex.sent >= 10")
        driver.find_element(By.ID, "turn").click()
        rid = wait(driver, "a response", "duplex.order.length === 1 && duplex.order[0]")
        wait(driver, "three deltas", f"(duplex.responses['{rid}'].text.match(/piece/g) || []).length >= 3")
        proxy.cut()
        wait(driver, "the page to notice", "duplex.state !== 'streaming'", timeout=10)
        resumed_complete(driver, rid)
        log = driver.execute_script("return document.getElementById('log').textContent")
        assert "link down (1006)" in log, log
    finally:
        driver.quit()
        proxy.close()


def test_the_page_plays_what_an_engine_says(tmp_path):
    """The parrot example behind the gateway: the page streams the fake
    microphone's speech, ends a turn, and its speaker plays the user's own
    voice back, every byte of it, through the page's AudioWorklet."""
    found = tools()
    from selenium.webdriver.common.by import By

    process, url = start_parrot("DUPLEX_REQUIRE_BROWSER")
    driver = None
    try:
        driver = chrome(found, tmp_path)
        driver.get(url.replace("ws://", "http://") + "/?start=1")
        wait(driver, "a second of speech", "duplex.state === 'streaming' && duplex.sent >= 50")
        driver.find_element(By.ID, "turn").click()
        rid = wait(driver, "an answer", "duplex.order.length === 1 && duplex.order[0]")
        wait(driver, "its end", f"duplex.responses['{rid}'].status === 'completed'", timeout=30)
        said = driver.execute_script(f"return duplex.responses['{rid}'].audio")
        assert said >= 50 * 640 and said % 640 == 0, f"the turn's audio comes back whole: {said} bytes"
        # The speaker played it (16 kHz samples, reported every 0.1 s).
        wait(driver, "the speaker", f"duplex.played >= {said // 2} - 1600", timeout=10)
        text = driver.execute_script(f"return duplex.responses['{rid}'].text")
        assert text == "", "a parrot says no text"
        driver.save_screenshot(str(OUT / "parrot.png")) if OUT.is_dir() else None
    finally:
        if driver is not None:
            driver.quit()
        process.terminate()
        process.wait(timeout=10)
