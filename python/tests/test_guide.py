"""The Python guide's first example (docs/python.md) runs as written."""

import re
from pathlib import Path

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "python.md"


def test_the_guide_example_runs():
    section = GUIDE.read_text()
    (example,) = re.findall(r"```python\n(.*?)```", section, re.S)[:1]
    exec(compile(example, str(GUIDE), "exec"), {})
