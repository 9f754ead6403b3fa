#!/usr/bin/python3
"""Smoke test of sluice-bench: each mode runs on tiny sizes, exits 0 and
prints one JSON object with the expected keys. Never asserts on speed.

usage: smoke_test.py storage SLUICE_BENCH
       smoke_test.py broker SLUICE_BENCH SLUICE
"""
import json
import subprocess
import sys
import tempfile


def run(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=150)
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
        j = run([bench, "broker", "--start", "--sluice", sluice, "--dir", d, "--json",
                 "--partitions", "2", "--keys", "--rate", "2000", "--seconds", "0.5", "--repeats", "1",
                 "--raw-mib", "4", "--tcp-seconds", "0.1"])
    need(j, ["produce_msgs_per_s", "produce_mb_per_s", "consume_msgs_per_s", "consume_mb_per_s",
             "publish_latency_ms", "end_to_end_latency_ms", "broker_cpu_cores_produce",
             "broker_peak_rss_mib", "raw", "ratios", "targets_met"], "broker")
    need(j["publish_latency_ms"], ["p50", "p99", "p99_9", "max"], "publish_latency_ms")
    need(j["end_to_end_latency_ms"], ["p50", "p99"], "end_to_end_latency_ms")
    need(j["raw"], ["fdatasync_write_mb_per_s", "loopback_tcp_mb_per_s"], "raw")
    if j["produce_msgs_per_s"] <= 0 or j["consume_msgs_per_s"] <= 0:
        sys.exit(f"nothing went through: {j}")


if __name__ == "__main__":
    if sys.argv[1] == "storage":
        storage(sys.argv[2])
    else:
        broker(sys.argv[2], sys.argv[3])
