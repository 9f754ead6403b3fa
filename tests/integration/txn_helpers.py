"""What the transaction tests share: a read of a whole topic at one
isolation level with confluent-kafka, and a commit retried as an
application would."""
import time
import uuid

from confluent_kafka import Consumer, KafkaError, KafkaException


def read_all(bootstrap, topic, isolation, expect_at_least=0, timeout=30, quiet_s=3):
    """Values read from the start of `topic` until at least `expect_at_least`
    arrived and nothing more came for `quiet_s` seconds (or `timeout`)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader-" + uuid.uuid4().hex,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False, "isolation.level": isolation})
    c.subscribe([topic])
    got = []
    deadline = time.time() + timeout
    quiet_since = time.time()
    try:
        while time.time() < deadline:
            m = c.poll(0.5)
            if m is None:
                if len(got) >= expect_at_least and time.time() - quiet_since > quiet_s:
                    break
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    continue
                raise KafkaException(m.error())
            got.append(m.value().decode())
            quiet_since = time.time()
    finally:
        c.close()
    return got


def commit_or_abort(p, timeout):
    """Commits `p`'s open transaction, retrying what librdkafka calls
    retriable; aborts when it says the transaction must be. Returns
    "committed" or "aborted"; raises on a fatal error."""
    deadline = time.time() + timeout
    while True:
        try:
            p.commit_transaction(timeout)
            return "committed"
        except KafkaException as e:
            err = e.args[0]
            if err.retriable() and time.time() < deadline:
                continue
            if err.txn_requires_abort():
                p.abort_transaction(timeout)
                return "aborted"
            raise
