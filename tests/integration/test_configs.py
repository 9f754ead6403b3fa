"""Topic and broker configs through confluent-kafka-python 1.7, kafka-python
2.0.2, raw IncrementalAlterConfigs (neither Python client has it) and the
`sluice config` / `sluice topic alter` CLI.

Covered: sources and synonyms of topic and broker settings; legacy and
incremental alters of the broker resource (this node's id and the
cluster-wide default ""), persisted across a restart; invalid values refused
with INVALID_CONFIG and nothing changed; settings that cannot change at
runtime refused with INVALID_REQUEST; another broker's id refused; and a
broker-wide log.retention.ms changed at runtime deleting old segments of a
topic without its own override while one with an override keeps them.
"""

import os
import struct
import subprocess
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

import kafka.errors as kerr
from kafka.admin import ConfigResource as KConfigResource
from kafka.admin import ConfigResourceType as KConfigResourceType
from kafka.admin import KafkaAdminClient

from sluice_harness import SLUICE_BIN
from test_bad_input import Reader, connect, kstr, recv_response, request

TIMEOUT = 30
NODE = "0"  # the harness's brokers keep node.id's default

# Kafka's ConfigSource codes.
DYNAMIC_TOPIC, DYNAMIC_BROKER, DYNAMIC_DEFAULT, STATIC, DEFAULT = 1, 2, 3, 4, 5
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
INVALID_CONFIG = KafkaError.INVALID_CONFIG  # 40
INVALID_REQUEST = KafkaError.INVALID_REQUEST  # 42


def unique(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# ---------------------------------------------------------------- helpers

def ck_admin(b):
    return AdminClient({"bootstrap.servers": b.bootstrap})


def kp_admin(b):
    return KafkaAdminClient(bootstrap_servers=b.bootstrap, request_timeout_ms=TIMEOUT * 1000,
                            client_id="sluice-it-configs")


def ck_describe(admin, rtype, name):
    """{key: (value, source, read_only)} through confluent-kafka."""
    (f,) = admin.describe_configs([ConfigResource(rtype, name)]).values()
    return {k: (v.value, v.source, v.is_read_only) for k, v in f.result(timeout=TIMEOUT).items()}


def ck_alter(admin, rtype, name, configs, validate_only=False):
    """Legacy AlterConfigs; returns None or the KafkaError."""
    (f,) = admin.alter_configs([ConfigResource(rtype, name, set_config=configs)],
                               validate_only=validate_only).values()
    try:
        f.result(timeout=TIMEOUT)
        return None
    except KafkaException as e:
        return e.args[0]


def kp_describe(admin, rtype, name):
    """{key: (value, source, read_only, [(synonym, value, source), ...])} through
    kafka-python, which asks for synonyms (DescribeConfigs v1) and keeps them all."""
    (res,) = admin.describe_configs([KConfigResource(rtype, name)], include_synonyms=True)[0].resources
    err, msg, _, rname, entries = res[:5]
    assert err == 0, (err, msg)
    assert rname == name
    return {e[0]: (e[1], e[3], e[2], [tuple(s) for s in e[5]]) for e in entries}


def incremental(port, rtype, name, ops, validate_only=False):
    """Raw IncrementalAlterConfigs v0; returns (error_code, error_message)."""
    body = struct.pack(">i", 1) + struct.pack(">b", rtype) + kstr(name) + struct.pack(">i", len(ops))
    for key, op, value in ops:
        body += kstr(key) + struct.pack(">b", op) + (kstr(value) if value is not None else struct.pack(">h", -1))
    body += struct.pack(">b", 1 if validate_only else 0)
    with connect(port) as s:
        s.sendall(request(44, 0, 7, body))
        r = Reader(recv_response(s))
    assert r.take(">i") == 7
    r.take(">i")  # throttle
    assert r.take(">i") == 1
    err, msg, rt, rname = r.take(">h"), r.string(), r.take(">b"), r.string()
    assert (rt, rname) == (rtype, name)
    return err, msg


def cli(*args, check=True):
    p = subprocess.run([SLUICE_BIN, *args], capture_output=True, text=True, timeout=TIMEOUT + 30)
    if check:
        assert p.returncode == 0, f"sluice {' '.join(args)} -> {p.returncode}\n{p.stdout}\n{p.stderr}"
    return p


BROKER, TOPIC = ConfigResource.Type.BROKER, ConfigResource.Type.TOPIC


# ------------------------------------------------------------------- tests

def test_sources_and_synonyms_of_topic_and_broker_settings(broker_factory):
    b = broker_factory(settings={"log.roll.ms": "3600000"}).start()
    ck, kp = ck_admin(b), kp_admin(b)
    try:
        topic = unique("syn")
        (f,) = ck.create_topics([NewTopic(topic, 1, 1, config={"retention.ms": "7200000"})]).values()
        f.result(timeout=TIMEOUT)
        # A node value and a cluster-wide default, through both clients.
        assert ck_alter(ck, BROKER, NODE, {"log.retention.bytes": "1000000"}) is None
        r = kp.alter_configs([KConfigResource(KConfigResourceType.BROKER, "",
                                              configs={"log.segment.bytes": "2097152",
                                                       "log.retention.bytes": "5000000"})])
        assert r.resources[0][0] == 0, r.resources

        # The broker as confluent-kafka sees it: value, source, read-only.
        c = ck_describe(ck, BROKER, NODE)
        assert c["log.retention.bytes"] == ("1000000", DYNAMIC_BROKER, False)
        assert c["log.segment.bytes"] == ("2097152", DYNAMIC_DEFAULT, False)
        assert c["log.roll.ms"] == ("3600000", STATIC, False)
        assert c["log.retention.ms"] == ("604800000", DEFAULT, False)
        assert c["node.id"] == ("0", DEFAULT, True)
        assert c["log.dirs"][1:] == (STATIC, True)

        # kafka-python keeps every synonym: highest priority first, down to the default.
        k = kp_describe(kp, KConfigResourceType.BROKER, NODE)
        assert k["log.retention.bytes"][3] == [("log.retention.bytes", "1000000", DYNAMIC_BROKER),
                                               ("log.retention.bytes", "5000000", DYNAMIC_DEFAULT),
                                               ("log.retention.bytes", "-1", DEFAULT)]
        assert k["log.roll.ms"][3] == [("log.roll.ms", "3600000", STATIC), ("log.roll.ms", "604800000", DEFAULT)]

        # The topic: its own override, and settings inherited from each broker level.
        c = ck_describe(ck, TOPIC, topic)
        assert c["retention.ms"] == ("7200000", DYNAMIC_TOPIC, False)
        assert c["retention.bytes"] == ("1000000", DYNAMIC_BROKER, False)
        assert c["segment.bytes"] == ("2097152", DYNAMIC_DEFAULT, False)
        assert c["segment.ms"] == ("3600000", STATIC, False)
        assert c["cleanup.policy"] == ("delete", DEFAULT, False)
        k = kp_describe(kp, KConfigResourceType.TOPIC, topic)
        assert k["retention.ms"][3] == [("retention.ms", "7200000", DYNAMIC_TOPIC),
                                        ("log.retention.ms", "604800000", DEFAULT)]
        assert k["segment.bytes"][3] == [("log.segment.bytes", "2097152", DYNAMIC_DEFAULT),
                                         ("log.segment.bytes", "1073741824", DEFAULT)]
        assert k["retention.bytes"][3][:2] == [("log.retention.bytes", "1000000", DYNAMIC_BROKER),
                                               ("log.retention.bytes", "5000000", DYNAMIC_DEFAULT)]
    finally:
        kp.close()
        b.close()


def test_broker_alters_legacy_and_incremental_persist_across_restart(broker_factory):
    b = broker_factory().start()
    ck, kp = ck_admin(b), kp_admin(b)
    try:
        # Legacy AlterConfigs replaces the node's whole set of dynamic values.
        assert ck_alter(ck, BROKER, NODE, {"log.retention.ms": "86400000", "num.partitions": "3"}) is None
        assert ck_alter(ck, BROKER, NODE, {"log.retention.ms": "43200000"}) is None
        c = ck_describe(ck, BROKER, NODE)
        assert c["log.retention.ms"][:2] == ("43200000", DYNAMIC_BROKER)
        assert c["num.partitions"][:2] == ("1", DEFAULT)

        # Incremental: SET, APPEND and SUBTRACT on a list, DELETE, at both levels.
        assert incremental(b.port, 4, NODE, [("num.partitions", SET, "2"),
                                             ("log.cleanup.policy", APPEND, "compact")]) == (0, None)
        assert incremental(b.port, 4, "", [("log.cleanup.policy", SET, "compact,delete"),
                                           ("auto.create.topics.enable", SET, "false")]) == (0, None)
        assert incremental(b.port, 4, "", [("log.cleanup.policy", SUBTRACT, "delete")]) == (0, None)
        assert incremental(b.port, 4, NODE, [("log.retention.ms", DELETE, None)]) == (0, None)
        c = ck_describe(ck, BROKER, NODE)
        assert c["num.partitions"][:2] == ("2", DYNAMIC_BROKER)
        assert c["log.cleanup.policy"][:2] == ("delete,compact", DYNAMIC_BROKER)
        assert c["auto.create.topics.enable"][:2] == ("false", DYNAMIC_DEFAULT)
        assert c["log.retention.ms"][:2] == ("604800000", DEFAULT)
        k = kp_describe(kp, KConfigResourceType.BROKER, NODE)
        assert ("log.cleanup.policy", "compact", DYNAMIC_DEFAULT) in k["log.cleanup.policy"][3]

        # Applied at once: a topic created with -1 partitions gets num.partitions,
        # and auto-creation is off.
        t = unique("np")
        (f,) = ck.create_topics([NewTopic(t, -1, -1)]).values()
        f.result(timeout=TIMEOUT)
        assert len(ck.list_topics(t, timeout=TIMEOUT).topics[t].partitions) == 2
        auto = unique("auto")
        md = ck.list_topics(auto, timeout=TIMEOUT)
        assert auto not in md.topics or md.topics[auto].error is not None
        assert auto not in ck.list_topics(timeout=TIMEOUT).topics

        before = ck_describe(ck, BROKER, NODE)
        kp.close()
        b.restart()
        ck = ck_admin(b)
        kp = kp_admin(b)
        assert ck_describe(ck, BROKER, NODE) == before
        k2 = kp_describe(kp, KConfigResourceType.BROKER, NODE)
        assert k2["log.cleanup.policy"] == k["log.cleanup.policy"]
        # The files are where the docs say.
        assert os.path.exists(os.path.join(b.data_dir, "meta", "broker_configs", "default"))
        assert os.path.exists(os.path.join(b.data_dir, "meta", "broker_configs", NODE))
    finally:
        kp.close()
        b.close()


def test_refusals_change_nothing(broker_factory):
    b = broker_factory().start()
    ck, kp = ck_admin(b), kp_admin(b)
    try:
        assert ck_alter(ck, BROKER, NODE, {"log.retention.ms": "86400000"}) is None
        before = ck_describe(ck, BROKER, NODE)

        # An invalid value: INVALID_CONFIG naming the key, and the valid
        # entries of the same request are not applied either.
        e = ck_alter(ck, BROKER, NODE, {"log.retention.ms": "soon", "num.partitions": "4"})
        assert e.code() == INVALID_CONFIG and "log.retention.ms" in e.str(), e
        err, msg = incremental(b.port, 4, NODE, [("num.partitions", SET, "4"), ("log.segment.bytes", SET, "1")])
        assert err == INVALID_CONFIG and "log.segment.bytes" in msg, msg
        err, msg = incremental(b.port, 4, "", [("log.cleanup.policy", SUBTRACT, "delete")])
        assert err == INVALID_CONFIG and "log.cleanup.policy" in msg, msg
        r = kp.alter_configs([KConfigResource(KConfigResourceType.BROKER, NODE,
                                              configs={"message.max.bytes": "-5"})])
        assert r.resources[0][0] == kerr.InvalidConfigurationError.errno, r.resources
        assert "message.max.bytes" in r.resources[0][1]

        # A setting that cannot change at runtime: INVALID_REQUEST, Kafka's words.
        e = ck_alter(ck, BROKER, NODE, {"log.retention.ms": "1000", "log.dirs": "/elsewhere"})
        assert e.code() == INVALID_REQUEST, e
        assert "Cannot update these configs dynamically" in e.str() and "log.dirs" in e.str(), e
        err, msg = incremental(b.port, 4, "", [("listeners", SET, "PLAINTEXT://127.0.0.1:1")])
        assert err == INVALID_REQUEST and "listeners" in msg, msg

        # Another broker's id, and a name that is no id at all.
        r = kp.alter_configs([KConfigResource(KConfigResourceType.BROKER, "5",
                                              configs={"log.retention.ms": "1000"})])
        assert r.resources[0][0] == kerr.InvalidRequestError.errno, r.resources
        assert "Unexpected broker id" in r.resources[0][1]
        err, msg = incremental(b.port, 4, "x", [("log.retention.ms", SET, "1000")])
        assert err == INVALID_REQUEST and "integer" in msg, msg

        # validate_only checks and changes nothing.
        assert ck_alter(ck, BROKER, NODE, {"log.retention.ms": "1000"}, validate_only=True) is None
        assert incremental(b.port, 4, NODE, [("log.retention.ms", SET, "1000")], validate_only=True) == (0, None)

        assert ck_describe(ck, BROKER, NODE) == before
        b.restart()
        assert ck_describe(ck_admin(b), BROKER, NODE) == before
    finally:
        kp.close()
        b.close()


def test_cli_config_and_topic_alter(broker_factory):
    b = broker_factory().start()
    boot = ["--bootstrap", b.bootstrap, "--timeout-ms", "10000"]
    try:
        out = cli("config", "describe", "--broker", *boot).stdout
        assert "configs of broker 0:" in out
        assert "  log.retention.ms=604800000\t(DEFAULT_CONFIG)" in out
        assert "  node.id=0\t(DEFAULT_CONFIG, read-only)" in out

        assert cli("config", "alter", "--broker", "0", "-c", "log.retention.ms=5000",
                   "-c", "num.partitions=2", *boot).stdout.strip() == "altered broker 0"
        # --delete keeps the level's other values (AlterConfigs replaces the set).
        cli("config", "alter", "--broker", "0", "--delete", "num.partitions", *boot)
        out = cli("config", "describe", "--broker", "0", "--synonyms", *boot).stdout
        assert "  log.retention.ms=5000\t(DYNAMIC_BROKER_CONFIG)\n" \
               "      log.retention.ms=5000\t(DYNAMIC_BROKER_CONFIG)\n" \
               "      log.retention.ms=604800000\t(DEFAULT_CONFIG)\n" in out, out
        assert "  num.partitions=1\t(DEFAULT_CONFIG)" in out

        # Refusals: exit status 1, the broker's reason, nothing changed.
        p = cli("config", "alter", "--broker", "0", "-c", "log.retention.ms=abc", *boot, check=False)
        assert p.returncode == 1 and "INVALID_CONFIG" in p.stderr and "log.retention.ms" in p.stderr, p.stderr
        p = cli("config", "alter", "--broker", "0", "-c", "node.id=3", *boot, check=False)
        assert p.returncode == 1 and "INVALID_REQUEST" in p.stderr and "node.id" in p.stderr, p.stderr
        p = cli("config", "alter", "--broker", "9", "-c", "log.retention.ms=1", *boot, check=False)
        assert p.returncode == 1 and "no broker 9" in p.stderr, p.stderr
        assert cli("config", "alter", "--broker", "0", *boot, check=False).returncode == 2
        assert "  log.retention.ms=5000\t(DYNAMIC_BROKER_CONFIG)" in cli("config", "describe", "--broker", "0", *boot).stdout

        # Topics: the inherited dynamic value, an override set and deleted.
        t = unique("clit")
        cli("topic", "create", t, *boot)
        out = cli("config", "describe", "--topic", t, "--synonyms", *boot).stdout
        assert "  retention.ms=5000\t(DYNAMIC_BROKER_CONFIG)\n      log.retention.ms=5000\t(DYNAMIC_BROKER_CONFIG)" in out
        cli("config", "alter", "--topic", t, "-c", "segment.ms=60000", *boot)
        cli("config", "alter", "--topic", t, "-c", "retention.ms=90000", *boot)
        out = cli("config", "describe", "--topic", t, *boot).stdout
        assert "  segment.ms=60000\t(DYNAMIC_TOPIC_CONFIG)" in out and "  retention.ms=90000\t(DYNAMIC_TOPIC_CONFIG)" in out
        cli("config", "alter", "--topic", t, "-d", "retention.ms", *boot)
        out = cli("topic", "describe", t, *boot).stdout
        assert "  retention.ms=5000\t(DYNAMIC_BROKER_CONFIG)" in out and "  segment.ms=60000\t(DYNAMIC_TOPIC_CONFIG)" in out

        # `sluice topic alter` and `config alter --topic` refuse a bad value and change nothing.
        before = cli("topic", "describe", t, *boot).stdout
        p = cli("topic", "alter", t, "-c", "retention.ms=-7", *boot, check=False)
        assert p.returncode == 1 and "INVALID_CONFIG" in p.stderr and "retention.ms" in p.stderr, p.stderr
        p = cli("config", "alter", "--topic", t, "-c", "cleanup.policy=sometimes", *boot, check=False)
        assert p.returncode == 1 and "cleanup.policy" in p.stderr, p.stderr
        assert cli("topic", "describe", t, *boot).stdout == before
    finally:
        b.close()


def low_watermark(bootstrap, topic):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("wm")})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT)
    finally:
        c.close()


def test_broker_wide_retention_change_deletes_old_segments(broker_factory):
    """log.retention.ms changed on the broker at runtime reaches a topic with no
    override of its own (its old segments go, its log start moves, a consumer
    from earliest starts there) and not a topic with its own retention.ms.
    The retention pass interval is changed at runtime too, from the default
    five minutes to 200 ms, so the test also shows that one applies live."""
    b = broker_factory(settings={"log.segment.delete.delay.ms": "0"}).start()
    ck = ck_admin(b)
    try:
        plain, own = unique("ret"), unique("keep")
        (f1, f2) = ck.create_topics([
            NewTopic(plain, 1, 1, config={"segment.bytes": "2048"}),
            NewTopic(own, 1, 1, config={"segment.bytes": "2048", "retention.ms": "86400000"}),
        ]).values()
        f1.result(timeout=TIMEOUT)
        f2.result(timeout=TIMEOUT)
        p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0, "batch.num.messages": 1})
        for i in range(60):
            for t in (plain, own):
                p.produce(t, value=b"v%03d" % i + b"x" * 200)
            p.flush(TIMEOUT)
        assert p.flush(TIMEOUT) == 0
        for t in (plain, own):
            assert low_watermark(b.bootstrap, t) == (0, 60)
        seg_dir = os.path.join(b.data_dir, "logs", f"{plain}-0")
        segments_before = [n for n in os.listdir(seg_dir) if n.endswith(".log")]
        assert len(segments_before) > 3, segments_before

        time.sleep(1.2)  # every record is now older than one second
        err, msg = incremental(b.port, 4, NODE, [("log.retention.ms", SET, "1000"),
                                                 ("log.retention.check.interval.ms", SET, "200")])
        assert err == 0, msg
        deadline = time.monotonic() + 20
        while low_watermark(b.bootstrap, plain)[0] == 0 and time.monotonic() < deadline:
            time.sleep(0.2)
        low, high = low_watermark(b.bootstrap, plain)
        assert 0 < low < high == 60, (low, high)
        assert low_watermark(b.bootstrap, own) == (0, 60)
        deadline = time.monotonic() + 10
        while len([n for n in os.listdir(seg_dir) if n.endswith(".log")]) >= len(segments_before) \
                and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len([n for n in os.listdir(seg_dir) if n.endswith(".log")]) < len(segments_before)

        # A consumer from earliest starts at the new log start.
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": unique("ret"),
                      "auto.offset.reset": "earliest", "enable.auto.commit": False})
        try:
            c.assign([TopicPartition(plain, 0, -2)])  # OFFSET_BEGINNING
            m = None
            deadline = time.monotonic() + TIMEOUT
            while m is None and time.monotonic() < deadline:
                m = c.poll(0.2)
            assert m is not None and m.error() is None, m
            assert m.offset() >= low and m.value().startswith(b"v%03d" % m.offset())
        finally:
            c.close()
        # The topic's describe says where its retention comes from.
        assert ck_describe(ck, TOPIC, plain)["retention.ms"][:2] == ("1000", DYNAMIC_BROKER)
        assert ck_describe(ck, TOPIC, own)["retention.ms"][:2] == ("86400000", DYNAMIC_TOPIC)
    finally:
        b.close()


def test_group_session_timeout_bounds_change_live(broker_factory):
    """group.max.session.timeout.ms lowered at runtime refuses a consumer's
    JoinGroup with INVALID_SESSION_TIMEOUT; deleting the dynamic value lets
    the next consumer join and read."""
    b = broker_factory(settings={"group.initial.rebalance.delay.ms": "0"}).start()
    ck = ck_admin(b)
    try:
        t = unique("sess")
        (f,) = ck.create_topics([NewTopic(t, 1, 1)]).values()
        f.result(timeout=TIMEOUT)
        p = Producer({"bootstrap.servers": b.bootstrap})
        p.produce(t, value=b"hello")
        assert p.flush(TIMEOUT) == 0

        def first_event(group):
            c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group, "session.timeout.ms": 20000,
                          "auto.offset.reset": "earliest"})
            try:
                c.subscribe([t])
                deadline = time.monotonic() + TIMEOUT
                while time.monotonic() < deadline:
                    m = c.poll(0.2)
                    if m is not None:
                        return m
                return None
            finally:
                c.close()

        assert incremental(b.port, 4, NODE, [("group.max.session.timeout.ms", SET, "10000")]) == (0, None)
        m = first_event(unique("g"))
        assert m is not None and m.error() is not None, m
        assert m.error().code() == KafkaError.INVALID_SESSION_TIMEOUT, m.error()

        assert incremental(b.port, 4, NODE, [("group.max.session.timeout.ms", DELETE, None)]) == (0, None)
        m = first_event(unique("g"))
        assert m is not None and m.error() is None and m.value() == b"hello", m and m.error()
    finally:
        b.close()
