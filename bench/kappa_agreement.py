"""Kappa replay against the live run, for every stream application of the platform.

The platform's topics (``platform/topics.yaml``: 4 partitions per input) on a broker of their
own; ``--hours`` of generated events with the generator's usual disorder (out-of-order and
late events, duplicates, malformed records) are sent as ``make run``'s generator catches up:
30 s of event time at a time, each once every live application has read the last, so the
live applications see them about in the order they would have live. Then each application
is replayed from the earliest offsets under a new application id (the ``kappa_replay``
asset's path) and its results are compared with the live ones. Reported per application:
results on each side, equal, different, only on one side, and the records each side dropped
as late.

    python -m bench.kappa_agreement [--hours 2] [--orders-per-second 5] [--apps a,b]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import dataclass

from pipelines.generator import GeneratorConfig, produce
from pipelines.streams import kappa
from pipelines.streams.apps import STREAM_APPS
from pipelines.streams.monitor import BrokerProbe, wait_for_no_lag
from pipelines.topics import create_topics
from resources.stream_apps import StreamAppsResource
from streaming.dsl.processors.window_aggregate import (
    EMIT_INTERVAL_MS_KSTREAMS_WINDOWED_AGGREGATION as EMIT_INTERVAL,
)
from streaming.testing import LocalKafkaCluster


@dataclass
class Agreement:
    """One application's replay against its live run."""

    app: str
    comparison: kappa.Comparison
    live_late: list[dict] | None
    replay_late: list[dict] | None
    replay_seconds: float

    def row(self) -> str:
        c = self.comparison
        return (
            f"| {self.app} | {c.live:,} | {c.replayed:,} | {c.equal:,} | {len(c.different):,} "
            f"| {len(c.unexplained):,} | {c.only_live:,} | {c.only_replayed:,} "
            f"| {_n(self.live_late)} | {_n(self.replay_late)} | {self.replay_seconds:.0f} |"
        )


def _n(rows: list[dict] | None) -> str:
    return "-" if rows is None else f"{len(rows):,}"


HEADER = (
    "| application | live results | replayed | equal | different | unexplained | only live "
    "| only replayed | late live | late replay | replay s |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|"
)


def run(
    bootstrap: str, state_root: str, apps: list[str], hours: float, orders_per_second: float
) -> list[Agreement]:
    create_topics(bootstrap)
    resource = StreamAppsResource(
        state_root=state_root,
        commit_interval_ms=200,
        # a backlog's closed windows at every record (a replay stops once caught up)
        streams_config={EMIT_INTERVAL: 0},
    )
    base = resource.app_config()
    suffix = f"{int(time.time())}"
    live = {
        name: resource.runner(
            name, bootstrap, instance=f"live-{name}", application_id=f"{name}-live-{suffix}"
        )
        for name in apps
    }
    for runner in live.values():
        runner.start()
    try:
        probe = BrokerProbe(bootstrap, timeout=10.0)
        groups = {r.application_id: r.app.input_topics(r.config) for r in live.values()}
        now = int(time.time() * 1000)
        span_s = hours * 3600
        config = GeneratorConfig(
            seed=11,
            start_ms=now - int(span_s * 1000),
            duration_s=span_s,
            orders_per_second=orders_per_second,
        )
        began = time.monotonic()

        def keep_up() -> None:
            lag = wait_for_no_lag(probe, groups, 120)
            if lag != 0:
                print(f"the live applications lag {lag} records; sending on")

        sent = produce(config, bootstrap, keep_up=keep_up)
        wait_for_no_lag(probe, groups, 300)
        print(f"live: {sent:,} events sent and processed in {time.monotonic() - began:.0f} s")
    finally:
        for runner in live.values():
            runner.close()
    out = []
    for name in apps:
        app = STREAM_APPS[name]
        replay_suffix = f"replay-{suffix}"
        runner = resource.runner(
            name,
            bootstrap,
            instance=f"replay-{name}",
            application_id=f"{name}-{replay_suffix}",
            config=kappa.replay_config(app, base, replay_suffix),
        )
        replay = kappa.replay_to_end_offsets(runner, bootstrap, timeout_s=1800, log=lambda _m: None)
        comparison = kappa.compare(
            name,
            kappa.read_all(bootstrap, app.output_topics(base)[0]),
            kappa.read_all(bootstrap, app.output_topics(runner.config)[0]),
        )
        live_late = kappa.late_rows(bootstrap, app, base)
        replay_late = kappa.late_rows(bootstrap, app, runner.config)
        if live_late is not None and replay_late is not None:
            kappa.explain(name, comparison, live_late, replay_late)
        out.append(Agreement(name, comparison, live_late, replay_late, replay.seconds))
        print(out[-1].row(), flush=True)
        for ident, live_value, replay_value in comparison.unexplained[:5]:
            print(f"  unexplained {ident}: live {live_value}, replay {replay_value}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hours", type=float, default=2.0)
    parser.add_argument("--orders-per-second", type=float, default=5.0)
    parser.add_argument("--apps", default=",".join(STREAM_APPS), help="comma-separated")
    args = parser.parse_args(argv)
    apps = [a for a in args.apps.split(",") if a]
    with tempfile.TemporaryDirectory(prefix="bench-kappa-") as tmp, LocalKafkaCluster() as kafka:
        print(HEADER)
        results = run(kafka.bootstrap_servers, tmp, apps, args.hours, args.orders_per_second)
    print("\n" + HEADER)
    for result in results:
        print(result.row())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
