"""The README's first example runs as written and prints what the README says."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[3] / "README.md"


def test_readme_example_runs_as_written(capsys):
    text = README.read_text()
    block = re.search(r"## A first topology\n\n```python\n(.*?)```", text, re.S).group(1)
    exec(compile(block, "README.md", "exec"), {})
    lines = capsys.readouterr().out.splitlines()
    assert lines[-2:] == ["[EU@0/300000] 10.0 0", "[EU@0/300000] 14.5 60000"]
    assert lines[0] == "Topologies:"
