// Transactions benchmark (issue 33; see README.md): on the three brokers of
// `cluster` (cluster_setup.h) or on one broker, per run three produce phases
// of `seconds` each, every one with `producers` librdkafka producers on
// threads of their own and a fresh topic of the same layout, messages going
// to the partitions in turn:
//
//   1. idempotent, unlimited: the broker mode's producer (produce_phase.h)
//      with enable.idempotence=true: the rate transactions are held to;
//   2. idempotent, waiting for the acknowledgements after every
//      `messages_per_txn` messages (rd_kafka_flush): the transactional
//      producer's pipeline without the transaction protocol, to tell the
//      cost of the barrier from that of AddPartitionsToTxn, EndTxn and the
//      markers;
//   3. transactional: begin, `messages_per_txn` messages, flush (so the
//      commit that follows is EndTxn alone), commit_transaction, timed.
//
// Then the transactional topic is read back from the start by catch-up
// consumers (consume_phase.h), read_uncommitted and read_committed in turns.
// CPU per message: the brokers' and this process's utime + stime over a
// phase, divided by its messages.

#include "txn_bench.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <optional>
#include <thread>

#include <librdkafka/rdkafka.h>
#include <unistd.h>

#include "cluster_setup.h"
#include "consume_phase.h"
#include "kafka_util.h"
#include "produce_phase.h"
#include "raw_limits.h"
#include "report.h"

namespace sluice::bench {
namespace {

// The uncounted warm-up run's phases are this long at most.
constexpr double kWarmupSeconds = 2;
// How long a producer's init_transactions, flush, commit or abort may take.
constexpr int kClientTimeoutMs = 30'000;
// commit_transaction calls for one transaction whose errors are retriable.
constexpr int kCommitAttempts = 5;

// ---- The servers measured -----------------------------------------------------

// The three-broker cluster over etcd, or one broker. Destroyed in reverse
// order of the members: brokers, etcd, then their directory.
class servers {
 public:
  explicit servers(const txn_options& o) {
    if (o.single_node) {
      single_ = std::make_unique<broker_process>(o.sluice_path, o.dir, o.broker_args);
      return;
    }
    root_.emplace(o.dir);
    etcd_.emplace(o.etcd_path, root_->path);
    check_interrupted();
    cluster_.emplace(sluice_cluster_options{o.sluice_path, o.broker_args, o.session_timeout_ms},
                     root_->path, etcd_->endpoints());
  }
  std::string bootstrap() const { return single_ ? single_->bootstrap() : cluster_->bootstrap(); }
  std::vector<pid_t> pids() const {
    return single_ ? std::vector<pid_t>{single_->pid()} : cluster_->pids();
  }
  // A directory on the brokers' disk, for the raw fsync latency.
  std::string data_dir() const { return single_ ? single_->data_dir() : root_->path; }
  int count() const { return single_ ? 1 : kClusterServers; }

 private:
  std::optional<temp_root> root_;
  std::optional<etcd_cluster> etcd_;
  std::optional<sluice_cluster> cluster_;
  std::unique_ptr<broker_process> single_;
};

// ---- A producer that waits for its acknowledgements every batch ---------------

struct rk_error_deleter {
  void operator()(rd_kafka_error_t* e) const { rd_kafka_error_destroy(e); }
};
using error_ptr = std::unique_ptr<rd_kafka_error_t, rk_error_deleter>;

struct topic_deleter {
  void operator()(rd_kafka_topic_t* t) const { rd_kafka_topic_destroy(t); }
};

// Delivery reports, served on the producing thread (rd_kafka_poll, flush):
// no lock.
struct delivery_counts {
  uint64_t ok = 0, failed = 0;
  std::string first_error;
};

void on_delivery(rd_kafka_t*, const rd_kafka_message_t* m, void* opaque) {
  auto* d = static_cast<delivery_counts*>(opaque);
  if (!m->err) {
    ++d->ok;
    return;
  }
  ++d->failed;
  if (d->first_error.empty()) d->first_error = rd_kafka_err2str(m->err);
}

// What one producer of a batched phase did.
struct batch_stats {
  uint64_t delivered = 0;  // acknowledged (for read_uncommitted: aborted ones too)
  uint64_t committed = 0;  // acknowledged and, when transactional, committed
  uint64_t batches = 0, aborted = 0, failed_msgs = 0;
  std::vector<double> produce_ms;  // per batch: its first produce() to its last acknowledgement
  std::vector<double> commit_ms;   // per committed transaction: commit_transaction, after the flush
  int64_t last_ns = 0;             // the end of its last batch
  std::string error;               // the first error
  bool fatal = false;              // an error ended the loop early
};

// How the producers of a batched phase start together: each, once its
// client is ready, counts itself in `ready` and waits for `start_ns`; each
// counts itself in `done` when its loop ended, before its client goes.
// `stop` ends every loop early (one producer could not start).
struct phase_gate {
  std::atomic<int> ready{0}, done{0};
  std::atomic<int64_t> start_ns{0};
  std::atomic<bool> stop{false};
};

std::string error_text(const rd_kafka_error_t* e) {
  return std::string(rd_kafka_error_name(e)) + ": " + rd_kafka_error_string(e);
}

// One producer of a batched phase: `o.messages_per_txn` messages to the
// partitions in turn, then rd_kafka_flush; with `txn_id` each batch is one
// transaction, committed after the flush. Runs `seconds` from the gate's
// start. Fills `out`; never throws.
void batch_producer(const txn_options& o, const std::string& bootstrap, const std::string& topic,
                    const std::string& txn_id, double seconds, phase_gate& gate, batch_stats& out) {
  bool counted_ready = false;
  try {
    delivery_counts dr;
    rd_kafka_conf_t* c = base_conf(bootstrap);
    set(c, "acks", "all");
    set(c, "linger.ms", "1");
    set(c, "batch.size", "1048576");
    set(c, "enable.idempotence", "true");
    if (!txn_id.empty()) set(c, "transactional.id", txn_id);
    rd_kafka_conf_set_dr_msg_cb(c, on_delivery);
    rd_kafka_conf_set_opaque(c, &dr);
    client_ptr rk = make_client(RD_KAFKA_PRODUCER, c);
    std::unique_ptr<rd_kafka_topic_t, topic_deleter> t(
        rd_kafka_topic_new(rk.get(), topic.c_str(), nullptr));
    const rd_kafka_metadata_t* md = nullptr;
    if (auto e = rd_kafka_metadata(rk.get(), 0, t.get(), &md, 10'000))
      throw bench_error{"metadata of " + topic + ": " + rd_kafka_err2str(e)};
    rd_kafka_metadata_destroy(md);
    if (!txn_id.empty())
      if (error_ptr e{rd_kafka_init_transactions(rk.get(), kClientTimeoutMs)})
        throw bench_error{
            "init_transactions: " + error_text(e.get()) +
            (rd_kafka_error_code(e.get()) == RD_KAFKA_RESP_ERR__TIMED_OUT
                 ? " (no transaction coordinator answered: see the brokers' logs, and whether "
                   "__transaction_state exists)"
                 : "")};

    counted_ready = true;
    ++gate.ready;
    while (gate.start_ns.load() == 0 && !interrupted().load())
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const int64_t end = gate.start_ns.load() + static_cast<int64_t>(seconds * 1e9);
    std::vector<char> payload(o.message_bytes, 'x');
    uint64_t next = 0;
    while (now_ns() < end && !interrupted().load() && !gate.stop.load()) {
      if (!txn_id.empty())
        if (error_ptr e{rd_kafka_begin_transaction(rk.get())})
          throw bench_error{"begin_transaction: " + error_text(e.get())};
      const uint64_t ok0 = dr.ok, failed0 = dr.failed;
      const int64_t t0 = now_ns();
      for (int k = 0; k < o.messages_per_txn; ++k) {
        const auto partition = static_cast<int32_t>(next++ % static_cast<uint64_t>(o.partitions));
        while (rd_kafka_produce(t.get(), partition, RD_KAFKA_MSG_F_COPY, payload.data(),
                                payload.size(), nullptr, 0, nullptr) != 0) {
          if (rd_kafka_last_error() != RD_KAFKA_RESP_ERR__QUEUE_FULL)
            throw bench_error{std::string("produce: ") + rd_kafka_err2str(rd_kafka_last_error())};
          rd_kafka_poll(rk.get(), 1);
        }
      }
      if (auto e = rd_kafka_flush(rk.get(), kClientTimeoutMs))
        throw bench_error{std::string("flush: ") + rd_kafka_err2str(e)};
      const int64_t t1 = now_ns();
      out.produce_ms.push_back(static_cast<double>(t1 - t0) / 1e6);
      ++out.batches;
      const uint64_t ok = dr.ok - ok0;
      out.delivered += ok;
      out.failed_msgs += dr.failed - failed0;
      if (out.error.empty() && !dr.first_error.empty()) out.error = dr.first_error;
      if (txn_id.empty()) {
        out.committed += ok;
      } else if (dr.failed > failed0) {
        if (error_ptr e{rd_kafka_abort_transaction(rk.get(), kClientTimeoutMs)})
          throw bench_error{"abort_transaction: " + error_text(e.get())};
        ++out.aborted;
      } else {
        for (int attempt = 1;; ++attempt) {
          error_ptr e{rd_kafka_commit_transaction(rk.get(), kClientTimeoutMs)};
          if (!e) {
            out.commit_ms.push_back(static_cast<double>(now_ns() - t1) / 1e6);
            out.committed += ok;
            break;
          }
          if (out.error.empty()) out.error = "commit_transaction: " + error_text(e.get());
          if (rd_kafka_error_is_retriable(e.get()) && attempt < kCommitAttempts) continue;
          if (!rd_kafka_error_txn_requires_abort(e.get()))
            throw bench_error{"commit_transaction: " + error_text(e.get())};
          if (error_ptr a{rd_kafka_abort_transaction(rk.get(), kClientTimeoutMs)})
            throw bench_error{"abort_transaction: " + error_text(a.get())};
          ++out.aborted;
          break;
        }
      }
      out.last_ns = now_ns();
    }
  } catch (const bench_error& e) {
    out.error = e.message;
    out.fatal = true;
  }
  if (!counted_ready) ++gate.ready;
  ++gate.done;
}

// A phase's figures, over all its producers.
struct phase_result {
  double msgs_per_s = 0;
  uint64_t delivered = 0, committed = 0, batches = 0, aborted = 0, failed_msgs = 0;
  std::vector<double> produce_ms, commit_ms;      // sorted
  double broker_cpu_us = -1, client_cpu_us = -1;  // per message
  std::string first_error;
};

// CPU microseconds per message; -1 when not measured.
double us_per_msg(std::optional<double> cpu0, std::optional<double> cpu1, uint64_t messages) {
  return cpu0 && cpu1 && messages > 0 ? (*cpu1 - *cpu0) * 1e6 / static_cast<double>(messages) : -1;
}

// Phase 2 (txn_id_prefix empty) or 3: `producers` batch_producers.
phase_result batched_phase(const txn_options& o, const servers& s, const std::string& topic,
                           const std::string& txn_id_prefix, int producers, double seconds) {
  phase_gate gate;
  std::vector<batch_stats> stats(static_cast<size_t>(producers));
  std::vector<std::thread> threads;
  for (int i = 0; i < producers; ++i)
    threads.emplace_back([&, i] {
      batch_producer(o, s.bootstrap(), topic,
                     txn_id_prefix.empty() ? "" : txn_id_prefix + std::to_string(i), seconds, gate,
                     stats[static_cast<size_t>(i)]);
    });
  while (gate.ready.load() < producers) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const auto cpu0 = processes_cpu_seconds(s.pids());
  const auto self0 = process_cpu_seconds(::getpid());
  const int64_t t0 = now_ns();
  if (gate.done.load() > 0) gate.stop = true;  // one failed to start: the others need not run
  gate.start_ns = t0;
  while (gate.done.load() < producers) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const auto cpu1 = processes_cpu_seconds(s.pids());
  const auto self1 = process_cpu_seconds(::getpid());
  for (auto& t : threads) t.join();

  phase_result r;
  int64_t t1 = t0;
  for (const auto& b : stats) {
    if (b.fatal) throw bench_error{b.error};
    if (!b.error.empty() && r.first_error.empty()) r.first_error = b.error;
    r.delivered += b.delivered;
    r.committed += b.committed;
    r.batches += b.batches;
    r.aborted += b.aborted;
    r.failed_msgs += b.failed_msgs;
    r.produce_ms.insert(r.produce_ms.end(), b.produce_ms.begin(), b.produce_ms.end());
    r.commit_ms.insert(r.commit_ms.end(), b.commit_ms.begin(), b.commit_ms.end());
    t1 = std::max(t1, b.last_ns);
  }
  if (r.committed == 0)
    throw bench_error{std::string(txn_id_prefix.empty() ? "idempotent" : "transactional") +
                      " producers stored nothing" +
                      (r.first_error.empty() ? "" : ": " + r.first_error)};
  check_interrupted();
  std::sort(r.produce_ms.begin(), r.produce_ms.end());
  std::sort(r.commit_ms.begin(), r.commit_ms.end());
  r.msgs_per_s =
      static_cast<double>(r.committed) * 1e9 / static_cast<double>(std::max<int64_t>(t1 - t0, 1));
  r.broker_cpu_us = us_per_msg(cpu0, cpu1, r.committed);
  r.client_cpu_us = us_per_msg(self0, self1, r.committed);
  return r;
}

// Phase 1: `producers` of produce_phase at once, idempotent, unlimited.
phase_result unlimited_phase(const txn_options& o, const servers& s, const std::string& topic,
                             int producers, double seconds) {
  produce_spec spec;
  spec.bootstrap = s.bootstrap();
  spec.topic = topic;
  spec.acks = "all";
  spec.props = {"enable.idempotence=true"};
  spec.seconds = seconds;
  spec.message_bytes = o.message_bytes;
  spec.round_robin_partitions = o.partitions;
  spec.stop = &interrupted();
  const auto cpu0 = processes_cpu_seconds(s.pids());
  const auto self0 = process_cpu_seconds(::getpid());
  std::vector<std::unique_ptr<background_produce>> all;
  for (int i = 0; i < producers; ++i) all.push_back(std::make_unique<background_produce>(spec));
  phase_result r;
  for (auto& p : all) {
    const produce_stats ps = p->finish();
    // Each producer's rate is over its own window (from when it knew the
    // topic's leaders); the windows overlap but for the first milliseconds.
    r.msgs_per_s += ps.msgs_per_s;
    r.delivered += ps.acked;
    r.failed_msgs += ps.failed;
    if (r.first_error.empty()) r.first_error = ps.first_error;
  }
  const auto cpu1 = processes_cpu_seconds(s.pids());
  const auto self1 = process_cpu_seconds(::getpid());
  r.committed = r.delivered;
  if (r.committed == 0)
    throw bench_error{"no message was acknowledged" +
                      (r.first_error.empty() ? std::string() : ": " + r.first_error)};
  r.broker_cpu_us = us_per_msg(cpu0, cpu1, r.committed);
  r.client_cpu_us = us_per_msg(self0, self1, r.committed);
  return r;
}

// ---- One run --------------------------------------------------------------------

// Milliseconds over one run's transactions (or batches).
struct dist {
  double mean = 0, p50 = 0, p99 = 0, max = 0;
};
dist dist_of(const std::vector<double>& sorted) {
  dist d;
  if (sorted.empty()) return d;
  double sum = 0;
  for (double v : sorted) sum += v;
  d.mean = sum / static_cast<double>(sorted.size());
  d.p50 = percentile_sorted(sorted, 50);
  d.p99 = percentile_sorted(sorted, 99);
  d.max = sorted.back();
  return d;
}

struct txn_run {
  double idem_msgs = 0, idem_batched_msgs = 0, txn_msgs = 0;
  double txn_per_s = 0;
  uint64_t txns = 0, aborted = 0, failed_msgs = 0;
  dist end;           // EndTxn: commit_transaction after the flush
  dist prod;          // a transaction's messages: begin to the last acknowledgement
  dist batched_prod;  // the same for a batch of the idempotent batched phase
  double uncommitted_msgs = 0, committed_msgs = 0;  // catch-up reads, medians of the pairs
  double consume_ratio = 0;
  double idem_cpu_us = -1, batched_cpu_us = -1, txn_cpu_us = -1;  // the brokers', per message
  double idem_client_us = -1, batched_client_us = -1, txn_client_us = -1;  // this process's
  double fsync_p50 = 0, fsync_p99 = 0;  // raw 4 KiB write + fdatasync
  std::string first_error;
};

txn_run run_once(const txn_options& o, const servers& s, int producers, int consumers,
                 int replication_factor, int min_isr, double seconds, const std::string& tag) {
  txn_run r;
  const config_list configs = {{"min.insync.replicas", std::to_string(min_isr)}};
  auto fresh_topic = [&](const std::string& name) {
    create_topic(s.bootstrap(), name, o.partitions, configs, replication_factor);
    check_interrupted();
    return name;
  };

  const std::string idem_topic = fresh_topic("txn-bench-" + tag + "-idempotent");
  const phase_result idem = unlimited_phase(o, s, idem_topic, producers, seconds);
  check_interrupted();
  delete_topic(s.bootstrap(), idem_topic);
  const std::string batched_topic = fresh_topic("txn-bench-" + tag + "-batched");
  const phase_result batched = batched_phase(o, s, batched_topic, "", producers, seconds);
  check_interrupted();
  delete_topic(s.bootstrap(), batched_topic);

  std::string fsync_error;
  const std::vector<double> fsync = raw_fsync_latencies_ms(s.data_dir(), 2000, 1.0, fsync_error);
  if (fsync.empty()) throw bench_error{"raw fdatasync latency: " + fsync_error};
  r.fsync_p50 = percentile_sorted(fsync, 50);
  r.fsync_p99 = percentile_sorted(fsync, 99);

  const std::string txn_topic = fresh_topic("txn-bench-" + tag + "-transactional");
  const phase_result txn =
      batched_phase(o, s, txn_topic, "sluice-bench-" + std::to_string(::getpid()) + "-" + tag + "-",
                    producers, seconds);
  check_interrupted();

  // Read back: one uncounted read (it also waits for the last markers),
  // then read_uncommitted and read_committed in turns.
  const std::vector<std::string> uncommitted = {"isolation.level=read_uncommitted"},
                                 committed = {"isolation.level=read_committed"};
  catch_up(s.bootstrap(), txn_topic, o.partitions, consumers, txn.committed, s.pids(), committed);
  std::vector<double> u, c;
  for (int i = 0; i < o.read_pairs; ++i) {
    check_interrupted();
    u.push_back(catch_up(s.bootstrap(), txn_topic, o.partitions, consumers, txn.delivered, s.pids(),
                         uncommitted)
                    .msgs);
    c.push_back(catch_up(s.bootstrap(), txn_topic, o.partitions, consumers, txn.committed, s.pids(),
                         committed)
                    .msgs);
  }
  delete_topic(s.bootstrap(), txn_topic);

  r.idem_msgs = idem.msgs_per_s;
  r.idem_batched_msgs = batched.msgs_per_s;
  r.txn_msgs = txn.msgs_per_s;
  r.txns = txn.batches - txn.aborted;
  r.txn_per_s = txn.msgs_per_s / o.messages_per_txn;
  r.aborted = txn.aborted;
  r.failed_msgs = idem.failed_msgs + batched.failed_msgs + txn.failed_msgs;
  for (const auto* p : {&idem, &batched, &txn})
    if (r.first_error.empty()) r.first_error = p->first_error;
  r.end = dist_of(txn.commit_ms);
  r.prod = dist_of(txn.produce_ms);
  r.batched_prod = dist_of(batched.produce_ms);
  r.uncommitted_msgs = median(u);
  r.committed_msgs = median(c);
  r.consume_ratio = ratio(r.committed_msgs, r.uncommitted_msgs);
  r.idem_cpu_us = idem.broker_cpu_us;
  r.batched_cpu_us = batched.broker_cpu_us;
  r.txn_cpu_us = txn.broker_cpu_us;
  r.idem_client_us = idem.client_cpu_us;
  r.batched_client_us = batched.client_cpu_us;
  r.txn_client_us = txn.client_cpu_us;
  return r;
}

json figure(double v) {
  return v >= 0 ? json(v) : json(nullptr);
}
std::string us_text(double v) {
  return v >= 0 ? fixed(v, 2) : "n/a";
}

}  // namespace

int run_txn(const txn_options& o) {
  catch_interrupts();
  const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  const int producers = o.producers > 0 ? o.producers : cores;
  const int consumers = std::max(1, std::min(cores, o.partitions));
  const int rf = o.replication_factor > 0 ? o.replication_factor : (o.single_node ? 1 : 3);
  const int min_isr = o.min_insync_replicas > 0 ? o.min_insync_replicas : (o.single_node ? 1 : 2);
  if (o.single_node && rf > 1) throw bench_error{"--single-node takes --replication-factor 1"};

  servers s(o);
  check_interrupted();
  const std::string tag = std::to_string(::getpid());
  // Uncounted: the first touch of the brokers' memory and page cache.
  run_once(o, s, producers, consumers, rf, min_isr, std::min(o.seconds, kWarmupSeconds),
           tag + "-warmup");
  std::vector<txn_run> runs;
  for (int i = 0; i < o.repeats; ++i)
    runs.push_back(run_once(o, s, producers, consumers, rf, min_isr, o.seconds,
                            tag + "-" + std::to_string(i)));

  const double idem = median_of(runs, &txn_run::idem_msgs),
               batched = median_of(runs, &txn_run::idem_batched_msgs),
               txn = median_of(runs, &txn_run::txn_msgs),
               txn_per_s = median_of(runs, &txn_run::txn_per_s),
               unc = median_of(runs, &txn_run::uncommitted_msgs),
               com = median_of(runs, &txn_run::committed_msgs),
               consume_ratio = median_of(runs, &txn_run::consume_ratio),
               idem_cpu = median_of(runs, &txn_run::idem_cpu_us),
               batched_cpu = median_of(runs, &txn_run::batched_cpu_us),
               txn_cpu = median_of(runs, &txn_run::txn_cpu_us),
               idem_client = median_of(runs, &txn_run::idem_client_us),
               batched_client = median_of(runs, &txn_run::batched_client_us),
               txn_client = median_of(runs, &txn_run::txn_client_us),
               fsync_p50 = median_of(runs, &txn_run::fsync_p50),
               fsync_p99 = median_of(runs, &txn_run::fsync_p99);
  // Each figure of a distribution: its median over runs.
  auto median_dist = [&](dist txn_run::*which) {
    dist d;
    for (double dist::*f : {&dist::mean, &dist::p50, &dist::p99, &dist::max}) {
      std::vector<double> v;
      for (const auto& r : runs) v.push_back(r.*which.*f);
      d.*f = median(std::move(v));
    }
    return d;
  };
  const dist end = median_dist(&txn_run::end), prod = median_dist(&txn_run::prod),
             batched_prod = median_dist(&txn_run::batched_prod);
  std::vector<double> ratios;
  for (const auto& r : runs) ratios.push_back(ratio(r.txn_msgs, r.idem_msgs));
  const double produce_ratio = median(ratios);
  uint64_t txns = 0, aborted = 0, failed = 0;
  std::string first_error;
  for (const auto& r : runs) {
    txns += r.txns;
    aborted += r.aborted;
    failed += r.failed_msgs;
    if (first_error.empty()) first_error = r.first_error;
  }
  const bool t_rate = produce_ratio >= 0.7, t_end = end.p99 > 0 && end.p99 < 20,
             t_read = consume_ratio >= 0.9;
  const double mb = static_cast<double>(o.message_bytes) / kMB;

  if (o.json) {
    json j = json::object();
    j["mode"] = "txn";
    j["brokers"] = s.count();
    j["partitions"] = o.partitions;
    j["replication_factor"] = rf;
    j["min_insync_replicas"] = min_isr;
    j["message_bytes"] = static_cast<uint64_t>(o.message_bytes);
    j["messages_per_txn"] = o.messages_per_txn;
    j["producers"] = producers;
    j["catch_up_consumers"] = consumers;
    j["seconds"] = o.seconds;
    j["repeats"] = o.repeats;
    j["load_average_1m"] = load_average_1m();
    j["idempotent_msgs_per_s"] = idem;
    j["idempotent_batched_msgs_per_s"] = batched;
    j["transactional_msgs_per_s"] = txn;
    j["transactions_per_s"] = txn_per_s;
    j["transactions"] = txns;
    j["aborted_transactions"] = aborted;
    j["failed_messages"] = failed;
    j["first_error"] = first_error;
    auto dist_json = [](const dist& d) {
      json o = json::object();
      o["mean"] = d.mean;
      o["p50"] = d.p50;
      o["p99"] = d.p99;
      o["max"] = d.max;
      return o;
    };
    j["end_txn_latency_ms"] = dist_json(end);
    j["txn_messages_acked_ms"] = dist_json(prod);
    j["batch_messages_acked_ms"] = dist_json(batched_prod);
    j["consume_read_uncommitted_msgs_per_s"] = unc;
    j["consume_read_committed_msgs_per_s"] = com;
    json cpu = json::object();
    cpu["brokers_idempotent"] = figure(idem_cpu);
    cpu["brokers_idempotent_batched"] = figure(batched_cpu);
    cpu["brokers_transactional"] = figure(txn_cpu);
    cpu["client_idempotent"] = figure(idem_client);
    cpu["client_idempotent_batched"] = figure(batched_client);
    cpu["client_transactional"] = figure(txn_client);
    j["cpu_us_per_msg"] = std::move(cpu);
    json raw = json::object();
    raw["fdatasync_4k_latency_p50_ms"] = fsync_p50;
    raw["fdatasync_4k_latency_p99_ms"] = fsync_p99;
    j["raw"] = std::move(raw);
    json rat = json::object();
    rat["transactional_vs_idempotent"] = produce_ratio;
    rat["idempotent_batched_vs_idempotent"] = ratio(batched, idem);
    rat["read_committed_vs_read_uncommitted"] = consume_ratio;
    j["ratios"] = std::move(rat);
    json tg = json::object();
    tg["transactional_at_least_0_7_of_idempotent"] = t_rate;
    tg["end_txn_p99_under_20ms"] = t_end;
    tg["read_committed_at_least_0_9_of_uncommitted"] = t_read;
    j["targets_met"] = std::move(tg);
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }

  std::printf("sluice-bench txn: %s on this machine; load average %.2f\n",
              o.single_node ? "one Sluice broker" : "3 Sluice brokers (etcd of 3)",
              load_average_1m());
  std::printf(
      "%d partitions, RF %d, min.insync.replicas %d, acks=all, %zu-byte messages; %d producers per "
      "phase, transactions of %d messages over %d partitions; %.1f s phases, %d run%s "
      "(medians)\n\n",
      o.partitions, rf, min_isr, o.message_bytes, producers, o.messages_per_txn,
      std::min(o.messages_per_txn, o.partitions), o.seconds, o.repeats, o.repeats == 1 ? "" : "s");
  std::printf("%-58s %12s %9s %7s\n", "produce", "msgs/s", "MB/s", "ratio");
  std::printf("%-58s %12.0f %9.1f\n", "  idempotent, unlimited", idem, idem * mb);
  std::printf("%-58s %12.0f %9.1f %7.2f\n",
              ("  idempotent, acks awaited every " + std::to_string(o.messages_per_txn)).c_str(),
              batched, batched * mb, ratio(batched, idem));
  std::printf("%-58s %12.0f %9.1f %7.2f  target >= 0.7: %s\n", "  transactional", txn, txn * mb,
              produce_ratio, verdict(true, t_rate).c_str());
  std::printf("  %.0f transactions/s committed; %llu committed, %llu aborted over the runs\n",
              txn_per_s, static_cast<unsigned long long>(txns),
              static_cast<unsigned long long>(aborted));
  std::printf("%-58s %8s %8s %8s %8s\n", "per transaction or batch (ms)", "mean", "p50", "p99",
              "max");
  auto row = [](const std::string& what, const dist& d) {
    std::printf("%-58s %8.2f %8.2f %8.2f %8.2f", what.c_str(), d.mean, d.p50, d.p99, d.max);
  };
  row("  idempotent batch: first message to every one acked", batched_prod);
  std::printf("\n");
  row("  transaction: begin to every message acknowledged", prod);
  std::printf("\n");
  row("  EndTxn (commit_transaction after the flush)", end);
  std::printf("  target p99 < 20 ms: %s\n", verdict(true, t_end).c_str());
  std::printf("%-58s %8s %8.2f %8.2f\n", "  raw: 4 KiB write + fdatasync on the brokers' disk", "",
              fsync_p50, fsync_p99);
  std::printf("catch-up consume of the transactional topic (%d consumer%s, median of %d pairs)\n",
              consumers, consumers == 1 ? "" : "s", o.read_pairs);
  std::printf("%-58s %12.0f %9.1f\n", "  read_uncommitted", unc, unc * mb);
  std::printf("%-58s %12.0f %9.1f %7.2f  target >= 0.9: %s\n", "  read_committed", com, com * mb,
              consume_ratio, verdict(true, t_read).c_str());
  std::printf("CPU per message (us): brokers%s, this process (the producers)\n",
              o.single_node ? "" : " (all three)");
  std::printf("%-58s %12s %9s\n", "  idempotent, unlimited", us_text(idem_cpu).c_str(),
              us_text(idem_client).c_str());
  std::printf("%-58s %12s %9s\n", "  idempotent, acks awaited", us_text(batched_cpu).c_str(),
              us_text(batched_client).c_str());
  std::printf("%-58s %12s %9s\n", "  transactional", us_text(txn_cpu).c_str(),
              us_text(txn_client).c_str());
  if (failed || !first_error.empty())
    std::printf("failed messages: %llu; first error: %s\n", static_cast<unsigned long long>(failed),
                first_error.c_str());
  return 0;
}

}  // namespace sluice::bench
