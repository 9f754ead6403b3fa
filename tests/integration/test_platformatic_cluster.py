"""Transactions through @platformatic/kafka 2.12 on a cluster of three
brokers (and three etcd members): the scripts of test_platformatic.py's
transaction tests, with every topic at replication factor 3. Here the
transaction coordinator of an id, the group coordinator and the leaders of
the partitions written are in general different brokers, so this drives
what one broker alone never does: __transaction_state made by the
controller, a leader asking a coordinator elsewhere whether a partition is
in a transaction (KIP-890 verification) and WriteTxnMarkers between
brokers."""

import subprocess

import pytest

import platformatic_env
from cluster_harness import Cluster
from group_wire import find_coordinator

HERE = platformatic_env.DIR

pytestmark = pytest.mark.skipif(
    not platformatic_env.installed(),
    reason="run scripts/install-deps.sh (npm ci in tests/integration/platformatic)")


@pytest.fixture(scope="module")
def cluster():
    """One cluster for the three tests: each works in topics, groups and
    transactional ids of its own."""
    with Cluster(brokers=3, etcd=3) as c:
        yield c


def run_script(cluster, script, *args, timeout=240):
    # api_versions_sent.mjs lists on stderr the request versions the client chose.
    r = subprocess.run([str(platformatic_env.node()), "--import", str(HERE / "api_versions_sent.mjs"),
                        str(HERE / script), cluster.bootstrap, *map(str, args)],
                       capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, \
        f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}\ncluster:\n{cluster.describe(stacks=False)}"
    assert r.stdout.strip() == "ok", f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"


def assert_crosses_brokers(cluster, tid, topic):
    """The transactions of `tid` wrote to a partition led by a broker other
    than its coordinator: one that had to verify with it over the network
    (KIP-890) and take its markers by WriteTxnMarkers. Topics of 2
    partitions on 3 brokers have 2 leaders, so one always is."""
    err, coordinator = find_coordinator(cluster.broker(cluster.live_ids()[0]).port, tid, key_type=1)
    assert err == 0, f"FindCoordinator for {tid}: error {err}"
    leaders = set(cluster.metadata_from(coordinator).leaders(topic).values())
    assert leaders - {coordinator}, f"every partition of {topic} led by {tid}'s coordinator {coordinator}"


def test_cluster_txn_commit_abort_visibility(cluster):
    run_script(cluster, "txn_visibility.mjs", "pltc-txn-vis", 3)
    assert_crosses_brokers(cluster, "pltc-txn-vis-P", "pltc-txn-vis")


def test_cluster_txn_read_process_write(cluster):
    run_script(cluster, "txn_read_process_write.mjs", "pltc-txn-rpw", 3)
    assert_crosses_brokers(cluster, "pltc-txn-rpw-tid", "pltc-txn-rpw-out")


def test_cluster_txn_zombie_fenced(cluster):
    run_script(cluster, "txn_fence.mjs", "pltc-txn-fence", 3)
    assert_crosses_brokers(cluster, "pltc-txn-fence-tid", "pltc-txn-fence")
