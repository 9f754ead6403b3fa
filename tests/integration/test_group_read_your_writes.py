"""Read-your-writes for committed offsets on a three-broker cluster: once an
OffsetCommit is answered, an OffsetFetch of the group, through whichever
broker a client is sent to, either shows the committed offsets or answers a
retriable error (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, ...) that
sends the client to look again. An answer without an error and without the
offsets (a broker answering from a state that is not the coordinator's) is
the failure, as Kafka's coordinator never gives it.

Groups are chosen so that every broker coordinates some; each check commits
through the group's coordinator (found with FindCoordinator, raw requests
from group_wire.py so the test knows which broker answered what), then at
once asks every broker for the offsets with OffsetFetch v9 (an admin
client's shape: no member id, with and without a topic list) and v3. The
same is asked after the coordinator of a group is killed and restarted,
while leadership of __consumer_offsets moves. Real clients close the loop:
confluent-kafka (librdkafka) commits and reads committed offsets, and
@platformatic/kafka's admin client lists them (OffsetFetch v9), when its
node modules are installed.

Assertions are about answers, never timings: retriable answers are retried
for as long as the cluster needs (bounded only by a generous deadline).
"""

import subprocess
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

import platformatic_env
from cluster_harness import Cluster, create_topics_request
from group_wire import (NONE, RETRIABLE, find_coordinator, offset_commit, offset_fetch_v3,
                        offset_fetch_v9)

SESSION_TIMEOUT_MS = 4000
TOPIC = "ryw"
PARTITIONS = 3
DEADLINE_S = 60  # for the cluster to settle after a failover: generous on a busy machine
HERE = Path(__file__).resolve().parent
PLATFORMATIC = HERE / "platformatic"


@pytest.fixture
def cluster():
    with Cluster(brokers=3, etcd=3, session_timeout_ms=SESSION_TIMEOUT_MS) as c:
        def offsets_led():
            t = c.metadata_from(1).topics.get("__consumer_offsets")
            return t if t and all(p.leader > 0 for p in t.partitions.values()) else None
        c.wait_for(offsets_led, 60, "every __consumer_offsets partition to have a leader")
        err, msg = create_topics_request(c.broker(1).port, TOPIC, PARTITIONS, 3)
        assert err == 0, msg
        c.wait_for(lambda: all(TOPIC in c.metadata_from(n).topics for n in c.live_ids()), 30,
                   f"{TOPIC} on every broker")
        yield c


def retry(what, fn, deadline_s=DEADLINE_S):
    """Calls fn() until it returns (error, value) with a non-retriable
    error; returns that pair. Connection errors count as retriable (a
    broker restarting)."""
    deadline = time.monotonic() + deadline_s
    last = None
    while time.monotonic() < deadline:
        try:
            last = fn()
        except OSError as e:
            last = (None, repr(e))
        if last[0] is not None and last[0] not in RETRIABLE:
            return last
        time.sleep(0.05)
    raise AssertionError(f"{what}: still retriable after {deadline_s}s: {last}")


def coordinator_of(c, group, via):
    """The node id broker `via` names as the group's coordinator."""
    _, node = retry(f"FindCoordinator {group} via {via}", lambda: find_coordinator(c.broker(via).port, group))
    return node


def commit_through_coordinator(c, group, offsets):
    """Commits through the broker that FindCoordinator names, looking again
    on a retriable answer, until every partition is answered 0; returns the
    broker that took it."""
    deadline = time.monotonic() + DEADLINE_S
    last = None
    while time.monotonic() < deadline:
        via = c.live_ids()[0]
        try:
            err, node = find_coordinator(c.broker(via).port, group)
            if err == NONE and node in c.live_ids():
                answers = offset_commit(c.broker(node).port, group, offsets)
                if all(e == NONE for e in answers.values()):
                    return node
                last = (node, answers)
                assert all(e in RETRIABLE for e in answers.values()), f"commit of {group} via {node}: {answers}"
            else:
                last = (via, err, node)
        except OSError as e:
            last = repr(e)
        time.sleep(0.05)
    raise AssertionError(f"commit of {group}: not taken within {DEADLINE_S}s: {last}")


def check_fetches_see(c, group, offsets):
    """Every live broker, asked OffsetFetch v9 (with and without topics) and
    v3, answers either a retriable error or exactly `offsets`; and the
    coordinator each broker names answers `offsets`."""
    topics = {}
    for (t, p) in offsets:
        topics.setdefault(t, []).append(p)
    want = {tp: (o, NONE) for tp, o in offsets.items()}
    for n in c.live_ids():
        port = c.broker(n).port
        for name, fetch in (("v9 all", lambda: offset_fetch_v9(port, group)),
                            ("v9 listed", lambda: offset_fetch_v9(port, group, topics)),
                            ("v3 listed", lambda: offset_fetch_v3(port, group, topics))):
            err, got = fetch()
            if err in RETRIABLE:
                continue
            assert (err, got) == (NONE, want), \
                f"{group}: broker {n} answered OffsetFetch {name} right after the commit with {err} {got}, " \
                f"not {want} nor a retriable error\n{c.describe(log_tail=1500)}"
    for via in c.live_ids():
        for name, fetch in (("v9 all", offset_fetch_v9), ("v3 listed", offset_fetch_v3)):
            args = (group,) if name == "v9 all" else (group, topics)
            node, err, got = fetch_from_coordinator(c, group, via, fetch, *args)
            assert (err, got) == (NONE, want), \
                f"{group}: its coordinator {node} (named by {via}) answered OffsetFetch {name} with {err} {got}"


def fetch_from_coordinator(c, group, via, fetch, *args):
    """As a client does: asks broker `via` for the coordinator, then asks
    it, looking again on a retriable answer or a broker that is down;
    returns (node, error, offsets)."""
    deadline = time.monotonic() + DEADLINE_S
    last = None
    while time.monotonic() < deadline:
        try:
            err, node = find_coordinator(c.broker(via).port, group)
            if err == NONE and node in c.live_ids():
                err, got = fetch(c.broker(node).port, *args)
                if err not in RETRIABLE:
                    return node, err, got
            last = (node, err)
        except OSError as e:
            last = repr(e)
        time.sleep(0.05)
    raise AssertionError(f"OffsetFetch of {group} via {via}: no coordinator answered within {DEADLINE_S}s: {last}")


def groups_per_coordinator(c, per_broker):
    """Group ids whose coordinators cover every broker, `per_broker` each."""
    found = {n: [] for n in c.node_ids}
    i = 0
    while any(len(g) < per_broker for g in found.values()):
        g = f"ryw-{i}"
        i += 1
        node = coordinator_of(c, g, 1)
        if len(found[node]) < per_broker:
            found[node].append(g)
    return found


def commit_and_check(c, groups, round_no, last):
    """Commits new offsets for every group and checks they are read back;
    `last` keeps what each group committed last."""
    for gs in groups.values():
        for g in gs:
            offsets = {(TOPIC, p): 100 * round_no + p + 1 for p in range(PARTITIONS)}
            commit_through_coordinator(c, g, offsets)
            last[g] = offsets
            check_fetches_see(c, g, offsets)


def check_all(c, last):
    for g, offsets in last.items():
        check_fetches_see(c, g, offsets)


def test_a_commit_is_read_back_through_every_coordinator(cluster):
    groups = groups_per_coordinator(cluster, 4)
    last = {}
    for round_no in range(3):
        commit_and_check(cluster, groups, round_no, last)


def test_a_commit_is_read_back_after_its_coordinator_fails_over(cluster):
    groups = groups_per_coordinator(cluster, 3)
    last = {}
    commit_and_check(cluster, groups, 0, last)
    round_no = 1
    for victim in (2, 3):
        # The coordinator of some groups dies: their partitions of
        # __consumer_offsets move to the other brokers, which must answer
        # what was committed through it, and take new commits.
        cluster.kill(victim)
        check_all(cluster, last)
        commit_and_check(cluster, groups, round_no, last)
        # It comes back: what it coordinated before must not be answered
        # from its old state, neither while it catches up nor once it leads
        # again.
        cluster.restart(victim)
        check_all(cluster, last)
        cluster.wait_converged(timeout=DEADLINE_S)
        commit_and_check(cluster, groups, round_no + 1, last)
        round_no += 2


def test_a_stopping_coordinator_never_answers_from_its_old_state(cluster):
    """While a coordinator shuts down (SIGTERM: it stops leading, then the
    controller moves its partitions), the groups it coordinated commit
    through their new coordinators; the stopping broker, asked directly,
    answers a retriable error or the new offsets, never the old ones."""
    victim = 2
    groups = groups_per_coordinator(cluster, 3)
    last = {}
    commit_and_check(cluster, groups, 0, last)
    victim_port = cluster.broker(victim).port
    others = [n for n in cluster.node_ids if n != victim]
    stopper = threading.Thread(target=cluster.stop, args=(victim,))
    stopper.start()
    stale = []
    round_no = 1
    try:
        while stopper.is_alive():
            for g in groups[victim]:
                offsets = {(TOPIC, p): 1000 * round_no + p + 1 for p in range(PARTITIONS)}
                node = commit_through_coordinator(cluster, g, offsets)
                if node == victim:
                    continue  # taken before it stopped leading: nothing to compare yet
                last[g] = offsets
                want = {tp: (o, NONE) for tp, o in offsets.items()}
                for name, fetch in (("v9", lambda: offset_fetch_v9(victim_port, g)),
                                    ("v3", lambda: offset_fetch_v3(victim_port, g, {TOPIC: list(range(PARTITIONS))}))):
                    try:
                        err, got = fetch()
                    except OSError:
                        continue  # gone
                    if err not in RETRIABLE and (err, got) != (NONE, want):
                        stale.append((g, name, node, err, got, want))
            round_no += 1
    finally:
        stopper.join()
    print(f"{round_no - 1} rounds of commits while broker {victim} stopped")
    assert not stale, f"the stopping broker {victim} answered from its old state: {stale[:3]}"
    for n in others:
        assert cluster.broker(n).running()
    check_all(cluster, last)


def test_a_coordinator_back_from_a_pause_never_answers_from_its_old_state(cluster):
    """A coordinator paused past its session timeout loses its partitions of
    __consumer_offsets; its groups commit through their new coordinators.
    Requests that reached it while it was paused are answered when it
    resumes, before its view of the cluster has caught up: each must be a
    retriable error (or the new offsets), never the offsets it held, and
    FindCoordinator must not name it."""
    victim = next(n for n in cluster.node_ids if n != cluster.controller_id())
    groups = groups_per_coordinator(cluster, 3)
    last = {}
    commit_and_check(cluster, groups, 0, last)
    mine = groups[victim]
    others = [n for n in cluster.node_ids if n != victim]
    cluster.pause(victim)
    try:
        cluster.wait_for(lambda: all(coordinator_of(cluster, g, others[0]) != victim for g in mine), DEADLINE_S,
                         f"broker {victim}'s groups to move to other coordinators")
        for g in mine:
            offsets = {(TOPIC, p): 500 + p + 1 for p in range(PARTITIONS)}
            assert commit_through_coordinator(cluster, g, offsets) != victim
            last[g] = offsets
        # Asked of the paused broker: the requests wait in its sockets.
        port = cluster.broker(victim).port
        topics = {TOPIC: list(range(PARTITIONS))}
        answers = {}

        def ask(key, fn):
            try:
                answers[key] = fn()
            except OSError as e:
                answers[key] = (None, repr(e))
        threads = []
        for g in mine:
            for key, fn in (((g, "v9"), lambda g=g: offset_fetch_v9(port, g, timeout=DEADLINE_S)),
                            ((g, "v3"), lambda g=g: offset_fetch_v3(port, g, topics, timeout=DEADLINE_S)),
                            ((g, "find"), lambda g=g: find_coordinator(port, g, timeout=DEADLINE_S))):
                threads.append(threading.Thread(target=ask, args=(key, fn)))
        for t in threads:
            t.start()
        time.sleep(1.0)  # every request sent (connections are taken by the kernel's backlog)
    finally:
        cluster.resume(victim)
    for t in threads:
        t.join(timeout=DEADLINE_S + 10)
    for g in mine:
        want = {tp: (o, NONE) for tp, o in last[g].items()}
        for kind in ("v9", "v3"):
            err, got = answers[(g, kind)]
            assert err is None or err in RETRIABLE or (err, got) == (NONE, want), \
                f"{g}: broker {victim}, back from a pause, answered OffsetFetch {kind} with {err} {got}, " \
                f"not {want} nor a retriable error"
        err, node = answers[(g, "find")]
        assert err != NONE or node != victim, \
            f"{g}: broker {victim}, back from a pause, named itself the coordinator"
    cluster.wait_converged(timeout=DEADLINE_S)
    check_all(cluster, last)
    commit_and_check(cluster, groups, 2, last)


def test_real_clients_read_their_commits(cluster):
    """librdkafka commits; librdkafka and (when installed) @platformatic's
    admin client (OffsetFetch v9, no member id) read the offsets at once."""
    for i in range(6):
        group = f"ryw-client-{i}"
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                             "enable.auto.commit": False})
        try:
            want = [TopicPartition(TOPIC, p, 10 * i + p + 1) for p in range(PARTITIONS)]
            consumer.commit(offsets=want, asynchronous=False)
            got = consumer.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=30)
            assert [(tp.partition, tp.offset) for tp in got] == [(tp.partition, tp.offset) for tp in want]
        finally:
            consumer.close()
        if not platformatic_env.installed():
            continue
        for n in cluster.live_ids():
            # @platformatic/kafka 2.x runs on the Node.js its package.json pins.
            r = subprocess.run([str(platformatic_env.node()), str(PLATFORMATIC / "list_group_offsets.mjs"),
                                f"127.0.0.1:{cluster.broker(n).port}", group],
                               capture_output=True, text=True, timeout=120)
            assert r.returncode == 0, r.stderr[-3000:]
            assert r.stdout.split() == [f"{TOPIC}:{p}:{10 * i + p + 1}" for p in range(PARTITIONS)], \
                f"@platformatic/kafka via broker {n}: {r.stdout!r}"
