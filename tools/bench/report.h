#pragma once

// What every benchmark mode shares: the error it throws, medians and
// percentiles, the raw/Sluice alternation, a clock, a tiny JSON writer for
// `--json`, a repeating thread, and /proc readers for a process's CPU and
// memory.
//
// Nothing here is thread-safe unless said so; each mode builds its report on
// one thread after the measuring threads have joined.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include <sys/types.h>

#include "base/clock.h"

namespace sluice::bench {

// Thrown by a measurement that cannot go on; main() prints it and exits 1.
struct bench_error {
  std::string message;
};

inline constexpr double kMiB = 1024.0 * 1024.0;
inline constexpr double kMB = 1e6;

inline int64_t now_ns() { return clock::system().monotonic_ns(); }

// Median of the values (the mean of the two middle ones for an even count);
// 0 for none.
double median(std::vector<double> v);

// The p-th percentile (0..100) of sorted values, nearest rank; 0 for none.
double percentile_sorted(const std::vector<double>& sorted, double p);

// The median of one field over runs.
template <class Run>
double median_of(const std::vector<Run>& runs, double Run::*field) {
  std::vector<double> v;
  for (const auto& r : runs) v.push_back(r.*field);
  return median(std::move(v));
}

// a / b, 0 when b is not positive.
inline double ratio(double a, double b) {
  return b > 0 ? a / b : 0;
}

// Raw limit and Sluice measured alternately: one uncounted warm-up of each,
// then `repeats` pairs, raw first (memory idle for a few seconds is slow to
// touch again on the benchmark machine, so single runs swing).
struct paired_runs {
  std::vector<double> raw, sluice;
};
paired_runs alternate(int repeats, const std::function<double()>& raw,
                      const std::function<double()>& sluice);

// Calls `f` over and over, `pause` apart, on a thread of its own from
// construction to destruction.
class repeat_thread {
 public:
  explicit repeat_thread(std::function<void()> f,
                         std::chrono::milliseconds pause = std::chrono::milliseconds(50))
      : thread_([this, f = std::move(f), pause] {
          while (!stop_.load()) {
            f();
            std::this_thread::sleep_for(pause);
          }
        }) {}
  ~repeat_thread() {
    stop_ = true;
    thread_.join();
  }
  repeat_thread(const repeat_thread&) = delete;
  repeat_thread& operator=(const repeat_thread&) = delete;

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// A JSON value built in memory and printed once. Object keys keep insertion
// order so the output reads like the text report.
class json {
 public:
  json() : v_(nullptr) {}
  json(std::nullptr_t) : v_(nullptr) {}
  json(bool b) : v_(b) {}
  json(int v) : v_(static_cast<double>(v)) {}
  json(int64_t v) : v_(static_cast<double>(v)) {}
  json(uint64_t v) : v_(static_cast<double>(v)) {}
  json(double v) : v_(v) {}
  json(const char* s) : v_(std::string(s)) {}
  json(std::string s) : v_(std::move(s)) {}

  static json object() {
    json j;
    j.v_ = obj{};
    return j;
  }
  static json array() {
    json j;
    j.v_ = arr{};
    return j;
  }
  // Object member access (creates the member); the value must be an object.
  json& operator[](const std::string& key);
  // Appends to an array.
  void push(json v);
  std::string dump() const;

 private:
  using obj = std::vector<std::pair<std::string, json>>;
  using arr = std::vector<json>;
  std::variant<std::nullptr_t, bool, double, std::string, obj, arr> v_;
  void dump_to(std::string& out) const;
};

// CPU seconds (user + system) a process has used so far, from /proc/PID/stat;
// nullopt when the process is gone.
std::optional<double> process_cpu_seconds(pid_t pid);
// The sum over several processes (a cluster's brokers); nullopt when any of
// them is gone or none is given.
std::optional<double> processes_cpu_seconds(const std::vector<pid_t>& pids);
// CPU seconds of each thread of a process now, by thread id (threads that
// ended are missing).
std::map<pid_t, double> thread_cpu_seconds(pid_t pid);
// The most CPU one thread used between two thread_cpu_seconds readings
// `seconds` apart, in cores: near 1.0 means that thread is the bound.
double busiest_thread_cores(const std::map<pid_t, double>& before,
                            const std::map<pid_t, double>& after, double seconds);
// A field of /proc/PID/status in bytes ("VmRSS", "VmHWM"); nullopt if absent.
std::optional<uint64_t> process_status_bytes(pid_t pid, const std::string& field);

// The 1-minute load average from /proc/loadavg (-1 if unreadable): printed
// with the figures, since other work on the same cores lowers all of them.
double load_average_1m();

// "1.23" style formatting for the text report.
std::string fixed(double v, int decimals = 2);

// A target's verdict for the text report: "met", "MISSED", or "(n/a for
// this config)" when the target is set for another configuration.
std::string verdict(bool applies, bool met);

// CPU cores busy between two process_cpu_seconds readings; -1 if unknown.
double cores_between(std::optional<double> cpu0, std::optional<double> cpu1, int64_t t0_ns,
                     int64_t t1_ns);
// A CPU figure (-1: not measured) for the text report and for the JSON.
std::string cores_text(double cores);
json cores_json(double cores);

}  // namespace sluice::bench
