"""Command line: ``python -m streaming run module:topology_factory --config app.properties``,
``python -m streaming sql FILE.sql --config app.properties`` and
``python -m streaming sql --shell --server http://host:port``.

``topology_factory`` is a ``Topology``, a ``StreamsBuilder``, or a callable returning one
(called with the config dict when it takes an argument). ``--config`` reads a
``.properties``, ``.yaml``/``.yml`` or ``.json`` file; ``--set key=value`` overrides
settings. While running, a progress line shows the state, records processed, records/s,
consumer lag and commits (a log line every few seconds when not on a terminal).
Ctrl-C or SIGTERM closes the application cleanly (commit, checkpoint, leave the group).

``sql`` compiles the statements of a SQL file (``streaming.sql.compile``) and runs them the
same way; the tables' ``'scan.startup.mode'`` sets ``auto.offset.reset`` unless the config
sets it. With ``application.server`` set, its query server answers pull and push queries
at ``/sql``; ``--shell`` is a small client that sends statements there and prints rows.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import logging
import os
import signal
import sys
import threading
import time
from typing import Any

from streaming.errors import ConfigException
from streaming.runtime.config import load_config_file

log = logging.getLogger("streaming.cli")


def load_topology(spec: str, config: dict[str, Any]) -> Any:
    """Import ``module:attribute`` and turn it into a Topology."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not attr:
        raise SystemExit(f"expected module:topology_factory, got {spec!r}")
    module = importlib.import_module(module_name)
    target: Any = module
    for part in attr.split("."):
        target = getattr(target, part)
    if callable(target) and not hasattr(target, "nodes") and not hasattr(target, "build"):
        params = inspect.signature(target).parameters
        target = target(config) if params else target()
    if hasattr(target, "build") and not hasattr(target, "nodes"):
        target = target.build()
    if not hasattr(target, "nodes"):
        raise SystemExit(f"{spec} did not give a Topology (got {type(target).__name__})")
    return target


def parse_sets(values: list[str]) -> dict[str, str]:
    out = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise SystemExit(f"--set expects key=value, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def _progress_text(app: Any, started: float) -> str:
    m = app.metrics()
    return (
        f"{m['state']:<12} processed {m['process-total']:>10,}  "
        f"{m['process-rate']:>9,.0f} rec/s  lag {m['consumer-lag-max']:>8,}  "
        f"commits {m['commit-total']:>6,}  tasks {len(m['tasks'])}  "
        f"up {time.monotonic() - started:,.0f}s"
    )


def _load_config(args: argparse.Namespace) -> dict[str, Any]:
    config: dict[str, Any] = {}
    for path in args.config or []:
        config.update(load_config_file(path))
    config.update(parse_sets(args.set or []))
    if any(key == "debug" or key.endswith(".debug") for key in config):
        # a client's ``debug`` setting (``consumer.debug=cgrp``) asks for librdkafka's
        # debug log, which the WARNING level set in ``main`` would otherwise drop
        logging.getLogger("streaming.runtime.librdkafka").setLevel(logging.DEBUG)
    return config


def run(args: argparse.Namespace) -> int:
    config = _load_config(args)
    from streaming.runtime.config import StreamsConfig

    streams_config = StreamsConfig.from_mapping(config)  # config errors before any import
    topology = load_topology(args.topology, config)
    return _run_app(topology, streams_config, args)


#: Flink's 'scan.startup.mode' values that map onto auto.offset.reset
STARTUP_MODES = {"earliest-offset": "earliest", "latest-offset": "latest"}
_OFFSET_RESET_KEYS = ("auto.offset.reset", "consumer.auto.offset.reset")


def startup_offset_reset(catalog: Any) -> str | None:
    """``auto.offset.reset`` from the tables' ``'scan.startup.mode'`` (None when no table
    sets one). One consumer reads every source, so the tables must agree; modes with no
    offset-reset equivalent (group-offsets, timestamp, specific-offsets) are errors."""
    modes: dict[str, str] = {}
    for table in catalog.tables.values():
        mode = table.options.get("scan.startup.mode")
        if mode is None:
            continue
        if mode not in STARTUP_MODES:
            raise SystemExit(
                f"table {table.name}: 'scan.startup.mode' = '{mode}' is not supported; use "
                "'earliest-offset' or 'latest-offset' (committed offsets always win on a "
                "restart, as with group-offsets)"
            )
        modes[table.name] = STARTUP_MODES[mode]
    if len(set(modes.values())) > 1:
        listed = ", ".join(f"{t}: {m}" for t, m in sorted(modes.items()))
        raise SystemExit(
            f"the tables' 'scan.startup.mode' disagree ({listed}); one application reads all "
            "its sources with one auto.offset.reset"
        )
    return next(iter(modes.values()), None)


def run_sql(args: argparse.Namespace) -> int:
    """``sql FILE.sql``: compile the statements and run them as an application."""
    from pathlib import Path

    from streaming.runtime.config import StreamsConfig
    from streaming.sql import SqlError, compile
    from streaming.sql.results import catalog_of

    config = _load_config(args)
    StreamsConfig.from_mapping(config)  # config errors before compiling
    try:
        text = Path(args.file).read_text()
    except OSError as exc:
        raise SystemExit(f"cannot read {args.file}: {exc.strerror or exc}") from None
    try:
        topology = compile(text, config)
    except SqlError as exc:
        print(f"{args.file}: {exc}", file=sys.stderr)
        return 2
    reset = startup_offset_reset(catalog_of(topology))
    if reset is not None and not any(key in config for key in _OFFSET_RESET_KEYS):
        config["consumer.auto.offset.reset"] = reset
    return _run_app(topology, StreamsConfig.from_mapping(config), args)


def _run_app(topology: Any, streams_config: Any, args: argparse.Namespace) -> int:
    """Run ``topology`` until a signal or a fatal error; close cleanly; the exit code."""
    from streaming.app import KafkaStreams, State

    app = KafkaStreams(topology, streams_config)
    stop = _STOP
    if stop.is_set():
        return 0
    if args.create_topics:
        _create_topics(topology, streams_config)
    app.start()
    started = time.monotonic()
    try:
        _show_progress(app, stop, started, args.quiet)
    finally:
        app.close(timeout=args.close_timeout)
    if app.state is State.ERROR:
        print("application stopped with an error; see the log", file=sys.stderr)
        return 1
    return 0


def _create_topics(topology: Any, streams_config: Any) -> None:
    """``--create-topics``: the sink and dead-letter topics that do not exist yet."""
    from confluent_kafka.admin import AdminClient

    from streaming.runtime.topics import create_output_topics

    admin = AdminClient(streams_config.clients().admin(client_id="streaming-cli-admin"))
    created = create_output_topics(
        admin,
        topology,
        streams_config.dead_letter_queue_topic,
        streams_config.replication_factor,
    )
    if created:
        log.info("created topics %s", ", ".join(created))


def _show_progress(app: Any, stop: threading.Event, started: float, quiet: bool) -> None:
    from streaming.app import State

    def finished() -> bool:
        return stop.is_set() or app.state in (State.ERROR, State.PENDING_ERROR, State.NOT_RUNNING)

    if quiet:
        while not finished():
            stop.wait(0.2)
        return
    from rich.console import Console

    console = Console(stderr=True)
    if console.is_terminal:
        from rich.live import Live

        with Live(console=console, refresh_per_second=2, transient=False) as live:
            while not finished():
                live.update(_progress_text(app, started))
                stop.wait(0.5)
            live.update(_progress_text(app, started))
        return
    last = 0.0
    while not finished():
        if time.monotonic() - last >= 5:
            console.print(_progress_text(app, started), highlight=False)
            last = time.monotonic()
        stop.wait(0.2)


_STOP = threading.Event()


def _on_signal(signum: int, _frame: Any) -> None:
    log.info("received %s; closing", signal.Signals(signum).name)
    _STOP.set()


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m streaming``."""
    # first thing: Ctrl-C / SIGTERM never kill the process half-way, even while importing
    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)
    parser = argparse.ArgumentParser(prog="python -m streaming", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run_p = sub.add_parser("run", help="run a topology against Kafka until Ctrl-C / SIGTERM")
    run_p.add_argument("topology", help="module:topology_factory")
    run_p.add_argument(
        "--config", action="append", help="config file (.properties/.yaml/.json); repeatable"
    )
    run_p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a setting")
    run_p.add_argument("--quiet", action="store_true", help="no progress line")
    run_p.add_argument(
        "--create-topics",
        action="store_true",
        help="create the topics the application writes (and its dead-letter topic) that do "
        "not exist, with its largest input topic's partition count",
    )
    run_p.add_argument(
        "--close-timeout", type=float, default=60.0, help="seconds to wait for a clean close"
    )
    run_p.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    sql_p = sub.add_parser(
        "sql", help="run a SQL file as an application, or --shell: query a running one"
    )
    sql_p.add_argument("file", nargs="?", help="the .sql file of the application")
    sql_p.add_argument(
        "--config", action="append", help="config file (.properties/.yaml/.json); repeatable"
    )
    sql_p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a setting")
    sql_p.add_argument("--quiet", action="store_true", help="no progress line")
    sql_p.add_argument(
        "--create-topics",
        action="store_true",
        help="create the topics the application writes (and its dead-letter topic) that do "
        "not exist, with its largest input topic's partition count",
    )
    sql_p.add_argument(
        "--close-timeout", type=float, default=60.0, help="seconds to wait for a clean close"
    )
    sql_p.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    sql_p.add_argument("--shell", action="store_true", help="query a running app's /sql")
    sql_p.add_argument("--server", help="the app's query server (http://host:port), --shell")
    sql_p.add_argument(
        "--token",
        default=os.environ.get("STREAMING_QUERY_TOKEN"),
        help="bearer token of the query server, --shell (default: the environment "
        "variable STREAMING_QUERY_TOKEN, which keeps it out of the process list)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("streaming.runtime.librdkafka").setLevel(logging.WARNING)
    if args.command == "sql" and args.shell:
        from streaming.sql.shell import shell

        if not args.server:
            parser.error("--shell needs --server http://host:port")
        return shell(args.server, token=args.token)
    if args.command == "sql" and not args.file:
        parser.error("sql needs a FILE.sql (or --shell --server URL)")
    if args.command in ("run", "sql"):
        try:
            return run(args) if args.command == "run" else run_sql(args)
        except ConfigException as exc:
            print(f"configuration error: {_one_line(exc)}", file=sys.stderr)
            return 2
        except _startup_errors() as exc:
            print(f"error: {_one_line(exc)}", file=sys.stderr)
            return 2
    return 2


def _startup_errors() -> tuple[type[BaseException], ...]:
    """Errors of ``start()`` whose message says what to fix: shown without a traceback."""
    from streaming.runtime.assignment import TopologyValidationError
    from streaming.runtime.bootstrap_probe import ClusterUnreachableException
    from streaming.runtime.state_directory import StateDirectoryLocked
    from streaming.runtime.topics import InternalTopicError

    return (
        ClusterUnreachableException,
        StateDirectoryLocked,
        TopologyValidationError,
        InternalTopicError,
    )


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())
