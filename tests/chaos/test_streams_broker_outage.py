"""The single broker of ``make run`` goes away and comes back: the application must resume
by itself within seconds of the broker's return, with no ERROR, no loss, no duplicate.

Kafka's ``streams_broker_down_resilience_test`` in the shape of the embedded default: one
broker (its own, module-scoped: the session's shared broker must not be stopped), the
``simple`` topology under ``exactly_once_v2`` (one instance, one thread) on 2 partitions,
input fed throughout (the feeder buffers while the broker is away). The broker is stopped
cleanly (SIGTERM) or killed (SIGKILL) for 30 s, then for 120 s, and restarted; the time from
the broker answering again to the first output written after it (``LogAppendTime`` of the
copy topic) must stay under ``recover_limit_s`` (30 s, ``CHAOS_RECOVER_LIMIT_S``).

- ``small-clean-30s`` runs in ``make test``;
- ``clean`` / ``kill`` (``chaos``): a 30 s and then a 120 s outage in one run.
"""

from __future__ import annotations

import time

import pytest
from chaos_harness import (
    ChaosApp,
    Fault,
    Feeder,
    Figures,
    bounce,
    create_topics,
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

pytestmark = pytest.mark.kafka

PARTITIONS = 2


def _params():
    return [
        pytest.param("small", "clean", (30,), id="small-clean-30s"),
        pytest.param("chaos", "clean", (30, 120), id="clean-30s-120s", marks=pytest.mark.chaos),
        pytest.param("chaos", "kill", (30, 120), id="kill-30s-120s", marks=pytest.mark.chaos),
    ]


@pytest.mark.timeout(900)
@pytest.mark.parametrize(("variant", "mode", "outages"), _params())
def test_single_broker_outage(one_broker, tmp_path, variant, mode, outages):
    cluster = one_broker
    sz = sizes(variant)
    fig = Figures(
        f"single broker {'SIGKILL' if mode == 'kill' else 'clean stop'} for "
        + " then ".join(f"{s}s" for s in outages),
        sz.scale,
        workdir=tmp_path,
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
    app = ChaosApp("app", "simple", settings, tmp_path)
    feeder = Feeder(bootstrap, topics["input"], pick_keys(PARTITIONS), rate=sz.rate)
    faults: list[Fault] = []

    def steps() -> None:
        app.wait_running(app.start(), timeout=90)
        mark = app.mark()
        feeder.start()
        app.wait_processing(mark, timeout=60)
        for seconds in outages:
            time.sleep(3)  # transactions in flight
            fault = bounce(
                cluster,
                [1],
                hard=mode == "kill",
                label=f"{'SIGKILL' if mode == 'kill' else 'clean stop'} {seconds}s",
                down_s=seconds,
            )
            faults.append(fault)
            # the application processes new input again (or dies, or times out)
            app.wait_processing(app.mark(), timeout=sz.recover_limit_s + 60)
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
        code = app.stop()
        if code != 0:
            fig.violations.append(f"final stop: exit code {code}")
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
        stop_all([app], kill=True)
        ensure_nodes_up(cluster)
        fig.add_apps([app])
        fig.faults.extend(f.describe() for f in faults)

    run_scenario(fig, steps, verify, cleanup)
