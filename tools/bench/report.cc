#include "report.h"

#include "base/json_text.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

namespace sluice::bench {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double percentile_sorted(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  // Nearest rank: the smallest value with at least p% of values at or below it.
  double rank = std::ceil(p / 100.0 * static_cast<double>(sorted.size()));
  size_t i = rank < 1 ? 0 : static_cast<size_t>(rank) - 1;
  return sorted[std::min(i, sorted.size() - 1)];
}

paired_runs alternate(int repeats, const std::function<double()>& raw,
                      const std::function<double()>& sluice) {
  raw();
  sluice();
  paired_runs p;
  for (int i = 0; i < repeats; ++i) {
    p.raw.push_back(raw());
    p.sluice.push_back(sluice());
  }
  return p;
}

json& json::operator[](const std::string& key) {
  auto& o = std::get<obj>(v_);
  for (auto& [k, v] : o)
    if (k == key) return v;
  o.emplace_back(key, json());
  return o.back().second;
}

void json::push(json v) {
  std::get<arr>(v_).push_back(std::move(v));
}

std::string json::dump() const {
  std::string out;
  dump_to(out);
  return out;
}

static void quote(std::string& out, const std::string& s) {
  out += '"';
  append_json_escaped(out, s);
  out += '"';
}

void json::dump_to(std::string& out) const {
  if (std::holds_alternative<std::nullptr_t>(v_)) {
    out += "null";
  } else if (auto b = std::get_if<bool>(&v_)) {
    out += *b ? "true" : "false";
  } else if (auto d = std::get_if<double>(&v_)) {
    if (!std::isfinite(*d)) {
      out += "null";  // JSON has no NaN or infinity
    } else {
      char buf[40];
      if (std::fabs(*d) < 9e15 && *d == std::floor(*d))
        std::snprintf(buf, sizeof buf, "%.0f", *d);
      else
        std::snprintf(buf, sizeof buf, "%.6g", *d);
      out += buf;
    }
  } else if (auto s = std::get_if<std::string>(&v_)) {
    quote(out, *s);
  } else if (auto o = std::get_if<obj>(&v_)) {
    out += '{';
    bool first = true;
    for (const auto& [k, v] : *o) {
      if (!first) out += ',';
      first = false;
      quote(out, k);
      out += ':';
      v.dump_to(out);
    }
    out += '}';
  } else {
    out += '[';
    bool first = true;
    for (const auto& v : std::get<arr>(v_)) {
      if (!first) out += ',';
      first = false;
      v.dump_to(out);
    }
    out += ']';
  }
}

namespace {

// utime + stime of a /proc stat file, in seconds.
std::optional<double> stat_cpu_seconds(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!std::getline(in, line)) return std::nullopt;
  // The command name (field 2) may hold spaces; fields resume after its ')'.
  auto close = line.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream rest(line.substr(close + 2));
  std::string field;
  // Fields 3.. : state ppid pgrp session tty tpgid flags minflt cminflt
  // majflt cmajflt utime(14) stime(15).
  for (int i = 3; i <= 13; ++i) rest >> field;
  unsigned long long utime = 0, stime = 0;
  if (!(rest >> utime >> stime)) return std::nullopt;
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

}  // namespace

std::optional<double> process_cpu_seconds(pid_t pid) {
  return stat_cpu_seconds("/proc/" + std::to_string(pid) + "/stat");
}

std::optional<double> processes_cpu_seconds(const std::vector<pid_t>& pids) {
  if (pids.empty()) return std::nullopt;
  double sum = 0;
  for (pid_t p : pids) {
    auto c = process_cpu_seconds(p);
    if (!c) return std::nullopt;
    sum += *c;
  }
  return sum;
}

std::map<pid_t, double> thread_cpu_seconds(pid_t pid) {
  std::map<pid_t, double> out;
  std::error_code ec;
  const std::string dir = "/proc/" + std::to_string(pid) + "/task";
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string tid = e.path().filename().string();
    if (auto c = stat_cpu_seconds(dir + "/" + tid + "/stat"))
      out[static_cast<pid_t>(std::stol(tid))] = *c;
  }
  return out;
}

double busiest_thread_cores(const std::map<pid_t, double>& before,
                            const std::map<pid_t, double>& after, double seconds) {
  double best = 0;
  for (const auto& [tid, c] : after) {
    auto it = before.find(tid);
    best = std::max(best, c - (it == before.end() ? 0.0 : it->second));
  }
  return seconds > 0 ? best / seconds : -1;
}

std::optional<uint64_t> process_status_bytes(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) != 0) continue;
    std::istringstream s(line.substr(field.size() + 1));
    uint64_t kib = 0;
    if (s >> kib) return kib * 1024;
  }
  return std::nullopt;
}

double load_average_1m() {
  std::ifstream in("/proc/loadavg");
  double v = -1;
  if (!(in >> v)) return -1;
  return v;
}

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string verdict(bool applies, bool met) {
  return !applies ? "(n/a for this config)" : met ? "met" : "MISSED";
}

double cores_between(std::optional<double> cpu0, std::optional<double> cpu1, int64_t t0_ns,
                     int64_t t1_ns) {
  if (!cpu0 || !cpu1 || t1_ns <= t0_ns) return -1;
  return (*cpu1 - *cpu0) / (static_cast<double>(t1_ns - t0_ns) / 1e9);
}

std::string cores_text(double cores) {
  return cores < 0 ? "n/a (too short to sample)" : fixed(cores) + " cores";
}

json cores_json(double cores) {
  return cores < 0 ? json() : json(cores);
}

}  // namespace sluice::bench
