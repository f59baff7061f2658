"""The examples of the README and of the docs pages it moved to run as written and print
what the text says."""

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
README = REPO / "README.md"
JOINS = REPO / "docs" / "concepts" / "joins.md"
FIRST_TOPOLOGY = REPO / "docs" / "getting-started" / "first-topology.md"


def _run_block(page: Path, heading: str, capsys) -> list[str]:
    text = page.read_text()
    block = re.search(re.escape(heading) + r"\n\n```python\n(.*?)```", text, re.S).group(1)
    exec(compile(block, str(page.relative_to(REPO)), "exec"), {})
    return capsys.readouterr().out.splitlines()


def test_readme_example_runs_as_written(capsys):
    lines = _run_block(README, "## A first topology", capsys)
    assert lines[-2:] == ["[EU@0/300000] 10.0 0", "[EU@0/300000] 14.5 60000"]
    assert lines[0] == "Topologies:"


def test_docs_first_topology_runs_as_written(capsys):
    lines = _run_block(FIRST_TOPOLOGY, "# A first topology", capsys)
    assert lines[-2:] == ["[EU@0/300000] 10.0 0", "[EU@0/300000] 14.5 60000"]
    assert lines[0] == "Topologies:"


def test_docs_enrichment_join_runs_as_written(capsys):
    lines = _run_block(JOINS, "## Enrichment: a stream-table left join", capsys)
    assert lines == ["c1 gold 10", "c9 unknown 20"]


def test_docs_stream_stream_join_runs_as_written(capsys):
    lines = _run_block(JOINS, "## A windowed stream-stream join", capsys)
    assert lines == [
        "o1 {'order': 30.0, 'paid': 30.0} 120000",
        "o2 {'order': 5.0, 'paid': None} 180000",
    ]


def test_readme_first_sql_query_runs_as_written(capsys):
    lines = _run_block(README, "## A first SQL query", capsys)
    assert lines == [
        "{'region': 'EU', 'window_start': '2024-01-01 10:00:00.000', "
        "'window_end': '2024-01-01 10:05:00.000', 'revenue': 14.5}",
        "[{'order_id': 'o1', 'size': 'large'}, {'order_id': 'o2', 'size': 'small'}, "
        "{'order_id': 'o3', 'size': 'small'}]",
    ]


def test_readme_first_sql_query_is_the_one_the_docs_run():
    """The README's first SQL query is the docs' (docs/examples/first_sql_query.py)."""
    readme = README.read_text()
    block = re.search(r"## A first SQL query\n\n```python\n(.*?)```", readme, re.S).group(1)
    example = (REPO / "docs" / "examples" / "first_sql_query.py").read_text()
    code = example.split("# --8<-- [start:code]\n", 1)[1].split("# --8<-- [end:code]", 1)[0]
    assert block == code


def test_readme_links_point_at_pages_that_exist():
    links = re.findall(r"\]\(((?:docs/)[^)#]+)", README.read_text())
    assert len(links) >= 20
    for link in links:
        assert (REPO / link).is_file(), link
