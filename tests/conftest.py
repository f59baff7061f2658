"""Fixtures shared by the whole suite: one real local Apache Kafka (``LocalKafkaCluster``)
and one real local schema registry (``LocalSchemaRegistry``).

``kafka_cluster`` is one single-node broker shared by the whole session (integration and
platform tests alike): tests create their own uniquely named topics and application ids.
Tests that need another layout (3 nodes, a broken config) start their own
``LocalKafkaCluster``. Every test using the fixture gets the ``kafka`` marker.
``schema_registry`` is shared the same way: tests register under subjects of their own
uniquely named topics.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from streaming.testing import LocalKafkaCluster, LocalSchemaRegistry
from tests.process_cpu import tree_cpu_seconds

#: (seconds, "what  test") of every broker start and node restart in this process
_BROKER_STARTS: list[tuple[float, str]] = []


def _timed(method: Callable[..., Any]) -> Callable[..., Any]:
    """``method`` of LocalKafkaCluster, its duration kept in ``_BROKER_STARTS``: a slow
    broker start on a loaded machine shows up in the summary instead of hiding in a
    fixture's setup time."""

    @functools.wraps(method)
    def timed(cluster: LocalKafkaCluster, *args: Any, **kwargs: Any) -> Any:
        began = time.monotonic()
        try:
            return method(cluster, *args, **kwargs)
        finally:
            test = _without_group(os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0])
            what = f"{method.__name__} ({cluster.num_nodes} node(s))"
            _BROKER_STARTS.append((time.monotonic() - began, f"{what:26} {test}"))

    return timed


LocalKafkaCluster.start = _timed(LocalKafkaCluster.start)  # type: ignore[method-assign]
LocalKafkaCluster.restart_node = _timed(LocalKafkaCluster.restart_node)  # type: ignore[method-assign]


@pytest.fixture(scope="session")
def kafka_cluster() -> Iterator[LocalKafkaCluster]:
    """One single-node KRaft broker (broker+controller) on loopback for the session."""
    with LocalKafkaCluster(nodes=1) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def schema_registry() -> Iterator[LocalSchemaRegistry]:
    """One schema registry (Confluent's REST API, BACKWARD by default) for the session."""
    with LocalSchemaRegistry() as registry:
        yield registry


#: the modules that take minutes, started first when ``make test`` runs the suite on two
#: workers (``pytest -n 2 --dist loadgroup``), so that both finish at about the same time
LONGEST_FIRST = (
    "tests/platform/test_ui.py",
    "tests/platform/test_platform_restart.py",
    "tests/platform/test_dagster_postgres.py",
    "tests/platform/test_supervisor_faults.py",
    "tests/chaos/test_streams_broker_bounce.py",
    "tests/platform/test_sql_apps.py",
    "tests/chaos/test_streams_eos.py",
    "tests/conformance/test_differential.py",
    "tests/chaos/test_streams_standby_replica.py",
)


def pytest_configure(config: pytest.Config) -> None:
    """Keep the modules in the order ``pytest_collection_modifyitems`` gives them: xdist's
    loadgroup would otherwise start the groups with the most tests first (the unit test
    modules) and the longest modules, single tests, last."""
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def _without_group(nodeid: str) -> str:
    """A test id without the ``@<module>`` suffix xdist's loadgroup gives it."""
    module = nodeid.split("::", 1)[0]
    return nodeid.removesuffix(f"@{module}")


def _rank(item: pytest.Item) -> int:
    path = item.nodeid.split("::", 1)[0]
    return LONGEST_FIRST.index(path) if path in LONGEST_FIRST else len(LONGEST_FIRST)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark tests that use a broker with ``kafka`` (deselect them with ``-m "not kafka"``);
    keep each module on one worker (its module-scoped brokers, lakes and Spark sessions are
    shared by its tests, in order), the longest modules first.

    First among the hooks: xdist's own hook turns the ``xdist_group`` mark into the test id
    suffix its scheduler groups by, so the mark must be on the item before that hook runs
    (``_split_modules`` checks that it was)."""
    for item in items:
        if "kafka_cluster" in getattr(item, "fixturenames", ()) or item.get_closest_marker("kafka"):
            item.add_marker(pytest.mark.kafka)
        item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))
    items.sort(key=_rank)


#: the chaos scenarios' figures, handed over by the xdist workers that ran them
_CHAOS_FIGURES: list[str] = []


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """On the xdist controller: keep a finished worker's chaos figures."""
    _CHAOS_FIGURES.extend(getattr(node, "workeroutput", {}).get("chaos_figures", []))
    for module, seconds in getattr(node, "workeroutput", {}).get("module_cpu", {}).items():
        _MODULE_CPU[module] = _MODULE_CPU.get(module, 0.0) + seconds
    _BROKER_STARTS.extend(
        (seconds, what)
        for seconds, what in getattr(node, "workeroutput", {}).get("broker_starts", [])
    )


def pytest_sessionfinish(session: pytest.Session) -> None:
    """On an xdist worker: hand its broker start times to the controller. On the
    controller of a ``--dist loadgroup`` run: fail it if a module's tests ran on more than
    one worker (each worker would build the module's fixtures again)."""
    workeroutput = getattr(session.config, "workeroutput", None)
    _close_module_cpu()
    if workeroutput is not None:
        workeroutput["broker_starts"] = list(_BROKER_STARTS)
        workeroutput["module_cpu"] = dict(_MODULE_CPU)
    elif _grouped(session.config) and _split_modules() and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _grouped(config: pytest.Config) -> bool:
    """Whether the run keeps each module on one worker (``--dist loadgroup``)."""
    return getattr(config.option, "dist", "no") == "loadgroup"


def _split_modules() -> dict[str, set[str]]:
    """The modules whose tests ran on more than one xdist worker, with those workers."""
    return {module: workers for module, workers in _MODULE_WORKERS.items() if len(workers) > 1}


#: seconds spent per module and per xdist worker (setup, call and teardown)
_MODULE_SECONDS: dict[str, float] = {}
_WORKER_SECONDS: dict[str, float] = {}
#: the xdist workers each module's tests ran on
_MODULE_WORKERS: dict[str, set[str]] = {}


#: CPU seconds per module of the process that ran it and the processes below it (brokers,
#: Spark, Dagster), and the module running now with the figure at its start. On a machine
#: whose cores every worker shares, this, not a module's wall time, is what it costs the
#: run; ``MODULE_CPU_LOG=FILE`` appends each module's figure as it ends.
_MODULE_CPU: dict[str, float] = {}
_CURRENT_MODULE: list[tuple[str, float]] = []


def _close_module_cpu() -> None:
    """Charge the CPU used since the running module started to that module."""
    if _CURRENT_MODULE:
        module, began = _CURRENT_MODULE.pop()
        seconds = tree_cpu_seconds() - began
        _MODULE_CPU[module] = _MODULE_CPU.get(module, 0.0) + seconds
        if log := os.environ.get("MODULE_CPU_LOG"):
            with open(log, "a") as f:
                f.write(f"{seconds:.1f}\t{module}\n")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item) -> None:
    """At a module's first test, close the CPU account of the module before it."""
    module = item.nodeid.split("::", 1)[0]
    if not _CURRENT_MODULE or _CURRENT_MODULE[0][0] != module:
        _close_module_cpu()
        _CURRENT_MODULE.append((module, tree_cpu_seconds()))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Add a test phase's duration to its module's and its worker's totals."""
    module = report.nodeid.split("::", 1)[0]
    _MODULE_SECONDS[module] = _MODULE_SECONDS.get(module, 0.0) + report.duration
    node = getattr(report, "node", None)
    worker = getattr(getattr(node, "gateway", None), "id", "main")
    _WORKER_SECONDS[worker] = _WORKER_SECONDS.get(worker, 0.0) + report.duration
    _MODULE_WORKERS.setdefault(module, set()).add(worker)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """The time each worker was busy and the slowest modules (where a shorter run must
    come from); on the xdist controller, the figures of every chaos scenario run."""
    if _WORKER_SECONDS:
        terminalreporter.section("time per worker and slowest modules")
        busy = ", ".join(f"{w} {s:.0f} s" for w, s in sorted(_WORKER_SECONDS.items()))
        terminalreporter.write_line(f"busy: {busy}")
        slowest = sorted(_MODULE_SECONDS.items(), key=lambda kv: -kv[1])[:25]
        for module, seconds in slowest:
            terminalreporter.write_line(f"{seconds:8.1f} s  {module}")
    if _MODULE_CPU:
        total = sum(_MODULE_CPU.values())
        terminalreporter.section(f"CPU per module: {total:.0f} s in all; the most")
        for module, seconds in sorted(_MODULE_CPU.items(), key=lambda kv: -kv[1])[:25]:
            terminalreporter.write_line(f"{seconds:8.1f} s  {module}")
    if _grouped(terminalreporter.config) and (split := _split_modules()):
        terminalreporter.section("modules split across workers (the run fails)", red=True)
        for module, workers in sorted(split.items()):
            terminalreporter.write_line(f"{module}: {', '.join(sorted(workers))}", red=True)
    if _BROKER_STARTS:
        total = sum(seconds for seconds, _ in _BROKER_STARTS)
        terminalreporter.section(
            f"broker starts and restarts: {len(_BROKER_STARTS)}, {total:.0f} s in all; slowest"
        )
        for seconds, what in sorted(_BROKER_STARTS, reverse=True)[:12]:
            terminalreporter.write_line(f"{seconds:7.1f} s  {what}")
    if _CHAOS_FIGURES:
        terminalreporter.section("chaos scenario figures")
        for line in _CHAOS_FIGURES:
            terminalreporter.write_line(line)
