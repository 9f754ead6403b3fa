// Cluster benchmark (issue 20; see README.md): three `sluice serve` brokers
// over a three-member etcd, and beside them three nats-server processes
// clustered with JetStream, all started here on free loopback ports with
// their data in one temp directory, stopped by pid and removed at the end
// (also after an error or Ctrl-C).
//
// Sluice: a topic of `partitions` partitions, replication factor 3,
// min.insync.replicas 2, produced to with acks=all by the broker mode's
// producer (produce_phase.h) at an unlimited and a fixed rate, read back by
// its catch-up consumers (consume_phase.h); then the leader of partition 0
// is killed under a steady produce. JetStream: a stream of three replicas
// on file storage, published to asynchronously. CPU per message: the
// servers' utime + stime over a phase, summed over the processes, divided by
// the messages of the phase.

#include "cluster_bench.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <thread>

#include <librdkafka/rdkafka.h>
#include <signal.h>
#include <unistd.h>

#include "child_process.h"
#include "cluster_setup.h"
#include "consume_phase.h"
#include "jetstream.h"
#include "kafka_util.h"
#include "produce_phase.h"
#include "report.h"

namespace sluice::bench {
namespace {

namespace fs = std::filesystem;

// ---- One run of each --------------------------------------------------------

struct latency {
  double p50 = 0, p99 = 0, p999 = 0, max = 0;
};
latency latency_of(const std::vector<double>& sorted) {
  return {percentile_sorted(sorted, 50), percentile_sorted(sorted, 99),
          percentile_sorted(sorted, 99.9), sorted.empty() ? 0 : sorted.back()};
}

// CPU microseconds per message; -1 when not measured.
double us_per_msg(double cpu_seconds, uint64_t messages) {
  return cpu_seconds >= 0 && messages > 0 ? cpu_seconds * 1e6 / static_cast<double>(messages) : -1;
}

struct sluice_run {
  double produce_msgs = 0, consume_msgs = 0;
  // After the unlimited publish: the topic's segment bytes on each broker,
  // and all of them over the bytes acknowledged (about 1 when only leaders
  // store messages, about the replication factor when followers copy them).
  std::vector<uint64_t> log_bytes;
  double stored_copies = 0;
  double produce_cpu_us = -1, consume_cpu_us = -1, rate_cpu_us = -1;
  double p50 = 0, p99 = 0, p999 = 0, max = 0;
  double rate_achieved = 0, schedule_lag_max_ms = 0;
  uint64_t failed = 0;
  std::string first_error;
};

struct js_run {
  double publish_msgs = 0, publish_cpu_us = -1, rate_cpu_us = -1;
  double p50 = 0, p99 = 0, p999 = 0, max = 0;
  double rate_achieved = 0, schedule_lag_max_ms = 0;
  uint64_t failed = 0;
  std::string first_error;
};

produce_spec sluice_spec(const cluster_options& o, const sluice_cluster& c,
                         const std::string& topic, double rate, double seconds) {
  produce_spec s;
  s.bootstrap = c.bootstrap();
  s.topic = topic;
  s.acks = "all";
  s.rate = rate;
  s.seconds = seconds;
  s.message_bytes = o.message_bytes;
  // Every partition, so every leader, at an even pace.
  s.round_robin_partitions = o.partitions;
  s.more_broker_pids = c.pids();
  s.stop = &interrupted();
  return s;
}

void note_failures(const produce_stats& ps, uint64_t& failed, std::string& first) {
  failed += ps.failed;
  if (first.empty()) first = ps.first_error;
  if (ps.acked == 0)
    throw bench_error{"no message was acknowledged" +
                      (ps.first_error.empty() ? std::string() : ": " + ps.first_error)};
}

sluice_run run_sluice(const cluster_options& o, const sluice_cluster& c, int consumers,
                      const std::string& topic) {
  sluice_run r;
  create_topic(c.bootstrap(), topic, o.partitions,
               {{"min.insync.replicas", std::to_string(o.min_insync_replicas)}},
               o.replication_factor);
  check_interrupted();
  const produce_stats up = produce_phase(sluice_spec(o, c, topic, 0, o.seconds));
  check_interrupted();
  note_failures(up, r.failed, r.first_error);
  r.produce_msgs = up.msgs_per_s;
  r.produce_cpu_us = us_per_msg(up.broker_cpu_seconds, up.acked);
  r.log_bytes = c.topic_log_bytes(topic);
  uint64_t stored = 0;
  for (auto b : r.log_bytes) stored += b;
  r.stored_copies = static_cast<double>(stored) /
                    (static_cast<double>(up.acked) * static_cast<double>(o.message_bytes));

  const catch_up_result cu =
      catch_up(c.bootstrap(), topic, o.partitions, consumers, up.acked, c.pids());
  check_interrupted();
  r.consume_msgs = cu.msgs;
  // Cores busy per message per second: CPU seconds per message.
  if (cu.broker_cpu >= 0 && cu.msgs > 0) r.consume_cpu_us = cu.broker_cpu / cu.msgs * 1e6;

  const produce_stats fixed_rate = produce_phase(sluice_spec(o, c, topic, o.rate, o.seconds));
  check_interrupted();
  note_failures(fixed_rate, r.failed, r.first_error);
  const latency l = latency_of(fixed_rate.publish_ms);
  r.p50 = l.p50, r.p99 = l.p99, r.p999 = l.p999, r.max = l.max;
  r.rate_achieved = fixed_rate.msgs_per_s;
  r.schedule_lag_max_ms = fixed_rate.schedule_lag_max_ms;
  r.rate_cpu_us = us_per_msg(fixed_rate.broker_cpu_seconds, fixed_rate.acked);
  delete_topic(c.bootstrap(), topic);
  return r;
}

js_run run_jetstream(const cluster_options& o, jetstream_cluster& js, const std::string& stream) {
  js_run r;
  const js_publish_stats up =
      js.publish_phase(stream + "_UNLIMITED", o.replication_factor, 0, o.seconds, o.message_bytes,
                       o.js_max_pending, &interrupted());
  check_interrupted();
  if (up.acked == 0) throw bench_error{"JetStream acknowledged nothing: " + up.first_error};
  r.publish_msgs = up.msgs_per_s;
  r.publish_cpu_us = us_per_msg(up.server_cpu_seconds, up.acked);
  r.failed += up.failed;
  r.first_error = up.first_error;
  const js_publish_stats fr =
      js.publish_phase(stream + "_RATE", o.replication_factor, o.rate, o.seconds, o.message_bytes,
                       o.js_max_pending, &interrupted());
  check_interrupted();
  if (fr.acked == 0) throw bench_error{"JetStream acknowledged nothing: " + fr.first_error};
  const latency l = latency_of(fr.publish_ms);
  r.p50 = l.p50, r.p99 = l.p99, r.p999 = l.p999, r.max = l.max;
  r.rate_achieved = fr.msgs_per_s;
  r.schedule_lag_max_ms = fr.schedule_lag_max_ms;
  r.rate_cpu_us = us_per_msg(fr.server_cpu_seconds, fr.acked);
  r.failed += fr.failed;
  if (r.first_error.empty()) r.first_error = fr.first_error;
  return r;
}

// ---- The leader kill ----------------------------------------------------------

struct kill_result {
  bool done = false;            // a leader was found and killed
  int killed = -1;              // node id
  int new_leader = -1;          // of partition 0 after the acks resumed (-1: unknown)
  double resume_seconds = -1;   // -1: the acks did not resume within the timeout
  double restart_seconds = -1;  // the killed broker listening again
  std::string note;
};

kill_result leader_kill(const cluster_options& o, sluice_cluster& c, const std::string& topic) {
  kill_result k;
  create_topic(c.bootstrap(), topic, o.partitions,
               {{"min.insync.replicas", std::to_string(o.min_insync_replicas)}},
               o.replication_factor);
  std::atomic<int64_t> kill_ns{0}, resume_ns{0};
  std::atomic<uint64_t> p0_acks{0};
  produce_spec s = sluice_spec(o, c, topic, o.rate, o.failover_timeout + 60);
  s.more_broker_pids.clear();  // one of them dies: no CPU figure
  s.stop = nullptr;
  // Messages wait through the failover instead of expiring.
  // Quiet: librdkafka reports every failed reconnect to the killed broker.
  s.props = {"log_level=2", "message.timeout.ms=" +
                                std::to_string(static_cast<int>((o.failover_timeout + 60) * 1000))};
  s.on_ack = [&](int32_t partition, int64_t sent, int64_t ack, bool ok) {
    if (partition != 0 || !ok) return;
    ++p0_acks;
    const int64_t kt = kill_ns.load();
    if (kt > 0 && sent >= kt && resume_ns.load() == 0) resume_ns = ack;
  };
  auto producer = std::make_unique<background_produce>(s);
  // A steady state first: two seconds with partition 0 acknowledging.
  const int64_t warm_until = now_ns() + 2'000'000'000;
  while (now_ns() < warm_until || p0_acks.load() == 0) {
    check_interrupted();
    if (now_ns() > warm_until + 30'000'000'000) {
      k.note = "partition 0 acknowledged nothing before the kill";
      return k;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  k.killed = c.leader_of(topic, 0);
  if (k.killed < 1 || k.killed > kClusterServers) {
    k.note = "no leader of partition 0 in Metadata";
    return k;
  }
  c.broker(k.killed).stop(SIGKILL);
  kill_ns = now_ns();
  k.done = true;
  const int64_t deadline = kill_ns.load() + static_cast<int64_t>(o.failover_timeout * 1e9);
  while (resume_ns.load() == 0 && now_ns() < deadline && !interrupted().load())
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  if (resume_ns.load() > 0) {
    k.resume_seconds = static_cast<double>(resume_ns.load() - kill_ns.load()) / 1e9;
    k.new_leader = c.leader_of(topic, 0);
  } else {
    k.note = "partition 0's acknowledgements did not resume within " +
             fixed(o.failover_timeout, 0) + " s";
  }
  check_interrupted();
  // Back to three brokers, as the cluster was, before the producer stops:
  // what still waits for partition 0 then has a leader to go to.
  const int64_t r0 = now_ns();
  c.broker(k.killed).start();
  c.wait_listening(k.killed);
  k.restart_seconds = static_cast<double>(now_ns() - r0) / 1e9;
  producer.reset();  // stops producing; waits for what is in flight
  delete_topic(c.bootstrap(), topic);
  return k;
}

json figure(double v) {
  return v >= 0 ? json(v) : json(nullptr);
}
std::string us_text(double v) {
  return v >= 0 ? fixed(v, 2) : "n/a";
}

}  // namespace

int run_cluster(const cluster_options& o) {
  catch_interrupts();
  const int consumers =
      o.consumers > 0 ? o.consumers
                      : std::max(1, std::min(static_cast<int>(std::thread::hardware_concurrency()),
                                             o.partitions));

  temp_root root(o.dir);
  etcd_cluster etcd(o.etcd_path, root.path);
  check_interrupted();
  sluice_cluster sluice({o.sluice_path, o.broker_args, o.session_timeout_ms}, root.path,
                        etcd.endpoints());
  check_interrupted();
  std::optional<jetstream_cluster> js;
  if (o.jetstream) js.emplace(o.nats_path, root.path, kClusterServers);
  check_interrupted();

  const std::string tag = std::to_string(::getpid());
  std::vector<sluice_run> sr;
  std::vector<js_run> jr;
  for (int i = 0; i < o.repeats; ++i) {
    sr.push_back(
        run_sluice(o, sluice, consumers, "cluster-bench-" + tag + "-" + std::to_string(i)));
    if (js) jr.push_back(run_jetstream(o, *js, "CLUSTERBENCH_" + tag + "_" + std::to_string(i)));
  }
  kill_result k;
  if (o.leader_kill) k = leader_kill(o, sluice, "cluster-bench-" + tag + "-kill");

  const double s_prod = median_of(sr, &sluice_run::produce_msgs),
               s_cons = median_of(sr, &sluice_run::consume_msgs),
               s_p50 = median_of(sr, &sluice_run::p50), s_p99 = median_of(sr, &sluice_run::p99),
               s_p999 = median_of(sr, &sluice_run::p999), s_max = median_of(sr, &sluice_run::max),
               s_cpu = median_of(sr, &sluice_run::produce_cpu_us),
               s_cpu_cons = median_of(sr, &sluice_run::consume_cpu_us),
               s_cpu_rate = median_of(sr, &sluice_run::rate_cpu_us),
               s_rate = median_of(sr, &sluice_run::rate_achieved),
               s_lag = median_of(sr, &sluice_run::schedule_lag_max_ms);
  const double j_pub = median_of(jr, &js_run::publish_msgs), j_p50 = median_of(jr, &js_run::p50),
               j_p99 = median_of(jr, &js_run::p99), j_p999 = median_of(jr, &js_run::p999),
               j_max = median_of(jr, &js_run::max), j_cpu = median_of(jr, &js_run::publish_cpu_us),
               j_cpu_rate = median_of(jr, &js_run::rate_cpu_us),
               j_rate = median_of(jr, &js_run::rate_achieved),
               j_lag = median_of(jr, &js_run::schedule_lag_max_ms);
  const double s_copies = median_of(sr, &sluice_run::stored_copies);
  const std::vector<uint64_t>& s_log_bytes = sr.back().log_bytes;  // of the last run
  uint64_t s_failed = 0, j_failed = 0;
  std::string s_err, j_err;
  for (const auto& r : sr) {
    s_failed += r.failed;
    if (s_err.empty()) s_err = r.first_error;
  }
  for (const auto& r : jr) {
    j_failed += r.failed;
    if (j_err.empty()) j_err = r.first_error;
  }
  const double prod_ratio = ratio(s_prod, j_pub);
  const bool t_rate = prod_ratio >= 5, t_p99 = s_p99 > 0 && s_p99 < 10,
             t_cpu = s_cpu >= 0 && s_cpu <= 5;
  const double mb = static_cast<double>(o.message_bytes) / kMB;

  if (o.json) {
    json j = json::object();
    j["mode"] = "cluster";
    j["brokers"] = kClusterServers;
    j["partitions"] = o.partitions;
    j["replication_factor"] = o.replication_factor;
    j["min_insync_replicas"] = o.min_insync_replicas;
    j["message_bytes"] = static_cast<uint64_t>(o.message_bytes);
    j["seconds"] = o.seconds;
    j["rate"] = o.rate;
    j["repeats"] = o.repeats;
    j["catch_up_consumers"] = consumers;
    j["load_average_1m"] = load_average_1m();
    json s = json::object();
    s["produce_msgs_per_s"] = s_prod;
    s["produce_mb_per_s"] = s_prod * mb;
    s["consume_msgs_per_s"] = s_cons;
    s["stored_copies"] = s_copies;
    json per = json::array();
    for (auto b : s_log_bytes) per.push(b);
    s["topic_log_bytes_per_broker"] = std::move(per);
    s["publish_latency_ms"] = json::object();
    s["publish_latency_ms"]["p50"] = s_p50;
    s["publish_latency_ms"]["p99"] = s_p99;
    s["publish_latency_ms"]["p99_9"] = s_p999;
    s["publish_latency_ms"]["max"] = s_max;
    s["fixed_rate_achieved_msgs_per_s"] = s_rate;
    s["schedule_lag_max_ms"] = s_lag;
    s["cpu_us_per_msg_produce"] = figure(s_cpu);
    s["cpu_us_per_msg_consume"] = figure(s_cpu_cons);
    s["cpu_us_per_msg_fixed_rate"] = figure(s_cpu_rate);
    s["failed_messages"] = s_failed;
    s["first_error"] = s_err;
    json lk = json::object();
    lk["done"] = k.done;
    lk["killed_node"] = k.killed;
    lk["new_leader"] = k.new_leader;
    lk["seconds_to_resume"] = figure(k.resume_seconds);
    lk["restart_seconds"] = figure(k.restart_seconds);
    lk["note"] = k.note;
    s["leader_kill"] = std::move(lk);
    j["sluice"] = std::move(s);
    json n = json::object();
    n["publish_msgs_per_s"] = j_pub;
    n["publish_mb_per_s"] = j_pub * mb;
    n["publish_latency_ms"] = json::object();
    n["publish_latency_ms"]["p50"] = j_p50;
    n["publish_latency_ms"]["p99"] = j_p99;
    n["publish_latency_ms"]["p99_9"] = j_p999;
    n["publish_latency_ms"]["max"] = j_max;
    n["fixed_rate_achieved_msgs_per_s"] = j_rate;
    n["schedule_lag_max_ms"] = j_lag;
    n["cpu_us_per_msg_publish"] = figure(j_cpu);
    n["cpu_us_per_msg_fixed_rate"] = figure(j_cpu_rate);
    n["max_pending"] = o.js_max_pending;
    n["failed_messages"] = j_failed;
    n["first_error"] = j_err;
    j["jetstream"] = std::move(n);
    json rat = json::object();
    rat["produce_vs_jetstream"] = prod_ratio;
    rat["publish_p99_vs_jetstream"] = ratio(s_p99, j_p99);
    rat["cpu_per_msg_vs_jetstream"] = s_cpu >= 0 && j_cpu > 0 ? json(s_cpu / j_cpu) : json(nullptr);
    j["ratios"] = std::move(rat);
    json tg = json::object();
    tg["produce_at_least_5x_jetstream"] = t_rate;
    tg["publish_p99_under_10ms"] = t_p99;
    tg["cpu_at_most_5us_per_msg"] = t_cpu;
    j["targets_met"] = std::move(tg);
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }

  std::printf(
      "sluice-bench cluster: %d Sluice brokers (etcd of 3) beside %d nats-server (JetStream), "
      "all on this machine; load average %.2f\n",
      kClusterServers, kClusterServers, load_average_1m());
  std::printf(
      "Sluice: %d partitions, RF %d, min.insync.replicas %d, acks=all. JetStream: one stream, R%d, "
      "file storage, async publish (%d in flight). %zu-byte messages, %.1f s phases, %d run%s "
      "(medians)\n\n",
      o.partitions, o.replication_factor, o.min_insync_replicas, o.replication_factor,
      o.js_max_pending, o.message_bytes, o.seconds, o.repeats, o.repeats == 1 ? "" : "s");
  std::printf("%-40s %14s %14s %8s\n", "", "Sluice", "JetStream", "ratio");
  std::printf("%-40s %14.0f %14.0f %8.2f  target >= 5: %s\n", "publish, unlimited (msgs/s)", s_prod,
              j_pub, prod_ratio, js ? verdict(true, t_rate).c_str() : "(JetStream not run)");
  std::printf("%-40s %14.1f %14.1f\n", "  MB/s", s_prod * mb, j_pub * mb);
  std::string per;
  for (size_t i = 0; i < s_log_bytes.size(); ++i)
    per += (i ? ", " : "") + std::to_string(i + 1) + ": " +
           fixed(static_cast<double>(s_log_bytes[i]) / kMB, 1) + " MB";
  std::printf(
      "  the topic's copies on the brokers' disks: %.2f of %d (its log bytes by node: %s)\n",
      s_copies, o.replication_factor, per.c_str());
  std::printf("%-40s %14.0f %14s   (%d catch-up consumer%s)\n", "consume, catch-up (msgs/s)",
              s_cons, "-", consumers, consumers == 1 ? "" : "s");
  std::printf("publish latency at %.0f msgs/s (achieved %.0f / %.0f)\n", o.rate, s_rate, j_rate);
  std::printf("%-40s %14.2f %14.2f %8.2f\n", "  p50 (ms)", s_p50, j_p50, ratio(s_p50, j_p50));
  std::printf("%-40s %14.2f %14.2f %8.2f  target < 10 ms: %s\n", "  p99 (ms)", s_p99, j_p99,
              ratio(s_p99, j_p99), verdict(true, t_p99).c_str());
  std::printf("%-40s %14.2f %14.2f\n", "  p99.9 (ms)", s_p999, j_p999);
  std::printf("%-40s %14.2f %14.2f\n", "  max (ms)", s_max, j_max);
  std::printf("servers' CPU per message, all three (us)\n");
  std::printf("%-40s %14s %14s %8s  target <= 5 us: %s\n", "  publish, unlimited",
              us_text(s_cpu).c_str(), us_text(j_cpu).c_str(),
              s_cpu >= 0 && j_cpu > 0 ? fixed(s_cpu / j_cpu).c_str() : "-",
              verdict(true, t_cpu).c_str());
  std::printf("%-40s %14s %14s\n", "  publish at the fixed rate", us_text(s_cpu_rate).c_str(),
              us_text(j_cpu_rate).c_str());
  std::printf("%-40s %14s %14s\n", "  consume, catch-up", us_text(s_cpu_cons).c_str(), "-");
  if (s_failed || j_failed)
    std::printf("failed messages: Sluice %llu (%s), JetStream %llu (%s)\n",
                static_cast<unsigned long long>(s_failed), s_err.c_str(),
                static_cast<unsigned long long>(j_failed), j_err.c_str());
  if (!o.leader_kill) {
    std::printf("leader kill: not run (--no-leader-kill)\n");
  } else if (!k.done) {
    std::printf("leader kill: not done: %s\n", k.note.c_str());
  } else if (k.resume_seconds >= 0) {
    std::printf(
        "leader kill at %.0f msgs/s: node %d (leader of partition 0) SIGKILLed; partition 0's "
        "acknowledgements resumed after %.2f s (leader now node %d); restarted, listening after "
        "%.1f s\n",
        o.rate, k.killed, k.resume_seconds, k.new_leader, k.restart_seconds);
  } else {
    std::printf("leader kill at %.0f msgs/s: node %d SIGKILLed; %s; restarted after %.1f s\n",
                o.rate, k.killed, k.note.c_str(), k.restart_seconds);
  }
  return 0;
}

// ---- restart: ISRs and leaders over many empty partitions ---------------------

namespace {

// What one Metadata answer says of the benchmark's topics.
struct isr_census {
  int partitions = 0;  // seen
  int full_isr = 0;    // with every replica in the ISR
  int led = 0;         // with a leader
  int led_by = 0;      // led by `node`
};

isr_census census(const std::string& bootstrap, const std::string& prefix, int replicas, int node) {
  rd_kafka_conf_t* conf = base_conf(bootstrap);
  char err[256];
  // Quiet: every census reports the stopped broker's refused connects.
  rd_kafka_conf_set(conf, "log_level", "2", err, sizeof err);
  client_ptr rk = make_client(RD_KAFKA_PRODUCER, conf);
  const rd_kafka_metadata_t* md = nullptr;
  isr_census c;
  if (rd_kafka_metadata(rk.get(), 1, nullptr, &md, 10000) == RD_KAFKA_RESP_ERR_NO_ERROR) {
    for (int t = 0; t < md->topic_cnt; ++t) {
      const auto& tm = md->topics[t];
      if (std::string(tm.topic).rfind(prefix, 0) != 0 || tm.err) continue;
      for (int i = 0; i < tm.partition_cnt; ++i) {
        const auto& pm = tm.partitions[i];
        ++c.partitions;
        if (pm.isr_cnt == replicas) ++c.full_isr;
        if (pm.leader >= 0) ++c.led;
        if (pm.leader == node) ++c.led_by;
      }
    }
  }
  if (md) rd_kafka_metadata_destroy(md);
  return c;
}

// Seconds from `start_ns` until `done` holds of a census (polled every
// 200 ms), or -1 after `timeout` seconds.
template <typename Done>
double seconds_until(const std::string& bootstrap, const std::string& prefix, int node,
                     int64_t start_ns, double timeout, Done done, isr_census* last = nullptr) {
  const int64_t deadline = start_ns + static_cast<int64_t>(timeout * 1e9);
  for (;;) {
    check_interrupted();
    const isr_census c = census(bootstrap, prefix, 3, node);
    if (last) *last = c;
    if (done(c)) return static_cast<double>(now_ns() - start_ns) / 1e9;
    if (now_ns() > deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

// CreateTopics for every topic in one request; returns when it answered.
void create_topics(const std::string& bootstrap, const std::vector<std::string>& topics,
                   int partitions_each) {
  client_ptr rk = make_client(RD_KAFKA_PRODUCER, base_conf(bootstrap));
  char err[512];
  std::vector<rd_kafka_NewTopic_t*> nts;
  for (const auto& t : topics) {
    rd_kafka_NewTopic_t* nt = rd_kafka_NewTopic_new(t.c_str(), partitions_each, 3, err, sizeof err);
    if (!nt) throw bench_error{std::string("NewTopic: ") + err};
    nts.push_back(nt);
  }
  rd_kafka_AdminOptions_t* ao = rd_kafka_AdminOptions_new(rk.get(), RD_KAFKA_ADMIN_OP_CREATETOPICS);
  rd_kafka_AdminOptions_set_operation_timeout(ao, 120'000, err, sizeof err);
  rd_kafka_AdminOptions_set_request_timeout(ao, 180'000, err, sizeof err);
  queue_ptr q(rd_kafka_queue_new(rk.get()));
  rd_kafka_CreateTopics(rk.get(), nts.data(), nts.size(), ao, q.get());
  rd_kafka_AdminOptions_destroy(ao);
  for (auto* nt : nts) rd_kafka_NewTopic_destroy(nt);
  check_create_topics(admin_wait(q.get(), RD_KAFKA_EVENT_CREATETOPICS_RESULT).get());
}

// --keep-logs: copies the brokers' logs out of the temp dir when destroyed.
struct kept_logs {
  std::string to, root;
  ~kept_logs() {
    if (to.empty()) return;
    std::error_code ec;
    fs::create_directories(to, ec);
    for (int id = 1; id <= kClusterServers; ++id) {
      const auto from = fs::path(root) / ("broker-" + std::to_string(id) + ".log");
      fs::copy_file(from, fs::path(to) / from.filename(), fs::copy_options::overwrite_existing, ec);
      if (ec) std::fprintf(stderr, "--keep-logs: %s: %s\n", from.c_str(), ec.message().c_str());
    }
  }
};

std::string secs(double v) {
  return v >= 0 ? fixed(v, 1) + " s" : "not within the timeout";
}

}  // namespace

int run_restart(const restart_options& o) {
  catch_interrupts();
  temp_root root(o.dir);
  // Destroyed after the brokers stopped (their logs complete), before root.
  const kept_logs keep{o.keep_logs, root.path};
  etcd_cluster etcd(o.etcd_path, root.path);
  check_interrupted();
  sluice_cluster c({o.sluice_path, o.broker_args, o.session_timeout_ms}, root.path,
                   etcd.endpoints());
  check_interrupted();

  const std::string prefix = "restart-bench-" + std::to_string(::getpid()) + "-";
  const int each = std::min(o.partitions, o.partitions_per_topic);
  const int topics = (o.partitions + each - 1) / each;
  const int total = topics * each;
  std::vector<std::string> names;
  for (int i = 0; i < topics; ++i) names.push_back(prefix + std::to_string(i));
  auto all_led = [&](const isr_census& s) { return s.partitions == total && s.led == total; };
  auto all_full = [&](const isr_census& s) { return all_led(s) && s.full_isr == total; };

  // 1. Creation: from the request until every partition has a leader and
  // every replica is in its ISR.
  isr_census last;
  const int64_t t0 = now_ns();
  create_topics(c.bootstrap(), names, each);
  const double created_answer = static_cast<double>(now_ns() - t0) / 1e9;
  const double created = seconds_until(c.bootstrap(), prefix, -1, t0, o.timeout, all_led, &last);
  const double created_full =
      seconds_until(c.bootstrap(), prefix, -1, t0, o.timeout, all_full, &last);

  // 2. A clean restart of broker 3: SIGTERM, start again; from the start
  // until every ISR holds all three replicas again.
  auto none_full = [&](const isr_census& s) { return s.partitions == total && s.full_isr == 0; };
  auto restart = [&](int node, int sig) {
    c.broker(node).stop(sig);
    // Out of every ISR first (at once after a SIGTERM, which gives the
    // session up), so that the ISRs must grow back.
    seconds_until(c.bootstrap(), prefix, -1, now_ns(), o.timeout, none_full, &last);
    const int64_t start = now_ns();
    c.broker(node).start();
    c.wait_listening(node);
    return seconds_until(c.bootstrap(), prefix, -1, start, o.timeout, all_full, &last);
  };
  const double back_term = restart(3, SIGTERM);
  const isr_census after_term = last;

  // 3. SIGKILL of broker 2 (which leads a third of the partitions): from
  // the kill until no partition is led by it and every one has a leader;
  // then it starts again, timed as above.
  const int64_t k0 = now_ns();
  c.broker(2).stop(SIGKILL);
  const double moved = seconds_until(
      c.bootstrap(), prefix, 2, k0, o.timeout,
      [&](const isr_census& s) { return s.partitions == total && s.led == total && s.led_by == 0; },
      &last);
  seconds_until(c.bootstrap(), prefix, -1, now_ns(), o.timeout, none_full, &last);
  const int64_t start = now_ns();
  c.broker(2).start();
  c.wait_listening(2);
  const double back_kill =
      seconds_until(c.bootstrap(), prefix, -1, start, o.timeout, all_full, &last);
  const isr_census after_kill = last;

  const double session_s = o.session_timeout_ms / 1000.0;
  const bool t_create = created_full >= 0 && created_full < 15,
             t_back = back_term >= 0 && back_term < 15 && back_kill >= 0 && back_kill < 15,
             t_moved = moved >= 0 && moved < session_s + 2;
  if (o.json) {
    json j = json::object();
    j["mode"] = "restart";
    j["brokers"] = kClusterServers;
    j["partitions"] = total;
    j["topics"] = topics;
    j["session_timeout_ms"] = o.session_timeout_ms;
    j["load_average_1m"] = load_average_1m();
    j["create_answered_seconds"] = created_answer;
    j["create_led_seconds"] = figure(created);
    j["create_full_isr_seconds"] = figure(created_full);
    j["sigterm_restart_full_isr_seconds"] = figure(back_term);
    j["sigkill_leaders_moved_seconds"] = figure(moved);
    j["sigkill_restart_full_isr_seconds"] = figure(back_kill);
    json tg = json::object();
    tg["create_under_15s"] = t_create;
    tg["back_in_every_isr_within_15s"] = t_back;
    tg["leaders_move_within_session_plus_2s"] = t_moved;
    j["targets_met"] = std::move(tg);
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  std::printf(
      "sluice-bench restart: 3 brokers (etcd of 3) on this machine; %d empty partitions in %d "
      "topic%s, RF 3; session timeout %d ms; load average %.2f\n\n",
      total, topics, topics == 1 ? "" : "s", o.session_timeout_ms, load_average_1m());
  std::printf("%-58s %s\n", "create: CreateTopics answered", secs(created_answer).c_str());
  std::printf("%-58s %s\n", "create: every partition led", secs(created).c_str());
  std::printf("%-58s %s  target < 15 s: %s\n", "create: every ISR full", secs(created_full).c_str(),
              verdict(true, t_create).c_str());
  std::printf("%-58s %s  (%d of %d full)\n", "SIGTERM node 3, start: back in every ISR",
              secs(back_term).c_str(), after_term.full_isr, total);
  std::printf("%-58s %s  target < %.0f s: %s\n", "SIGKILL node 2: leaders moved off it",
              secs(moved).c_str(), session_s + 2, verdict(true, t_moved).c_str());
  std::printf("%-58s %s  (%d of %d full)  target < 15 s: %s\n",
              "SIGKILL node 2, start: back in every ISR", secs(back_kill).c_str(),
              after_kill.full_isr, total, verdict(true, t_back).c_str());
  return 0;
}

}  // namespace sluice::bench
