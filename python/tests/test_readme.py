"""The README's "From Python" example runs as written."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readme_example_runs():
    text = README.read_text()
    section = text[text.index("## From Python") :]
    (example,) = re.findall(r"```python\n(.*?)```", section, re.S)[:1]
    exec(compile(example, str(README), "exec"), {})
