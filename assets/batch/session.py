"""One local Spark session per process, sized for a small machine."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SPARK_JARS = REPO / ".jars" / "spark"
_LOCK = threading.Lock()
_SESSION: Any = None

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
    "spark.driver.extraJavaOptions": "-XX:+UseSerialGC -Dio.netty.tryReflectionSetAccessible=true",
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.ansi.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
}


def spark_jars(jars_dir: Path | None = None) -> list[str]:
    """The spark-sql-kafka jar set (``make setup`` copies it to ``.jars/spark``)."""
    folder = Path(jars_dir or os.environ.get("SPARK_KAFKA_JARS") or SPARK_JARS)
    return sorted(str(p) for p in folder.glob("*.jar")) if folder.is_dir() else []


def spark_config(conf: dict[str, str] | None = None) -> dict[str, str]:
    """``DEFAULT_CONF`` + ``conf``, with the spark-sql-kafka jars when they were fetched."""
    settings = {**DEFAULT_CONF, **(conf or {})}
    jars = spark_jars()
    if jars and "spark.jars" not in settings:
        settings["spark.jars"] = ",".join(jars)
    return settings


def get_spark(conf: dict[str, str] | None = None) -> Any:
    """The process's Spark session (created on first use with ``DEFAULT_CONF`` + ``conf``)."""
    global _SESSION
    with _LOCK:
        if _SESSION is not None and _SESSION.sparkContext._jsc is not None:
            return _SESSION
        from pyspark.sql import SparkSession

        builder = SparkSession.builder
        settings = spark_config(conf)
        for key, value in settings.items():
            builder = builder.config(key, value)
        _SESSION = builder.getOrCreate()
        _SESSION.sparkContext.setLogLevel("ERROR")
        return _SESSION


def stop_spark() -> None:
    """Stop the process's Spark session, if any."""
    global _SESSION
    with _LOCK:
        if _SESSION is not None:
            _SESSION.stop()
            _SESSION = None
