"""Share groups (KIP-932) on three brokers over a three-member etcd
(cluster_harness.py), with librdkafka 2.15.1's share consumer
(share_consumer.cc).

A share partition's state lives at its share coordinator: the leader of its
partition of __share_group_state, mostly another broker than the topic
partition's leader, reached over WriteShareGroupState and friends. Checked
through a leader kill (SIGKILL) and a share-coordinator kill:

- nothing acknowledged (committed with commit_sync) is delivered again;
- no delivery count goes back: a record delivered again after a failover
  carries a count above its last one;
- no record is lost: every record produced is delivered and accepted.

The test starts its own cluster and removes it (processes by pid,
directories).
"""

import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from cluster_harness import Cluster
from group_wire import find_coordinator

SESSION_TIMEOUT_MS = 4000
DEADLINE_S = 90  # any one step on a busy two-core machine: a failover, a restart
SETTINGS = {
    "replica.lag.time.max.ms": "3000", "replica.fetch.wait.max.ms": "200", "replica.fetch.backoff.ms": "200",
    "group.share.record.lock.duration.ms": "2000", "group.share.session.timeout.ms": "8000",
    "group.share.heartbeat.interval.ms": "500",
}


@pytest.fixture
def cluster():
    with Cluster(brokers=3, etcd=3, session_timeout_ms=SESSION_TIMEOUT_MS, extra_settings=SETTINGS) as c:
        def led(topic):
            t = c.metadata_from(c.live_ids()[0]).topics.get(topic)
            return t if t and t.partitions and all(p.leader > 0 for p in t.partitions.values()) else None
        c.wait_for(lambda: led("__share_group_state") and led("__consumer_offsets"), DEADLINE_S,
                   "__share_group_state and __consumer_offsets created and led")
        yield c


def create(bootstrap, topic, partitions):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=3)])[topic].result(60)


def produce(bootstrap, topic, values):
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5})
    for i, v in enumerate(values):
        p.produce(topic, value=v.encode(), partition=i % 2)
        p.poll(0)
    assert p.flush(60) == 0


def acked_records(consumer):
    """The values a consumer acknowledged durably: the records of each poll
    (printed first) followed by commit_sync lines that all succeeded."""
    acked, batch, commits = set(), [], []
    for o in consumer.lines() + [{"value": None}]:
        if "value" in o and "error" not in o:
            if commits:
                if all(c.get("code") == 0 for c in commits):
                    acked.update(batch)
                batch, commits = [], []
            if o["value"] is not None:
                batch.append(o["value"])
        elif o.get("commit") == "sync":
            commits.append(o)
    return acked


def warm_up(bootstrap, topic, consumer, deadline=DEADLINE_S, partitions=2, every=False):
    """Produces warm-N records to `partitions` partitions until the consumer
    has received one (with `every`, one from each partition: a share
    partition starts where its log ends when first fetched)."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    end = time.monotonic() + deadline
    n = 0

    def warm():
        got = {r["partition"] for r in consumer.records() if r["value"].startswith("warm-")}
        return got >= set(range(partitions)) if every else bool(got)
    while not warm():
        assert time.monotonic() < end, "not warmed up:\n" + consumer.describe()
        for part in range(partitions):
            p.produce(topic, value=f"warm-{n}".encode(), partition=part)
            n += 1
        p.flush(10)
        time.sleep(0.3)


def share_coordinator_of(cluster, group):
    def ask():
        for n in cluster.live_ids():
            try:
                err, node = find_coordinator(cluster.broker(n).port, group, key_type=0)
            except OSError:
                continue
            if err == 0 and node in cluster.live_ids():
                return node
        return None
    return cluster.wait_for(ask, DEADLINE_S, f"a live coordinator for {group}")


def check_history(consumers, values):
    """Across every consumer's output: each value delivered and accepted,
    nothing durably acknowledged delivered again, delivery counts never
    going back."""
    last_count = {}
    delivered = {}
    acked_by = {}
    for i, c in enumerate(consumers):
        for v in acked_records(c):
            acked_by.setdefault(v, i)
        for r in c.records():
            v = r["value"]
            if not v.startswith("job-"):
                continue
            delivered.setdefault(v, []).append((i, r["delivery_count"]))
    for v, ds in delivered.items():
        # Ordered per consumer (the order they printed), consumers in the
        # order they ran: a count never goes back.
        counts = [d for _, d in ds]
        assert counts == sorted(counts), f"{v}: delivery counts went back: {ds}"
        if v in acked_by:
            i = acked_by[v]
            later = [d for d in ds if d[0] > i]
            assert not later, f"{v} acknowledged by consumer {i}, delivered again to {later}"
    missing = set(values) - set(delivered)
    assert not missing, f"{len(missing)} records never delivered: {sorted(missing)[:10]}"
    again = sum(1 for ds in delivered.values() if len(ds) > 1)
    assert again > 0, "nothing was delivered again: the failover path was not exercised"
    print(f"{len(delivered)} records delivered, {again} more than once, {len(acked_by)} acknowledged durably "
          f"before the last consumer")


@pytest.mark.parametrize("victim", ["leader", "share_coordinator"])
def test_share_group_through_a_failover(cluster, share_consumer_factory, victim):
    topic, group = f"share-jobs-{victim}", f"share-workers-{victim}"
    create(cluster.live_bootstrap(), topic, 2)
    cfg = {"max.poll.records": "20"}
    # `first` commits its acknowledgements synchronously after each poll:
    # what it commits must never come back. `holder` takes a minute over
    # each record, so the batch it got is never acknowledged: its records
    # come back (when their locks run out, or after it is killed), their
    # counts going on.
    first = share_consumer_factory(cluster.live_bootstrap(), group, topic, mode="explicit", ack="accept",
                                   commit="sync", config=cfg)
    warm_up(cluster.live_bootstrap(), topic, first)
    holder = share_consumer_factory(cluster.live_bootstrap(), group, topic, mode="explicit", ack="accept",
                                    process_ms=60_000, config=cfg)
    values = [f"job-{i}" for i in range(400)]

    def jobs(*cs):
        return sum(1 for c in cs for r in c.records() if r["value"].startswith("job-"))

    # Jobs go out until both consumers hold some (`first` may take all of
    # the first ones before `holder` has joined).
    sent, end = 0, time.monotonic() + DEADLINE_S
    while not (jobs(first, holder) >= 60 and jobs(holder) > 0):
        assert time.monotonic() < end and sent < 300, "holder got no job:\n" + holder.describe()
        n = 100 if sent == 0 else 10
        produce(cluster.live_bootstrap(), topic, values[sent:sent + n])
        sent += n
        time.sleep(0.5)
    # The victim: the leader of partition 0, or the broker whose share
    # coordinator holds the most share partitions' state (the leader of
    # __share_group_state's partition for the group's keys cannot be asked
    # directly: take the leader of every partition of it instead, by
    # killing the broker leading most of them).
    md = cluster.metadata_from(cluster.live_ids()[0])
    if victim == "leader":
        node = md.leaders(topic)[0]
    else:
        counts = {}
        for p in md.topics["__share_group_state"].partitions.values():
            counts[p.leader] = counts.get(p.leader, 0) + 1
        node = max(counts, key=counts.get)
    holder.kill()  # crashes holding what it has not acknowledged
    first.kill()
    cluster.kill(node)
    produce(cluster.live_bootstrap(), topic, values[sent:])
    second = share_consumer_factory(cluster.live_bootstrap(), group, topic, mode="explicit", ack="accept",
                                    commit="sync", config=cfg)

    def all_delivered():
        got = {r["value"] for c in (first, holder, second) for r in c.records()}
        return set(values) <= got

    second.wait_until(lambda lines: all_delivered(), 3 * DEADLINE_S, "every job delivered")
    cluster.restart(node)
    time.sleep(5)  # two lock durations: nothing comes back that was accepted
    assert second.stop() == 0, second.describe()
    check_history([first, holder, second], values)


def test_the_poison_message_goes_to_the_dead_letter_topic_on_the_cluster(cluster, share_consumer_factory):
    """The brief's poison message, end to end on three brokers: a record
    that makes its consumer exit every time is delivered up to the group's
    limit, then archived and written once to the group's dead-letter topic
    (led, as the share state's coordinator may be, by another broker), and
    the group reads on past it."""
    import config_wire as cw
    from test_share_groups import read_topic
    topic, dlq, group = "cluster-orders", "dlq.cluster-orders", "cluster-order-workers"
    create(cluster.live_bootstrap(), topic, 2)
    create(cluster.live_bootstrap(), dlq, 1)
    node = cluster.live_ids()[0]
    for key, value in (("errors.deadletterqueue.topic.name", dlq), ("share.delivery.count.limit", "3")):
        assert cw.alter_group(cluster.broker(node).port, group, [(key, 0, value)]) == (0, None)
    # Every broker sees the group's configs before the consumers start.
    def configured():
        return all(cw.group_values(cluster.broker(n).port, group)["share.delivery.count.limit"][0] == "3"
                   for n in cluster.live_ids())
    cluster.wait_for(configured, DEADLINE_S, "the group's configs on every broker")
    cfg = {"max.poll.records": "1"}
    first = share_consumer_factory(cluster.live_bootstrap(), group, topic, mode="explicit", poison="POISON",
                                   config=cfg)
    warm_up(cluster.live_bootstrap(), topic, first)
    p = Producer({"bootstrap.servers": cluster.live_bootstrap(), "acks": "all", "linger.ms": 0})
    for v in ("o-0", "POISON", "o-1"):
        p.produce(topic, value=v.encode(), partition=0)
    assert p.flush(60) == 0
    crashes = [first]
    assert first.wait_exit(DEADLINE_S) == 3, first.describe()
    for _ in range(2):
        c = share_consumer_factory(cluster.live_bootstrap(), group, topic, mode="explicit", poison="POISON",
                                   config=cfg)
        crashes.append(c)
        assert c.wait_exit(DEADLINE_S) == 3, c.describe()
    assert [r["delivery_count"] for c in crashes for r in c.records() if r["value"] == "POISON"] == [1, 2, 3]
    healthy = share_consumer_factory(cluster.live_bootstrap(), group, topic, mode="explicit", poison="POISON",
                                     config=cfg)
    for i in range(5):
        p.produce(topic, value=f"after-{i}".encode(), partition=0)
    assert p.flush(60) == 0
    healthy.wait_until(lambda lines: {f"after-{i}" for i in range(5)} <= {o.get("value") for o in lines},
                       DEADLINE_S, "the records after the poison")
    dead = read_topic(cluster.live_bootstrap(), dlq, expect=1, deadline=DEADLINE_S)
    assert [d["value"] for d in dead] == [None], dead  # copy.record.enable is off: headers only
    h = dead[0]["headers"]
    assert h["__dlq.errors.topic"] == topic and h["__dlq.errors.partition"] == "0", h
    assert h["__dlq.errors.group.id"] == group and h["__dlq.errors.delivery.count"] == "3", h
    assert h["__dlq.errors.reason"] == "delivery_count_exhausted", h
    assert healthy.running() and all(r["value"] != "POISON" for r in healthy.records()), healthy.describe()
    assert healthy.stop() == 0, healthy.describe()


def test_share_group_offsets_reset_across_brokers(cluster, share_consumer_factory):
    """AlterShareGroupOffsets at the group's coordinator reaches the share
    coordinators of other brokers (the states of four partitions spread over
    the three), and the partitions' leaders, holding the old states in
    memory, deliver from the new start offsets."""
    import share_wire as sw

    topic, group = "share-replay", "share-replayers"
    create(cluster.live_bootstrap(), topic, 4)
    c = share_consumer_factory(cluster.live_bootstrap(), group, topic, mode="explicit", ack="accept",
                               commit="sync", config={"max.poll.records": "20"})
    warm_up(cluster.live_bootstrap(), topic, c, partitions=4, every=True)
    p = Producer({"bootstrap.servers": cluster.live_bootstrap(), "acks": "all", "linger.ms": 5})
    values = [f"job-{i}" for i in range(80)]
    for i, v in enumerate(values):
        p.produce(topic, value=v.encode(), partition=i % 4)
    assert p.flush(60) == 0
    c.wait_until(lambda lines: {o.get("value") for o in lines} >= set(values), DEADLINE_S, "every record")
    assert c.stop() == 0, c.describe()

    coordinator = cluster.broker(share_coordinator_of(cluster, group)).port
    # Everything was accepted: each partition's lag comes to 0.
    cluster.wait_for(lambda: (lambda r: r[0] == sw.NONE and len(r[1]) == 4 and
                              all(lag == 0 and err == sw.NONE for _s, _e, lag, err in r[1].values()))(
        sw.describe_offsets(coordinator, group)), DEADLINE_S, "lag 0 on every partition")

    def reset():
        err, msg, parts = sw.alter_offsets(coordinator, group, {(topic, q): 0 for q in range(4)})
        return (err, msg, parts) if err != sw.NON_EMPTY_GROUP else None
    err, msg, parts = cluster.wait_for(reset, DEADLINE_S, "the group empty")
    assert err == sw.NONE, (err, msg)
    assert all(e == sw.NONE for e in parts.values()), parts
    err, offs = sw.describe_offsets(coordinator, group, {topic: [0, 1, 2, 3]})
    assert err == sw.NONE
    assert all(start == 0 and e == sw.NONE for start, _ep, _lag, e in offs.values()), offs

    again = share_consumer_factory(cluster.live_bootstrap(), group, topic, mode="explicit", ack="accept",
                                   config={"max.poll.records": "20"})
    again.wait_until(lambda lines: {o.get("value") for o in lines} >= set(values), DEADLINE_S,
                     "every record again after the reset")
    assert again.stop() == 0, again.describe()
