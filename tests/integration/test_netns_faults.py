"""Issue 31, "Tests the fault suite lacks": mixed faults with every broker
and etcd member in a network namespace of its own (netns_harness.py), so
that single links can be cut, not only a whole broker as test_faults.py's
proxies do.

Setup: three brokers (broker.rack "rack-N") over a three-member etcd, one
topic of PARTITIONS partitions, replication factor 3, min.insync.replicas
2, session timeout 4000 ms, replica.lag.time.max.ms 3000.

Faults, one at a time, drawn from a seeded RNG (the seed is printed; set
SLUICE_NETNS_SEED to replay a run):
- etcd_cut: a broker cut off from every etcd member and nothing else, then
  healed; it must come back (registered, in every ISR) without a restart;
- leader_etcd_cut: the same against a partition's leader, whose clients and
  followers still reach it;
- leader_followers_cut: a leader cut off from the other two brokers only
  (it keeps etcd and its clients);
- controller_isolated: the controller cut off from everybody: brokers,
  etcd members, and this test's clients;
- split: the brokers split 1|2 with etcd members on both sides (one broker
  and one etcd member against two and two; the test's clients reach both);
- kill: SIGKILL of a broker and a restart on the same data directory once
  the others moved its leaderships (long mode only);
- pause: SIGSTOP held past the session timeout, then SIGCONT (long mode only).

Load during the faults: PRODUCERS idempotent acks=all producers writing
distinct values "w{producer}-p{partition}-{seq}", recording each
acknowledged value's (partition, offset); a consumer group member reading
the topic; a follower-reading consumer (KIP-392: client.rack of one broker,
so leaders elsewhere redirect it to that broker's replica) recording every
record it was handed.

After each heal, every partition must take an acks=all write again: a
probe (raw Produce, acks=-1, to the partition's current leader) is retried
until it is answered without error; the time from the heal is recorded.
The bound asserted is PROBE_LIMIT_S (60 s: session timeout, an election,
ISR re-additions and client retries, on a busy 2-core machine); the
issue's 30 s target is reported per fault and flagged when missed.

The checks at the end, after healing everything and waiting for full ISRs:
1. every acknowledged value is in the log exactly at its acknowledged
   offset (0 lost, 0 moved);
2. no value is in the log twice (idempotence);
3. every record any consumer was handed is still at the offset it was read;
4. replicas identical below the high watermark: the leaders' high
   watermarks are read (ListOffsets) once the load stopped and every
   follower caught up, the brokers are stopped cleanly, and each
   partition's segment files are parsed on every broker and compared batch
   by batch (base offset, last offset delta, partition leader epoch, CRC)
   below that high watermark; every broker's meta/high_watermarks
   checkpoint must have reached it too;
5. no broker needed a restart to rejoin: a broker cut off from etcd (or
   from anything) keeps its pid and is back in every ISR by itself;
6. every partition takes acks=all writes again within PROBE_LIMIT_S of
   each heal.

Modes: by default a bounded run for CI (CI_FAULTS faults, each kind of
link cut once, in a seeded order); SLUICE_NETNS_FAULTS=N runs N faults of
every kind, for the issue's run of at least 50. SLUICE_NETNS_KEEP_LOGS, a
directory that receives the brokers' logs. Needs root and `ip netns`;
skipped otherwise. Everything the test makes (namespaces, bridge, veth
pairs, temporary directories, processes by pid) it removes.

Known (reported, and failed only with SLUICE_NETNS_STRICT=1): idempotent
producers that die with a fatal OUT_OF_ORDER_SEQUENCE_NUMBER (librdkafka
2.0.2) when a partition's leadership moves while they have a batch in
flight. Nothing acknowledged is lost, so checks 1-6 stay asserted. Seen
three ways, two of them broker bugs since fixed:
- fixed: in a 1|2 split the minority broker, whose etcd member knows no
  leader, went on leading at its old epoch (it cannot tell that from an
  etcd quorum loss); now each partition it leads decides by its followers
  (replication/leadership_gate.h, test_etcd_cut.py's
  test_the_minority_broker_of_a_split_stops_leading);
- fixed: after an etcd-only cut healed, the broker registered again and
  served produce for partitions it led before, before it had applied the
  current metadata; the gate now refuses until it has;
- not the broker's doing: a leader isolated from the clients too cannot
  answer, the client times the request out (possibly persisted) and the
  next leader, which truncated that batch away, answers the next sequence
  OUT_OF_ORDER; librdkafka 2.0.2 makes that fatal.
"""

import os
import random
import struct
import threading
import time
from collections import Counter, defaultdict

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from cluster_harness import Cluster, _kstr, _request, produce_request
from log_files import partition_dir, read_batches, read_hw_checkpoint
import netns_harness
from netns_harness import Faults, watch_hold

TOPIC = "netns"
PARTITIONS = 3
PRODUCERS = 3
SESSION_TIMEOUT_MS = 4000
LAG_MAX_MS = 3000
CI_FAULTS = 5
LONG_FAULTS = int(os.environ.get("SLUICE_NETNS_FAULTS", "0"))
STRICT = os.environ.get("SLUICE_NETNS_STRICT") == "1"  # known broker bugs fail the test too
SEED = int(os.environ.get("SLUICE_NETNS_SEED", str(int(time.time() * 1000) % 1_000_000)))
FAILOVER_S = 40      # a leader agreed on for every partition after a fault
STEADY_S = 60        # full ISRs after a heal
PROBE_LIMIT_S = 60   # acks=all taken again after a heal (asserted)
TARGET_S = 30        # the target (reported)
PRODUCE_BATCH = 5
PRODUCE_PAUSE_S = 0.03  # ~150 messages a second per producer: the point is faults, not load
MAX_OUTSTANDING = 2000
MESSAGE_TIMEOUT_MS = 3_600_000  # longer than any run: nothing is given up on for lack of time

NETWORK_KINDS = ["etcd_cut", "leader_etcd_cut", "leader_followers_cut", "controller_isolated", "split"]
PROCESS_KINDS = ["kill", "pause"]


# ------------------------------------------------------------ raw requests

def list_offsets_latest(host, port, partitions, timeout=5.0):
    """ListOffsets v4, LATEST (the high watermark), read_uncommitted, for
    `partitions` of TOPIC; returns {partition: (error, offset, leader epoch)}."""
    body = struct.pack(">ib", -1, 0)
    body += struct.pack(">i", 1) + _kstr(TOPIC) + struct.pack(">i", len(partitions))
    for p in partitions:
        body += struct.pack(">iiq", p, -1, -1)
    r = _request(port, 2, 4, body, timeout, host=host)
    r.take(">i")
    out = {}
    for _ in range(r.take(">i")):
        r.string()
        for _ in range(r.take(">i")):
            p, err, _ts, off, epoch = r.take(">ihqqi")
            out[p] = (err, off, epoch)
    return out


# ------------------------------------------------------------ cluster views

def agreed_leaders(c, exclude=()):
    return netns_harness.agreed_leaders(c, TOPIC, PARTITIONS, exclude)


def full_isr(c):
    return netns_harness.full_isr(c, {TOPIC: PARTITIONS})


# ------------------------------------------------------------ the workload

class Workload:
    def __init__(self, c, follower_rack_node):
        self.c = c
        self.bootstrap = c.bootstrap
        self.follower_rack_node = follower_rack_node
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.sent = 0
        self.acked = {}    # value -> (partition, offset)
        self.failed = {}   # value -> error
        self.fatal = []
        self.acked_count = Counter()
        self.reads = {"group": {}, "follower": {}}  # (partition, offset) -> value
        self.read_conflicts = []  # a consumer handed two values at one offset
        self.read_errors = Counter()
        self.unflushed = []
        self.thread_errors = []  # a workload thread that died: the load it carried stopped
        self.threads = [threading.Thread(target=self._guard, args=(self._produce, k), name=f"producer-{k}",
                                         daemon=True) for k in range(PRODUCERS)]
        self.threads += [threading.Thread(target=self._guard, args=(self._consume, kind), name=f"consumer-{kind}",
                                          daemon=True) for kind in self.reads]

    def _guard(self, fn, arg):
        try:
            fn(arg)
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
            t.join(120)
            assert not t.is_alive(), f"workload thread {t.name} did not stop"

    def _on_delivery(self, err, msg):
        v = msg.value().decode()
        with self.lock:
            if err is None:
                self.acked[v] = (msg.partition(), msg.offset())
                self.acked_count[msg.partition()] += 1
            else:
                self.failed[v] = str(err)

    def _new_producer(self, dead):
        def on_error(err):
            if err.fatal() and not dead.is_set():
                dead.set()
                with self.lock:
                    self.fatal.append(str(err))
        return Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 5, "message.timeout.ms": MESSAGE_TIMEOUT_MS,
                         "request.timeout.ms": 10000, "socket.timeout.ms": 10000, "retry.backoff.ms": 100,
                         "topic.metadata.refresh.interval.ms": 2000, "error_cb": on_error})

    def _poll(self, p, timeout, dead, k):
        """p.poll(); poll() too raises a producer's fatal error."""
        try:
            p.poll(timeout)
        except KafkaException as e:
            err = e.args[0]
            if not (err.fatal() or err.code() == KafkaError._FATAL):
                raise
            if not dead.is_set():
                dead.set()
                with self.lock:
                    self.fatal.append(f"producer {k}: {err}")

    def _produce(self, k):
        dead = threading.Event()  # this producer hit a fatal error
        p = self._new_producer(dead)
        seq = [0] * PARTITIONS
        mine = 0  # values this producer handed over
        i = 0
        while not self.stop.is_set():
            if dead.is_set():
                # The idempotent producer is unusable: the checker reports
                # self.fatal; a new one (a new producer id) keeps the load
                # going. Values the dead one held get no report: unchecked.
                try:
                    p.flush(5)
                except KafkaException:
                    pass  # its fatal error, counted already
                dead = threading.Event()
                p = self._new_producer(dead)
            if len(p) >= MAX_OUTSTANDING:
                self._poll(p, 0.05, dead, k)
                continue
            for _ in range(PRODUCE_BATCH):
                part = i % PARTITIONS
                v = f"w{k}-p{part}-{seq[part]}"
                try:
                    p.produce(TOPIC, value=v.encode(), partition=part, on_delivery=self._on_delivery)
                except BufferError:
                    break
                except KafkaException as e:
                    # produce() of a producer in a fatal state raises _FATAL,
                    # whose error is not itself flagged fatal, often before
                    # error_cb ran: count it here then.
                    err = e.args[0]
                    if not (err.fatal() or err.code() == KafkaError._FATAL):
                        raise
                    if not dead.is_set():
                        dead.set()
                        with self.lock:
                            self.fatal.append(f"producer {k}: {err}")
                    break
                seq[part] += 1
                i += 1
                mine += 1
            self._poll(p, 0, dead, k)
            time.sleep(PRODUCE_PAUSE_S)
        left = p.flush(120)
        with self.lock:
            self.sent += mine
            self.unflushed.append(left)

    def _consume(self, kind):
        conf = {"bootstrap.servers": self.bootstrap, "enable.auto.commit": True,
                "isolation.level": "read_uncommitted", "auto.offset.reset": "earliest",
                "socket.timeout.ms": 10000, "topic.metadata.refresh.interval.ms": 2000,
                "fetch.wait.max.ms": 200, "session.timeout.ms": 10000}
        if kind == "group":
            conf["group.id"] = "netns-group"
            cons = Consumer(conf)
            cons.subscribe([TOPIC])
        else:
            conf["group.id"] = "netns-follower"  # no subscription: offsets are not committed
            conf["enable.auto.commit"] = False
            conf["client.rack"] = f"rack-{self.follower_rack_node}"
            cons = Consumer(conf)
            cons.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        seen = self.reads[kind]
        try:
            while not self.stop.is_set():
                for m in cons.consume(500, 0.2):
                    if m.error():
                        self.read_errors[f"{kind}:{m.error().name()}"] += 1
                        continue
                    key, v = (m.partition(), m.offset()), m.value().decode()
                    if seen.setdefault(key, v) != v:
                        self.read_conflicts.append((kind, key, seen[key], v))
        finally:
            cons.close()

    def acked_on_each(self):
        with self.lock:
            return [self.acked_count[p] for p in range(PARTITIONS)]


# ------------------------------------------------------------ the faults

def leaders_now(c, timeout=FAILOVER_S):
    return c.wait_for(lambda: agreed_leaders(c), timeout, "a leader agreed on for every partition")


def probe_acks_all(c, fault_no, since):
    """Retries a raw acks=all produce on every partition until each is
    answered without error; returns ({partition: seconds since `since`},
    {value: (partition, offset)} acknowledged). Fails past PROBE_LIMIT_S."""
    took, acked = {}, {}
    attempt = 0
    deadline = since + PROBE_LIMIT_S
    while len(took) < PARTITIONS:
        leaders = None
        for n in c.live_ids():
            try:
                v = c.metadata_from(n, timeout=2.0)
                t = v.topics.get(TOPIC)
                if t and all(p.leader in c.node_ids for p in t.partitions.values()):
                    leaders = {i: p.leader for i, p in t.partitions.items()}
                    break
            except (OSError, EOFError, struct.error):
                continue
        for part in range(PARTITIONS):
            if part in took or leaders is None:
                continue
            attempt += 1
            value = f"probe-{fault_no}-p{part}-{attempt}"
            b = c.broker(leaders[part])
            try:
                err, off = produce_request(b.port, TOPIC, part, value.encode(), acks=-1, timeout=5.0,
                                           host=b.host)
            except (OSError, EOFError, struct.error, AssertionError):
                continue
            if err == 0:
                took[part] = time.monotonic() - since
                acked[value] = (part, off)
        if len(took) < PARTITIONS:
            if time.monotonic() > deadline:
                raise AssertionError(f"fault {fault_no}: partitions {sorted(set(range(PARTITIONS)) - set(took))} "
                                     f"took no acks=all write within {PROBE_LIMIT_S}s of the heal\n{c.describe()}")
            time.sleep(0.3)
    return took, acked


def plan(rng, count):
    if LONG_FAULTS:
        # Network faults are the point: each twice as likely as a process fault.
        return [rng.choice(NETWORK_KINDS * 2 + PROCESS_KINDS) for _ in range(count)]
    out = list(NETWORK_KINDS)
    rng.shuffle(out)
    return out[:count]


def run_fault(c, faults, rng, kind, pids):
    """Injects one fault, holds it, undoes it; returns (description, the
    monotonic time of the heal, brokers that must rejoin without restart)."""
    leaders = leaders_now(c)
    controller = c.wait_converged(FAILOVER_S).controller
    part = rng.randrange(PARTITIONS)
    # Past the session timeout (4 s) always; etcd-only cuts up to 20 s, past
    # gRPC's keepalive (10 s, then 5 s for the answer), as in the runs where
    # a broker cut off from etcd for 7.5 s or more stayed out.
    hold = rng.uniform(8, 20) if kind in ("etcd_cut", "leader_etcd_cut") or LONG_FAULTS else rng.uniform(8, 12)
    if kind == "etcd_cut":
        victim = rng.choice(c.node_ids)
        heal = faults.etcd_only(victim)
        what = f"broker {victim} cut off from etcd for {hold:.1f}s"
    elif kind == "leader_etcd_cut":
        victim = leaders[part]
        heal = faults.etcd_only(victim)
        what = f"leader {victim} of p{part} cut off from etcd for {hold:.1f}s"
    elif kind == "leader_followers_cut":
        victim = leaders[part]
        heal = faults.from_followers(victim)
        what = f"leader {victim} of p{part} cut off from its followers for {hold:.1f}s"
    elif kind == "controller_isolated":
        victim = controller
        heal = faults.isolate(victim)
        what = f"controller {victim} isolated for {hold:.1f}s"
    elif kind == "split":
        victim = rng.choice(c.node_ids)
        member = rng.choice(faults.members)
        heal = faults.split(victim, member)
        what = f"split: broker {victim} + etcd {member.name} | the rest, for {hold:.1f}s"
    elif kind == "kill":
        victim = rng.choice(c.node_ids)
        c.kill(victim)
        c.wait_for(lambda: agreed_leaders(c, exclude=(victim,)), FAILOVER_S,
                   f"leaders other than killed broker {victim}")
        c.restart(victim)
        pids[victim] = c.broker(victim).pid
        return f"broker {victim} killed and restarted", time.monotonic(), []
    elif kind == "pause":
        victim = rng.choice(c.node_ids)
        c.pause(victim)
        try:
            time.sleep(SESSION_TIMEOUT_MS / 1000 + rng.uniform(1, 6))
        finally:
            c.resume(victim)
        return f"broker {victim} paused", time.monotonic(), [victim]
    else:
        raise ValueError(kind)
    try:
        dropped = watch_hold(c, victim, hold)
    finally:
        heal()
    what += (f", dropped by the others after {dropped:.1f}s" if dropped is not None
             else ", still listed by the others")
    return what, time.monotonic(), [victim]


# ------------------------------------------------------------ the test

@pytest.fixture
def netns_cluster():
    c = Cluster(brokers=3, etcd=3, session_timeout_ms=SESSION_TIMEOUT_MS,
                extra_settings={"replica.lag.time.max.ms": str(LAG_MAX_MS),
                                "replica.fetch.wait.max.ms": "200",
                                "replica.fetch.backoff.ms": "200"})
    for n in c.node_ids:
        c.broker(n).settings["broker.rack"] = f"rack-{n}"
    with netns_harness.placed_cluster(c, os.environ.get("SLUICE_NETNS_KEEP_LOGS")) as placed:
        yield placed


def test_mixed_network_faults_lose_nothing_and_replicas_agree(netns_cluster):
    c, lab, nodes = netns_cluster
    count = LONG_FAULTS or CI_FAULTS
    print(f"\nSLUICE_NETNS_SEED={SEED} faults={count} mode={'long' if LONG_FAULTS else 'ci'}")
    rng = random.Random(SEED)
    started = time.monotonic()

    a = AdminClient({"bootstrap.servers": c.bootstrap, "socket.timeout.ms": 10000})
    fs = a.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=3,
                                   config={"min.insync.replicas": "2"})], operation_timeout=20)
    fs[TOPIC].result(30)
    c.wait_for(lambda: full_isr(c), 30, "full ISRs for " + TOPIC)
    leaders = leaders_now(c)
    # The follower reader's rack: a broker that follows partition 0 now (leaders move later).
    follower = next(n for n in c.node_ids if n != leaders[0])
    w = Workload(c, follower)
    w.start()
    faults = Faults(c, lab, nodes)
    pids = {n: c.broker(n).pid for n in c.node_ids}
    probes = {}
    report = []
    try:
        c.wait_for(lambda: all(x >= 20 for x in w.acked_on_each()), 60, "the first acknowledgements")
        for i, kind in enumerate(plan(rng, count)):
            t0 = time.monotonic()
            what, healed_at, rejoin = run_fault(c, faults, rng, kind, pids)
            took, acked = probe_acks_all(c, i, healed_at)
            probes.update(acked)
            c.wait_for(lambda: full_isr(c), STEADY_S, f"full ISRs after fault {i} ({what})")
            back = time.monotonic() - healed_at
            # (5) nobody was restarted to rejoin: the same processes run.
            for n in rejoin:
                assert c.broker(n).pid == pids[n] and c.broker(n).running(), \
                    f"broker {n} was restarted or died after fault {i} ({what})"
            worst = max(took.values())
            report.append((i, kind, what, worst, back))
            print(f"fault {i:3d} {kind:20s} {what}: acks=all on every partition {worst:5.1f}s after the heal"
                  f"{' (over the ' + str(TARGET_S) + 's target)' if worst > TARGET_S else ''}, full ISRs "
                  f"after {back:5.1f}s; fault took {healed_at - t0:5.1f}s; acked {w.acked_on_each()}",
                  flush=True)
        before = w.acked_on_each()
        c.wait_for(lambda: all(x > b for x, b in zip(w.acked_on_each(), before)), 60,
                   "new acknowledgements on every partition after the last fault")
    finally:
        lab.heal_all()
        for n in c.node_ids:
            if c.broker(n).paused:
                c.resume(n)
        w.finish()
    assert sum(w.unflushed) == 0, f"{sum(w.unflushed)} messages never got a delivery report"
    c.wait_for(lambda: full_isr(c), STEADY_S, "full ISRs at the end")

    # The high watermarks once every follower caught up with an idle leader.
    def stable_hws():
        leaders = agreed_leaders(c)
        if leaders is None:
            return None
        hws = {}
        for part, l in leaders.items():
            b = c.broker(l)
            try:
                err, off, _e = list_offsets_latest(b.host, b.port, [part])[part]
            except (OSError, EOFError, struct.error, KeyError):
                return None
            if err != 0:
                return None
            hws[part] = off
        return hws
    hws = c.wait_for(stable_hws, 30, "every leader's high watermark")
    time.sleep(2)
    hws2 = c.wait_for(stable_hws, 30, "every leader's high watermark")
    assert hws == hws2, f"high watermarks still moving with no load: {hws} then {hws2}"

    final = read_all(c, hws)
    problems = []
    known_bugs = []
    summary = check_records(w, probes, final, hws, problems, known_bugs)

    # (4) Replicas identical below the high watermark, read from the files.
    for n in c.node_ids:
        rc = c.stop(n, timeout=30)
        assert rc == 0, f"broker {n} exited with {rc} on SIGTERM"
    mismatches = compare_replicas(c, hws, problems)
    elapsed = time.monotonic() - started
    faults_over = [r for r in report if r[3] > TARGET_S]
    print(f"SLUICE_NETNS_SEED={SEED}: {len(report)} faults ({Counter(r[1] for r in report)}) in {elapsed:.0f}s; "
          f"{summary}; replica mismatches {mismatches}; acks=all after heals: max "
          f"{max((r[3] for r in report), default=0):.1f}s, median "
          f"{sorted(r[3] for r in report)[len(report) // 2] if report else 0:.1f}s, over {TARGET_S}s: "
          f"{[(r[0], r[1], round(r[3], 1)) for r in faults_over]}; full ISRs after heals: max "
          f"{max((r[4] for r in report), default=0):.1f}s")
    for k in known_bugs:
        print(f"SLUICE_NETNS_SEED={SEED}: {k}")
    assert not problems, f"SLUICE_NETNS_SEED={SEED}\n" + "\n".join(problems)


def read_all(c, hws):
    """Every record of TOPIC below each partition's high watermark:
    {partition: [(offset, value)]}."""
    cons = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "netns-check",
                     "enable.auto.commit": False, "isolation.level": "read_uncommitted",
                     "enable.partition.eof": True})
    out = defaultdict(list)
    try:
        cons.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        pos = {p: 0 for p in range(PARTITIONS)}
        deadline = time.monotonic() + 300
        while any(pos[p] < hws[p] for p in pos) and time.monotonic() < deadline:
            for m in cons.consume(1000, 0.5):
                if m.error():
                    assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                    continue
                out[m.partition()].append((m.offset(), m.value().decode()))
                pos[m.partition()] = m.offset() + 1
        assert all(pos[p] >= hws[p] for p in pos), f"read only to {pos} of {hws}"
    finally:
        cons.close()
    return out


def check_records(w, probes, final, hws, problems, known_bugs):
    """Checks (1), (2), (3) and the producers' health; appends to
    `problems`; returns a one-line summary."""
    at, count = {}, Counter()
    for p, recs in final.items():
        for off, v in recs:
            if (p, off) in at:
                problems.append(f"the final read returned {p}/{off} twice")
            at[(p, off)] = v
            count[v] += 1
    acked = dict(w.acked)
    acked.update(probes)
    known = {v: po for v, po in acked.items() if po[1] is not None and po[1] >= 0}
    implicit = {v: po[0] for v, po in acked.items() if v not in known}
    lost = sorted((po, v, at.get(po)) for v, po in known.items() if at.get(po) != v)
    where = {v: k for k, v in at.items()}
    moved = [x for x in lost if x[1] in where]
    if lost:
        problems.append(f"(1) {len(lost)} acknowledged values not at their acknowledged offset, {len(moved)} of "
                        f"them elsewhere in the log (offset, value, found there): {lost[:10]}")
    lost_implicit = sorted((p, v) for v, p in implicit.items() if v not in where or where[v][0] != p)
    if lost_implicit:
        problems.append(f"(1) {len(lost_implicit)} values acknowledged without an offset are not in their "
                        f"partition: {lost_implicit[:10]}")
    dups = sorted((v, n) for v, n in count.items() if n > 1)
    if dups:
        problems.append(f"(2) {len(dups)} values in the log more than once: {dups[:10]}")
    gone = []
    for kind, seen in w.reads.items():
        gone += [(kind, k, v, at.get(k)) for k, v in seen.items() if k[1] < hws[k[0]] and at.get(k) != v]
        # Read past today's high watermark: it was truncated away.
        gone += [(kind, k, v, None) for k, v in seen.items() if k[1] >= hws[k[0]]]
    if gone:
        problems.append(f"(3) {len(gone)} records read during the faults are not at that offset now "
                        f"(consumer, (partition, offset), read, now): {sorted(gone)[:10]}")
    if w.thread_errors:
        problems.append(f"workload threads died: {w.thread_errors}")
    if w.read_conflicts:
        problems.append(f"(3) a consumer was handed two values at one offset: {w.read_conflicts[:10]}")
    strangers = [(k, v) for k, v in at.items() if not (v.startswith("w") or v.startswith("probe-"))
                 or (v.startswith("w") and int(v.split("-")[1][1:]) != k[0])]
    if strangers:
        problems.append(f"values never produced to their partition: {strangers[:10]}")
    # Reported, failed only with SLUICE_NETNS_STRICT=1 (the module
    # docstring, "Known"): fatal idempotent-producer errors after leader
    # moves, two of the three ways seen being broker bugs. A producer that
    # died so fails its queued messages too.
    if w.fatal:
        text = (f"KNOWN (see the module docstring): fatal producer errors {w.fatal[:5]}; "
                f"{len(w.failed)} messages failed delivery with them: {sorted(w.failed.items())[:5]}")
        (problems if STRICT else known_bugs).append(text)
    elif w.failed:
        problems.append(f"{len(w.failed)} messages failed delivery (non-retriable produce errors): "
                        f"{sorted(w.failed.items())[:10]}")
    return (f"sent {w.sent}, acknowledged {len(w.acked)} (+{len(probes)} probes; {len(implicit)} without an "
            f"offset), failed {len(w.failed)}, fatal {len(w.fatal)}, in the log {len(at)} (high watermarks "
            f"{hws}), lost {len([x for x in lost if x[1] not in where]) + len(lost_implicit)}, moved "
            f"{len(moved)}, duplicated {len(dups)}, read-and-gone {len(gone)} (group read "
            f"{len(w.reads['group'])}, follower read {len(w.reads['follower'])}, errors "
            f"{dict(w.read_errors)})")


def compare_replicas(c, hws, problems):
    """Check (4) on stopped brokers; returns the number of mismatches."""
    mismatches = 0
    for part in range(PARTITIONS):
        hw = hws[part]
        logs = {}
        for n in c.node_ids:
            b = c.broker(n)
            batches = [x for x in read_batches(partition_dir(b.data_dir, TOPIC, part)) if x[0] < hw]
            logs[n] = batches
            end = batches[-1][0] + batches[-1][1] + 1 if batches else 0
            if end < hw:
                mismatches += 1
                problems.append(f"(4) broker {n}'s log of p{part} ends at {end}, below the high watermark {hw}")
            cp = read_hw_checkpoint(b.data_dir).get((TOPIC, part))
            if cp is None or cp < hw:
                problems.append(f"(4) broker {n}'s meta/high_watermarks has p{part} at {cp}, below {hw}")
        ref_n = c.node_ids[0]
        for n in c.node_ids[1:]:
            a, b = logs[ref_n], logs[n]
            if a != b:
                mismatches += 1
                first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
                problems.append(
                    f"(4) p{part} below hw {hw}: broker {ref_n} and broker {n} differ at batch {first} "
                    f"((base, last delta, epoch, crc): {a[first:first + 3]} vs {b[first:first + 3]}; "
                    f"{len(a)} and {len(b)} batches)")
    return mismatches
