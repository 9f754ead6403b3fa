"""One consumer-group member run for test_group_churn.py (not a test itself).

usage: group_churn_member.py BOOTSTRAP GROUP TOPIC LOG_PATH SESSION_MS ASSIGNOR

Consumes TOPIC in GROUP, at least once: what it processed is written to
LOG_PATH (and flushed to the kernel, so a SIGKILL cannot lose it) before its
offsets are committed, every 1,000 messages or every second, and before
partitions are revoked. SIGTERM makes it close gracefully (LeaveGroup); SIGKILL is the
crash. The log is one line per event:

    start PID
    assign P,P,...      partitions given to this member (eager: the whole set;
                        cooperative: the ones added)
    revoke P,P,...      partitions taken away (also "lost")
    m P OFFSET N        message number N processed from partition P at OFFSET
    commit ok|fail ERR  what a synchronous commit answered
    end                 closed gracefully
"""

import os
import signal
import sys
import time

from confluent_kafka import Consumer, KafkaException, TopicPartition

bootstrap, group, topic, log_path, session_ms, assignor = sys.argv[1:7]
# Line-buffered: a line reaches the kernel as it is written, so the test can
# see a member that has processed messages it has not committed yet.
log = open(log_path, "a", buffering=1)
stopping = [False]


def on_term(signum, frame):
    stopping[0] = True


signal.signal(signal.SIGTERM, on_term)


def parts(ps):
    return ",".join(str(p.partition) for p in sorted(ps, key=lambda p: p.partition))


# Offsets to commit: partition -> next offset, for messages already logged.
pending = {}


def commit_pending(consumer):
    if not pending:
        return
    # Processed (durably enough: in the kernel) before committed.
    log.flush()
    try:
        consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in pending.items()], asynchronous=False)
        log.write("commit ok\n")
    except KafkaException as e:
        # Rebalancing, a stale generation, the broker restarting: the next
        # owner reprocesses from the last commit (at-least-once).
        log.write(f"commit fail {e.args[0].name()}\n")
    pending.clear()


def on_assign(consumer, ps):
    log.write(f"assign {parts(ps)}\n")
    log.flush()


def on_revoke(consumer, ps):
    # What was processed is committed while this generation still owns it.
    commit_pending(consumer)
    log.write(f"revoke {parts(ps)}\n")
    log.flush()


c = Consumer({
    "bootstrap.servers": bootstrap,
    "group.id": group,
    "partition.assignment.strategy": assignor,
    "session.timeout.ms": int(session_ms),
    "heartbeat.interval.ms": max(100, int(session_ms) // 10),
    # JoinGroup's rebalance timeout: how long a rebalance waits for members
    # that are still busy with a batch.
    "max.poll.interval.ms": 15000,
    "auto.offset.reset": "earliest",
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "reconnect.backoff.ms": 20,
    "reconnect.backoff.max.ms": 250,
    "socket.connection.setup.timeout.ms": 3000,
})
log.write(f"start {os.getpid()}\n")
log.flush()
c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
# One message per poll(): rebalance callbacks run inside poll() before the
# message it returns, so the log has assignments and messages in the order
# the consumer saw them.
# Commits are spaced out (1,000 messages or a second) so that a kill often
# lands between processing and committing.
last_commit = time.monotonic()
batch = 0
while not stopping[0]:
    m = c.poll(0.1)
    if m is not None and m.error() is None:
        log.write(f"m {m.partition()} {m.offset()} {int(m.value())}\n")
        pending[m.partition()] = m.offset() + 1
        batch += 1
    if batch >= 1000 or time.monotonic() - last_commit >= 1.0:
        commit_pending(c)
        batch = 0
        last_commit = time.monotonic()
commit_pending(c)
c.close()
log.write("end\n")
log.close()
