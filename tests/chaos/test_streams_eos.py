"""Kafka's ``streams_eos_test``: three instances of an exactly-once application are started
and stopped in staggered order (``rebalance``), or killed with SIGKILL one at a time while
the others run and restarted (``failure_and_recovery``), while input keeps arriving; the
verifier must see every input record exactly once and exact aggregates.

Topologies (``chaos_app.py``): ``simple`` (copy, count and sum per key) and ``complex``
(a stream-table left join, a re-key through a repartition topic and a tumbling-window count
per group). Three brokers, 3 partitions. After each step the test waits, as Kafka's does,
until every affected instance is RUNNING again and processing ("REBALANCING -> RUNNING",
"processed N records").

Kafka's sequences (p1..p3 are the instances, each with its own state directory):

- rebalance: start p1, p2, p3; stop p1; start p1; stop p2; stop p3; (p1 stops at the end)
- failure_and_recovery: start p1, p2, p3; per round kill -9 one instance (p1, p1, p2) and
  start it again; stop p3; (the others stop at the end).

Ours, beyond Kafka's (``test_streams_eos_kills_in_a_row``): one instance of the simple
topology killed with SIGKILL ``CHAOS_KILLS_IN_A_ROW`` times (10) in a row, each time while it
processes, and restarted on its state directory: exact outputs, and no restart restores a
store from the beginning of its changelog (the stores are transactional: they resume from
the offsets they committed with their content).
"""

from __future__ import annotations

import os
import time

import pytest
from chaos_app import GROUPS, WINDOW_MS
from chaos_harness import (
    ChaosApp,
    Feeder,
    Figures,
    complex_complete,
    create_topics,
    drop_topics,
    ensure_nodes_up,
    input_truth,
    output_timing,
    pick_keys,
    read_input,
    read_output,
    run_scenario,
    simple_complete,
    sizes,
    stop_all,
    unique,
    verify_complex,
    verify_simple,
    write_table,
)

pytestmark = pytest.mark.kafka

PARTITIONS = 3
INSTANCES = ("p1", "p2", "p3")
STEP_TIMEOUT_S = 90.0


def rebalance_steps() -> list[tuple[str, str]]:
    return [
        ("start", "p1"),
        ("start", "p2"),
        ("start", "p3"),
        ("stop", "p1"),
        ("start", "p1"),
        ("stop", "p2"),
        ("stop", "p3"),
    ]


def failure_steps(rounds: int) -> list[tuple[str, str]]:
    steps = [("start", "p1"), ("start", "p2"), ("start", "p3")]
    victims = ["p1", "p1", "p2"]
    for r in range(rounds):
        victim = victims[r % len(victims)]
        steps += [("kill", victim), ("start", victim)]
    return [*steps, ("stop", "p3")]


def _params():
    out = [pytest.param("small", "complex", "failure_and_recovery", id="small-complex-failure")]
    for topology in ("simple", "complex"):
        for kind in ("rebalance", "failure_and_recovery"):
            out.append(
                pytest.param(
                    "chaos", topology, kind, id=f"{topology}-{kind}", marks=pytest.mark.chaos
                )
            )
    return out


@pytest.mark.timeout(1200)
@pytest.mark.parametrize(("variant", "topology", "kind"), _params())
def test_streams_eos(three_brokers, tmp_path, variant, topology, kind):
    cluster = three_brokers
    sz = sizes(variant)
    steps_list = rebalance_steps() if kind == "rebalance" else failure_steps(sz.kill_rounds)
    fig = Figures(f"streams_eos {topology} {kind}", sz.scale, workdir=tmp_path)
    bootstrap = cluster.bootstrap_servers
    keys = pick_keys(PARTITIONS)
    if topology == "simple":
        topics = {k: unique(k) for k in ("input", "copy", "counts", "sums")}
        sinks = ["copy", "counts", "sums"]
        sources = ["input"]
    else:
        topics = {k: unique(k) for k in ("input", "table", "joined", "windowed")}
        sinks = ["joined", "windowed"]
        sources = ["input", "table"]
    create_topics(
        cluster,
        sources=[topics[k] for k in sources],
        sinks=[topics[k] for k in sinks],
        partitions=PARTITIONS,
    )
    table = {k: f"region{int(k[1:]) % 3}" for k in keys}
    if topology == "complex":
        write_table(bootstrap, topics["table"], table, int(time.time() * 1000) - 60_000)
    app_id = unique(f"eos-{topology}")
    settings = {
        "application.id": app_id,
        "bootstrap.servers": bootstrap,
        "processing.guarantee": "exactly_once_v2",
        "replication.factor": 3,
        # a killed instance leaves the group after 6 s (the broker's minimum) instead of 45 s
        "consumer.session.timeout.ms": 6000,
        "consumer.heartbeat.interval.ms": 1000,
        **{f"app.chaos.{k}": v for k, v in topics.items()},
    }
    apps = {name: ChaosApp(name, topology, settings, tmp_path) for name in INSTANCES}
    feeder = Feeder(bootstrap, topics["input"], keys, rate=sz.rate)
    step_times: list[str] = []

    def wait_group(changed: str | None, marks: dict[str, int], what: str) -> None:
        """Every running instance (the changed one included) RUNNING after the step and
        processing again."""
        began = time.monotonic()
        for name, app in apps.items():
            if not app.started:
                continue
            app.wait_running(marks[name], timeout=STEP_TIMEOUT_S)
            if feeder.is_alive():
                app.wait_processing(marks[name], timeout=STEP_TIMEOUT_S)
        step_times.append(f"{what} {time.monotonic() - began:.1f}s")

    def steps() -> None:
        for n, (action, name) in enumerate(steps_list):
            marks = {a: apps[a].mark() for a in apps}
            what = f"{n + 1}.{action} {name}"
            if action == "start":
                apps[name].start()
            elif action == "stop":
                apps[name].stop()  # a non-zero exit is one of the instance's problems
            elif action == "kill":
                apps[name].kill()
            wait_group(name, marks, what)
            if n == 0:
                feeder.start()  # after the first instance loaded the table (complex)
                apps[name].wait_processing(marks[name], timeout=STEP_TIMEOUT_S)
        time.sleep(2)

    def verify(aborted: bool) -> None:
        feeder.stop()
        fig.notes.append(f"feeder: {feeder.summary()}")
        fig.notes.append("steps (time until the group settled): " + ", ".join(step_times))
        truth = input_truth(read_input(bootstrap, topics["input"]), fig)
        if topology == "simple":
            complete = simple_complete(truth, topics)
        else:
            complete = complex_complete(truth, topics, GROUPS, WINDOW_MS)
        out, why = read_output(
            bootstrap,
            [topics[k] for k in sinks],
            complete=complete,
            timeout=20 if aborted else sz.complete_timeout_s,
            quiet_s=5 if aborted else 15,
        )
        fig.notes.append(f"output read until: {why}")
        for app in apps.values():
            if app.running:
                app.stop()  # a non-zero exit is one of the instance's problems
        if topology == "simple":
            verify_simple(fig, truth, out, topics)
        else:
            verify_complex(fig, truth, out, topics, table, GROUPS, WINDOW_MS)
        output_timing(fig, out, topics[sinks[0]], [], feeder.last_wall)

    def cleanup() -> None:
        feeder.stop(timeout=30)
        stop_all(apps.values(), kill=True)
        ensure_nodes_up(cluster)
        drop_topics(cluster, topics.values(), [app_id])
        fig.add_apps(list(apps.values()))

    run_scenario(fig, steps, verify, cleanup)


KILLS_IN_A_ROW = int(os.environ.get("CHAOS_KILLS_IN_A_ROW", "10"))


@pytest.mark.chaos
@pytest.mark.timeout(1200)
def test_streams_eos_kills_in_a_row(three_brokers, tmp_path):
    cluster = three_brokers
    sz = sizes("chaos")
    fig = Figures(f"streams_eos simple {KILLS_IN_A_ROW} kills in a row", sz.scale, workdir=tmp_path)
    bootstrap = cluster.bootstrap_servers
    keys = pick_keys(PARTITIONS)
    topics = {k: unique(k) for k in ("input", "copy", "counts", "sums")}
    create_topics(
        cluster,
        sources=[topics["input"]],
        sinks=[topics[k] for k in ("copy", "counts", "sums")],
        partitions=PARTITIONS,
    )
    app_id = unique("eos-kills")
    settings = {
        "application.id": app_id,
        "bootstrap.servers": bootstrap,
        "processing.guarantee": "exactly_once_v2",
        "replication.factor": 3,
        **{f"app.chaos.{k}": v for k, v in topics.items()},
    }
    app = ChaosApp("p1", "simple", settings, tmp_path)
    feeder = Feeder(bootstrap, topics["input"], keys, rate=sz.rate)
    restarts: list[float] = []
    #: the first event of each run after a kill
    marks: list[int] = []

    def steps() -> None:
        mark = app.start()
        app.wait_running(mark, timeout=STEP_TIMEOUT_S)
        feeder.start()
        app.wait_processing(mark, timeout=STEP_TIMEOUT_S)
        mark = app.mark()  # the first kill comes after commits of records, not of a backlog
        for _ in range(KILLS_IN_A_ROW):
            # the kill lands while the instance processes (and commits) the input
            app.wait_processing(mark, timeout=STEP_TIMEOUT_S, at_least=sz.rate)
            app.kill()
            mark = app.start()
            marks.append(mark)
            restarts.append(app.wait_running(mark, timeout=STEP_TIMEOUT_S))
        app.wait_processing(mark, timeout=STEP_TIMEOUT_S, at_least=sz.rate)

    def verify(aborted: bool) -> None:
        feeder.stop()
        fig.notes.append(f"feeder: {feeder.summary()}")
        fig.notes.append(
            "seconds from each restart to RUNNING: " + ", ".join(f"{s:.1f}" for s in restarts)
        )
        truth = input_truth(read_input(bootstrap, topics["input"]), fig)
        out, why = read_output(
            bootstrap,
            [topics[k] for k in ("copy", "counts", "sums")],
            complete=simple_complete(truth, topics),
            timeout=20 if aborted else sz.complete_timeout_s,
            quiet_s=5 if aborted else 15,
        )
        fig.notes.append(f"output read until: {why}")
        if app.running:
            app.stop()
        verify_simple(fig, truth, out, topics)
        # every restart resumed its stores from their own offsets, never from offset 0 (a
        # store records an offset once its changelog holds records: never 0)
        events = app.events()
        first = marks[0] if marks else len(events)
        after_kills = [e for e in events[first:] if e["ev"] == "restore_start"]
        from_start = [e for e in after_kills if e["start"] == 0]
        restored = sum(e["restored"] for e in events if e["ev"] == "restore_end")
        fig.notes.append(
            f"restores after the kills: {len(after_kills)}, {restored} records restored in all"
        )
        if from_start:
            fig.violations.append(f"a restart restored a store from offset 0: {from_start[:3]}")

    def cleanup() -> None:
        feeder.stop(timeout=30)
        stop_all([app], kill=True)
        ensure_nodes_up(cluster)
        drop_topics(cluster, topics.values(), [app_id])
        fig.add_apps([app])

    run_scenario(fig, steps, verify, cleanup)
