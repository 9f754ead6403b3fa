"""The operator's view: /metrics after known traffic, and /health."""

import subprocess
import urllib.request


def test_metrics_after_known_traffic(broker):
    lines = b"".join(b"k%d:v%d\n" % (i, i) for i in range(250))
    subprocess.run(["kcat", "-P", "-b", broker.bootstrap, "-t", "metered", "-K", ":", "-p", "0"],
                   input=lines, check=True, timeout=60, capture_output=True)
    m = broker.metrics()
    assert m['sluice_up'] == 1
    assert m['sluice_log_end_offset{topic="metered",partition="0"}'] == 250
    assert m['sluice_log_start_offset{topic="metered",partition="0"}'] == 0
    assert m['sluice_log_segments{topic="metered",partition="0"}'] == 1
    assert m['sluice_log_size_bytes{topic="metered",partition="0"}'] > 250 * 6
    assert m['sluice_requests_total{api="produce"}'] >= 1
    assert m['sluice_request_latency_seconds_count{api="produce"}'] == m['sluice_requests_total{api="produce"}']
    assert m['sluice_request_latency_seconds_bucket{api="produce",le="+Inf"}'] == \
        m['sluice_request_latency_seconds_count{api="produce"}']
    assert m["sluice_connections_accepted_total"] >= 1
    assert m["sluice_network_bytes_in_total"] > 250 * 6

    # Reading it all moves the fetch counters and bytes out.
    out = subprocess.run(["kcat", "-C", "-b", broker.bootstrap, "-t", "metered", "-o", "beginning", "-e"],
                         check=True, timeout=60, capture_output=True)
    assert len(out.stdout.splitlines()) == 250
    m2 = broker.metrics()
    assert m2['sluice_requests_total{api="fetch"}'] >= 1
    assert m2['sluice_response_bytes_total{api="fetch"}'] > 250 * 6


def test_health(broker):
    body = urllib.request.urlopen(f"http://127.0.0.1:{broker.metrics_port}/health", timeout=10).read()
    assert body == b"ok\n"


# ---- Consumer groups against retention (docs/operations.md) -----------------

import math
import threading
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from sluice_harness import SLUICE_BIN, wait_until

GROUP_SETTINGS = {
    "group.initial.rebalance.delay.ms": 0,
    "group.min.session.timeout.ms": 1000,
    "offsets.topic.num.partitions": 4,
}


def create_topic(bootstrap, name, config):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(name, 1, 1, config=config)]).values():
        f.result(timeout=30)


def commit(bootstrap, group, topic, offset):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    c.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    c.close()


def produce(bootstrap, topic, count, timestamp_ms=None, start=0):
    """`count` messages valued v<index>, one batch each (linger 0)."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(start, start + count):
        if timestamp_ms is None:
            p.produce(topic, value=b"v%d" % i, partition=0)
        else:
            p.produce(topic, value=b"v%d" % i, partition=0, timestamp=timestamp_ms)
        p.poll(0)
    assert p.flush(30) == 0


def series(m, name, group, topic, partition=0):
    return m.get(f'{name}{{group="{group}",topic="{topic}",partition="{partition}"}}')

def sluice_lag(bootstrap, group):
    r = subprocess.run([SLUICE_BIN, "group", "lag", "-b", bootstrap, "-g", group], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "topic\tpartition\tcommitted\thigh_watermark\tlag_messages\tlag_ms\theadroom_ms\tlost"
    return [l.split("\t") for l in lines[1:-1]], lines[-1], r.stderr


def test_group_lag_headroom_and_disk_after_known_traffic(broker_factory):
    b = broker_factory(settings={**GROUP_SETTINGS, "sluice.metrics.write.rate.window.ms": 2000,
                                 "sluice.retention.headroom.alert.ms": 600000})
    b.start()
    create_topic(b.bootstrap, "lagged", {"retention.ms": "3600000"})
    create_topic(b.bootstrap, "capped", {"retention.ms": "3600000", "retention.bytes": "5000"})
    minute_ago = int(time.time() * 1000) - 60000
    produce(b.bootstrap, "lagged", 100, timestamp_ms=minute_ago)
    produce(b.bootstrap, "capped", 10)
    commit(b.bootstrap, "behind", "lagged", 40)
    commit(b.bootstrap, "caught-up", "lagged", 100)

    m = b.metrics()
    assert series(m, "sluice_group_committed_offset", "behind", "lagged") == 40
    assert series(m, "sluice_group_lag_messages", "behind", "lagged") == 60
    # The oldest unconsumed message is a minute old; its segment's newest
    # record too, so retention (1 h) takes it in about 59 minutes.
    assert abs(series(m, "sluice_group_lag_seconds", "behind", "lagged") - 60) < 10
    assert abs(series(m, "sluice_group_retention_headroom_seconds", "behind", "lagged") - 3540) < 10
    assert series(m, "sluice_group_retention_headroom_alert", "behind", "lagged") == 0
    assert series(m, "sluice_group_lost_messages_total", "behind", "lagged") == 0
    assert series(m, "sluice_group_lag_messages", "caught-up", "lagged") == 0
    assert series(m, "sluice_group_lag_seconds", "caught-up", "lagged") == 0
    assert series(m, "sluice_group_retention_headroom_seconds", "caught-up", "lagged") == math.inf
    assert series(m, "sluice_group_retention_headroom_alert", "caught-up", "lagged") == 0
    assert m["sluice_retention_headroom_alert_threshold_seconds"] == 600

    # Disk: the write rate is measured over the 2 s window, projected over
    # retention.ms and capped by retention.bytes.
    lagged = 'topic="lagged",partition="0"'
    capped = 'topic="capped",partition="0"'
    rate = m[f"sluice_log_write_rate_bytes_per_second{{{lagged}}}"]
    assert rate > 0
    assert math.isclose(m[f"sluice_log_retention_projected_bytes{{{lagged}}}"], rate * 3600, rel_tol=1e-6)
    assert m[f"sluice_log_write_rate_bytes_per_second{{{capped}}}"] > 0
    assert m[f"sluice_log_retention_projected_bytes{{{capped}}}"] == 5000
    sizes = [v for k, v in m.items() if k.startswith("sluice_log_size_bytes{")]
    assert m["sluice_disk_used_bytes"] == sum(sizes)
    # __consumer_offsets keeps its offsets forever by time: compact only.
    assert m["sluice_disk_retention_projected_bytes"] == math.inf
    # Once the window has passed without writes the rate is 0.
    wait_until(lambda: b.metrics()[f"sluice_log_write_rate_bytes_per_second{{{lagged}}}"] == 0, 20,
               "the write rate to fall to 0 after the window")

    # The same view from the command line.
    rows, total, _ = sluice_lag(b.bootstrap, "behind")
    assert [r[:5] for r in rows] == [["lagged", "0", "40", "100", "60"]]
    assert abs(int(rows[0][5]) - 60000) < 10000
    # Its headroom is a lower bound of the broker's: no mark, no loss.
    assert 3540000 - 10000 < int(rows[0][6]) <= 3540000 + 10000 and rows[0][7] == ""
    assert total == "total lag 60 messages"
    rows, _, _ = sluice_lag(b.bootstrap, "caught-up")
    assert rows[0][4:] == ["0", "0", "inf", ""]
    assert b.stop() == 0


def test_headroom_alert_and_losses_of_a_stalled_group(broker_factory):
    # Segments roll every 500 ms, retention keeps 6 s, the alert is at 4 s: a
    # group stalled at the start crosses the threshold after about 2.5 s
    # and loses its first segment after about 6.5 s; a live group never
    # alerts.
    b = broker_factory(settings={**GROUP_SETTINGS, "sluice.retention.headroom.alert.ms": 4000,
                                 "log.retention.check.interval.ms": 100, "log.segment.delete.delay.ms": 0,
                                 "sluice.metrics.write.rate.window.ms": 2000})
    b.start()
    create_topic(b.bootstrap, "flow", {"retention.ms": "6000", "segment.ms": "500"})
    produce(b.bootstrap, "flow", 5)
    commit(b.bootstrap, "stalled", "flow", 0)

    stop = threading.Event()
    produced = [5]

    def producer():
        p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0})
        while not stop.is_set():
            p.produce("flow", value=b"v%d" % produced[0], partition=0)
            produced[0] += 1
            p.poll(0)
            time.sleep(0.02)
        p.flush(30)

    live_alerts = []

    def live():
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "live", "auto.offset.reset": "earliest",
                      "auto.commit.interval.ms": 100, "session.timeout.ms": 6000})
        c.subscribe(["flow"])
        while not stop.is_set():
            c.poll(0.05)
        c.close()

    threads = [threading.Thread(target=producer), threading.Thread(target=live)]
    for t in threads:
        t.start()
    try:
        def stalled_alert():
            m = b.metrics()
            live_alerts.append(series(m, "sluice_group_retention_headroom_alert", "live", "flow"))
            return series(m, "sluice_group_retention_headroom_alert", "stalled", "flow") == 1
        wait_until(stalled_alert, 20, "the stalled group's alert")
        m = b.metrics()
        assert series(m, "sluice_group_retention_headroom_seconds", "stalled", "flow") < 4
        # The command line marks it too.
        rows, _, err = sluice_lag(b.bootstrap, "stalled")
        assert rows[0][6].endswith(" !"), rows
        assert "sluice.retention.headroom.alert.ms" in err

        # Retention overtakes it: the loss is exactly log start - 0, counted
        # once however often it is scraped.
        wait_until(lambda: b.metrics()['sluice_log_start_offset{topic="flow",partition="0"}'] > 0, 30,
                   "retention to delete the first segment")
        for _ in range(10):
            m = b.metrics()
            live_alerts.append(series(m, "sluice_group_retention_headroom_alert", "live", "flow"))
            start = m['sluice_log_start_offset{topic="flow",partition="0"}']
            lost = series(m, "sluice_group_lost_messages_total", "stalled", "flow")
            assert lost == start, (lost, start)
            assert series(m, "sluice_group_retention_headroom_alert", "stalled", "flow") == 1
            assert series(m, "sluice_group_retention_headroom_seconds", "stalled", "flow") == 0
            time.sleep(0.2)
        rows, _, _ = sluice_lag(b.bootstrap, "stalled")
        assert int(rows[0][7]) > 0 and rows[0][6] == "0 !"
    finally:
        stop.set()
        for t in threads:
            t.join()

    # The live group had samples, none of which alerted, and lost nothing.
    seen = [a for a in live_alerts if a is not None]
    assert len(seen) >= 5 and set(seen) == {0}, live_alerts
    m = b.metrics()
    assert series(m, "sluice_group_lost_messages_total", "live", "flow") == 0

    # Moving on counts nothing twice, nor does a later move back below the
    # log start over messages already counted. First let retention finish
    # (only the active segment left), so the log start stays put.
    m = wait_until(lambda: (lambda m: m if m['sluice_log_segments{topic="flow",partition="0"}'] == 1 else None)(
        b.metrics()), 20, "retention to leave only the active segment")
    start = m['sluice_log_start_offset{topic="flow",partition="0"}']
    assert series(m, "sluice_group_lost_messages_total", "stalled", "flow") == start
    commit(b.bootstrap, "stalled", "flow", int(start))
    assert series(b.metrics(), "sluice_group_lost_messages_total", "stalled", "flow") == start
    commit(b.bootstrap, "stalled", "flow", 0)
    assert series(b.metrics(), "sluice_group_lost_messages_total", "stalled", "flow") == start
    assert b.stop() == 0


def test_an_unsupported_version_is_counted_and_its_client_named(broker):
    """A Produce v1 (the old message format, advertised but not served) is
    answered UNSUPPORTED_VERSION, as Kafka 4.0 does; /metrics counts it per
    API and the log names the client that asked."""
    import socket
    import struct


    client = b"old-client-7"
    payload = struct.pack(">hhih", 0, 1, 1, len(client)) + client + struct.pack(">hii", 1, 1000, 0)
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as s:
        s.sendall(struct.pack(">i", len(payload)) + payload)
        # size, correlation id 1, no topics, throttle time
        assert s.recv(64) == struct.pack(">iiii", 12, 1, 0, 0), "answered, not closed"
    m = broker.metrics()
    assert m['sluice_requests_unsupported_version_total{api="produce"}'] == 1
    deadline = time.monotonic() + 5
    while "old-client-7" not in broker.log_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "client old-client-7" in broker.log_text() and "api 0 version 1" in broker.log_text()
