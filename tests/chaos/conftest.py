"""The chaos suite: Kafka's Streams system tests (``tests/kafkatest/tests/streams/`` in
apache/kafka) ported to this engine, against real local Kafka clusters.

Families (one module each):

- ``test_streams_broker_bounce.py`` (``streams_broker_bounce_test``): 3 brokers, topics with
  3 partitions, replication 3, ``min.insync.replicas=2``; an exactly-once application with
  2 stream threads (count + sum + copy). The partition leader, the transaction
  coordinator, the group coordinator and the active KRaft controller are bounced, cleanly
  and with SIGKILL; then 2 of the 3 brokers go down together and come back.
- ``test_streams_eos.py`` (``streams_eos_test``): a simple and a complex topology (stream-table
  join, repartition, windowed count); 3 instances started and stopped in staggered order,
  and kill -9 rounds of one instance while the others run.
- ``test_streams_standby_replica.py`` (``streams_standby_replica_test``): 6 partitions, 3
  instances, ``num.standby.replicas=1``, Kafka's 11 start/stop transitions; task placement
  after each, every record on both sinks, checkpointed and restored offsets never go back.
- ``test_streams_broker_outage.py``: the single broker of ``make run`` stopped for 30 s and
  120 s (clean stop and SIGKILL); the application must resume by itself within seconds.

Every scenario feeds input continuously while faults happen, runs the application as child
processes (``chaos_app.py``: state changes, thread errors and restores go to an events
file), reads the input topic as the ground truth and the outputs ``read_committed``, prints
its figures (records in/out, duplicates, missing, exact aggregates, longest output gap,
time to recover, states of each instance) and fails with every violation plus the
application's stack traces: zero duplicates, zero missing, exact aggregates, no instance
ever in ERROR.

Running: ``make test`` runs one small variant of each family (not marked); ``make
test-chaos`` runs the ``chaos``-marked full variants with ``CHAOS_SCALE=full``. Knobs:
``CHAOS_SCALE`` (small | full), ``CHAOS_RATE``, ``CHAOS_BOUNCES``, ``CHAOS_TWO_DOWN_S``,
``CHAOS_KILL_ROUNDS``, ``CHAOS_STANDBY_TRANSITIONS``, ``CHAOS_COMPLETE_TIMEOUT_S``,
``CHAOS_RECOVER_LIMIT_S``, ``CHAOS_STANDBY_GUARANTEES`` (``exactly_once_v2``; add
``at_least_once``, Kafka's own choice), ``CHAOS_REPORT=<file>`` to append the figures to a
file and ``CHAOS_LOG_DIR=<dir>`` to keep each scenario's application logs and event files
(otherwise in the test's ``tmp_path``, which pytest recycles).

Each module starts its own cluster once (module-scoped fixtures) and restores every node
after each scenario, so the scenarios of a module share it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from streaming.testing import LocalKafkaCluster


@pytest.fixture(scope="module")
def three_brokers() -> Iterator[LocalKafkaCluster]:
    """Three combined broker+controller nodes: replication 3, ``min.insync.replicas=2``."""
    with LocalKafkaCluster(nodes=3, startup_timeout=120.0) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def one_broker() -> Iterator[LocalKafkaCluster]:
    """A single broker of its own, like ``make run``'s (the session's shared one must not
    be stopped)."""
    with LocalKafkaCluster(nodes=1) as cluster:
        yield cluster


def pytest_sessionfinish(session) -> None:
    """On an xdist worker: hand the figures of its scenarios to the controller, which
    prints them (``tests/conftest.py``)."""
    from chaos_harness import FIGURES

    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["chaos_figures"] = [fig.render(brief=True) for fig in FIGURES]


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    """Print the figures of every chaos scenario that ran (passing ones included; the
    stack traces of failing ones are in their failure reports)."""
    from chaos_harness import FIGURES

    if not FIGURES:
        return
    terminalreporter.section("chaos scenario figures")
    for fig in FIGURES:
        terminalreporter.write_line(fig.render(brief=True))
