"""Transactions with a real client (confluent-kafka-python from Debian, over
librdkafka 2.0.2) on a single broker: a committed transaction is read by a
read_committed consumer, an aborted one never is (a read_uncommitted one
sees both), a zombie is fenced by a newer producer with the same
transactional id, and what a transaction left open when its producer died
is aborted by the coordinator once its timeout passes."""
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from txn_helpers import read_all


def create(bootstrap, topic, partitions=2):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    fut = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])
    fut[topic].result(30)


def txn_producer(bootstrap, tid, **extra):
    conf = {"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 5}
    conf.update(extra)
    p = Producer(conf)
    p.init_transactions(30)
    return p


def test_committed_seen_aborted_never(broker):
    bs = broker.bootstrap
    create(bs, "txn-out")
    p = txn_producer(bs, "tid-" + uuid.uuid4().hex)
    p.begin_transaction()
    for i in range(20):
        p.produce("txn-out", value=f"c{i}", partition=i % 2)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(10):
        p.produce("txn-out", value=f"a{i}", partition=i % 2)
    p.flush(30)  # the aborted records are in the log before the abort
    p.abort_transaction(30)
    p.begin_transaction()
    for i in range(5):
        p.produce("txn-out", value=f"d{i}", partition=i % 2)
    p.commit_transaction(30)

    committed = read_all(bs, "txn-out", "read_committed", expect_at_least=25)
    assert sorted(committed) == sorted([f"c{i}" for i in range(20)] + [f"d{i}" for i in range(5)])
    everything = read_all(bs, "txn-out", "read_uncommitted", expect_at_least=35)
    assert sorted(everything) == sorted(
        [f"c{i}" for i in range(20)] + [f"a{i}" for i in range(10)] + [f"d{i}" for i in range(5)])


def test_a_zombie_is_fenced(broker):
    bs = broker.bootstrap
    create(bs, "txn-fence", partitions=1)
    tid = "tid-" + uuid.uuid4().hex
    old = txn_producer(bs, tid)
    old.begin_transaction()
    old.produce("txn-fence", value="zombie")
    old.flush(30)
    new = txn_producer(bs, tid)  # bumps the epoch: the old one's transaction is aborted
    new.begin_transaction()
    new.produce("txn-fence", value="fresh")
    new.commit_transaction(30)
    with pytest.raises(KafkaException) as e:
        old.produce("txn-fence", value="late")
        old.commit_transaction(30)
    err = e.value.args[0]
    assert err.fatal() or err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                         KafkaError.INVALID_PRODUCER_EPOCH), err
    assert read_all(bs, "txn-fence", "read_committed", expect_at_least=1) == ["fresh"]


def test_an_abandoned_transaction_is_aborted_at_its_timeout(broker):
    bs = broker.bootstrap
    create(bs, "txn-timeout", partitions=1)
    p = txn_producer(bs, "tid-" + uuid.uuid4().hex, **{"transaction.timeout.ms": 2000})
    p.begin_transaction()
    p.produce("txn-timeout", value="left-open")
    p.flush(30)
    # The producer goes away without ending it; a plain write after it is
    # held back from read_committed readers until the coordinator aborts.
    del p
    plain = Producer({"bootstrap.servers": bs})
    plain.produce("txn-timeout", value="after")
    plain.flush(30)
    got = read_all(bs, "txn-timeout", "read_committed", expect_at_least=1, timeout=60)
    assert got == ["after"]


def test_the_operator_sees_open_transactions(broker):
    """DescribeTransactions and ListTransactions (KIP-664) through the wire:
    an open transaction is listed as Ongoing with its partition, and is
    CompleteCommit once committed."""
    import struct
    import socket
    from sluice_harness import wait_until
    bs = broker.bootstrap
    create(bs, "txn-view", partitions=1)
    tid = "tid-" + uuid.uuid4().hex
    p = txn_producer(bs, tid)
    p.begin_transaction()
    p.produce("txn-view", value="x")
    p.flush(30)

    host, port = bs.split(":")

    def call(api_key, version, body):
        client = b"t"
        hdr = struct.pack(">hhih", api_key, version, 7, len(client)) + client + b"\x00"  # flexible header: no tags
        frame = hdr + body
        with socket.create_connection((host, int(port)), timeout=10) as s:
            s.sendall(struct.pack(">i", len(frame)) + frame)
            n = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
            return s.recv(n, socket.MSG_WAITALL)

    def compact_string(s):
        b = s.encode()
        return bytes([len(b) + 1]) + b

    def list_states():
        # ListTransactions v0: no filters (compact arrays of length 0 -> 1).
        r = call(66, 0, b"\x01\x01\x00")
        assert r[4] == 0  # response header tag buffer
        return r

    # DescribeTransactions v0 for the id: its state string is in the answer.
    d = call(65, 0, b"\x02" + compact_string(tid) + b"\x00")
    assert b"Ongoing" in d and tid.encode() in d and b"txn-view" in d
    assert tid.encode() in list_states()
    p.commit_transaction(30)
    wait_until(lambda: b"CompleteCommit" in call(65, 0, b"\x02" + compact_string(tid) + b"\x00"), 30,
               "the transaction to be CompleteCommit")


def test_read_process_write_commits_output_and_input_offsets_together(broker):
    """The brief's pipeline inside the queue: consume, produce the results
    and send the consumer's offsets in one transaction. A committed one
    moves the group's offset with its output; an aborted one moves neither."""
    from confluent_kafka import TopicPartition
    bs = broker.bootstrap
    create(bs, "rpw-in", partitions=1)
    create(bs, "rpw-out", partitions=1)
    plain = Producer({"bootstrap.servers": bs})
    for i in range(15):
        plain.produce("rpw-in", value=f"in{i}")
    plain.flush(30)

    group = "rpw-" + uuid.uuid4().hex
    c = Consumer({"bootstrap.servers": bs, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "isolation.level": "read_committed"})
    c.subscribe(["rpw-in"])
    p = txn_producer(bs, "rpw-" + uuid.uuid4().hex)

    def process(n, commit):
        got = 0
        p.begin_transaction()
        deadline = time.time() + 30
        while got < n and time.time() < deadline:
            m = c.poll(0.5)
            if m is None or m.error():
                continue
            p.produce("rpw-out", value="out-" + m.value().decode())
            got += 1
        assert got == n
        p.send_offsets_to_transaction(c.position(c.assignment()), c.consumer_group_metadata(), 30)
        if commit:
            p.commit_transaction(30)
        else:
            p.abort_transaction(30)

    process(10, commit=True)
    committed = c.committed([TopicPartition("rpw-in", 0)], 30)
    assert committed[0].offset == 10
    process(5, commit=False)
    committed = c.committed([TopicPartition("rpw-in", 0)], 30)
    assert committed[0].offset == 10, "an aborted transaction's offsets are not committed"
    c.close()
    out = read_all(bs, "rpw-out", "read_committed", expect_at_least=10)
    assert sorted(out) == sorted(f"out-in{i}" for i in range(10))


def test_metrics_follow_transactions_to_their_outcomes(broker_factory):
    """/metrics (docs/operations.md, "Transactions"): the coordinator's open
    transactions and outcomes, and the partition's LSO lag, through one
    commit, one abort and one timeout. The abort pass runs every 200 ms
    (transaction.abort.timed.out.transaction.cleanup.interval.ms)."""
    from sluice_harness import wait_until
    b = broker_factory(settings={"transaction.abort.timed.out.transaction.cleanup.interval.ms": 200})
    b.start()
    bs = b.bootstrap
    create(bs, "txn-metrics", partitions=1)
    lag_key = 'sluice_partition_lso_lag_messages{topic="txn-metrics",partition="0"}'

    def total(outcome):
        return b.metrics()[f'sluice_transactions_total{{outcome="{outcome}"}}']

    m = b.metrics()
    assert m["sluice_transactions_ongoing"] == 0
    assert m["sluice_transactions_oldest_ongoing_age_seconds"] == 0
    assert (total("commit"), total("abort"), total("timeout")) == (0, 0, 0)
    assert m[lag_key] == 0

    p = txn_producer(bs, "tid-" + uuid.uuid4().hex)
    p.begin_transaction()
    for i in range(3):
        p.produce("txn-metrics", value=f"c{i}")
    p.flush(30)  # acknowledged: below the high watermark, above the LSO
    m = b.metrics()
    assert m["sluice_transactions_ongoing"] == 1
    assert m["sluice_transactions_oldest_ongoing_age_seconds"] >= 0
    assert m[lag_key] == 3
    p.commit_transaction(30)  # answered once PrepareCommit is durable: counted
    assert (total("commit"), total("abort"), total("timeout")) == (1, 0, 0)
    wait_until(lambda: b.metrics()[lag_key] == 0, 30, "the COMMIT marker to free the LSO")

    p.begin_transaction()
    p.produce("txn-metrics", value="a0")
    p.flush(30)
    assert b.metrics()[lag_key] == 1
    p.abort_transaction(30)
    assert (total("commit"), total("abort"), total("timeout")) == (1, 1, 0)
    wait_until(lambda: b.metrics()[lag_key] == 0, 30, "the ABORT marker to free the LSO")

    # A transaction its producer never ends: the coordinator aborts it at its timeout.
    q = txn_producer(bs, "tid-" + uuid.uuid4().hex, **{"transaction.timeout.ms": 2000})
    q.begin_transaction()
    q.produce("txn-metrics", value="left-open")
    q.flush(30)
    wait_until(lambda: total("timeout") == 1, 60, "the coordinator to abort the transaction at its timeout")
    wait_until(lambda: b.metrics()[lag_key] == 0, 30, "the timeout's ABORT marker to free the LSO")
    # The partition's LSO moves when its marker is written; the coordinator
    # completes the transaction (and stops counting it) a moment after.
    wait_until(lambda: b.metrics()["sluice_transactions_ongoing"] == 0, 30, "the coordinator to complete the abort")
    m = b.metrics()
    assert (total("commit"), total("abort"), total("timeout")) == (1, 1, 1)
    assert m["sluice_transactions_ongoing"] == 0
    assert m["sluice_transactions_oldest_ongoing_age_seconds"] == 0
    assert b.stop() == 0
