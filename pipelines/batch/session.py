"""One local Spark session per process, sized for a small machine.

Spark's Kafka source (the spark-sql-kafka jars ``make setup`` copies to ``.jars/spark``) is
loaded only where it is used: ``get_spark()`` (the lake path) creates a session without it,
``get_spark(kafka=True)`` (the Kafka path, ``pipelines.batch.kafka_source``) with the jars on
``spark.jars``. A process has one session: whichever path comes first creates it. When
the Kafka path finds a session created without the jars, ``ensure_kafka_source`` adds them
to it (``ADD JAR``: the session's class loader, made the calling thread's context class
loader, which is where Spark looks data sources up; so every thread reading from Kafka
calls it, as ``kafka_source`` does).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SPARK_JARS = REPO / ".jars" / "spark"
_LOCK = threading.Lock()
_SESSION: Any = None
log = logging.getLogger(__name__)

DEFAULT_CONF = {
    "spark.master": "local[2]",
    "spark.app.name": "streamplatform-batch",
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "2",
    "spark.driver.memory": "1g",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.sources.partitionColumnTypeInference.enabled": "false",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # the JIT's first tier only: an hour's batch is short, and the optimizing compiler spent
    # more CPU compiling Spark's generated code than it saved (hourly revenue, hopping and
    # dedup on 40k orders, 3 times: driver JVM 31-34 CPU s -> 20-21, wall 20.5 s -> 17-18)
    "spark.driver.extraJavaOptions": (
        "-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Dio.netty.tryReflectionSetAccessible=true"
    ),
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.ansi.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
}


def spark_jars(jars_dir: Path | None = None) -> list[str]:
    """The spark-sql-kafka jar set (``make setup`` copies it to ``.jars/spark``)."""
    folder = Path(jars_dir or os.environ.get("SPARK_KAFKA_JARS") or SPARK_JARS)
    return sorted(str(p) for p in folder.glob("*.jar")) if folder.is_dir() else []


def spark_config(conf: dict[str, str] | None = None, *, kafka: bool = False) -> dict[str, str]:
    """``DEFAULT_CONF`` + ``conf``; with ``kafka`` also the spark-sql-kafka jars (when they
    were fetched) on ``spark.jars``, after any jars ``conf`` names."""
    settings = {**DEFAULT_CONF, **(conf or {})}
    jars = spark_jars() if kafka else []
    if jars:
        named = [j for j in settings.get("spark.jars", "").split(",") if j]
        settings["spark.jars"] = ",".join([*named, *(j for j in jars if j not in named)])
    return settings


def get_spark(conf: dict[str, str] | None = None, *, kafka: bool = False) -> Any:
    """The process's Spark session (created on first use with ``spark_config(conf,
    kafka=kafka)``); with ``kafka``, one that has Spark's Kafka source."""
    global _SESSION
    settings = spark_config(conf, kafka=kafka)
    with _LOCK:
        alive = _SESSION is not None and _SESSION.sparkContext._jsc is not None
        if alive and _SESSION.sparkContext.master != settings["spark.master"]:
            # asked for another cluster: getOrCreate would quietly join this one
            log.info(
                "stopping the Spark session on %s for one on %s",
                _SESSION.sparkContext.master,
                settings["spark.master"],
            )
            _stop_all()
        if _SESSION is None or _SESSION.sparkContext._jsc is None:
            from pyspark.sql import SparkSession

            if not settings["spark.master"].startswith("local"):
                # the driver tells the executors which Python to start: this one
                os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
            builder = SparkSession.builder
            for key, value in settings.items():
                builder = builder.config(key, value)
            # getOrCreate: a session created elsewhere in the process (dagster-pyspark's
            # resource) is the one session
            _SESSION = builder.getOrCreate()
            _SESSION.sparkContext.setLogLevel("ERROR")
        session = _SESSION
    return ensure_kafka_source(session) if kafka else session


def has_kafka_source(spark: Any) -> bool:
    """Whether ``spark`` finds the ``kafka`` data source from the calling thread."""
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import AnalysisException

    jvm = spark.sparkContext._jvm
    try:
        jvm.org.apache.spark.sql.execution.datasources.DataSource.lookupDataSource(
            "kafka", spark._jsparkSession.sessionState().conf()
        )
    except (AnalysisException, Py4JJavaError):
        return False
    return True


def ensure_kafka_source(spark: Any) -> Any:
    """``spark``, made to find Spark's Kafka source from the calling thread.

    A session created with ``get_spark(kafka=True)`` (or ``resources.spark.
    kafka_spark_resource``) has it already. A session created without the jars gets them
    with ``ADD JAR``, which Spark applies to the calling thread only: call this from every
    thread that reads from Kafka. Raises ``RuntimeError`` when the jars are missing.
    """
    if has_kafka_source(spark):
        return spark
    jars = spark_jars()
    if not jars:
        raise RuntimeError(
            "Spark's Kafka source is not available: its jars are missing from "
            f"{os.environ.get('SPARK_KAFKA_JARS') or SPARK_JARS} (run `make setup`, or point "
            "SPARK_KAFKA_JARS at a folder of the spark-sql-kafka-0-10 jars)"
        )
    log.info("adding Spark's Kafka source to a session created without it: %s", jars)
    for jar in jars:
        spark.sql(f"ADD JAR '{jar}'")
    if not has_kafka_source(spark):
        raise RuntimeError(
            "Spark's Kafka source could not be added to the running session; create the "
            "process's session with get_spark(kafka=True) before any other"
        )
    return spark


def stop_spark() -> None:
    """Stop the process's Spark session (and any other active one), if any."""
    with _LOCK:
        _stop_all()


def _stop_all() -> None:
    global _SESSION
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    if _SESSION is not None:
        _SESSION.stop()
        _SESSION = None
    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()
    context = SparkContext._active_spark_context
    if context is not None:
        context.stop()
