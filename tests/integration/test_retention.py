"""Retention against the real broker with librdkafka (confluent-kafka): time
and size retention move the log start offset, a deletion racing a slow
consumer's fetch serves data or OFFSET_OUT_OF_RANGE and never garbage, and
a consumer below the log start follows its own auto.offset.reset."""

import os
import threading
import time

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from sluice_harness import wait_until

SETTINGS = {
    "group.initial.rebalance.delay.ms": 0,
    "offsets.topic.num.partitions": 4,
    "log.retention.check.interval.ms": 100,
    "log.segment.delete.delay.ms": 0,
}
TWO_DAYS_AGO = lambda: int(time.time() * 1000) - 2 * 86400 * 1000  # noqa: E731


def create_topic(bootstrap, name, config):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(name, 1, 1, config=config)]).values():
        f.result(timeout=30)


def produce(bootstrap, topic, start, count, timestamp_ms=None, size=0):
    """Values `v<index>` (padded to `size` bytes), one batch each."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "batch.num.messages": 1})
    for i in range(start, start + count):
        value = (b"v%d:" % i).ljust(size, b"x")
        if timestamp_ms is None:
            p.produce(topic, value=value, partition=0)
        else:
            p.produce(topic, value=value, partition=0, timestamp=timestamp_ms)
        p.poll(0)
    assert p.flush(30) == 0


def watermarks(bootstrap, topic):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks"})
    lo, hi = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    c.close()
    return lo, hi

def first_message(bootstrap, topic, group, reset, timeout=20):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": reset,
                  "enable.auto.commit": False})
    c.subscribe([topic])
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                return m.error()
            return m
        return None
    finally:
        c.close()


def segment_files(broker, topic):
    d = os.path.join(broker.data_dir, "logs", f"{topic}-0")
    return sorted(f for f in os.listdir(d) if f.endswith(".log"))


def check_value(m):
    """A message's value is the one produced at its offset: never garbage."""
    assert m.value().startswith(b"v%d:" % m.offset()), (m.offset(), m.value()[:40])


def test_time_retention_moves_the_log_start(broker_factory):
    b = broker_factory(settings=SETTINGS)
    b.start()
    # Segments roll 1 s after their first record; retention keeps 4 s by
    # record time (room for the checks below on a loaded machine before the
    # first segment goes).
    create_topic(b.bootstrap, "timed", {"segment.ms": "1000", "retention.ms": "4000"})
    produce(b.bootstrap, "timed", 0, 20)
    time.sleep(1.2)
    produce(b.bootstrap, "timed", 20, 20)  # rolls: the first 20 are in closed segments
    assert watermarks(b.bootstrap, "timed") == (0, 40)
    # One closed segment, or more if a loaded machine spread the first 20
    # one-record batches over more than segment.ms; the active one from 20.
    files = segment_files(b, "timed")
    assert len(files) >= 2 and files[-1] == "%020d.log" % 20, files
    # The closed segment goes once its newest record is 4 s old; the active
    # one stays.
    wait_until(lambda: watermarks(b.bootstrap, "timed")[0] == 20, 20, "the log start to move to 20")
    wait_until(lambda: len(segment_files(b, "timed")) == 1, 10, "the old segment file to be removed")
    assert b.metrics()['sluice_log_start_offset{topic="timed",partition="0"}'] == 20
    # A new consumer from earliest starts at the new log start.
    m = first_message(b.bootstrap, "timed", "from-earliest", "earliest")
    assert m is not None and not isinstance(m, KafkaError), m
    assert m.offset() == 20
    check_value(m)
    assert b.stop() == 0


def test_size_retention_keeps_the_limit(broker_factory):
    b = broker_factory(settings=SETTINGS)
    b.start()
    create_topic(b.bootstrap, "sized", {"segment.bytes": "2048", "retention.bytes": "6000", "retention.ms": "-1"})
    produce(b.bootstrap, "sized", 0, 200, size=100)

    def trimmed():
        m = b.metrics()
        segs = m['sluice_log_segments{topic="sized",partition="0"}']
        size = m['sluice_log_size_bytes{topic="sized",partition="0"}']
        start = m['sluice_log_start_offset{topic="sized",partition="0"}']
        # Retention stops once dropping the oldest segment would go under
        # the limit: at most the limit plus one segment remains.
        return start > 0 and size <= 6000 + 2048 + 200 and segs >= 2 and (start, size)
    start, size = wait_until(trimmed, 20, "size retention")
    assert size >= 6000 - 2048
    lo, hi = watermarks(b.bootstrap, "sized")
    assert (lo, hi) == (start, 200)
    m = first_message(b.bootstrap, "sized", "sized-earliest", "earliest")
    assert m.offset() == lo
    check_value(m)
    assert b.stop() == 0


def test_deletion_racing_a_slow_consumer_never_serves_garbage(broker_factory):
    b = broker_factory(settings={**SETTINGS, "log.retention.check.interval.ms": 20})
    b.start()
    # Every closed segment is past retention at once (records stamped two
    # days ago), so segments are deleted under the consumers as they read.
    create_topic(b.bootstrap, "racy", {"segment.bytes": "4096", "retention.ms": "86400000"})
    old = TWO_DAYS_AGO()
    produce(b.bootstrap, "racy", 0, 200, timestamp_ms=old, size=200)

    stop = threading.Event()
    produced = [200]

    def producer():
        while not stop.is_set() and produced[0] < 3000:
            produce(b.bootstrap, "racy", produced[0], 50, timestamp_ms=old, size=200)
            produced[0] += 50

    results = {}

    def slow_consumer(reset):
        try:
            results[reset] = read_slowly(reset)
        except BaseException as e:  # an assertion in the thread fails the test below
            results[reset] = e

    def read_slowly(reset):
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": f"slow-{reset}", "auto.offset.reset": reset,
                      "enable.auto.commit": False, "fetch.max.bytes": 1024, "max.partition.fetch.bytes": 1024,
                      "message.max.bytes": 1000, "fetch.wait.max.ms": 10})
        tp = TopicPartition("racy", 0)
        # Start at the current log start; retention overtakes the reader.
        start = watermarks(b.bootstrap, "racy")[0]
        c.assign([TopicPartition("racy", 0, start)])
        # A jump is a message past the one expected next: the reader was
        # overtaken and followed its reset.
        got, errors, last, jumps, overtaken = 0, [], start - 1, 0, False
        deadline = time.monotonic() + 120  # a bound on a wedged test, not a timing asserted
        while time.monotonic() < deadline:
            if got == 20 and not overtaken:
                # The reader stalls (it fetches nothing) until retention has
                # deleted every offset it could have fetched before it
                # stalled: its next fetch is then surely out of range.
                c.pause([tp])
                fetchable = watermarks(b.bootstrap, "racy")[1]
                while watermarks(b.bootstrap, "racy")[0] <= fetchable and time.monotonic() < deadline:
                    time.sleep(0.05)
                overtaken = True
                c.resume([tp])
            if overtaken and (jumps or errors) and (reset == "error" or got >= 40):
                break
            m = c.poll(0.05)
            if m is None:
                continue
            if m.error():
                errors.append(m.error())
                if reset == "error":
                    break
                continue
            check_value(m)
            assert m.offset() > last
            jumps += m.offset() > last + 1
            last = m.offset()
            got += 1
            time.sleep(0.002)
        c.close()
        return got, errors, last, jumps

    threads = [threading.Thread(target=producer)] + [threading.Thread(target=slow_consumer, args=(r,))
                                                      for r in ("earliest", "error")]
    for t in threads:
        t.start()
    for t in threads[1:]:
        t.join()
    stop.set()
    threads[0].join()

    for r in results.values():
        if isinstance(r, BaseException):
            raise r
    lo, hi = watermarks(b.bootstrap, "racy")
    assert lo > 0, "retention never ran"
    got, errors, last, jumps = results["earliest"]
    # auto.offset.reset=earliest: out-of-range fetches are followed to the
    # log start (the reader jumped ahead); everything received was the
    # right message.
    assert got > 0 and jumps >= 1, results["earliest"]
    assert all(e.code() != KafkaError._AUTO_OFFSET_RESET for e in errors), errors
    got, errors, last, jumps = results["error"]
    # auto.offset.reset=error: the race ends in OFFSET_OUT_OF_RANGE, reported
    # as the consumer's reset error, after only valid messages.
    assert errors and errors[-1].code() == KafkaError._AUTO_OFFSET_RESET, errors
    assert b.stop() == 0


def test_consumer_below_the_log_start_follows_its_auto_offset_reset(broker_factory):
    b = broker_factory(settings=SETTINGS)
    b.start()
    create_topic(b.bootstrap, "gone", {"segment.bytes": "1024", "retention.ms": "86400000"})
    produce(b.bootstrap, "gone", 0, 60, timestamp_ms=TWO_DAYS_AGO(), size=100)
    # Every closed segment is past retention: wait until only the active one
    # is left, so the log start stays put.
    wait_until(lambda: b.metrics()['sluice_log_segments{topic="gone",partition="0"}'] == 1, 20,
               "retention to delete every closed segment")
    lo, hi = watermarks(b.bootstrap, "gone")
    assert 0 < lo < hi == 60

    for reset in ("earliest", "latest", "error"):
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": f"below-{reset}"})
        c.commit(offsets=[TopicPartition("gone", 0, 0)], asynchronous=False)  # below the log start
        c.close()
    m = first_message(b.bootstrap, "gone", "below-earliest", "earliest")
    assert m is not None and not isinstance(m, KafkaError), m
    assert m.offset() == lo
    check_value(m)

    e = first_message(b.bootstrap, "gone", "below-error", "error")
    assert isinstance(e, KafkaError) and e.code() == KafkaError._AUTO_OFFSET_RESET, e

    # latest: nothing until something new arrives, then exactly that.
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "below-latest", "auto.offset.reset": "latest",
                  "enable.auto.commit": False})
    c.subscribe(["gone"])
    try:
        # Nothing old arrives; once the reset to the end is done, a new
        # message does (produced until one arrives, since the reset's moment
        # is not visible from here).
        m, n = None, 60
        deadline = time.monotonic() + 30
        while m is None and time.monotonic() < deadline:
            if c.assignment():
                produce(b.bootstrap, "gone", n, 1, size=100)
                n += 1
            for _ in range(5):
                m = c.poll(0.1)
                if m is not None:
                    break
        assert m is not None and not m.error(), m
        assert 60 <= m.offset() < n
        check_value(m)
    finally:
        c.close()
    assert b.stop() == 0
