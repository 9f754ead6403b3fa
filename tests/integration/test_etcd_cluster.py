"""The etcd test harness itself: three real members come up healthy, and
the cluster stays healthy when one is killed and comes back."""

import os

from etcd_harness import EtcdCluster


def test_three_members_healthy_and_survive_one_kill():
    with EtcdCluster(n=3) as cluster:
        out = cluster.etcdctl("endpoint", "health")
        assert out.returncode == 0, out.stdout + out.stderr
        assert out.stderr.count("is healthy") + out.stdout.count("is healthy") == 3

        assert cluster.etcdctl("put", "/it/k", "v").returncode == 0
        assert cluster.pid(0) is not None
        cluster.kill(0)
        assert not cluster.members[0].running()

        survivors = ",".join(cluster.endpoint(i) for i in (1, 2))
        out = cluster.etcdctl("endpoint", "health", endpoints=survivors)
        assert out.returncode == 0, out.stdout + out.stderr
        # The whole list reports the dead member and fails, as it should.
        assert cluster.etcdctl("endpoint", "health").returncode != 0
        out = cluster.etcdctl("get", "/it/k", "--print-value-only", endpoints=survivors)
        assert out.stdout.strip() == "v", out.stderr

        cluster.restart(0)
        out = cluster.etcdctl("endpoint", "health")
        assert out.returncode == 0, out.stdout + out.stderr
        root = cluster._root
    assert not os.path.exists(root)
