"""The code location loads and holds every asset, check, job, sensor and schedule."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
from dagster import AssetKey, Definitions

import definitions
from pipelines import domain
from pipelines.streams.apps import STREAM_APPS

REPO = Path(__file__).resolve().parents[2]

STREAM_TOPICS = [
    domain.REVENUE_5M,
    domain.REVENUE_HOPPING,
    domain.ENRICHED_ORDERS,
    domain.FRAUD_ALERTS,
    domain.CLICK_SESSIONS,
    domain.ORDERS_DEDUPED,
    domain.REVENUE_5M_SQL,
    domain.ENRICHED_ORDERS_SQL,
]


@pytest.fixture(scope="module")
def repo():
    defs = definitions.build_definitions()
    Definitions.validate_loadable(defs)
    return defs.get_repository_def()


def _keys(repo) -> set[AssetKey]:
    return set(repo.asset_graph.get_all_asset_keys())


def test_stream_side_is_complete(repo) -> None:
    keys = _keys(repo)
    for topic in (*domain.RAW_TOPICS, *STREAM_TOPICS):
        assert AssetKey(["kafka", topic]) in keys, topic
    assert AssetKey(["streams", "kappa_replay"]) in keys
    graph = repo.asset_graph
    # one long-running streaming asset per application, fed by its input topics
    for app in STREAM_APPS.values():
        node = graph.get(AssetKey(["kafka", app.output_topics(definitions_config())[0]]))
        parents = {k.path[-1] for k in node.parent_keys}
        assert set(app.input_topics(definitions_config())) <= parents, app.name
    jobs = {j.name for j in repo.get_all_jobs()}
    assert "kappa_replay_job" in jobs
    assert "stream_health_sensor" in {s.name for s in repo.sensor_defs}
    checks = {k.name for k in repo.asset_graph.asset_check_keys}
    assert "replay_agrees" in checks


def definitions_config():
    from pipelines.streams.config import StreamAppConfig

    return StreamAppConfig()


def test_the_local_deployment_is_the_embedded_default() -> None:
    from resources import deployment_name, platform_resources

    assert deployment_name({}) == "local"
    res = platform_resources({"KAFKA_BOOTSTRAP_SERVERS": "broker-1:9999", "STREAM_STATE_DIR": "/x"})
    assert res["kafka"].bootstrap_servers == "broker-1:9999"
    assert res["kafka"].connection.client_config() == {"bootstrap.servers": "broker-1:9999"}
    assert res["stream_apps"].state_root == "/x"
    # the batch recompute runs on dagster-pyspark's resource, configured for local[2]
    assert res["pyspark"].spark_config["spark.master"] == "local[2]"
    res = platform_resources({})
    assert res["kafka"].bootstrap_servers == "localhost:9092"
    assert res["lake"].database == str(res["lake"].path / "warehouse.duckdb")
    assert res["reconciliation"].tolerance.max_unexplained_keys == 0


def test_the_cluster_deployment_reads_its_file_and_environment(tmp_path, monkeypatch) -> None:
    from dagster import EnvVar

    from resources import platform_resources

    config = tmp_path / "platform.yaml"
    config.write_text(
        "kafka:\n  bootstrap_servers: kafka-0:9093\n  security_protocol: SASL_SSL\n"
        "  sasl_mechanism: SCRAM-SHA-512\n  sasl_username: platform\n"
        "  ssl_ca_location: /etc/kafka/ca.pem\n"
        "lake:\n  root: /data/lake\n"
        "spark:\n  master: spark://spark-master:7077\n"
        "  settings: {spark.executor.memory: 4g, spark.submit.deployMode: client}\n"
        "reconciliation:\n  max_unexplained_keys: 3\n"
    )
    env = {
        "DAGSTER_DEPLOYMENT": "cluster",
        "PLATFORM_CONFIG": str(config),
        "KAFKA_BOOTSTRAP_SERVERS": "kafka-1:9093,kafka-2:9093",  # the environment wins
        "STREAM_ADVERTISED_HOST": "revenue-0.revenue.platform.svc",
    }
    res = platform_resources(env)
    kafka = res["kafka"]
    assert kafka.bootstrap_servers == "kafka-1:9093,kafka-2:9093"
    # the password is read at run time, never stored in the definitions
    assert isinstance(kafka.sasl_password, EnvVar) and kafka.sasl_password.env_var_name == (
        "KAFKA_SASL_PASSWORD"
    )
    monkeypatch.setenv("KAFKA_SASL_PASSWORD", "s3cret")
    resolved = kafka.process_config_and_initialize()
    config_of = resolved.connection.client_config()
    assert config_of["security.protocol"] == "SASL_SSL"
    assert config_of["sasl.mechanism"] == "SCRAM-SHA-512"
    assert config_of["sasl.password"] == "s3cret"
    assert config_of["ssl.ca.location"] == "/etc/kafka/ca.pem"
    spark = resolved.connection.spark_options()
    assert "ScramLoginModule required" in spark["kafka.sasl.jaas.config"]
    assert spark["kafka.ssl.truststore.type"] == "PEM"
    assert "s3cret" not in repr(resolved.connection)
    assert res["lake"].root == "/data/lake"
    assert res["pyspark"].spark_config["spark.master"] == "spark://spark-master:7077"
    assert res["pyspark"].spark_config["spark.executor.memory"] == "4g"
    assert res["reconciliation"].tolerance.max_unexplained_keys == 3
    assert res["stream_apps"].advertised_host == "revenue-0.revenue.platform.svc"


def test_a_cluster_deployment_without_its_cluster_fails_fast() -> None:
    from resources import platform_resources

    with pytest.raises(ValueError, match=r"KAFKA_BOOTSTRAP_SERVERS.*LAKE_ROOT"):
        platform_resources({"DAGSTER_DEPLOYMENT": "cluster"})
    with pytest.raises(ValueError, match="not a deployment"):
        platform_resources({"DAGSTER_DEPLOYMENT": "staging"})
    with pytest.raises(ValueError, match="SASL mechanism"):
        platform_resources(
            {
                "DAGSTER_DEPLOYMENT": "cluster",
                "KAFKA_BOOTSTRAP_SERVERS": "k:9092",
                "LAKE_ROOT": "/lake",
                "KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
            }
        )


def test_secrets_never_come_from_the_file_nor_show_in_a_repr(tmp_path) -> None:
    from dagster import EnvVar

    from resources import platform_resources

    config = tmp_path / "platform.yaml"
    config.write_text("kafka:\n  bootstrap_servers: k:9093\n  sasl_password: in-a-file\n")
    env = {"DAGSTER_DEPLOYMENT": "cluster", "PLATFORM_CONFIG": str(config), "LAKE_ROOT": "/l"}
    with pytest.raises(ValueError, match="never from a file"):
        platform_resources(env)
    res = platform_resources(
        {
            **env,
            "PLATFORM_CONFIG": "",
            "KAFKA_BOOTSTRAP_SERVERS": "k:9093",
            "STREAM_QUERY_TOKEN": "t0ken",
        }
    )
    assert isinstance(res["stream_apps"].query_token, EnvVar)
    from resources.kafka import KafkaResource

    kafka = KafkaResource(
        bootstrap_servers="k:9093",
        security_protocol="SASL_SSL",
        sasl_mechanism="PLAIN",
        sasl_username="u",
        sasl_password="topsecret",
    )
    assert "topsecret" not in repr(kafka) and "topsecret" not in repr(kafka.connection)


def test_the_supervisor_says_what_is_missing_in_a_half_set_environment() -> None:
    env = {**os.environ, "KAFKA_SECURITY_PROTOCOL": "SASL_SSL", "PYTHONPATH": str(REPO)}
    for name in ("KAFKA_SASL_MECHANISM", "KAFKA_SASL_USERNAME", "KAFKA_SASL_PASSWORD"):
        env.pop(name, None)
    done = subprocess.run(
        [sys.executable, "-m", "pipelines.streams.supervisor", "--apps", "orders-dedup"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert "SASL_SSL needs a SASL mechanism" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_definitions_load_for_both_deployments(tmp_path) -> None:
    """The code location, loaded in a fresh interpreter per deployment."""
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("KAFKA_", "DAGSTER_"))},
        "PYTHONPATH": str(REPO),
    }
    probe = (
        "import definitions; d = definitions.defs; r = d.resources; "
        "print(len(list(d.assets)), r['kafka'].bootstrap_servers, r['lake'].root)"
    )
    local = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, env=env, capture_output=True, text=True
    )
    assert local.returncode == 0, local.stderr[-2000:]
    assert local.stdout.split()[1:] == ["localhost:9092", str(REPO / ".lake")]
    cluster_env = {
        **env,
        "DAGSTER_DEPLOYMENT": "cluster",
        "KAFKA_BOOTSTRAP_SERVERS": "kafka-0:9093",
        "KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
        "KAFKA_SASL_MECHANISM": "PLAIN",
        "KAFKA_SASL_USERNAME": "platform",
        "LAKE_ROOT": str(tmp_path / "lake"),
    }
    cluster = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, env=cluster_env, capture_output=True, text=True
    )
    assert cluster.returncode == 0, cluster.stderr[-2000:]
    assert cluster.stdout.split()[1:] == ["kafka-0:9093", str(tmp_path / "lake")]
    assert local.stdout.split()[0] == cluster.stdout.split()[0]  # the same assets


def test_no_asset_check_or_sensor_reads_the_environment() -> None:
    """Configuration enters through resources only: the Dagster layer never reads it."""
    offenders = []
    for folder in ("assets", "sensors"):
        for path in sorted((REPO / folder).rglob("*.py")):
            text = path.read_text()
            for needle in ("os.environ", "getenv", "os.getenv"):
                if needle in text:
                    offenders.append(f"{path.relative_to(REPO)}: {needle}")
    assert not offenders, offenders


def test_data_side_is_wired(repo) -> None:
    """Lake, batch, reconciliation, quality and dbt (``assets.data_defs``) with the hourly job,
    its schedules and the watermark / late-data sensors."""
    data = importlib.import_module("assets.data_defs")
    keys = _keys(repo)
    for a in data.ASSETS:
        for key in getattr(a, "keys", []):
            assert key in keys
    groups = {repo.asset_graph.get(k).group_name for k in keys}
    assert {"batch", "reconciliation"} <= groups
    jobs = {j.name: j for j in repo.get_all_jobs()}
    hourly = jobs["hourly_batch_reconcile"]
    assert hourly.partitions_def is not None
    assert {s.name for s in repo.schedule_defs} == {
        "hourly_batch_reconcile_schedule",
        "nightly_backfill_schedule",
    }
    assert {s.name for s in repo.sensor_defs} == {
        "stream_health_sensor",
        "stream_watermark_sensor",
        "late_data_sensor",
        "topic_materializations_sensor",
        "dbt_after_the_lake",
    }
    # lineage runs from the raw topics down to the marts
    graph = repo.asset_graph
    downstream = set()
    frontier = [AssetKey(["kafka", domain.ORDERS])]
    while frontier:
        key = frontier.pop()
        for child in graph.get(key).child_keys:
            if child not in downstream:
                downstream.add(child)
                frontier.append(child)
    groups_below = {graph.get(k).group_name for k in downstream}
    assert {"batch", "reconciliation"} <= groups_below


def test_stream_outputs_are_judged_fresh_or_stale(repo) -> None:
    graph = repo.asset_graph
    for topic in STREAM_TOPICS:
        policy = graph.get(AssetKey(["kafka", topic])).freshness_policy
        assert policy is not None and policy.fail_window.to_timedelta().total_seconds() > 0, topic
    for topic in domain.LATE_TOPICS:  # quiet when nothing is late: never stale
        assert graph.get(AssetKey(["kafka", topic])).freshness_policy is None


def test_sql_apps_lineage_is_read_from_their_statements(repo, tmp_path) -> None:
    """The SQL apps' assets: fed by the topics their SELECTs read, producing the topics they
    INSERT INTO, as the compiler's catalog says (a different file, different lineage)."""
    from pipelines.streams.apps import StreamApp
    from pipelines.streams.sql import ENRICHED_SQL, REVENUE_SQL, SqlApp

    graph = repo.asset_graph
    for sql in (REVENUE_SQL, ENRICHED_SQL):
        app = STREAM_APPS[sql.name]
        assert app.sql is sql
        for topic in sql.lineage.sink_topics:
            node = graph.get(AssetKey(["kafka", topic]))
            assert {k.path[-1] for k in node.parent_keys} == set(sql.lineage.source_topics)
            assert "sql" in node.kinds
            assert node.metadata["sql_file"].path == str(sql.file)
    assert REVENUE_SQL.lineage.source_topics == (domain.ORDERS,)
    assert REVENUE_SQL.lineage.sink_topics == (domain.REVENUE_5M_SQL,)
    assert ENRICHED_SQL.lineage.source_topics == (domain.ORDERS, domain.CUSTOMERS)
    assert ENRICHED_SQL.lineage.sink_topics == (domain.ENRICHED_ORDERS_SQL,)
    # the catalogue entry follows the statements: another file, other topics
    other = tmp_path / "clicks.sql"
    other.write_text(
        "CREATE TABLE clicks (user_id STRING, page STRING) WITH ('topic' = 'clicks');\n"
        "CREATE TABLE unused (x STRING) WITH ('topic' = 'payments');\n"
        "CREATE TABLE pages (user_id STRING, page STRING)\n"
        "  WITH ('topic' = 'click-sessions', 'key.fields' = 'user_id');\n"
        "INSERT INTO pages SELECT user_id, UPPER(page) FROM clicks;\n"
    )
    entry = StreamApp.from_sql(SqlApp("clicks-sql", other), "test")
    assert (entry.inputs, entry.outputs) == (("clicks_topic",), ("sessions_topic",))
    renamed = entry.input_topics(definitions_config().__class__(clicks_topic="clicks-v2"))
    assert renamed == ["clicks-v2"]
    assert "clicks-v2" in str(entry.factory({"clicks_topic": "clicks-v2"}).describe())


def test_sql_reconciliation_checks_are_blocking(repo) -> None:
    specs = {
        key.name: spec
        for key, spec in (
            (k, repo.asset_graph.get_check_spec(k)) for k in repo.asset_graph.asset_check_keys
        )
    }
    for name, asset in (
        ("revenue_5m_sql_stream_matches_batch", ["reconcile", "stream_vs_batch"]),
        ("revenue_5m_sql_matches_dsl", ["reconcile", "stream_vs_batch"]),
        ("revenue_5m_sql_matches_duckdb", ["reconcile", "sql_vs_duckdb"]),
    ):
        assert specs[name].blocking, name
        assert specs[name].asset_key == AssetKey(asset)
    # a warning while MATCH_RECOGNIZE drops rows its repartition made late without a report
    fraud_check = specs["fraud_alerts_sql_matches_duckdb"]
    assert not fraud_check.blocking
    assert fraud_check.asset_key == AssetKey(["reconcile", "fraud_sql_vs_duckdb"])
    duck = repo.asset_graph.get(AssetKey(["reconcile", "sql_vs_duckdb"]))
    assert {k.path[-1] for k in duck.parent_keys} >= {domain.ORDERS, domain.REVENUE_5M_SQL}
    assert duck.group_name == "reconciliation"  # so the hourly job runs it
    fraud = repo.asset_graph.get(AssetKey(["reconcile", "fraud_sql_vs_duckdb"]))
    assert {k.path[-1] for k in fraud.parent_keys} == {domain.ORDERS, domain.FRAUD_ALERTS_SQL}
    assert fraud.group_name == "reconciliation"


def test_every_reconciliation_check_says_what_it_compares(repo) -> None:
    specs = [repo.asset_graph.get_check_spec(k) for k in repo.asset_graph.asset_check_keys]
    reconciliation = [s for s in specs if s.asset_key.path[0] == "reconcile"]
    # 4 + 2 SQL against the lake batch, 4 against Kafka, 2 DuckDB (revenue, fraud SQL)
    assert len(reconciliation) == 12
    for spec in reconciliation:
        assert spec.description and len(spec.description) > 80, spec.name
    by_name = {s.name: s.description for s in reconciliation}
    assert "explained by late data" in by_name["revenue_5m_stream_matches_batch"]
    assert "batch read from Kafka" in by_name["revenue_5m_stream_matches_kafka_batch"]


def test_the_local_instance_runs_one_spark_job_at_a_time(tmp_path) -> None:
    """make run's instance queues a second Spark run (another hour, or the same hour asked
    for again by a sensor or the UI) until the first has finished, as the cluster's does."""
    from dagster import DagsterInstance

    from pipelines.run import prepare_dagster_home

    home = prepare_dagster_home(tmp_path / ".dagster")
    with DagsterInstance.from_config(str(home)) as instance:
        queue = instance.get_concurrency_config().run_queue_config
    assert queue is not None and queue.max_concurrent_runs >= 2
    spark = [
        limit["limit"]
        for limit in queue.tag_concurrency_limits
        if limit["key"] == "platform/compute" and limit.get("value") == "spark"
    ]
    assert spark == [1], queue.tag_concurrency_limits


def test_dbt_models_rebuild_with_their_tests_once_the_lake_was_landed(repo) -> None:
    """The dbt models are not left "never materialized": the automation sensor requests
    them (and their dbt tests) once the lake tables they read were landed, not before."""
    from dagster import AssetMaterialization, DagsterInstance, evaluate_automation_conditions

    defs = definitions.build_definitions()
    graph = repo.asset_graph
    models = {k for k in graph.get_all_asset_keys() if k.path[0] == "dbt"}
    sources = {p for m in models for p in graph.get(m).parent_keys if p.path[0] == "lake"}
    assert sources and models
    instance = DagsterInstance.ephemeral()
    first = evaluate_automation_conditions(defs=defs, instance=instance)
    assert first.total_requested == 0  # nothing landed yet: nothing to build on
    for key in sources:
        instance.report_runless_asset_event(AssetMaterialization(key))
    after = evaluate_automation_conditions(defs=defs, instance=instance, cursor=first.cursor)
    requested = {r.key for r in after.results if r.true_subset.size}
    assert models <= requested
    tests = {k for k in graph.asset_check_keys if k.asset_key in models}
    assert tests and tests <= requested
    again = evaluate_automation_conditions(defs=defs, instance=instance, cursor=after.cursor)
    assert again.total_requested == 0  # requested once per landing
    sensor = next(s for s in repo.sensor_defs if s.name == "dbt_after_the_lake")
    assert sensor.default_status.value == "RUNNING"


def test_schedules_and_automation_start_per_deployment_setting(monkeypatch) -> None:
    """Schedules and the sensors that launch runs are on from the start (their default
    status); ``PLATFORM_AUTOMATION=off`` (``make run --no-schedules``) starts them stopped;
    a typo fails at load."""
    from resources.deployment import automation_on

    on = definitions.build_definitions().get_repository_def()
    assert {s.default_status.value for s in on.schedule_defs} == {"RUNNING"}
    monkeypatch.setenv("PLATFORM_AUTOMATION", "off")
    off = definitions.build_definitions().get_repository_def()
    assert {s.default_status.value for s in off.schedule_defs} == {"STOPPED"}
    statuses = {s.name: s.default_status.value for s in off.sensor_defs}
    launching = ("dbt_after_the_lake", "stream_watermark_sensor", "late_data_sensor")
    assert {statuses[n] for n in launching} == {"STOPPED"}
    # observations only: they keep running
    assert statuses["stream_health_sensor"] == statuses["topic_materializations_sensor"]
    assert statuses["stream_health_sensor"] == "RUNNING"
    with pytest.raises(ValueError, match="PLATFORM_AUTOMATION='of': use 'on' or 'off'"):
        automation_on({"PLATFORM_AUTOMATION": "of"})


def test_every_asset_is_built_by_something_or_says_it_is_manual(repo) -> None:
    """Nothing stays "never materialized" without a reason: each asset is reported by the
    topic sensor (topics written outside runs), built by the hourly job (its schedule and
    sensors), rebuilt by an automation condition, or its description says it is built by
    hand and how."""
    from sensors.topic_materializations import platform_topics

    graph = repo.asset_graph
    hourly = {
        key
        for key in graph.get_all_asset_keys()
        if graph.get(key).group_name in ("lake", "batch", "reconciliation")
    }
    topics = {AssetKey(["kafka", t]) for t in platform_topics()}
    for key in graph.get_all_asset_keys():
        node = graph.get(key)
        if key in topics or key in hourly or node.automation_condition is not None:
            continue
        description = node.description or ""
        assert "Built by hand" in description and "->" in description, key


def test_asset_runs_share_one_process_but_a_streaming_run(repo) -> None:
    """A run launched from the asset graph executes in its own process (one Spark session
    for every Spark step of a backfill); a streaming asset's run keeps a process per step,
    so that Terminate stops its application cleanly and ends the run CANCELED."""
    from dagster._core.execution.api import create_execution_plan

    from assets.executor import has_streaming_step

    job = repo.get_implicit_global_asset_job_def()
    assert job.executor_def.name == "platform_executor"
    from pipelines.streams.config import StreamAppConfig

    topics = STREAM_APPS["windowed-revenue"].output_topics(StreamAppConfig())
    selections = {
        "streaming": {AssetKey(["kafka", t]) for t in topics} & _keys(repo),
        "lake": {AssetKey(["lake", domain.ORDERS]), AssetKey(["lake", domain.CLICKS])},
        "batch": {AssetKey(["batch", "revenue_5m"])},
    }
    kinds = {
        name: has_streaming_step(create_execution_plan(job.get_subset(asset_selection=keys)))
        for name, keys in selections.items()
    }
    assert kinds == {"streaming": True, "lake": False, "batch": False}
