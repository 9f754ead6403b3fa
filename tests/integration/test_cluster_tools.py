"""The operator's tools on a three-broker cluster (cluster_harness.py):
`sluice cluster describe` (brokers, controller, and with --etcd the etcd
members' health and the controller epoch), `sluice topic create` and
`sluice topic describe` (leader, leader epoch, replicas, ISR and offline
replicas per partition), and `sluice cluster elect-leaders` with the
answers Kafka gives per partition.

There is no replication yet: a broker that restarts is not in any ISR
again, so a preferred election cannot give it its partitions back
(PREFERRED_LEADER_NOT_AVAILABLE); an unclean election can move a partition
whose only in-sync replica is down to a live out-of-sync one.
"""

import re
import struct
import subprocess
import time
import urllib.request

import pytest

from cluster_harness import Cluster, _kstr, _request
from sluice_harness import SLUICE_BIN

SESSION_TIMEOUT_MS = 4000
FAILOVER_S = SESSION_TIMEOUT_MS / 1000 + 5
NOT_CONTROLLER = 41


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


def test_a_non_controller_refuses_elect_leaders(cluster):
    view = cluster.wait_converged()
    other = next(n for n in cluster.node_ids if n != view.controller)
    # ElectLeaders v1: election type, null topic list, timeout.
    body = struct.pack(">bii", 0, -1, 5000)
    r = _request(cluster.broker(other).port, 43, 1, body, 10.0)
    _throttle, error = r.take(">ih")
    assert error == NOT_CONTROLLER
    # v0 has no top-level code: each named partition says it.
    body = struct.pack(">i", 1) + _kstr("tools") + struct.pack(">ii", 1, 0) + struct.pack(">i", 5000)
    r = _request(cluster.broker(other).port, 43, 0, body, 10.0)
    r.take(">i")
    assert r.take(">i") == 1 and r.string() == "tools"
    assert r.take(">i") == 1 and r.take(">ih") == (0, NOT_CONTROLLER)


def test_elect_leaders_after_a_restart_and_unclean(cluster):
    """X (not the controller) dies: its partitions move. Back, it is in no
    ISR, so its preferred election is refused. Then Y dies, the only ISR
    member of a partition X also holds: offline until an unclean election
    moves it to X."""
    topic = "elect"
    sluice("topic", "create", topic, "-p", "12", "-r", "2", "--bootstrap", cluster.bootstrap)
    view = cluster.wait_for(lambda: (lambda v: v if v and topic in v.topics and len(v.topics[topic].partitions) == 12
                                     and all(p.leader >= 1 for p in v.topics[topic].partitions.values()) else None)(
        cluster.agreed_view()), 15, "the topic led everywhere")
    controller = view.controller
    parts = view.topics[topic].partitions
    x, y = [n for n in cluster.node_ids if n != controller]
    preferred_x = next(i for i, p in sorted(parts.items()) if p.replicas[0] == x)
    shared_xy = next(i for i, p in sorted(parts.items()) if sorted(p.replicas) == sorted([x, y]))
    # A partition X does not hold: X's death and return leave it alone.
    untouched = next(i for i, p in sorted(parts.items()) if x not in p.replicas)

    def elect(*args, check=False):
        return sluice("cluster", "elect-leaders", "--topic", topic, *args, "--bootstrap",
                      cluster.live_bootstrap(), check=check)

    r = elect("--partition", str(untouched))
    assert r.returncode == 0 and f"{topic}-{untouched}\tELECTION_NOT_NEEDED" in r.stdout, r.stdout + r.stderr

    cluster.kill(x)
    cluster.wait_for(lambda: (lambda v: v if v and all(p.leader != x for p in v.topics[topic].partitions.values())
                              else None)(cluster.agreed_view()), FAILOVER_S, f"partitions to leave killed broker {x}")
    cluster.restart(x)
    cluster.wait_converged(timeout=FAILOVER_S)

    r = elect("--partition", str(preferred_x))
    assert r.returncode == 1 and f"{topic}-{preferred_x}\tPREFERRED_LEADER_NOT_AVAILABLE" in r.stdout, \
        r.stdout + r.stderr
    assert "not in the ISR" in r.stdout
    r = elect("--partition", str(untouched))
    assert r.returncode == 0 and f"{topic}-{untouched}\tELECTION_NOT_NEEDED" in r.stdout, r.stdout + r.stderr

    before = metrics(cluster, controller)
    cluster.kill(y)

    def offline():
        out = sluice("topic", "describe", topic, "--bootstrap", cluster.live_bootstrap(), check=False).stdout
        p = partition_lines(out).get(shared_xy)
        return p if p and p["leader"] == "-1" else None

    p = cluster.wait_for(offline, FAILOVER_S, f"partition {shared_xy} offline after {y} died")
    assert ids(p["isr"]) == [y] and ids(p["offline"]) == [y], p
    assert metric_value(metrics(cluster, controller), "sluice_offline_partitions") >= 1

    r = elect("--partition", str(shared_xy), "--unclean")
    assert r.returncode == 0 and r.stdout.strip() == f"{topic}-{shared_xy}\telected", r.stdout + r.stderr
    out = sluice("topic", "describe", topic, "--bootstrap", cluster.live_bootstrap()).stdout
    p = partition_lines(out)[shared_xy]
    assert int(p["leader"]) == x and ids(p["isr"]) == [x] and ids(p["offline"]) == [y], p
    # Asked again: a live in-sync leader needs no election.
    r = elect("--partition", str(shared_xy), "--unclean")
    assert r.returncode == 0 and "ELECTION_NOT_NEEDED" in r.stdout, r.stdout

    after = metrics(cluster, controller)
    unclean = 'sluice_leader_elections_total{kind="unclean"}'
    assert metric_value(after, unclean) == (metric_value(before, unclean) or 0) + 1, after
    cluster.restart(y)
    cluster.wait_converged(timeout=FAILOVER_S)


def test_metrics_show_the_controller(cluster):
    view = cluster.wait_converged()
    for n in cluster.node_ids:
        text = metrics(cluster, n)
        assert metric_value(text, "sluice_controller_active") == (1 if n == view.controller else 0), (n, text)
        assert metric_value(text, "sluice_brokers_alive") == 3, text
        assert metric_value(text, "sluice_etcd_request_seconds_count") > 0, text
        assert metric_value(text, "sluice_etcd_request_failures_total") is not None, text
    assert metric_value(metrics(cluster, view.controller), "sluice_controller_changes_total") >= 1
