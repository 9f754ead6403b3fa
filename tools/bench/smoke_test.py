#!/usr/bin/python3
"""Smoke test of sluice-bench: each mode runs on tiny sizes, exits 0 and
prints one JSON object with the expected keys. Never asserts on speed.

usage: smoke_test.py storage SLUICE_BENCH
       smoke_test.py broker SLUICE_BENCH SLUICE
       smoke_test.py group SLUICE_BENCH SLUICE
       smoke_test.py compaction SLUICE_BENCH
       smoke_test.py maintenance SLUICE_BENCH SLUICE
       smoke_test.py cluster SLUICE_BENCH SLUICE   (exit 77, skipped, without nats-server or etcd)
       smoke_test.py restart SLUICE_BENCH SLUICE   (exit 77, skipped, without etcd)
       smoke_test.py txn SLUICE_BENCH SLUICE       (one broker)
       smoke_test.py share SLUICE_BENCH SLUICE SHARE_CONSUMER GROUP_CONSUMER
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile


def run(cmd, timeout=150):
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        sys.exit(f"{cmd} exited {out.returncode}\nstdout: {out.stdout}\nstderr: {out.stderr}")
    try:
        return json.loads(out.stdout)
    except json.JSONDecodeError as e:
        sys.exit(f"not one JSON object ({e}): {out.stdout!r}")


def need(obj, keys, where):
    missing = [k for k in keys if k not in obj]
    if missing:
        sys.exit(f"{where}: missing keys {missing} in {obj}")


def storage(bench):
    with tempfile.TemporaryDirectory() as d:
        j = run([bench, "storage", "--dir", d, "--json", "--mib-per-run", "2", "--repeats", "1",
                 "--batch-kib", "16", "1024", "--idle-partitions", "20"])
    need(j, ["mode", "results", "idle_partitions"], "storage")
    whats = sorted({(r["batch_kib"], r["what"]) for r in j["results"]})
    if whats != [(16, "append_buffered"), (16, "append_fsync"), (16, "read_cached"),
                 (1024, "append_buffered"), (1024, "append_fsync"), (1024, "read_cached")]:
        sys.exit(f"unexpected results: {whats}")
    for r in j["results"]:
        need(r, ["batch_bytes", "sluice_mb_per_s", "raw_mb_per_s", "ratio", "target_ratio"], "result")
    need(j["idle_partitions"], ["partitions", "rss_mib", "target_max_rss_mib"], "idle_partitions")


def broker(bench, sluice):
    with tempfile.TemporaryDirectory() as d:
        # Small segments, as the README's publish-latency-with-1-MiB-segments run: the
        # setting must reach `sluice serve` under a name its schema accepts.
        j = run([bench, "broker", "--start", "--sluice", sluice, "--dir", d, "--json",
                 "--partitions", "2", "--keys", "--rate", "2000", "--seconds", "0.5", "--repeats", "1",
                 "--raw-mib", "4", "--tcp-seconds", "0.1", "--broker-arg", "log.segment.bytes=1048576"])
    need(j, ["catch_up_consumers", "produce_msgs_per_s", "produce_mb_per_s", "consume_msgs_per_s", "consume_mb_per_s",
             "consume_one_consumer_mb_per_s",
             "fetch_only_msgs_per_s", "fetch_only_mb_per_s",
             "publish_latency_ms", "end_to_end_latency_ms", "broker_cpu_cores_produce",
             "broker_peak_rss_mib", "raw", "ratios", "targets_met"], "broker")
    need(j["publish_latency_ms"], ["p50", "p99", "p99_9", "max"], "publish_latency_ms")
    need(j["end_to_end_latency_ms"], ["p50", "p99"], "end_to_end_latency_ms")
    need(j["raw"], ["fdatasync_write_mb_per_s", "loopback_tcp_mb_per_s", "loopback_sendfile_mb_per_s",
                    "loopback_tcp_congestion_control", "loopback_tcp_reno_mb_per_s",
                    "fdatasync_4k_every_partition_round_max_ms", "group_commit_floor_p99_ms",
                    "group_commit_floor_p99_9_ms", "group_commit_floor_files"], "raw")
    need(j["ratios"], ["consume_vs_loopback_tcp", "fetch_only_vs_loopback_tcp",
                       "fetch_only_vs_loopback_sendfile", "consume_vs_loopback_tcp_reno",
                       "consume_one_consumer_vs_loopback_tcp"], "ratios")
    if not 0 < j["raw"]["group_commit_floor_p99_ms"] <= j["raw"]["group_commit_floor_p99_9_ms"]:
        sys.exit(f"the group-commit floor is not a latency: {j['raw']}")
    # With keys both partitions take messages at once, so the floor syncs both files.
    if j["raw"]["group_commit_floor_files"] != 2:
        sys.exit(f"the floor's rounds do not cover a keyed run's partitions: {j['raw']}")
    # CPU figures are cores busy, or null when a phase was too short to sample.
    for k in ["broker_cpu_cores_produce", "broker_cpu_cores_consume", "broker_cpu_cores_fetch_only",
              "client_cpu_cores_produce", "client_cpu_cores_consume",
              "client_busiest_thread_cores_consume"]:
        if k not in j or (j[k] is not None and j[k] < 0):
            sys.exit(f"{k} is missing or not a CPU figure: {j.get(k)}")
    # By default one catch-up consumer per core, at most one per partition (2 here).
    per_core = max(1, min(os.cpu_count() or 1, 2))
    if j["catch_up_consumers"] != per_core:
        sys.exit(f"expected {per_core} catch-up consumers (one per core), got {j['catch_up_consumers']}")
    # With more than one, one consumer alone reads the topic again.
    one, one_ratio = j["consume_one_consumer_mb_per_s"], j["ratios"]["consume_one_consumer_vs_loopback_tcp"]
    if per_core > 1 and not (one and one > 0 and one_ratio and one_ratio > 0):
        sys.exit(f"the single consumer's read is missing: {one}, {one_ratio}")
    if per_core == 1 and (one is not None or one_ratio is not None):
        sys.exit(f"a single-consumer read was reported beside a single consumer: {one}")
    # reno is built into every Linux kernel and always allowed to every process.
    if not j["raw"]["loopback_tcp_congestion_control"] or not j["raw"]["loopback_tcp_reno_mb_per_s"]:
        sys.exit(f"the congestion controls of the raw streams are missing: {j['raw']}")
    if j["produce_msgs_per_s"] <= 0 or j["consume_msgs_per_s"] <= 0 or j["fetch_only_msgs_per_s"] <= 0:
        sys.exit(f"nothing went through: {j}")


def group(bench, sluice):
    with tempfile.TemporaryDirectory() as d:
        j = run([bench, "group", "--start", "--sluice", sluice, "--dir", d, "--json",
                 "--broker-arg", "group.initial.rebalance.delay.ms=0", "--members", "2", "--partitions", "4",
                 "--rate", "500", "--messages", "3000", "--commit-every", "100", "--session-timeout-ms", "6000",
                 "--repeats", "1", "--tcp-seconds", "0.1"])
    need(j, ["mode", "initial_rebalance_delay_ms", "rebalance", "throughput", "raw"], "group")
    if j["initial_rebalance_delay_ms"] != 0:
        sys.exit(f"the broker's initial rebalance delay was not read back: {j}")
    need(j["rebalance"], ["eager", "cooperative"], "rebalance")
    for protocol, phases in j["rebalance"].items():
        need(phases, ["formation", "join", "leave"], protocol)
        for name, f in phases.items():
            need(f, ["all_assigned_ms", "all_consumed_ms", "pause_max_ms", "pause_median_ms", "partitions_moved"],
                 f"{protocol} {name}")
        if phases["formation"]["partitions_moved"] != 4:
            sys.exit(f"{protocol}: formation assigned {phases['formation']['partitions_moved']} of 4 partitions")
    t = j["throughput"]
    need(t, ["group_msgs_per_s", "single_msgs_per_s", "group_vs_single", "commit_latency_ms"], "throughput")
    need(t["commit_latency_ms"], ["p50", "p99"], "commit_latency_ms")
    if t["group_msgs_per_s"] <= 0 or t["single_msgs_per_s"] <= 0 or t["commit_latency_ms"]["p50"] <= 0:
        sys.exit(f"nothing went through: {t}")
    need(j["raw"], ["loopback_tcp_mb_per_s", "fdatasync_4k_latency_p50_ms"], "raw")


def compaction(bench):
    with tempfile.TemporaryDirectory() as d:
        j = run([bench, "compaction", "--dir", d, "--json", "--mib", "4", "--keys", "100", "--repeats", "1"])
    need(j, ["mode", "cleaner_mb_per_s", "raw_read_write_mb_per_s", "ratio"], "compaction")
    if j["cleaner_mb_per_s"] <= 0 or j["raw_read_write_mb_per_s"] <= 0:
        sys.exit(f"nothing was measured: {j}")


def maintenance(bench, sluice):
    with tempfile.TemporaryDirectory() as d:
        j = run([bench, "maintenance", "--sluice", sluice, "--dir", d, "--json", "--partitions", "2",
                 "--seconds", "3", "--repeats", "1", "--prefill-mib", "32", "--churn-rate", "500"])
    need(j, ["mode", "runs", "idle_produce_mb_per_s", "active_produce_mb_per_s", "ratio",
             "maintenance_observed", "targets_met"], "maintenance")
    if sorted(r["active"] for r in j["runs"]) != [False, True]:
        sys.exit(f"expected one idle and one active run: {j['runs']}")
    for r in j["runs"]:
        need(r, ["produce_mb_per_s", "retention_removed_messages", "retained_log_mib_before",
                 "retained_log_mib_after", "compacted_log_mib_before", "compacted_log_mib_after",
                 "maintenance_as_expected"], "run")
        if r["produce_mb_per_s"] <= 0:
            sys.exit(f"nothing went through: {r}")
    # Retention and the cleaner really ran in the active run, and not in the idle one.
    if not j["maintenance_observed"]:
        sys.exit(f"maintenance not as expected: {j['runs']}")


def cluster(bench, sluice):
    nats = shutil.which("nats-server") or "/usr/sbin/nats-server"
    if not os.access(nats, os.X_OK) or not os.access("/usr/bin/etcd", os.X_OK):
        print("SKIPPED: the cluster mode needs nats-server and /usr/bin/etcd "
              "(the nats-server and etcd-server packages; scripts/install-deps.sh installs both)")
        sys.exit(77)
    with tempfile.TemporaryDirectory() as d:
        j = run([bench, "cluster", "--sluice", sluice, "--nats-server", nats, "--dir", d, "--json",
                 "--partitions", "4", "--seconds", "0.5", "--rate", "1000", "--repeats", "1",
                 "--failover-timeout", "30", "--js-max-pending", "256"], timeout=270)
        left = os.listdir(d)
        if left:
            sys.exit(f"the cluster mode left {left} in its --dir")
    need(j, ["mode", "brokers", "partitions", "replication_factor", "min_insync_replicas", "sluice",
             "jetstream", "ratios", "targets_met"], "cluster")
    if (j["brokers"], j["partitions"], j["replication_factor"], j["min_insync_replicas"]) != (3, 4, 3, 2):
        sys.exit(f"not the cluster asked for: {j}")
    s, n = j["sluice"], j["jetstream"]
    need(s, ["produce_msgs_per_s", "consume_msgs_per_s", "publish_latency_ms", "cpu_us_per_msg_produce",
             "cpu_us_per_msg_consume", "cpu_us_per_msg_fixed_rate", "leader_kill"], "sluice")
    need(n, ["publish_msgs_per_s", "publish_latency_ms", "cpu_us_per_msg_publish"], "jetstream")
    for what in (s, n):
        need(what["publish_latency_ms"], ["p50", "p99", "p99_9", "max"], "publish_latency_ms")
    need(s["leader_kill"], ["done", "killed_node", "new_leader", "seconds_to_resume", "restart_seconds"],
         "leader_kill")
    if not s["leader_kill"]["done"] or s["leader_kill"]["killed_node"] not in (1, 2, 3):
        sys.exit(f"no leader was killed: {s['leader_kill']}")
    if s["leader_kill"]["restart_seconds"] is None:
        sys.exit(f"the killed broker was not restarted: {s['leader_kill']}")
    need(j["ratios"], ["produce_vs_jetstream", "publish_p99_vs_jetstream", "cpu_per_msg_vs_jetstream"], "ratios")
    need(j["targets_met"], ["produce_at_least_5x_jetstream", "publish_p99_under_10ms",
                            "cpu_at_most_5us_per_msg"], "targets_met")
    if s["produce_msgs_per_s"] <= 0 or s["consume_msgs_per_s"] <= 0 or n["publish_msgs_per_s"] <= 0:
        sys.exit(f"nothing went through: {j}")
    if s["publish_latency_ms"]["p50"] <= 0 or n["publish_latency_ms"]["p50"] <= 0:
        sys.exit(f"no publish latency: {j}")
    for k, v in [("sluice produce", s["cpu_us_per_msg_produce"]), ("jetstream", n["cpu_us_per_msg_publish"])]:
        if v is None or v <= 0:
            sys.exit(f"{k}: no CPU per message: {v}")


def restart(bench, sluice):
    if not os.access("/usr/bin/etcd", os.X_OK):
        print("SKIPPED: the restart mode needs /usr/bin/etcd (the etcd-server package)")
        sys.exit(77)
    with tempfile.TemporaryDirectory() as d:
        j = run([bench, "restart", "--sluice", sluice, "--dir", d, "--json", "--partitions", "6",
                 "--partitions-per-topic", "3", "--session-timeout-ms", "3000", "--timeout", "60"],
                timeout=270)
        left = os.listdir(d)
        if left:
            sys.exit(f"the restart mode left {left} in its --dir")
    need(j, ["mode", "partitions", "topics", "create_full_isr_seconds", "sigterm_restart_full_isr_seconds",
             "sigkill_leaders_moved_seconds", "sigkill_restart_full_isr_seconds", "targets_met"], "restart")
    if (j["partitions"], j["topics"]) != (6, 2):
        sys.exit(f"not the partitions asked for: {j}")
    for k in ("create_full_isr_seconds", "sigterm_restart_full_isr_seconds", "sigkill_leaders_moved_seconds",
              "sigkill_restart_full_isr_seconds"):
        if j[k] is None or j[k] < 0:
            sys.exit(f"{k}: not within the timeout: {j}")


def txn(bench, sluice):
    with tempfile.TemporaryDirectory() as d:
        j = run([bench, "txn", "--single-node", "--sluice", sluice, "--dir", d, "--json", "--partitions", "4",
                 "--messages-per-txn", "10", "--producers", "2", "--seconds", "0.5", "--read-pairs", "1",
                 "--repeats", "1"])
        left = os.listdir(d)
        if left:
            sys.exit(f"the txn mode left {left} in its --dir")
    need(j, ["mode", "brokers", "partitions", "replication_factor", "messages_per_txn", "producers",
             "idempotent_msgs_per_s", "idempotent_batched_msgs_per_s", "transactional_msgs_per_s",
             "transactions", "aborted_transactions", "end_txn_latency_ms", "txn_messages_acked_ms",
             "consume_read_uncommitted_msgs_per_s", "consume_read_committed_msgs_per_s", "cpu_us_per_msg",
             "raw", "ratios", "targets_met"], "txn")
    if (j["brokers"], j["partitions"], j["replication_factor"], j["messages_per_txn"], j["producers"]) != (1, 4, 1, 10, 2):
        sys.exit(f"not the run asked for: {j}")
    need(j["end_txn_latency_ms"], ["p50", "p99", "max"], "end_txn_latency_ms")
    need(j["ratios"], ["transactional_vs_idempotent", "idempotent_batched_vs_idempotent",
                       "read_committed_vs_read_uncommitted"], "ratios")
    need(j["targets_met"], ["transactional_at_least_0_7_of_idempotent", "end_txn_p99_under_20ms",
                            "read_committed_at_least_0_9_of_uncommitted"], "targets_met")
    if j["transactions"] <= 0 or j["end_txn_latency_ms"]["p50"] <= 0:
        sys.exit(f"no transaction was committed: {j}")
    for k in ["idempotent_msgs_per_s", "idempotent_batched_msgs_per_s", "transactional_msgs_per_s",
              "consume_read_uncommitted_msgs_per_s", "consume_read_committed_msgs_per_s"]:
        if j[k] <= 0:
            sys.exit(f"{k}: nothing went through: {j}")


def share(bench, sluice, share_consumer, group_consumer):
    with tempfile.TemporaryDirectory() as d:
        # The broker's 1 s lock (no group config, --lock-ms 0) keeps the
        # redelivery phase short.
        j = run([bench, "share", "--start", "--sluice", sluice, "--share-consumer", share_consumer,
                 "--group-consumer", group_consumer, "--dir", d, "--json", "--partitions", "4",
                 "--records", "2000", "--consumers", "2", "--held-records", "10", "--lock-ms", "0",
                 "--broker-arg", "group.share.record.lock.duration.ms=1000", "--repeats", "1"])
        left = os.listdir(d)
        if left:
            sys.exit(f"the share mode left {left} in its --dir")
    need(j, ["mode", "partitions", "records", "record_bytes", "consumers", "initial_rebalance_delay_ms",
             "classic", "share", "ratios", "redelivery", "targets_met"], "share")
    if (j["partitions"], j["records"], j["consumers"]) != (4, 2000, 2):
        sys.exit(f"not the run asked for: {j}")
    for group in ("classic", "share"):
        need(j[group], ["msgs_per_s", "mb_per_s", "msgs_per_s_after_first_record", "first_record_ms",
                        "deliveries", "broker_cpu_cores", "consumers_cpu_cores"], group)
        # Every record read at least once.
        if j[group]["msgs_per_s"] <= 0 or j[group]["deliveries"] < 2000:
            sys.exit(f"{group}: not every record was read: {j[group]}")
    need(j["share"], ["ack_errors"], "share")
    need(j["ratios"], ["share_vs_classic", "share_vs_classic_after_first_record"], "ratios")
    r = j["redelivery"]
    need(r, ["lock_ms", "held_records", "redelivered", "delay_after_lock_ms"], "redelivery")
    need(r["delay_after_lock_ms"], ["p50", "max", "min"], "delay_after_lock_ms")
    if r["lock_ms"] != 1000 or r["held_records"] != 10:
        sys.exit(f"not the redelivery asked for: {r}")
    # The holder's one ShareFetch takes all ten: each comes back to the second consumer.
    if r["redelivered"] != 10 or r["delay_after_lock_ms"]["p50"] is None:
        sys.exit(f"the held records were not redelivered: {r}")
    need(j["targets_met"], ["share_at_least_0_5_of_classic", "redelivery_within_1s_of_lock"], "targets_met")


if __name__ == "__main__":
    if sys.argv[1] == "storage":
        storage(sys.argv[2])
    elif sys.argv[1] == "compaction":
        compaction(sys.argv[2])
    elif sys.argv[1] == "maintenance":
        maintenance(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "cluster":
        cluster(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "restart":
        restart(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "txn":
        txn(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "share":
        share(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5])
    elif sys.argv[1] == "group":
        group(sys.argv[2], sys.argv[3])
    else:
        broker(sys.argv[2], sys.argv[3])
