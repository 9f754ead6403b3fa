#include "metrics/metrics.h"

#include <cmath>
#include <cstdio>

namespace sluice::metrics {

void histogram::record_us(uint64_t micros) {
  const double ms = static_cast<double>(micros) / 1000.0;
  size_t i = 0;
  while (i < bounds_ms.size() && ms > bounds_ms[i]) ++i;
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  sum_us_.fetch_add(micros, std::memory_order_relaxed);
}

void histogram::render(std::string& out, std::string_view name, std::string_view labels) const {
  uint64_t cumulative = 0;
  const std::string sep = labels.empty() ? "" : ",";
  char le[32];
  for (size_t i = 0; i <= bounds_ms.size(); ++i) {
    cumulative += buckets_[i].load(std::memory_order_relaxed);
    if (i < bounds_ms.size()) {
      std::snprintf(le, sizeof le, "%g", bounds_ms[i] / 1000.0);  // Prometheus uses seconds
    } else {
      std::snprintf(le, sizeof le, "+Inf");
    }
    sample(out, std::string(name) + "_bucket", std::string(labels) + sep + "le=\"" + le + "\"",
           static_cast<double>(cumulative));
  }
  sample(out, std::string(name) + "_sum", labels, static_cast<double>(sum_us_.load(std::memory_order_relaxed)) / 1e6);
  sample(out, std::string(name) + "_count", labels, static_cast<double>(count_.load(std::memory_order_relaxed)));
}

double histogram::quantile_upper_ms(double q) const {
  const uint64_t n = count();
  if (n == 0) return -1;
  const auto need = static_cast<uint64_t>(std::ceil(q * static_cast<double>(n)));
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_ms.size(); ++i) {
    cumulative += buckets_[i].load(std::memory_order_relaxed);
    if (cumulative >= need) return bounds_ms[i];
  }
  return INFINITY;
}

void request_metrics::on_request(int16_t api_key, uint64_t bytes) {
  if (api_key < 0 || static_cast<size_t>(api_key) >= max_api_key) return;
  auto& a = apis_[static_cast<size_t>(api_key)];
  a.requests.fetch_add(1, std::memory_order_relaxed);
  a.bytes_in.fetch_add(bytes, std::memory_order_relaxed);
}

void request_metrics::on_unsupported_version(int16_t api_key) {
  if (api_key < 0 || static_cast<size_t>(api_key) >= max_api_key) return;
  apis_[static_cast<size_t>(api_key)].unsupported_versions.fetch_add(1, std::memory_order_relaxed);
}

void request_metrics::on_response(int16_t api_key, uint64_t bytes, uint64_t micros) {
  if (api_key < 0 || static_cast<size_t>(api_key) >= max_api_key) return;
  auto& a = apis_[static_cast<size_t>(api_key)];
  a.bytes_out.fetch_add(bytes, std::memory_order_relaxed);
  a.latency.record_us(micros);
}

const api_metrics* request_metrics::api(int16_t api_key) const {
  if (api_key < 0 || static_cast<size_t>(api_key) >= max_api_key) return nullptr;
  return &apis_[static_cast<size_t>(api_key)];
}

void request_metrics::render(std::string& out, std::string_view (*api_name)(int16_t)) const {
  header(out, "sluice_requests_total", "counter", "Requests received, per Kafka API.");
  for (size_t k = 0; k < max_api_key; ++k) {
    const auto& a = apis_[k];
    if (a.requests.load(std::memory_order_relaxed) == 0) continue;
    sample(out, "sluice_requests_total", "api=\"" + std::string(api_name(static_cast<int16_t>(k))) + "\"",
           static_cast<double>(a.requests.load(std::memory_order_relaxed)));
  }
  header(out, "sluice_request_bytes_total", "counter", "Request bytes received, per Kafka API.");
  for (size_t k = 0; k < max_api_key; ++k) {
    const auto& a = apis_[k];
    if (a.requests.load(std::memory_order_relaxed) == 0) continue;
    sample(out, "sluice_request_bytes_total", "api=\"" + std::string(api_name(static_cast<int16_t>(k))) + "\"",
           static_cast<double>(a.bytes_in.load(std::memory_order_relaxed)));
  }
  header(out, "sluice_requests_unsupported_version_total", "counter",
         "Requests at a version the broker does not serve, per Kafka API (old clients; the log names them).");
  for (size_t k = 0; k < max_api_key; ++k) {
    const auto& a = apis_[k];
    if (a.unsupported_versions.load(std::memory_order_relaxed) == 0) continue;
    sample(out, "sluice_requests_unsupported_version_total",
           "api=\"" + std::string(api_name(static_cast<int16_t>(k))) + "\"",
           static_cast<double>(a.unsupported_versions.load(std::memory_order_relaxed)));
  }
  header(out, "sluice_response_bytes_total", "counter", "Response bytes sent, per Kafka API.");
  for (size_t k = 0; k < max_api_key; ++k) {
    const auto& a = apis_[k];
    if (a.requests.load(std::memory_order_relaxed) == 0) continue;
    sample(out, "sluice_response_bytes_total", "api=\"" + std::string(api_name(static_cast<int16_t>(k))) + "\"",
           static_cast<double>(a.bytes_out.load(std::memory_order_relaxed)));
  }
  header(out, "sluice_request_latency_seconds", "histogram",
         "Time from a request's arrival to its response, per Kafka API (acks=all includes the fsync).");
  for (size_t k = 0; k < max_api_key; ++k) {
    const auto& a = apis_[k];
    if (a.requests.load(std::memory_order_relaxed) == 0) continue;
    a.latency.render(out, "sluice_request_latency_seconds",
                     "api=\"" + std::string(api_name(static_cast<int16_t>(k))) + "\"");
  }
}

void header(std::string& out, std::string_view name, std::string_view type, std::string_view help) {
  out += "# HELP ";
  out += name;
  out += ' ';
  out += help;
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
}

void sample(std::string& out, std::string_view name, std::string_view labels, double value) {
  out += name;
  if (!labels.empty()) {
    out += '{';
    out += labels;
    out += '}';
  }
  char v[64];
  if (std::isinf(value)) {
    std::snprintf(v, sizeof v, value > 0 ? "+Inf" : "-Inf");
  } else if (value == std::floor(value) && std::fabs(value) < 1e15) {
    std::snprintf(v, sizeof v, "%.0f", value);
  } else {
    std::snprintf(v, sizeof v, "%.9g", value);
  }
  out += ' ';
  out += v;
  out += '\n';
}

std::string label_value(std::string_view v) {
  std::string s;
  for (char c : v) {
    if (c == '\\' || c == '"') {
      s += '\\';
      s += c;
    } else if (c == '\n') {
      s += "\\n";
    } else {
      s += c;
    }
  }
  return s;
}

}  // namespace sluice::metrics
