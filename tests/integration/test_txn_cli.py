"""`sluice txn list|describe|describe-producers|abort` against a broker, with
real transactional producers (confluent-kafka-python over librdkafka).

A *hanging* transaction is one a partition holds open while its coordinator
no longer knows it, so the partition's last stable offset never moves and
read_committed consumers stall there. test_a_hanging_transaction_is_aborted
makes a real one: a producer opens a transaction and is killed, and the
broker loses __transaction_state (its directories removed while it is
down), then `sluice txn abort` ends it."""
import glob
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import uuid

from confluent_kafka import Producer

from sluice_harness import SLUICE_BIN, wait_until
from test_transactions import create, read_all, txn_producer


def sluice(*args, check=True):
    r = subprocess.run([SLUICE_BIN, *args], capture_output=True, text=True, timeout=120)
    if check:
        assert r.returncode == 0, f"sluice {' '.join(args)}: rc={r.returncode}\n{r.stdout}{r.stderr}"
    return r


def producers(bs, topic, partition):
    """describe-producers as {producer id: {field: value}}."""
    out = sluice("txn", "describe-producers", "-b", bs, "--topic", topic, "--partition", str(partition)).stdout
    rows = {}
    for line in out.splitlines():
        head, *fields = line.split("\t")
        assert head.startswith("producer "), line
        rows[int(head.split()[1])] = dict(f.split("=", 1) for f in fields)
    return rows


def lso_lag(b, topic, partition=0):
    return b.metrics()[f'sluice_partition_lso_lag_messages{{topic="{topic}",partition="{partition}"}}']


def test_list_and_describe_a_live_transaction(broker):
    bs = broker.bootstrap
    create(bs, "txn-cli", partitions=2)
    tid = "tid-" + uuid.uuid4().hex
    p = txn_producer(bs, tid)
    p.begin_transaction()
    p.produce("txn-cli", value="x", partition=1)
    p.flush(30)

    out = sluice("txn", "list", "-b", bs).stdout
    rows = [l.split("\t") for l in out.splitlines()]
    mine = [r for r in rows if r[0] == tid]
    assert len(mine) == 1, out
    assert mine[0][1] == "coordinator=0" and mine[0][3] == "state=Ongoing", out
    pid = int(mine[0][2].split("=")[1])
    assert pid >= 0

    # Filters, as ListTransactions applies them.
    assert tid in sluice("txn", "list", "-b", bs, "--state", "Ongoing").stdout
    assert tid in sluice("txn", "list", "-b", bs, "--state", "Empty", "--state", "Ongoing").stdout
    assert tid not in sluice("txn", "list", "-b", bs, "--state", "CompleteCommit").stdout
    assert tid in sluice("txn", "list", "-b", bs, "--producer-id", str(pid)).stdout
    assert tid not in sluice("txn", "list", "-b", bs, "--producer-id", str(pid + 1000)).stdout
    assert tid in sluice("txn", "list", "-b", bs, "--duration-filter", "0").stdout
    assert tid not in sluice("txn", "list", "-b", bs, "--duration-filter", "3600000").stdout
    bad = sluice("txn", "list", "-b", bs, "--state", "Running", check=False)
    assert bad.returncode == 2 and "Running" in bad.stderr

    out = sluice("txn", "describe", "-b", bs, tid).stdout.splitlines()
    head = dict(f.split("=", 1) for f in out[0].split("\t")[1:])
    assert out[0].startswith(f"txn {tid}\t")
    assert head["state"] == "Ongoing" and int(head["producer_id"]) == pid and head["producer_epoch"] == "0"
    assert head["timeout_ms"] == "60000" and head["coordinator"] == "0"
    assert int(head["start_time_ms"]) > 0 and int(head["duration_ms"]) >= 0
    assert out[1:] == ["partition txn-cli-1"]

    p.commit_transaction(30)
    wait_until(lambda: "state=CompleteCommit" in sluice("txn", "describe", "-b", bs, tid).stdout, 30,
               "the transaction to complete")
    assert sluice("txn", "describe", "-b", bs, tid).stdout.splitlines()[1:] == []

    missing = sluice("txn", "describe", "-b", bs, "no-such-" + tid, check=False)
    assert missing.returncode == 1 and "TRANSACTIONAL_ID_NOT_FOUND" in missing.stderr


def test_abort_by_start_offset_and_by_producer(broker):
    """The abort path end to end on a live transaction: the partition's
    transaction ends at once (its LSO moves past it, a read_committed
    consumer reads what follows), whatever the coordinator still thinks."""
    bs = broker.bootstrap
    create(bs, "txn-abort", partitions=1)
    plain = Producer({"bootstrap.servers": bs})
    plain.produce("txn-abort", value="before")
    plain.flush(30)
    p = txn_producer(bs, "tid-" + uuid.uuid4().hex)
    p.begin_transaction()
    for i in range(3):
        p.produce("txn-abort", value=f"t{i}")
    p.flush(30)
    plain.produce("txn-abort", value="after")
    plain.flush(30)
    assert lso_lag(broker, "txn-abort") == 4  # offsets 1..4 held back

    (pid, st), = [(k, v) for k, v in producers(bs, "txn-abort", 0).items() if v["txn_start_offset"] != "-"]
    assert st["txn_start_offset"] == "1"

    # Usage errors: nothing is sent.
    assert sluice("txn", "abort", "-b", bs, "-t", "txn-abort", "-p", "0", check=False).returncode == 2
    assert sluice("txn", "abort", "-b", bs, "-t", "txn-abort", "-p", "0", "--producer-id", str(pid),
                  check=False).returncode == 2
    assert sluice("txn", "abort", "-b", bs, "-t", "txn-abort", "-p", "0", "--start-offset", "1",
                  "--producer-id", str(pid), "--producer-epoch", "0", "--coordinator-epoch", "0",
                  check=False).returncode == 2
    # No transaction starts there.
    r = sluice("txn", "abort", "-b", bs, "-t", "txn-abort", "-p", "0", "--start-offset", "0", check=False)
    assert r.returncode == 1 and "no open transaction starts at offset 0" in r.stderr
    assert lso_lag(broker, "txn-abort") == 4

    out = sluice("txn", "abort", "-b", bs, "-t", "txn-abort", "-p", "0", "--start-offset", "1").stdout
    assert out.startswith(f"aborted\ttxn-abort-0\tproducer_id={pid}\tproducer_epoch=0\t"), out
    # WriteTxnMarkers answers once the marker is committed: the LSO has moved.
    assert lso_lag(broker, "txn-abort") == 0
    assert producers(bs, "txn-abort", 0)[pid]["txn_start_offset"] == "-"
    assert read_all(bs, "txn-abort", "read_committed", expect_at_least=2) == ["before", "after"]
    r = sluice("txn", "abort", "-b", bs, "-t", "txn-abort", "-p", "0", "--start-offset", "1", check=False)
    assert r.returncode == 1

    # The producer's own abort finds nothing open there any more, and its
    # next transaction is aborted by the explicit form.
    p.abort_transaction(30)
    p.begin_transaction()
    p.produce("txn-abort", value="t-next")
    p.flush(30)
    wait_until(lambda: producers(bs, "txn-abort", 0)[pid]["txn_start_offset"] != "-", 30,
               "the next transaction to open")
    st = producers(bs, "txn-abort", 0)[pid]
    assert lso_lag(broker, "txn-abort") > 0
    # The producer's own abort wrote a marker here: its coordinator epoch is
    # known now, and the explicit form sends what describe-producers shows.
    assert st["coordinator_epoch"] == "0"
    sluice("txn", "abort", "-b", bs, "-t", "txn-abort", "-p", "0", "--producer-id", str(pid),
           "--producer-epoch", st["epoch"], "--coordinator-epoch", st["coordinator_epoch"])
    assert lso_lag(broker, "txn-abort") == 0
    assert producers(bs, "txn-abort", 0)[pid]["txn_start_offset"] == "-"
    p.abort_transaction(30)


HANGING_PRODUCER = textwrap.dedent("""
    import sys
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": sys.argv[1], "transactional.id": sys.argv[2],
                  "transaction.timeout.ms": 900000})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(2):
        p.produce(sys.argv[3], value=b"hanging-%d" % i)
    p.flush(30)
    print("ready", flush=True)
    sys.stdin.read()  # until killed
""")


def test_a_hanging_transaction_is_aborted(broker_factory):
    b = broker_factory()
    b.start()
    bs = b.bootstrap
    create(bs, "txn-hang", partitions=1)
    tid = "tid-" + uuid.uuid4().hex
    proc = subprocess.Popen([sys.executable, "-c", HANGING_PRODUCER, bs, tid, "txn-hang"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    # The coordinator loses the transaction: __transaction_state is gone
    # (a lost disk, say) while the partition's log keeps its open transaction.
    assert b.stop() == 0
    dirs = glob.glob(os.path.join(b.data_dir, "logs", "__transaction_state-*"))
    assert len(dirs) == 50
    for d in dirs:
        shutil.rmtree(d)
    b.start()
    plain = Producer({"bootstrap.servers": bs})
    plain.produce("txn-hang", value="after")
    plain.flush(30)

    # Hanging: nobody coordinates it, yet read_committed readers are held at 0.
    wait_until(lambda: "COORDINATOR_LOAD_IN_PROGRESS" not in sluice("txn", "list", "-b", bs, check=False).stderr,
               30, "the coordinator to load")
    assert tid not in sluice("txn", "list", "-b", bs).stdout
    missing = sluice("txn", "describe", "-b", bs, tid, check=False)
    assert missing.returncode == 1 and "TRANSACTIONAL_ID_NOT_FOUND" in missing.stderr
    assert lso_lag(b, "txn-hang") == 3
    hanging = [(k, v) for k, v in producers(bs, "txn-hang", 0).items() if v["txn_start_offset"] != "-"]
    assert len(hanging) == 1 and hanging[0][1]["txn_start_offset"] == "0"
    assert hanging[0][1]["coordinator_epoch"] == "-1"  # never had a marker: the tool sends 0

    out = sluice("txn", "abort", "-b", bs, "--topic", "txn-hang", "--partition", "0", "--start-offset", "0").stdout
    assert f"producer_id={hanging[0][0]}" in out and "coordinator_epoch=0" in out
    assert lso_lag(b, "txn-hang") == 0
    assert all(v["txn_start_offset"] == "-" for v in producers(bs, "txn-hang", 0).values())
    assert read_all(bs, "txn-hang", "read_committed", expect_at_least=1) == ["after"]
    assert sorted(read_all(bs, "txn-hang", "read_uncommitted", expect_at_least=3)) == \
        ["after", "hanging-0", "hanging-1"]
    assert b.stop() == 0


def test_a_cluster_lays_out_its_transaction_state_and_lists_across_brokers():
    """In a cluster the controller creates __transaction_state from the
    transaction.state.log.* settings (min.isr above the factor is lowered
    to it), and `sluice txn list` asks every broker: the transaction is
    listed by the one broker that coordinates it, the one describe finds."""
    from confluent_kafka.admin import AdminClient, NewTopic
    from cluster_harness import Cluster
    settings = {"transaction.state.log.num.partitions": "4", "transaction.state.log.replication.factor": "2",
                "transaction.state.log.min.isr": "3", "transaction.state.log.segment.bytes": "1048576",
                "group.initial.rebalance.delay.ms": "0"}
    with Cluster(brokers=2, etcd=1, extra_settings=settings) as c:
        def txn_state_led():
            t = c.metadata_from(c.live_ids()[0]).topics.get("__transaction_state")
            return t if t and t.partitions and all(p.leader > 0 for p in t.partitions.values()) else None
        t = c.wait_for(txn_state_led, 90, "__transaction_state created and led")
        assert sorted(t.partitions) == [0, 1, 2, 3]
        assert all(sorted(p.replicas) == [1, 2] for p in t.partitions.values())
        bs = c.bootstrap
        out = sluice("config", "describe", "--bootstrap", bs, "--topic", "__transaction_state").stdout
        assert "segment.bytes=1048576" in out and "min.insync.replicas=2" in out and "cleanup.policy=compact" in out

        admin = AdminClient({"bootstrap.servers": bs})
        admin.create_topics([NewTopic("txn-cl", num_partitions=2, replication_factor=2)])["txn-cl"].result(60)
        tid = "tid-" + uuid.uuid4().hex
        p = Producer({"bootstrap.servers": bs, "transactional.id": tid, "linger.ms": 5})
        p.init_transactions(90)
        p.begin_transaction()
        p.produce("txn-cl", value="x", partition=0)
        p.produce("txn-cl", value="y", partition=1)
        p.flush(60)
        rows = [l.split("\t") for l in sluice("txn", "list", "-b", bs).stdout.splitlines()]
        mine = [r for r in rows if r[0] == tid]
        assert len(mine) == 1 and mine[0][3] == "state=Ongoing", rows
        described = sluice("txn", "describe", "-b", bs, tid).stdout.splitlines()
        assert f"\t{mine[0][1]}\t" in described[0], (mine, described)  # the same coordinator
        assert described[1:] == ["partition txn-cl-0", "partition txn-cl-1"]
        p.commit_transaction(60)
