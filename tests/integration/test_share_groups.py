"""Share groups (KIP-932) on one broker, driven by a real share consumer:
librdkafka 2.15.1's (tests/integration/share_consumer.cc, built from the
source inside the npm package @confluentinc/kafka-javascript).

A share group starts reading a partition where the log ends when the group
first fetches from it (share.auto.offset.reset=latest, Kafka's default), so
each test first "warms up": it produces marker records until a consumer has
received one, and only then produces the records the test is about.
"""

import threading
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

SETTINGS = {
    # Short locks and sessions, so redeliveries come within seconds.
    "group.share.record.lock.duration.ms": "1000",
    "group.share.delivery.count.limit": "3",
    "group.share.session.timeout.ms": "6000",
    "group.share.heartbeat.interval.ms": "500",
}


def create(bootstrap, topic, partitions=1):
    a = AdminClient({"bootstrap.servers": bootstrap})
    f = a.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])
    f[topic].result(30)


def produce(bootstrap, topic, values, partition=0):
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for v in values:
        p.produce(topic, value=v.encode(), partition=partition)
        p.poll(0)
    assert p.flush(30) == 0


def warm_up(bootstrap, topic, consumers, partitions=1, deadline=60):
    """Produces 'warm-N' records until every consumer in `consumers` has
    received one (each has then fetched from the topic), and returns the
    number produced."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    end = time.monotonic() + deadline
    n = 0
    while not all(any(r["value"].startswith("warm-") for r in c.records()) for c in consumers):
        assert time.monotonic() < end, "consumers received nothing while warming up:\n" + \
            "\n".join(c.describe() for c in consumers)
        for part in range(partitions):
            p.produce(topic, value=f"warm-{n}".encode(), partition=part)
            n += 1
        p.flush(10)
        time.sleep(0.2)
    return n


def test_share_consumers_of_one_partition_get_disjoint_records(broker_factory, share_consumer_factory):
    b = broker_factory(settings=SETTINGS)
    b.start()
    create(b.bootstrap, "jobs")
    group = "workers"
    cs = [share_consumer_factory(b.bootstrap, group, "jobs", mode="explicit", ack="accept",
                                 config={"max.poll.records": "10"}) for _ in range(3)]
    warm_up(b.bootstrap, "jobs", cs[:1])
    values = [f"job-{i}" for i in range(600)]
    stop = threading.Event()

    def producer():
        # Several rounds, so every member has time to join and fetch.
        for i in range(0, len(values), 50):
            produce(b.bootstrap, "jobs", values[i:i + 50])
            time.sleep(0.1)

    t = threading.Thread(target=producer)
    t.start()
    t.join()
    # Every job is delivered (accepted) exactly once over the three.
    end = time.monotonic() + 60
    while True:
        got = [r for c in cs for r in c.records() if r["value"].startswith("job-")]
        if len({r["value"] for r in got}) == len(values) or time.monotonic() > end:
            break
        time.sleep(0.2)
    stop.set()
    seen = {}
    for i, c in enumerate(cs):
        for r in c.records():
            if not r["value"].startswith("job-"):
                continue
            assert r["value"] not in seen, f"{r['value']} delivered to consumers {seen[r['value']]} and {i}"
            seen[r["value"]] = i
            assert r["delivery_count"] == 1, r
    assert set(seen) == set(values), f"{len(values) - len(seen)} jobs never delivered"
    # The offsets are each delivered once as well.
    offsets = [r["offset"] for c in cs for r in c.records() if r["value"].startswith("job-")]
    assert len(offsets) == len(set(offsets))
    for c in cs:
        assert c.stop() == 0, c.describe()
        assert all(x.get("code", 0) == 0 for x in c.commits()), c.describe()
    assert b.stop() == 0


def test_acknowledged_records_are_not_redelivered_and_released_ones_are(broker_factory, share_consumer_factory):
    b = broker_factory(settings=SETTINGS)
    b.start()
    create(b.bootstrap, "tasks")
    group = "releasers"
    # The first consumer releases everything it gets: each record comes back.
    rel = share_consumer_factory(b.bootstrap, group, "tasks", mode="explicit", ack="release",
                                 config={"max.poll.records": "5"})
    warm_up(b.bootstrap, "tasks", [rel])
    produce(b.bootstrap, "tasks", [f"t-{i}" for i in range(20)])
    # Released records go back at once and are delivered again (to the only
    # member) until the limit (3) archives them.
    rel.wait_until(lambda lines: sum(1 for o in lines if o.get("value", "").startswith("t-")) >= 60, 60,
                   "every task delivered three times")
    counts = {}
    for r in rel.records():
        if r["value"].startswith("t-"):
            counts.setdefault(r["value"], []).append(r["delivery_count"])
    assert all(sorted(v) == [1, 2, 3] for v in counts.values()), counts
    assert len(counts) == 20
    assert rel.stop() == 0, rel.describe()
    # Archived: a new consumer of the group never sees them; it sees what
    # comes next, once.
    acc = share_consumer_factory(b.bootstrap, group, "tasks", mode="explicit", ack="accept")
    produce(b.bootstrap, "tasks", [f"after-{i}" for i in range(10)])
    acc.wait_until(lambda lines: sum(1 for o in lines if o.get("value", "").startswith("after-")) >= 10, 60,
                   "the records after the archived ones")
    time.sleep(2.5)  # two lock durations: nothing accepted comes back
    got = [r["value"] for r in acc.records()]
    assert not any(v.startswith("t-") for v in got), got
    assert sorted(v for v in got if v.startswith("after-")) == sorted(f"after-{i}" for i in range(10)), got
    assert all(r["delivery_count"] == 1 for r in acc.records() if r["value"].startswith("after-"))
    assert acc.stop() == 0, acc.describe()
    assert b.stop() == 0


def test_a_poison_record_is_archived_after_the_delivery_limit_and_the_group_reads_on(broker_factory,
                                                                                     share_consumer_factory):
    """The brief's poison message: a record that makes its consumer exit every
    time. Each crash counts one delivery; after the limit (3) the record is
    archived and the group reads past it."""
    b = broker_factory(settings=SETTINGS)
    b.start()
    create(b.bootstrap, "orders")
    group = "order-workers"
    cfg = {"max.poll.records": "1"}
    first = share_consumer_factory(b.bootstrap, group, "orders", mode="explicit", poison="POISON", config=cfg)
    warm_up(b.bootstrap, "orders", [first])
    produce(b.bootstrap, "orders", ["a-0", "a-1", "POISON", "a-2", "a-3"])
    crashes = [first]
    assert first.wait_exit(60) == 3, first.describe()
    for _ in range(2):
        c = share_consumer_factory(b.bootstrap, group, "orders", mode="explicit", poison="POISON", config=cfg)
        crashes.append(c)
        assert c.wait_exit(60) == 3, c.describe()
    poison = [r for c in crashes for r in c.records() if r["value"] == "POISON"]
    assert [r["delivery_count"] for r in poison] == [1, 2, 3], poison
    # The limit is reached: a healthy consumer gets what is left and what
    # comes next, never the poison. (Records are not ordered in a share
    # group: a crashing consumer may have taken some of the later ones
    # before it met the poison again.)
    healthy = share_consumer_factory(b.bootstrap, group, "orders", mode="explicit", poison="POISON", config=cfg)
    produce(b.bootstrap, "orders", [f"b-{i}" for i in range(5)])
    want = {"a-0", "a-1", "a-2", "a-3"} | {f"b-{i}" for i in range(5)}

    def delivered():
        return {r["value"] for c in crashes + [healthy] for r in c.records()}

    healthy.wait_until(lambda lines: want <= delivered(), 60, "every record but the poison")
    time.sleep(2.5)  # two lock durations: the poison does not come back
    assert healthy.running(), healthy.describe()
    assert all(r["value"] != "POISON" for r in healthy.records()), healthy.describe()
    assert {r["value"] for r in healthy.records()} >= {f"b-{i}" for i in range(5)}
    assert healthy.stop() == 0, healthy.describe()
    assert b.stop() == 0


def test_a_killed_consumers_records_are_redelivered_after_the_lock_and_state_survives_a_restart(
        broker_factory, share_consumer_factory):
    b = broker_factory(settings=SETTINGS)
    b.start()
    create(b.bootstrap, "events")
    group = "survivors"
    # commit_sync after each poll: the records printed before a successful
    # commit line are acknowledged durably.
    a = share_consumer_factory(b.bootstrap, group, "events", mode="explicit", ack="accept", commit="sync",
                               config={"max.poll.records": "5"})
    warm_up(b.bootstrap, "events", [a])
    produce(b.bootstrap, "events", [f"e-{i}" for i in range(30)])
    a.wait_until(lambda lines: any(o.get("value", "").startswith("e-") for o in lines), 30, "an event")
    a.kill()  # holds up to 5 records, acknowledged or not
    got_a = {r["value"] for r in a.records() if r["value"].startswith("e-")}
    acked, printed = set(), []
    for o in a.lines():
        if o.get("value", "").startswith("e-"):
            printed.append(o["value"])
        elif o.get("commit") == "sync" and o.get("code") == 0:
            acked.update(printed)
    # The broker restarts: acknowledged records stay done, delivery counts stay.
    assert b.stop() == 0
    b.start()
    c = share_consumer_factory(b.bootstrap, group, "events", mode="explicit", ack="accept")
    c.wait_until(lambda lines: len({o.get("value") for o in lines if o.get("value", "").startswith("e-")} |
                                   got_a) >= 30, 60, "every event")
    time.sleep(2.5)
    got_c = [r for r in c.records() if r["value"].startswith("e-")]
    # Each event reached c at most once; what a acknowledged never came back
    # twice (a may have held some unacknowledged: those come again, with a
    # count above 1).
    assert len(got_c) == len({r["value"] for r in got_c}), got_c
    assert not acked & {r["value"] for r in got_c}, f"acknowledged, then delivered again: {acked & {r['value'] for r in got_c}}"
    for r in got_c:
        if r["value"] in got_a:
            assert r["delivery_count"] >= 2, r
    assert {r["value"] for r in got_c} | got_a == {f"e-{i}" for i in range(30)}
    assert c.stop() == 0, c.describe()
    assert b.stop() == 0


def read_topic(bootstrap, topic, expect, deadline=30):
    """Every record of `topic` from the start, with headers, once at least
    `expect` are there (then a short quiet wait for any extra)."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{time.monotonic_ns()}",
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got, end, quiet_until = [], time.monotonic() + deadline, None
    try:
        while time.monotonic() < end:
            m = c.poll(0.2)
            if m is None:
                if len(got) >= expect and quiet_until is None:
                    quiet_until = time.monotonic() + 2
                if quiet_until is not None and time.monotonic() > quiet_until:
                    break
                continue
            if m.error():
                continue
            got.append({"value": m.value().decode() if m.value() is not None else None,
                        "headers": {k: v.decode() for k, v in (m.headers() or [])}})
    finally:
        c.close()
    return got


def test_rejected_and_poison_records_go_to_the_dead_letter_topic_once(broker_factory, share_consumer_factory):
    """KIP-1191: a group naming errors.deadletterqueue.topic.name gets one
    record there per archived record, rejected or out of deliveries, with
    headers saying where from and why (and, with copy.record.enable, the
    record itself)."""
    import config_wire as cw
    b = broker_factory(settings=SETTINGS)
    b.start()
    create(b.bootstrap, "payments")
    create(b.bootstrap, "dlq.payments")
    group = "payers"
    for key, value in (("errors.deadletterqueue.topic.name", "dlq.payments"),
                       ("errors.deadletterqueue.copy.record.enable", "true")):
        assert cw.alter_group(b.port, group, [(key, 0, value)]) == (0, None)
    cfg = {"max.poll.records": "1"}
    first = share_consumer_factory(b.bootstrap, group, "payments", mode="explicit", poison="POISON", config=cfg)
    warm_up(b.bootstrap, "payments", [first])
    produce(b.bootstrap, "payments", ["p-0", "POISON", "p-1"])
    crashes = [first]
    assert first.wait_exit(60) == 3, first.describe()
    for _ in range(2):
        c = share_consumer_factory(b.bootstrap, group, "payments", mode="explicit", poison="POISON", config=cfg)
        crashes.append(c)
        assert c.wait_exit(60) == 3, c.describe()
    # A consumer that rejects what it gets: each record it takes is archived
    # at once, delivery count 1.
    rejecter = share_consumer_factory(b.bootstrap, group, "payments", mode="explicit", ack="reject", config=cfg)
    produce(b.bootstrap, "payments", ["bad-0"])
    rejecter.wait_until(lambda lines: any(o.get("value") == "bad-0" for o in lines), 60, "the bad record")
    dead = read_topic(b.bootstrap, "dlq.payments", expect=2)
    poison = [d for d in dead if d["value"] == "POISON"]
    assert len(poison) == 1, dead
    h = poison[0]["headers"]
    assert h["__dlq.errors.topic"] == "payments" and h["__dlq.errors.partition"] == "0", h
    assert h["__dlq.errors.group.id"] == group and h["__dlq.errors.delivery.count"] == "3", h
    assert h["__dlq.errors.reason"] == "delivery_count_exhausted", h
    poison_offset = [r["offset"] for c in crashes for r in c.records() if r["value"] == "POISON"][0]
    assert h["__dlq.errors.offset"] == str(poison_offset), h
    # What the rejecter rejected (the bad record, and whatever of p-0, p-1
    # it took before the others): each once, with its reason.
    rejected = [d for d in dead if d["headers"]["__dlq.errors.reason"] == "rejected"]
    assert [d["value"] for d in rejected].count("bad-0") == 1, dead
    assert all(d["headers"]["__dlq.errors.delivery.count"] == "1" for d in rejected if d["value"] == "bad-0")
    values = [d["value"] for d in dead]
    assert len(values) == len(set(values)), f"a dead letter written twice: {values}"
    assert rejecter.stop() == 0, rejecter.describe()
    # The dead letters survive a restart without being written again.
    assert b.stop() == 0
    b.start()
    again = read_topic(b.bootstrap, "dlq.payments", expect=len(dead))
    assert [d["value"] for d in again] == values
    assert b.stop() == 0


def test_share_group_start_offsets_are_described_reset_and_deleted(broker_factory, share_consumer_factory):
    """The admin share-group offset APIs (90-92) as an operator uses them:
    describe a group's start offsets and lag, move them back while the group
    is empty (refused while it has members), and delete them."""
    import share_wire as sw

    b = broker_factory(settings=SETTINGS)
    b.start()
    create(b.bootstrap, "replay")
    group = "replayers"
    assert sw.describe_offsets(b.port, group)[0] == sw.GROUP_ID_NOT_FOUND
    c = share_consumer_factory(b.bootstrap, group, "replay", mode="explicit", ack="accept", commit="sync")
    warmed = warm_up(b.bootstrap, "replay", [c])
    produce(b.bootstrap, "replay", [f"r-{i}" for i in range(20)])
    end = warmed + 20
    c.wait_until(lambda lines: sum(1 for o in lines if o.get("value", "").startswith("r-")) >= 20, 60,
                 "every record")
    # A member: the start offsets cannot move.
    err, msg, _ = sw.alter_offsets(b.port, group, {("replay", 0): 0})
    assert err == sw.NON_EMPTY_GROUP, (err, msg)
    assert c.stop() == 0, c.describe()

    # Every record was accepted and committed: the start offset reaches the
    # log end (the acknowledgements of the last poll went out with the
    # close) and nothing is left to deliver.
    deadline = time.monotonic() + 30
    while True:
        err, offs = sw.describe_offsets(b.port, group)
        assert err == sw.NONE
        start, _epoch, lag, perr = offs[("replay", 0)]
        assert perr == sw.NONE
        if start == end or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert (start, lag) == (end, 0), offs

    # Once the member has left, the start offset moves back (the refusal
    # ends with the member's session at the latest).
    deadline = time.monotonic() + 30
    while True:
        err, msg, parts = sw.alter_offsets(b.port, group, {("replay", 0): warmed, ("replay", 7): 0,
                                                          ("nope", 0): 0})
        if err != sw.NON_EMPTY_GROUP or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert err == sw.NONE, (err, msg)
    assert parts == {("replay", 0): sw.NONE, ("replay", 7): sw.UNKNOWN_TOPIC_OR_PARTITION,
                     ("nope", 0): sw.UNKNOWN_TOPIC_OR_PARTITION}
    err, offs = sw.describe_offsets(b.port, group, {"replay": [0, 3]})
    assert err == sw.NONE
    assert offs[("replay", 0)][0] == warmed and offs[("replay", 0)][2] == 20, offs
    assert offs[("replay", 3)][3] == sw.UNKNOWN_TOPIC_OR_PARTITION

    # A new member reads the 20 records again, each once more.
    again = share_consumer_factory(b.bootstrap, group, "replay", mode="explicit", ack="accept")
    again.wait_until(lambda lines: {o.get("value") for o in lines} >= {f"r-{i}" for i in range(20)}, 60,
                     "the records after the reset")
    assert not any(r["value"].startswith("warm-") for r in again.records()), again.describe()
    assert again.stop() == 0, again.describe()

    # Deleted: no state; the next member starts at share.auto.offset.reset
    # (latest), so it sees only what comes after it joined.
    deadline = time.monotonic() + 30
    while True:
        err, msg, topics = sw.delete_offsets(b.port, group, ["replay", "nope"])
        if err != sw.NON_EMPTY_GROUP or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert err == sw.NONE, (err, msg)
    assert topics == {"replay": sw.NONE, "nope": sw.UNKNOWN_TOPIC_OR_PARTITION}
    err, offs = sw.describe_offsets(b.port, group, {"replay": [0]})
    assert err == sw.NONE and offs[("replay", 0)][0] == -1, offs
    late = share_consumer_factory(b.bootstrap, group, "replay", mode="explicit", ack="accept")
    warm_up(b.bootstrap, "replay", [late])
    assert not any(r["value"].startswith("r-") for r in late.records()), late.describe()
    assert late.stop() == 0, late.describe()
    assert b.stop() == 0


def test_partitions_of_a_session_take_turns_at_the_record_budget(broker_factory, share_consumer_factory):
    """With a backlog on two partitions and a small max.poll.records, the
    fetches of one share session alternate between them rather than drain
    the first partition before the second gets a turn."""
    import config_wire as cw

    b = broker_factory(settings=SETTINGS)
    b.start()
    create(b.bootstrap, "backlog", partitions=2)
    group = "turn-takers"
    assert cw.alter_group(b.port, group, [("share.auto.offset.reset", cw.SET, "earliest")])[0] == cw.NONE
    for part in (0, 1):
        produce(b.bootstrap, "backlog", [f"p{part}-{i}" for i in range(300)], partition=part)
    c = share_consumer_factory(b.bootstrap, group, "backlog", mode="explicit", ack="accept",
                               config={"max.poll.records": "10"})
    c.wait_until(lambda lines: sum(1 for o in lines if "offset" in o) >= 600, 60, "every record")
    first = [r["partition"] for r in c.records()][:60]
    # 60 records are six fetches of 10: a partition drained first would
    # give all 60 from one of them.
    assert set(first) == {0, 1}, first
    assert c.stop() == 0, c.describe()
    assert b.stop() == 0


def test_read_committed_share_groups_never_get_aborted_records(broker_factory, share_consumer_factory):
    """share.isolation.level=read_committed: records below the last stable
    offset only, aborted transactions' records never delivered."""
    import config_wire as cw

    b = broker_factory(settings=SETTINGS)
    b.start()
    create(b.bootstrap, "ledger")
    group = "auditors"
    assert cw.alter_group(b.port, group, [("share.auto.offset.reset", cw.SET, "earliest"),
                                          ("share.isolation.level", cw.SET, "read_committed")])[0] == cw.NONE
    p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": "ledger-writer", "linger.ms": 5})
    p.init_transactions(30)
    for n, outcome in enumerate(["commit", "abort", "commit", "abort", "commit"]):
        p.begin_transaction()
        for i in range(20):
            p.produce("ledger", value=f"{outcome}-{n}-{i}".encode(), partition=0)
        if outcome == "commit":
            p.commit_transaction(30)
        else:
            p.abort_transaction(30)
    # An open transaction at the end: its records are past the LSO.
    p.begin_transaction()
    p.produce("ledger", value=b"open-0", partition=0)
    p.flush(30)
    c = share_consumer_factory(b.bootstrap, group, "ledger", mode="explicit", ack="accept")
    want = {f"commit-{n}-{i}" for n in (0, 2, 4) for i in range(20)}
    c.wait_until(lambda lines: {o.get("value") for o in lines} >= want, 60, "every committed record")
    time.sleep(1.5)  # more than a lock: an aborted or open record would have come by now
    got = [r["value"] for r in c.records()]
    assert not [v for v in got if not v.startswith("commit-")], got
    assert len(got) == len(set(got)) == 60, got
    p.commit_transaction(30)
    c.wait_until(lambda lines: any(o.get("value") == "open-0" for o in lines), 60, "the record once committed")
    assert c.stop() == 0, c.describe()
    assert b.stop() == 0
