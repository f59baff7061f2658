"""Run a local Kafka cluster until Ctrl-C: ``python -m streaming.testing.run_kafka [--nodes 3]``."""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import time
from collections.abc import Sequence

from streaming.testing.kafka_cluster import LocalKafkaCluster


def main(argv: Sequence[str] | None = None) -> None:
    """Start the cluster, print its bootstrap servers, and stop it on Ctrl-C or SIGTERM."""
    parser = argparse.ArgumentParser(description="Run a local Apache Kafka (KRaft) cluster.")
    parser.add_argument("--nodes", type=int, default=1)
    parser.add_argument("--data-dir", default=None, help="keep data here (default: temporary)")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    with LocalKafkaCluster(nodes=args.nodes, data_dir=args.data_dir) as cluster:
        print(f"bootstrap.servers={cluster.bootstrap_servers}", flush=True)
        print(
            f"started in {cluster.start_seconds:.1f}s; logs under {cluster.directory}", flush=True
        )
        with contextlib.suppress(KeyboardInterrupt):
            while all(node.is_running() for node in cluster.nodes):
                time.sleep(0.5)
            for node in cluster.nodes:
                if not node.is_running():
                    print(f"node {node.node_id} exited:\n{node.log_tail()}", file=sys.stderr)


if __name__ == "__main__":
    main()
