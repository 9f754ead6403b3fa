"""Issue 33: a Jepsen-style checker of transactions under faults, in the
style of test_netns_faults.py (its cuts and views are netns_harness.py's).

Setup: three brokers over a three-member etcd, each in a network namespace
of its own; a topic TOPIC of PARTITIONS partitions, replication factor 3,
min.insync.replicas 2; an input topic IN_TOPIC fed by a plain idempotent
producer and an output topic OUT_TOPIC for the read-process-write stage.

Load (confluent-kafka-python over Debian's librdkafka 2.0.2):
- PRODUCERS transactional producers, a transactional id each, every
  transaction writing distinct values "t{producer}-{txn}-{i}" to two to four
  partitions, committing most and aborting ABORT_SHARE of them. Each
  transaction's outcome is recorded as the client saw it: committed (commit
  returned), aborted (abort returned, or commit was never asked: a
  coordinator commits only on EndTxn(commit)), unknown (commit raised a
  fatal error or did not finish within COMMIT_DEADLINE_S). A producer
  recovers as an application would: on an abortable error it aborts; on a
  fatal one (fenced, ...) it is replaced by a new instance with the same
  transactional id, which init_transactions (the coordinator then ends
  whatever the old one left open).
- Read-process-write: a read_committed consumer of IN_TOPIC (manually
  assigned, in group GROUP) and a transactional producer that writes one
  value "r-{txn}-{i}|{input partition}:{input offset}" to OUT_TOPIC per
  input record and sends the consumer's positions to the transaction. After
  each transaction the group's offsets are read (OffsetFetch with
  require_stable, KIP-447): they must be the new positions once a commit
  returned and the old ones after an abort; after an unknown outcome they
  say which it was, and the consumer resumes from them.
- Two read_committed consumers reading TOPIC and OUT_TOPIC from the start
  throughout, one assigned every partition, one a group member committing
  its offsets, recording every value they were handed and where.

Faults, one at a time, drawn from a seeded RNG (the seed is printed;
SLUICE_TXN_FAULTS_SEED replays the plan; victims follow the cluster's state
at the time): SIGKILL and restart of a partition leader (leader_kill) or of
a producer's transaction coordinator (coordinator_kill, FindCoordinator key
type 1); SIGSTOP of one of them past the session timeout (pause); a leader
cut off from its followers; a broker cut off from etcd; the controller
isolated from everybody; a 1|2 split of brokers and etcd members; and a
producer that stalls inside a transaction, some of its values written, for
longer than its transaction timeout (producer_stall: the coordinator aborts
the transaction and fences the producer, which then carries on as if
nothing happened). After each heal the test waits for full ISRs.

Checks at the end, after the load stopped, every cut healed and full ISRs
(each an anomaly kind in the summary; the test asserts none):
- lso_stuck: every partition's last stable offset (ListOffsets latest,
  read_committed) reaches its high watermark (read_uncommitted) within
  LSO_BOUND_S: TOPIC, OUT_TOPIC, IN_TOPIC and the group's partition of
  __consumer_offsets;
- aborted_read: no value of a transaction the client aborted is read by a
  read_committed consumer, during the run or at the end;
- torn: every transaction (unknown ones included) is visible to the final
  read_committed read whole or not at all, across partitions;
- lost_committed: every value of a transaction whose commit returned is
  read by the final read;
- uncommitted_read: every value read during the run belongs to a
  transaction visible at the end; read_moved: and is at the offset where
  it was read;
- duplicate / phantom: no value read twice by the final read, none that
  no transaction wrote;
- rpw_offsets: the group's offsets after each transaction as above, and
  an unknown transaction's outcome told by the offsets is the one its
  output shows;
- rpw_exactly_once: the final committed offset of each input partition is
  the number of its records consumed by committed transactions, and the
  committed output holds every input record below it exactly once and
  none at or above it;
- no_progress: every producer and the read-process-write stage commit a
  transaction after the last heal (within PROGRESS_S).

Seen and not an anomaly: librdkafka 2.0.2 sends EndTxn(abort) once it has
sent an AddPartitionsToTxn or AddOffsetsToTxn, answered or not. When none
took effect (lost in a cut, refused CONCURRENT_TRANSACTIONS while the
previous transaction's markers are written) the coordinator holds no open
transaction and answers INVALID_TXN_STATE, as Kafka's does, and the client
makes that fatal: the transaction counts as aborted (no commit was asked)
and the producer is replaced. Each transaction that met an error is
printed with what the client said.

Modes: by default a bounded run for CI (CI_FAULTS faults, every kind once);
SLUICE_TXN_FAULTS=N runs N faults drawn from all kinds. SLUICE_TXN_FAULTS_KEEP_LOGS,
a directory that receives the brokers' logs. Needs root and `ip netns`;
skipped otherwise. Everything the test makes (namespaces, bridge, veth
pairs, temporary directories, processes by pid) it removes.
"""

import faulthandler
import os
import random
import struct
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import netns_harness
from cluster_harness import LATEST, Cluster, list_offsets_request
from group_wire import find_coordinator, offset_fetch_v9
from netns_harness import Faults, agreed_leaders, watch_hold

TOPIC = "txn-faults"
PARTITIONS = 6
IN_TOPIC = "txn-in"
IN_PARTITIONS = 2
OUT_TOPIC = "txn-out"
OUT_PARTITIONS = 3
GROUP = "txn-faults-rpw"
TOPICS = {TOPIC: PARTITIONS, IN_TOPIC: IN_PARTITIONS, OUT_TOPIC: OUT_PARTITIONS}
PRODUCERS = 3
RPW_TID = "txn-faults-rpw"
ABORT_SHARE = 0.15
SESSION_TIMEOUT_MS = 4000
TXN_TIMEOUT_MS = 20000
CALL_TIMEOUT_S = 30       # one init/commit/abort call of the client
COMMIT_DEADLINE_S = 90    # retriable commit errors past this: the outcome is unknown
OFFSETS_DEADLINE_S = 120  # the group's offsets readable again (a fault's hold, a failover)
FAILOVER_S = 40           # leaders agreed on without a killed broker
STEADY_S = 90             # full ISRs after a heal
PROGRESS_S = 120          # a commit of every producer after the last heal
# The coordinator's timeout abort (transaction timeout, its 10 s sweep)
# and marker retries, on a busy two-core machine.
LSO_BOUND_S = TXN_TIMEOUT_MS / 1000 + 70
# A producer's stall inside a transaction: past its timeout and the
# coordinator's 10 s sweep for timed-out transactions.
STALL_S = TXN_TIMEOUT_MS / 1000 + 15
KINDS = ["leader_kill", "coordinator_kill", "pause", "leader_followers_cut", "etcd_cut",
         "controller_isolated", "split", "producer_stall"]
CI_FAULTS = 8
LONG_FAULTS = int(os.environ.get("SLUICE_TXN_FAULTS", "0"))
SEED = int(os.environ.get("SLUICE_TXN_FAULTS_SEED", str(int(time.time() * 1000) % 1_000_000)))

UNSTABLE_OFFSET_COMMIT = 88
T0 = time.monotonic()  # notes and fault lines say when, to be matched with each other and the brokers' logs


def txn_of(value):
    """The transaction name a value was written by: "t1-7" of "t1-7-2",
    "r-3" of "r-3-0|1:45"."""
    return value.split("|", 1)[0].rsplit("-", 1)[0]


def java_hash_abs(s):
    """Kafka's Utils.abs(String.hashCode()) of an ASCII string."""
    h = 0
    for ch in s:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h & 0x7FFFFFFF


@dataclass
class Txn:
    name: str
    values: list = field(default_factory=list)   # (topic, partition, value) handed to produce()
    outcome: str = "open"                         # committed / aborted / unknown
    commit_asked: bool = False
    note: str = ""
    inputs: list = field(default_factory=list)    # read-process-write: (partition, offset) consumed
    told_by_offsets: str = ""                     # read-process-write, unknown: what the offsets said

    def add_note(self, text):
        text = f"[{time.monotonic() - T0:.1f}s {time.strftime('%H:%M:%S')}] {text}"
        self.note = f"{self.note}; {text}" if self.note else text


# ------------------------------------------------------------ cluster views

def leaders_of(c, exclude=()):
    return c.wait_for(lambda: agreed_leaders(c, TOPIC, PARTITIONS, exclude), FAILOVER_S,
                      f"a leader agreed on for every partition of {TOPIC} (not {exclude})")


def full_isr(c):
    return netns_harness.full_isr(c, TOPICS)


def live_leader_of(c, topic, partition):
    """(host, port) of the leader a live broker names, or None."""
    for n in c.live_ids():
        try:
            t = c.metadata_from(n, timeout=2.0).topics.get(topic)
        except (OSError, EOFError, struct.error):
            continue
        if t and partition in t.partitions and t.partitions[partition].leader in c.live_ids():
            b = c.broker(t.partitions[partition].leader)
            return b.host, b.port
    return None


def coordinator_of(c, key, key_type):
    """The live broker FindCoordinator names for `key`, or None."""
    for n in c.live_ids():
        b = c.broker(n)
        try:
            err, node = find_coordinator(b.port, key, timeout=3.0, key_type=key_type, host=b.host)
        except (OSError, EOFError, struct.error):
            continue
        if err == 0 and node in c.live_ids():
            return node
    return None


def group_offsets(c, deadline):
    """The group's committed offset of each IN_TOPIC partition (0 when
    none), read with require_stable: retried through pending transactional
    offsets, coordinator moves and faults until `deadline`; None past it."""
    while time.monotonic() < deadline:
        node = coordinator_of(c, GROUP, 0)
        if node is not None:
            b = c.broker(node)
            try:
                err, got = offset_fetch_v9(b.port, GROUP, {IN_TOPIC: list(range(IN_PARTITIONS))}, timeout=5.0,
                                           host=b.host)
            except (OSError, EOFError, struct.error, AssertionError):
                err, got = -1, {}
            if err == 0 and all(got.get((IN_TOPIC, p), (0, -1))[1] == 0 for p in range(IN_PARTITIONS)):
                return {p: max(got[(IN_TOPIC, p)][0], 0) for p in range(IN_PARTITIONS)}
        time.sleep(0.3)
    return None


# ------------------------------------------------------------ the workload

def said(err):
    """An error as a note: its name and what the client said."""
    return f"{err.name()} ({err.str()[:100]})"


def recoverable(err):
    """True when a transactional call may simply be made again."""
    return err.retriable() and not err.fatal() and not err.txn_requires_abort()


class Workload:
    """The producers, the read-process-write stage, the input feeder and the
    reader, each a thread; the records they keep are the checker's input."""

    def __init__(self, c):
        self.c = c
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.txns = {}                   # name -> Txn
        self.reads = {}                  # (topic, partition, offset) -> value, read_committed during the run
        self.read_conflicts = []
        self.read_errors = Counter()
        self.anomalies = defaultdict(list)  # found during the run (rpw_offsets)
        self.recreated = Counter()       # producer instances replaced, by thread
        self.errors = Counter()          # client errors seen, by name
        self.thread_errors = []
        self.fed = 0
        self.rpw_rewinds = 0
        self.last_commit = {}            # thread -> monotonic time of its last commit
        self.final_group_offsets = None  # set by the test at the end
        self.stall_asked = [threading.Event() for _ in range(PRODUCERS)]
        self.stall_done = [threading.Event() for _ in range(PRODUCERS)]
        self.stalled = []                # (transaction, outcome, note) of each stalled one
        names = [f"producer-{k}" for k in range(PRODUCERS)] + ["rpw", "feeder", "reader", "group-reader"]
        targets = [(self._produce, k) for k in range(PRODUCERS)] + \
                  [(self._rpw, None), (self._feed, None), (self._read, False), (self._read, True)]
        self.threads = [threading.Thread(target=self._guard, args=t, name=n, daemon=True)
                        for n, t in zip(names, targets)]

    def _guard(self, fn, arg):
        try:
            fn() if arg is None else fn(arg)
        except BaseException as e:
            with self.lock:
                self.thread_errors.append(f"{threading.current_thread().name}: {e!r}")
            raise

    def start(self):
        for t in self.threads:
            t.start()

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join(COMMIT_DEADLINE_S + 2 * CALL_TIMEOUT_S + 60)
            if t.is_alive():
                # Where it is stuck (a client call that never returns?), for
                # the report.
                faulthandler.dump_traceback(all_threads=True)
            assert not t.is_alive(), f"workload thread {t.name} did not stop"

    def counts(self):
        with self.lock:
            return Counter(t.outcome for t in self.txns.values())

    def _note_error(self, err):
        with self.lock:
            self.errors[err.name()] += 1

    # -------------------------------------------------- transactional producers

    def _new_producer(self, tid):
        """A producer with transactional id `tid`, its transactions
        initialised (retried through faults); None once the load stops and
        it still cannot be made."""
        give_up = None
        while True:
            p = Producer({"bootstrap.servers": self.c.bootstrap, "transactional.id": tid, "linger.ms": 5,
                          "transaction.timeout.ms": TXN_TIMEOUT_MS, "message.timeout.ms": TXN_TIMEOUT_MS,
                          "request.timeout.ms": 10000, "socket.timeout.ms": 10000, "retry.backoff.ms": 100,
                          "topic.metadata.refresh.interval.ms": 2000})
            while True:
                if self.stop.is_set() and give_up is None:
                    give_up = time.monotonic() + COMMIT_DEADLINE_S
                if give_up is not None and time.monotonic() > give_up:
                    return None
                try:
                    p.init_transactions(CALL_TIMEOUT_S)
                    return p
                except KafkaException as e:
                    err = e.args[0]
                    self._note_error(err)
                    if recoverable(err):
                        continue
                    break  # fatal: another instance
            time.sleep(0.5)

    def _replace(self, p, tid, who):
        with self.lock:
            self.recreated[who] += 1
        del p
        return self._new_producer(tid)

    def _run(self, p, txn, body, commit):
        """Runs one transaction on producer `p`: begin, `body(p)` (which
        raises KafkaException as produce does), then commit or abort.
        Sets txn.outcome; returns True when the producer must be replaced."""
        try:
            p.begin_transaction()
            body(p)
        except KafkaException as e:
            err = e.args[0]
            self._note_error(err)
            if err.fatal() or not err.txn_requires_abort() and not recoverable(err):
                txn.outcome = "aborted"  # commit never asked
                txn.add_note(f"before commit: {said(err)}")
                return True
            commit = False
        if commit:
            txn.commit_asked = True
            deadline = time.monotonic() + COMMIT_DEADLINE_S
            while True:
                try:
                    p.commit_transaction(CALL_TIMEOUT_S)
                    txn.outcome = "committed"
                    return False
                except KafkaException as e:
                    err = e.args[0]
                    self._note_error(err)
                    if err.txn_requires_abort():
                        txn.add_note(f"commit: {said(err)}, aborted")
                        break
                    if recoverable(err) and time.monotonic() < deadline:
                        continue
                    txn.outcome = "unknown"
                    txn.add_note(f"commit: {said(err)}")
                    return True
        deadline = time.monotonic() + COMMIT_DEADLINE_S
        while True:
            try:
                p.abort_transaction(CALL_TIMEOUT_S)
                txn.outcome = "aborted"
                return False
            except KafkaException as e:
                err = e.args[0]
                self._note_error(err)
                if recoverable(err) and time.monotonic() < deadline:
                    continue
                # Without a commit asked for, the transaction cannot commit.
                txn.outcome = "unknown" if txn.commit_asked else "aborted"
                txn.add_note(f"abort: {said(err)}")
                return True

    def _begin(self, name, who):
        txn = Txn(name)
        with self.lock:
            self.txns[name] = txn
        return txn

    def _committed(self, who):
        with self.lock:
            self.last_commit[who] = time.monotonic()

    def _produce(self, k):
        tid = f"txn-faults-{k}"
        who = f"producer-{k}"
        rng = random.Random(f"{SEED}/{who}")
        p = self._new_producer(tid)
        j = 0
        while p is not None and not self.stop.is_set():
            txn = self._begin(f"t{k}-{j}", who)
            j += 1
            plan = [(part, n) for part in rng.sample(range(PARTITIONS), rng.randint(2, 4))
                    for n in range(rng.randint(1, 2))]

            def body(p, txn=txn, plan=plan):
                for i, (part, _) in enumerate(plan):
                    if i == len(plan) // 2 and self.stall_asked[k].is_set():
                        self._stall(k, p, txn)
                    v = f"{txn.name}-{i}"
                    while True:
                        try:
                            p.produce(TOPIC, value=v.encode(), partition=part)
                            break
                        except BufferError:
                            p.poll(0.1)
                    txn.values.append((TOPIC, part, v))
                p.poll(0)

            # A stalled transaction asks to commit: the coordinator aborted it meanwhile.
            commit = rng.random() >= ABORT_SHARE or self.stall_asked[k].is_set()
            replace = self._run(p, txn, body, commit=commit)
            if txn.outcome == "committed":
                self._committed(who)
            if self.stall_asked[k].is_set() and self.stall_done[k].is_set():
                with self.lock:
                    self.stalled.append((txn.name, txn.outcome, txn.note))
                self.stall_asked[k].clear()
            if replace:
                p = self._replace(p, tid, who)
            time.sleep(rng.uniform(0.02, 0.1))

    def _stall(self, k, p, txn):
        """Producer k stops inside `txn` for longer than its transaction
        timeout, as an application in a long pause, with some of its values
        in the logs; then it carries on as if nothing happened."""
        txn.add_note("stalled")
        p.flush(CALL_TIMEOUT_S)
        self.stop.wait(STALL_S)
        self.stall_done[k].set()

    def stall(self, k):
        """Asks producer k to stall in its next transaction; returns once
        that transaction has ended (False if it never did)."""
        self.stall_done[k].clear()
        self.stall_asked[k].set()
        deadline = time.monotonic() + STALL_S + COMMIT_DEADLINE_S + 2 * CALL_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.stall_done[k].is_set() and not self.stall_asked[k].is_set():
                return True
            time.sleep(0.2)
        return False

    # -------------------------------------------------- read-process-write

    def _rpw_consumer(self, positions):
        cons = Consumer({"bootstrap.servers": self.c.bootstrap, "group.id": GROUP,
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "socket.timeout.ms": 10000,
                         "topic.metadata.refresh.interval.ms": 2000, "fetch.wait.max.ms": 200})
        self._rewind(cons, positions)
        return cons

    @staticmethod
    def _rewind(cons, positions):
        """The consumer reads on from `positions` (what it fetched before is
        dropped, as an application seeks to its committed offsets)."""
        cons.assign([TopicPartition(IN_TOPIC, p, o) for p, o in positions.items()])

    def _rpw(self):
        who = "rpw"
        rng = random.Random(f"{SEED}/{who}")
        p = self._new_producer(RPW_TID)
        pos = group_offsets(self.c, time.monotonic() + OFFSETS_DEADLINE_S)
        assert pos is not None, "the group's offsets never readable at the start"
        cons = self._rpw_consumer(pos)
        j = 0
        try:
            while p is not None and not self.stop.is_set():
                start, nxt = dict(pos), dict(pos)
                batch, gap = [], False
                for m in cons.consume(rng.randint(1, 8), 0.5):
                    if m.error():
                        continue
                    part, off = m.partition(), m.offset()
                    if off < nxt[part]:
                        continue  # fetched before a rewind
                    if off > nxt[part]:
                        gap = True  # fetched before a rewind too, or lost: ask again from the position
                        break
                    batch.append((part, off))
                    nxt[part] = off + 1
                if gap:
                    with self.lock:
                        self.rpw_rewinds += 1
                    self._rewind(cons, pos)
                    continue
                if not batch:
                    continue
                txn = self._begin(f"r-{j}", who)
                j += 1
                txn.inputs = batch

                def body(p, txn=txn):
                    for i, (part, off) in enumerate(txn.inputs):
                        v = f"{txn.name}-{i}|{part}:{off}"
                        out = (part * 7 + off) % OUT_PARTITIONS
                        while True:
                            try:
                                p.produce(OUT_TOPIC, value=v.encode(), partition=out)
                                break
                            except BufferError:
                                p.poll(0.1)
                        txn.values.append((OUT_TOPIC, out, v))
                    p.send_offsets_to_transaction([TopicPartition(IN_TOPIC, q, o) for q, o in nxt.items()],
                                                  cons.consumer_group_metadata(), CALL_TIMEOUT_S)

                replace = self._run(p, txn, body, commit=rng.random() >= ABORT_SHARE)
                if replace:
                    p = self._replace(p, RPW_TID, who)
                    if p is None:
                        break
                # The group's offsets now: exactly the transaction's when it
                # committed, the previous ones when it aborted; an unknown
                # outcome was settled by the new instance's init_transactions.
                now = group_offsets(self.c, time.monotonic() + OFFSETS_DEADLINE_S)
                if now is None:
                    self._anomaly("rpw_offsets", f"{txn.name} ({txn.outcome}): the group's offsets unreadable "
                                                 f"for {OFFSETS_DEADLINE_S}s")
                    break
                if txn.outcome == "committed" and now != nxt:
                    self._anomaly("rpw_offsets", f"{txn.name} committed with offsets {nxt}, the group has {now}")
                elif txn.outcome == "aborted" and now != start:
                    self._anomaly("rpw_offsets", f"{txn.name} aborted ({txn.note}) at offsets {start}, the group "
                                                 f"has {now} (sent {nxt})")
                elif txn.outcome == "unknown":
                    txn.told_by_offsets = {str(nxt): "committed", str(start): "aborted"}.get(str(now), "")
                    if not txn.told_by_offsets:
                        self._anomaly("rpw_offsets", f"{txn.name} unknown: offsets before {start}, sent {nxt}, "
                                                     f"the group has {now}")
                if txn.outcome == "committed":
                    self._committed(who)
                if now != nxt:
                    self._rewind(cons, now)
                pos = now
        finally:
            cons.close()

    def _anomaly(self, kind, text):
        with self.lock:
            self.anomalies[kind].append(text)

    # -------------------------------------------------- feeder and reader

    def _feed(self):
        """A steady trickle into IN_TOPIC (idempotent, acks=all); a producer
        that dies of a fatal error is replaced."""
        def new():
            return Producer({"bootstrap.servers": self.c.bootstrap, "enable.idempotence": True, "acks": "all",
                             "linger.ms": 5, "message.timeout.ms": 3_600_000, "request.timeout.ms": 10000,
                             "topic.metadata.refresh.interval.ms": 2000})
        p = new()
        i = 0
        while not self.stop.is_set():
            try:
                for _ in range(4):
                    p.produce(IN_TOPIC, value=f"in-{i}".encode(), partition=i % IN_PARTITIONS)
                    i += 1
                p.poll(0)
            except BufferError:
                p.poll(0.1)
            except KafkaException as e:
                self._note_error(e.args[0])
                p = new()
            time.sleep(0.1)
        p.flush(60)
        self.fed = i

    def _read(self, in_group):
        """A read_committed reader of TOPIC and OUT_TOPIC: assigned every
        partition from the start, or (`in_group`) a member of a group that
        commits its offsets as it goes and resumes from them after faults."""
        conf = {"bootstrap.servers": self.c.bootstrap, "isolation.level": "read_committed",
                "socket.timeout.ms": 10000, "topic.metadata.refresh.interval.ms": 2000, "fetch.wait.max.ms": 200}
        if in_group:
            cons = Consumer({**conf, "group.id": "txn-faults-group-reader", "enable.auto.commit": True,
                             "auto.commit.interval.ms": 1000, "auto.offset.reset": "earliest",
                             "session.timeout.ms": 10000})
            cons.subscribe([TOPIC, OUT_TOPIC])
        else:
            cons = Consumer({**conf, "group.id": "txn-faults-reader", "enable.auto.commit": False})
            cons.assign([TopicPartition(t, p, OFFSET_BEGINNING) for t in (TOPIC, OUT_TOPIC)
                         for p in range(TOPICS[t])])
        try:
            while not self.stop.is_set():
                for m in cons.consume(500, 0.2):
                    if m.error():
                        self.read_errors[f"{'group' if in_group else 'assigned'}:{m.error().name()}"] += 1
                        continue
                    key, v = (m.topic(), m.partition(), m.offset()), m.value().decode()
                    with self.lock:
                        if self.reads.setdefault(key, v) != v:
                            self.read_conflicts.append((key, self.reads[key], v))
        finally:
            cons.close()


# ------------------------------------------------------------ the faults

def plan(rng, count):
    if LONG_FAULTS:
        return [rng.choice(KINDS) for _ in range(count)]
    out = list(KINDS)
    rng.shuffle(out)
    return (out + [rng.choice(KINDS) for _ in range(count)])[:count]


def run_fault(c, w, faults, rng, kind):
    """Makes one fault of `kind` and heals it; returns (what, healed at)."""
    leaders = leaders_of(c)
    part = rng.randrange(PARTITIONS)
    tids = [f"txn-faults-{k}" for k in range(PRODUCERS)] + [RPW_TID]
    tid = rng.choice(tids)
    hold = rng.uniform(6, 16) if LONG_FAULTS else rng.uniform(6, 10)

    def coordinator():
        return c.wait_for(lambda: coordinator_of(c, tid, 1), FAILOVER_S, f"a live coordinator of {tid}")

    if kind == "producer_stall":
        k = rng.randrange(PRODUCERS)
        ended = w.stall(k)
        return (f"producer {k} stalled {STALL_S:.0f}s inside a transaction"
                f"{'' if ended else ', which had not ended ' + str(COMMIT_DEADLINE_S) + 's later'}"), time.monotonic()
    if kind in ("leader_kill", "coordinator_kill"):
        victim = leaders[part] if kind == "leader_kill" else coordinator()
        c.kill(victim)
        leaders_of(c, exclude=(victim,))
        c.restart(victim)
        role = f"leader of p{part}" if kind == "leader_kill" else f"coordinator of {tid}"
        return f"broker {victim} ({role}) killed and restarted", time.monotonic()
    if kind == "pause":
        if rng.random() < 0.5:
            victim, role = leaders[part], f"leader of p{part}"
        else:
            victim, role = coordinator(), f"coordinator of {tid}"
        c.pause(victim)
        try:
            time.sleep(SESSION_TIMEOUT_MS / 1000 + rng.uniform(1, 4))
        finally:
            c.resume(victim)
        return f"broker {victim} ({role}) paused", time.monotonic()
    if kind == "leader_followers_cut":
        victim = leaders[part]
        heal = faults.from_followers(victim)
        what = f"leader {victim} of p{part} cut off from its followers for {hold:.1f}s"
    elif kind == "etcd_cut":
        victim = rng.choice(c.node_ids)
        heal = faults.etcd_only(victim)
        what = f"broker {victim} cut off from etcd for {hold:.1f}s"
    elif kind == "controller_isolated":
        victim = c.controller_id()
        heal = faults.isolate(victim)
        what = f"controller {victim} isolated for {hold:.1f}s"
    elif kind == "split":
        victim = rng.choice(c.node_ids)
        member = rng.choice(faults.members)
        heal = faults.split(victim, member)
        what = f"split: broker {victim} + etcd {member.name} | the rest, for {hold:.1f}s"
    else:
        raise ValueError(kind)
    try:
        dropped = watch_hold(c, victim, hold)
    finally:
        heal()
    what += f", dropped by the others after {dropped:.1f}s" if dropped is not None else ", still listed"
    return what, time.monotonic()


# ------------------------------------------------------------ the checks

def lso_settles(c, anomalies):
    """lso_stuck: polls every partition's read_committed and
    read_uncommitted latest offsets until they meet, within LSO_BOUND_S."""
    parts = [(t, p) for t, n in TOPICS.items() for p in range(n)]
    offsets_topic = c.metadata_from(c.live_ids()[0]).topics["__consumer_offsets"]
    parts.append(("__consumer_offsets", java_hash_abs(GROUP) % len(offsets_topic.partitions)))
    last = {}
    deadline = time.monotonic() + LSO_BOUND_S
    started = time.monotonic()
    took = {}
    while len(took) < len(parts) and time.monotonic() < deadline:
        for t, p in parts:
            if (t, p) in took:
                continue
            where = live_leader_of(c, t, p)
            if where is None:
                continue
            try:
                e1, lso, _ = list_offsets_request(where[1], t, p, LATEST, read_committed=True, host=where[0])
                e2, hw, _ = list_offsets_request(where[1], t, p, LATEST, read_committed=False, host=where[0])
            except (OSError, EOFError, struct.error, AssertionError):
                continue
            if e1 == 0 and e2 == 0:
                last[(t, p)] = (lso, hw)
                if lso == hw:
                    took[(t, p)] = time.monotonic() - started
        time.sleep(0.5)
    for tp in parts:
        if tp not in took:
            anomalies["lso_stuck"].append(f"{tp[0]}-{tp[1]}: (LSO, high watermark) {last.get(tp)} after "
                                          f"{LSO_BOUND_S:.0f}s")
    return {tp: v[0] for tp, v in last.items()}, max(took.values(), default=0)


def read_final(c, ends):
    """Every value of TOPIC and OUT_TOPIC a read_committed consumer reads up
    to `ends` ({(topic, partition): LSO}): {(topic, partition, offset): value}."""
    cons = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "txn-faults-final",
                     "isolation.level": "read_committed", "enable.auto.commit": False,
                     "enable.partition.eof": True})
    out = {}
    parts = [(t, p) for t in (TOPIC, OUT_TOPIC) for p in range(TOPICS[t])]
    pos = {tp: 0 for tp in parts}
    eof = set()
    try:
        cons.assign([TopicPartition(t, p, OFFSET_BEGINNING) for t, p in parts])
        deadline = time.monotonic() + 300

        def short():
            # A partition whose LSO was never learnt is read to its end.
            return {tp: (pos[tp], ends.get(tp)) for tp in parts
                    if tp not in eof and (tp not in ends or pos[tp] < ends[tp])}
        while short() and time.monotonic() < deadline:
            for m in cons.consume(1000, 0.5):
                tp = (m.topic(), m.partition())
                if m.error():
                    if m.error().code() == KafkaError._PARTITION_EOF and m.offset() >= ends.get(tp, 0):
                        eof.add(tp)
                    continue
                out[(m.topic(), m.partition(), m.offset())] = m.value().decode()
                pos[tp] = m.offset() + 1
        short = short()
        assert not short, f"the final read stopped short of the LSO: {short}"
    finally:
        cons.close()
    return out


def check(w, final, final_offsets, anomalies):
    """Every check but lso_stuck and no_progress; fills `anomalies`."""
    txns = w.txns
    count = Counter(final.values())
    where = {v: k for k, v in final.items()}
    for v, n in count.items():
        if n > 1:
            anomalies["duplicate"].append(f"{v} read {n} times")
    written = {x[2] for t in txns.values() for x in t.values}
    visible = Counter()
    for v in count:
        name = txn_of(v)
        if v not in written:
            anomalies["phantom"].append(f"{v} at {where[v]}: written by no transaction")
        else:
            visible[name] += 1
    whole = set()
    for name, t in txns.items():
        n, total = visible[name], len(t.values)
        if n == total and total:
            whole.add(name)
        if 0 < n < total:
            missing = [x for x in t.values if x[2] not in count]
            anomalies["torn"].append(f"{name} ({t.outcome}{', ' + t.note if t.note else ''}): {n} of {total} "
                                     f"values visible, missing {missing[:4]}")
        if t.outcome == "committed" and n < total:
            anomalies["lost_committed"].append(f"{name}: {total - n} of {total} values not read, e.g. "
                                               f"{[x for x in t.values if x[2] not in count][:4]}")
        if t.outcome == "aborted" and n:
            seen = [(x[2], where[x[2]]) for x in t.values if x[2] in where]
            anomalies["aborted_read"].append(f"{name} (aborted{', ' + t.note if t.note else ''}, commit "
                                             f"{'asked' if t.commit_asked else 'never asked'}): {n} of {total} "
                                             f"values read at the end: {seen[:4]}")
        if t.told_by_offsets and (t.told_by_offsets == "committed") != (name in whole):
            anomalies["rpw_offsets"].append(f"{name} unknown: the group's offsets said {t.told_by_offsets}, "
                                            f"{n} of {total} of its outputs visible")
    for key, v in sorted(w.reads.items()):
        name = txn_of(v)
        t = txns.get(name)
        if v not in written:
            anomalies["phantom"].append(f"{v} read at {key} during the run: written by no transaction")
        elif t.outcome == "aborted":
            anomalies["aborted_read"].append(f"{v} read at {key} during the run; {name} aborted"
                                             f"{' (' + t.note + ')' if t.note else ''}")
        elif name not in whole:
            anomalies["uncommitted_read"].append(f"{v} read at {key} during the run; {name} ({t.outcome}) not "
                                                 f"visible at the end")
        if key[2] < max(final_offsets.get(key[:2], 0), 0) and final.get(key) != v:
            anomalies["read_moved"].append(f"{v} read at {key} during the run, {final.get(key)} there now")
    for c in w.read_conflicts:
        anomalies["read_moved"].append(f"the reader was handed two values at {c[0]}: {c[1:]}")

    # Read-process-write: the committed output and the group's offsets.
    seen = Counter()
    consumed = Counter()
    for name in whole:
        t = txns[name]
        if name.startswith("r-"):
            for part, off in t.inputs:
                seen[(part, off)] += 1
                consumed[part] += 1
    for part in range(IN_PARTITIONS):
        o = w.final_group_offsets[part]
        if consumed[part] != o:
            anomalies["rpw_exactly_once"].append(f"{IN_TOPIC}-{part}: committed offset {o}, "
                                                 f"{consumed[part]} records consumed by committed transactions")
        missing = [off for off in range(o) if seen[(part, off)] == 0]
        twice = [off for off in range(o) if seen[(part, off)] > 1]
        beyond = sorted(off for (q, off) in seen if q == part and off >= o)
        for what, offs in (("missing from", missing), ("more than once in", twice), ("beyond the offset in", beyond)):
            if offs:
                anomalies["rpw_exactly_once"].append(f"{IN_TOPIC}-{part}: {len(offs)} inputs {what} the committed "
                                                     f"output, e.g. offsets {offs[:6]}")
    return whole


# ------------------------------------------------------------ the test

@pytest.fixture
def txn_cluster():
    c = Cluster(brokers=3, etcd=3, session_timeout_ms=SESSION_TIMEOUT_MS,
                extra_settings={"replica.lag.time.max.ms": "3000", "replica.fetch.wait.max.ms": "200",
                                "replica.fetch.backoff.ms": "200", "group.initial.rebalance.delay.ms": "0"})
    with netns_harness.placed_cluster(c, os.environ.get("SLUICE_TXN_FAULTS_KEEP_LOGS")) as placed:
        yield placed


def test_transactions_under_faults(txn_cluster):
    c, lab, nodes = txn_cluster
    count = LONG_FAULTS or CI_FAULTS
    print(f"\nSLUICE_TXN_FAULTS_SEED={SEED} faults={count} mode={'long' if LONG_FAULTS else 'ci'}", flush=True)
    rng = random.Random(SEED)
    started = time.monotonic()

    def txn_state_led():
        t = c.metadata_from(c.live_ids()[0]).topics.get("__transaction_state")
        return t if t and t.partitions and all(p.leader > 0 for p in t.partitions.values()) else None
    c.wait_for(txn_state_led, 90, "__transaction_state created and led")
    admin = AdminClient({"bootstrap.servers": c.bootstrap, "socket.timeout.ms": 10000})
    fs = admin.create_topics([NewTopic(t, num_partitions=n, replication_factor=3, config={"min.insync.replicas": "2"})
                              for t, n in TOPICS.items()], operation_timeout=20)
    for f in fs.values():
        f.result(30)
    c.wait_for(lambda: full_isr(c), 60, "full ISRs for the test's topics")

    w = Workload(c)
    w.start()
    faults = Faults(c, lab, nodes)
    report = []
    anomalies = defaultdict(list)
    try:
        c.wait_for(lambda: len(w.last_commit) == PRODUCERS + 1 and not w.thread_errors, 90,
                   "a first commit of every producer and of the read-process-write stage")
        for i, kind in enumerate(plan(rng, count)):
            t0 = time.monotonic()
            what, healed_at = run_fault(c, w, faults, rng, kind)
            c.wait_for(lambda: full_isr(c), STEADY_S, f"full ISRs after fault {i} ({what})")
            report.append((i, kind, what))
            print(f"[{t0 - T0:.1f}s {time.strftime('%H:%M:%S')}] fault {i:3d} {kind:21s} {what}; took {healed_at - t0:4.1f}s, full ISRs "
                  f"{time.monotonic() - healed_at:4.1f}s after; transactions {dict(w.counts())}", flush=True)
            time.sleep(rng.uniform(1, 4))
        healed = time.monotonic()

        def stalled():
            with w.lock:
                return sorted(n for n, at in w.last_commit.items() if at <= healed)
        while stalled() and time.monotonic() < healed + PROGRESS_S:
            time.sleep(0.5)
        stalled = stalled()
    finally:
        lab.heal_all()
        for n in c.node_ids:
            if c.broker(n).paused:
                c.resume(n)
        w.finish()
    if stalled:
        anomalies["no_progress"].append(f"no commit within {PROGRESS_S}s of the last heal: {stalled}")
    c.wait_for(lambda: full_isr(c), STEADY_S, "full ISRs at the end")

    ends, lso_took = lso_settles(c, anomalies)
    final = read_final(c, ends)
    w.final_group_offsets = group_offsets(c, time.monotonic() + OFFSETS_DEADLINE_S)
    assert w.final_group_offsets is not None, "the group's offsets unreadable at the end"
    for kind, items in w.anomalies.items():
        anomalies[kind] += items
    whole = check(w, final, ends, anomalies)

    outcomes = w.counts()
    unknown_seen = sum(1 for n, t in w.txns.items() if t.outcome == "unknown" and n in whole)
    kinds = ["lso_stuck", "aborted_read", "torn", "lost_committed", "uncommitted_read", "read_moved",
             "duplicate", "phantom", "rpw_offsets", "rpw_exactly_once", "no_progress"]
    print(f"SLUICE_TXN_FAULTS_SEED={SEED}: {len(report)} faults ({dict(Counter(r[1] for r in report))}) in "
          f"{time.monotonic() - started:.0f}s; transactions committed {outcomes['committed']}, aborted "
          f"{outcomes['aborted']}, unknown {outcomes['unknown']} ({unknown_seen} of them visible), open "
          f"{outcomes['open']}; read-process-write {sum(1 for n in w.txns if n.startswith('r-'))} transactions, "
          f"group offsets {w.final_group_offsets}, {w.fed} inputs fed, {w.rpw_rewinds} rewinds; values read "
          f"during the run {len(w.reads)}, at the end {len(final)}; LSOs met the high watermarks "
          f"{lso_took:.1f}s after the load stopped; producers replaced {dict(w.recreated)}; client errors "
          f"{dict(w.errors)}; reader errors {dict(w.read_errors)}", flush=True)
    noted = [f"{n}: {t.outcome}, {t.note}" for n, t in w.txns.items() if t.note]
    print(f"stalled transactions (transaction, outcome as the client saw it, errors): {w.stalled}", flush=True)
    print(f"transactions that met errors ({len(noted)}; commit asked, then aborted: "
          f"{sum(1 for t in w.txns.values() if t.commit_asked and t.outcome == 'aborted')}): {noted[:12]}",
          flush=True)
    print("anomalies: " + ", ".join(f"{k} {len(anomalies.get(k, []))}" for k in kinds), flush=True)
    problems = [f"{k}: {x}" for k in kinds for x in anomalies.get(k, [])[:10]]
    assert not w.thread_errors, f"SLUICE_TXN_FAULTS_SEED={SEED}: workload threads died: {w.thread_errors}"
    assert outcomes["open"] == 0, f"SLUICE_TXN_FAULTS_SEED={SEED}: transactions left open by the workload"
    assert not problems, f"SLUICE_TXN_FAULTS_SEED={SEED}\n" + "\n".join(problems)


# ------------------------------------------------------------ the checker itself

def _history(txns, final, reads=(), group_offsets=None):
    """A made-up run for check(): `txns` {name: (outcome, [values], inputs)},
    an outcome "unknown/X" being an unknown one the group's offsets told X
    of; `final` [(topic, partition, offset, value)]."""
    from types import SimpleNamespace
    w = SimpleNamespace(txns={}, reads=dict(reads), read_conflicts=[],
                        final_group_offsets=group_offsets or {p: 0 for p in range(IN_PARTITIONS)})
    for name, (outcome, values, inputs) in txns.items():
        outcome, _, told = outcome.partition("/")
        t = Txn(name, outcome=outcome, commit_asked=outcome != "aborted", inputs=list(inputs), told_by_offsets=told)
        t.values = [(OUT_TOPIC if name.startswith("r-") else TOPIC, 0, v) for v in values]
        w.txns[name] = t
    final = {(t, p, o): v for t, p, o, v in final}
    ends = defaultdict(int)
    for t, p, o in final:
        ends[(t, p)] = max(ends[(t, p)], o + 1)
    anomalies = defaultdict(list)
    check(w, final, ends, anomalies)
    return {k: v for k, v in anomalies.items() if v}


def test_the_checker_passes_a_consistent_history():
    got = _history({"t0-0": ("committed", ["t0-0-0", "t0-0-1"], []),
                    "t0-1": ("aborted", ["t0-1-0"], []),
                    "t0-2": ("unknown", ["t0-2-0", "t0-2-1"], []),
                    "t0-3": ("unknown", ["t0-3-0"], []),
                    "r-0": ("committed", ["r-0-0|0:0", "r-0-1|0:1"], [(0, 0), (0, 1)]),
                    "r-1": ("aborted", ["r-1-0|0:2"], [(0, 2)]),
                    "r-2": ("committed", ["r-2-0|0:2"], [(0, 2)]),
                    "r-3": ("unknown/aborted", ["r-3-0|0:3"], [(0, 3)])},
                   [(TOPIC, 0, 0, "t0-0-0"), (TOPIC, 1, 0, "t0-0-1"), (TOPIC, 0, 2, "t0-2-0"),
                    (TOPIC, 2, 0, "t0-2-1"), (OUT_TOPIC, 0, 0, "r-0-0|0:0"), (OUT_TOPIC, 1, 0, "r-0-1|0:1"),
                    (OUT_TOPIC, 0, 3, "r-2-0|0:2")],
                   reads={(TOPIC, 0, 0): "t0-0-0", (TOPIC, 2, 0): "t0-2-1"},
                   group_offsets={0: 3, 1: 0})
    assert got == {}


def test_the_checker_finds_planted_anomalies():
    got = _history({"t0-0": ("committed", ["t0-0-0", "t0-0-1"], []),     # one value lost: torn, lost
                    "t0-1": ("aborted", ["t0-1-0"], []),                  # read: aborted read
                    "t0-2": ("unknown", ["t0-2-0", "t0-2-1"], []),        # half visible: torn
                    "t0-3": ("unknown", ["t0-3-0"], []),                  # invisible but read during the run
                    "t0-4": ("committed", ["t0-4-0"], []),                # read twice at the end
                    "r-0": ("committed", ["r-0-0|0:0", "r-0-1|0:1"], [(0, 0), (0, 1)]),
                    "r-1": ("committed", ["r-1-0|0:1"], [(0, 1)]),        # input 0:1 twice, 0:2 never
                    "r-2": ("unknown/committed", ["r-2-0|0:2"], [(0, 2)])},  # the offsets said committed
                   [(TOPIC, 0, 0, "t0-0-0"), (TOPIC, 0, 1, "t0-1-0"), (TOPIC, 0, 2, "t0-2-0"),
                    (TOPIC, 0, 3, "t0-4-0"), (TOPIC, 0, 4, "t0-4-0"), (TOPIC, 0, 5, "x9-9-9"),
                    (OUT_TOPIC, 0, 0, "r-0-0|0:0"), (OUT_TOPIC, 0, 1, "r-0-1|0:1"), (OUT_TOPIC, 0, 2, "r-1-0|0:1")],
                   reads={(TOPIC, 1, 0): "t0-3-0", (TOPIC, 0, 1): "t0-1-0", (TOPIC, 0, 2): "t0-4-0"},
                   group_offsets={0: 4, 1: 0})
    assert set(got) == {"torn", "lost_committed", "aborted_read", "uncommitted_read", "duplicate", "phantom",
                        "read_moved", "rpw_exactly_once", "rpw_offsets"}, got
    assert len(got["torn"]) == 2 and len(got["aborted_read"]) == 2, got
    text = "\n".join(got["rpw_exactly_once"])
    assert "committed offset 4, 3 records" in text and "more than once" in text and "missing" in text, text
