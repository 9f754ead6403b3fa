"""`sluice dlq list|replay` and `sluice group describe|reset-offsets` for share
groups, on one broker, with real share consumers (share_consumer, librdkafka
2.15.1; see test_share_groups.py).

A share group starts a partition where the log ends when it first fetches
from it (share.auto.offset.reset=latest), so each test warms its consumers
up first (test_share_groups.warm_up)."""

import json
import subprocess

from confluent_kafka import Consumer, Producer, TopicPartition

from cluster_harness import delete_records_request
from sluice_harness import SLUICE_BIN, wait_until
from test_share_groups import SETTINGS, create, warm_up


def sluice(*args, check=True):
    r = subprocess.run([SLUICE_BIN, *args], capture_output=True, text=True, timeout=120)
    if check:
        assert r.returncode == 0, f"sluice {' '.join(args)}: rc={r.returncode}\n{r.stdout}{r.stderr}"
    return r


def produce_keyed(bootstrap, topic, pairs, partition=0):
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for k, v in pairs:
        p.produce(topic, key=k.encode(), value=v.encode(), partition=partition)
    assert p.flush(30) == 0


def read_partition(bootstrap, topic, partition=0):
    """Every record of topic-partition up to its high watermark now, as
    (offset, key, value)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "share-cli-reader", "enable.auto.commit": False,
                  "enable.partition.eof": True})
    try:
        lo, hi = c.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)
        got = []
        if hi > lo:
            c.assign([TopicPartition(topic, partition, lo)])
            while not got or got[-1][0] < hi - 1:
                m = c.poll(30)
                assert m is not None, f"nothing more from {topic}-{partition} below {hi}: {got}"
                if m.error():
                    continue
                got.append((m.offset(), m.key() and m.key().decode(), m.value() and m.value().decode()))
        return got
    finally:
        c.close()


def dlq_list(bootstrap, group, *extra):
    """`sluice dlq list GROUP --json` as a list of dicts."""
    out = sluice("dlq", "list", group, "-b", bootstrap, "--json", *extra).stdout
    return [json.loads(line) for line in out.splitlines()]


def test_dead_letters_are_listed_and_replayed_to_their_source(broker_factory, share_consumer_factory):
    b = broker_factory(settings=SETTINGS)
    b.start()
    bs = b.bootstrap
    for t in ("payments", "checks", "dlq.all"):
        create(bs, t)
    # Two groups write to one dead-letter topic: one copies the record, the
    # other does not (replay then reads the record from its source).
    sluice("config", "alter", "--bootstrap", bs, "--group", "payers", "-c", "errors.deadletterqueue.topic.name=dlq.all")
    sluice("config", "alter", "--bootstrap", bs, "--group", "checkers", "-c", "errors.deadletterqueue.topic.name=dlq.all",
           "-c", "errors.deadletterqueue.copy.record.enable=true")

    # payers: a poison record its consumers exit on, three times (the limit).
    cfg = {"max.poll.records": "1"}
    first = share_consumer_factory(bs, "payers", "payments", mode="explicit", poison="POISON", config=cfg)
    warm_up(bs, "payments", [first])
    produce_keyed(bs, "payments", [("k-poison", "POISON")])
    assert first.wait_exit(60) == 3, first.describe()
    crashes = [first]
    for _ in range(2):
        c = share_consumer_factory(bs, "payers", "payments", mode="explicit", poison="POISON", config=cfg)
        crashes.append(c)
        assert c.wait_exit(60) == 3, c.describe()
    poison_offset = [r["offset"] for r in first.records() if r["value"] == "POISON"][0]

    # checkers: a consumer that rejects what it gets.
    rejecter = share_consumer_factory(bs, "checkers", "checks", mode="explicit", ack="reject", config=cfg)
    warm_up(bs, "checks", [rejecter])
    produce_keyed(bs, "checks", [("k-bad", "bad\tvalue")])
    rejecter.wait_until(lambda lines: any(o.get("value") == "bad\tvalue" for o in lines), 60, "the bad record")
    bad_offset = [r["offset"] for r in rejecter.records() if r["value"] == "bad\tvalue"][0]
    assert rejecter.stop() == 0, rejecter.describe()

    # Each dead letter is listed once, under its own group only.
    wait_until(lambda: len(dlq_list(bs, "payers")) == 1, 60, "the poison's dead letter")
    [p] = dlq_list(bs, "payers")
    assert (p["topic"], p["partition"], p["offset"]) == ("payments", 0, poison_offset), p
    assert p["group"] == "payers" and p["delivery_count"] == 3 and p["reason"] == "delivery_count_exhausted", p
    assert p["key"] is None and p["value"] is None, p  # not copied
    assert p["dlq_topic"] == "dlq.all"
    wait_until(lambda: any(d["value"] == "bad\tvalue" for d in dlq_list(bs, "checkers")), 60, "the rejected record's")
    rejected = [d for d in dlq_list(bs, "checkers") if d["value"] == "bad\tvalue"]
    assert len(rejected) == 1, rejected
    [r] = rejected
    assert (r["topic"], r["offset"], r["key"], r["reason"], r["delivery_count"]) == \
        ("checks", bad_offset, "k-bad", "rejected", 1), r
    # The text form: one tab-separated line, the value's tab escaped.
    text = sluice("dlq", "list", "checkers", "-b", bs, "--topic", "checks").stdout.splitlines()
    line = [ln for ln in text if f"source=checks-0@{bad_offset}\t" in ln]
    assert len(line) == 1, text
    assert line[0].startswith(f"dlq.all-0@{r['dlq_offset']}\t"), line
    fields = line[0].split("\t")
    assert "delivery_count=1" in fields and "reason=rejected" in fields and "key=k-bad" in fields, fields
    assert "value=bad\\tvalue" in fields, fields
    # describe counts what was archived; nothing is in flight any more (the
    # crashed consumers' locks ran out, the poison was archived).
    parts = wait_until(lambda: (lambda ps: ps if ps.get("payments-0", {}).get("in_flight") == "0" else None)(
        describe(bs, "payers")[2]), 60, "nothing in flight")
    assert parts["payments-0"]["archived"] == "1", parts
    # The rejecter rejected the warm-up records too: every archived record
    # is a dead letter of the group.
    wait_until(lambda: describe(bs, "checkers")[2]["checks-0"]["archived"] == str(len(dlq_list(bs, "checkers"))),
               60, "as many dead letters as archived records")
    assert int(describe(bs, "checkers")[2]["checks-0"]["archived"]) >= 2
    # Filters: another source topic, an offset range past the dead letter.
    assert dlq_list(bs, "payers", "--topic", "checks") == []
    assert dlq_list(bs, "payers", "--from", str(p["dlq_offset"] + 1)) == []
    assert [d["dlq_offset"] for d in dlq_list(bs, "payers", "--from", str(p["dlq_offset"]),
                                              "--to", str(p["dlq_offset"]))] == [p["dlq_offset"]]

    # A dry run reads the source but produces nothing.
    before = read_partition(bs, "payments")
    out = sluice("dlq", "replay", "payers", "-b", bs, "--dry-run").stdout.splitlines()
    assert out[-1] == "summary\tselected=1\treplayed=0\tfailed=0\tdry_run", out
    assert out[0].startswith(f"would replay\tdlq.all-0@{p['dlq_offset']}\tto=payments-0\t"), out
    assert "key_value=source" in out[0]
    assert read_partition(bs, "payments") == before

    # Replay: the record goes back to its source partition with its key and
    # value, read from the source (payers) or from the dead letter (checkers).
    out = sluice("dlq", "replay", "payers", "-b", bs).stdout.splitlines()
    assert out[-1] == "summary\tselected=1\treplayed=1\tfailed=0", out
    replayed_at = int(out[0].split("\t")[2].split("@")[1])
    after = read_partition(bs, "payments")
    assert after[-1] == (replayed_at, "k-poison", "POISON"), after
    assert after[:-1] == before
    checks_before = read_partition(bs, "checks")
    out = sluice("dlq", "replay", "checkers", "-b", bs, "--topic", "checks").stdout.splitlines()
    mine = [ln for ln in out if ln.startswith(f"replayed\tdlq.all-0@{r['dlq_offset']}\t")]
    assert len(mine) == 1 and mine[0].endswith("\tkey_value=dead_letter"), out
    checks_after = read_partition(bs, "checks")
    assert checks_after[:len(checks_before)] == checks_before
    assert ("k-bad", "bad\tvalue") in [(k, v) for _, k, v in checks_after[len(checks_before):]], checks_after

    # A record retention has removed since cannot be replayed from its
    # source: it is named, the run fails, the rest of the run is unaffected.
    assert delete_records_request(b.port, "payments", 0, poison_offset + 1)[0] == 0
    r = sluice("dlq", "replay", "payers", "-b", bs, check=False)
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stdout.splitlines()[-1] == "summary\tselected=1\treplayed=0\tfailed=1", r.stdout
    assert f"dlq.all-0@{p['dlq_offset']} (source payments-0@{poison_offset}): not replayed: the record is gone" \
        in r.stderr, r.stderr

    # Usage and a group without a dead-letter topic.
    r = sluice("dlq", "list", "nobody", "-b", bs, check=False)
    assert r.returncode == 1 and "errors.deadletterqueue.topic.name" in r.stderr, r.stderr
    r = sluice("dlq", "list", "payers", "-b", bs, "--from", "5", "--to", "4", check=False)
    assert r.returncode == 2, r.stderr
    assert b.stop() == 0


def describe(bootstrap, group):
    """`sluice group describe -g GROUP` of a share group as (head, members,
    partitions): dicts of the key=value fields, members by member id,
    partitions by 'topic-partition'."""
    out = sluice("group", "describe", "-b", bootstrap, "-g", group).stdout.splitlines()
    head, members, partitions = None, {}, {}
    for line in out:
        first, *rest = line.split("\t")
        fields = dict(f.split("=", 1) for f in rest)
        kind, name = first.split(" ", 1)
        if kind == "group":
            assert name == group, line
            head = fields
        elif kind == "member":
            members[name] = fields
        else:
            assert kind == "partition", line
            partitions[name] = fields
    assert head is not None, out
    return head, members, partitions


def high_watermark(bootstrap, topic, partition):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "share-cli-watermarks"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)[1]
    finally:
        c.close()


def test_describe_shows_a_share_groups_members_and_start_offsets(broker_factory, share_consumer_factory):
    b = broker_factory(settings=SETTINGS)
    b.start()
    bs = b.bootstrap
    create(bs, "jobs", partitions=2)
    c = share_consumer_factory(bs, "workers", "jobs", mode="explicit", ack="accept",
                               config={"client.id": "worker-a"})
    warm_up(bs, "jobs", [c], partitions=2)

    head, members, _ = describe(bs, "workers")
    assert (head["type"], head["state"], head["members"], head["assignor"]) == ("share", "Stable", "1", "simple"), head
    assert int(head["group_epoch"]) >= 1
    [(member_id, m)] = members.items()
    assert m["client"] == "worker-a" and int(m["member_epoch"]) >= 1 and m["partitions"] == "jobs-0,jobs-1", m
    # Once everything produced is accepted, each share partition starts at
    # the high watermark with nothing left to deliver.
    hw = {p: high_watermark(bs, "jobs", p) for p in (0, 1)}

    def caught_up():
        _, _, parts = describe(bs, "workers")
        return all(parts.get(f"jobs-{p}", {}).get("start_offset") == str(hw[p]) for p in (0, 1)) and parts

    parts = wait_until(caught_up, 60, "start offsets at the high watermarks")
    assert all(parts[f"jobs-{p}"]["lag"] == "0" for p in (0, 1)), parts
    # The consumer leaves: the group is empty, its share partitions stay.
    assert c.stop() == 0, c.describe()
    head, members, parts = describe(bs, "workers")
    assert (head["state"], head["members"], members) == ("Empty", "0", {}), head
    assert {k: v["start_offset"] for k, v in parts.items()} == {f"jobs-{p}": str(hw[p]) for p in (0, 1)}
    # A classic group is described as before.
    cc = Consumer({"bootstrap.servers": bs, "group.id": "classic"})
    cc.commit(offsets=[TopicPartition("jobs", 0, 1)], asynchronous=False)
    cc.close()
    out = sluice("group", "describe", "-b", bs, "-g", "classic").stdout
    assert out.startswith("group classic\tstate=Empty\t") and "type=share" not in out, out
    # list names both kinds, the share group marked as such.
    lines = sluice("group", "list", "-b", bs).stdout.splitlines()
    assert "workers\tEmpty\ttype=share" in lines and "classic\tEmpty" in lines, lines
    assert b.stop() == 0


def test_reset_offsets_of_an_empty_share_group_makes_it_read_again(broker_factory, share_consumer_factory):
    b = broker_factory(settings=SETTINGS)
    b.start()
    bs = b.bootstrap
    create(bs, "tasks")
    # Records from before the group first read: it starts at the end
    # (share.auto.offset.reset=latest) and never sees them.
    produce_keyed(bs, "tasks", [(f"k{i}", f"before-{i}") for i in range(10)])
    first = share_consumer_factory(bs, "readers", "tasks", mode="explicit", ack="accept")
    warm_up(bs, "tasks", [first])
    assert not any(r["value"].startswith("before-") for r in first.records())

    # Not while the group has a member.
    r = sluice("group", "reset-offsets", "-b", bs, "-g", "readers", "-t", "tasks", "--to-earliest", check=False)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "share group readers is Stable" in r.stderr and "stop its share consumers first" in r.stderr, r.stderr
    assert first.stop() == 0, first.describe()

    before = describe(bs, "readers")[2]["tasks-0"]["start_offset"]
    out = sluice("group", "reset-offsets", "-b", bs, "-g", "readers", "-t", "tasks", "--to-earliest",
                 "--dry-run").stdout
    assert out.splitlines() == ["tasks\t0\t0\t(dry run)"], out
    assert describe(bs, "readers")[2]["tasks-0"]["start_offset"] == before
    out = sluice("group", "reset-offsets", "-b", bs, "-g", "readers", "-t", "tasks", "--to-earliest").stdout
    assert out.splitlines() == ["tasks\t0\t0", "reset readers on tasks"], out
    assert describe(bs, "readers")[2]["tasks-0"]["start_offset"] == "0"

    # A new member reads from the start: the old records, each once more,
    # first delivery.
    again = share_consumer_factory(bs, "readers", "tasks", mode="explicit", ack="accept")
    again.wait_until(lambda lines: {f"before-{i}" for i in range(10)} <= {o.get("value") for o in lines}, 60,
                     "the records from before the group")
    got = [r for r in again.records() if r["value"].startswith("before-")]
    assert sorted(r["value"] for r in got) == sorted(f"before-{i}" for i in range(10)), got
    assert all(r["delivery_count"] == 1 for r in got), got
    assert again.stop() == 0, again.describe()

    # After a restart the coordinator knows the idle group only by its share
    # partitions' state (membership is memory only): still a share group to
    # the tools, so a reset moves its start offsets rather than make a
    # classic group of that id.
    assert b.stop() == 0
    b.start()
    head, members, parts = describe(bs, "readers")
    assert (head["type"], head["state"], head["group_epoch"], members) == ("share", "Empty", "-", {}), head
    assert "tasks-0" in parts, parts
    out = sluice("group", "reset-offsets", "-b", bs, "-g", "readers", "-t", "tasks", "--to-offset", "3").stdout
    assert out.splitlines() == ["tasks\t0\t3", "reset readers on tasks"], out
    assert describe(bs, "readers")[2]["tasks-0"]["start_offset"] == "3"
    last = share_consumer_factory(bs, "readers", "tasks", mode="explicit", ack="accept")
    last.wait_until(lambda lines: {f"before-{i}" for i in range(3, 10)} <= {o.get("value") for o in lines}, 60,
                    "the records from offset 3 on")
    assert not {f"before-{i}" for i in range(3)} & {r["value"] for r in last.records()}, last.describe()
    assert last.stop() == 0, last.describe()
    # An id no group holds is described as before (a classic Dead group).
    out = sluice("group", "describe", "-b", bs, "-g", "nobody").stdout
    assert out.startswith("group nobody\tstate=Dead\t"), out
    assert b.stop() == 0
