"""A long-running streaming asset run in process against the session broker: it starts
``click-sessions``, reports throughput and lag as observations, writes sessions, and stops
cleanly at its ``max_runtime_s`` (application NOT_RUNNING, no stream thread left)."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

from dagster import materialize

from assets.keys import kafka_key
from assets.streams import STREAM_ASSETS
from pipelines import domain
from pipelines.generator import GeneratorConfig, produce
from resources.kafka import KafkaResource
from resources.stream_apps import StreamAppsResource
from streaming.dsl.processors.window_aggregate import (
    EMIT_INTERVAL_MS_KSTREAMS_WINDOWED_AGGREGATION as EMIT_INTERVAL,
)

APP = "click-sessions"
OP = "click_sessions"


def test_streaming_asset_reports_and_stops_cleanly(kafka_cluster, tmp_path: Path) -> None:
    suffix = uuid.uuid4().hex[:8]
    boot = kafka_cluster.bootstrap_servers
    raw = {t: f"{t}-sa-{suffix}" for t in domain.RAW_TOPICS}
    for topic in raw.values():
        kafka_cluster.create_topic(topic, partitions=2)
    sessions_topic = f"{domain.CLICK_SESSIONS}-sa-{suffix}"
    config = GeneratorConfig(
        seed=9,
        start_ms=int(time.time() * 1000) - 90 * domain.MINUTE_MS,
        duration_s=80 * 60,
        orders_per_second=0.3,
        customers=40,
    )
    produce(config, boot, topics=raw)
    (asset,) = [a for a in STREAM_ASSETS if a.op.name == OP]
    application_id = f"{APP}-sa-{suffix}"
    before = {t.ident for t in threading.enumerate()}

    result = materialize(
        [asset],
        resources={
            "kafka": KafkaResource(bootstrap_servers=boot),
            "stream_apps": StreamAppsResource(
                state_root=str(tmp_path / "state"),
                app_settings={"clicks_topic": raw[domain.CLICKS], "sessions_topic": sessions_topic},
                commit_interval_ms=200,
                # a backlog processed within the 1 s emit interval would hold closed
                # sessions back until more clicks arrive
                streams_config={EMIT_INTERVAL: 0},
            ),
        },
        run_config={
            "ops": {
                OP: {
                    "config": {
                        "max_runtime_s": 12,
                        "report_interval_s": 2,
                        "application_id": application_id,
                    }
                }
            }
        },
    )
    assert result.success
    key = kafka_key(domain.CLICK_SESSIONS)
    observations = [
        e.asset_observation_data.asset_observation
        for e in result.all_events
        if e.event_type_value == "ASSET_OBSERVATION"
    ]
    observations = [o for o in observations if o.asset_key == key]
    assert len(observations) >= 3  # every 2 s over 12 s
    metas = [{k: v.value for k, v in o.metadata.items()} for o in observations]
    for meta in metas:
        assert {"records_per_second", "consumer_lag_max", "records_processed"} <= set(meta)
        assert meta["application_id"] == application_id
    assert max(m["records_processed"] for m in metas) > 0
    assert max(m["records_per_second"] for m in metas) > 0
    assert metas[-1]["consumer_lag_max"] == 0  # caught up with the small input

    materializations = [
        e.materialization
        for e in result.get_asset_materialization_events()
        if e.materialization.asset_key == key
    ]
    assert len(materializations) >= 2  # sessions written while running + the final one
    final = {k: v.value for k, v in materializations[-1].metadata.items()}
    assert final["state"] == "NOT_RUNNING"
    assert final["end_offsets"] > 0  # sessions landed on this run's topic
    assert final["records_processed"] > 0

    left = [
        t.name
        for t in threading.enumerate()
        if t.ident not in before and t.is_alive() and t.name.startswith(application_id)
    ]
    assert left == []


def _wait_for(what: str, predicate, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


def test_a_terminated_streaming_run_ends_canceled_without_a_failed_step(
    kafka_cluster, tmp_path: Path, monkeypatch
) -> None:
    """A real run (code server, run launcher, run worker, multiprocess executor) of a
    streaming asset, terminated as the UI does (GraphQL ``terminateRun``): the application
    closes cleanly (offsets committed), the step succeeds with its final materialization,
    and the run ends CANCELED, with no failed step nor stack trace."""
    from dagster import DagsterEventType, DagsterRunStatus
    from dagster._core.test_utils import instance_for_test, poll_for_finished_run
    from dagster_graphql.client.client_queries import TERMINATE_RUN_JOB_MUTATION
    from dagster_graphql.test.utils import (
        define_out_of_process_context,
        execute_dagster_graphql,
        materialize_assets,
    )

    from pipelines.streams.monitor import consumer_lag

    repo = Path(__file__).resolve().parents[2]
    monkeypatch.chdir(repo)
    monkeypatch.setenv("PYTHONPATH", str(repo))
    suffix = uuid.uuid4().hex[:8]
    boot = kafka_cluster.bootstrap_servers
    clicks = f"{domain.CLICKS}-term-{suffix}"
    kafka_cluster.create_topic(clicks, partitions=2)
    produce(
        GeneratorConfig(
            seed=11,
            start_ms=int(time.time() * 1000) - 60 * domain.MINUTE_MS,
            duration_s=50 * 60,
            orders_per_second=0.3,
            customers=40,
        ),
        boot,
        topics={
            t: clicks if t == domain.CLICKS else f"{t}-term-{suffix}" for t in domain.RAW_TOPICS
        },
    )
    application_id = f"{APP}-term-{suffix}"
    run_config = {
        "resources": {
            "kafka": {"config": {"bootstrap_servers": boot}},
            "stream_apps": {
                "config": {
                    "state_root": str(tmp_path / "state"),
                    "app_settings": {
                        "clicks_topic": clicks,
                        "sessions_topic": f"{domain.CLICK_SESSIONS}-term-{suffix}",
                    },
                    "commit_interval_ms": 200,
                }
            },
        },
        "ops": {OP: {"config": {"report_interval_s": 1, "application_id": application_id}}},
    }
    location = str(Path(__file__).with_name("stream_location.py"))
    (tmp_path / "dagster").mkdir()
    with (
        instance_for_test(
            temp_dir=str(tmp_path / "dagster"),
            # launch at once (no daemon here to dequeue), with the default run launcher
            overrides={
                "run_coordinator": {
                    "module": "dagster._core.run_coordinator",
                    "class": "DefaultRunCoordinator",
                }
            },
        ) as instance,
        define_out_of_process_context(location, "defs", instance) as context,
    ):
        launched = materialize_assets(
            context, [kafka_key(domain.CLICK_SESSIONS)], run_config_data=run_config
        )
        data = launched.data["launchPipelineExecution"]
        assert data["__typename"] == "LaunchRunSuccess", data
        run_id = data["run"]["runId"]

        def processing() -> bool:
            run = instance.get_run_by_id(run_id)
            assert run.status not in (
                DagsterRunStatus.FAILURE,
                DagsterRunStatus.SUCCESS,
                DagsterRunStatus.CANCELED,
            ), run.status
            observed = instance.all_logs(run_id, of_type=DagsterEventType.ASSET_OBSERVATION)
            return any(
                e.asset_observation.metadata["records_processed"].value > 0
                and e.asset_observation.metadata["consumer_lag_max"].value == 0
                for e in observed
            )

        _wait_for("the application to process its input", processing, 240)
        terminated = execute_dagster_graphql(
            context, TERMINATE_RUN_JOB_MUTATION, variables={"runId": run_id}
        )
        assert terminated.data["terminateRun"]["__typename"] == "TerminateRunSuccess"
        run = poll_for_finished_run(instance, run_id, timeout=180)
        logs = instance.all_logs(run_id)

    assert run.status == DagsterRunStatus.CANCELED
    types = [e.dagster_event.event_type for e in logs if e.dagster_event is not None]
    assert DagsterEventType.STEP_FAILURE not in types
    assert DagsterEventType.STEP_SUCCESS in types
    assert DagsterEventType.RUN_CANCELED in types
    step_errors = [
        e.dagster_event
        for e in logs
        if e.dagster_event is not None
        and e.step_key == OP
        and getattr(e.dagster_event.event_specific_data, "error", None) is not None
    ]
    assert step_errors == []
    messages = [e.user_message for e in logs]
    assert any("run terminated (SIGINT): stopping the application cleanly" in m for m in messages)
    assert any(m == f"{APP} closed cleanly" for m in messages)
    final = [
        e.asset_materialization
        for e in logs
        if e.dagster_event is not None
        and e.dagster_event.event_type == DagsterEventType.ASSET_MATERIALIZATION
        and e.asset_materialization.asset_key == kafka_key(domain.CLICK_SESSIONS)
    ][-1]
    assert final.metadata["state"].value == "NOT_RUNNING"
    # closed cleanly: what it processed is committed
    assert sum(consumer_lag(boot, application_id, [clicks]).values()) == 0
