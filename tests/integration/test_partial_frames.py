"""Many partial request frames cannot take the broker's memory (queued.max.request.bytes).

Thirty raw connections each declare a large request frame and send 99% of
it, then stall: the attack that took a broker without the bound from 146 MB
to 3.3 GB. Meanwhile a confluent_kafka producer and consumer keep producing
and reading back. The broker's resident memory (VmRSS) must stay under its
baseline plus queued.max.request.bytes and a small margin, the well-behaved
client must keep making progress, the stalled frames must be closed at
sluice.request.read.timeout.ms, and every byte must be given back.

The test shrinks the sizes to keep to a few seconds (16 MiB frames, a
64 MiB bound) so that the attack would hold 475 MiB unbounded. Run as a
script to measure the attack at the broker's defaults (100 MiB frames,
256 MiB bound), for the README's figures:

    /usr/bin/python3 tests/integration/test_partial_frames.py [--bin PATH] [--frames 30]
"""

import argparse
import os
import select
import socket
import struct
import sys
import threading
import time

from confluent_kafka import Consumer, Producer, TopicPartition

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sluice_harness import Broker  # noqa: E402

MiB = 1 << 20


class GoodClient(threading.Thread):
    """Produces rounds of 20 messages with acks=all and reads each round back."""

    def __init__(self, bootstrap):
        super().__init__(daemon=True)
        self.bootstrap = bootstrap
        self.stop_flag = threading.Event()
        self.rounds = 0
        self.errors = []

    def run(self):
        topic = "well-behaved"
        p = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "linger.ms": 1,
                      "message.timeout.ms": 20000})
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "unused-good",
                      "enable.auto.commit": False})
        n = 0
        next_offset = 0
        try:
            while not self.stop_flag.is_set():
                reports = []
                for _ in range(20):
                    p.produce(topic, value=b"good-%d" % n, partition=0,
                              on_delivery=lambda e, m: reports.append((e, m.offset(), m.value())))
                    n += 1
                if p.flush(20) != 0 or any(e for e, _, _ in reports) or len(reports) != 20:
                    self.errors.append(f"produce round {self.rounds}: {reports[:2]}")
                    return
                if next_offset == 0:
                    c.assign([TopicPartition(topic, 0, 0)])
                got = []
                deadline = time.monotonic() + 20
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
                    self.errors.append(f"round {self.rounds}: consumed {got[:3]}, acked {want[:3]}")
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


def open_partial_frames(port, count, declared, fraction=0.99, stall_s=2.0):
    """Opens `count` connections, each sending a length prefix declaring
    `declared` bytes and then `fraction` of them, as far as the broker reads:
    sends are non-blocking and stop once no socket has taken a byte for
    `stall_s`. Returns the sockets (the caller closes them) and bytes sent."""
    socks, left = [], []
    body = b"\0" * (1 * MiB)
    want = int(declared * fraction)
    for _ in range(count):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.setblocking(False)
        socks.append(s)
        left.append(want + 4)
    prefix = struct.pack(">i", declared)
    sent_total = 0
    last_progress = time.monotonic()
    while any(left) and time.monotonic() - last_progress < stall_s:
        _, writable, _ = select.select([], [s for s, n in zip(socks, left) if n], [], 0.2)
        for s in writable:
            i = socks.index(s)
            done = want + 4 - left[i]
            chunk = prefix[done:] if done < 4 else body[:min(len(body), left[i])]
            try:
                n = s.send(chunk)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                left[i] = 0  # closed by the broker
                continue
            left[i] -= n
            sent_total += n
            last_progress = time.monotonic()
    return socks, sent_total


def close_all(socks):
    for s in socks:
        try:
            s.close()
        except OSError:
            pass


def sample_rss(broker, seconds, interval=0.1):
    """Peak VmRSS over `seconds`."""
    peak = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        peak = max(peak, broker.rss_bytes())
        time.sleep(interval)
    return peak


def wait_for(pred, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.05)
    return pred()


FRAME = 16 * MiB
BOUND = 64 * MiB
READ_TIMEOUT_MS = 4000


def test_partial_frames_stay_under_the_bound_while_clients_are_served(broker_factory):
    b = broker_factory(settings={"socket.request.max.bytes": FRAME,
                                 "queued.max.request.bytes": BOUND,
                                 "sluice.request.read.timeout.ms": READ_TIMEOUT_MS})
    b.start()
    good = GoodClient(b.bootstrap)
    good.start()
    socks = []
    try:
        assert wait_for(lambda: good.rounds >= 3 or good.errors, 30), "client did not get going"
        assert not good.errors, good.errors
        time.sleep(0.5)
        rss_base = b.rss_bytes()

        # 30 x 99% of 16 MiB: 475 MiB if the broker read it all. Three frames
        # fit the 48 MiB that large frames may hold; the rest wait unread.
        socks, sent = open_partial_frames(b.port, 30, FRAME)
        rounds_at_attack = good.rounds
        m = b.metrics()
        held = m["sluice_request_bytes_held"]
        waiting = m["sluice_request_budget_waiting_connections"]
        # Hold for longer than the read timeout: the admitted frames are
        # closed at it, the waiting ones admitted in their turn.
        rss_peak = sample_rss(b, READ_TIMEOUT_MS / 1000 * 1.5 + 1)
        m = b.metrics()
        rounds_during = good.rounds - rounds_at_attack
        print(f"sent {sent / MiB:.0f} MiB in partial frames; RSS {rss_base / MiB:.1f} MiB before, "
              f"peak {rss_peak / MiB:.1f} MiB during (bound {BOUND / MiB:.0f} MiB); "
              f"held {held / MiB:.1f} MiB, {waiting:.0f} waiting; "
              f"{m['sluice_connections_closed_read_timeout_total']:.0f} closed at the read timeout; "
              f"{rounds_during} client rounds during the attack")

        assert held <= BOUND, f"{held} bytes held over the bound {BOUND}"
        assert waiting >= 20, f"only {waiting} connections waited for room"
        assert rss_peak < rss_base + BOUND + 32 * MiB, \
            f"RSS {rss_base / MiB:.1f} -> {rss_peak / MiB:.1f} MiB, bound {BOUND / MiB:.0f} MiB"
        assert not good.errors, f"the well-behaved client failed: {good.errors}"
        assert rounds_during >= 3, f"the well-behaved client made {rounds_during} rounds"
        assert m["sluice_connections_closed_read_timeout_total"] >= 3
        assert m["sluice_request_bytes_held"] <= BOUND

        # The attackers leave; every byte is given back.
        close_all(socks)
        socks = []
        assert wait_for(lambda: b.metrics()["sluice_request_bytes_held"] < 1 * MiB, 30), \
            b.metrics()["sluice_request_bytes_held"]
        assert wait_for(lambda: b.metrics()["sluice_request_budget_waiting_connections"] == 0, 30)
        rounds, errors = good.finish()
        assert not errors, f"the well-behaved client failed: {errors}"
        assert b.stop() == 0, b.log_text()
    finally:
        close_all(socks)
        good.stop_flag.set()


def measure(binary, frames, declared, hold_s):
    """The attack at the broker's defaults; prints the RSS figures."""
    os.environ["SLUICE_BIN"] = binary
    import sluice_harness
    sluice_harness.SLUICE_BIN = binary
    with Broker() as b:
        time.sleep(1.0)
        idle = b.rss_bytes()
        good = GoodClient(b.bootstrap)
        good.start()
        wait_for(lambda: good.rounds >= 3 or good.errors, 30)
        base = b.rss_bytes()
        t0 = time.monotonic()
        socks, sent = open_partial_frames(b.port, frames, declared, stall_s=3.0)
        t_send = time.monotonic() - t0
        rounds0 = good.rounds
        peak = sample_rss(b, hold_s)
        rounds = good.rounds - rounds0
        close_all(socks)
        time.sleep(2.0)
        after = b.rss_bytes()
        _, errors = good.finish()
        print(f"{binary}: {frames} connections x {declared / MiB:.0f} MiB frames, "
              f"sent {sent / MiB:.0f} MiB in {t_send:.1f} s; RSS idle {idle / MiB:.0f} MiB, "
              f"with a client {base / MiB:.0f} MiB, peak during the attack {peak / MiB:.0f} MiB "
              f"(held {hold_s:.0f} s), {after / MiB:.0f} MiB after; client rounds during: "
              f"{rounds}, errors: {errors[:1]}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.environ.get(
        "SLUICE_BIN", os.path.join(os.path.dirname(__file__), "../../build/bin/sluice")))
    ap.add_argument("--frames", type=int, default=30)
    ap.add_argument("--declared-mib", type=int, default=100)
    ap.add_argument("--hold-s", type=float, default=10.0)
    a = ap.parse_args()
    measure(os.path.abspath(a.bin), a.frames, a.declared_mib * MiB, a.hold_s)
