"""Starts and stops a real `sluice serve` for integration tests.

Each broker gets a free loopback port and a temporary data directory, and is
stopped by its process id. Nothing here talks to any address but 127.0.0.1.
"""

import os
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

REPO = Path(__file__).resolve().parents[2]
SLUICE_BIN = os.environ.get("SLUICE_BIN", str(REPO / "build" / "bin" / "sluice"))


def free_port() -> int:
    from etcd_harness import free_port as pick  # one registry of ports handed out
    return pick()


class Broker:
    """One broker process. `settings` are extra --KEY VALUE pairs."""

    def __init__(self, data_dir=None, port=None, settings=None):
        self._tmp = None
        if data_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="sluice-it-")
            data_dir = self._tmp.name
        self.data_dir = str(data_dir)
        self.port = port or free_port()
        # Each broker gets its own metrics port, so brokers of tests running
        # side by side never compete for the default one.
        self.metrics_port = free_port()
        self.settings = dict(settings or {})
        self.proc = None
        self.log_path = os.path.join(self.data_dir, "..", f"sluice-{self.port}.log")
        self.log_path = os.path.join(tempfile.gettempdir(), f"sluice-it-{os.getpid()}-{self.port}.log")

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def args(self):
        a = [SLUICE_BIN, "serve", "--listeners", self.bootstrap, "--log.dirs", self.data_dir,
             "--sluice.metrics.listener", f"127.0.0.1:{self.metrics_port}"]
        for k, v in self.settings.items():
            a += [f"--{k}", str(v)]
        return a

    def start(self, timeout=30.0):
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.args(), stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"sluice exited with {self.proc.returncode}:\n{self.log_text()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"sluice did not listen on {self.bootstrap} in {timeout}s:\n{self.log_text()}")

    def metrics(self) -> dict:
        """Scrapes /metrics; returns {'name{labels}': value}."""
        import urllib.request
        text = urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10).read().decode()
        out = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                key, _, value = line.rpartition(" ")
                out[key] = float(value)
        return out

    def log_text(self) -> str:
        try:
            return Path(self.log_path).read_text(errors="replace")[-20000:]
        except OSError:
            return ""

    def stop(self, sig=signal.SIGTERM, timeout=30.0) -> int:
        """Sends `sig` to the broker's pid and waits; returns the exit status."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
                raise RuntimeError(f"sluice did not stop on {sig} within {timeout}s")
        rc = self.proc.returncode
        self.proc = None
        self._log.close()
        return rc

    def kill(self) -> None:
        self.stop(signal.SIGKILL)

    def restart(self):
        self.stop()
        return self.start()

    def rss_bytes(self) -> int:
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        return 0

    def peak_rss_bytes(self) -> int:
        """The broker's peak resident memory so far (VmHWM)."""
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
        return 0

    def close(self):
        try:
            self.stop()
        finally:
            if self._tmp is not None:
                self._tmp.cleanup()
                self._tmp = None
            if os.path.exists(self.log_path):
                os.unlink(self.log_path)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()


# ------------------------------------------------------------ wire helpers

def _crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC32C_TABLE = _crc32c_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = _CRC32C_TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def wait_until(pred, timeout, what, interval=0.05):
    """Calls pred until it returns something true, which is returned;
    fails the test after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def record(i, value, key=None, ts_delta=0, offset_delta=None):
    """One encoded v2 record with no headers; its offset delta is `i` unless given."""
    body = b"\x00" + varint(ts_delta) + varint(i if offset_delta is None else offset_delta)
    body += varint(-1) if key is None else varint(len(key)) + key
    body += varint(len(value)) + value + varint(0)
    return varint(len(body)) + body


def v2_batch(records_bytes, count, base_ts, max_ts, attributes=0, last_delta=None, magic=2,
             producer=(-1, -1, -1), crc_xor=0):
    """A record batch around already encoded (maybe compressed) record bytes,
    with a correct CRC-32C unless `crc_xor` spoils it. `producer` is
    (producer id, epoch, base sequence)."""
    last_delta = count - 1 if last_delta is None else last_delta
    pid, epoch, seq = producer
    after_crc = struct.pack(">hiqqqhii", attributes, last_delta, base_ts, max_ts, pid, epoch, seq, count)
    after_crc += records_bytes
    tail = struct.pack(">ibI", 0, magic, crc32c(after_crc) ^ crc_xor) + after_crc
    return struct.pack(">qi", 0, len(tail)) + tail


def varint(n):
    z = (n << 1) ^ (n >> 63)  # zigzag
    out = b""
    while True:
        if z < 0x80:
            return out + bytes([z])
        out += bytes([(z & 0x7F) | 0x80])
        z >>= 7


class GoodClient(threading.Thread):
    """Produces rounds of 20 numbered messages with acks=all and reads each
    round back, recording what went wrong; for tests that attack the broker
    while it must keep serving others. `timeout` bounds each round's flush
    and read, in seconds."""

    def __init__(self, bootstrap, timeout=10):
        super().__init__(daemon=True)
        self.bootstrap = bootstrap
        self.timeout = timeout
        self.stop_flag = threading.Event()
        self.rounds = 0
        self.errors = []

    def run(self):
        topic = "well-behaved"
        p = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "linger.ms": 1,
                      "message.timeout.ms": int(self.timeout * 1000)})
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "unused-good",
                      "enable.auto.commit": False})
        next_offset = 0
        n = 0
        try:
            while not self.stop_flag.is_set():
                reports = []
                for _ in range(20):
                    p.produce(topic, value=b"good-%d" % n, partition=0,
                              on_delivery=lambda e, m: reports.append((e, m.offset(), m.value())))
                    n += 1
                if p.flush(self.timeout) != 0 or any(e for e, _, _ in reports) or len(reports) != 20:
                    self.errors.append(f"produce round {self.rounds}: {reports[:2]}")
                    return
                if next_offset == 0:
                    c.assign([TopicPartition(topic, 0, 0)])
                got = []
                deadline = time.monotonic() + self.timeout
                while len(got) < 20 and time.monotonic() < deadline:
                    m = c.poll(0.2)
                    if m is None:
                        continue
                    if m.error():
                        self.errors.append(f"consume: {m.error()}")
                        return
                    got.append((m.offset(), m.value()))
                want = sorted((o, v) for _, o, v in reports)
                if got != want or want[0][0] != next_offset:
                    self.errors.append(f"round {self.rounds}: consumed {got[:3]}..., acked {want[:3]}...")
                    return
                next_offset += 20
                self.rounds += 1
        except Exception as e:  # noqa: BLE001 - any exception is a failure to report
            self.errors.append(repr(e))
        finally:
            c.close()

    def finish(self):
        self.stop_flag.set()
        self.join(timeout=30)
        return self.rounds, self.errors


def fd_count(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def wait_fds_at_most(pid, limit, timeout=15.0):
    deadline = time.monotonic() + timeout
    while fd_count(pid) > limit and time.monotonic() < deadline:
        time.sleep(0.1)
    return fd_count(pid)


class Reader:
    """Reads a Kafka response's fields in order (big-endian)."""

    def __init__(self, data):
        self.d, self.p = data, 0

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.d, self.p)
        self.p += struct.calcsize(fmt)
        return v if len(v) > 1 else v[0]

    def string(self):
        n = self.take(">h")
        if n < 0:
            return None
        s = self.d[self.p:self.p + n].decode()
        self.p += n
        return s

    def int32s(self):
        return [self.take(">i") for _ in range(self.take(">i"))]

