// sluice-bench: prints performance figures of the partition log (`storage`),
// of a running broker (`broker`), of consumer groups on it (`group`), of the
// log cleaner (`compaction`) and of produce under retention and compaction
// (`maintenance`, against the same run without them), of a replicated
// three-broker cluster (`cluster`, beside NATS JetStream), of
// transactions against the idempotent producer (`txn`) and of share groups
// against a classic group (`share`); the others beside
// the machine's own limits measured in the same run. Not a timed test: it asserts
// nothing about speed.

#include <cstdio>

#include <CLI/CLI.hpp>
#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "broker_bench.h"
#include "cluster_bench.h"
#include "compaction_bench.h"
#include "group_bench.h"
#include "maintenance_bench.h"
#include "share_bench.h"
#include "storage_bench.h"
#include "txn_bench.h"

namespace {

// --json and --repeats, which every mode takes.
void add_report_options(CLI::App* m, bool& json, int& repeats, const char* repeats_help) {
  m->add_flag("--json", json, "print one JSON object");
  m->add_option("--repeats", repeats, repeats_help)->check(CLI::Range(1, 100));
}

// The broker a mode measures (kafka_util.h); `attach` adds --bootstrap and
// --broker-pid beside --start.
void add_broker_options(CLI::App* m, sluice::bench::broker_target& t, bool attach) {
  if (attach) {
    auto* boot = m->add_option("--bootstrap", t.bootstrap, "HOST:PORT of a running broker");
    m->add_flag("--start", t.start, "start sluice on a free loopback port with a temp dir")
        ->excludes(boot);
    m->add_option("--broker-pid", t.broker_pid,
                  "pid of the --bootstrap broker, for its CPU and memory");
  }
  m->add_option("--sluice", t.sluice_path, "the sluice binary to start (default: beside this one)");
  m->add_option("--broker-arg", t.broker_args,
                "KEY=VALUE broker setting, passed to sluice serve as --KEY VALUE (repeatable)");
  m->add_option("--dir", t.dir,
                "parent of the broker's temp data dir; raw disk limits measured here")
      ->capture_default_str();
}

}  // namespace

int main(int argc, char** argv) {
  ::signal(SIGPIPE, SIG_IGN);
  // stdout carries the report (or the JSON, or the idle child's answer), so
  // the storage library's log lines go to stderr, warnings and worse only.
  spdlog::set_default_logger(spdlog::stderr_color_mt("sluice-bench"));
  spdlog::set_level(spdlog::level::warn);
  CLI::App app{
      "sluice-bench: Sluice's storage, broker and group benchmarks, each beside the machine's raw "
      "limits"};
  app.require_subcommand(1);

  sluice::bench::storage_options so;
  auto* st = app.add_subcommand("storage",
                                "append and read throughput of the partition log vs raw file I/O");
  st->add_option("--dir", so.dir, "directory for logs and raw files (on the disk to measure)")
      ->required();
  add_report_options(st, so.json, so.repeats, "measured raw/Sluice pairs after the warm-up");
  st->add_option("--mib-per-run", so.mib_per_run, "MiB written or read per measured run")
      ->check(CLI::Range(1, 65536));
  st->add_option("--appenders", so.appenders, "threads sharing group-commit fsyncs")
      ->check(CLI::Range(1, 64));
  st->add_option("--batch-kib", so.batch_kib, "batch sizes in KiB")->check(CLI::Range(2, 8192));
  st->add_option("--idle-partitions", so.idle_partitions,
                 "partitions held open for the memory figure")
      ->check(CLI::Range(1, 100000));

  std::string idle_dir, idle_phase;
  int idle_parts = 0;
  auto* idle =
      app.add_subcommand("storage-idle-child", "internal: the idle-partitions child process");
  idle->group("");  // hidden from --help
  idle->add_option("--dir", idle_dir)->required();
  idle->add_option("--partitions", idle_parts)->required();
  idle->add_option("--phase", idle_phase)->required()->check(CLI::IsMember({"create", "hold"}));

  sluice::bench::compaction_options co;
  auto* cp =
      app.add_subcommand("compaction", "log cleaner throughput vs raw sequential read plus write");
  cp->add_option("--dir", co.dir, "directory for the log and raw files (on the disk to measure)")
      ->required();
  add_report_options(cp, co.json, co.repeats, "measured raw/Sluice pairs after the warm-up");
  cp->add_option("--mib", co.mib, "MiB of log cleaned per run")->check(CLI::Range(1, 65536));
  cp->add_option("--keys", co.keys, "distinct keys")->check(CLI::Range(1, 10'000'000));

  sluice::bench::broker_options bo;
  auto* br = app.add_subcommand(
      "broker", "produce/consume throughput and latency through a broker (librdkafka)");
  add_broker_options(br, bo.broker, true);
  add_report_options(br, bo.json, bo.repeats, "measured runs, each after the raw limits");
  br->add_option("--partitions", bo.partitions, "partitions of the topic")
      ->check(CLI::Range(1, 10000));
  br->add_flag("--keys", bo.keys, "messages carry keys (1000 distinct)");
  br->add_option("--rate", bo.rate, "messages per second; 0 = unlimited")
      ->check(CLI::Range(0.0, 1e8));
  br->add_option("--seconds", bo.seconds, "produce time per run")->check(CLI::Range(0.1, 3600.0));
  br->add_option("--message-bytes", bo.message_bytes, "payload bytes")
      ->check(CLI::Range(8, 1 << 20));
  br->add_option("--acks", bo.acks, "producer acks")->check(CLI::IsMember({"all", "-1", "0", "1"}));
  br->add_option("--producer-prop", bo.producer_props,
                 "KEY=VALUE librdkafka producer property (repeatable)");
  br->add_option("--raw-mib", bo.raw_sync_mib,
                 "MiB at most per raw fdatasync-write measurement (it runs --seconds; each "
                 "run's file is kept until the bench ends)")
      ->check(CLI::Range(1, 65536));
  br->add_option("--tcp-seconds", bo.tcp_seconds, "seconds per raw loopback TCP measurement")
      ->check(CLI::Range(0.05, 60.0));

  sluice::bench::group_options go;
  auto* gr = app.add_subcommand(
      "group",
      "consumer-group rebalance times and pauses, group consume throughput and commit latency");
  add_broker_options(gr, go.broker, true);
  add_report_options(gr, go.json, go.repeats, "measured runs, each after the raw limits");
  gr->add_option("--members", go.members,
                 "members of the rebalance phases (one more joins and leaves)")
      ->check(CLI::Range(1, 1000));
  gr->add_option("--partitions", go.partitions, "partitions of the topics")
      ->check(CLI::Range(1, 10000));
  gr->add_option("--protocol", go.protocols, "eager and/or cooperative (both by default)")
      ->check(CLI::IsMember({"eager", "cooperative"}));
  gr->add_option("--rate", go.rate, "messages per second produced during the rebalance phases")
      ->check(CLI::Range(1.0, 1e7));
  gr->add_option("--throughput-members", go.throughput_members,
                 "group size compared with one consumer")
      ->check(CLI::Range(1, 1000));
  gr->add_option("--messages", go.messages, "messages each throughput run reads")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 32));
  gr->add_option("--message-bytes", go.message_bytes, "payload bytes")
      ->check(CLI::Range(1, 1 << 20));
  gr->add_option("--commit-every", go.commit_every,
                 "messages a member reads between synchronous commits")
      ->check(CLI::Range(1, 1 << 30));
  gr->add_option("--session-timeout-ms", go.session_timeout_ms, "members' session.timeout.ms")
      ->check(CLI::Range(1000, 3'600'000));
  gr->add_option("--tcp-seconds", go.tcp_seconds, "seconds per raw loopback TCP measurement")
      ->check(CLI::Range(0.05, 60.0));

  sluice::bench::maintenance_options mo;
  auto* mt = app.add_subcommand(
      "maintenance",
      "produce throughput while retention deletes and the cleaner compacts, vs idle");
  add_broker_options(mt, mo.broker, false);
  add_report_options(mt, mo.json, mo.repeats, "idle/active pairs");
  mt->add_option("--partitions", mo.partitions, "partitions of the measured topic")
      ->check(CLI::Range(1, 10000));
  mt->add_option("--seconds", mo.seconds, "measured produce window per run")
      ->check(CLI::Range(0.5, 3600.0));
  mt->add_option("--prefill-mib", mo.prefill_mib,
                 "MiB written to each maintenance topic before a run")
      ->check(CLI::Range(4, 65536));
  mt->add_option("--churn-rate", mo.churn_rate,
                 "msgs/s to each maintenance topic during the window")
      ->check(CLI::Range(1.0, 1e6));

  sluice::bench::cluster_options clo;
  auto* cl = app.add_subcommand(
      "cluster",
      "three replicated Sluice brokers (etcd of three) beside a three-server NATS JetStream "
      "cluster: publish rate, latency, CPU per message, a leader kill");
  add_report_options(cl, clo.json, clo.repeats, "Sluice/JetStream run pairs (medians)");
  cl->add_option("--sluice", clo.sluice_path, "the sluice binary (default: beside this one)");
  cl->add_option("--etcd", clo.etcd_path, "the etcd binary")->capture_default_str();
  cl->add_option("--nats-server", clo.nats_path, "the nats-server binary")->capture_default_str();
  cl->add_option("--dir", clo.dir, "parent of the temp dir of every server's data")
      ->capture_default_str();
  cl->add_option("--broker-arg", clo.broker_args,
                 "KEY=VALUE setting for every broker, passed as --KEY VALUE (repeatable)");
  cl->add_option("--partitions", clo.partitions, "partitions of the topic")
      ->check(CLI::Range(1, 10000));
  cl->add_option("--replication-factor", clo.replication_factor,
                 "replicas of the topic and of the stream")
      ->check(CLI::Range(1, 3));
  cl->add_option("--min-insync-replicas", clo.min_insync_replicas,
                 "the topic's min.insync.replicas")
      ->check(CLI::Range(1, 3));
  cl->add_option("--message-bytes", clo.message_bytes, "payload bytes")
      ->check(CLI::Range(8, 1 << 20));
  cl->add_option("--seconds", clo.seconds, "length of each publish phase")
      ->check(CLI::Range(0.1, 3600.0));
  cl->add_option("--rate", clo.rate, "msgs/s of the latency phases and of the leader kill")
      ->check(CLI::Range(1.0, 1e7));
  cl->add_option("--consumers", clo.consumers,
                 "catch-up consumers (0: one per core, at most one per partition)")
      ->check(CLI::Range(0, 1000));
  cl->add_option("--session-timeout-ms", clo.session_timeout_ms,
                 "the brokers' sluice.etcd.session.timeout.ms")
      ->capture_default_str();
  cl->add_option("--failover-timeout", clo.failover_timeout,
                 "seconds the leader kill waits for partition 0's acknowledgements")
      ->check(CLI::Range(1.0, 600.0));
  cl->add_flag("--no-leader-kill{false}", clo.leader_kill, "skip the leader kill");
  cl->add_flag("--no-jetstream{false}", clo.jetstream,
               "run Sluice only (no JetStream figures, no ratios)");
  cl->add_option("--js-max-pending", clo.js_max_pending,
                 "asynchronous JetStream publishes in flight")
      ->check(CLI::Range(1, 1 << 20));

  sluice::bench::restart_options ro;
  auto* rs = app.add_subcommand(
      "restart",
      "three brokers (etcd of three), many empty partitions: creation, a restarted broker back in "
      "every ISR, leaders moved after a SIGKILL");
  rs->add_flag("--json", ro.json, "one JSON object instead of text");
  rs->add_option("--sluice", ro.sluice_path, "the sluice binary (default: beside this one)");
  rs->add_option("--etcd", ro.etcd_path, "the etcd binary")->capture_default_str();
  rs->add_option("--dir", ro.dir, "parent of the temp dir of every server's data")
      ->capture_default_str();
  rs->add_option("--broker-arg", ro.broker_args,
                 "KEY=VALUE setting for every broker, passed as --KEY VALUE (repeatable)");
  rs->add_option("--partitions", ro.partitions, "partitions over all topics")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  rs->add_option("--partitions-per-topic", ro.partitions_per_topic, "partitions of each topic")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  rs->add_option("--session-timeout-ms", ro.session_timeout_ms,
                 "the brokers' sluice.etcd.session.timeout.ms")
      ->capture_default_str();
  rs->add_option("--timeout", ro.timeout, "seconds each phase may take")
      ->check(CLI::Range(1.0, 3600.0))
      ->capture_default_str();
  rs->add_option("--keep-logs", ro.keep_logs,
                 "copy the brokers' logs into this directory at the end (where the time went)");

  sluice::bench::txn_options to;
  auto* tx = app.add_subcommand(
      "txn",
      "transactional produce against idempotent produce, EndTxn latency, read_committed against "
      "read_uncommitted catch-up reads; three brokers (etcd of three) or one");
  add_report_options(tx, to.json, to.repeats, "measured runs after an uncounted warm-up (medians)");
  tx->add_flag("--single-node", to.single_node, "one broker without etcd instead of three");
  tx->add_option("--sluice", to.sluice_path, "the sluice binary (default: beside this one)");
  tx->add_option("--etcd", to.etcd_path, "the etcd binary")->capture_default_str();
  tx->add_option("--dir", to.dir, "parent of the temp dir of every server's data")
      ->capture_default_str();
  tx->add_option("--broker-arg", to.broker_args,
                 "KEY=VALUE setting for every broker, passed as --KEY VALUE (repeatable)");
  tx->add_option("--session-timeout-ms", to.session_timeout_ms,
                 "the brokers' sluice.etcd.session.timeout.ms")
      ->capture_default_str();
  tx->add_option("--partitions", to.partitions, "partitions of each topic")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  tx->add_option("--replication-factor", to.replication_factor,
                 "replicas of each topic (default: 3, or 1 with --single-node)")
      ->check(CLI::Range(1, 3));
  tx->add_option("--min-insync-replicas", to.min_insync_replicas,
                 "the topics' min.insync.replicas (default: 2, or 1 with --single-node)")
      ->check(CLI::Range(1, 3));
  tx->add_option("--message-bytes", to.message_bytes, "payload bytes")
      ->check(CLI::Range(8, 1 << 20))
      ->capture_default_str();
  tx->add_option("--messages-per-txn", to.messages_per_txn,
                 "messages of each transaction (and of each batch awaited by the idempotent "
                 "batched phase)")
      ->check(CLI::Range(1, 1'000'000))
      ->capture_default_str();
  tx->add_option("--producers", to.producers, "producers of each phase (0: one per core)")
      ->check(CLI::Range(0, 1000));
  tx->add_option("--seconds", to.seconds, "length of each produce phase")
      ->check(CLI::Range(0.1, 3600.0))
      ->capture_default_str();
  tx->add_option("--read-pairs", to.read_pairs,
                 "read_uncommitted/read_committed catch-up read pairs per run")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();

  sluice::bench::share_options sho;
  auto* sh = app.add_subcommand(
      "share",
      "share-group (KIP-932) consume with per-record acknowledgement against a classic group, "
      "and redelivery after a lock expiry");
  add_broker_options(sh, sho.broker, true);
  add_report_options(sh, sho.json, sho.repeats,
                     "measured classic/share read pairs after an uncounted warm-up (medians)");
  sh->add_option("--partitions", sho.partitions, "partitions of the topic")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  sh->add_option("--records", sho.records, "records each group reads in each run")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 32))
      ->capture_default_str();
  sh->add_option("--record-bytes", sho.record_bytes, "payload bytes")
      ->check(CLI::Range(8, 1 << 20))
      ->capture_default_str();
  sh->add_option("--consumers", sho.consumers, "consumer processes in each group")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  sh->add_option("--share-consumer", sho.share_consumer_path,
                 "the share_consumer program (default: beside this one)");
  sh->add_option("--group-consumer", sho.group_consumer_path,
                 "the group_consumer program (default: beside this one)");
  sh->add_option("--classic-config", sho.classic_config,
                 "KEY=VALUE librdkafka property of the classic consumers (repeatable; replaces the "
                 "default)")
      ->capture_default_str();
  sh->add_option("--share-config", sho.share_config,
                 "KEY=VALUE librdkafka property of the share consumers (repeatable)");
  sh->add_option("--lock-ms", sho.lock_ms,
                 "the held records' share.record.lock.duration.ms, set as a group config; 0: the "
                 "broker's group.share.record.lock.duration.ms")
      ->check(CLI::Range(15'000, 60'000) | CLI::IsMember({0}))
      ->capture_default_str();
  sh->add_option("--held-records", sho.held_records,
                 "records held unacknowledged, then redelivered, in each run")
      ->check(CLI::Range(1, 10'000))
      ->capture_default_str();
  sh->add_option("--timeout", sho.timeout_seconds, "seconds each read of the whole topic may take")
      ->check(CLI::Range(1.0, 3600.0))
      ->capture_default_str();

  CLI11_PARSE(app, argc, argv);
  try {
    if (sh->parsed()) return sluice::bench::run_share(sho);
    if (tx->parsed()) return sluice::bench::run_txn(to);
    if (rs->parsed()) return sluice::bench::run_restart(ro);
    if (cl->parsed()) return sluice::bench::run_cluster(clo);
    if (mt->parsed()) return sluice::bench::run_maintenance(mo);
    if (cp->parsed()) return sluice::bench::run_compaction(co);
    if (st->parsed()) return sluice::bench::run_storage(so);
    if (idle->parsed()) return sluice::bench::run_idle_child(idle_dir, idle_parts, idle_phase);
    if (gr->parsed()) return sluice::bench::run_group(go);
    return sluice::bench::run_broker(bo);
  } catch (const sluice::bench::bench_error& e) {
    // Every mode's measurements throw this when they cannot go on.
    std::fprintf(stderr, "sluice-bench %s: %s\n", app.get_subcommands().front()->get_name().c_str(),
                 e.message.c_str());
    return 1;
  }
}
