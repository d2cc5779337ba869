"""vllm-omni's duplex eval benchmark, unchanged: the sample runner of the
released wheel (``vllm_omni/benchmarks/duplex/omni_duplex_eval_runner.py``
and the experimental realtime client it drives), loaded without the
package's ``__init__`` files (which import vllm), generating one sample
against the gateway with the parrot engine behind it: a 3 s reference
voice in ``session.update``, the question's audio streamed one second a
unit with a camera frame beside each, a commit, and the runner's own wait
for ``response.done``.

Needs the wheel (``DUPLEX_VLLM_OMNI_WHEEL``), PyAV, Pillow, regex and
prettytable; without them the test is skipped, unless
``DUPLEX_REQUIRE_RELEASE=1`` (CI), when that is a failure.
"""

from __future__ import annotations

import asyncio
import json
import math
import wave
from pathlib import Path

from conftest import release_packages, require_release

PACKAGES = ("vllm_omni", "vllm_omni.benchmarks", "vllm_omni.benchmarks.duplex", "vllm_omni.clients",
            "vllm_omni.experimental", "vllm_omni.experimental.fullduplex", "vllm_omni.metrics")


def released_runner():
    for module in ("av", "PIL", "prettytable", "regex", "pybase64", "websockets", "numpy"):
        try:
            __import__(module)
        except ImportError:
            require_release(f"the eval runner's dependency {module} is not installed")
    release_packages(*PACKAGES)
    from vllm_omni.benchmarks.duplex import omni_duplex_eval_dataset, omni_duplex_eval_runner

    return omni_duplex_eval_dataset.DuplexSample, omni_duplex_eval_runner.generate_sample


def tone(path: Path, seconds: float, rate: int, hz: float) -> None:
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(b"".join(
            int(6000 * math.sin(2 * math.pi * hz * i / rate)).to_bytes(2, "little", signed=True)
            for i in range(int(seconds * rate))
        ))


def video(path: Path, seconds: int, fps: int = 5) -> None:
    """A small H.264 clip (a grey square that brightens), made with PyAV."""
    import av
    import numpy as np

    with av.open(str(path), "w") as container:
        stream = container.add_stream("mpeg4", rate=fps)
        stream.width, stream.height, stream.pix_fmt = 64, 64, "yuv420p"
        for n in range(seconds * fps):
            image = np.full((64, 64, 3), 40 + 6 * n, dtype=np.uint8)
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


def test_the_eval_runner_generates_a_sample_to_its_response_done(parrot_url, tmp_path):
    DuplexSample, generate_sample = released_runner()
    media = tmp_path / "media"
    media.mkdir()
    tone(media / "voice.wav", 3.0, 24_000, 180.0)
    tone(media / "question.wav", 3.0, 16_000, 330.0)
    video(media / "clip.mp4", 3)
    sample = DuplexSample(id="sample-parrot-1", split="generate", family="generate", task_type=None,
                          video=str(media / "clip.mp4"), question_audio=str(media / "question.wav"),
                          video_duration=3.0)
    result = asyncio.run(asyncio.wait_for(generate_sample(
        sample, url=parrot_url + "/v1/realtime", model="parrot", ref_audio=media / "voice.wav",
        output_root=tmp_path / "out", pace="as-fast-as-possible"), timeout=120))
    meta = json.loads(result.output.with_name(result.output.stem + ".meta.json").read_text())
    assert meta["response_done"] is True, meta
    assert meta["drain_timeout"] is None and meta["close_timeout"] is None, meta
    # The runner's own metrics saw the parrot's answer.
    assert result.request_metrics, result
