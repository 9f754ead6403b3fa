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

HERE = platformatic_env.DIR

pytestmark = [
    pytest.mark.skipif(
        not platformatic_env.installed(),
        reason="run scripts/install-deps.sh (npm ci in tests/integration/platformatic)"),
    # Strict: once the broker serves transactions in a cluster these pass,
    # and the marker must go.
    pytest.mark.xfail(strict=True, reason=(
        "transactions in a cluster are not served yet (docs/transactions.md, 'Not yet'): the controller "
        "does not create __transaction_state, so FindCoordinator for a transactional id answers "
        "COORDINATOR_NOT_AVAILABLE; with the topic made by hand, a leader that is not the id's "
        "coordinator answers a transactional Produce NOT_ENOUGH_REPLICAS (no remote KIP-890 verification)")),
]


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


def test_cluster_txn_commit_abort_visibility(cluster):
    run_script(cluster, "txn_visibility.mjs", "pltc-txn-vis", 3)


def test_cluster_txn_read_process_write(cluster):
    run_script(cluster, "txn_read_process_write.mjs", "pltc-txn-rpw", 3)


def test_cluster_txn_zombie_fenced(cluster):
    run_script(cluster, "txn_fence.mjs", "pltc-txn-fence", 3)
