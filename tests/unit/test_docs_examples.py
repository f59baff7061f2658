"""The docs' tutorials run: each file of docs/examples/ is run through the
``TopologyTestDriver`` and writes what its page says, the DSL and the SQL topology alike.

The tutorial pages include these files' sections (pymdownx.snippets), so a page cannot show
code that is not run here; a section a page names must exist in its file (a missing one
would be included as nothing)."""

from __future__ import annotations

import importlib.util
import re
import runpy
from pathlib import Path
from types import ModuleType

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"
EXAMPLES = DOCS / "examples"


def _example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"docs_example_{name}", EXAMPLES / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", ["filter_enrich", "count_per_region", "dedup", "table_changelog"])
def test_the_dsl_and_the_sql_topology_write_what_the_page_says(name: str) -> None:
    example = _example(name)
    assert example.run(example.dsl_topology()) == example.EXPECTED
    assert example.run(example.sql_topology()) == example.EXPECTED


@pytest.mark.parametrize(
    ("build", "topic", "expected"),
    [
        ("dsl_tumbling", "revenue-5m", "EXPECTED_TUMBLING"),
        ("sql_tumbling", "revenue-5m", "EXPECTED_TUMBLING"),
        ("dsl_hopping", "revenue-10m-every-5m", "EXPECTED_HOPPING"),
        ("sql_hopping", "revenue-10m-every-5m", "EXPECTED_HOPPING"),
    ],
)
def test_windowed_revenue(build: str, topic: str, expected: str) -> None:
    example = _example("windowed_revenue")
    assert example.run(getattr(example, build)(), topic) == getattr(example, expected)


@pytest.mark.parametrize(
    ("build", "expected"),
    [
        ("dsl_lookup", "EXPECTED_LOOKUP"),
        ("sql_lookup", "EXPECTED_LOOKUP"),
        ("dsl_temporal", "EXPECTED_TEMPORAL"),
        ("sql_temporal", "EXPECTED_TEMPORAL"),
    ],
)
def test_enrichment_join(build: str, expected: str) -> None:
    example = _example("enrichment_join")
    assert example.run(getattr(example, build)()) == getattr(example, expected)


@pytest.mark.parametrize(
    ("build", "expected"), [("dsl_topology", "EXPECTED_DSL"), ("sql_topology", "EXPECTED_SQL")]
)
def test_sessions(build: str, expected: str) -> None:
    example = _example("sessions")
    assert example.run(getattr(example, build)()) == getattr(example, expected)


def test_the_sessions_differ_only_by_where_a_session_ends() -> None:
    """Kafka's session ends at its last click, Flink's SESSION_END the gap later."""
    example = _example("sessions")
    gap = 30 * example.MINUTE
    assert [(k, {**v, "session_end": v["session_end"] + gap}) for k, v in example.EXPECTED_DSL] == (
        example.EXPECTED_SQL
    )


@pytest.mark.parametrize(
    ("build", "topic", "inputs", "expected"),
    [
        ("dsl_velocity", "velocity-alerts", ("orders",), "EXPECTED_VELOCITY"),
        ("sql_velocity", "velocity-alerts", ("orders",), "EXPECTED_VELOCITY"),
        ("dsl_over_limit", "over-limit-alerts", ("customers", "orders"), "EXPECTED_OVER_LIMIT"),
        ("sql_over_limit", "over-limit-alerts", ("customers", "orders"), "EXPECTED_OVER_LIMIT"),
    ],
)
def test_fraud_rules(build: str, topic: str, inputs: tuple[str, ...], expected: str) -> None:
    example = _example("fraud")
    records = {name: getattr(example, name.upper()) for name in inputs}
    assert example.run(getattr(example, build)(), topic, records) == getattr(example, expected)


def test_the_temporal_join_differs_from_the_lookup_where_an_order_is_late() -> None:
    """The point the page makes: o3, late, meets gold as of its time and silver at once."""
    example = _example("enrichment_join")
    lookup = dict(example.EXPECTED_LOOKUP)
    temporal = dict(example.EXPECTED_TEMPORAL)
    assert (lookup["o3"]["tier"], temporal["o3"]["tier"]) == ("silver", "gold")


def test_the_first_sql_query_prints_what_its_page_says(capsys) -> None:
    path = EXAMPLES / "first_sql_query.py"
    runpy.run_path(str(path), run_name="__main__")
    printed = capsys.readouterr().out.splitlines()
    promised = [
        line.removeprefix("# ")
        for line in path.read_text().splitlines()
        if line.startswith(("# {", "# [{"))
    ]
    assert (
        printed
        == promised
        == [
            "{'region': 'EU', 'window_start': '2024-01-01 10:00:00.000', "
            "'window_end': '2024-01-01 10:05:00.000', 'revenue': 14.5}",
            "[{'order_id': 'o1', 'size': 'large'}, {'order_id': 'o2', 'size': 'small'}, "
            "{'order_id': 'o3', 'size': 'small'}]",
        ]
    )


def test_every_included_section_exists() -> None:
    included = 0
    for page in DOCS.rglob("*.md"):
        for file, section in re.findall(r'--8<-- "([^":]+):([a-z-]+)"', page.read_text()):
            text = (EXAMPLES / file).read_text()
            assert f"# --8<-- [start:{section}]" in text, (page.name, file, section)
            assert f"# --8<-- [end:{section}]" in text, (page.name, file, section)
            included += 1
    assert included >= 20


def test_every_example_file_is_included_by_a_page() -> None:
    pages = "".join(page.read_text() for page in DOCS.rglob("*.md"))
    for example in EXAMPLES.glob("*.py"):
        assert f'"{example.name}:' in pages, f"{example.name} is on no page"


#: the pages' Python blocks that are code of their own (not an included file), each run by
#: a test that names the page: the README's and these pages' tests in tests/unit/core,
#: tests/unit/sql and tests/integration (against-kafka.md on a broker, schemas.md with the
#: schema registry)
RUN_ELSEWHERE = {
    "getting-started/first-topology.md": 1,
    "getting-started/against-kafka.md": 1,
    "concepts/joins.md": 2,
    "concepts/schemas.md": 1,
    "sql/index.md": 3,
    "sql/functions.md": 1,
}


def test_every_python_block_of_the_docs_is_run() -> None:
    """A new example on a page is either included from docs/examples/ or added to a test."""
    own: dict[str, int] = {}
    for page in DOCS.rglob("*.md"):
        blocks = re.findall(r"^[ \t]*```python\n(.*?)^[ \t]*```", page.read_text(), re.S | re.M)
        code = [b for b in blocks if not b.strip().startswith("--8<--")]
        if code:
            own[page.relative_to(DOCS).as_posix()] = len(code)
    assert own == RUN_ELSEWHERE
