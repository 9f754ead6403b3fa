"""The operator's tools on a three-broker cluster (cluster_harness.py):
`sluice cluster describe` (brokers, controller, and with --etcd the etcd
members' health and the controller epoch), `sluice topic create` and
`sluice topic describe` (leader, leader epoch, replicas, ISR and offline
replicas per partition), and `sluice cluster elect-leaders` with the
answers Kafka gives per partition. Then the controller's requests sent to
any broker: ElectLeaders, AlterConfigs of topics and of the cluster-wide
broker default (kept in etcd, so every broker shows it, a restarted one
too), automatic topic creation; and DescribeCluster on every broker.

A preferred election is refused while the preferred replica is down or out
of sync (PREFERRED_LEADER_NOT_AVAILABLE); an unclean election can move a
partition whose only in-sync replica is down to a live out-of-sync one.
"""

import os
import re
import socket
import struct
import subprocess
import urllib.request

import pytest
from confluent_kafka import Producer

from cluster_harness import Cluster, _kstr, _recv_exact, _request
from sluice_harness import SLUICE_BIN, Reader

SESSION_TIMEOUT_MS = 4000
FAILOVER_S = SESSION_TIMEOUT_MS / 1000 + 5
NOT_CONTROLLER = 41
LEADER_NOT_AVAILABLE = 5
INVALID_CONFIG = 40
ELECTION_NOT_NEEDED = 84


def sluice(*args, check=True, timeout=60):
    r = subprocess.run([SLUICE_BIN, *args], capture_output=True, text=True, timeout=timeout)
    if check:
        assert r.returncode == 0, f"sluice {' '.join(args)} exited {r.returncode}\n{r.stdout}\n{r.stderr}"
    return r


def partition_lines(out):
    """{partition: {field: value}} from `sluice topic describe`."""
    parts = {}
    for m in re.finditer(r"^  partition (\d+)\t(.*)$", out, re.M):
        fields = dict(f.split("=", 1) for f in m.group(2).split("\t"))
        parts[int(m.group(1))] = fields
    return parts


def ids(text):
    return sorted(int(x) for x in text.split(",") if x)


def metrics(cluster, node_id):
    port = cluster.broker(node_id).metrics_port
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        return r.read().decode()


def metric_value(text, name):
    m = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
    return float(m.group(1)) if m else None


@pytest.fixture(scope="module")
def cluster():
    with Cluster(brokers=3, etcd=3, session_timeout_ms=SESSION_TIMEOUT_MS) as c:
        yield c


def test_cluster_describe_lists_brokers_controller_and_etcd(cluster):
    view = cluster.wait_converged()
    out = sluice("cluster", "describe", "--bootstrap", cluster.bootstrap).stdout
    assert re.search(r"^cluster_id=\S+$", out, re.M), out
    assert f"controller={view.controller}\n" in out, out
    for n in cluster.node_ids:
        line = f"broker {n}\tendpoint=127.0.0.1:{cluster.broker(n).port}\track=-"
        assert line in out, out
    assert f"broker {view.controller}\tendpoint=127.0.0.1:{cluster.broker(view.controller).port}\track=-\tcontroller" in out

    endpoints = cluster.etcd.endpoints
    out = sluice("cluster", "describe", "--bootstrap", cluster.bootstrap, "--etcd", endpoints).stdout
    members = re.findall(r"^etcd member (\S+)\t(\w+)\t", out, re.M)
    assert len(members) == 3 and all(state == "healthy" for _, state in members), out
    m = re.search(r"^controller_epoch=(\d+)\tcontroller=(\d+)$", out, re.M)
    assert m and int(m.group(1)) > 0 and int(m.group(2)) == view.controller, out
    # Another prefix holds no controller.
    out = sluice("cluster", "describe", "--bootstrap", cluster.bootstrap, "--etcd", endpoints,
                 "--prefix", "/elsewhere/").stdout
    assert "controller_epoch=none" in out, out


def test_topic_create_and_describe(cluster):
    out = sluice("topic", "create", "tools", "-p", "3", "-r", "3", "--bootstrap", cluster.bootstrap).stdout
    assert out.strip() == "created tools"

    def described():
        r = sluice("topic", "describe", "tools", "--bootstrap", cluster.bootstrap, check=False)
        if r.returncode != 0:
            return None
        parts = partition_lines(r.stdout)
        return parts if len(parts) == 3 and all(p["leader"] != "-1" for p in parts.values()) else None

    parts = cluster.wait_for(described, 15, "`sluice topic describe tools` to show three led partitions")
    for i, p in parts.items():
        assert ids(p["replicas"]) == [1, 2, 3], p
        assert ids(p["isr"]) == [1, 2, 3], p
        assert int(p["leader"]) == int(p["replicas"].split(",")[0]), f"partition {i} led by its preferred replica: {p}"
        assert p["leader_epoch"] == "0" and p["offline"] == "", p
    # Every partition has its preferred leader: nothing to elect.
    r = sluice("cluster", "elect-leaders", "--topic", "tools", "--bootstrap", cluster.bootstrap)
    assert sorted(r.stdout.splitlines()) == [f"tools-{i}\tELECTION_NOT_NEEDED\tThe preferred replica "
                                             f"{parts[i]['replicas'].split(',')[0]} already leads." for i in range(3)]
    r = sluice("cluster", "elect-leaders", "--bootstrap", cluster.bootstrap)
    assert r.stdout.strip() == "no election needed", r.stdout
    r = sluice("cluster", "elect-leaders", "--topic", "absent", "--partition", "0", "--bootstrap", cluster.bootstrap,
               check=False)
    assert r.returncode == 1 and "absent-0\tUNKNOWN_TOPIC_OR_PARTITION" in r.stdout, r.stdout + r.stderr


def test_a_non_controller_forwards_elect_leaders(cluster):
    view = cluster.wait_converged()
    other = next(n for n in cluster.node_ids if n != view.controller)
    # ElectLeaders v1: election type, null topic list, timeout. Forwarded to
    # the controller, which finds nothing to elect.
    body = struct.pack(">bii", 0, -1, 5000)
    r = _request(cluster.broker(other).port, 43, 1, body, 10.0)
    _throttle, error = r.take(">ih")
    assert error == 0
    # v0 has no top-level code: each named partition says it.
    body = struct.pack(">i", 1) + _kstr("tools") + struct.pack(">ii", 1, 0) + struct.pack(">i", 5000)
    r = _request(cluster.broker(other).port, 43, 0, body, 10.0)
    r.take(">i")
    assert r.take(">i") == 1 and r.string() == "tools"
    assert r.take(">i") == 1 and r.take(">ih") == (0, ELECTION_NOT_NEEDED)
    # The operator's tool pointed at that broker alone works too.
    out = sluice("cluster", "elect-leaders", "--bootstrap", cluster.broker(other).address).stdout
    assert out.strip() == "no election needed", out


# ---- configs through any broker (raw requests: a client would send them
# to the controller itself, which would not show the forwarding)

TOPIC, BROKER = 2, 4


def alter_configs(port, resources, incremental=False):
    """AlterConfigs v0 (or IncrementalAlterConfigs v0) of `resources`, a
    list of (type, name, [(key, value)] or [(key, op, value)]); returns
    {(type, name): (error, message)}."""
    body = struct.pack(">i", len(resources))
    for rtype, name, configs in resources:
        body += struct.pack(">b", rtype) + _kstr(name) + struct.pack(">i", len(configs))
        for c in configs:
            body += _kstr(c[0])
            if incremental:
                body += struct.pack(">b", c[1])
            value = c[-1]
            body += struct.pack(">h", -1) if value is None else _kstr(value)
    body += struct.pack(">b", 0)  # validate_only
    r = _request(port, 44 if incremental else 33, 0, body, 20.0)
    r.take(">i")  # throttle_time_ms
    out = {}
    for _ in range(r.take(">i")):
        error, message, rtype, name = r.take(">h"), r.string(), r.take(">b"), r.string()
        out[(rtype, name)] = (error, message)
    return out


def describe_configs(port, rtype, name, keys):
    """DescribeConfigs v0 of one resource: {key: value}, or the error code."""
    body = struct.pack(">i", 1) + struct.pack(">b", rtype) + _kstr(name)
    body += struct.pack(">i", len(keys)) + b"".join(_kstr(k) for k in keys)
    r = _request(port, 32, 0, body, 10.0)
    r.take(">i")
    assert r.take(">i") == 1
    error, _message, _rtype, _name = r.take(">h"), r.string(), r.take(">b"), r.string()
    if error:
        return error
    values = {}
    for _ in range(r.take(">i")):
        key, value = r.string(), r.string()
        r.take(">bbb")  # read_only, is_default, is_sensitive
        values[key] = value
    return values


def test_topic_configs_altered_through_a_non_controller(cluster):
    view = cluster.wait_converged()
    x, y = [n for n in cluster.node_ids if n != view.controller]
    sluice("topic", "create", "cfg", "-p", "1", "-r", "1", "--bootstrap", cluster.bootstrap)
    cluster.wait_for(lambda: all("cfg" in v.topics for v in cluster.metadata_all().values()), 15,
                     "every broker to know topic cfg")
    got = alter_configs(cluster.broker(x).port, [(TOPIC, "cfg", [("retention.ms", "1234567")])])
    assert got == {(TOPIC, "cfg"): (0, None)}, got
    cluster.wait_for(lambda: describe_configs(cluster.broker(y).port, TOPIC, "cfg", ["retention.ms"])
                     == {"retention.ms": "1234567"}, 10, f"broker {y} to show the new retention.ms")
    got = alter_configs(cluster.broker(y).port, [(TOPIC, "cfg", [("segment.ms", 0, "7654321")])], incremental=True)
    assert got == {(TOPIC, "cfg"): (0, None)}, got
    for n in cluster.node_ids:
        cluster.wait_for(lambda: describe_configs(cluster.broker(n).port, TOPIC, "cfg", ["retention.ms", "segment.ms"])
                         == {"retention.ms": "1234567", "segment.ms": "7654321"}, 10, f"broker {n} to show both")
    # A bad value is refused by the controller, and the answer comes back.
    got = alter_configs(cluster.broker(x).port, [(TOPIC, "cfg", [("retention.ms", "soon")])])
    assert got[(TOPIC, "cfg")][0] == INVALID_CONFIG, got
    # A request naming this broker's own resource stays here: the topic in
    # it is the controller's, so it is refused with NOT_CONTROLLER.
    got = alter_configs(cluster.broker(x).port, [(TOPIC, "cfg", [("retention.ms", "1")]),
                                                 (BROKER, str(x), [("log.cleaner.min.compaction.lag.ms", "1000")])])
    assert got == {(TOPIC, "cfg"): (NOT_CONTROLLER, got[(TOPIC, "cfg")][1]), (BROKER, str(x)): (0, None)}, got
    assert describe_configs(cluster.broker(x).port, TOPIC, "cfg", ["retention.ms"]) == {"retention.ms": "1234567"}
    got = alter_configs(cluster.broker(x).port, [(BROKER, str(x), [])])
    assert got == {(BROKER, str(x)): (0, None)}, got


def test_cluster_wide_broker_config_reaches_every_broker_and_survives_a_restart(cluster):
    view = cluster.wait_converged()
    x, y = [n for n in cluster.node_ids if n != view.controller]
    key, value = "log.retention.ms", "7200000"
    got = alter_configs(cluster.broker(x).port, [(BROKER, "", [(key, 0, value)])], incremental=True)
    assert got == {(BROKER, ""): (0, None)}, got

    def everywhere():
        return all(describe_configs(cluster.broker(n).port, BROKER, str(n), [key]) == {key: value}
                   and describe_configs(cluster.broker(n).port, BROKER, "", [key]) == {key: value}
                   for n in cluster.node_ids)

    cluster.wait_for(everywhere, 10, "every broker to show the cluster-wide value")
    # Kept in etcd, not in a broker's data directory: a restarted broker
    # reads it back from there.
    for n in cluster.node_ids:
        assert not os.path.exists(os.path.join(cluster.broker(n).data_dir, "meta", "broker_configs", "default"))
    cluster.restart(y)
    cluster.wait_converged(timeout=FAILOVER_S)
    assert describe_configs(cluster.broker(y).port, BROKER, str(y), [key]) == {key: value}
    # Removed through another broker: gone everywhere, back to the default.
    got = alter_configs(cluster.broker(y).port, [(BROKER, "", [(key, 1, None)])], incremental=True)
    assert got == {(BROKER, ""): (0, None)}, got
    cluster.wait_for(lambda: all(describe_configs(cluster.broker(n).port, BROKER, "", [key]) == {}
                                 for n in cluster.node_ids), 10, "every broker to drop the cluster-wide value")


def test_auto_create_through_a_non_controller(cluster):
    view = cluster.wait_converged()
    other = next(n for n in cluster.node_ids if n != view.controller)
    topic = "auto-created"
    # Metadata v4 naming the topic, allow_auto_topic_creation true.
    body = struct.pack(">i", 1) + _kstr(topic) + struct.pack(">b", 1)
    r = _request(cluster.broker(other).port, 3, 4, body, 10.0)
    r.take(">i")  # throttle_time_ms
    for _ in range(r.take(">i")):
        r.take(">i"), r.string(), r.take(">i"), r.string()
    r.string(), r.take(">i")  # cluster id, controller
    assert r.take(">i") == 1
    error, name = r.take(">h"), r.string()
    assert name == topic and error in (0, LEADER_NOT_AVAILABLE), error
    cluster.wait_for(lambda: (lambda v: v if v and topic in v.topics and v.topics[topic].partitions
                              and all(p.leader >= 0 for p in v.topics[topic].partitions.values()) else None)(
        cluster.agreed_view()), 15, "every broker to show the automatically created topic led")
    # A producer that knows only that broker: its Metadata creates the topic.
    reports = []
    p = Producer({"bootstrap.servers": cluster.broker(other).address, "message.timeout.ms": 20000})
    for i in range(5):
        p.produce("auto-produced", value=b"v%d" % i, on_delivery=lambda err, msg: reports.append(err))
    assert p.flush(30) == 0
    assert reports == [None] * 5, reports


def test_describe_cluster_on_every_broker(cluster):
    view = cluster.wait_converged()
    answers = {n: describe_cluster(cluster.broker(n).port) for n in cluster.node_ids}
    for n, (error, cluster_id, controller, brokers) in answers.items():
        assert error == 0, (n, error)
        assert controller == view.controller and cluster_id == view.cluster_id, (n, controller, cluster_id)
        assert brokers == {b: ("127.0.0.1", cluster.broker(b).port) for b in cluster.node_ids}, (n, brokers)


def describe_cluster(port):
    """DescribeCluster v0 (flexible: request header v2, compact strings,
    tagged fields): (error, cluster id, controller id, {id: (host, port)})."""
    client_id = b"cluster-harness"
    corr = 9
    payload = struct.pack(">hhih", 60, 0, corr, len(client_id)) + client_id + b"\x00"  # header tags
    payload += struct.pack(">b", 0) + b"\x00"  # include_cluster_authorized_operations, tags
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(struct.pack(">i", len(payload)) + payload)
        (n,) = struct.unpack(">i", _recv_exact(s, 4))
        r = Reader(_recv_exact(s, n))

    def uvarint():
        v, shift = 0, 0
        while True:
            b = r.take(">B")
            v |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return v

    def cstring():
        n = uvarint()
        if n == 0:
            return None
        s = r.d[r.p:r.p + n - 1].decode()
        r.p += n - 1
        return s

    assert r.take(">i") == corr
    uvarint()  # response header tags
    r.take(">i")  # throttle_time_ms
    error = r.take(">h")
    cstring()  # error message
    cluster_id = cstring()
    controller = r.take(">i")
    brokers = {}
    for _ in range(uvarint() - 1):
        broker_id, host, bport, _rack = r.take(">i"), cstring(), r.take(">i"), cstring()
        uvarint()
        brokers[broker_id] = (host, bport)
    return error, cluster_id, controller, brokers


def test_elect_leaders_after_a_restart_and_unclean(cluster):
    """X and Y are the brokers that are not the controller. X dies: its
    partitions move, and its preferred election is refused while it is down.
    Then Y dies too: a partition held by X and Y only goes offline with Y its
    last in-sync replica. X comes back: with no leader to copy from it cannot
    rejoin the ISR, so the partition stays offline until an unclean election
    moves it to X. Y comes back; once X is in sync again, X's preferred
    election gives it its partition back."""
    topic = "elect"
    sluice("topic", "create", topic, "-p", "12", "-r", "2", "--bootstrap", cluster.bootstrap)
    view = cluster.wait_for(lambda: (lambda v: v if v and topic in v.topics and len(v.topics[topic].partitions) == 12
                                     and all(p.leader >= 1 for p in v.topics[topic].partitions.values()) else None)(
        cluster.agreed_view()), 15, "the topic led everywhere")
    controller = view.controller
    parts = view.topics[topic].partitions
    x, y = [n for n in cluster.node_ids if n != controller]
    shared_xy = next(i for i, p in sorted(parts.items()) if sorted(p.replicas) == sorted([x, y]))
    preferred_x = next(i for i, p in sorted(parts.items()) if p.replicas[0] == x and i != shared_xy)
    # A partition X does not hold: X's death and return leave it alone.
    untouched = next(i for i, p in sorted(parts.items()) if x not in p.replicas)

    def elect(*args, check=False):
        return sluice("cluster", "elect-leaders", "--topic", topic, *args, "--bootstrap",
                      cluster.live_bootstrap(), check=check)

    def described(partition):
        out = sluice("topic", "describe", topic, "--bootstrap", cluster.live_bootstrap(), check=False).stdout
        return partition_lines(out).get(partition)

    r = elect("--partition", str(untouched))
    assert r.returncode == 0 and f"{topic}-{untouched}\tELECTION_NOT_NEEDED" in r.stdout, r.stdout + r.stderr

    cluster.kill(x)
    cluster.wait_for(lambda: (lambda v: v if v and all(p.leader != x for p in v.topics[topic].partitions.values())
                              else None)(cluster.agreed_view()), FAILOVER_S, f"partitions to leave killed broker {x}")
    r = elect("--partition", str(preferred_x))
    assert r.returncode == 1 and f"{topic}-{preferred_x}\tPREFERRED_LEADER_NOT_AVAILABLE" in r.stdout, \
        r.stdout + r.stderr
    assert "not live" in r.stdout, r.stdout
    r = elect("--partition", str(untouched))
    assert r.returncode == 0 and f"{topic}-{untouched}\tELECTION_NOT_NEEDED" in r.stdout, r.stdout + r.stderr

    before = metrics(cluster, controller)
    cluster.kill(y)
    p = cluster.wait_for(lambda: (lambda p: p if p and p["leader"] == "-1" else None)(described(shared_xy)),
                         FAILOVER_S, f"partition {shared_xy} offline after {y} died")
    assert ids(p["isr"]) == [y], p
    assert metric_value(metrics(cluster, controller), "sluice_offline_partitions") >= 1

    cluster.restart(x)
    p = cluster.wait_for(lambda: (lambda p: p if p and ids(p["offline"]) == [y] else None)(described(shared_xy)),
                         FAILOVER_S, f"broker {x} live again for partition {shared_xy}")
    assert p["leader"] == "-1" and ids(p["isr"]) == [y], p
    # A preferred election has nobody to choose: X is live but out of sync,
    # Y is down.
    r = elect("--partition", str(shared_xy))
    assert r.returncode == 1 and "PREFERRED_LEADER_NOT_AVAILABLE" in r.stdout, r.stdout + r.stderr
    assert ("not in the ISR" if parts[shared_xy].replicas[0] == x else "not live") in r.stdout, r.stdout

    r = elect("--partition", str(shared_xy), "--unclean")
    assert r.returncode == 0 and r.stdout.strip() == f"{topic}-{shared_xy}\telected", r.stdout + r.stderr
    p = described(shared_xy)
    assert int(p["leader"]) == x and ids(p["isr"]) == [x] and ids(p["offline"]) == [y], p
    # Asked again: a live in-sync leader needs no election.
    r = elect("--partition", str(shared_xy), "--unclean")
    assert r.returncode == 0 and "ELECTION_NOT_NEEDED" in r.stdout, r.stdout

    after = metrics(cluster, controller)
    unclean = 'sluice_leader_elections_total{kind="unclean"}'
    assert metric_value(after, unclean) == (metric_value(before, unclean) or 0) + 1, after

    cluster.restart(y)
    cluster.wait_converged(timeout=FAILOVER_S)
    cluster.wait_for(lambda: (lambda p: p if p and x in ids(p["isr"]) else None)(described(preferred_x)),
                     FAILOVER_S, f"broker {x} back in the ISR of {topic}-{preferred_x}")
    r = elect("--partition", str(preferred_x))
    # The controller's own preferred-leader balancing may have been first.
    assert r.returncode == 0 and (r.stdout.strip() == f"{topic}-{preferred_x}\telected"
                                  or "ELECTION_NOT_NEEDED" in r.stdout), r.stdout + r.stderr
    assert int(described(preferred_x)["leader"]) == x


def test_metrics_show_the_controller(cluster):
    view = cluster.wait_converged()
    for n in cluster.node_ids:
        text = metrics(cluster, n)
        assert metric_value(text, "sluice_controller_active") == (1 if n == view.controller else 0), (n, text)
        assert metric_value(text, "sluice_brokers_alive") == 3, text
        assert metric_value(text, "sluice_etcd_request_seconds_count") > 0, text
        assert metric_value(text, "sluice_etcd_request_failures_total") is not None, text
    assert metric_value(metrics(cluster, view.controller), "sluice_controller_changes_total") >= 1
