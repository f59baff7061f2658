"""One Nexmark query as a ``KafkaStreams`` application, run by ``python -m bench.nexmark``.

    python -m bench.nexmark.runner --query q5 --bootstrap HOST:PORT --output TOPIC
        --group APP_ID --state-dir DIR [--engine dsl|sql] [--commit-interval-ms 100]
        [--guarantee eos] [--max-auction-length-ms MS] [--set KEY=VALUE ...]

Reads the Nexmark topics the query needs, writes its results to ``--output``, with the
query's own ``QUERY_SETTINGS`` (and ``SQL_QUERY_SETTINGS`` for the SQL version; ``--set``
wins). ``--engine sql`` runs the query's SQL
version (``bench.nexmark.sql_queries``) instead of its DSL one. Prints
``READY`` right before ``KafkaStreams.start()``; SIGTERM closes it cleanly.
"""

from __future__ import annotations

import argparse
import logging

from bench.broker import serve
from bench.nexmark.generator import GeneratorConfig
from bench.nexmark.queries import QUERY_SETTINGS, SQL_QUERY_SETTINGS, QueryContext
from bench.nexmark.sql_queries import ALL_QUERIES, ENGINES, build


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--query", choices=ALL_QUERIES, required=True)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--state-dir", required=True)
    parser.add_argument("--engine", choices=ENGINES, default="dsl")
    parser.add_argument("--guarantee", choices=["eos", "alos"], default="eos")
    parser.add_argument("--commit-interval-ms", type=int, default=100)
    parser.add_argument(
        "--max-auction-length-ms",
        type=int,
        default=GeneratorConfig().max_auction_length_ms,
        help="q4's join window: the longest auction of the input",
    )
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    config = {
        "application.id": args.group,
        "bootstrap.servers": args.bootstrap,
        "processing.guarantee": "exactly_once_v2" if args.guarantee == "eos" else "at_least_once",
        "commit.interval.ms": args.commit_interval_ms,
        "state.dir": args.state_dir,
        "default.key.serde": "string",
    }
    config.update(QUERY_SETTINGS.get(args.query, {}))
    if args.engine == "sql":
        config.update(SQL_QUERY_SETTINGS.get(args.query, {}))
    config.update(item.split("=", 1) for item in args.set)
    ctx = QueryContext(args.output, args.max_auction_length_ms)
    serve(build(args.engine, args.query, ctx), config)


if __name__ == "__main__":
    main()
