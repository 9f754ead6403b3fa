// Maintenance benchmark: does retention and compaction slow producers down?
// One started broker; per run a measured topic (one producer, unlimited
// rate, acks=all: the figure) beside a retained and a compacted topic, both
// prefilled and fed a steady rate during the window. Right before the window
// an active run sets retention.bytes and cleanup.policy=compact on them, an
// idle run the same AlterConfigs without limits; only the settings differ.
// What maintenance did is observed (log start offsets, `.log` bytes), not
// assumed. Idle and active alternate which goes first; figures are medians.

#include "maintenance_bench.h"

#include <cstdio>
#include <filesystem>
#include <memory>

#include <librdkafka/rdkafka.h>
#include <unistd.h>

#include "kafka_util.h"
#include "produce_phase.h"
#include "report.h"

namespace sluice::bench {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kSegmentBytes = 1 << 20;
constexpr int kMaintenancePartitions = 4;  // of each maintenance topic
constexpr int kChurnKeys = 1000;           // distinct keys of the compacted topic
constexpr size_t kMessageBytes = 1024;
constexpr int64_t kRetainedBytesPerPartition = 4 << 20;

config_list retained_configs(bool active) {
  return {{"cleanup.policy", "delete"},
          {"segment.bytes", std::to_string(kSegmentBytes)},
          {"file.delete.delay.ms", "1000"},
          {"retention.ms", "-1"},
          {"retention.bytes", active ? std::to_string(kRetainedBytesPerPartition) : "-1"}};
}

config_list compacted_configs(bool active) {
  config_list c = {{"segment.bytes", std::to_string(kSegmentBytes)},
                   {"file.delete.delay.ms", "1000"}};
  if (active) {
    c.emplace_back("cleanup.policy", "compact");
    c.emplace_back("min.cleanable.dirty.ratio", "0.01");
    c.emplace_back("min.compaction.lag.ms", "0");
  } else {
    c.emplace_back("cleanup.policy", "delete");
    c.emplace_back("retention.ms", "-1");
    c.emplace_back("retention.bytes", "-1");
  }
  return c;
}

// What maintenance leaves visible in a topic.
struct topic_state {
  uint64_t log_bytes = 0;     // `.log` files in the partition directories
  int64_t start_offsets = 0;  // sum over partitions of the log start offset
};

topic_state observe(rd_kafka_t* rk, const std::string& data_dir, const std::string& topic,
                    int partitions) {
  topic_state s;
  for (int p = 0; p < partitions; ++p) {
    int64_t lo = 0, hi = 0;
    if (auto e = rd_kafka_query_watermark_offsets(rk, topic.c_str(), p, &lo, &hi, 10'000))
      throw bench_error{"ListOffsets " + topic + ": " + rd_kafka_err2str(e)};
    s.start_offsets += lo;
    std::error_code ec;
    for (const auto& f :
         fs::directory_iterator(data_dir + "/logs/" + topic + "-" + std::to_string(p), ec))
      if (f.path().extension() == ".log") s.log_bytes += f.file_size(ec);
  }
  return s;
}

struct run_result {
  bool active = false;
  double produce_msgs = 0, produce_mb = 0, pub_p99 = 0, broker_cores = -1;
  uint64_t failed = 0;
  std::string first_error;
  double churn_mb = 0;  // written to the two maintenance topics in the window
  int64_t retention_removed_msgs = 0;
  double compacted_before_mib = 0, compacted_after_mib = 0;
  double retained_before_mib = 0, retained_after_mib = 0;
  // Retention moved a log start and the compacted topic shrank (active), or
  // neither happened (idle).
  bool as_expected = false;
};

// A producer of `kMessageBytes` messages to `topic`, `keys` distinct keys
// (0: none), at `rate` msgs/s (0: unlimited) for `seconds`.
produce_spec spec_for(const std::string& bootstrap, const std::string& topic, int keys, double rate,
                      double seconds) {
  produce_spec s;
  s.bootstrap = bootstrap;
  s.topic = topic;
  s.key_count = keys;
  s.rate = rate;
  s.seconds = seconds;
  s.message_bytes = kMessageBytes;
  return s;
}

run_result run_once(const maintenance_options& o, const broker_process& broker, bool active,
                    const std::string& tag) {
  const std::string boot = broker.bootstrap();
  const std::string measured = tag + "-measured", retained = tag + "-retained",
                    compacted = tag + "-compacted";
  const int mp = kMaintenancePartitions;
  create_topic(boot, retained, mp, retained_configs(false));
  create_topic(boot, compacted, mp, compacted_configs(false));
  create_topic(boot, measured, o.partitions);

  const uint64_t prefill = (static_cast<uint64_t>(o.prefill_mib) << 20) / kMessageBytes;
  produce_spec fill = spec_for(boot, retained, 0, 0, 600);
  fill.max_messages = prefill;
  const auto f1 = produce_phase(fill);
  fill = spec_for(boot, compacted, kChurnKeys, 0, 600);
  fill.max_messages = prefill;
  const auto f2 = produce_phase(fill);
  if (f1.failed || f2.failed || f1.acked < prefill || f2.acked < prefill)
    throw bench_error{"prefill incomplete: " +
                      (f1.first_error.empty() ? f2.first_error : f1.first_error)};

  client_ptr admin = make_client(RD_KAFKA_PRODUCER, base_conf(boot));
  const topic_state r0 = observe(admin.get(), broker.data_dir(), retained, mp);
  const topic_state c0 = observe(admin.get(), broker.data_dir(), compacted, mp);
  alter_topic_configs(boot, retained, retained_configs(active));
  alter_topic_configs(boot, compacted, compacted_configs(active));

  // The maintenance topics' own traffic, the same in both runs.
  background_produce churn_retained(spec_for(boot, retained, 0, o.churn_rate, o.seconds));
  background_produce churn_compacted(
      spec_for(boot, compacted, kChurnKeys, o.churn_rate, o.seconds));
  produce_spec m = spec_for(boot, measured, 0, 0, o.seconds);
  m.broker_pid = broker.pid();
  const produce_stats ps = produce_phase(m);
  const produce_stats churn[2] = {churn_retained.finish(), churn_compacted.finish()};

  const topic_state r1 = observe(admin.get(), broker.data_dir(), retained, mp);
  const topic_state c1 = observe(admin.get(), broker.data_dir(), compacted, mp);
  admin.reset();
  for (const auto& t : {measured, retained, compacted}) delete_topic(boot, t);

  run_result r;
  r.active = active;
  r.produce_msgs = ps.msgs_per_s;
  r.produce_mb = ps.bytes_per_s / kMB;
  r.pub_p99 = percentile_sorted(ps.publish_ms, 99);
  r.broker_cores = ps.broker_cores;
  r.failed = ps.failed + churn[0].failed + churn[1].failed;
  for (const auto* e : {&ps.first_error, &churn[0].first_error, &churn[1].first_error})
    if (r.first_error.empty()) r.first_error = *e;
  r.churn_mb = static_cast<double>((churn[0].acked + churn[1].acked) * kMessageBytes) / kMB;
  r.retention_removed_msgs = r1.start_offsets - r0.start_offsets;
  r.retained_before_mib = static_cast<double>(r0.log_bytes) / kMiB;
  r.retained_after_mib = static_cast<double>(r1.log_bytes) / kMiB;
  r.compacted_before_mib = static_cast<double>(c0.log_bytes) / kMiB;
  r.compacted_after_mib = static_cast<double>(c1.log_bytes) / kMiB;
  const bool retention_ran = r.retention_removed_msgs > 0 && r1.log_bytes < r0.log_bytes;
  const bool cleaner_ran = c1.log_bytes < c0.log_bytes;
  r.as_expected = active ? retention_ran && cleaner_ran
                         : r.retention_removed_msgs == 0 && c1.log_bytes >= c0.log_bytes;
  return r;
}

bool has_key(const std::vector<std::string>& args, const std::string& key) {
  for (const auto& a : args)
    if (a.rfind(key + "=", 0) == 0) return true;
  return false;
}

}  // namespace

int run_maintenance(const maintenance_options& o) {
  std::vector<run_result> runs;
  const double load_before = load_average_1m();
  {
    // Retention checks and cleaner passes often enough to act within a
    // window of seconds (Kafka's defaults are 5 minutes and 15 seconds).
    std::vector<std::string> args = o.broker.broker_args;
    if (!has_key(args, "log.retention.check.interval.ms"))
      args.push_back("log.retention.check.interval.ms=500");
    if (!has_key(args, "log.cleaner.backoff.ms")) args.push_back("log.cleaner.backoff.ms=200");
    broker_process broker(o.broker.sluice_path, o.broker.dir, args);
    for (int i = 0; i < o.repeats; ++i) {
      for (int k = 0; k < 2; ++k) {
        const bool active = (i % 2 == 0) == (k == 1);  // idle first on even repeats
        if (!o.json)
          std::fprintf(stderr, "pair %d of %d, %s run...\n", i + 1, o.repeats,
                       active ? "active" : "idle");
        const std::string tag = "sluice-maint-" + std::to_string(::getpid()) + "-" +
                                std::to_string(i) + (active ? "a" : "i");
        runs.push_back(run_once(o, broker, active, tag));
      }
    }
  }
  const double load_after = load_average_1m();

  auto med = [&](bool active, double run_result::*f) {
    std::vector<double> v;
    for (const auto& r : runs)
      if (r.active == active) v.push_back(r.*f);
    return median(v);
  };
  const double idle_mb = med(false, &run_result::produce_mb),
               active_mb = med(true, &run_result::produce_mb);
  const double active_vs_idle = ratio(active_mb, idle_mb);
  bool observed = true;
  uint64_t failed = 0;
  std::string first_error;
  for (const auto& r : runs) {
    observed = observed && r.as_expected;
    failed += r.failed;
    if (first_error.empty()) first_error = r.first_error;
  }

  if (o.json) {
    json j = json::object();
    j["mode"] = "maintenance";
    j["partitions"] = o.partitions;
    j["seconds"] = o.seconds;
    j["repeats"] = o.repeats;
    j["message_bytes"] = static_cast<uint64_t>(kMessageBytes);
    j["prefill_mib"] = o.prefill_mib;
    j["maintenance_partitions"] = kMaintenancePartitions;
    j["churn_msgs_per_s"] = o.churn_rate;
    j["load_average_1m_before"] = load_before;
    j["load_average_1m_after"] = load_after;
    json rs = json::array();
    for (const auto& r : runs) {
      json x = json::object();
      x["active"] = r.active;
      x["produce_msgs_per_s"] = r.produce_msgs;
      x["produce_mb_per_s"] = r.produce_mb;
      x["publish_p99_ms"] = r.pub_p99;
      x["broker_cpu_cores"] = r.broker_cores;
      x["maintenance_topics_written_mb"] = r.churn_mb;
      x["retention_removed_messages"] = r.retention_removed_msgs;
      x["retained_log_mib_before"] = r.retained_before_mib;
      x["retained_log_mib_after"] = r.retained_after_mib;
      x["compacted_log_mib_before"] = r.compacted_before_mib;
      x["compacted_log_mib_after"] = r.compacted_after_mib;
      x["maintenance_as_expected"] = r.as_expected;
      rs.push(std::move(x));
    }
    j["runs"] = std::move(rs);
    j["idle_produce_mb_per_s"] = idle_mb;
    j["active_produce_mb_per_s"] = active_mb;
    j["idle_publish_p99_ms"] = med(false, &run_result::pub_p99);
    j["active_publish_p99_ms"] = med(true, &run_result::pub_p99);
    j["produce_failed_messages"] = failed;
    j["ratio"] = active_vs_idle;
    j["maintenance_observed"] = observed;
    json tg = json::object();
    tg["active_vs_idle_min_0_8"] = active_vs_idle >= 0.8;
    j["targets_met"] = std::move(tg);
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }

  std::printf(
      "sluice-bench maintenance: started broker, measured topic of %d partitions, %zu B messages, "
      "acks=all, unlimited rate, %.0f s windows\n",
      o.partitions, kMessageBytes, o.seconds);
  std::printf(
      "maintenance topics: %d partitions each of 1 MiB segments, %d MiB prefilled, %.0f msgs/s "
      "each "
      "during the window; active: retention.bytes 4 MiB per partition, compaction over %d keys\n",
      kMaintenancePartitions, o.prefill_mib, o.churn_rate, kChurnKeys);
  std::printf("%d idle/active pairs; load average (1 min) %.2f before, %.2f after\n\n", o.repeats,
              load_before, load_after);
  std::printf(
      "  run  mode     produce MB/s  broker cores  retention removed  retained MiB  "
      "compacted MiB\n");
  int n = 0;
  for (const auto& r : runs) {
    std::printf("  %3d  %-7s %12s %13s %12lld msgs %6s -> %-6s %6s -> %-6s%s\n", n++ / 2 + 1,
                r.active ? "active" : "idle", fixed(r.produce_mb, 1).c_str(),
                fixed(r.broker_cores, 2).c_str(), static_cast<long long>(r.retention_removed_msgs),
                fixed(r.retained_before_mib, 0).c_str(), fixed(r.retained_after_mib, 0).c_str(),
                fixed(r.compacted_before_mib, 0).c_str(), fixed(r.compacted_after_mib, 0).c_str(),
                r.as_expected ? "" : "  (maintenance NOT as expected)");
  }
  std::printf(
      "\nproduce while maintaining %8s MB/s   idle %8s MB/s   ratio %.2f  target >= 0.80 %s\n",
      fixed(active_mb, 1).c_str(), fixed(idle_mb, 1).c_str(), active_vs_idle,
      !observed               ? "(not meaningful: maintenance not observed)"
      : active_vs_idle >= 0.8 ? "met"
                              : "MISSED");
  if (failed)
    std::printf("produce failures: %llu (first: %s)\n", static_cast<unsigned long long>(failed),
                first_error.c_str());
  return 0;
}

}  // namespace sluice::bench
