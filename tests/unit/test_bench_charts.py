"""``python -m bench.charts`` draws the Performance page's SVGs from results in the shape the
benchmarks' ``--json`` writes (built here from their own result objects), and the page's
committed results draw too."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest

from bench import charts
from bench.nexmark.run import FLINK_PER_CORE, QueryResult
from bench.results import read_json, run_meta, write_json
from bench.windowed_agg import Result, report, report_two_workers

REPO = Path(__file__).resolve().parents[2]


def _windowed_agg_run(engine: str, mode: str, rate: float, cpu_us: float) -> Result:
    records = 1_000
    seconds = records / rate
    result = Result(engine, mode, seconds=seconds, cpu_seconds=cpu_us * records / 1e6)
    result._records = records
    result.correct = True
    return result


def _fixture(data: Path) -> None:
    """windowed-agg.json and nexmark.json as the benchmarks write them."""
    runs = [
        _windowed_agg_run("ours", "eos", 50_000, 16),
        _windowed_agg_run("ours", "eos", 40_000, 18),  # the slower round: not the best
        _windowed_agg_run("ours-2t", "eos", 80_000, 17),
        _windowed_agg_run("java-2t", "eos", 77_777, 15),
        _windowed_agg_run("quix", "eos", 15_000, 60),
        _windowed_agg_run("raw", "eos", 190_000, 5),
        _windowed_agg_run("ours", "alos", 60_000, 15),
    ]
    broken = Result("java", "eos", error="no Kafka Streams jars")  # failed: not drawn
    best = {id(r) for r in runs if r.rate != 40_000}
    by_engine = {r.engine: r for r in runs if r.mode == "eos" and id(r) in best}
    summary = [report("eos", by_engine), report_two_workers("eos", by_engine)]
    write_json(
        data / "windowed-agg.json",
        "windowed-agg",
        run_meta(records=1_000, modes=["eos", "alos"]),
        summary,
        [r.as_json(best=id(r) in best) for r in [*runs, broken]],
    )
    queries = [
        QueryResult("q0", 1_000, 920, "dsl", seconds=0.5, cpu_seconds=0.01),
        QueryResult("q0", 1_000, 920, "sql", seconds=0.6, cpu_seconds=0.012),
        QueryResult("q6", 1_000, 920, "dsl", seconds=0.7, cpu_seconds=0.05),  # Flink has no q6
        QueryResult("q11", 1_000, 920, "dsl", seconds=1.0, cpu_seconds=0.04),
        QueryResult("q5", 1_000, 920, "dsl", problems=["window 3 missing"]),  # wrong: not drawn
    ]
    write_json(
        data / "nexmark.json",
        "nexmark",
        run_meta(events=1_000, flink_per_core=FLINK_PER_CORE),
        [],
        [q.as_json() for q in queries],
    )


def _texts(svg: Path) -> set[str]:
    """Every text of an SVG drawn with its text kept as text."""
    root = ElementTree.parse(svg).getroot()
    return {t.strip() for el in root.iter() if el.tag.endswith("text") for t in el.itertext()}


def test_the_summary_lines_keep_their_shape_in_the_json(tmp_path: Path) -> None:
    _fixture(tmp_path)
    document = read_json(tmp_path / "windowed-agg.json", "windowed-agg")
    assert document["summary"] == [
        "windowed-agg eos: ours 50000 rec/s, quix 15000 rec/s, raw 190000 rec/s, "
        "ours/quix 3.33, ours/raw 0.26",
        "windowed-agg-2 eos: ours 80000 rec/s, java 77777 rec/s, ours/java 1.03",
    ]
    ours = [r for r in document["results"] if (r["engine"], r["mode"]) == ("ours", "eos")]
    assert [(r["rate"], r["best"]) for r in ours] == [(50_000.0, True), (40_000.0, False)]
    assert ours[0]["cpu_us_per_record"] == 16.0
    with pytest.raises(ValueError, match="no nexmark results"):
        read_json(tmp_path / "windowed-agg.json", "nexmark")


def test_the_charts_name_every_engine_and_query(tmp_path: Path) -> None:
    _fixture(tmp_path)
    out = tmp_path / "charts"
    done = subprocess.run(
        [sys.executable, "-m", "bench.charts", "--data", str(tmp_path), "--out", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    names = ["windowed-agg-throughput.svg", "windowed-agg-cpu.svg", "nexmark-per-core.svg"]
    assert sorted(p.name for p in out.iterdir()) == sorted(names)
    for name in ("windowed-agg-throughput.svg", "windowed-agg-cpu.svg"):
        texts = _texts(out / name)
        drawn = {"ours, 1 thread", "ours, 2 workers", "Kafka Streams, 2 threads"}
        drawn |= {"Quix Streams", "confluent-kafka loop", "exactly-once", "at-least-once"}
        assert drawn <= texts, (name, texts)
        assert "Kafka Streams, 1 thread" not in texts  # its only run failed
    assert {"50,000", "80,000", "190,000"} <= _texts(out / "windowed-agg-throughput.svg")
    assert {"16.0", "60.0", "5.0"} <= _texts(out / "windowed-agg-cpu.svg")
    texts = _texts(out / "nexmark-per-core.svg")
    assert {"q0", "q6", "q11", "ours (DSL)", "ours (SQL)", "Flink 1.13 (published)"} <= texts
    assert {"100,000", "25,000", "155,020", "39,700"} <= texts  # ours per core, Flink's
    assert "q5" not in texts  # its result was wrong


def test_drawing_the_same_results_again_gives_the_same_files(tmp_path: Path) -> None:
    _fixture(tmp_path)
    first = {p.name: p.read_bytes() for p in charts.draw(tmp_path, tmp_path / "a")}
    second = {p.name: p.read_bytes() for p in charts.draw(tmp_path, tmp_path / "b")}
    assert first == second


def test_the_committed_results_draw_the_committed_charts(tmp_path: Path) -> None:
    drawn = charts.draw(charts.DATA_DIR, tmp_path)
    assert {p.name for p in drawn} == {
        "windowed-agg-throughput.svg",
        "windowed-agg-cpu.svg",
        "nexmark-per-core.svg",
    }
    for path in drawn:
        assert path.read_bytes() == (charts.OUT_DIR / path.name).read_bytes(), (
            f"{path.name} is out of date: run `python -m bench.charts`"
        )
