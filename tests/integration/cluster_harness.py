"""Starts a Sluice cluster for integration tests: a real etcd cluster (see
etcd_harness.py) and N real `sluice serve` processes in cluster mode.

    with Cluster(brokers=3) as c:          # waits until all brokers agree
        c.bootstrap                        # "127.0.0.1:p1,127.0.0.1:p2,..."
        c.controller_id()                  # from any live broker's Metadata
        c.kill(c.controller_id())          # SIGKILL by pid
        c.metadata_from(2).topics["t"].partitions[0].leader

Brokers are addressed by node id (1..N), not by list position, so that a
node id read from Metadata can be handed straight back. Every process the
cluster starts it stops by pid, never by name; each broker gets free
127.0.0.1 ports and its own directory under one temporary directory, which
close() removes. Nothing here talks to any address but 127.0.0.1, unless a
test puts the processes in network namespaces of their own
(netns_harness.place_cluster sets each broker's `host` and `wrap`).

Metadata is read with a raw Metadata v8 request (one round trip, no client
library state), because v8 is the oldest version that carries everything a
cluster test looks at: the controller id (v1+), offline replicas (v5+) and
leader epochs (v7+), and the newest that is not yet "flexible" (v9+), so it
is plain fixed-width encoding.
"""

import os
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from etcd_harness import EtcdCluster, die_with_parent
from sluice_harness import SLUICE_BIN, Reader, free_port

# ------------------------------------------------------------ Metadata v8

API_METADATA = 3
METADATA_VERSION = 8


@dataclass
class PartitionView:
    error: int
    leader: int
    leader_epoch: int  # -1 when the broker does not say
    replicas: list
    isr: list
    offline: list


@dataclass
class TopicView:
    error: int
    partitions: dict  # partition index -> PartitionView


@dataclass
class MetadataView:
    """One broker's answer to Metadata (all topics)."""
    brokers: dict  # node id -> (host, port)
    controller: int
    cluster_id: str
    topics: dict = field(default_factory=dict)  # name -> TopicView

    def leaders(self, topic):
        """{partition: leader} of one topic."""
        return {i: p.leader for i, p in self.topics[topic].partitions.items()}

    def assignment(self, topic):
        """{partition: (leader, replicas, isr)}: what all brokers must agree on."""
        return {i: (p.leader, tuple(p.replicas), tuple(sorted(p.isr)))
                for i, p in self.topics[topic].partitions.items()}


def _recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise EOFError(f"connection closed after {len(buf)} of {n} bytes")
        buf += chunk
    return buf


def metadata_request(port, timeout=5.0, corr=1, host="127.0.0.1"):
    """Sends Metadata v8 for every topic to host:port; returns a
    MetadataView. Raises OSError/EOFError when the broker does not answer
    within `timeout` seconds (a paused broker accepts but never answers)."""
    with metadata_send(port, timeout, corr, host) as s:
        return metadata_receive(s, corr)


def metadata_send(port, timeout=5.0, corr=1, host="127.0.0.1"):
    """Connects to 127.0.0.1:port and sends Metadata v8 for every topic;
    returns the socket, for metadata_receive (the kernel takes the request
    even from a SIGSTOPped broker, which reads it when it resumes)."""
    client_id = b"cluster-harness"
    body = struct.pack(">i", -1)  # null topic list: every topic
    body += struct.pack(">bbb", 0, 0, 0)  # no auto-create, no authorized operations
    payload = struct.pack(">hhih", API_METADATA, METADATA_VERSION, corr, len(client_id)) + client_id + body
    s = socket.create_connection((host, port), timeout=timeout)
    s.settimeout(timeout)
    s.sendall(struct.pack(">i", len(payload)) + payload)
    return s


def metadata_receive(s, corr=1):
    """The MetadataView answering metadata_send's request on socket `s`."""
    (n,) = struct.unpack(">i", _recv_exact(s, 4))
    r = Reader(_recv_exact(s, n))
    if r.take(">i") != corr:
        raise EOFError("Metadata answer with a wrong correlation id")
    r.take(">i")  # throttle_time_ms
    brokers = {}
    for _ in range(r.take(">i")):
        node_id, host, bport, _rack = r.take(">i"), r.string(), r.take(">i"), r.string()
        brokers[node_id] = (host, bport)
    cluster_id = r.string()
    controller = r.take(">i")
    topics = {}
    for _ in range(r.take(">i")):
        terr, name, _internal = r.take(">h"), r.string(), r.take(">b")
        parts = {}
        for _ in range(r.take(">i")):
            perr, index, leader, epoch = r.take(">hiii")
            replicas, isr, offline = r.int32s(), r.int32s(), r.int32s()
            parts[index] = PartitionView(perr, leader, epoch, replicas, isr, offline)
        r.take(">i")  # topic_authorized_operations
        topics[name] = TopicView(terr, parts)
    return MetadataView(brokers, controller, cluster_id, topics)


def _request(port, api_key, version, body, timeout, corr=7, host="127.0.0.1"):
    """One request, non-flexible header v1; returns the answer after its
    correlation id."""
    client_id = b"cluster-harness"
    payload = struct.pack(">hhih", api_key, version, corr, len(client_id)) + client_id + body
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.settimeout(timeout)
        s.sendall(struct.pack(">i", len(payload)) + payload)
        (n,) = struct.unpack(">i", _recv_exact(s, 4))
        r = Reader(_recv_exact(s, n))
    if r.take(">i") != corr:
        raise EOFError("answer with a wrong correlation id")
    return r


def _kstr(s):
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def produce_request(port, topic, partition, value, acks=1, timeout=10.0, host="127.0.0.1", timeout_ms=None):
    """Produce v3 of one record to one partition of broker 127.0.0.1:port,
    whether or not it leads it; returns (error code, base offset).
    `timeout_ms`: the request's own timeout (default: `timeout`)."""
    from sluice_harness import record, v2_batch  # the wire helpers the single-broker tests use
    now_ms = int(time.time() * 1000)
    batch = v2_batch(record(0, value), 1, now_ms, now_ms)
    request_timeout_ms = int(timeout * 1000) if timeout_ms is None else timeout_ms
    body = struct.pack(">hhi", -1, acks, request_timeout_ms)  # null transactional id
    body += struct.pack(">i", 1) + _kstr(topic)
    body += struct.pack(">i", 1) + struct.pack(">ii", partition, len(batch)) + batch
    r = _request(port, 0, 3, body, timeout, host=host)
    assert r.take(">i") == 1 and r.string() == topic and r.take(">i") == 1
    index, error, base_offset, _append_time = r.take(">ihqq")
    assert index == partition
    return error, base_offset


def init_producer_id_request(port, timeout=30.0, host="127.0.0.1"):
    """InitProducerId v1 without a transactional id, sent to broker
    127.0.0.1:port; returns (error code, producer id, producer epoch)."""
    body = struct.pack(">hi", -1, 60_000)  # null transactional id, transaction timeout
    r = _request(port, 22, 1, body, timeout, host=host)
    r.take(">i")  # throttle_time_ms
    return r.take(">hqh")


EARLIEST = -2  # ListOffsets timestamps: the log start offset
LATEST = -1    # the high watermark (read_uncommitted) or last stable offset (read_committed)


def list_offsets_request(port, topic, partition, timestamp, current_leader_epoch=-1, read_committed=False,
                         timeout=5.0, host="127.0.0.1"):
    """ListOffsets v4 of one partition asked of broker 127.0.0.1:port as a
    consumer asks (replica id -1); `current_leader_epoch` fences an answer
    from a broker at another epoch (FENCED_LEADER_EPOCH or
    UNKNOWN_LEADER_EPOCH). Returns (error code, offset, leader epoch)."""
    body = struct.pack(">ib", -1, 1 if read_committed else 0)
    body += struct.pack(">i", 1) + _kstr(topic) + struct.pack(">i", 1)
    body += struct.pack(">iiq", partition, current_leader_epoch, timestamp)
    r = _request(port, 2, 4, body, timeout, host=host)
    r.take(">i")  # throttle_time_ms
    assert r.take(">i") == 1 and r.string() == topic and r.take(">i") == 1
    index, err, _ts, off, epoch = r.take(">ihqqi")
    assert index == partition
    return err, off, epoch


def delete_records_request(port, topic, partition, offset, timeout=30.0, host="127.0.0.1"):
    """DeleteRecords v1 of one partition up to `offset` sent to broker
    127.0.0.1:port (the leader takes it); returns (error code, low
    watermark). The request's own timeout is `timeout`, less a second so
    that the broker answers before the socket gives up."""
    body = struct.pack(">i", 1) + _kstr(topic) + struct.pack(">i", 1) + struct.pack(">iq", partition, offset)
    body += struct.pack(">i", max(int(timeout * 1000) - 1000, 1000))
    r = _request(port, 21, 1, body, timeout, host=host)
    r.take(">i")  # throttle_time_ms
    assert r.take(">i") == 1 and r.string() == topic and r.take(">i") == 1
    index, low, err = r.take(">iqh")
    assert index == partition
    return err, low


def create_topics_request(port, topic, partitions, replication_factor, timeout=20.0, host="127.0.0.1"):
    """CreateTopics v2 of one topic sent to broker 127.0.0.1:port, whether or
    not it is the controller; returns (error code, error message)."""
    body = struct.pack(">i", 1) + _kstr(topic) + struct.pack(">ihii", partitions, replication_factor, 0, 0)
    body += struct.pack(">ib", int(timeout * 1000 / 2), 0)  # timeout_ms, validate_only
    r = _request(port, 19, 2, body, timeout, host=host)
    r.take(">i")  # throttle_time_ms
    assert r.take(">i") == 1 and r.string() == topic
    return r.take(">h"), r.string()


def thread_stacks(pid, frames=8, timeout=30):
    """The top `frames` frames of every thread of process `pid`, by gdb
    (attached for a moment, then detached; the process goes on), or why
    not. For failure messages."""
    import shutil
    import subprocess
    if not shutil.which("gdb"):
        return "(no gdb: no thread stacks)"
    try:
        out = subprocess.run(["gdb", "-p", str(pid), "-batch", "-nx", "-ex", "set pagination off",
                              "-ex", "thread apply all bt " + str(frames)],
                             capture_output=True, text=True, timeout=timeout).stdout
    except (OSError, subprocess.SubprocessError) as e:
        return f"(thread stacks of {pid}: {e!r})"
    keep = [ln for ln in out.splitlines() if ln.startswith("Thread ") or ln.startswith("#")]
    return f"--- threads of pid {pid}\n" + "\n".join(keep)


# ------------------------------------------------------------ one broker

class ClusterBroker:
    """One `sluice serve` process of the cluster: a node id, a client port,
    a metrics port and a data directory that survive restarts."""

    def __init__(self, root, node_id, etcd_endpoints, session_timeout_ms, settings):
        self.node_id = node_id
        self.port = free_port()
        self.metrics_port = free_port()
        self.data_dir = os.path.join(root, f"broker-{node_id}-{self.port}")
        self.log_path = os.path.join(root, f"broker-{node_id}-{self.port}.log")
        os.makedirs(self.data_dir)
        self.etcd_endpoints = etcd_endpoints
        self.session_timeout_ms = session_timeout_ms
        self.settings = dict(settings or {})
        self.proc = None
        self.paused = False
        self._log = None
        # Where it listens, and how its command line is run (a network
        # namespace's `ip netns exec`): netns_harness.place_cluster.
        self.host = "127.0.0.1"
        self.wrap = None

    @property
    def pid(self):
        return self.proc.pid if self.proc is not None else None

    @property
    def address(self):
        return f"{self.host}:{self.port}"

    def running(self):
        """Started and not exited (a paused broker is running)."""
        return self.proc is not None and self.proc.poll() is None

    def args(self):
        a = [SLUICE_BIN, "serve",
             "--node.id", str(self.node_id),
             "--listeners", f"PLAINTEXT://{self.address}",
             "--log.dirs", self.data_dir,
             "--sluice.metrics.listener", f"{self.host}:{self.metrics_port}",
             "--sluice.etcd.endpoints", self.etcd_endpoints,
             "--sluice.etcd.session.timeout.ms", str(self.session_timeout_ms)]
        for k, v in self.settings.items():
            a += [f"--{k}", str(v)]
        return a

    def spawn(self):
        """Starts the process and returns at once."""
        if self.running():
            raise RuntimeError(f"broker {self.node_id} is already running (pid {self.pid})")
        self._log = open(self.log_path, "ab")
        args = self.wrap(self.args()) if self.wrap else self.args()
        self.proc = subprocess.Popen(args, stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, preexec_fn=die_with_parent)  # a crashed test leaves no broker
        self.paused = False
        return self

    def start(self, timeout=30.0):
        """Starts the process and waits until it accepts connections."""
        self.spawn()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker {self.node_id} exited with {self.proc.returncode}:\n"
                                   f"{self.log_text()}")
            try:
                with socket.create_connection((self.host, self.port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"broker {self.node_id} did not listen on {self.address} in {timeout}s:\n"
                           f"{self.log_text()}")

    def wait_exit(self, timeout):
        """Waits for the process to exit by itself; returns its status, or
        None if it is still running after `timeout` seconds."""
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        self._reap()
        return rc

    def send_signal(self, sig):
        if not self.running():
            # How it ended (a negative status is the signal that ended it)
            # and its last words: a broker that died under a test says why.
            status = self.proc.returncode if self.proc is not None else "never started"
            raise RuntimeError(f"broker {self.node_id} is not running (exit status {status}):\n"
                               f"{self.log_text(3000)}")
        os.kill(self.proc.pid, sig)

    def stop(self, sig=signal.SIGTERM, timeout=30.0):
        """Sends `sig` to the pid and waits for the exit; SIGKILL after
        `timeout` seconds. Returns the exit status (negative: the signal)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            if self.paused and sig != signal.SIGKILL:
                os.kill(self.proc.pid, signal.SIGCONT)  # a stopped process cannot handle SIGTERM
            os.kill(self.proc.pid, sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        return self._reap()

    def _reap(self):
        rc = self.proc.returncode
        self.proc = None
        self.paused = False
        if self._log is not None:
            self._log.close()
            self._log = None
        return rc

    def log_text(self, tail=12000):
        try:
            return Path(self.log_path).read_text(errors="replace")[-tail:]
        except OSError:
            return ""


# ------------------------------------------------------------ the cluster

class Cluster:
    """An etcd cluster of `etcd` members and `brokers` Sluice brokers with
    node ids 1..brokers. `extra_settings` are further --KEY VALUE pairs for
    every broker. Use as a context manager, or call start() and close()."""

    def __init__(self, brokers=3, etcd=3, session_timeout_ms=4000, extra_settings=None):
        self.session_timeout_ms = session_timeout_ms
        self.extra_settings = dict(extra_settings or {})
        self._root = tempfile.mkdtemp(prefix="sluice-cluster-it-")
        self.etcd = EtcdCluster(n=etcd)
        self._brokers = {}
        self._extra = []  # brokers made by new_broker(), stopped by close() too
        for node_id in range(1, brokers + 1):
            self._brokers[node_id] = ClusterBroker(self._root, node_id, self.etcd.endpoints,
                                                   session_timeout_ms, self.extra_settings)

    # ------------------------------------------------------------ addresses

    @property
    def node_ids(self):
        return sorted(self._brokers)

    def broker(self, node_id):
        return self._brokers[node_id]

    def live_ids(self):
        """Node ids whose process runs and is not paused."""
        return [n for n in self.node_ids if self._brokers[n].running() and not self._brokers[n].paused]

    @property
    def bootstrap(self):
        """Every broker's address, comma separated."""
        return ",".join(self._brokers[n].address for n in self.node_ids)

    def live_bootstrap(self):
        """The addresses of the live brokers only: clients then do not spend
        their first attempts on a dead or paused one."""
        return ",".join(self._brokers[n].address for n in self.live_ids())

    # ------------------------------------------------------------ lifecycle

    def start(self, timeout=60.0, converge_timeout=30.0):
        try:
            self.etcd.start(timeout=timeout)
            for n in self.node_ids:
                self._brokers[n].start(timeout=timeout)
            self.wait_converged(timeout=converge_timeout)
        except BaseException:
            self.close()
            raise
        return self

    def kill(self, node_id):
        """SIGKILL by pid and reap."""
        return self._brokers[node_id].stop(signal.SIGKILL)

    def stop(self, node_id, timeout=30.0):
        """SIGTERM by pid and wait (SIGKILL after `timeout`); returns the exit status."""
        return self._brokers[node_id].stop(signal.SIGTERM, timeout)

    def pause(self, node_id):
        """SIGSTOP: the process keeps its sockets but does nothing, like a
        broker stuck in a long pause; its etcd lease runs out."""
        b = self._brokers[node_id]
        b.send_signal(signal.SIGSTOP)
        b.paused = True
        # kill() returns before every thread has stopped: on a busy machine
        # a thread may still send a fetch after it. Wait until each one is
        # stopped, so what the test does next meets a broker that does
        # nothing.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            states = []
            try:
                for t in os.listdir(f"/proc/{b.pid}/task"):
                    with open(f"/proc/{b.pid}/task/{t}/stat") as f:
                        states.append(f.read().rsplit(")", 1)[1].split()[0])
            except OSError:
                states = ["?"]
            if states and all(st in ("T", "t") for st in states):
                return
            time.sleep(0.01)

    def resume(self, node_id):
        b = self._brokers[node_id]
        b.send_signal(signal.SIGCONT)
        b.paused = False

    def restart(self, node_id, timeout=30.0):
        """Starts the broker again with the same node id, port and data
        directory (stopping it first with SIGTERM if it runs). After a
        kill, the node id stays registered until the session timeout has
        passed; a restart before then waits that long at start for the
        old registration to go."""
        b = self._brokers[node_id]
        if b.running():
            b.stop()
        b.start(timeout=timeout)
        return b

    def new_broker(self, node_id, settings=None):
        """A further broker process (not started) on fresh ports and a fresh
        directory, pointed at the same etcd: for starting one with a node id
        already in use. close() stops it too."""
        b = ClusterBroker(self._root, node_id, self.etcd.endpoints, self.session_timeout_ms,
                          {**self.extra_settings, **(settings or {})})
        self._extra.append(b)
        return b

    def close(self):
        """Stops every broker (SIGTERM, then SIGKILL) and etcd member by pid
        and removes the temporary directory."""
        try:
            for b in list(self._brokers.values()) + self._extra:
                try:
                    b.stop(timeout=15.0)
                except OSError:
                    pass
        finally:
            try:
                self.etcd.close()
            finally:
                shutil.rmtree(self._root, ignore_errors=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()

    # ------------------------------------------------------------ metadata

    def metadata_from(self, node_id, timeout=5.0):
        """Broker `node_id`'s Metadata for every topic (MetadataView)."""
        b = self._brokers[node_id]
        return metadata_request(b.port, timeout=timeout, host=b.host)

    def metadata_all(self, node_ids=None, timeout=5.0):
        """{node id: MetadataView} from each live broker (or those listed);
        a broker that does not answer is left out."""
        out = {}
        for n in self.live_ids() if node_ids is None else node_ids:
            try:
                out[n] = self.metadata_from(n, timeout=timeout)
            except (OSError, EOFError, struct.error):
                pass
        return out

    def controller_id(self):
        """The controller id the first live broker that answers reports
        (-1 when none answers or none knows one)."""
        for n in self.live_ids():
            try:
                return self.metadata_from(n).controller
            except (OSError, EOFError, struct.error):
                continue
        return -1

    def agreed_view(self, node_ids=None):
        """When every live broker (or those listed) answers Metadata with the
        same broker set, which is exactly the live brokers, and the same
        controller, which is one of them: that common view (the lowest node
        id's answer). Otherwise None."""
        live = self.live_ids() if node_ids is None else list(node_ids)
        views = self.metadata_all(live)
        if not live or len(views) != len(live):
            return None
        first = views[live[0]]
        for v in views.values():
            if sorted(v.brokers) != sorted(live) or v.controller != first.controller:
                return None
            if v.brokers != first.brokers:
                return None
        if first.controller not in live:
            return None
        return first

    def wait_converged(self, timeout=30.0):
        """Waits until agreed_view() holds; returns the view."""
        return self.wait_for(self.agreed_view, timeout, "every live broker listing exactly the live "
                             "brokers and the same live controller")

    def wait_for(self, pred, timeout, what="a condition", interval=0.1):
        """Calls pred until it returns something true, which is returned;
        raises AssertionError after `timeout` seconds, with every broker's
        last Metadata and log tail in the message."""
        deadline = time.monotonic() + timeout
        while True:
            v = pred()
            if v:
                return v
            if time.monotonic() >= deadline:
                raise AssertionError(f"timed out after {timeout}s waiting for {what}\n{self.describe()}")
            time.sleep(interval)

    def describe(self, log_tail=3000, stacks=True):
        """Each broker's state, Metadata and log tail, and the top of every
        thread's stack (thread_stacks): for failure messages, so a stall
        seen once shows where each broker waited."""
        lines = []
        for n in self.node_ids:
            b = self._brokers[n]
            state = "paused" if b.paused else ("running" if b.running() else "down")
            lines.append(f"--- broker {n} (pid {b.pid}, port {b.port}, {state})")
            if b.running() and not b.paused:
                try:
                    v = self.metadata_from(n, timeout=2.0)
                    lines.append(f"metadata: brokers={v.brokers} controller={v.controller}")
                    for t, tv in sorted(v.topics.items()):
                        if t.startswith("__"):
                            continue  # internal topics: long and seldom the point
                        parts = " ".join(
                            f"{i}:L{p.leader}/e{p.leader_epoch}/R{p.replicas}/I{p.isr}/O{p.offline}"
                            + (f"/err{p.error}" if p.error else "")
                            for i, p in sorted(tv.partitions.items()))
                        lines.append(f"  topic {t} (error {tv.error}): {parts}")
                except (OSError, EOFError, struct.error) as e:
                    lines.append(f"metadata: {e!r}")
            lines.append(b.log_text(log_tail))
            if stacks and b.running() and not b.paused:
                lines.append(thread_stacks(b.pid))
        return "\n".join(lines)
