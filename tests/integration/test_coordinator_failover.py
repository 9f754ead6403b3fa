"""Issue 31, "Tests the fault suite lacks": a consumer group that commits
continuously while its coordinator fails over, on three brokers over a
three-member etcd (cluster_harness.py).

One confluent-kafka (librdkafka) consumer reads a topic of three
partitions (replication factor 3) that a producer keeps writing to, and
commits its positions synchronously after every few records. Twice, the
broker that leads the group's __consumer_offsets partition (FindCoordinator
names it) is killed with SIGKILL, and restarted once the group commits
again through the new coordinator. Checked throughout, as the protocol
promises whatever the timing:

- read-your-writes: right after each successful commit, the consumer's
  committed() answers exactly what was committed, through whichever
  coordinator it reaches; right after a kill, before the next commit, it
  answers the last successful commit (or one of the commits that failed
  since, whose outcome the client cannot know);
- committed offsets never go back, commit after commit;
- at-least-once: the consumer is never handed a record past the next one
  it has not seen (nothing skipped), and whenever it is handed an earlier
  one again (the group rebalanced onto a new coordinator) it is at or
  above the last successful commit of that partition;
- after each failover the application restarts its consumer: the new
  one starts every partition exactly at the last successful commit;
- at the end, OffsetFetch sent to the coordinator that FindCoordinator
  names, through every live broker, answers the last successful commit.

The test starts its own cluster and removes it (processes by pid,
directories).
"""

import threading
import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from cluster_harness import Cluster
from group_wire import NONE, RETRIABLE, find_coordinator, offset_fetch_v3

SESSION_TIMEOUT_MS = 4000
TOPIC = "commits"
PARTITIONS = 3
GROUP = "continuous"
COMMIT_EVERY = 5      # records between commits
KILLS = 2
COMMITS_BETWEEN = 20  # successful commits before a kill, after it, and after the restart
DEADLINE_S = 90       # for any one step on a busy 2-core machine: a failover, a restart, 20 commits


@pytest.fixture
def cluster():
    with Cluster(brokers=3, etcd=3, session_timeout_ms=SESSION_TIMEOUT_MS,
                 extra_settings={"replica.lag.time.max.ms": "3000", "replica.fetch.wait.max.ms": "200",
                                 "replica.fetch.backoff.ms": "200", "group.initial.rebalance.delay.ms": "0",
                                 "offsets.topic.num.partitions": "6"}) as c:
        def offsets_led():
            t = c.metadata_from(1).topics.get("__consumer_offsets")
            return t if t and all(p.leader > 0 for p in t.partitions.values()) else None
        c.wait_for(offsets_led, 60, "every __consumer_offsets partition to have a leader")
        a = AdminClient({"bootstrap.servers": c.bootstrap})
        fs = a.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=3,
                                       config={"min.insync.replicas": "2"})], operation_timeout=20)
        fs[TOPIC].result(30)
        yield c


def coordinator(c):
    """The coordinator every live broker names for GROUP, once they agree
    on a live one; None otherwise."""
    named = set()
    for n in c.live_ids():
        try:
            err, node = find_coordinator(c.broker(n).port, GROUP)
        except (OSError, EOFError):
            return None
        if err != NONE:
            return None
        named.add(node)
    return named.pop() if len(named) == 1 and next(iter(named)) in c.live_ids() else None


def offsets_isrs_full(c):
    views = c.metadata_all(timeout=2.0)
    if len(views) != len(c.node_ids):
        return False
    for v in views.values():
        t = v.topics.get("__consumer_offsets")
        if t is None or any(sorted(p.isr) != c.node_ids for p in t.partitions.values()):
            return False
    return True


class Load(threading.Thread):
    """An idempotent acks=all producer writing to every partition in turn,
    about 100 records a second until stopped: the consumer never runs dry,
    nor far behind (it commits after every few records)."""

    def __init__(self, c):
        super().__init__(daemon=True, name="load")
        self.c = c
        self.stop = threading.Event()
        self.failure = None

    def run(self):
        try:
            p = Producer({"bootstrap.servers": self.c.bootstrap, "acks": "all", "enable.idempotence": True,
                          "linger.ms": 5, "message.timeout.ms": 600_000})
            i = 0
            while not self.stop.is_set():
                for _ in range(10):
                    p.produce(TOPIC, b"%d" % i, partition=i % PARTITIONS)
                    i += 1
                p.poll(0)
                time.sleep(0.1)
            p.flush(120)
        except BaseException as e:  # noqa: B902 - reported by finish()
            self.failure = repr(e)

    def finish(self):
        self.stop.set()
        self.join(150)
        assert self.failure is None, self.failure


class Group:
    """The consumer and everything it saw; all checks are asserted here as
    the consumer goes."""

    def __init__(self, c):
        self.c = c
        self.cons = None
        self.resume_at = {}      # partition -> the offsets a restarted consumer may start at
        self.resumed = 0
        self.pos = {}            # partition -> next offset, from records handed since the assignment
        self.max_seen = {}       # partition -> the largest offset ever handed
        self.last_ok = {}        # partition -> its last successful commit
        self.ambiguous = []      # commits that failed since the last success: applied or not
        self.seen_committed = {}  # partition -> the last committed() answer
        self.ok = 0              # successful commits
        self.failed = []         # errors of failed commits
        self.redelivered = 0
        self.rebalances = 0
        self.lock = threading.Lock()
        self.open()

    def open(self):
        self.cons = Consumer({"bootstrap.servers": self.c.bootstrap, "group.id": GROUP,
                              "enable.auto.commit": False, "auto.offset.reset": "earliest",
                              "session.timeout.ms": 10000, "heartbeat.interval.ms": 1000,
                              "topic.metadata.refresh.interval.ms": 2000, "enable.partition.eof": False})
        self.cons.subscribe([TOPIC], on_assign=self._assigned, on_revoke=self._revoked)

    def restart(self):
        """The application restarts its consumer: the new one must start
        each partition exactly at the last successful commit (or at a
        failed commit since, which may have been applied)."""
        self.cons.close()
        self.pos = {}
        self.resume_at = {p: {o} | {a[p] for a in self.ambiguous if p in a} for p, o in self.last_ok.items()}
        self.open()

    def _assigned(self, cons, parts):
        self.rebalances += 1
        for tp in parts:
            self.pos.pop(tp.partition, None)

    def _revoked(self, cons, parts):
        for tp in parts:
            self.pos.pop(tp.partition, None)

    def step(self):
        """One poll; a commit once COMMIT_EVERY records came since the last."""
        handed = 0
        for m in self.cons.consume(COMMIT_EVERY, 0.2):
            if m.error():
                continue  # retriable: leaders and the coordinator moving
            p, o = m.partition(), m.offset()
            hi = self.max_seen.get(p, -1)
            assert o <= hi + 1, f"partition {p}: handed offset {o} after {hi}: offsets [{hi + 1}, {o}) skipped"
            if o <= hi:
                self.redelivered += 1
                # A rebalance starts from the committed offset, which is at
                # least the last successful commit.
                low = self.last_ok.get(p, 0)
                assert o >= low, f"partition {p}: handed offset {o} again, below its last successful commit {low}"
            if p in self.resume_at:
                allowed = self.resume_at.pop(p)
                assert o in allowed, f"partition {p}: the restarted consumer began at {o}, not at the last " \
                                     f"successful commit {self.last_ok[p]} (nor a failed one since: {sorted(allowed)})"
                self.resumed += 1
            self.max_seen[p] = max(hi, o)
            self.pos[p] = o + 1
            handed += 1
        if handed:
            self.commit()

    def commit(self):
        offsets = dict(self.pos)
        if not offsets:
            return False
        try:
            res = self.cons.commit(offsets=[TopicPartition(TOPIC, p, o) for p, o in offsets.items()],
                                   asynchronous=False)
            errors = [tp.error for tp in res if tp.error is not None]
        except KafkaException as e:
            errors = [e.args[0]]
        if errors:
            self.failed.append(str(errors[0]))
            self.ambiguous.append(offsets)
            return False
        with self.lock:
            self.ok += 1
            self.last_ok.update(offsets)
            self.ambiguous = []
        # Read-your-writes: exactly this, whichever coordinator answers.
        got = self.committed(list(offsets))
        assert got == offsets, f"committed() right after commit {self.ok} of {offsets} answered {got}"
        return True

    def committed(self, parts):
        """committed() of `parts`, asked again on errors; also checks that
        no committed offset went back since the last answer."""
        deadline = time.monotonic() + DEADLINE_S
        while True:
            try:
                res = self.cons.committed([TopicPartition(TOPIC, p) for p in parts], timeout=10)
                if all(tp.error is None for tp in res):
                    break
                last = [tp.error for tp in res]
            except KafkaException as e:
                last = e
            assert time.monotonic() < deadline, f"committed() failed for {DEADLINE_S}s: {last}"
            time.sleep(0.1)
        got = {tp.partition: tp.offset for tp in res}
        for p, o in got.items():
            before = self.seen_committed.get(p, -1001)
            assert o >= before, f"partition {p}: committed offset went back from {before} to {o}"
            self.seen_committed[p] = o
        return got

    def check_after_kill(self):
        """Before any new commit: the committed offsets are the last
        successful commit's, or one of the failed commits' since."""
        parts = sorted(self.last_ok)
        got = self.committed(parts)
        for p in parts:
            allowed = {self.last_ok[p]} | {a[p] for a in self.ambiguous if p in a}
            assert got[p] in allowed, f"partition {p}: committed() after the coordinator died answered " \
                                      f"{got[p]}, not the last successful commit {self.last_ok[p]} " \
                                      f"(nor a failed one since: {sorted(allowed)})"

    def commits(self):
        with self.lock:
            return self.ok


def wait_commits(c, g, n, what, step):
    """Runs the consumer until n more commits succeeded."""
    target = g.commits() + n
    deadline = time.monotonic() + DEADLINE_S
    while g.commits() < target:
        assert time.monotonic() < deadline, \
            f"{what}: {g.commits()} of {target} commits after {DEADLINE_S}s; failures {g.failed[-3:]}\n" \
            f"{c.describe(log_tail=2000)}"
        step()


def test_a_group_committing_through_coordinator_failovers_never_loses_or_skips(cluster):
    c = cluster
    load = Load(c)
    load.start()
    g = Group(c)
    kills = []
    try:
        wait_commits(c, g, COMMITS_BETWEEN, "before the first kill", g.step)
        # Every partition committed once, so that a restarted consumer has
        # a commit to resume each from (the first records handed may all
        # come from one partition's backlog).
        deadline = time.monotonic() + DEADLINE_S
        while len(g.last_ok) < PARTITIONS:
            assert time.monotonic() < deadline, f"only partitions {sorted(g.last_ok)} committed"
            g.step()
        for _ in range(KILLS):
            coord = c.wait_for(lambda: coordinator(c), DEADLINE_S, f"the coordinator of {GROUP}")
            # Killed while the consumer commits: most likely with a commit
            # in flight.
            killer = threading.Thread(target=lambda: (time.sleep(0.02), c.kill(coord)), name="killer")
            killer.start()
            while killer.is_alive():
                g.step()
            killer.join()
            kills.append(coord)
            print(f"{time.strftime('%T')} killed coordinator {coord} after {g.commits()} commits", flush=True)
            g.check_after_kill()
            wait_commits(c, g, COMMITS_BETWEEN, f"after broker {coord}, the coordinator, was killed", g.step)
            g.restart()
            wait_commits(c, g, COMMITS_BETWEEN, f"with a restarted consumer after broker {coord} was killed",
                         g.step)
            deadline = time.monotonic() + DEADLINE_S
            while g.resume_at:
                assert time.monotonic() < deadline, f"partitions {sorted(g.resume_at)} not resumed"
                g.step()
            new = c.wait_for(lambda: coordinator(c), DEADLINE_S, f"a new coordinator of {GROUP}")
            assert new != coord
            print(f"{time.strftime('%T')} new coordinator {new} after {g.commits()} commits; failures {len(g.failed)}",
                  flush=True)
            c.restart(coord)
            # Back in every ISR of __consumer_offsets before the next kill,
            # so that the next coordinator is never the last replica left.
            c.wait_for(lambda: offsets_isrs_full(c), DEADLINE_S, "full ISRs of __consumer_offsets")
            print(f"{time.strftime('%T')} restarted {coord}", flush=True)
            wait_commits(c, g, COMMITS_BETWEEN, f"after broker {coord} came back", g.step)
        # The last commit covers every partition and succeeds.
        deadline = time.monotonic() + DEADLINE_S
        while True:
            g.step()
            if len(g.pos) == PARTITIONS and g.commit():
                break
            assert time.monotonic() < deadline, f"no final commit of every partition; failures {g.failed[-3:]}"
        final = dict(g.last_ok)
    finally:
        g.cons.close()
        load.finish()
    assert sorted(final) == list(range(PARTITIONS))
    assert g.resumed == KILLS * PARTITIONS
    # OffsetFetch through the coordinator each live broker names.
    topics = {TOPIC: list(range(PARTITIONS))}
    want = {(TOPIC, p): (o, NONE) for p, o in final.items()}
    for via in c.live_ids():
        def ask():
            try:
                err, node = find_coordinator(c.broker(via).port, GROUP)
                if err != NONE or node not in c.live_ids():
                    return None
                err, got = offset_fetch_v3(c.broker(node).port, GROUP, topics)
            except (OSError, EOFError):
                return None
            return None if err in RETRIABLE else (node, err, got)
        node, err, got = c.wait_for(ask, DEADLINE_S, f"OffsetFetch of {GROUP} via broker {via}")
        assert (err, got) == (NONE, want), f"coordinator {node} (named by {via}) answered {err} {got}, not {want}"
    print(f"kills of {kills}: {g.ok} commits, {len(g.failed)} failed ({sorted(set(g.failed))[:3]}), "
          f"{g.redelivered} records handed again, {g.rebalances} assignments, {g.resumed} partitions resumed")
