"""Kafka's ``streams_broker_bounce_test``: an exactly-once application keeps running, loses
nothing and duplicates nothing while brokers are bounced under it.

Three brokers; input, copy, counts and sums topics with 3 partitions, replication 3 and
``min.insync.replicas=2`` (the cluster's config); the ``simple`` topology (copy, count and
sum per key) under ``exactly_once_v2`` with 2 stream threads, fed continuously.

- ``test_broker_type_bounce[mode]``: for each broker role (the leader of a partition of the
  input / copy / changelog topics in turn, the transaction coordinator of one of the
  application's transactional ids, the group coordinator of ``application.id``, the active
  KRaft controller) the broker holding it right now is bounced ``bounces`` times, cleanly
  (SIGTERM: controlled shutdown) or hard (SIGKILL, then restart once the cluster fenced
  it), waiting for full replication and for the application to process again in between.
  If the application dies, the death is recorded against the role; in the ``chaos``
  variants the instance is then restarted on its state directory so that the other roles
  are still exercised (the small variant, in ``make test``, ends there).
- ``test_many_brokers_bounce[mode]``: two of the three brokers go down together (produce
  stops: ISR below 2; the controller quorum is lost) and come back after ``two_down_s``.

``test_cluster_roles_match_kafka`` first checks the cluster's role finders against Kafka
itself (FindCoordinator through describe_consumer_groups, the ``__transaction_state`` log).
"""

from __future__ import annotations

import time

import pytest
from chaos_harness import (
    AppDied,
    ChaosApp,
    Fault,
    Feeder,
    Figures,
    bounce,
    create_topics,
    drop_topics,
    ensure_nodes_up,
    input_truth,
    output_timing,
    pick_keys,
    read_input,
    read_output,
    run_scenario,
    simple_complete,
    sizes,
    stop_all,
    unique,
    verify_simple,
)
from confluent_kafka import Consumer, Producer

from streaming.testing.kafka_cluster import (
    CONSUMER_OFFSETS_TOPIC,
    TRANSACTION_STATE_TOPIC,
    java_string_hash,
    kafka_abs,
)

pytestmark = pytest.mark.kafka

PARTITIONS = 3
ROLES = ("leader", "txn_coordinator", "group_coordinator", "controller")


def test_cluster_roles_match_kafka(three_brokers):
    cluster = three_brokers
    # Java's String.hashCode, including the Integer.MIN_VALUE corner Kafka's abs maps to 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert kafka_abs(-(2**31)) == 0
    topic = unique("roles")
    cluster.create_topic(topic, partitions=PARTITIONS)
    leaders = {p: cluster.partition_leader(topic, p) for p in range(PARTITIONS)}
    states = cluster.partition_state([topic])
    assert {p: states[(topic, p)].leader for p in range(PARTITIONS)} == leaders
    assert set(leaders.values()) <= {1, 2, 3}
    # transactional ids land on the partition Kafka's hash names, led by the coordinator
    txn_ids = [unique("txn") for _ in range(4)]
    for txn_id in txn_ids:
        producer = Producer(cluster.client_config(**{"transactional.id": txn_id}))
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.produce(topic, b"x")
        producer.commit_transaction(30)
    found = cluster.transactional_ids("txn-")
    for txn_id in txn_ids:
        partition = cluster.coordinator_partition(txn_id, TRANSACTION_STATE_TOPIC)
        assert found[txn_id] == partition, (txn_id, found, partition)
        assert cluster.transaction_coordinator(txn_id) == cluster.partition_leader(
            TRANSACTION_STATE_TOPIC, partition
        )
    # the group coordinator FindCoordinator names is the leader of the hashed partition
    for _ in range(3):
        group = unique("group")
        consumer = Consumer(cluster.client_config(**{"group.id": group}))
        consumer.subscribe([topic])
        consumer.poll(2)
        consumer.close()
        partition = cluster.coordinator_partition(group, CONSUMER_OFFSETS_TOPIC)
        assert cluster.group_coordinator(group) == cluster.partition_leader(
            CONSUMER_OFFSETS_TOPIC, partition
        )
    # the active controller is a running voter; killing it elects another one
    controller = cluster.active_controller()
    assert controller in cluster.running_node_ids()
    cluster.stop_node(controller, kill=True)
    try:
        assert cluster.active_controller(timeout=30) != controller
    finally:
        cluster.restart_node(controller)
        cluster.wait_fully_replicated(timeout=90)
    assert cluster.under_replicated() == []


def _bounce_params():
    out = [pytest.param("small", "hard", id="small-hard")]
    for mode in ("clean", "hard"):
        out.append(pytest.param("chaos", mode, id=mode, marks=pytest.mark.chaos))
    return out


class _Scenario:
    """The application, its topics and its feeder, shared by the bounce tests."""

    def __init__(self, cluster, tmp_path, name: str, rate: int) -> None:
        self.cluster = cluster
        self.bootstrap = cluster.bootstrap_servers
        self.topics = {k: unique(k) for k in ("input", "copy", "counts", "sums")}
        create_topics(
            cluster,
            sources=[self.topics["input"]],
            sinks=[self.topics[k] for k in ("copy", "counts", "sums")],
            partitions=PARTITIONS,
        )
        self.app_id = unique(name)
        settings = {
            "application.id": self.app_id,
            "bootstrap.servers": self.bootstrap,
            "processing.guarantee": "exactly_once_v2",
            "num.stream.threads": 2,
            "replication.factor": 3,
            **{f"app.chaos.{k}": v for k, v in self.topics.items()},
        }
        self.app = ChaosApp("app", "simple", settings, tmp_path)
        self.feeder = Feeder(self.bootstrap, self.topics["input"], pick_keys(PARTITIONS), rate=rate)

    def start(self) -> None:
        self.app.wait_running(self.app.start(), timeout=90)
        mark = self.app.mark()
        self.feeder.start()
        self.app.wait_processing(mark, timeout=60)
        time.sleep(2)  # transactions in flight on every partition

    def settle_after_fault(self, fig: Figures, what: str, *, restart: bool) -> None:
        """The application processes again. If it died: record it, and with ``restart``
        start it again on its state directory (the remaining roles are still exercised),
        else end the scenario."""
        mark = self.app.mark()
        try:
            self.app.wait_processing(mark, timeout=60)
        except AppDied as exc:
            fig.violations.append(f"after {what}: {exc}")
            if not restart:
                raise
            self.app.stop()
            self.app.wait_running(self.app.start(), timeout=90)
        except AssertionError as exc:
            fig.violations.append(f"after {what}: {exc}")

    def verify(self, fig: Figures, faults, complete_timeout: float, aborted: bool) -> None:
        """Stop the input, read everything, stop the application, check and time it."""
        self.feeder.stop()
        fig.notes.append(f"feeder: {self.feeder.summary()}")
        truth = input_truth(read_input(self.bootstrap, self.topics["input"]), fig)
        out, why = read_output(
            self.bootstrap,
            [self.topics[k] for k in ("copy", "counts", "sums")],
            complete=simple_complete(truth, self.topics),
            timeout=20 if aborted else complete_timeout,
            quiet_s=5 if aborted else 15,
        )
        fig.notes.append(f"output read until: {why}")
        self.app.stop()
        verify_simple(fig, truth, out, self.topics)
        output_timing(fig, out, self.topics["copy"], faults, self.feeder.last_wall)

    def cleanup(self, fig: Figures, faults) -> None:
        self.feeder.stop(timeout=30)
        stop_all([self.app], kill=True)
        ensure_nodes_up(self.cluster)
        drop_topics(self.cluster, self.topics.values(), [self.app_id])
        fig.add_apps([self.app])
        fig.faults.extend(f.describe() for f in faults)

    def target(self, role: str, i: int) -> tuple[int, str]:
        """The node holding ``role`` right now, and what it holds."""
        c = self.cluster
        if role == "leader":
            topic = [
                self.topics["input"],
                self.topics["copy"],
                f"{self.app_id}-counts-changelog",
            ][i % 3]
            partition = i % PARTITIONS
            return c.partition_leader(topic, partition), f"leader of {topic}-{partition}"
        if role == "txn_coordinator":
            # the ids the cluster knows (its __transaction_state log); should that read fail,
            # the ids the runtime gives its threads: <application.id>-<process id>-<thread>
            source = TRANSACTION_STATE_TOPIC
            try:
                ids = sorted(c.transactional_ids(prefix=f"{self.app_id}-", timeout=15))
            except Exception as exc:
                source = f"the runtime's naming ({exc})"
                pid = self.app.process_id()
                ids = [f"{self.app_id}-{pid}-{n}" for n in (1, 2)]
            if not ids:
                raise AssertionError(
                    f"no transactional id of {self.app_id} in {TRANSACTION_STATE_TOPIC}"
                )
            txn_id = ids[i % len(ids)]
            node = c.transaction_coordinator(txn_id)
            return node, f"transaction coordinator of {txn_id} (id from {source})"
        if role == "group_coordinator":
            return c.group_coordinator(self.app_id), f"group coordinator of {self.app_id}"
        if role == "controller":
            return c.active_controller(), "active KRaft controller"
        raise ValueError(role)


@pytest.mark.timeout(1200)
@pytest.mark.parametrize(("variant", "mode"), _bounce_params())
def test_broker_type_bounce(three_brokers, tmp_path, variant, mode):
    sz = sizes(variant)
    fig = Figures(
        f"streams_broker_bounce {mode} bounce of every broker role", sz.scale, workdir=tmp_path
    )
    sc = _Scenario(three_brokers, tmp_path, "bounce", sz.rate)
    faults: list[Fault] = []

    def steps() -> None:
        sc.start()
        for role in ROLES:
            for i in range(sz.bounces):
                node, what = sc.target(role, i)
                fault = bounce(three_brokers, [node], hard=mode == "hard", label=f"{mode} {role}")
                fault.note += f" [{what}]"
                faults.append(fault)
                sc.settle_after_fault(
                    fig,
                    f"{mode} bounce {i + 1} of the {what} (node {node})",
                    restart=variant != "small",
                )
        time.sleep(3)

    run_scenario(
        fig,
        steps,
        lambda aborted: sc.verify(fig, faults, sz.complete_timeout_s, aborted),
        lambda: sc.cleanup(fig, faults),
    )


@pytest.mark.timeout(900)
@pytest.mark.parametrize(
    "mode",
    [pytest.param(m, id=f"two-down-{m}", marks=pytest.mark.chaos) for m in ("clean", "hard")],
)
def test_many_brokers_bounce(three_brokers, tmp_path, mode):
    sz = sizes("chaos")
    fig = Figures(
        f"streams_broker_bounce {mode} stop of 2 of 3 brokers", sz.scale, workdir=tmp_path
    )
    sc = _Scenario(three_brokers, tmp_path, "two-down", sz.rate)
    faults: list[Fault] = []

    def steps() -> None:
        sc.start()
        controller = three_brokers.active_controller()
        other = next(n for n in three_brokers.running_node_ids() if n != controller)
        fault = bounce(
            three_brokers,
            [controller, other],
            hard=mode == "hard",
            label=f"{mode} stop of 2 brokers",
            down_s=sz.two_down_s,
        )
        fault.note += " [the active controller and another broker]"
        faults.append(fault)
        sc.settle_after_fault(
            fig, f"{mode} stop of brokers {controller} and {other}", restart=False
        )
        time.sleep(3)

    run_scenario(
        fig,
        steps,
        lambda aborted: sc.verify(fig, faults, sz.complete_timeout_s, aborted),
        lambda: sc.cleanup(fig, faults),
    )
