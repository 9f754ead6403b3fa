#pragma once

// Counters, gauges and latency histograms in Prometheus' text exposition
// format. Recording is a few relaxed atomic adds, so the data path never
// waits on a scrape; rendering reads the atomics without locks.
//
// Thread safety: every method is thread-safe.

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

namespace sluice::metrics {

// A latency histogram with fixed buckets (milliseconds), cumulative as
// Prometheus expects when rendered.
class histogram {
 public:
  static constexpr std::array<double, 16> bounds_ms = {0.1, 0.25, 0.5, 1,   2.5,  5,    10,   25,
                                                       50,  100,  250, 500, 1000, 2500, 5000, 10000};
  void record_us(uint64_t micros);
  uint64_t count() const { return count_.load(std::memory_order_relaxed); }
  // Appends `name_bucket{labels,le="..."}` lines, `name_sum` and `name_count`.
  void render(std::string& out, std::string_view name, std::string_view labels) const;
  // The smallest bucket bound under which at least `q` of the samples fall
  // (an upper estimate of the quantile), or -1 without samples.
  double quantile_upper_ms(double q) const;

 private:
  std::array<std::atomic<uint64_t>, bounds_ms.size() + 1> buckets_{};  // the last is +Inf
  std::atomic<uint64_t> count_{0};
  std::atomic<uint64_t> sum_us_{0};
};

// Per Kafka API: requests, bytes in and out, and latency from the request
// arriving to its response being handed to the server.
struct api_metrics {
  std::atomic<uint64_t> requests{0};
  std::atomic<uint64_t> bytes_in{0};
  std::atomic<uint64_t> bytes_out{0};
  std::atomic<uint64_t> unsupported_versions{0};
  histogram latency;
};

class request_metrics {
 public:
  static constexpr size_t max_api_key = 80;
  // A request of `api_key` arrived with `bytes` of frame.
  void on_request(int16_t api_key, uint64_t bytes);
  // A request of `api_key` came at a version the broker does not serve.
  void on_unsupported_version(int16_t api_key);
  // Its response of `bytes` was handed to the server after `micros`.
  void on_response(int16_t api_key, uint64_t bytes, uint64_t micros);
  const api_metrics* api(int16_t api_key) const;
  // Appends every API with traffic; `api_name` names an API key.
  void render(std::string& out, std::string_view (*api_name)(int16_t)) const;

 private:
  std::array<api_metrics, max_api_key> apis_{};
};

// Text-format helpers: `# HELP` / `# TYPE` header and one sample line.
void header(std::string& out, std::string_view name, std::string_view type, std::string_view help);
void sample(std::string& out, std::string_view name, std::string_view labels, double value);
// Escapes a label value (backslash, quote, newline).
std::string label_value(std::string_view v);

}  // namespace sluice::metrics
