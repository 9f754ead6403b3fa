"""`sluice group list|describe|lag|reset-offsets|delete` against the broker."""

import subprocess

from confluent_kafka import Consumer, TopicPartition

from sluice_harness import SLUICE_BIN
from test_groups import GROUP_SETTINGS, committed, create_topic, produce


def sluice(*args, check=True):
    r = subprocess.run([SLUICE_BIN, *args], capture_output=True, text=True, timeout=60)
    if check:
        assert r.returncode == 0, r.stderr
    return r


def test_group_tools(broker_factory):
    b = broker_factory(settings=GROUP_SETTINGS)
    b.start()
    create_topic(b.bootstrap, "cli", 2)
    produce(b.bootstrap, "cli", 20, 2)
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "tools"})
    c.commit(offsets=[TopicPartition("cli", 0, 4), TopicPartition("cli", 1, 10)], asynchronous=False)
    c.close()

    out = sluice("group", "list", "-b", b.bootstrap).stdout
    assert "tools\tEmpty" in out.splitlines()

    out = sluice("group", "describe", "-b", b.bootstrap, "-g", "tools").stdout
    assert "state=Empty" in out and "members=0" in out

    out = sluice("group", "lag", "-b", b.bootstrap, "-g", "tools").stdout
    rows = [l.split("\t") for l in out.splitlines()[1:-1]]
    assert [(r[0], r[1], r[2], r[3], r[4]) for r in rows] == [("cli", "0", "4", "10", "6"), ("cli", "1", "10", "10", "0")]
    assert rows[0][5] != "?" and int(rows[0][5]) >= 0
    assert out.splitlines()[-1] == "total lag 6 messages"

    out = sluice("group", "reset-offsets", "-b", b.bootstrap, "-g", "tools", "-t", "cli", "--to-earliest",
                 "--dry-run").stdout
    assert "(dry run)" in out
    assert committed(b.bootstrap, "tools", "cli", 2) == {0: 4, 1: 10}
    sluice("group", "reset-offsets", "-b", b.bootstrap, "-g", "tools", "-t", "cli", "--to-earliest")
    assert committed(b.bootstrap, "tools", "cli", 2) == {0: 0, 1: 0}
    sluice("group", "reset-offsets", "-b", b.bootstrap, "-g", "tools", "-t", "cli", "--to-offset", "7")
    assert committed(b.bootstrap, "tools", "cli", 2) == {0: 7, 1: 7}
    sluice("group", "reset-offsets", "-b", b.bootstrap, "-g", "tools", "-t", "cli", "--to-latest")
    assert committed(b.bootstrap, "tools", "cli", 2) == {0: 10, 1: 10}
    r = sluice("group", "reset-offsets", "-b", b.bootstrap, "-g", "tools", "-t", "cli", check=False)
    assert r.returncode == 2

    sluice("group", "delete", "-b", b.bootstrap, "-g", "tools")
    assert "tools" not in sluice("group", "list", "-b", b.bootstrap).stdout
    r = sluice("group", "delete", "-b", b.bootstrap, "-g", "tools", check=False)
    assert r.returncode == 1
    assert b.stop() == 0
