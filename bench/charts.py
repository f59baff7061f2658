"""The Performance page's charts, drawn as SVG from the benchmarks' ``--json`` results.

    python -m bench.charts [--data docs/performance/data] [--out docs/performance]

Reads ``windowed-agg.json`` (``python -m bench.windowed_agg --json``) and ``nexmark.json``
(``python -m bench.nexmark --json``) from ``--data`` and writes, for each file there:

- ``windowed-agg-throughput.svg`` and ``windowed-agg-cpu.svg``: records/s and CPU µs per
  record of each engine's best correct run, per delivery mode;
- ``nexmark-per-core.svg``: events/s per core of each query, ours (DSL, SQL) beside Flink
  1.13's published figure.

The SVGs keep their text as text (searchable, and the same on every machine) and carry no
date or random ids, so drawing the same results again gives the same files (``make docs``
does)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from bench.results import read_json

REPO = Path(__file__).resolve().parents[1]
DATA_DIR = REPO / "docs" / "performance" / "data"
OUT_DIR = REPO / "docs" / "performance"

#: the engines of ``bench.windowed_agg`` in the charts' order, with their names there
ENGINE_LABELS = {
    "ours": "ours, 1 thread",
    "ours-2t": "ours, 2 workers",
    "java": "Kafka Streams, 1 thread",
    "java-2t": "Kafka Streams, 2 threads",
    "quix": "Quix Streams",
    "raw": "confluent-kafka loop",
    "spark": "Spark Structured Streaming",
}
MODE_LABELS = {"eos": "exactly-once", "alos": "at-least-once"}
NEXMARK_LABELS = {"dsl": "ours (DSL)", "sql": "ours (SQL)"}
FLINK_LABEL = "Flink 1.13 (published)"
COLOURS = ["#3f51b5", "#ff9800", "#4caf50", "#9c27b0"]
#: the published peer in grey: it was not run here
FLINK_COLOUR = "#9e9e9e"

matplotlib.rcParams.update(
    {
        "svg.fonttype": "none",  # text stays text
        "svg.hashsalt": "bench-charts",  # ids the same from one drawing to the next
        "font.size": 10,
        "axes.spines.top": False,
        "axes.spines.right": False,
    }
)


def best_runs(document: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """The run each windowed-agg summary line keeps, by (mode, engine), correct ones only."""
    return {(r["mode"], r["engine"]): r for r in document["results"] if r["best"] and r["correct"]}


def _grouped_bars(
    ax: Axes,
    groups: Sequence[str],
    series: Sequence[tuple[str, Sequence[float | None]]],
    value_format: str,
    colours: Sequence[str] = COLOURS,
) -> None:
    """Horizontal bars: one row per group, one bar per series in it, its value beside it
    (a series without a value for a group leaves a gap)."""
    height = 0.8 / max(1, len(series))
    for i, (label, values) in enumerate(series):
        ys = [g + (i - (len(series) - 1) / 2) * height for g in range(len(groups))]
        shown = [(y, v) for y, v in zip(ys, values, strict=True) if v is not None]
        bars = ax.barh(
            [y for y, _ in shown],
            [v for _, v in shown],
            height=height,
            label=label,
            color=colours[i % len(colours)],
        )
        ax.bar_label(bars, labels=[format(v, value_format) for _, v in shown], padding=3)
    ax.set_yticks(range(len(groups)), groups)
    ax.invert_yaxis()  # the first group on top
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:,.0f}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)


def _height(groups: int, series: int) -> float:
    """Inches for ``groups`` rows of ``series`` bars, the titles and the axis."""
    return 1.4 + 0.22 * groups * series + 0.15 * groups


def _subtitle(meta: dict[str, Any], what: str) -> str:
    day = str(meta.get("generated_at", ""))[:10]
    cores = meta.get("cpu_count")
    return f"{what}; {cores} cores, {day}" if cores else f"{what}; {day}"


def windowed_agg_charts(document: dict[str, Any], out: Path) -> list[Path]:
    """Throughput and CPU per record of each engine, per mode."""
    meta = document["meta"]
    runs = best_runs(document)
    modes = [m for m in MODE_LABELS if any(mode == m for mode, _ in runs)]
    engines = [e for e in ENGINE_LABELS if any(engine == e for _, engine in runs)]
    labels = [ENGINE_LABELS[e] for e in engines]
    context = _subtitle(meta, f"{meta['records']:,} JSON orders, 5-minute tumbling sum")
    written = []
    for name, field, title, unit, fmt in (
        ("throughput", "rate", "windowed aggregation: records/s", "records/s", ",.0f"),
        ("cpu", "cpu_us_per_record", "windowed aggregation: CPU per record", "CPU µs", ".1f"),
    ):
        fig = Figure(figsize=(9, _height(len(engines), len(modes))), layout="constrained")
        ax = fig.add_subplot()
        series = [
            (
                MODE_LABELS[m],
                [runs[(m, e)][field] if (m, e) in runs else None for e in engines],
            )
            for m in modes
        ]
        _grouped_bars(ax, labels, series, fmt)
        ax.set_xlabel(f"{unit} (best run of each engine; higher is better)")
        if field != "rate":
            ax.set_xlabel(f"{unit} per input record, broker excluded (lower is better)")
        ax.margins(x=0.18)
        ax.set_title(f"{title}\n{context}", loc="left", fontsize=10)
        written.append(_save(fig, out / f"windowed-agg-{name}.svg"))
    return written


def nexmark_chart(document: dict[str, Any], out: Path) -> list[Path]:
    """Events/s per core of each query: ours per engine beside Flink's published figure."""
    meta = document["meta"]
    results = [r for r in document["results"] if r["correct"]]
    queries = list(dict.fromkeys(r["query"] for r in results))
    engines = [e for e in NEXMARK_LABELS if any(r["engine"] == e for r in results)]
    flink = meta.get("flink_per_core") or {}
    per_core = {(r["query"], r["engine"]): r["per_core"] for r in results}
    series: list[tuple[str, Sequence[float | None]]] = [
        (NEXMARK_LABELS[e], [per_core.get((q, e)) for q in queries]) for e in engines
    ]
    series.append((FLINK_LABEL, [flink.get(q) for q in queries]))
    fig = Figure(figsize=(9, _height(len(queries), len(series))), layout="constrained")
    ax = fig.add_subplot()
    ax.set_xscale("log")  # q3 and q8 read a tenth of the events: ten times the others
    ax.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    _grouped_bars(ax, queries, series, ",.0f", [*COLOURS[: len(engines)], FLINK_COLOUR])
    ax.set_xlabel("events/s per core (log scale; higher is better)")
    ax.margins(x=0.25)
    context = _subtitle(meta, f"{meta['events']:,} events, exactly-once, one process per query")
    ax.set_title(f"Nexmark: events/s per core\n{context}", loc="left", fontsize=10)
    return [_save(fig, out / "nexmark-per-core.svg")]


def _save(fig: Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="svg", metadata={"Date": None})
    return path


def draw(data: Path, out: Path) -> list[Path]:
    """Every chart whose results file is in ``data``, into ``out``."""
    written = []
    if (data / "windowed-agg.json").exists():
        document = read_json(data / "windowed-agg.json", "windowed-agg")
        written += windowed_agg_charts(document, out)
    if (data / "nexmark.json").exists():
        written += nexmark_chart(read_json(data / "nexmark.json", "nexmark"), out)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DATA_DIR, help="the --json results")
    parser.add_argument("--out", type=Path, default=OUT_DIR, help="where the SVGs go")
    args = parser.parse_args(argv)
    written = draw(args.data, args.out)
    if not written:
        print(f"no windowed-agg.json or nexmark.json in {args.data}", file=sys.stderr)
        return 1
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
