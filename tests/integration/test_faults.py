"""Issue 20's Jepsen-like test: twenty faults in a row against partition
leaders of a replicated topic while an idempotent acks=all producer writes,
then a checker that reads everything back.

Setup: three brokers over a three-member etcd (cluster_harness.py), one
topic of PARTITIONS partitions, replication factor 3, min.insync.replicas 2,
session timeout 4000 ms, replica.lag.time.max.ms 3000, replica fetch wait
and backoff 200 ms.

Workload, all during the faults:
- a producer thread (confluent_kafka, acks=all, enable.idempotence=true)
  writing "p{partition}-{seq}" to each partition in turn, seq counting up per
  partition, recording each delivery report (offset or error);
- a tailing consumer (read_uncommitted) recording every (partition, offset,
  value) it was handed;
- a high-watermark sampler: for every broker whose process runs and is not
  SIGSTOPped, for every partition that broker says it leads, a raw
  ListOffsets v4 (LATEST, read_uncommitted, which Sluice answers with the
  high watermark) straight to the broker's own port (bypassing the proxies
  below, so a cut-off broker is sampled too, as by a client on its side of
  the partition; a SIGSTOPped one is skipped), carrying the leader
  epoch the broker's Metadata gave as current_leader_epoch so that an answer
  comes only from a leader at that epoch, and kept only when the answer's
  leader epoch is that same epoch. The samples are (partition, epoch, HW).

Faults, one at a time, rotating over three kinds, each against the current
leader of partition i % PARTITIONS:
- kill: SIGKILL, wait until the other brokers elected another leader, start
  it again on the same data directory;
- pause: SIGSTOP, held until the other brokers elected another leader (which
  needs the session timeout to pass) and at least the session timeout plus a
  second, then SIGCONT;
- cut: the broker is cut off from the other brokers, from every client and
  from etcd, held like the pause, then healed.
  There is no iptables (nor tc qdisc support) on the machine, so the cut is
  made by TCP proxies in this process (FaultProxy): every broker advertises
  a proxy port instead of its own (advertised.listeners), so clients and the
  other brokers reach it only through that proxy, and every broker is given
  its own proxies to the etcd members (sluice.etcd.endpoints). Cutting a
  broker freezes, without closing, every proxied connection it owns or that
  goes to it: nothing is read or forwarded any more, so the peers' kernel
  buffers fill and their requests time out, as behind a network partition
  that drops packets. Healing lets the frozen connections go on, delivering
  what was held up (TCP retransmissions after a partition heals). New
  connections during the cut are accepted by the proxy and held the same
  way. Which broker owns a connection coming into a broker's proxy is found
  from /proc (the socket's inode among the broker's file descriptors). The
  proxies are threads of this test process: nothing outside it is changed,
  so there is nothing to undo on the machine; they stop in the fixture's
  teardown.

Between faults: every live broker agrees on a leader for every partition,
every ISR is full again, and the producer got new acknowledgements on every
partition (all bounded waits).

The checker:
- every acknowledged value is in the final read exactly once, at the offset
  its delivery report gave, and no two acknowledgements name one offset;
- per partition, acknowledged values appear in the order they were sent;
- no offset holds two different values across the views collected (the
  delivery reports, the tailing consumer, the final read), and everything
  the tailing consumer was handed is at the same offset in the final read
  (nothing consumed was later truncated);
- the high watermark never went backwards: a sample with leader epoch E is
  never below an earlier sample of the same partition with epoch <= E;
- no value that was never produced is in the log; duplicates of values that
  were not acknowledged are reported (printed), not failed;
- the idempotent producer never hit a fatal error, and no delivery report
  is an error: message.timeout.ms outlasts the test, so a failed delivery
  means the broker answered a produce with a non-retriable error.

For debugging (environment): SLUICE_FAULTS, fewer faults; SLUICE_FAULTS_KEEP_LOGS,
a directory that receives the brokers' logs and the producer's debug log;
SLUICE_FAULTS_DEBUG, the producer's librdkafka `debug` contexts (eos; add
msg,topic,metadata to see leader moves); SLUICE_FAULTS_LOG_LINES, how many
producer log lines are kept (5000).
"""

import asyncio
import collections
import logging
import os
import shutil
import struct
import threading
import time
from collections import Counter, defaultdict

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from cluster_harness import Cluster, _kstr, _request, metadata_request

TOPIC = "jepsen"
PARTITIONS = 3
FAULTS = int(os.environ.get("SLUICE_FAULTS", "20"))  # fewer only when debugging the test
SESSION_TIMEOUT_MS = 4000
LAG_MAX_MS = 3000
FAILOVER_S = SESSION_TIMEOUT_MS / 1000 + 8
STEADY_S = 40  # a full ISR and new acknowledgements after a fault
PRODUCE_INTERVAL_S = 0.004  # ~250 messages a second: the point is faults, not load
MAX_OUTSTANDING = 2000
MESSAGE_TIMEOUT_MS = 180000  # longer than the whole test: no message is given up on for lack of time


# ------------------------------------------------------------ the proxy

def _socket_inode(local_port, remote_port):
    """The inode of the TCP socket 127.0.0.1:local_port -> :remote_port, from /proc/net/tcp."""
    want_l, want_r = "%04X" % local_port, "%04X" % remote_port
    with open("/proc/net/tcp") as f:
        next(f)
        for line in f:
            parts = line.split()
            if parts[1].endswith(":" + want_l) and parts[2].endswith(":" + want_r):
                return parts[9]
    return None


def _owner(inode, pids):
    """The node id among {node: pid} whose process holds socket `inode`, or None."""
    target = f"socket:[{inode}]"
    for node, pid in pids.items():
        if pid is None:
            continue
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    if os.readlink(f"/proc/{pid}/fd/{fd}") == target:
                        return node
                except OSError:
                    pass
        except OSError:
            pass
    return None


class FaultProxy:
    """TCP proxies on 127.0.0.1 in one asyncio thread. Each proxy forwards
    to one upstream port; `target` is the node id behind it (a broker's
    front proxy) and `owner` the node id that alone connects through it (a
    broker's etcd proxy), either None. cut(n) freezes every connection whose
    owner or target is n; heal() lets them all go on."""

    def __init__(self, pids_fn):
        self._pids_fn = pids_fn  # -> {node id: pid}, for connections' owners
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="fault-proxy", daemon=True)
        self._servers = []
        self._cut = set()
        self._healed = None
        self._conns = set()
        self._thread.start()
        self._call(self._init())

    async def _init(self):
        self._healed = asyncio.Event()
        self._healed.set()

    def _call(self, coro, timeout=10):
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def add(self, upstream_port, target=None, owner=None):
        """A proxy to 127.0.0.1:upstream_port; returns its port."""
        return self._call(self._add(upstream_port, target, owner))

    async def _add(self, upstream_port, target, owner):
        async def handle(reader, writer):
            await self._serve(reader, writer, upstream_port, target, owner)
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        self._servers.append(server)
        return server.sockets[0].getsockname()[1]

    def cut(self, node):
        self._call(self._set_cut({node}))

    def heal(self):
        self._call(self._set_cut(set()))

    async def _set_cut(self, nodes):
        self._cut = set(nodes)
        if self._cut:
            self._healed.clear()
        else:
            self._healed.set()

    async def _gate(self, conn):
        while conn["target"] in self._cut or conn["owner"] in self._cut:
            await self._healed.wait()

    async def _serve(self, reader, writer, upstream_port, target, owner):
        conn = {"target": target, "owner": owner}
        if owner is None and target is not None:
            peer = writer.get_extra_info("peername")[1]
            here = writer.get_extra_info("sockname")[1]
            inode = _socket_inode(peer, here)
            if inode is not None:
                conn["owner"] = await asyncio.to_thread(_owner, inode, self._pids_fn())
        up_writer = None
        try:
            await self._gate(conn)  # a connection made during a cut waits, like an unanswered SYN
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", upstream_port)
            self._conns.add(writer)
            self._conns.add(up_writer)
            await asyncio.gather(self._pump(reader, up_writer, conn), self._pump(up_reader, writer, conn))
        except (OSError, asyncio.CancelledError):
            pass
        finally:
            for w in (writer, up_writer):
                if w is not None:
                    self._conns.discard(w)
                    w.close()

    async def _pump(self, reader, writer, conn):
        try:
            while True:
                await self._gate(conn)  # frozen: nothing read, the sender's buffers fill
                data = await reader.read(65536)
                if not data:
                    break
                await self._gate(conn)  # bytes read just before a cut wait for the heal
                writer.write(data)
                await writer.drain()
        except OSError:
            pass
        finally:
            try:
                writer.close()
            except OSError:
                pass

    def close(self):
        async def stop():
            self._cut = set()
            self._healed.set()
            for s in self._servers:
                s.close()
            for w in list(self._conns):
                w.close()
        try:
            self._call(stop())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)


# ------------------------------------------------------------ the cluster

@pytest.fixture
def proxied_cluster():
    """A three-broker cluster whose brokers are reached, by clients and by
    each other, only through FaultProxy, and reach etcd only through it."""
    c = Cluster(brokers=3, etcd=3, session_timeout_ms=SESSION_TIMEOUT_MS,
                extra_settings={"replica.lag.time.max.ms": str(LAG_MAX_MS),
                                "replica.fetch.wait.max.ms": "200",
                                "replica.fetch.backoff.ms": "200"})
    proxy = None
    try:
        proxy = FaultProxy(lambda: {n: c.broker(n).pid for n in c.node_ids})
        fronts = []
        for n in c.node_ids:
            b = c.broker(n)
            front = proxy.add(b.port, target=n)
            fronts.append(f"127.0.0.1:{front}")
            b.settings["advertised.listeners"] = f"PLAINTEXT://127.0.0.1:{front}"
            b.etcd_endpoints = ",".join(
                "http://127.0.0.1:%d" % proxy.add(m.client_port, owner=n) for m in c.etcd.members)
        c.proxied_bootstrap = ",".join(fronts)  # clients bootstrap through the proxies too
        c.start()
        yield c, proxy
    finally:
        try:
            if proxy is not None:
                proxy.close()
            keep = os.environ.get("SLUICE_FAULTS_KEEP_LOGS")  # a directory for the brokers' logs
            if keep:
                os.makedirs(keep, exist_ok=True)
                for n in c.node_ids:
                    shutil.copy(c.broker(n).log_path, os.path.join(keep, f"broker-{n}.log"))
                if getattr(c, "workload", None) is not None:
                    with open(os.path.join(keep, "producer.log"), "w") as f:
                        f.write("\n".join(c.workload.client_log) + "\n")
        finally:
            c.close()


# ------------------------------------------------------------ raw requests

def list_offsets_latest(port, partitions_epochs, timeout=2.0):
    """ListOffsets v4, LATEST, read_uncommitted, for {partition: leader
    epoch} of TOPIC; returns {partition: (error, offset, leader epoch)}."""
    body = struct.pack(">ib", -1, 0)  # replica id, isolation level read_uncommitted
    body += struct.pack(">i", 1) + _kstr(TOPIC) + struct.pack(">i", len(partitions_epochs))
    for p, e in partitions_epochs.items():
        body += struct.pack(">iiq", p, e, -1)
    r = _request(port, 2, 4, body, timeout)
    r.take(">i")  # throttle
    out = {}
    for _ in range(r.take(">i")):
        r.string()
        for _ in range(r.take(">i")):
            p, err, _ts, off, epoch = r.take(">ihqqi")
            out[p] = (err, off, epoch)
    return out


def epoch_end_offset(port, partition, epoch, timeout=5.0):
    """OffsetForLeaderEpoch v3 as a consumer: (error, epoch, end offset) of
    `epoch` of TOPIC's partition; the end of epoch E-1 is where E began."""
    body = struct.pack(">i", -1) + struct.pack(">i", 1) + _kstr(TOPIC)
    body += struct.pack(">i", 1) + struct.pack(">iii", partition, -1, epoch)
    r = _request(port, 23, 3, body, timeout)
    r.take(">i")  # throttle
    assert r.take(">i") == 1 and r.string() == TOPIC and r.take(">i") == 1
    err, _p, e, end = r.take(">hiiq")
    return err, e, end


# ------------------------------------------------------------ workload

class _DequeHandler(logging.Handler):
    def __init__(self, dq):
        super().__init__()
        self.dq = dq

    def emit(self, record):
        self.dq.append(f"{_wall(record.created)} {record.getMessage()}")


class Workload:
    """The producer, the tailing consumer and the high-watermark sampler."""

    def __init__(self, c):
        self.c = c
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.sent = {}  # value -> partition, every value handed to produce()
        self.acked = {}  # value -> (partition, offset)
        self.failed = {}  # value -> error string
        self.acked_count = Counter()  # partition -> acknowledgements
        self.fatal = []  # fatal producer errors
        self.tail = []  # (partition, offset, value) as the tailing consumer got them
        self.tail_errors = Counter()
        self.hw = []  # (monotonic time, partition, epoch, hw, broker, wall time)
        self.unflushed = None  # set when the producer thread ends
        # librdkafka's idempotence ("eos") debug log and every error the
        # producer reported, for failure messages
        self.client_log = collections.deque(maxlen=int(os.environ.get("SLUICE_FAULTS_LOG_LINES", "5000")))
        self._logger = logging.getLogger(f"jepsen-producer-{id(self)}")
        self._logger.propagate = False
        self._logger.setLevel(logging.DEBUG)
        self._logger.addHandler(_DequeHandler(self.client_log))
        self.threads = [threading.Thread(target=f, name=f.__name__, daemon=True)
                        for f in (self._produce, self._consume, self._sample)]

    def start(self):
        for t in self.threads:
            t.start()

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join(90)
            assert not t.is_alive(), f"workload thread {t.name} did not stop"

    # -- producer
    def _new_producer(self):
        return Producer({"bootstrap.servers": self.c.proxied_bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 5, "message.timeout.ms": MESSAGE_TIMEOUT_MS, "request.timeout.ms": 10000,
                         "socket.timeout.ms": 10000, "retry.backoff.ms": 100,
                         "topic.metadata.refresh.interval.ms": 2000,
                         "debug": os.environ.get("SLUICE_FAULTS_DEBUG", "eos"), "logger": self._logger,
                         "error_cb": self._on_error})

    def _on_error(self, err):
        self.client_log.append(f"{_wall(time.time())} error_cb: {err}")
        if err.fatal():
            with self.lock:
                self.fatal.append(str(err))

    def _on_delivery(self, err, msg):
        v = msg.value().decode()
        with self.lock:
            if err is None:
                self.acked[v] = (msg.partition(), msg.offset())
                self.acked_count[msg.partition()] += 1
            else:
                self.failed[v] = str(err)
                self.client_log.append(f"{_wall(time.time())} delivery failed: {v}: {err}")

    def _produce(self):
        p = self._new_producer()
        seq = [0] * PARTITIONS
        i = 0
        handled = 0
        while not self.stop.is_set():
            with self.lock:
                outstanding = len(self.sent) - len(self.acked) - len(self.failed)
                fatal = len(self.fatal)
            if fatal > handled:
                # The idempotent producer is unusable; the checker fails on
                # self.fatal, but keep writing so the rest still gets checked.
                p.flush(5)
                p = self._new_producer()
                handled = fatal
            if outstanding >= MAX_OUTSTANDING:
                p.poll(0.05)
                continue
            part = i % PARTITIONS
            v = f"p{part}-{seq[part]}"
            with self.lock:
                self.sent[v] = part
            try:
                p.produce(TOPIC, value=v.encode(), partition=part, on_delivery=self._on_delivery)
            except BufferError:
                with self.lock:
                    del self.sent[v]
                p.poll(0.05)
                continue
            seq[part] += 1
            i += 1
            p.poll(0)
            time.sleep(PRODUCE_INTERVAL_S)
        left = p.flush(60)
        with self.lock:
            self.unflushed = left

    # -- tailing consumer
    def _consume(self):
        cons = Consumer({"bootstrap.servers": self.c.proxied_bootstrap, "group.id": "jepsen-tail",
                         "enable.auto.commit": False, "isolation.level": "read_uncommitted",
                         "auto.offset.reset": "earliest", "socket.timeout.ms": 10000,
                         "topic.metadata.refresh.interval.ms": 2000, "fetch.wait.max.ms": 200})
        cons.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        try:
            while not self.stop.is_set():
                m = cons.poll(0.2)
                if m is None:
                    continue
                if m.error():
                    self.tail_errors[m.error().name()] += 1
                    continue
                self.tail.append((m.partition(), m.offset(), m.value().decode()))
        finally:
            cons.close()

    # -- high watermark sampler
    def _sample(self):
        while not self.stop.is_set():
            for n in self.c.node_ids:
                b = self.c.broker(n)
                if not b.running() or b.paused:
                    continue
                try:
                    view = metadata_request(b.port, timeout=1.0)
                    t = view.topics.get(TOPIC)
                    if t is None:
                        continue
                    led = {i: p.leader_epoch for i, p in t.partitions.items() if p.leader == n}
                    if not led:
                        continue
                    ans = list_offsets_latest(b.port, led, timeout=1.0)
                    now, wall = time.monotonic(), time.time()
                    for part, (err, off, epoch) in ans.items():
                        if err == 0 and epoch == led[part] and off >= 0:
                            self.hw.append((now, part, epoch, off, n, wall))
                except (OSError, EOFError, struct.error):
                    pass
            time.sleep(0.05)

    def outstanding(self):
        """{partition: values sent and not yet reported}"""
        with self.lock:
            out = Counter(p for v, p in self.sent.items() if v not in self.acked and v not in self.failed)
        return dict(out)

    def acked_on_each(self):
        with self.lock:
            return [self.acked_count[p] for p in range(PARTITIONS)]


# ------------------------------------------------------------ the faults

def agreed_leaders(c, exclude=()):
    """{partition: (leader, epoch)} when every live broker not in `exclude`
    answers Metadata with the same live leader (not in exclude) for every
    partition; else None."""
    nodes = [n for n in c.live_ids() if n not in exclude]
    views = c.metadata_all(nodes, timeout=2.0)
    if len(views) != len(nodes) or not nodes:
        return None
    seen = set()
    for v in views.values():
        t = v.topics.get(TOPIC)
        if t is None or sorted(t.partitions) != list(range(PARTITIONS)):
            return None
        leaders = tuple((i, p.leader, p.leader_epoch) for i, p in sorted(t.partitions.items()))
        if any(l not in nodes for _, l, _ in leaders):
            return None
        seen.add(leaders)
    if len(seen) != 1:
        return None
    return {i: (l, e) for i, l, e in seen.pop()}


def full_isr(c):
    nodes = c.live_ids()
    views = c.metadata_all(nodes, timeout=2.0)
    if len(views) != len(nodes):
        return False
    for v in views.values():
        t = v.topics.get(TOPIC)
        if t is None or any(sorted(p.isr) != c.node_ids for p in t.partitions.values()):
            return False
    return True


def wait_steady(c, w, what):
    """A leader agreed on for every partition, full ISRs, and new
    acknowledgements on every partition."""
    c.wait_for(lambda: agreed_leaders(c), FAILOVER_S + 10, f"leaders after {what}")
    c.wait_for(lambda: full_isr(c), STEADY_S, f"full ISRs after {what}")
    before = w.acked_on_each()
    try:
        c.wait_for(lambda: all(a >= b + 20 for a, b in zip(w.acked_on_each(), before)), STEADY_S,
                   f"new acknowledgements on every partition after {what} (had {before})")
    except AssertionError as e:
        raise AssertionError(f"{e}\nnow {w.acked_on_each()}, failed {len(w.failed)}, fatal {w.fatal[:3]}, "
                             f"outstanding {w.outstanding()}; producer log (last 150 lines):\n"
                             + "\n".join(list(w.client_log)[-150:])) from None


def wait_moved(c, victim, part, what):
    """Until the brokers other than `victim` agree on leaders, none of them `victim`."""
    return c.wait_for(lambda: agreed_leaders(c, exclude=(victim,)), FAILOVER_S,
                      f"partition {part} led by another broker than {victim} during {what}")


def inject(c, proxy, kind, victim, part):
    hold_until = time.monotonic() + SESSION_TIMEOUT_MS / 1000 + 1.0
    if kind == "kill":
        c.kill(victim)
        wait_moved(c, victim, part, "kill")
        c.restart(victim)
    elif kind in ("pause", "cut"):
        # Held until the others moved the leadership and the session has
        # surely run out, then undone.
        begin, end = {"pause": (lambda: c.pause(victim), lambda: c.resume(victim)),
                      "cut": (lambda: proxy.cut(victim), proxy.heal)}[kind]
        begin()
        try:
            wait_moved(c, victim, part, kind)
            time.sleep(max(0.0, hold_until - time.monotonic()))
        finally:
            end()
    else:
        raise ValueError(kind)


# ------------------------------------------------------------ the checker

def read_all(c):
    """Every record of TOPIC from the beginning up to each partition's high
    watermark: {partition: [(offset, value)]}."""
    cons = Consumer({"bootstrap.servers": c.proxied_bootstrap, "group.id": "jepsen-check",
                     "enable.auto.commit": False, "isolation.level": "read_uncommitted",
                     "enable.partition.eof": True})
    out = defaultdict(list)
    try:
        ends = {p: cons.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=30)[1] for p in range(PARTITIONS)}
        cons.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        pos = {p: 0 for p in range(PARTITIONS)}
        deadline = time.monotonic() + 90
        while any(pos[p] < ends[p] for p in pos) and time.monotonic() < deadline:
            m = cons.poll(0.5)
            if m is None:
                continue
            if m.error():
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                continue
            out[m.partition()].append((m.offset(), m.value().decode()))
            pos[m.partition()] = m.offset() + 1
        assert all(pos[p] >= ends[p] for p in pos), f"read only to {pos} of {ends}"
    finally:
        cons.close()
    return out, ends


def check_hw(samples):
    """Returns the violations: a sample below an earlier one of the same
    partition whose leader epoch is not newer."""
    bad = []
    best = defaultdict(dict)  # partition -> epoch -> (hw, sample)
    for s in sorted(samples):
        _t, part, epoch, hw, _n, _w = s
        for e, (h, earlier) in best[part].items():
            if e <= epoch and h > hw:
                bad.append((earlier, s))
        cur = best[part].get(epoch)
        if cur is None or hw > cur[0]:
            best[part][epoch] = (hw, s)
    return bad


def _around(lines, needle, n):
    lines = list(lines)
    for i, line in enumerate(lines):
        if needle in line:
            return "\n".join(lines[max(0, i - n):i + n])
    return ""


def _wall(t):
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + ".%03d" % int((t % 1) * 1000)


def _hw_str(s):
    _t, part, epoch, hw, n, wall = s
    return (part, epoch, hw, n, _wall(wall))


def _hw_groups(bad, epoch_start):
    """One line per (partition, earlier epoch and broker, later epoch and
    broker): the highest earlier HW, the lowest later one, from when to
    when the later leader answered below, and where the later epoch began
    (epoch_start(partition, epoch))."""
    groups = defaultdict(list)
    for a, b in bad:
        groups[(a[1], a[2], a[4], b[2], b[4])].append((a, b))
    out = []
    for (part, ea, na, eb, nb), pairs in sorted(groups.items()):
        later = sorted({b for _, b in pairs})
        out.append(f"p{part} e{ea}@{na} -> e{eb}@{nb}: earlier hw up to {max(a[3] for a, _ in pairs)}, "
                   f"later hw down to {min(b[3] for b in later)} in {len(later)} samples from "
                   f"{_wall(later[0][5])} to {_wall(later[-1][5])}, epoch {eb} began at offset "
                   f"{epoch_start(part, eb)}")
    return "; ".join(out)


def _first_per_epoch_pair(bad):
    out, seen = [], set()
    for a, b in bad:
        k = (a[1], a[2], b[2])
        if k not in seen:
            seen.add(k)
            out.append((a, b))
    return out


def _log_excerpt(brokers, a, b):
    """The lines of every broker's whole log naming the partition of the
    violation, from two seconds before the earlier sample to one after the
    later one (the logs' times are UTC, like _wall)."""
    part = a[1]
    lo, hi = _wall(a[5] - 2), _wall(b[5] + 1)
    out = [f"--- broker logs for {TOPIC}-{part} from {lo} to {hi} "
           f"(samples {_hw_str(a)} -> {_hw_str(b)}):"]
    for n, b_ in brokers.items():
        try:
            text = open(b_.log_path, errors="replace").read()
        except OSError:
            continue
        for line in text.splitlines():
            if (f"{TOPIC}-{part}:" in line or f"{TOPIC}-{part} " in line) and lo <= line[:23] <= hi:
                out.append(f"broker {n}: {line}")
    return "\n".join(out[:80]) + "\n"


def check(w, final, ends, describe, brokers, epoch_start):
    problems = []
    at = {}  # (partition, offset) -> value in the final read
    count = Counter()
    for p, recs in final.items():
        for off, v in recs:
            assert (p, off) not in at, f"the final read returned offset {p}/{off} twice"
            at[(p, off)] = v
            count[v] += 1
    # Everything in the log was produced, to that partition.
    strangers = [(k, v) for k, v in at.items() if w.sent.get(v) != k[0]]
    if strangers:
        problems.append(f"values never produced to their partition: {strangers[:10]}")
    # Acknowledged: present once, at its offset; no offset acknowledged twice.
    # librdkafka acknowledges some messages without an offset (None): the
    # idempotent producer's implicit acks, when a later batch of the same
    # producer succeeded after an earlier one's answer was lost. Those must
    # be in their partition (once: the duplicate check below); an offset
    # acknowledged for another value holding one shows as lost above.
    known = {v: po for v, po in w.acked.items() if po[1] is not None}
    implicit = {v: po[0] for v, po in w.acked.items() if po[1] is None}
    by_offset = defaultdict(list)
    for v, po in known.items():
        by_offset[po].append(v)
    twice = {po: vs for po, vs in by_offset.items() if len(vs) > 1}
    if twice:
        problems.append(f"offsets acknowledged for two values: {sorted(twice.items())[:10]}")
    lost = sorted((po, v) for v, po in known.items() if at.get(po) != v)
    if lost:
        problems.append(f"{len(lost)} acknowledged values not at their acknowledged offset "
                        f"(first: {[(po, v, at.get(po)) for po, v in lost[:10]]})")
    where = {v: k for k, v in at.items()}
    lost_implicit = sorted((p, v) for v, p in implicit.items() if v not in where or where[v][0] != p)
    if lost_implicit:
        problems.append(f"{len(lost_implicit)} values acknowledged without an offset are not in their "
                        f"partition: {lost_implicit[:10]}")
    dup_acked = sorted((v, count[v]) for v in w.acked if count[v] > 1)
    if dup_acked:
        problems.append(f"acknowledged values present more than once: {dup_acked[:10]}")
    dup_unacked = sorted((v, count[v]) for v in count if count[v] > 1 and v not in w.acked)
    # Acknowledged order per partition follows send order.
    for p in range(PARTITIONS):
        acks = sorted((off, int(v.split("-")[1])) for v, (pp, off) in known.items() if pp == p)
        out_of_order = [(a, b) for a, b in zip(acks, acks[1:]) if b[1] <= a[1]]
        if out_of_order:
            problems.append(f"partition {p}: acknowledged values out of send order: {out_of_order[:5]}")
    # The tailing consumer saw nothing that is not in the final read at that offset.
    tail_at = {}
    for p, off, v in w.tail:
        if tail_at.setdefault((p, off), v) != v:
            problems.append(f"the tailing consumer got {p}/{off} as {tail_at[(p, off)]!r} and as {v!r}")
    truncated = sorted((k, v, at.get(k)) for k, v in tail_at.items() if at.get(k) != v)
    if truncated:
        problems.append(f"{len(truncated)} records consumed during the faults are not at that offset "
                        f"in the final read (offset, consumed, final): {truncated[:10]}")
    # The high watermark never went backwards within an epoch or to a later one.
    bad_hw = check_hw(w.hw)
    if bad_hw:
        same = [b for b in bad_hw if b[0][2] == b[1][2]]
        problems.append(
            f"{len(bad_hw)} high watermark samples below an earlier one of an epoch not newer "
            f"({len(same)} of them within one epoch); by (partition, earlier epoch@broker -> later "
            f"epoch@broker): {_hw_groups(bad_hw, epoch_start)}\n(partition, epoch, hw, broker, wall time) "
            f"earlier -> later: {[(_hw_str(a), _hw_str(b)) for a, b in bad_hw[:6]]}\n"
            + "".join(_log_excerpt(brokers, a, b) for a, b in _first_per_epoch_pair(bad_hw)[:3]))
    if w.fatal:
        problems.append(f"fatal producer errors: {w.fatal[:5]}")
    if w.failed:
        # With message.timeout.ms far beyond every fault, the producer only
        # gives a message up when the broker answered a non-retriable error.
        problems.append(f"{len(w.failed)} messages failed delivery (non-retriable produce errors; "
                        f"the producer retries everything else for {MESSAGE_TIMEOUT_MS} ms): "
                        f"{sorted(w.failed.items())[:10]}\nproducer log around the first failure:\n"
                        + _around(w.client_log, "delivery failed", 12))
    summary = (f"sent {len(w.sent)}, acknowledged {len(w.acked)} ({len(implicit)} without an offset), "
               f"failed {len(w.failed)} "
               f"(errors {Counter(w.failed.values()).most_common(3)}), in the log "
               f"{sum(len(r) for r in final.values())} (ends {ends}), unacknowledged duplicates "
               f"{len(dup_unacked)} {dup_unacked[:10]}, tail read {len(w.tail)} ({len(tail_at)} offsets, "
               f"errors {dict(w.tail_errors)}), high watermark samples {len(w.hw)}")
    print(summary)
    assert not problems, "\n".join(problems) + "\n" + summary + "\n" + describe()


# ------------------------------------------------------------ the test

def test_twenty_leader_faults_lose_no_acknowledged_message(proxied_cluster):
    c, proxy = proxied_cluster
    a = AdminClient({"bootstrap.servers": c.proxied_bootstrap, "socket.timeout.ms": 10000})
    fs = a.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=3,
                                   config={"min.insync.replicas": "2"})], operation_timeout=20)
    fs[TOPIC].result(30)
    c.wait_for(lambda: agreed_leaders(c), 20, "leaders for " + TOPIC)
    c.wait_for(lambda: full_isr(c), 20, "full ISRs")
    w = Workload(c)
    c.workload = w  # for the fixture's SLUICE_FAULTS_KEEP_LOGS
    w.start()
    log = []
    try:
        wait_steady(c, w, "start")
        kinds = ["kill", "pause", "cut"]
        for i in range(FAULTS):
            kind = kinds[i % len(kinds)]
            part = (i + i // len(kinds)) % PARTITIONS  # every kind meets every partition's leader
            leaders = c.wait_for(lambda: agreed_leaders(c), FAILOVER_S, "leaders")
            victim = leaders[part][0]
            t0 = time.monotonic()
            inject(c, proxy, kind, victim, part)
            t1 = time.monotonic()
            wait_steady(c, w, f"fault {i} ({kind} of broker {victim}, leader of partition {part})")
            log.append(f"fault {i:2d}: {kind:5s} broker {victim} (led p{part} at epoch {leaders[part][1]}): "
                       f"{t1 - t0:4.1f}s, steady after {time.monotonic() - t1:4.1f}s; acked {w.acked_on_each()}")
            print(log[-1])
    finally:
        proxy.heal()
        for n in c.node_ids:
            if c.broker(n).paused:
                c.resume(n)
        w.finish()
    assert w.unflushed == 0, f"{w.unflushed} messages never got a delivery report"
    final, ends = read_all(c)

    def epoch_start(part, epoch):
        """Where `epoch` began in the log of the partition's current leader."""
        try:
            leader = agreed_leaders(c)[part][0]
            err, e, end = epoch_end_offset(c.broker(leader).port, part, epoch - 1)
            return end if err == 0 else f"(error {err})"
        except (OSError, EOFError, struct.error, TypeError) as ex:
            return f"({ex!r})"
    check(w, final, ends, c.describe, {n: c.broker(n) for n in c.node_ids}, epoch_start)
