// Group benchmark (see README.md): consumer groups of librdkafka members,
// each polling on a thread of its own in this process. Rebalance phases per
// protocol (formation, one member joining, then leaving) while a producer
// writes a steady rate; then a group and a single consumer read a filled
// topic with synchronous commits. Each repeat first measures the raw limits
// (loopback TCP; a 4 KiB write + fdatasync, which every commit waits for).
// A tracker sees every assignment and every message: a phase has settled
// when the partitions are exactly covered by the expected members and every
// partition assigned since the phase began has delivered a new message.

#include "group_bench.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include <unistd.h>

#include "kafka_util.h"
#include "produce_phase.h"
#include "raw_limits.h"
#include "report.h"

namespace sluice::bench {
namespace {

constexpr size_t kRawChunk = 1 << 20;
constexpr int64_t kNsPerMs = 1'000'000;
constexpr int64_t kSettleDeadlineNs = 180'000'000'000;  // a phase that takes longer is an error

double ms_between(int64_t from_ns, int64_t to_ns) {
  return static_cast<double>(to_ns - from_ns) / static_cast<double>(kNsPerMs);
}

void sleep_ms(int ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

// Who owns each partition, when it was assigned and last consumed. Shared by
// the members of one rebalance phase; thread-safe.
class tracker {
 public:
  explicit tracker(int partitions)
      : owner_(partitions, -1),
        assigned_ns_(partitions, 0),
        first_after_ns_(partitions, 0),
        last_msg_ns_(partitions, 0),
        max_gap_ns_(partitions, 0),
        high_offset_(partitions, -1) {}

  void on_assign(int member, const rd_kafka_topic_partition_list_t* parts) {
    const int64_t t = now_ns();
    std::lock_guard g(mu_);
    for (int i = 0; i < parts->cnt; ++i) {
      const auto p = static_cast<size_t>(parts->elems[i].partition);
      if (p >= owner_.size()) continue;
      owner_[p] = member;
      assigned_ns_[p] = t;
      first_after_ns_[p] = 0;
    }
  }
  void on_revoke(int member, const rd_kafka_topic_partition_list_t* parts) {
    std::lock_guard g(mu_);
    for (int i = 0; i < parts->cnt; ++i) {
      const auto p = static_cast<size_t>(parts->elems[i].partition);
      if (p < owner_.size() && owner_[p] == member) owner_[p] = -1;
    }
  }
  // A message counts only when it is new: a new owner first re-reads what
  // the old one consumed after its last commit, and that is not progress.
  void on_message(int32_t partition, int64_t offset, int64_t t) {
    const auto p = static_cast<size_t>(partition);
    std::lock_guard g(mu_);
    if (p >= owner_.size() || offset <= high_offset_[p]) return;
    high_offset_[p] = offset;
    if (window_from_ns_ > 0 && last_msg_ns_[p] > 0 && t >= window_from_ns_)
      max_gap_ns_[p] = std::max(max_gap_ns_[p], t - last_msg_ns_[p]);
    last_msg_ns_[p] = t;
    if (first_after_ns_[p] == 0) first_after_ns_[p] = t;
  }

  // Gaps between messages are recorded from `t` on (pauses of this phase).
  void open_window(int64_t t) {
    std::lock_guard g(mu_);
    window_from_ns_ = t;
    std::fill(max_gap_ns_.begin(), max_gap_ns_.end(), 0);
  }

  struct settled_at {
    int64_t assigned_ns = 0;  // the last assignment since the phase began
    int64_t consumed_ns = 0;  // the last partition consumed again
    int moved = 0;            // partitions assigned since the phase began
  };
  // Set when every partition is owned by one of exactly `owners` members,
  // none of them `excluded`, and each partition assigned since `since_ns`
  // has delivered a message since.
  std::optional<settled_at> settled(int owners, int excluded, int64_t since_ns) {
    std::lock_guard g(mu_);
    settled_at s;
    s.assigned_ns = since_ns;
    s.consumed_ns = since_ns;
    std::vector<int> seen;
    for (size_t p = 0; p < owner_.size(); ++p) {
      if (owner_[p] < 0 || owner_[p] == excluded) return std::nullopt;
      seen.push_back(owner_[p]);
      if (assigned_ns_[p] >= since_ns) {
        if (first_after_ns_[p] == 0) return std::nullopt;
        ++s.moved;
        s.assigned_ns = std::max(s.assigned_ns, assigned_ns_[p]);
        s.consumed_ns = std::max(s.consumed_ns, first_after_ns_[p]);
      }
    }
    std::sort(seen.begin(), seen.end());
    if (std::unique(seen.begin(), seen.end()) - seen.begin() != owners) return std::nullopt;
    return s;
  }

  // The longest gap of each partition since open_window(), in ms.
  std::vector<double> gaps_ms() {
    std::lock_guard g(mu_);
    std::vector<double> v;
    for (int64_t ns : max_gap_ns_)
      v.push_back(static_cast<double>(ns) / static_cast<double>(kNsPerMs));
    return v;
  }

 private:
  std::mutex mu_;
  std::vector<int> owner_;
  std::vector<int64_t> assigned_ns_, first_after_ns_, last_msg_ns_, max_gap_ns_, high_offset_;
  int64_t window_from_ns_ = 0;
};

// What the members of one throughput run share.
struct throughput_state {
  uint64_t target = 0;                // messages to read
  std::atomic<bool> go{false};        // the group has formed: resume the partitions
  std::atomic<uint64_t> consumed{0};  // by all members
  std::atomic<int64_t> first_ns{0};
  std::atomic<int64_t> done_ns{0};  // when `consumed` reached `target`
  std::mutex mu;                    // guards assigned
  std::vector<int> assigned;        // partitions per member, from the callbacks
};

// One group member: a consumer created and subscribed by the constructor,
// polled by its own thread until stop() (which closes it: LeaveGroup).
class member {
 public:
  member(int index, const std::string& bootstrap, const std::string& group,
         const std::string& topic, const std::string& protocol, int session_timeout_ms, tracker* tr,
         throughput_state* tp, int commit_every)
      : index_(index), tr_(tr), tp_(tp), commit_every_(commit_every) {
    rd_kafka_conf_t* c = base_conf(bootstrap);
    set(c, "group.id", group);
    set(c, "client.id", "sluice-bench-member-" + std::to_string(index));
    set(c, "session.timeout.ms", std::to_string(session_timeout_ms));
    set(c, "heartbeat.interval.ms", std::to_string(std::max(100, session_timeout_ms / 10)));
    set(c, "auto.offset.reset", "earliest");
    set(c, "partition.assignment.strategy",
        protocol == "cooperative" ? "cooperative-sticky" : "range");
    if (tp_) {
      set(c, "enable.auto.commit", "false");
    } else {
      // Rebalance phases: a moved partition's new owner starts about where
      // the old one stopped, as a real consumer would.
      set(c, "enable.auto.commit", "true");
      set(c, "auto.commit.interval.ms", "1000");
    }
    rd_kafka_conf_set_rebalance_cb(c, &member::rebalance_cb);
    rd_kafka_conf_set_opaque(c, this);
    rk_ = make_client(RD_KAFKA_CONSUMER, c);
    rd_kafka_poll_set_consumer(rk_.get());
    parts_ptr sub(rd_kafka_topic_partition_list_new(1));
    rd_kafka_topic_partition_list_add(sub.get(), topic.c_str(), RD_KAFKA_PARTITION_UA);
    if (auto e = rd_kafka_subscribe(rk_.get(), sub.get()))
      throw bench_error{std::string("subscribe: ") + rd_kafka_err2str(e)};
    thread_ = std::thread([this] { run(); });
  }
  ~member() { stop(); }
  member(const member&) = delete;
  member& operator=(const member&) = delete;

  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  // Synchronous commit latencies in ms; read after stop().
  const std::vector<double>& commit_ms() const { return commit_ms_; }
  const std::string& error() const { return error_; }

 private:
  static void rebalance_cb(rd_kafka_t* rk, rd_kafka_resp_err_t err,
                           rd_kafka_topic_partition_list_t* parts, void* opaque) {
    auto* self = static_cast<member*>(opaque);
    const bool cooperative = std::strcmp(rd_kafka_rebalance_protocol(rk), "COOPERATIVE") == 0;
    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
      if (self->tr_) self->tr_->on_assign(self->index_, parts);
      if (cooperative) {
        if (rd_kafka_error_t* e = rd_kafka_incremental_assign(rk, parts)) rd_kafka_error_destroy(e);
      } else {
        rd_kafka_assign(rk, parts);
      }
      if (self->tp_) {
        // Held until the whole group is formed.
        if (!self->tp_->go.load()) rd_kafka_pause_partitions(rk, parts);
        std::lock_guard g(self->tp_->mu);
        self->tp_->assigned[static_cast<size_t>(self->index_)] += parts->cnt;
      }
      return;
    }
    if (self->tr_) self->tr_->on_revoke(self->index_, parts);
    if (self->tp_) {
      std::lock_guard g(self->tp_->mu);
      self->tp_->assigned[static_cast<size_t>(self->index_)] -= parts->cnt;
    }
    if (cooperative) {
      if (rd_kafka_error_t* e = rd_kafka_incremental_unassign(rk, parts)) rd_kafka_error_destroy(e);
    } else {
      rd_kafka_assign(rk, nullptr);
    }
  }

  void run() {
    bool resumed = false;
    uint64_t since_commit = 0;
    while (!stop_.load()) {
      if (tp_ && !resumed && tp_->go.load()) {
        rd_kafka_topic_partition_list_t* a = nullptr;
        if (rd_kafka_assignment(rk_.get(), &a) == RD_KAFKA_RESP_ERR_NO_ERROR && a) {
          rd_kafka_resume_partitions(rk_.get(), a);
          rd_kafka_topic_partition_list_destroy(a);
        }
        resumed = true;
      }
      rd_kafka_message_t* m = rd_kafka_consumer_poll(rk_.get(), 50);
      if (!m) continue;
      const int64_t t = now_ns();
      if (m->err) {
        if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF && error_.empty())
          error_ = rd_kafka_message_errstr(m);
        rd_kafka_message_destroy(m);
        continue;
      }
      const int32_t partition = m->partition;
      const int64_t offset = m->offset;
      rd_kafka_message_destroy(m);
      if (tr_) tr_->on_message(partition, offset, t);
      if (!tp_) continue;
      int64_t zero = 0;
      tp_->first_ns.compare_exchange_strong(zero, t);
      const uint64_t total = ++tp_->consumed;
      if (total == tp_->target) tp_->done_ns = t;
      if (++since_commit >= static_cast<uint64_t>(commit_every_)) {
        since_commit = 0;
        const int64_t c0 = now_ns();
        if (rd_kafka_commit(rk_.get(), nullptr, 0) == RD_KAFKA_RESP_ERR_NO_ERROR)
          commit_ms_.push_back(ms_between(c0, now_ns()));
      }
    }
    rd_kafka_consumer_close(rk_.get());
  }

  const int index_;
  tracker* const tr_;
  throughput_state* const tp_;
  const int commit_every_;
  client_ptr rk_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::vector<double> commit_ms_;
  std::string error_;
};

// A data source of `messages` (0: until stopped) of `o.message_bytes` to
// `topic`, round-robin over its partitions so each gets messages at an even
// pace, at `rate` msgs/s (0: unlimited).
produce_spec source(const group_options& o, const std::string& bootstrap, const std::string& topic,
                    double rate, uint64_t messages) {
  produce_spec s;
  s.bootstrap = bootstrap;
  s.topic = topic;
  s.acks = "1";
  s.rate = rate;
  s.seconds = 3600;
  s.max_messages = messages;
  s.message_bytes = o.message_bytes;
  s.round_robin_partitions = o.partitions;
  return s;
}

// ---- Rebalance phases -----------------------------------------------------------

struct phase_figures {
  double assigned_ms = 0;      // from the start of the phase to the last assignment
  double consumed_ms = 0;      // ... to every (re)assigned partition consumed again
  double pause_max_ms = 0;     // the longest gap of any partition
  double pause_median_ms = 0;  // the median over partitions of each one's longest gap
  double moved = 0;            // partitions (re)assigned
};

struct rebalance_result {
  phase_figures formation, join, leave;
};

tracker::settled_at wait_settled(tracker& tr, int owners, int excluded, int64_t since_ns,
                                 const char* what) {
  const int64_t deadline = now_ns() + kSettleDeadlineNs;
  for (;;) {
    if (auto s = tr.settled(owners, excluded, since_ns)) return *s;
    if (now_ns() > deadline)
      throw bench_error{std::string(what) + " did not settle within " +
                        std::to_string(kSettleDeadlineNs / 1'000'000'000) + " s"};
    sleep_ms(5);
  }
}

phase_figures figures(const tracker::settled_at& s, int64_t since_ns, std::vector<double> gaps) {
  phase_figures f;
  f.assigned_ms = ms_between(since_ns, s.assigned_ns);
  f.consumed_ms = ms_between(since_ns, s.consumed_ns);
  f.moved = s.moved;
  if (!gaps.empty()) {
    f.pause_max_ms = *std::max_element(gaps.begin(), gaps.end());
    f.pause_median_ms = median(gaps);
  }
  return f;
}

rebalance_result run_rebalance(const group_options& o, const std::string& bootstrap,
                               const std::string& protocol, int repeat) {
  const std::string name = "sluice-bench-group-" + std::to_string(::getpid()) + "-" + protocol +
                           "-" + std::to_string(repeat);
  create_topic(bootstrap, name, o.partitions);
  rebalance_result r;
  {
    tracker tr(o.partitions);
    background_produce producer(source(o, bootstrap, name, o.rate, 0));
    std::vector<std::unique_ptr<member>> members;
    auto add = [&] {
      const int i = static_cast<int>(members.size());
      members.push_back(std::make_unique<member>(i, bootstrap, name, name, protocol,
                                                 o.session_timeout_ms, &tr, nullptr, 0));
    };
    const int n = o.members;
    // Formation: every member subscribes at once.
    tr.open_window(now_ns());
    const int64_t t0 = now_ns();
    for (int i = 0; i < n; ++i) add();
    auto s = wait_settled(tr, std::min(n, o.partitions), -1, t0, "the group's formation");
    r.formation = figures(s, t0, tr.gaps_ms());
    sleep_ms(1000);  // steady consumption before the next change (not part of any figure)

    // One member joins.
    const int64_t tj = now_ns();
    tr.open_window(tj);
    add();
    s = wait_settled(tr, std::min(n + 1, o.partitions), -1, tj, "the rebalance after a join");
    r.join = figures(s, tj, tr.gaps_ms());
    sleep_ms(1000);

    // It leaves again (LeaveGroup from consumer_close); closing runs on its
    // own thread so the wait below starts at once.
    const int64_t tl = now_ns();
    tr.open_window(tl);
    std::thread closer([&] { members.back()->stop(); });
    auto settled = [&] {
      return wait_settled(tr, std::min(n, o.partitions), n, tl, "the rebalance after a leave");
    };
    std::optional<tracker::settled_at> sl;
    try {
      sl = settled();
    } catch (...) {
      closer.join();
      throw;
    }
    closer.join();
    r.leave = figures(*sl, tl, tr.gaps_ms());
    for (auto& m : members) m->stop();
    for (auto& m : members)
      if (!m->error().empty()) throw bench_error{"member: " + m->error()};
  }
  delete_topic(bootstrap, name);
  return r;
}

// ---- Throughput -------------------------------------------------------------------

struct throughput_result {
  double msgs_per_s = 0;
  double commit_p50 = 0, commit_p99 = 0;  // ms
  double broker_cpu_cores = -1;
};

throughput_result run_throughput(const group_options& o, const std::string& bootstrap, pid_t broker,
                                 const std::string& topic, int n_members,
                                 const std::string& group) {
  throughput_state tp;
  tp.target = o.messages;
  tp.assigned.assign(static_cast<size_t>(n_members), 0);
  std::vector<std::unique_ptr<member>> members;
  for (int i = 0; i < n_members; ++i)
    members.push_back(std::make_unique<member>(i, bootstrap, group, topic, "eager",
                                               o.session_timeout_ms, nullptr, &tp, o.commit_every));
  // Formed: all partitions assigned, every member holding some (when there
  // are enough partitions).
  const int64_t deadline = now_ns() + kSettleDeadlineNs;
  for (;;) {
    {
      std::lock_guard g(tp.mu);
      int total = 0, holders = 0;
      for (int a : tp.assigned) {
        total += a;
        holders += a > 0;
      }
      if (total == o.partitions && holders == std::min(n_members, o.partitions)) break;
    }
    if (now_ns() > deadline) throw bench_error{"the throughput group did not form"};
    sleep_ms(5);
  }
  const auto cpu0 = process_cpu_seconds(broker);
  tp.go = true;
  while (tp.done_ns.load() == 0) {
    if (now_ns() > deadline + kSettleDeadlineNs)
      throw bench_error{"the group read " + std::to_string(tp.consumed.load()) + " of " +
                        std::to_string(o.messages) + " messages"};
    sleep_ms(5);
  }
  const auto cpu1 = process_cpu_seconds(broker);
  throughput_result r;
  const int64_t first = tp.first_ns.load(), done = tp.done_ns.load();
  if (done > first)
    r.msgs_per_s = static_cast<double>(o.messages - 1) * 1e9 / static_cast<double>(done - first);
  r.broker_cpu_cores = cores_between(cpu0, cpu1, first, done);
  for (auto& m : members) m->stop();
  std::vector<double> commits;
  for (auto& m : members) {
    if (!m->error().empty()) throw bench_error{"member: " + m->error()};
    commits.insert(commits.end(), m->commit_ms().begin(), m->commit_ms().end());
  }
  std::sort(commits.begin(), commits.end());
  r.commit_p50 = percentile_sorted(commits, 50);
  r.commit_p99 = percentile_sorted(commits, 99);
  return r;
}

json phase_json(const phase_figures& f) {
  json j = json::object();
  j["all_assigned_ms"] = f.assigned_ms;
  j["all_consumed_ms"] = f.consumed_ms;
  j["pause_max_ms"] = f.pause_max_ms;
  j["pause_median_ms"] = f.pause_median_ms;
  j["partitions_moved"] = f.moved;
  return j;
}

}  // namespace

int run_group(const group_options& o) {
  broker_handle b;
  std::map<std::string, std::vector<rebalance_result>> rebalances;
  std::vector<throughput_result> group_runs, single_runs;
  struct raw_result {
    double tcp = 0, fsync_p50 = 0, fsync_p99 = 0;
  };
  std::vector<raw_result> raws;
  std::string initial_delay;
  const double load_before = load_average_1m();
  b = open_broker(o.broker);
  {
    initial_delay = broker_config_value(b.bootstrap, "group.initial.rebalance.delay.ms");
    const std::string tput_topic =
        "sluice-bench-group-" + std::to_string(::getpid()) + "-throughput";
    create_topic(b.bootstrap, tput_topic, o.partitions);
    if (!o.json)
      std::fprintf(stderr, "filling %s with %llu messages...\n", tput_topic.c_str(),
                   static_cast<unsigned long long>(o.messages));
    if (produce_phase(source(o, b.bootstrap, tput_topic, 0, o.messages)).acked < o.messages)
      throw bench_error{"filling " + tput_topic + " failed"};
    // Each commit waits for an fdatasync (shared with others at the moment).
    auto raw = [&] {
      raw_result r;
      r.tcp = or_throw(loopback_tcp(o.tcp_seconds, kRawChunk));
      std::string err;
      auto lat = raw_fsync_latencies_ms(b.data_dir, 500, 2.0, err);
      if (!err.empty()) throw bench_error{err};
      r.fsync_p50 = percentile_sorted(lat, 50);
      r.fsync_p99 = percentile_sorted(lat, 99);
      return r;
    };
    raw();  // warm-up, not counted
    int group_seq = 0;
    for (int i = 0; i < o.repeats; ++i) {
      raws.push_back(raw());
      if (!o.json) std::fprintf(stderr, "run %d of %d...\n", i + 1, o.repeats);
      for (const auto& protocol : o.protocols)
        rebalances[protocol].push_back(run_rebalance(o, b.bootstrap, protocol, i));
      const std::string g = "sluice-bench-group-" + std::to_string(::getpid()) + "-";
      single_runs.push_back(
          run_throughput(o, b.bootstrap, b.pid, tput_topic, 1, g + std::to_string(group_seq++)));
      group_runs.push_back(run_throughput(o, b.bootstrap, b.pid, tput_topic, o.throughput_members,
                                          g + std::to_string(group_seq++)));
    }
    delete_topic(b.bootstrap, tput_topic);
  }
  const bool started = b.process != nullptr;
  const pid_t pid = b.pid;
  b.process.reset();  // stops the broker we started
  const double load_after = load_average_1m();

  auto med_phase = [](const std::vector<rebalance_result>& runs,
                      phase_figures rebalance_result::*which) {
    std::vector<phase_figures> v;
    for (const auto& r : runs) v.push_back(r.*which);
    phase_figures out;
    for (auto f :
         {&phase_figures::assigned_ms, &phase_figures::consumed_ms, &phase_figures::pause_max_ms,
          &phase_figures::pause_median_ms, &phase_figures::moved})
      out.*f = median_of(v, f);
    return out;
  };
  auto med_tput = [](const std::vector<throughput_result>& runs) {
    return std::make_tuple(median_of(runs, &throughput_result::msgs_per_s),
                           median_of(runs, &throughput_result::broker_cpu_cores),
                           median_of(runs, &throughput_result::commit_p50),
                           median_of(runs, &throughput_result::commit_p99));
  };
  const auto [g_rate, g_cpu, g_p50, g_p99] = med_tput(group_runs);
  const auto [s_rate, s_cpu, s_p50, s_p99] = med_tput(single_runs);
  const double bytes = static_cast<double>(o.message_bytes);
  const double tcp_mb = median_of(raws, &raw_result::tcp) / kMB;
  const double fsync_p50 = median_of(raws, &raw_result::fsync_p50),
               fsync_p99 = median_of(raws, &raw_result::fsync_p99);

  if (o.json) {
    json j = json::object();
    j["mode"] = "group";
    j["bootstrap"] = started ? "started" : o.broker.bootstrap;
    j["members"] = o.members;
    j["partitions"] = o.partitions;
    j["rate_msgs_per_s"] = o.rate;
    j["message_bytes"] = static_cast<uint64_t>(o.message_bytes);
    j["session_timeout_ms"] = o.session_timeout_ms;
    j["repeats"] = o.repeats;
    j["initial_rebalance_delay_ms"] =
        initial_delay.empty() ? json() : json(std::strtod(initial_delay.c_str(), nullptr));
    j["load_average_1m_before"] = load_before;
    j["load_average_1m_after"] = load_after;
    json rb = json::object();
    for (const auto& [protocol, runs] : rebalances) {
      json p = json::object();
      p["formation"] = phase_json(med_phase(runs, &rebalance_result::formation));
      p["join"] = phase_json(med_phase(runs, &rebalance_result::join));
      p["leave"] = phase_json(med_phase(runs, &rebalance_result::leave));
      rb[protocol] = std::move(p);
    }
    j["rebalance"] = std::move(rb);
    json tp = json::object();
    tp["messages"] = o.messages;
    tp["commit_every"] = o.commit_every;
    tp["group_members"] = o.throughput_members;
    tp["group_msgs_per_s"] = g_rate;
    tp["group_mb_per_s"] = g_rate * bytes / kMB;
    tp["single_msgs_per_s"] = s_rate;
    tp["single_mb_per_s"] = s_rate * bytes / kMB;
    tp["group_vs_single"] = ratio(g_rate, s_rate);
    json cl = json::object();
    cl["p50"] = g_p50;
    cl["p99"] = g_p99;
    tp["commit_latency_ms"] = std::move(cl);
    json scl = json::object();
    scl["p50"] = s_p50;
    scl["p99"] = s_p99;
    tp["single_commit_latency_ms"] = std::move(scl);
    tp["broker_cpu_cores_group"] = pid > 0 ? json(g_cpu) : json();
    tp["broker_cpu_cores_single"] = pid > 0 ? json(s_cpu) : json();
    j["throughput"] = std::move(tp);
    json raw = json::object();
    raw["loopback_tcp_mb_per_s"] = tcp_mb;
    raw["fdatasync_4k_latency_p50_ms"] = fsync_p50;
    raw["fdatasync_4k_latency_p99_ms"] = fsync_p99;
    j["raw"] = std::move(raw);
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }

  std::printf(
      "sluice-bench group: %s, %d members (+1 joining and leaving) on %d partitions, %.0f msgs/s "
      "of %zu B "
      "produced meanwhile, session.timeout.ms %d\n",
      started ? "started broker" : o.broker.bootstrap.c_str(), o.members, o.partitions, o.rate,
      o.message_bytes, o.session_timeout_ms);
  std::printf("broker group.initial.rebalance.delay.ms: %s (formation includes it)\n",
              initial_delay.empty() ? "unknown" : initial_delay.c_str());
  std::printf(
      "medians of %d runs, each after the raw limits (one raw warm-up first); load average (1 min) "
      "%.2f "
      "before, %.2f after\n\n",
      o.repeats, load_before, load_after);
  std::printf("%-12s %-10s %14s %14s %14s %14s %8s\n", "protocol", "phase", "assigned ms",
              "consumed ms", "pause max ms", "pause med ms", "moved");
  for (const auto& [protocol, runs] : rebalances) {
    const std::pair<const char*, phase_figures rebalance_result::*> phases[] = {
        {"formation", &rebalance_result::formation},
        {"join", &rebalance_result::join},
        {"leave", &rebalance_result::leave}};
    for (const auto& [label, which] : phases) {
      const phase_figures f = med_phase(runs, which);
      std::printf("%-12s %-10s %14.1f %14.1f %14.1f %14.1f %8.0f\n", protocol.c_str(), label,
                  f.assigned_ms, f.consumed_ms, f.pause_max_ms, f.pause_median_ms, f.moved);
    }
  }
  std::printf(
      "  (assigned/consumed: from the phase's start to the last partition assigned / consumed "
      "again;\n"
      "   pause: longest gap between two new messages of a partition during the phase, max and "
      "median over partitions)\n\n");
  std::printf(
      "consume with commits every %d messages, %llu messages of %zu B from the beginning:\n",
      o.commit_every, static_cast<unsigned long long>(o.messages), o.message_bytes);
  std::printf("  group of %d  %10.0f msgs/s %8.1f MB/s   commit p50 %.2f ms  p99 %.2f ms\n",
              o.throughput_members, g_rate, g_rate * bytes / kMB, g_p50, g_p99);
  std::printf("  one member   %10.0f msgs/s %8.1f MB/s   commit p50 %.2f ms  p99 %.2f ms\n", s_rate,
              s_rate * bytes / kMB, s_p50, s_p99);
  std::printf("  ratio group / one %.2f\n", ratio(g_rate, s_rate));
  if (pid > 0)
    std::printf("  broker CPU %.2f cores with the group, %.2f with one member\n", g_cpu, s_cpu);
  std::printf(
      "raw: loopback TCP %.1f MB/s; 4 KiB write + fdatasync p50 %.2f ms, p99 %.2f ms (each commit "
      "waits for an fdatasync, shared with others)\n",
      tcp_mb, fsync_p50, fsync_p99);
  return 0;
}

}  // namespace sluice::bench
