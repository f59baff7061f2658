"""A platform stream application compiled from a SQL file.

The file names the platform's default topics (so it runs as written with ``python -m
streaming sql``); ``SqlApp.build(config)`` compiles it with every table's topic renamed
after ``config`` (a table over ``orders`` reads ``config.orders_topic``). Its append
sources go through the same dead-letter gate as the DSL applications' (``common.
dead_letter_gate``): orders missing a field, or stamped too far ahead of the wall clock,
go to ``<app>-dlq``. When the raw topics are Avro (``StreamAppConfig.raw_format``), the
tables over them read the ``avro-confluent`` format from the platform's schema registry
instead of the file's ``json``. The compiled SQL catalog is registered with the topology, so the
query server answers pull and push queries (``POST /sql``) on it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from functools import cached_property
from pathlib import Path
from typing import Any

from pipelines import domain
from pipelines.streams.common import click_problem, dead_letter_gate, order_problem
from pipelines.streams.config import StreamAppConfig
from pipelines.streams.sql.lineage import SqlLineage, read_lineage
from streaming import StreamsBuilder, Topology
from streaming.sql.catalog import TableDef
from streaming.sql.compiler import Compiler
from streaming.sql.results import catalog_for, register

SQL_DIR = Path(__file__).resolve().parent

Problem = Callable[[Any, Any], "str | None"]


def topic_fields(config: StreamAppConfig | None = None) -> dict[str, str]:
    """Topic name -> the ``StreamAppConfig`` field holding it (``*_topic`` fields), for
    the topics of ``config`` (default: the default topics)."""
    config = config or StreamAppConfig()
    return {
        getattr(config, f.name): f.name
        for f in fields(StreamAppConfig)
        if f.name.endswith("_topic")
    }


class GatedStreamsBuilder(StreamsBuilder):
    """A ``StreamsBuilder`` whose streams of the ``gates`` topics come out of the platform's
    dead-letter gate (``gates``: topic -> why a record is unusable)."""

    def __init__(
        self, gates: Mapping[str, Problem], dead_letter_topic: str, max_ahead_ms: int
    ) -> None:
        super().__init__()
        self.gates = dict(gates)
        self.dead_letter_topic = dead_letter_topic
        self.max_ahead_ms = max_ahead_ms

    def stream(self, topics: Any, *args: Any, **kwargs: Any) -> Any:
        """The source stream, behind the gate when its topic has one (the compiler calls
        this for every append table it reads)."""
        stream = super().stream(topics, *args, **kwargs)
        problem = self.gates.get(topics) if isinstance(topics, str) else None
        if problem is None:
            return stream
        return dead_letter_gate(stream, problem, self.dead_letter_topic, self.max_ahead_ms)


class PlatformSqlCompiler(Compiler):
    """The SQL compiler with the platform's topic names (``topics``: the file's topic ->
    the deployed one) and dead-letter gate on the source streams; with ``late_topic``,
    the rows each time-windowed aggregation leaves out as late go there
    (``streaming.sql.late``, result = the sink table's name)."""

    def __init__(
        self,
        source: str,
        topics: Mapping[str, str],
        builder: StreamsBuilder,
        late_topic: str | None = None,
        formats: Mapping[str, Mapping[str, str]] | None = None,
    ) -> None:
        super().__init__(source, late_topic=late_topic)
        self.builder = builder
        self.topics = dict(topics)
        self.formats = dict(formats or {})

    def declare_table(self, table: TableDef) -> TableDef:
        """A declared table reads or writes the deployed topic: renamed as it enters the
        catalog, so a ``CREATE TABLE ... AS SELECT`` writes it too, and every INSERT after
        it sees the renamed catalog. A table over a topic of ``formats`` (the file's topic
        -> format options) reads it in that format (the raw topics in Avro)."""
        topic = self.topics.get(table.topic, table.topic)
        formats = self.formats.get(table.topic, {})
        if not table.topic or (topic == table.topic and not formats):
            return table
        return replace(table, topic=topic, options={**table.options, **formats, "topic": topic})


@dataclass(frozen=True)
class SqlApp:
    """A stream application compiled from ``file`` (under ``pipelines/streams/sql``)."""

    name: str
    file: Path
    #: writes the rows its time-windowed aggregations drop as late to ``<name>-late``
    reports_late: bool = False

    @cached_property
    def text(self) -> str:
        """The SQL statements as written."""
        return self.file.read_text()

    @cached_property
    def lineage(self) -> SqlLineage:
        """What the statements read and write, with the file's (default) topics."""
        return read_lineage(self.text)

    def _fields(self, topics: tuple[str, ...]) -> tuple[str, ...]:
        known = topic_fields()
        unknown = [t for t in topics if t not in known]
        if unknown:
            raise ValueError(
                f"{self.file.name}: topics {unknown} are not StreamAppConfig topics, so the "
                f"platform cannot rename them; known: {sorted(known)}"
            )
        return tuple(known[t] for t in topics)

    @property
    def input_fields(self) -> tuple[str, ...]:
        """The ``StreamAppConfig`` fields of the topics the statements read."""
        return self._fields(self.lineage.source_topics)

    @property
    def output_fields(self) -> tuple[str, ...]:
        """The ``StreamAppConfig`` fields of the topics the statements write."""
        return self._fields(self.lineage.sink_topics)

    @cached_property
    def stores(self) -> tuple[str, ...]:
        """The queryable stores (one per aggregation, named after its sink table)."""
        compiler = Compiler(self.text)
        compiler.compile_all()
        return tuple(r.store for r in compiler.results.values())

    def compiler(self, config: StreamAppConfig | Mapping[str, Any] | None = None) -> Compiler:
        """The file compiled under ``config``: topics renamed, sources gated."""
        cfg = StreamAppConfig.of(config)
        renames = {default: getattr(cfg, field) for default, field in topic_fields().items()}
        gates: dict[str, Problem] = {
            cfg.orders_topic: order_problem,
            cfg.clicks_topic: click_problem,
        }
        builder = GatedStreamsBuilder(
            gates, cfg.dead_letter_topic(self.name), cfg.max_event_time_ahead_ms
        )
        late_topic = cfg.late_topic(self.name) if self.reports_late else None
        registry = cfg.raw_format.registry
        formats = (
            {topic: registry.sql_options() for topic in domain.RAW_TOPICS}
            if cfg.raw_format.avro and registry is not None
            else {}
        )
        compiler = PlatformSqlCompiler(self.text, renames, builder, late_topic, formats)
        compiler.compile_all()
        return compiler

    def build(self, config: StreamAppConfig | Mapping[str, Any] | None = None) -> Topology:
        """The application's topology under ``config`` (the catalogue's factory)."""
        compiler = self.compiler(config)
        topology = compiler.builder.build()
        register(topology, catalog_for(compiler.tables, compiler.results))
        return topology


REVENUE_SQL = SqlApp("windowed-revenue-sql", SQL_DIR / "revenue.sql", reports_late=True)
ENRICHED_SQL = SqlApp("enriched-orders-sql", SQL_DIR / "enriched.sql")
FRAUD_SQL = SqlApp("fraud-alerts-sql", SQL_DIR / "fraud.sql")
