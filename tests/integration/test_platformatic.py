"""@platformatic/kafka 2.12 (a current pure-JS client, Node.js) against sluice:
the versions issue 17 added, as a client of today negotiates them
(ListOffsets MAX_TIMESTAMP, DescribeLogDirs v4, DescribeCluster,
DescribeProducers, the group APIs and offsets at their latest versions;
topic ids in CreateTopics v7 and DeleteTopics v6, DescribeTopicPartitions);
and transactions through the client's transactional producer (commit and
abort as read_committed and read_uncommitted consumers see them, the
read-process-write loop with the consumer's offsets in the transaction, a
zombie fenced). Each test runs one script of platformatic/ (its header says
what it drives and checks); a script prints "ok" when all its checks held."""

import subprocess

import pytest

import platformatic_env

HERE = platformatic_env.DIR
NODE = platformatic_env.node()

pytestmark = pytest.mark.skipif(
    not platformatic_env.installed(),
    reason="run scripts/install-deps.sh (npm ci in tests/integration/platformatic)")


def run_script(broker, script, *args, timeout=120):
    # api_versions_sent.mjs lists on stderr the request versions the client chose.
    r = subprocess.run([str(NODE), "--import", str(HERE / "api_versions_sent.mjs"), str(HERE / script),
                        broker.bootstrap, *map(str, args)],
                       capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}\nbroker log:\n{broker.log_text()}"
    assert r.stdout.strip() == "ok", f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"


def test_platformatic_issue17_apis(broker):
    run_script(broker, "issue17_apis.mjs", "plt-i17", broker.data_dir)


def test_platformatic_group_consume_with_commits(broker_factory):
    # The producer auto-creates the topic: with 3 partitions.
    b = broker_factory(settings={"num.partitions": 3})
    b.start()
    run_script(b, "group_consume.mjs", "plt-group")
    assert b.stop() == 0, b.log_text()


def test_platformatic_list_offsets_every_mode(broker):
    run_script(broker, "list_offsets.mjs", "plt-offsets")


def test_platformatic_topic_ids(broker):
    """CreateTopics v7, DeleteTopics v6 by id and by name, and
    DescribeTopicPartitions paged by its cursor, from a current client."""
    run_script(broker, "topic_ids.mjs", "plt-ids")


def test_platformatic_admin_create_and_delete_topics(broker):
    run_script(broker, "admin_topics.mjs", "plt-admin")



def test_platformatic_topic_recreated_while_consumed_by_id(broker):
    run_script(broker, "recreate_by_id.mjs", "plt-recreate")


# ------------------------------------------------------------ transactions
# The client's transactional producer against one broker (the scripts'
# headers say what each checks); the same scripts against a cluster are in
# test_platformatic_cluster.py.

def test_platformatic_txn_commit_abort_visibility(broker):
    run_script(broker, "txn_visibility.mjs", "plt-txn-vis", 1)


def test_platformatic_txn_read_process_write(broker):
    run_script(broker, "txn_read_process_write.mjs", "plt-txn-rpw", 1)


def test_platformatic_txn_zombie_fenced(broker):
    run_script(broker, "txn_fence.mjs", "plt-txn-fence", 1)
