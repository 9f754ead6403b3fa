"""Committed offsets belong to a topic, not to its name, on a three-broker
cluster (docs/group_records.md, "Topic ids"): a topic deleted and created
again under its name while a group's coordinator did not see the deletion
happen must not hand the group the old topic's offsets, and the offsets the
group commits for the new topic stay.

The deletion is hidden from the coordinator the way a cluster hides it: the
broker that coordinates the group is paused (SIGSTOP) while the topic is
deleted and created again through the others, and stays paused past its
session, so another broker takes over the group's partition of
__consumer_offsets. That broker was alive at the deletion but did not hold
the partition then; it learns of the old topic's offsets only when it loads
the partition, by which time the name has a topic again. Keyed by name, the
offsets were the new topic's; keyed by topic id they are not.
"""

import time

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from cluster_harness import Cluster
from group_wire import NONE, find_coordinator
from test_group_read_your_writes import commit_through_coordinator, coordinator_of

SESSION_TIMEOUT_MS = 4000
TOPIC = "reborn"
CLIENT_TIMEOUT_S = 30
NO_OFFSET = -1001  # librdkafka's OFFSET_INVALID: nothing committed


@pytest.fixture
def cluster():
    with Cluster(brokers=3, etcd=3, session_timeout_ms=SESSION_TIMEOUT_MS) as c:
        def offsets_led():
            t = c.metadata_from(1).topics.get("__consumer_offsets")
            return t if t and all(p.leader > 0 for p in t.partitions.values()) else None
        c.wait_for(offsets_led, 60, "every __consumer_offsets partition to have a leader")
        yield c


def admin_of(bootstrap):
    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 10000})


def create(bootstrap, host):
    """Creates TOPIC with two partitions on broker `host` alone, retrying while
    the name is still taken by a deletion under way."""
    deadline = time.monotonic() + CLIENT_TIMEOUT_S
    while True:
        a = admin_of(bootstrap)
        fs = a.create_topics([NewTopic(TOPIC, 2, replica_assignment=[[host], [host]])], operation_timeout=20,
                             request_timeout=CLIENT_TIMEOUT_S)
        try:
            fs[TOPIC].result(timeout=CLIENT_TIMEOUT_S + 5)
            return
        except Exception as e:  # noqa: BLE001 - TOPIC_ALREADY_EXISTS while the deletion settles
            if time.monotonic() > deadline:
                raise AssertionError(f"creating {TOPIC}: {e}") from e
            time.sleep(0.2)


def committed(bootstrap, group):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        res = c.committed([TopicPartition(TOPIC, p) for p in range(2)], timeout=CLIENT_TIMEOUT_S)
        return {tp.partition: tp.offset for tp in res}
    finally:
        c.close()


def pick_group(c):
    """A group whose coordinator is not the controller (pausing it must not
    hold up the topic's deletion and creation); returns (group, coordinator)."""
    controller = c.controller_id()
    for i in range(100):
        group = f"reborn-{i}"
        node = coordinator_of(c, group, c.live_ids()[0])
        if node != controller:
            return group, node
    raise AssertionError("no group coordinated away from the controller")


def test_a_coordinator_that_missed_the_deletion_hands_out_none_of_the_old_topics_offsets(cluster):
    c = cluster
    group, coord = pick_group(c)
    host = next(n for n in c.node_ids if n != coord)
    create(c.bootstrap, host)
    c.wait_for(lambda: all(TOPIC in c.metadata_from(n).topics for n in c.live_ids()), 30,
               f"{TOPIC} on every broker")
    commit_through_coordinator(c, group, {(TOPIC, 0): 5, (TOPIC, 1): 7})
    assert committed(c.live_bootstrap(), group) == {0: 5, 1: 7}

    # The coordinator misses the deletion and the creation, and its
    # session: another broker takes the group over.
    coord = coordinator_of(c, group, host)
    c.pause(coord)
    try:
        others = c.live_bootstrap()
        a = admin_of(others)
        a.delete_topics([TOPIC], operation_timeout=20)[TOPIC].result(timeout=CLIENT_TIMEOUT_S + 5)
        create(others, host)

        def taken_over():
            err, node = find_coordinator(c.broker(host).port, group)
            return err == NONE and node in c.live_ids()
        c.wait_for(taken_over, SESSION_TIMEOUT_MS / 1000 + 30, f"another broker to coordinate {group}")
        # Keyed by name the old topic's 5 and 7 would be answered here.
        got = committed(others, group)
        assert got == {0: NO_OFFSET, 1: NO_OFFSET}, f"{got}\n{c.describe(log_tail=1500)}"
    finally:
        c.resume(coord)

    # The new topic's own offsets are kept, whichever broker coordinates.
    commit_through_coordinator(c, group, {(TOPIC, 0): 1, (TOPIC, 1): 2})
    assert committed(c.bootstrap, group) == {0: 1, 1: 2}
    c.wait_for(lambda: coord in c.live_ids() and all(
        TOPIC in c.metadata_from(n).topics for n in c.live_ids()), 60, "the paused broker back")
    coord_now = coordinator_of(c, group, host)
    c.restart(coord_now)
    assert committed(c.bootstrap, group) == {0: 1, 1: 2}
