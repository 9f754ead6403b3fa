"""@platformatic/kafka 1.35 (a current pure-JS client, Node.js) against sluice:
the versions issue 17 added, as a client of today negotiates them
(ListOffsets MAX_TIMESTAMP, DescribeLogDirs v4, DescribeCluster,
DescribeProducers, the group APIs and offsets at their latest versions;
topic ids in CreateTopics v7 and DeleteTopics v6, DescribeTopicPartitions)."""

import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).parent / "platformatic"


@pytest.mark.skipif(not (HERE / "node_modules" / "@platformatic" / "kafka").is_dir(),
                    reason="run scripts/install-deps.sh (npm ci in tests/integration/platformatic)")
def test_platformatic_issue17_apis(broker):
    r = subprocess.run(["node", str(HERE / "issue17_apis.mjs"), broker.bootstrap, "plt-i17", broker.data_dir],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}\nbroker log:\n{broker.log_text()}"
    assert r.stdout.strip() == "ok"


@pytest.mark.skipif(not (HERE / "node_modules" / "@platformatic" / "kafka").is_dir(),
                    reason="run scripts/install-deps.sh (npm ci in tests/integration/platformatic)")
def test_platformatic_topic_ids(broker):
    """CreateTopics v7, DeleteTopics v6 by id and by name, and
    DescribeTopicPartitions paged by its cursor, from a current client."""
    r = subprocess.run(["node", str(HERE / "topic_ids.mjs"), broker.bootstrap, "plt-ids"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}\nbroker log:\n{broker.log_text()}"
    assert r.stdout.strip() == "ok"
