"""The stream applications as Dagster assets.

- Raw topics (``kafka/orders``, ``kafka/customers``, ``kafka/payments``, ``kafka/clicks``) are
  materialised by the ``generator`` asset (a burst of synthetic events; ``make run`` also
  runs the generator continuously outside Dagster), in JSON or Avro (the kafka resource's
  ``value_format``); each declares its ``.avsc`` fields as its column schema, and a burst in
  Avro records the subject, version and id the registry holds (``assets.topic_schemas``).
- Each stream application (DSL or SQL, ``apps.STREAM_APPS``; a SQL application's input and
  output topics are read from its statements) is a long-running streaming asset producing
  its output topics
  (``kafka/revenue-per-region-5m`` ...): a run starts the application with ``KafkaStreams``
  (same ``application.id`` as the supervisor's instance, so they share the partitions),
  logs observations with throughput, lag, closed windows and health every
  ``report_interval_s`` and a materialization whenever new results were written, and stops
  cleanly when the run is terminated (or after ``max_runtime_s`` / once caught up, when
  configured). A broker outage does not fail the run: the observations report the
  application ``STALLED`` (since when, why), a dead application is restarted with backoff
  (``restarts``), and the run carries on once the broker is back
  (``StreamAppRunner.watch``, as in the supervisor).
- ``kappa_replay`` reprocesses an application from the earliest offsets under a new
  application id up to the input end offsets captured at its start (it finishes while the
  generator keeps producing; progress in the run's log every few seconds, ``timeout_s``
  fails it saying how far it got) and compares with the live results (``kappa_replay_job``).
"""

import signal
import threading
import time
import uuid
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetExecutionContext,
    AssetKey,
    AssetMaterialization,
    AssetObservation,
    AssetSpec,
    Config,
    Failure,
    FreshnessPolicy,
    MaterializeResult,
    MetadataValue,
    asset,
    define_asset_job,
    multi_asset,
)
from pydantic import Field

from assets.executor import STREAMING_OP_TAG
from assets.keys import kafka_key
from assets.stream_health import (
    HEALTH_CHECK,
    health_asset_key,
    health_check_spec,
    watermark_and_health_metadata,
)
from assets.topic_schemas import column_schema, registered_schema_metadata
from pipelines import domain
from pipelines.streams import kappa, monitor
from pipelines.streams.apps import STREAM_APPS, StreamApp
from pipelines.streams.config import StreamAppConfig
from resources.kafka import KafkaResource
from resources.stream_apps import StreamAppsResource
from streaming.dsl.processors.window_aggregate import (
    EMIT_INTERVAL_MS_KSTREAMS_WINDOWED_AGGREGATION,
)

if TYPE_CHECKING:
    from pipelines.generator import GeneratorConfig

STREAMS_GROUP = "streams"
RAW_GROUP = "kafka_raw"


# a stream output with nothing new for this long is stale (the 5-minute windows close
# every 5 minutes of event time; the sensor reports growth every minute)
OUTPUT_FRESHNESS = FreshnessPolicy.time_window(
    fail_window=timedelta(minutes=30), warn_window=timedelta(minutes=15)
)


# -- raw topics ------------------------------------------------------------------------------


class GeneratorRunConfig(Config):
    """A burst of synthetic events (``pipelines.generator``)."""

    seed: int | None = Field(
        default=None,
        description="reproduce a burst (its seed is in the metadata); default: a fresh random "
        "seed, so no two bursts (nor a burst and `make run`'s generator) share an order id",
    )
    duration_s: float = Field(default=60.0, description="simulated seconds of events")
    orders_per_second: float = 5.0
    customers: int = 200
    start_ms: int = Field(default=0, description="first event time; 0 = now minus duration")


def burst_config(config: GeneratorRunConfig, now_ms: int | None = None) -> "GeneratorConfig":
    """The ``GeneratorConfig`` of one burst: a fresh random seed unless ``config.seed``, and
    events ending now (``now_ms``) unless ``config.start_ms``; none stamped after their end
    (the clicks an order schedules minutes later are left out)."""
    from pipelines.generator import GeneratorConfig

    now = int(time.time() * 1000) if now_ms is None else now_ms
    start = config.start_ms or int(now - config.duration_s * 1000)
    seed = {} if config.seed is None else {"seed": config.seed}
    return GeneratorConfig(
        **seed,
        start_ms=start,
        duration_s=config.duration_s,
        orders_per_second=config.orders_per_second,
        customers=config.customers,
        until_ms=start + int(config.duration_s * 1000),
    )


@multi_asset(
    name="generator",
    specs=[
        AssetSpec(
            kafka_key(t),
            group_name=RAW_GROUP,
            kinds={"kafka"},
            description=f"Raw `{t}` events (JSON, or Avro under the kafka resource's "
            "value_format), written by the generator",
            metadata=column_schema(t),
        )
        for t in domain.RAW_TOPICS
    ],
    description="Writes a burst of synthetic orders, customers, payments and clicks to Kafka",
)
def generator(context: AssetExecutionContext, config: GeneratorRunConfig, kafka: KafkaResource):
    from pipelines.generator import iter_events, produce, run_id
    from pipelines.topics import create_topics

    kafka.connection.verify()  # a refused login fails here, saying why
    create_topics(kafka.connection)
    gen = burst_config(config)
    start = gen.start_ms
    counts: dict[str, int] = {}
    for event in iter_events(gen):
        counts[event.topic] = counts.get(event.topic, 0) + 1
    sent = produce(gen, kafka.connection, raw_format=kafka.raw_format)
    context.log.info("sent %d events (run %s, seed %d)", sent, run_id(gen), gen.seed)
    for topic in domain.RAW_TOPICS:
        yield MaterializeResult(
            asset_key=kafka_key(topic),
            metadata={
                "records_written": counts.get(topic, 0),
                "records_total": sum(kafka.end_offsets(topic).values()),
                "first_event_time": start,
                "generator_run_id": run_id(gen),
                "seed": str(gen.seed),  # text: a 63-bit seed overflows GraphQL Int
                "value_format": kafka.value_format,
                # Avro: the subject, version and fields the registry holds
                **registered_schema_metadata(kafka.raw_format, topic),
            },
        )


# -- streaming assets -----------------------------------------------------------------------


class StreamRunConfig(Config):
    """How long a streaming asset's run keeps the application running."""

    max_runtime_s: float = Field(
        default=0.0, description="stop after this many seconds; 0 = until the run is terminated"
    )
    stop_when_caught_up: bool = Field(
        default=False, description="stop once the consumer lag stayed 0 for settle_s"
    )
    settle_s: float = 5.0
    report_interval_s: float = 10.0
    watch_interval_s: float = Field(
        default=2.0, description="how often the broker and the application's health are checked"
    )
    application_id: str = Field(
        default="", description="default: the application name (shares the supervisor's group)"
    )


def _status_metadata(status: dict[str, Any]) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "state": status["state"],
        "records_processed": status["records_processed"],
        "records_per_second": float(status["records_per_second"]),
        "records_sent": status["records_sent"],
        "consumer_lag_max": status["consumer_lag_max"],
        "late_records_dropped": status["late_records_dropped"],
        "uptime_s": float(status["uptime_s"]),
        "application_id": status["application_id"],
    }
    if status.get("query_url"):
        meta["query_url"] = MetadataValue.url(status["query_url"])
    if "closed_windows" in status:
        meta["closed_windows"] = status["closed_windows"]
    meta.update(watermark_and_health_metadata(status))
    return meta


class RunTermination:
    """A run's termination as a request the streaming loop polls, not an exception.

    Dagster terminates a run (the UI's Terminate, ``instance.run_launcher.terminate``) by
    interrupting the process executing the step: SIGINT (SIGTERM maps to it), raised as
    ``DagsterExecutionInterruptedError`` wherever the step happens to be (inside a Kafka call,
    or the application's close) and reported as a failed step with a stack trace. Inside this
    context the first interrupt only sets ``requested``: the loop closes the application
    cleanly (commit, checkpoint) and the step ends normally; the executor, which forwarded
    the termination, still ends the run CANCELED. A second interrupt (a forced termination
    while closing) is raised as usual. Outside the main thread (where Python delivers no
    signal) it does nothing."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.requested: str | None = None  # the signal's name, once received
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: Any) -> None:
        if self.requested is not None:
            from dagster._core.errors import DagsterExecutionInterruptedError

            raise DagsterExecutionInterruptedError()
        self.requested = signal.Signals(signum).name

    def __enter__(self) -> "RunTermination":
        if threading.current_thread() is threading.main_thread():
            for sig in self.SIGNALS:
                self._previous[sig] = signal.getsignal(sig)
                signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous = {}

    def sleep(self, seconds: float) -> None:
        """Sleep ``seconds``, or less once termination is requested."""
        end = time.monotonic() + seconds
        while self.requested is None and (left := end - time.monotonic()) > 0:
            time.sleep(min(0.2, left))


def _app_metadata(app: StreamApp) -> dict[str, Any]:
    """The static metadata of a stream application's output assets (and, for a SQL
    application, the file its topology and lineage are read from)."""
    meta: dict[str, Any] = {"stream_app": app.name, "stores": ", ".join(app.stores)}
    if app.sql is not None:
        meta["sql_file"] = MetadataValue.path(str(app.sql.file))
    return meta


def build_stream_asset(app: StreamApp) -> Any:
    """The long-running streaming asset of ``app``."""
    config = StreamAppConfig()
    inputs = [kafka_key(t) for t in app.input_topics(config)]
    outputs = app.output_topics(config)[:-1]  # not the dead-letter topic

    @multi_asset(
        name=app.name.replace("-", "_"),
        specs=[
            AssetSpec(
                kafka_key(t),
                deps=inputs,
                group_name=STREAMS_GROUP,
                kinds={"kafka", "python" if app.sql is None else "sql"},
                description=f"`{t}`, written by the `{app.name}` stream application",
                metadata=_app_metadata(app),
                # results keep coming while the supervisor runs the application (reported
                # by topic_materializations_sensor); the late-record topic may stay quiet
                freshness_policy=None if t.endswith(config.late_suffix) else OUTPUT_FRESHNESS,
            )
            for t in outputs
        ],
        check_specs=[health_check_spec(app)],
        description=f"Streaming: runs the `{app.name}` application. {app.description}.",
        op_tags=dict([STREAMING_OP_TAG]),
    )
    def _stream(
        context: AssetExecutionContext,
        config: StreamRunConfig,
        kafka: KafkaResource,
        stream_apps: StreamAppsResource,
    ):
        runner = stream_apps.runner(
            app.name,
            kafka.connection,
            instance=f"run-{context.run.run_id[:8]}",
            application_id=config.application_id or None,
            raw_format=kafka.raw_format,
        )
        with RunTermination() as termination:
            runner.start()
            context.log.info(
                "started %s (application.id %s, state dir %s)",
                app.name,
                runner.application_id,
                runner.settings.state_dir,
            )
            # the topics this run writes (the asset keys name the default topics)
            written = dict(zip(outputs, app.output_topics(runner.config), strict=False))
            probe = monitor.BrokerProbe(kafka.connection)

            def end_offsets(topic: str) -> int | None:
                if probe.error is not None:
                    return None
                try:
                    return sum(kafka.end_offsets(written[topic]).values())
                except Exception:  # the broker went away meanwhile: the next report has it
                    return None

            began = time.monotonic()
            last_sent = 0
            last_watch = 0.0
            last_health = runner.health.status
            caught_up_since: float | None = None
            status: dict[str, Any] = runner.status()
            try:
                while True:
                    termination.sleep(min(1.0, config.report_interval_s))
                    elapsed = time.monotonic() - began
                    if termination.requested:
                        # the run was terminated: report once more, then close cleanly
                        context.log.info(
                            "%s: run terminated (%s): stopping the application cleanly",
                            app.name,
                            termination.requested,
                        )
                    if time.monotonic() - last_watch >= config.watch_interval_s:
                        # a stall or a dead application is reported and restarted, not raised
                        last_watch = time.monotonic()
                        probe.check()
                        health = runner.watch(probe)
                        if health.status != last_health:
                            say = (
                                context.log.info
                                if health.status == "RUNNING"
                                else context.log.warning
                            )
                            say("%s: %s", app.name, health.summary())
                        last_health = health.status
                    due = int(elapsed) % max(1, int(config.report_interval_s)) == 0
                    done = bool(
                        termination.requested
                        or (config.max_runtime_s and elapsed >= config.max_runtime_s)
                    )
                    if config.stop_when_caught_up and probe.error is not None:
                        caught_up_since = None  # the broker is away: not caught up
                    elif config.stop_when_caught_up:
                        try:
                            lag = kappa.group_lag(
                                kafka.connection,
                                runner.application_id,
                                app.input_topics(runner.config),
                            )
                        except Exception:  # the broker is away: not caught up
                            lag = {}
                        if lag and sum(lag.values()) == 0 and runner.state == "RUNNING":
                            caught_up_since = caught_up_since or time.monotonic()
                            done = done or time.monotonic() - caught_up_since >= config.settle_s
                        else:
                            caught_up_since = None
                    if not (due or done):
                        continue
                    status = runner.status(broker_ok=probe.error is None)
                    meta = _status_metadata(status)
                    for topic in outputs:
                        context.log_event(
                            AssetObservation(asset_key=kafka_key(topic), metadata=meta)
                        )
                    if status["records_sent"] > last_sent and probe.error is None:
                        last_sent = status["records_sent"]
                        for topic in outputs:
                            offsets = end_offsets(topic)
                            extra = {} if offsets is None else {"end_offsets": offsets}
                            context.log_event(
                                AssetMaterialization(
                                    asset_key=kafka_key(topic), metadata={**meta, **extra}
                                )
                            )
                    context.log.info(
                        "%s: %s, %.1f records/s, lag %s, closed windows %s",
                        app.name,
                        runner.health.summary(),
                        status["records_per_second"],
                        status["consumer_lag_max"],
                        status.get("closed_windows", "-"),
                    )
                    if done:
                        break
            finally:
                closed = runner.close()
                probe.close()
                context.log.info("%s closed %s", app.name, "cleanly" if closed else "(timed out)")
        meta = _status_metadata({**status, **runner.health.as_dict(), "state": runner.state})
        for topic in outputs:
            offsets = end_offsets(topic)
            yield MaterializeResult(
                asset_key=kafka_key(topic),
                metadata={**meta, **({} if offsets is None else {"end_offsets": offsets})},
            )
        # the application's health when the run ended (before closing it)
        yield AssetCheckResult(
            asset_key=health_asset_key(app),
            check_name=HEALTH_CHECK,
            passed=last_health == "RUNNING",
            severity=AssetCheckSeverity.WARN,
            metadata=meta,
            description=f"at the end of the run: {last_health}",
        )

    return _stream


STREAM_ASSETS = [build_stream_asset(app) for app in STREAM_APPS.values()]


# -- kappa replay ---------------------------------------------------------------------------


class KappaReplayConfig(Config):
    """Which application to replay, how long it may take, and the drift that fails the check."""

    app: str = "windowed-revenue"
    timeout_s: float = Field(
        default=600.0,
        description="fail (saying how far the replay got) if it has not reached the input "
        "end offsets captured at its start after this many seconds",
    )
    progress_interval_s: float = Field(
        default=5.0, description="seconds between progress lines (records done / total, rate)"
    )
    min_agreement: float = Field(
        default=1.0,
        description="the share of results both sides have that must agree, or differ only "
        "by what the live or the replayed application reported dropping as late",
    )


@asset(
    key=AssetKey(["streams", "kappa_replay"]),
    group_name=STREAMS_GROUP,
    kinds={"kafka", "python"},
    deps=[kafka_key(domain.ORDERS), kafka_key(domain.CUSTOMERS), kafka_key(domain.CLICKS)],
    check_specs=[
        AssetCheckSpec(
            "replay_agrees",
            asset=AssetKey(["streams", "kappa_replay"]),
            description="Replayed results equal the live ones for identities both have, or "
            "differ only by the records one side reported dropping as late",
        )
    ],
    description="Kappa: reprocess a stream application from the earliest offsets under a new "
    "application id and compare its results with the live application's. Built by hand, "
    "when you want the comparison (a replay reads every topic from its start): Jobs -> "
    "kappa_replay_job -> Launchpad, with `app` one of the stream applications.",
)
def kappa_replay(
    context: AssetExecutionContext,
    config: KappaReplayConfig,
    kafka: KafkaResource,
    stream_apps: StreamAppsResource,
):
    app = STREAM_APPS[config.app]
    suffix = f"replay-{context.run.run_id[:8]}-{uuid.uuid4().hex[:4]}"
    base = stream_apps.app_config(kafka.raw_format)
    runner = stream_apps.runner(
        app.name,
        kafka.connection,
        instance=f"replay-{context.run.run_id[:8]}",
        application_id=f"{app.name}-{suffix}",
        config=kappa.replay_config(app, base, suffix),
        # a replay reads a backlog and stops once caught up: emit closed windows at every
        # record, not once a wall-clock second (the tail would never be emitted)
        extra={EMIT_INTERVAL_MS_KSTREAMS_WINDOWED_AGGREGATION: 0},
    )
    try:
        replay = kappa.replay_to_end_offsets(
            runner,
            kafka.connection,
            timeout_s=config.timeout_s,
            progress_interval_s=config.progress_interval_s,
            log=context.log.info,
        )
    except kappa.ReplayError as exc:
        progress = exc.progress
        raise Failure(
            description=str(exc),
            metadata={
                "app": app.name,
                "replay_application_id": runner.application_id,
                "records_done": progress.done if progress else 0,
                "records_total": progress.total if progress else 0,
                "phase": progress.phase if progress else "starting",
            },
        ) from exc
    live_topic = app.output_topics(base)[0]
    replay_topic = app.output_topics(runner.config)[0]
    result = kappa.compare(
        app.name,
        kappa.read_all(kafka.connection, live_topic),
        kappa.read_all(kafka.connection, replay_topic),
    )
    worst = "\n".join(f"| {ident} | {live} | {rep} |" for ident, live, rep in result.different[:20])
    table = "| identity | live | replay |\n|---|---|---|\n" + worst if worst else "no differences"
    meta: dict[str, Any] = {
        "app": app.name,
        "replay_application_id": runner.application_id,
        "replay_topic": replay_topic,
        "replay_seconds": round(replay.seconds, 1),
        # the range replayed: every input partition up to its end offset at the start
        "input_records": replay.input_records,
        "input_end_offsets": MetadataValue.json(replay.end_offsets()),
        "replay_records_per_second": round(replay.rate, 1),
        "replay_closed_cleanly": replay.closed_cleanly,
        "live_results": result.live,
        "replayed_results": result.replayed,
        "compared": result.compared,
        "equal": result.equal,
        "different": len(result.different),
        "only_live": result.only_live,
        "only_replayed": result.only_replayed,
        "agreement": result.agreement,
        "differences": MetadataValue.md(table),
    }
    live_late = kappa.late_rows(kafka.connection, app, base)
    replay_late = kappa.late_rows(kafka.connection, app, runner.config)
    if live_late is not None and replay_late is not None:
        kappa.explain(app.name, result, live_late, replay_late)
        meta["live_late_records"] = len(live_late)
        meta["replay_late_records"] = len(replay_late)
    meta["unexplained"] = len(result.unexplained)
    explained_agreement = (
        1.0 - len(result.unexplained) / result.compared if result.compared else 1.0
    )
    meta["explained_agreement"] = explained_agreement
    yield MaterializeResult(metadata=meta)
    yield AssetCheckResult(
        check_name="replay_agrees",
        passed=explained_agreement >= config.min_agreement,
        severity=AssetCheckSeverity.ERROR,
        metadata={
            k: meta[k] for k in ("compared", "equal", "different", "unexplained", "agreement")
        },
    )


kappa_replay_job = define_asset_job(
    "kappa_replay_job",
    selection=[kappa_replay],
    description="Reprocess a stream application from earliest under a new application id "
    "and compare (config: ops.streams__kappa_replay.config.app)",
)
