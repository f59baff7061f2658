"""The platform's resources per deployment (``DAGSTER_DEPLOYMENT``), the one place where
configuration enters the platform.

- ``local`` (the default): the embedded platform ``make run`` starts: its own broker
  (``KAFKA_BOOTSTRAP_SERVERS``, set by ``make run``), the lake under ``.lake/``, state
  under ``.state/``, Spark ``local[2]``.
- ``cluster``: an existing deployment, described by a YAML file (``PLATFORM_CONFIG``) whose
  sections (``kafka``, ``lake``, ``spark``, ``stream_apps``, ``reconciliation``) hold the
  fields of the resources, and by environment variables, which win over the file
  (``ENVIRONMENT``, ``SPARK_ENVIRONMENT``). Secrets are only ever read from the environment,
  at run time (Dagster ``EnvVar``s), so they never appear in the UI or the run storage: the
  SASL password (``KAFKA_SASL_PASSWORD``), the schema registry's password
  (``SCHEMA_REGISTRY_PASSWORD``) and the query servers' token (``STREAM_QUERY_TOKEN``).
- both: the raw topics' value format (``kafka.value_format``, ``PLATFORM_VALUE_FORMAT``:
  ``json``, the default, or ``avro``) and the schema registry of the Avro schemas
  (``kafka.schema_registry_url``, ``SCHEMA_REGISTRY_URL``, which ``make run`` sets to the
  local registry it starts; basic auth user and TLS CA beside it).

Assets, checks and sensors receive these resources; nothing below them reads the
environment for configuration.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml
from dagster import EnvVar
from dagster_dbt import DbtCliResource

from resources.kafka import KafkaResource
from resources.lake import LakeResource
from resources.reconciliation import ReconciliationPolicy
from resources.spark import LOCAL_MASTER, kafka_spark_resource, spark_resource
from resources.stream_apps import StreamAppsResource

DEPLOYMENT_VAR = "DAGSTER_DEPLOYMENT"
CONFIG_VAR = "PLATFORM_CONFIG"
PASSWORD_VAR = "KAFKA_SASL_PASSWORD"
#: the schema registry's basic auth password (a secret: read at run time)
REGISTRY_PASSWORD_VAR = "SCHEMA_REGISTRY_PASSWORD"
#: the interactive-query servers' bearer token (a secret: read at run time)
QUERY_TOKEN_VAR = "STREAM_QUERY_TOKEN"
DEFAULT_PARTITIONS_START = "2025-01-01-00:00"

#: environment variable -> (section, field) of the deployment's settings
ENVIRONMENT = {
    "KAFKA_BOOTSTRAP_SERVERS": ("kafka", "bootstrap_servers"),
    "KAFKA_SECURITY_PROTOCOL": ("kafka", "security_protocol"),
    "KAFKA_SASL_MECHANISM": ("kafka", "sasl_mechanism"),
    "KAFKA_SASL_USERNAME": ("kafka", "sasl_username"),
    "KAFKA_SSL_CA_LOCATION": ("kafka", "ssl_ca_location"),
    "PLATFORM_VALUE_FORMAT": ("kafka", "value_format"),
    "SCHEMA_REGISTRY_URL": ("kafka", "schema_registry_url"),
    "SCHEMA_REGISTRY_USERNAME": ("kafka", "schema_registry_username"),
    "SCHEMA_REGISTRY_SSL_CA_LOCATION": ("kafka", "schema_registry_ssl_ca_location"),
    "LAKE_ROOT": ("lake", "root"),
    "DUCKDB_PATH": ("lake", "duckdb_path"),
    "SPARK_MASTER_URL": ("spark", "master"),
    "STREAM_STATE_DIR": ("stream_apps", "state_root"),
    "STREAM_PROCESSING_GUARANTEE": ("stream_apps", "processing_guarantee"),
    "STREAM_ADVERTISED_HOST": ("stream_apps", "advertised_host"),
    "STREAM_QUERY_URL_TEMPLATE": ("stream_apps", "query_url_template"),
}
#: environment variable -> the Spark setting it sets (``spark.settings``)
SPARK_ENVIRONMENT = {"SPARK_DRIVER_HOST": "spark.driver.host"}
SECTIONS = ("kafka", "lake", "spark", "stream_apps", "reconciliation")
#: what a cluster deployment must name (there is no embedded default to fall back on)
CLUSTER_REQUIRED = (("kafka", "bootstrap_servers"), ("lake", "root"))


def deployment_name(env: Mapping[str, str] | None = None) -> str:
    """``$DAGSTER_DEPLOYMENT``, ``local`` when unset."""
    env = os.environ if env is None else env
    name = env.get(DEPLOYMENT_VAR) or "local"
    if name not in resources_by_deployment_name:
        raise ValueError(
            f"{DEPLOYMENT_VAR}={name!r} is not a deployment of this platform; use one of "
            f"{', '.join(resources_by_deployment_name)}"
        )
    return name


def partitions_start(env: Mapping[str, str] | None = None) -> str:
    """First hourly partition (``PLATFORM_PARTITIONS_START``, Dagster ``YYYY-MM-DD-HH:MM``),
    read when the definitions load: partitions are part of the definitions, not of a run."""
    env = os.environ if env is None else env
    return env.get("PLATFORM_PARTITIONS_START") or DEFAULT_PARTITIONS_START


#: whether what launches runs on its own (schedules, the watermark and late-data sensors,
#: the dbt automation) starts running (``on``, the default) or stopped (``off``: ``make run
#: --no-schedules``, tests that launch every run themselves)
AUTOMATION_VAR = "PLATFORM_AUTOMATION"


def automation_on(env: Mapping[str, str] | None = None) -> bool:
    """``$PLATFORM_AUTOMATION`` (``on`` unless set to ``off``), read when the definitions
    load: the default status of the schedules and of the sensors that launch runs. One
    stopped or started in the UI keeps that state."""
    env = os.environ if env is None else env
    value = (env.get(AUTOMATION_VAR) or "on").strip().lower()
    if value not in ("on", "off"):
        raise ValueError(f"{AUTOMATION_VAR}={value!r}: use 'on' or 'off'")
    return value == "on"


def settings(env: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """The deployment's settings by section: the ``PLATFORM_CONFIG`` file, then the
    environment."""
    sections: dict[str, dict[str, Any]] = {name: {} for name in SECTIONS}
    path = env.get(CONFIG_VAR)
    if path:
        loaded = yaml.safe_load(Path(path).read_text()) or {}
        unknown = set(loaded) - set(SECTIONS)
        if unknown:
            raise ValueError(
                f"{path}: unknown sections {sorted(unknown)}; known: {', '.join(SECTIONS)}"
            )
        for name, values in loaded.items():
            sections[name].update(values or {})
    for var, (section, field) in ENVIRONMENT.items():
        if env.get(var):
            sections[section][field] = env[var]
    for var, setting in SPARK_ENVIRONMENT.items():
        if env.get(var):
            sections["spark"].setdefault("settings", {})[setting] = env[var]
    return sections


def _resources(conf: Mapping[str, dict[str, Any]], env: Mapping[str, str]) -> dict[str, Any]:
    kafka = dict(conf["kafka"])
    if "sasl_password" in kafka:
        raise ValueError(
            f"the SASL password is read from ${PASSWORD_VAR} only, never from a file: remove "
            "kafka.sasl_password from the configuration"
        )
    if str(kafka.get("security_protocol", "")).upper().startswith("SASL_"):
        kafka["sasl_password"] = EnvVar(PASSWORD_VAR)
    if "schema_registry_password" in kafka:
        raise ValueError(
            f"the schema registry password is read from ${REGISTRY_PASSWORD_VAR} only, never "
            "from a file: remove kafka.schema_registry_password from the configuration"
        )
    if kafka.get("schema_registry_username"):
        kafka["schema_registry_password"] = EnvVar(REGISTRY_PASSWORD_VAR)
    stream_apps = dict(conf["stream_apps"])
    if env.get(QUERY_TOKEN_VAR):
        stream_apps["query_token"] = EnvVar(QUERY_TOKEN_VAR)
    spark = dict(conf["spark"])
    master = spark.pop("master", LOCAL_MASTER)
    spark_settings = spark.pop("settings", {})
    if spark:
        raise ValueError(f"unknown spark settings {sorted(spark)}; use 'master' and 'settings'")
    kafka_resource = KafkaResource(**kafka)
    _ = kafka_resource.connection  # misconfigured security fails at load, not in a run
    _ = kafka_resource.raw_format  # so does the avro format without a registry
    return {
        "kafka": kafka_resource,
        "lake": LakeResource(**conf["lake"]),
        "stream_apps": StreamAppsResource(**stream_apps),
        "reconciliation": ReconciliationPolicy(**conf["reconciliation"]),
        "pyspark": spark_resource(master, spark_settings),
        "pyspark_kafka": kafka_spark_resource(master, spark_settings),
        "dbt": dbt_resource(),
    }


def local_resources(env: Mapping[str, str]) -> dict[str, Any]:
    """The embedded platform's resources."""
    return _resources(settings(env), env)


def cluster_resources(env: Mapping[str, str]) -> dict[str, Any]:
    """An existing deployment's resources; fails when it does not name its cluster."""
    conf = settings(env)
    missing = [(s, f) for s, f in CLUSTER_REQUIRED if not conf[s].get(f)]
    if missing:
        variables = {v: k for k, v in ENVIRONMENT.items()}
        raise ValueError(
            f"the cluster deployment needs {', '.join(f'{s}.{f}' for s, f in missing)}: set "
            f"{', '.join(variables[m] for m in missing)} or name them in the {CONFIG_VAR} file"
        )
    return _resources(conf, env)


def dbt_resource() -> DbtCliResource:
    """The dbt CLI of the platform's project."""
    from pipelines.dbt import DBT_PROJECT, dbt_executable

    return DbtCliResource(project_dir=DBT_PROJECT, dbt_executable=dbt_executable())


resources_by_deployment_name: dict[str, Callable[[Mapping[str, str]], dict[str, Any]]] = {
    "local": local_resources,
    "cluster": cluster_resources,
}


def platform_resources(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The resources of the deployment ``env`` names (default: this process's environment)."""
    env = os.environ if env is None else env
    return resources_by_deployment_name[deployment_name(env)](env)
