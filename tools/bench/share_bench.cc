// Share-group benchmark (see share_bench.h and README.md). The consumers are
// processes of the librdkafka 2.15.1 test programs; this process reads their
// stdout (JSON lines, `--compact`: no keys or values, flushed in bunches) and
// counts each (partition, offset) once, whoever printed it and however
// often: a classic member re-reads what it had not committed when its
// partitions move, a share consumer what was released to it again.

#include "share_bench.h"

#include <algorithm>
#include <charconv>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <thread>
#include <vector>

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/limits.h"
#include "child_process.h"
#include "kafka_util.h"
#include "produce_phase.h"
#include "raw_limits.h"
#include "report.h"

namespace sluice::bench {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kNsPerMs = 1'000'000;
// A held record's lock runs out after lock_ms; its redelivery is waited for
// this much longer before the run is an error.
constexpr int64_t kRedeliveryGraceMs = 60'000;
// How long the holder may take to print its first record, and a consumer to
// close after SIGTERM before it gets SIGKILL.
constexpr double kHolderStartSeconds = 60;
constexpr double kCloseSeconds = 15;
// The holder's wait before it would acknowledge its first record: longer
// than any lock, so it never does.
constexpr int kHoldMs = 3'600'000;

std::string beside_self(const std::string& name) {
  std::error_code ec;
  return (fs::read_symlink("/proc/self/exe", ec).parent_path() / name).string();
}

// The integer after `key` (a member's name and colon, as in
// `"offset":`) in a line the consumer programs print; nullopt when absent.
std::optional<int64_t> int_field(std::string_view line, std::string_view key) {
  const size_t at = line.find(key);
  if (at == std::string_view::npos) return std::nullopt;
  const char* from = line.data() + at + key.size();
  int64_t v = 0;
  if (std::from_chars(from, line.data() + line.size(), v).ec != std::errc{}) return std::nullopt;
  return v;
}

// Which (partition, offset) pairs of a topic of `partitions` partitions and
// at most `records` records per partition have been seen.
class seen_records {
 public:
  seen_records(int partitions, uint64_t records)
      : parts_(static_cast<size_t>(partitions)), limit_(records) {}
  // True when the pair is new; pairs outside the topic are never counted.
  bool add(int64_t partition, int64_t offset) {
    if (partition < 0 || static_cast<size_t>(partition) >= parts_.size() || offset < 0 ||
        static_cast<uint64_t>(offset) >= limit_)
      return false;
    auto& bits = parts_[static_cast<size_t>(partition)];
    const auto i = static_cast<size_t>(offset);
    if (bits.size() <= i) bits.resize(i + 1, false);
    if (bits[i]) return false;
    bits[i] = true;
    ++distinct_;
    return true;
  }
  uint64_t distinct() const { return distinct_; }

 private:
  std::vector<std::vector<bool>> parts_;
  uint64_t limit_;
  uint64_t distinct_ = 0;
};

// One consumer process and the read end of its stdout.
class consumer {
 public:
  consumer(std::vector<std::string> argv, std::string log)
      : proc_(std::move(argv), std::move(log)) {}
  ~consumer() {
    proc_.stop(SIGKILL);
    close_pipe();
  }
  consumer(const consumer&) = delete;
  consumer& operator=(const consumer&) = delete;

  void start() { fd_ = proc_.start_piped(); }
  int fd() const { return fd_; }
  pid_t pid() const { return proc_.pid(); }
  bool open() const { return fd_ >= 0; }

  // Reads what the pipe holds and passes each complete line to `on_line`;
  // closes the pipe at its end (the process exited or closed stdout).
  void read(const std::function<void(std::string_view)>& on_line) {
    char buf[1 << 16];
    for (;;) {
      const ssize_t n = ::read(fd_, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      if (n <= 0) {
        close_pipe();
        return;
      }
      partial_.append(buf, static_cast<size_t>(n));
      size_t from = 0;
      for (size_t nl; (nl = partial_.find('\n', from)) != std::string::npos; from = nl + 1) {
        const std::string_view line(partial_.data() + from, nl - from);
        if (line.starts_with("{\"error\"") && first_error_.empty()) first_error_ = line;
        on_line(line);
      }
      partial_.erase(0, from);
    }
  }

  // SIGTERM (the program closes its consumer), or SIGKILL at once with
  // `kill`; then reaps it, SIGKILL after kCloseSeconds.
  void signal(bool kill) const {
    if (proc_.pid() > 0) ::kill(proc_.pid(), kill ? SIGKILL : SIGTERM);
  }
  void reap() { proc_.stop(SIGTERM, kCloseSeconds); }

  // What the run's error message says about this consumer.
  std::string describe() const {
    std::string s = proc_.log_path();
    const int st = proc_.wait_status();
    if (st >= 0 && WIFEXITED(st)) s += ", exit status " + std::to_string(WEXITSTATUS(st));
    if (st >= 0 && WIFSIGNALED(st)) s += ", killed by signal " + std::to_string(WTERMSIG(st));
    if (!first_error_.empty()) s += ", first error: " + first_error_;
    return s + "; its log ends:\n" + proc_.log_tail(800);
  }

 private:
  void close_pipe() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  child_process proc_;
  int fd_ = -1;
  std::string partial_;
  std::string first_error_;
};

using consumers = std::vector<std::unique_ptr<consumer>>;

// Reads the consumers' lines, each to on_line(consumer index, line, when it
// was read), until done() or `deadline_ns`; throws when the deadline passes
// or a consumer's output ends first.
void read_until(consumers& cs,
                const std::function<void(size_t, std::string_view, int64_t)>& on_line,
                const std::function<bool()>& done, int64_t deadline_ns, const std::string& what) {
  std::vector<pollfd> fds(cs.size());
  while (!done()) {
    for (size_t i = 0; i < cs.size(); ++i) {
      if (!cs[i]->open())
        throw bench_error{what + ": consumer " + std::to_string(i) +
                          " stopped first: " + cs[i]->describe()};
      fds[i] = pollfd{cs[i]->fd(), POLLIN, 0};
    }
    if (now_ns() > deadline_ns) throw bench_error{what + ": not done in time"};
    if (::poll(fds.data(), fds.size(), 50) < 0 && errno != EINTR)
      throw bench_error{os_error("poll")};
    for (size_t i = 0; i < cs.size() && !done(); ++i) {
      if (fds[i].revents == 0) continue;
      const int64_t t = now_ns();
      cs[i]->read([&](std::string_view line) { on_line(i, line, t); });
    }
  }
}

// Stops the consumers (SIGTERM, or SIGKILL with `kill`) while draining their
// output, so none blocks on a full pipe while it closes.
void stop_all(consumers& cs, bool kill) {
  for (auto& c : cs) c->signal(kill);
  const int64_t deadline = now_ns() + static_cast<int64_t>(kCloseSeconds * 1e9);
  std::vector<pollfd> fds;
  for (;;) {
    fds.clear();
    for (auto& c : cs)
      if (c->open()) fds.push_back(pollfd{c->fd(), POLLIN, 0});
    if (fds.empty() || now_ns() > deadline) break;
    ::poll(fds.data(), fds.size(), 50);
    for (auto& c : cs)
      if (c->open()) c->read([](std::string_view) {});
  }
  for (auto& c : cs) c->reap();
}

// `sluice config alter --group`: the group's configs (GROUP config
// resources), before its first member joins.
void alter_group_configs(const std::string& sluice, const std::string& bootstrap,
                         const std::string& group, const std::vector<std::string>& kvs,
                         const std::string& log) {
  std::vector<std::string> argv = {sluice, "config", "alter", "--bootstrap", bootstrap, "--group",
                                   group};
  for (const auto& kv : kvs) {
    argv.push_back("-c");
    argv.push_back(kv);
  }
  child_process p(argv, log);
  p.start();
  const int64_t deadline = now_ns() + 60'000'000'000;
  while (p.running()) {
    if (now_ns() > deadline) throw bench_error{"sluice config alter did not finish; see " + log};
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const int st = p.wait_status();
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
    throw bench_error{"sluice config alter --group " + group + " failed: " + p.log_tail()};
}

// Where a run's programs are and what they write their logs into.
struct setup {
  const share_options& o;
  std::string bootstrap;
  pid_t broker_pid = 0;
  std::string share_bin, group_bin, sluice_bin;
  std::string log_dir;
  std::string log(const std::string& name) const { return log_dir + "/" + name + ".log"; }
};

void fill(const setup& s, const std::string& topic, int partitions, uint64_t records) {
  create_topic(s.bootstrap, topic, partitions);
  produce_spec p;
  p.bootstrap = s.bootstrap;
  p.topic = topic;
  p.acks = "1";
  p.seconds = 3600;
  p.max_messages = records;
  p.message_bytes = s.o.record_bytes;
  p.round_robin_partitions = partitions;
  if (produce_phase(p).acked < records) throw bench_error{"filling " + topic + " failed"};
}

// ---- Reading the whole topic --------------------------------------------------

struct read_result {
  double msgs_per_s = 0;             // from the first process start to the last new record
  double msgs_per_s_after_first = 0;  // from the first record to the last new one
  double first_record_ms = 0;        // from the first process start
  uint64_t deliveries = 0;           // record lines, re-reads and redeliveries included
  uint64_t ack_errors = 0;           // share: acknowledgement outcomes other than success
  // The broker's, the consumer processes' and this process's (reading
  // their output) CPU over the read, in cores.
  double broker_cpu_cores = -1, consumers_cpu_cores = -1, reader_cpu_cores = -1;
};

// `o.consumers` processes in group `group` read `topic` until every one of
// its `o.records` records has been printed.
read_result read_all(const setup& s, const std::string& topic, const std::string& group,
                     bool share) {
  const share_options& o = s.o;
  consumers cs;
  for (int i = 0; i < o.consumers; ++i) {
    std::vector<std::string> argv = {share ? s.share_bin : s.group_bin,
                                     "--bootstrap", s.bootstrap, "--group", group, "--topic", topic,
                                     "--compact"};
    if (share) {
      // Each record acknowledged on its own (ACCEPT), sent with the next poll.
      for (const char* a : {"--mode", "explicit", "--ack", "accept"}) argv.emplace_back(a);
    } else {
      for (const char* a : {"--group-protocol", "classic"}) argv.emplace_back(a);
    }
    for (const auto& kv : share ? o.share_config : o.classic_config) {
      argv.emplace_back("--config");
      argv.push_back(kv);
    }
    cs.push_back(std::make_unique<consumer>(std::move(argv), s.log(group + "-" + std::to_string(i))));
  }
  seen_records seen(o.partitions, o.records);
  read_result r;
  int64_t first_ns = 0, last_ns = 0;
  const auto cpu0 = process_cpu_seconds(s.broker_pid);
  const auto reader0 = process_cpu_seconds(::getpid());
  const int64_t t0 = now_ns();
  for (auto& c : cs) c->start();
  auto on_line = [&](size_t, std::string_view line, int64_t t) {
    if (line.starts_with("{\"commit\"")) {
      r.ack_errors += int_field(line, R"("code":)").value_or(0) != 0;
      return;
    }
    if (!line.starts_with("{\"topic\"")) return;
    ++r.deliveries;
    const auto p = int_field(line, R"("partition":)"), off = int_field(line, R"("offset":)");
    if (!p || !off || !seen.add(*p, *off)) return;
    if (first_ns == 0) first_ns = t;
    last_ns = t;
  };
  read_until(cs, on_line, [&] { return seen.distinct() >= o.records; },
             t0 + static_cast<int64_t>(o.timeout_seconds * 1e9),
             std::string(share ? "share" : "classic") + " group " + group + " read " +
                 "its topic");
  const auto cpu1 = process_cpu_seconds(s.broker_pid);
  const auto reader1 = process_cpu_seconds(::getpid());
  double consumer_cpu = 0;
  bool consumer_cpu_known = true;
  for (auto& c : cs) {
    auto v = process_cpu_seconds(c->pid());
    consumer_cpu += v.value_or(0);
    consumer_cpu_known = consumer_cpu_known && v.has_value();
  }
  stop_all(cs, false);
  const double secs = static_cast<double>(last_ns - t0) / 1e9;
  r.msgs_per_s = secs > 0 ? static_cast<double>(o.records) / secs : 0;
  const double after_first = static_cast<double>(last_ns - first_ns) / 1e9;
  r.msgs_per_s_after_first = after_first > 0 ? static_cast<double>(o.records - 1) / after_first : 0;
  r.first_record_ms = static_cast<double>(first_ns - t0) / kNsPerMs;
  r.broker_cpu_cores = cores_between(cpu0, cpu1, t0, last_ns);
  r.reader_cpu_cores = cores_between(reader0, reader1, t0, last_ns);
  if (consumer_cpu_known && secs > 0) r.consumers_cpu_cores = consumer_cpu / secs;
  return r;
}

// ---- Redelivery after a lock expiry ----------------------------------------------

struct held_result {
  uint64_t redelivered = 0;       // of o.held_records
  std::vector<double> delay_ms;  // per redelivered record: its redelivery after the lock ran out
};

// A holder acquires the held topic's records and keeps them unacknowledged;
// once it has printed the first, a second consumer reads the topic until it
// has every record. A record it gets with a delivery count above 1 was the
// holder's: its delay is from the holder printing its first record (all were
// acquired in that one ShareFetch) to this consumer printing it, less the
// lock duration.
held_result hold_and_redeliver(const setup& s, const std::string& topic, const std::string& group,
                               int64_t lock_ms) {
  const share_options& o = s.o;
  const std::vector<std::string> base = {s.share_bin, "--bootstrap", s.bootstrap, "--group", group,
                                         "--topic", topic};
  consumers holder;
  auto argv = base;
  for (const char* a : {"--mode", "explicit", "--process-ms"}) argv.emplace_back(a);
  argv.push_back(std::to_string(kHoldMs));
  holder.push_back(std::make_unique<consumer>(argv, s.log(group + "-holder")));
  consumers second;
  argv = base;
  argv.emplace_back("--compact");
  second.push_back(std::make_unique<consumer>(argv, s.log(group + "-second")));

  int64_t held_ns = 0;
  holder[0]->start();
  read_until(
      holder,
      [&](size_t, std::string_view line, int64_t t) {
        if (line.starts_with("{\"topic\"") && held_ns == 0) held_ns = t;
      },
      [&] { return held_ns != 0; }, now_ns() + static_cast<int64_t>(kHolderStartSeconds * 1e9),
      "the holder of " + topic + " got a record");

  held_result r;
  seen_records seen(1, static_cast<uint64_t>(o.held_records));
  second[0]->start();
  read_until(
      second,
      [&](size_t, std::string_view line, int64_t t) {
        if (!line.starts_with("{\"topic\"")) return;
        const auto off = int_field(line, R"("offset":)");
        const auto count = int_field(line, R"("delivery_count":)");
        if (!off || !seen.add(0, *off) || count.value_or(1) < 2) return;
        ++r.redelivered;
        r.delay_ms.push_back(static_cast<double>(t - held_ns) / kNsPerMs -
                             static_cast<double>(lock_ms));
      },
      [&] { return seen.distinct() >= static_cast<uint64_t>(o.held_records); },
      held_ns + (lock_ms + kRedeliveryGraceMs) * kNsPerMs,
      "a second consumer read the held records of " + topic);
  stop_all(second, false);
  stop_all(holder, true);
  return r;
}

// ---- The report ----------------------------------------------------------------------

// Medians over runs of each figure of read_result, but ack_errors: the sum.
struct read_medians {
  double msgs_per_s, after_first, first_ms, deliveries, ack_errors, broker_cores, consumer_cores,
      reader_cores;
};

read_medians medians(const std::vector<read_result>& runs) {
  return {median_of(runs, &read_result::msgs_per_s),
          median_of(runs, &read_result::msgs_per_s_after_first),
          median_of(runs, &read_result::first_record_ms),
          [&] {
            std::vector<double> v;
            for (const auto& r : runs) v.push_back(static_cast<double>(r.deliveries));
            return median(v);
          }(),
          [&] {
            double n = 0;
            for (const auto& r : runs) n += static_cast<double>(r.ack_errors);
            return n;
          }(),
          median_of(runs, &read_result::broker_cpu_cores),
          median_of(runs, &read_result::consumers_cpu_cores),
          median_of(runs, &read_result::reader_cpu_cores)};
}

json read_json(const read_medians& m, const std::vector<read_result>& runs, double record_bytes) {
  json j = json::object();
  j["msgs_per_s"] = m.msgs_per_s;
  j["mb_per_s"] = m.msgs_per_s * record_bytes / kMB;
  j["msgs_per_s_after_first_record"] = m.after_first;
  j["first_record_ms"] = m.first_ms;
  j["deliveries"] = m.deliveries;
  j["broker_cpu_cores"] = cores_json(m.broker_cores);
  j["consumers_cpu_cores"] = cores_json(m.consumer_cores);
  j["reader_cpu_cores"] = cores_json(m.reader_cores);
  // Each run's own rates: the medians above are taken figure by figure.
  json each = json::array();
  for (const auto& r : runs) {
    json x = json::object();
    x["msgs_per_s"] = r.msgs_per_s;
    x["msgs_per_s_after_first_record"] = r.msgs_per_s_after_first;
    x["first_record_ms"] = r.first_record_ms;
    each.push(std::move(x));
  }
  j["runs"] = std::move(each);
  return j;
}

// "a, b, c" of one figure over the runs, in run order.
std::string each_run(const std::vector<read_result>& runs, double read_result::*field) {
  std::string out;
  for (const auto& r : runs) out += (out.empty() ? "" : ", ") + fixed(r.*field, 0);
  return out;
}

void print_read(const char* label, const read_medians& m, double record_bytes) {
  std::printf("  %-26s %10.0f msgs/s %8.1f MB/s %14.0f msgs/s %9.0f ms %11.0f\n", label,
              m.msgs_per_s, m.msgs_per_s * record_bytes / kMB, m.after_first, m.first_ms,
              m.deliveries);
}

void print_cpu(const char* label, const read_medians& m) {
  std::printf("  %-26s broker %s, consumers %s, this process reading them %s\n", label,
              cores_text(m.broker_cores).c_str(), cores_text(m.consumer_cores).c_str(),
              cores_text(m.reader_cores).c_str());
}

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& x : v) out += (out.empty() ? "" : " ") + x;
  return out.empty() ? "none" : out;
}

}  // namespace

int run_share(const share_options& o) {
  const double load_before = load_average_1m();
  broker_target target = o.broker;
  // A started broker's classic groups form at once: by default the first
  // member would wait out group.initial.rebalance.delay.ms (3 s) for others,
  // a pause a share group has no counterpart of. A --broker-arg still wins.
  const std::string delay_key = "group.initial.rebalance.delay.ms=";
  if (target.start && std::none_of(target.broker_args.begin(), target.broker_args.end(),
                                   [&](const std::string& a) { return a.starts_with(delay_key); }))
    target.broker_args.push_back(delay_key + "0");
  broker_handle b = open_broker(target);
  const std::string base = "sluice-bench-share-" + std::to_string(::getpid());
  setup s{o, b.bootstrap, b.pid};
  s.share_bin = o.share_consumer_path.empty() ? beside_self("share_consumer") : o.share_consumer_path;
  s.group_bin = o.group_consumer_path.empty() ? beside_self("group_consumer") : o.group_consumer_path;
  s.sluice_bin = o.broker.sluice_path.empty() ? beside_self("sluice") : o.broker.sluice_path;
  for (const auto& bin : {s.share_bin, s.group_bin, s.sluice_bin})
    if (::access(bin.c_str(), X_OK) != 0)
      throw bench_error{bin + " is not an executable (build the sluice, share_consumer and "
                              "group_consumer targets, or name them)"};
  s.log_dir = o.broker.dir + "/" + base + "-logs";
  fs::create_directories(s.log_dir);
  struct remove_dir {
    std::string path;
    ~remove_dir() {
      std::error_code ec;
      fs::remove_all(path, ec);
    }
  } logs_guard{s.log_dir};

  const std::string initial_delay = broker_config_value(b.bootstrap, "group.initial.rebalance.delay.ms");
  int64_t lock_ms = o.lock_ms;
  if (lock_ms == 0) {
    const std::string v = broker_config_value(b.bootstrap, "group.share.record.lock.duration.ms");
    if (v.empty()) throw bench_error{"cannot read the broker's group.share.record.lock.duration.ms"};
    lock_ms = std::strtoll(v.c_str(), nullptr, 10);
  }
  std::vector<std::string> share_configs = {"share.auto.offset.reset=earliest"};
  std::vector<std::string> held_configs = share_configs;
  if (o.lock_ms > 0) held_configs.push_back("share.record.lock.duration.ms=" + std::to_string(o.lock_ms));

  std::vector<read_result> classic_runs, share_runs;
  held_result held;
  int groups = 0;
  auto read = [&](const std::string& topic, bool share) {
    const std::string group = base + "-" + (share ? "share-" : "classic-") + std::to_string(groups++);
    if (share) alter_group_configs(s.sluice_bin, s.bootstrap, group, share_configs, s.log(group + "-config"));
    return read_all(s, topic, group, share);
  };
  for (int run = 0; run < o.repeats; ++run) {
    const std::string topic = base + "-" + std::to_string(run);
    if (!o.json)
      std::fprintf(stderr, "run %d of %d: filling %s with %llu records...\n", run + 1, o.repeats,
                   topic.c_str(), static_cast<unsigned long long>(o.records));
    fill(s, topic, o.partitions, o.records);
    if (run == 0) {
      read(topic, false);  // warm-up, not counted
      read(topic, true);
    }
    classic_runs.push_back(read(topic, false));
    share_runs.push_back(read(topic, true));
    delete_topic(s.bootstrap, topic);

    const std::string held_topic = topic + "-held";
    fill(s, held_topic, 1, static_cast<uint64_t>(o.held_records));
    const std::string group = base + "-held-" + std::to_string(run);
    alter_group_configs(s.sluice_bin, s.bootstrap, group, held_configs, s.log(group + "-config"));
    if (!o.json)
      std::fprintf(stderr, "run %d of %d: %d records held for a %lld ms lock...\n", run + 1,
                   o.repeats, o.held_records, static_cast<long long>(lock_ms));
    auto h = hold_and_redeliver(s, held_topic, group, lock_ms);
    held.redelivered += h.redelivered;
    held.delay_ms.insert(held.delay_ms.end(), h.delay_ms.begin(), h.delay_ms.end());
    delete_topic(s.bootstrap, held_topic);
  }
  const bool started = b.process != nullptr;
  b.process.reset();  // stops the broker we started
  const double load_after = load_average_1m();

  const read_medians classic = medians(classic_runs), share = medians(share_runs);
  const double bytes = static_cast<double>(o.record_bytes);
  const double ratio_start = ratio(share.msgs_per_s, classic.msgs_per_s);
  const double ratio_after_first = ratio(share.after_first, classic.after_first);
  std::sort(held.delay_ms.begin(), held.delay_ms.end());
  const bool any_redelivered = !held.delay_ms.empty();
  const double d_p50 = percentile_sorted(held.delay_ms, 50);
  const double d_max = any_redelivered ? held.delay_ms.back() : 0;
  const double d_min = any_redelivered ? held.delay_ms.front() : 0;
  const uint64_t held_total = static_cast<uint64_t>(o.held_records) * static_cast<uint64_t>(o.repeats);
  const bool redelivery_met = any_redelivered && d_max <= 1000 && d_min >= -1000;
  const bool ratio_met = ratio_start >= 0.5;

  if (o.json) {
    json j = json::object();
    j["mode"] = "share";
    j["bootstrap"] = started ? "started" : o.broker.bootstrap;
    j["partitions"] = o.partitions;
    j["records"] = o.records;
    j["record_bytes"] = static_cast<uint64_t>(o.record_bytes);
    j["consumers"] = o.consumers;
    j["repeats"] = o.repeats;
    j["initial_rebalance_delay_ms"] =
        initial_delay.empty() ? json() : json(std::strtod(initial_delay.c_str(), nullptr));
    json cc = json::array(), sc = json::array();
    for (const auto& kv : o.classic_config) cc.push(kv);
    for (const auto& kv : o.share_config) sc.push(kv);
    j["classic_config"] = std::move(cc);
    j["share_config"] = std::move(sc);
    j["load_average_1m_before"] = load_before;
    j["load_average_1m_after"] = load_after;
    j["classic"] = read_json(classic, classic_runs, bytes);
    json sh = read_json(share, share_runs, bytes);
    sh["ack_errors"] = share.ack_errors;
    j["share"] = std::move(sh);
    json r = json::object();
    r["share_vs_classic"] = ratio_start;
    r["share_vs_classic_after_first_record"] = ratio_after_first;
    j["ratios"] = std::move(r);
    json rd = json::object();
    rd["lock_ms"] = lock_ms;
    rd["held_records"] = held_total;
    rd["redelivered"] = held.redelivered;
    json d = json::object();
    d["p50"] = any_redelivered ? json(d_p50) : json();
    d["max"] = any_redelivered ? json(d_max) : json();
    d["min"] = any_redelivered ? json(d_min) : json();
    rd["delay_after_lock_ms"] = std::move(d);
    j["redelivery"] = std::move(rd);
    json t = json::object();
    t["share_at_least_0_5_of_classic"] = ratio_met;
    t["redelivery_within_1s_of_lock"] = redelivery_met;
    j["targets_met"] = std::move(t);
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }

  std::printf(
      "sluice-bench share: %s, a topic of %d partitions filled with %llu records of %zu B per run, "
      "groups of %d consumer processes\n",
      started ? "started broker" : o.broker.bootstrap.c_str(), o.partitions,
      static_cast<unsigned long long>(o.records), o.record_bytes, o.consumers);
  std::printf("broker group.initial.rebalance.delay.ms: %s (the classic group's start includes it)\n",
              initial_delay.empty() ? "unknown" : initial_delay.c_str());
  std::printf(
      "medians of %d runs, classic then share in each, after one uncounted read of each; load "
      "average (1 min) %.2f before, %.2f after\n\n",
      o.repeats, load_before, load_after);
  std::printf("consumer properties: classic %s; share %s\n\n", joined(o.classic_config).c_str(),
              joined(o.share_config).c_str());
  std::printf("  %-26s %29s %21s %12s %11s\n", "read the whole topic", "from the start",
              "from the 1st record", "1st record", "deliveries");
  print_read("classic group", classic, bytes);
  print_read("share group, each accepted", share, bytes);
  print_cpu("CPU, classic group", classic);
  print_cpu("CPU, share group", share);
  std::printf("  (rates: records over the time from the first process start, or from the first "
              "record, to the last new record;\n"
              "   deliveries: record lines printed, repeats included)\n");
  std::printf("  each run, msgs/s from the start: classic %s; share %s\n",
              each_run(classic_runs, &read_result::msgs_per_s).c_str(),
              each_run(share_runs, &read_result::msgs_per_s).c_str());
  std::printf("  share / classic %.2f (target >= 0.5: %s); from the first record %.2f\n",
              ratio_start, verdict(true, ratio_met).c_str(), ratio_after_first);
  if (share.ack_errors > 0)
    std::printf("  acknowledgement outcomes other than success: %.0f\n", share.ack_errors);
  std::printf(
      "\nredelivery after a lock expiry (share.record.lock.duration.ms %lld, %s): %llu of %llu "
      "held records redelivered\n",
      static_cast<long long>(lock_ms), o.lock_ms > 0 ? "a group config" : "the broker's",
      static_cast<unsigned long long>(held.redelivered),
      static_cast<unsigned long long>(held_total));
  if (any_redelivered)
    std::printf("  after the lock: p50 %.0f ms, max %.0f ms, min %.0f ms (target within 1000 ms: %s)\n",
                d_p50, d_max, d_min, verdict(true, redelivery_met).c_str());
  std::printf(
      "  (from the holder printing its first record to the second consumer printing each again, "
      "less the lock;\n"
      "   the broker looks for expired locks every %lld ms, a waiting ShareFetch looks again as "
      "often)\n",
      static_cast<long long>(limits::share_tick_ms));
  return 0;
}

}  // namespace sluice::bench
