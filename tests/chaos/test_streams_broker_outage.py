"""The single broker of ``make run`` goes away and comes back: the application must resume
by itself within seconds of the broker's return, with no ERROR, no loss, no duplicate.

Kafka's ``streams_broker_down_resilience_test`` in the shape of the embedded default: one
broker (its own, module-scoped: the session's shared broker must not be stopped), the
``simple`` topology under ``exactly_once_v2`` (one instance, one thread) on 2 partitions,
input fed throughout (the feeder buffers while the broker is away). The broker is stopped
cleanly (SIGTERM) or killed (SIGKILL) for 30 s or for 120 s, and restarted; the time from
the broker answering again to the first output written after it (``LogAppendTime`` of the
copy topic) must stay under ``recover_limit_s`` (30 s, ``CHAOS_RECOVER_LIMIT_S``).

- ``test_single_broker_outage_small``: a 30 s clean stop (``make test``);
- ``test_single_broker_outages`` (``chaos``): 30 s and 120 s, clean stop and SIGKILL: four
  scenarios at the same time, each with its own broker and application (about 3 minutes
  instead of 8).
"""

from __future__ import annotations

import contextlib
import threading
import time

import pytest
from chaos_harness import (
    AppDied,
    ChaosApp,
    Fault,
    Feeder,
    Figures,
    OutputWatch,
    bounce,
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
    verify_simple,
)

from streaming.testing import LocalKafkaCluster

pytestmark = pytest.mark.kafka

PARTITIONS = 2


@pytest.fixture(scope="module")
def spare_brokers():
    """Three more single brokers: the four chaos variants run side by side, one per broker."""
    with contextlib.ExitStack() as stack:
        yield [stack.enter_context(LocalKafkaCluster(nodes=1)) for _ in range(3)]


def outage_scenario(cluster, workdir, variant: str, mode: str, outages) -> Figures:
    """One application on ``cluster``'s single broker through ``outages`` (seconds each);
    returns the figures, not finished yet."""
    sz = sizes(variant)
    workdir.mkdir(parents=True, exist_ok=True)
    kind = "SIGKILL" if mode == "kill" else "clean stop"
    fig = Figures(
        f"single broker {kind} for " + " then ".join(f"{s}s" for s in outages),
        sz.scale,
        workdir=workdir,
    )
    bootstrap = cluster.bootstrap_servers
    topics = {k: unique(k) for k in ("input", "copy", "counts", "sums")}
    create_topics(
        cluster,
        sources=[topics["input"]],
        sinks=[topics[k] for k in ("copy", "counts", "sums")],
        partitions=PARTITIONS,
    )
    settings = {
        "application.id": unique("outage"),
        "bootstrap.servers": bootstrap,
        "processing.guarantee": "exactly_once_v2",
        **{f"app.chaos.{k}": v for k, v in topics.items()},
    }
    app = ChaosApp("app", "simple", settings, workdir)
    feeder = Feeder(bootstrap, topics["input"], pick_keys(PARTITIONS), rate=sz.rate)
    watch = OutputWatch(bootstrap, topics["copy"])
    faults: list[Fault] = []

    def steps() -> None:
        watch.start()
        app.wait_running(app.start(), timeout=90)
        feeder.start()
        watch.wait_after(time.time(), timeout=60, app=app)
        for seconds in outages:
            time.sleep(3)  # transactions in flight
            fault = bounce(
                cluster, [1], hard=mode == "kill", label=f"{kind} {seconds}s", down_s=seconds
            )
            faults.append(fault)
            # committed output again (or the application died); a recovery slower than the
            # limit fails the scenario in verify(), yet the next outage still runs if the
            # application recovers within another minute
            assert fault.ready is not None
            try:
                watch.wait_after(fault.ready, timeout=sz.recover_limit_s + 15, app=app)
            except AppDied:
                raise
            except AssertionError:
                # is it the application, or the watcher's own consumer? A new consumer reads
                # the topic again; the final read decides in verify()
                watch.restart()
                seen = watch.wait_after(fault.ready, timeout=60, app=app)
                fig.notes.append(
                    f"after {fault.label}: the watcher saw no committed output for "
                    f"{sz.recover_limit_s + 15:.0f} s; a new consumer saw the first at "
                    f"{seen:.1f} s after the broker was back"
                )
        time.sleep(3)

    def verify(aborted: bool) -> None:
        feeder.stop()
        fig.notes.append(f"feeder: {feeder.summary()}")
        truth = input_truth(read_input(bootstrap, topics["input"]), fig)
        out, why = read_output(
            bootstrap,
            [topics[k] for k in ("copy", "counts", "sums")],
            complete=simple_complete(truth, topics),
            timeout=20 if aborted else sz.complete_timeout_s,
            quiet_s=5 if aborted else 15,
        )
        fig.notes.append(f"output read until: {why}")
        app.stop()  # a non-zero exit is one of the instance's problems
        verify_simple(fig, truth, out, topics)
        output_timing(fig, out, topics["copy"], faults, feeder.last_wall)
        for label, seconds in fig.recoveries:
            if seconds is None:
                fig.violations.append(f"after {label}: no new output at all")
            elif seconds > sz.recover_limit_s:
                fig.violations.append(
                    f"after {label}: first new output {seconds:.1f}s after the broker was back "
                    f"(limit {sz.recover_limit_s:.0f}s)"
                )

    def cleanup() -> None:
        feeder.stop(timeout=30)
        watch.stop()
        stop_all([app], kill=True)
        ensure_nodes_up(cluster)
        drop_topics(cluster, topics.values(), [settings["application.id"]])
        fig.add_apps([app])
        fig.faults.extend(f.describe() for f in faults)

    run_scenario(fig, steps, verify, cleanup, finish=False)
    return fig


@pytest.mark.timeout(600)
def test_single_broker_outage_small(one_broker, tmp_path):
    """A clean stop of 30 s (``make test``)."""
    outage_scenario(one_broker, tmp_path, "small", "clean", (30,)).finish()


@pytest.mark.chaos
@pytest.mark.timeout(900)
def test_single_broker_outages(one_broker, spare_brokers, tmp_path):
    """Clean stops and SIGKILLs of 30 s and of 120 s: four scenarios side by side, each with
    its own broker and application (so that the suite fits its time budget)."""
    variants = [("clean", 30), ("kill", 30), ("clean", 120), ("kill", 120)]
    clusters = [one_broker, *spare_brokers]
    results: dict[tuple[str, int], Figures] = {}
    errors: list[BaseException] = []

    def run(mode: str, seconds: int, cluster) -> None:
        try:
            results[(mode, seconds)] = outage_scenario(
                cluster, tmp_path / f"{mode}-{seconds}", "chaos", mode, (seconds,)
            )
        except BaseException as exc:
            errors.append(exc)

    threads = [
        threading.Thread(target=run, args=(mode, seconds, cluster), daemon=True)
        for (mode, seconds), cluster in zip(variants, clusters, strict=True)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(850)
    if errors:
        raise errors[0]
    for key in variants:
        if key in results:
            results[key].finish(raise_on_failure=False)
    failed = [fig.render() for fig in results.values() if fig.failed]
    assert len(results) == len(variants), (
        f"scenarios that did not finish: {set(variants) - set(results)}"
    )
    assert not failed, "\n\n".join(failed)
