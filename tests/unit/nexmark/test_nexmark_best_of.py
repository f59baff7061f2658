"""``python -m bench.nexmark --repeat``: which run of each query the table keeps."""

from __future__ import annotations

from bench.nexmark.__main__ import _kept
from bench.nexmark.run import QueryResult


def _run(query, cpu_seconds, error=""):
    return QueryResult(query, 1000, 1000, cpu_seconds=cpu_seconds, seconds=1.0, error=error)


def test_the_run_with_the_most_events_per_cpu_second_is_kept_per_query():
    runs = [_run("q0", 2.0), _run("q1", 1.0), _run("q0", 1.5), _run("q1", 1.2)]
    assert [(r.query, r.cpu_seconds) for r in _kept(runs)] == [("q0", 1.5), ("q1", 1.0)]


def test_a_failed_run_is_kept_whatever_the_other_runs_did():
    runs = [_run("q4", 1.0), _run("q4", 0.5, error="wrong sums"), _run("q4", 0.2)]
    (kept,) = _kept(runs)
    assert not kept.correct and kept.error == "wrong sums"
