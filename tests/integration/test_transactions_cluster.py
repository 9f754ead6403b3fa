"""Transactions on three brokers over a three-member etcd (cluster_harness.py),
with a real client (confluent-kafka-python from Debian, librdkafka 2.0.2).

The controller creates __transaction_state (replicated); a producer's
coordinator is the leader of its transactional id's partition there, and
the leaders of the partitions it writes are mostly other brokers, which
verify each partition's first batch with that coordinator over the network
(AddPartitionsToTxn v5, verify_only: KIP-890) before they append it.

Checked, whatever the timing:
- committed transactions over 16 partitions are read whole by a
  read_committed consumer, aborted ones never (a read_uncommitted one reads
  both);
- the coordinator is killed (SIGKILL) between transactions and while one is
  open: the producer carries on through the new coordinator, and every
  transaction is all-or-nothing to a read_committed reader: each one the
  client saw committed is there whole, each one it aborted is absent, and
  one whose outcome the client could not learn is either whole or absent;
- a zombie (an older producer with the same transactional id) is fenced.

The test starts its own cluster and removes it (processes by pid,
directories).
"""

import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from cluster_harness import Cluster
from group_wire import find_coordinator
import txn_helpers

SESSION_TIMEOUT_MS = 4000
PARTITIONS = 16
DEADLINE_S = 90  # any one step on a busy two-core machine: a failover, a restart


@pytest.fixture
def cluster():
    with Cluster(brokers=3, etcd=3, session_timeout_ms=SESSION_TIMEOUT_MS,
                 extra_settings={"replica.lag.time.max.ms": "3000", "replica.fetch.wait.max.ms": "200",
                                 "replica.fetch.backoff.ms": "200", "group.initial.rebalance.delay.ms": "0"}) as c:
        def txn_state_led():
            t = c.metadata_from(c.live_ids()[0]).topics.get("__transaction_state")
            return t if t and t.partitions and all(p.leader > 0 for p in t.partitions.values()) else None
        c.wait_for(txn_state_led, DEADLINE_S, "__transaction_state created and led")
        yield c


def create(bootstrap, topic, partitions=PARTITIONS):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=3)])[topic].result(60)


def txn_producer(bootstrap, tid):
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 5,
                  "transaction.timeout.ms": 60000, "message.timeout.ms": 60000})
    p.init_transactions(DEADLINE_S)
    return p


def read_all(bootstrap, topic, isolation, expect_at_least=0):
    return txn_helpers.read_all(bootstrap, topic, isolation, expect_at_least, timeout=DEADLINE_S, quiet_s=5)


def coordinator_of(cluster, tid):
    def ask():
        for n in cluster.live_ids():
            try:
                err, node = find_coordinator(cluster.broker(n).port, tid, key_type=1)
            except OSError:
                continue
            if err == 0 and node in cluster.live_ids():
                return node
        return None
    return cluster.wait_for(ask, DEADLINE_S, f"a live coordinator for {tid}")


def run_transaction(p, topic, name, records, commit):
    """One transaction of `records` values over every partition. Returns
    "committed", "aborted" or "unknown" (the client could not learn the
    outcome of its commit)."""
    p.begin_transaction()
    for i in range(records):
        p.produce(topic, value=f"{name}-{i}", partition=i % PARTITIONS)
    if not commit:
        p.flush(DEADLINE_S)  # the records are in the logs before the abort
        p.abort_transaction(DEADLINE_S)
        return "aborted"
    return txn_helpers.commit_or_abort(p, DEADLINE_S)


def test_transactions_through_the_cluster_and_coordinator_failover(cluster):
    topic = "txn-cluster"
    create(cluster.bootstrap, topic)
    tid = "tid-" + uuid.uuid4().hex
    p = txn_producer(cluster.bootstrap, tid)
    outcomes = {}
    records = 48  # three per partition

    # Leaders of the topic's partitions that are not the coordinator verify
    # over the network.
    coordinator = coordinator_of(cluster, tid)
    leaders = set(cluster.metadata_from(coordinator).leaders(topic).values())
    assert leaders - {coordinator}, "every partition led by the coordinator: no remote verification"

    for k in range(4):
        name = f"t{k}"
        outcomes[name] = run_transaction(p, topic, name, records, commit=(k != 1))
    assert outcomes == {"t0": "committed", "t1": "aborted", "t2": "committed", "t3": "committed"}

    # The coordinator dies between transactions.
    cluster.kill(coordinator)
    for k in range(4, 6):
        name = f"t{k}"
        outcomes[name] = run_transaction(p, topic, name, records, commit=True)
    cluster.restart(coordinator)
    cluster.wait_converged(timeout=DEADLINE_S)

    # The coordinator dies while a transaction is open (its records sent).
    coordinator = coordinator_of(cluster, tid)
    p.begin_transaction()
    for i in range(records):
        p.produce(topic, value=f"t6-{i}", partition=i % PARTITIONS)
    p.flush(DEADLINE_S)
    cluster.kill(coordinator)
    outcomes["t6"] = txn_helpers.commit_or_abort(p, DEADLINE_S)
    outcomes["t7"] = run_transaction(p, topic, "t7", records, commit=True)
    cluster.restart(coordinator)
    cluster.wait_converged(timeout=DEADLINE_S)
    assert outcomes["t7"] == "committed"

    committed = [n for n, o in outcomes.items() if o == "committed"]
    got = read_all(cluster.live_bootstrap(), topic, "read_committed", expect_at_least=records * len(committed))
    by_txn = {}
    for v in got:
        name, i = v.rsplit("-", 1)
        by_txn.setdefault(name, []).append(int(i))
    for name, o in outcomes.items():
        seen = sorted(by_txn.get(name, []))
        if o == "committed":
            assert seen == list(range(records)), (name, seen)
        elif o == "aborted":
            assert seen == [], (name, seen)
    assert set(by_txn) <= set(outcomes), by_txn.keys()

    everything = read_all(cluster.live_bootstrap(), topic, "read_uncommitted",
                          expect_at_least=records * len(outcomes))
    assert len(everything) >= records * len(outcomes)
    p.flush(10)


def test_a_zombie_is_fenced_across_brokers(cluster):
    topic = "txn-cluster-fence"
    create(cluster.bootstrap, topic)
    tid = "tid-" + uuid.uuid4().hex
    old = txn_producer(cluster.bootstrap, tid)
    old.begin_transaction()
    old.produce(topic, value="zombie", partition=0)
    old.flush(DEADLINE_S)
    new = txn_producer(cluster.live_bootstrap(), tid)  # fences the old one, aborts its transaction
    new.begin_transaction()
    for i in range(PARTITIONS):
        new.produce(topic, value=f"fresh-{i}", partition=i)
    new.commit_transaction(DEADLINE_S)
    with pytest.raises(KafkaException) as e:
        old.produce(topic, value="late", partition=1)
        old.commit_transaction(DEADLINE_S)
    err = e.value.args[0]
    assert err.fatal() or err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                         KafkaError.INVALID_PRODUCER_EPOCH), err
    got = read_all(cluster.live_bootstrap(), topic, "read_committed", expect_at_least=PARTITIONS)
    assert sorted(got) == sorted(f"fresh-{i}" for i in range(PARTITIONS))


def test_read_process_write_with_the_group_and_transaction_coordinators_apart(cluster):
    """The brief's pipeline on the cluster, with the group's coordinator and
    the producer's transaction coordinator on different brokers: the group
    coordinator verifies the offsets' partition with the transaction
    coordinator over the network before it writes them (KIP-890). A
    committed transaction moves the group's offset with its output; an
    aborted one moves neither."""
    from confluent_kafka import TopicPartition
    bs = cluster.bootstrap
    create(bs, "rpw-in", partitions=1)
    create(bs, "rpw-out", partitions=4)
    plain = Producer({"bootstrap.servers": bs})
    for i in range(15):
        plain.produce("rpw-in", value=f"in{i}")
    plain.flush(DEADLINE_S)

    tid = "rpw-" + uuid.uuid4().hex
    txn_coordinator = coordinator_of(cluster, tid)
    group = None
    for k in range(200):
        candidate = f"rpw-group-{k}"
        err, node = find_coordinator(cluster.broker(txn_coordinator).port, candidate)
        if err == 0 and node != txn_coordinator:
            group = candidate
            break
    assert group, "no group found whose coordinator is another broker"

    c = Consumer({"bootstrap.servers": bs, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "isolation.level": "read_committed"})
    c.subscribe(["rpw-in"])
    p = txn_producer(bs, tid)

    def process(n, commit):
        got = 0
        p.begin_transaction()
        deadline = time.time() + DEADLINE_S
        while got < n and time.time() < deadline:
            m = c.poll(0.5)
            if m is None or m.error():
                continue
            p.produce("rpw-out", value="out-" + m.value().decode(), partition=got % 4)
            got += 1
        assert got == n
        p.send_offsets_to_transaction(c.position(c.assignment()), c.consumer_group_metadata(), DEADLINE_S)
        if commit:
            p.commit_transaction(DEADLINE_S)
        else:
            p.abort_transaction(DEADLINE_S)

    process(10, commit=True)
    assert c.committed([TopicPartition("rpw-in", 0)], DEADLINE_S)[0].offset == 10
    process(5, commit=False)
    assert c.committed([TopicPartition("rpw-in", 0)], DEADLINE_S)[0].offset == 10, \
        "an aborted transaction's offsets are not committed"
    c.close()
    out = read_all(cluster.live_bootstrap(), "rpw-out", "read_committed", expect_at_least=10)
    assert sorted(out) == sorted(f"out-in{i}" for i in range(10))
