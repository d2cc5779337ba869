"""The Python guide's examples (docs/python.md) run as written."""

import re
from pathlib import Path

import pytest

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "python.md"
EXAMPLES = re.findall(r"```python\n(.*?)```", GUIDE.read_text(), re.S)


def test_the_guide_has_examples():
    assert len(EXAMPLES) >= 5


@pytest.mark.parametrize("example", EXAMPLES, ids=[f"example-{i}" for i in range(len(EXAMPLES))])
def test_each_guide_example_runs(example):
    exec(compile(example, str(GUIDE), "exec"), {})
