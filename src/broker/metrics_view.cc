#include "broker/metrics_view.h"

#include "protocol/frame.h"

namespace sluice::broker {

namespace {

using metrics::header;
using metrics::label_value;
using metrics::sample;

std::string_view api_name(int16_t key) {
  const auto* a = protocol::find_api(key);
  return a ? a->name : std::string_view("unknown");
}

}  // namespace

std::string render_metrics(const metrics_sources& src) {
  std::string out;
  out.reserve(16 << 10);
  header(out, "sluice_up", "gauge", "1 while the broker serves.");
  sample(out, "sluice_up", "", 1);

  if (src.server) {
    const auto& s = *src.server;
    header(out, "sluice_connections_active", "gauge", "Open client connections.");
    sample(out, "sluice_connections_active", "", static_cast<double>(s.connections_active.load()));
    header(out, "sluice_connections_accepted_total", "counter", "Connections accepted.");
    sample(out, "sluice_connections_accepted_total", "", static_cast<double>(s.connections_accepted.load()));
    header(out, "sluice_connections_rejected_total", "counter", "Connections refused over max.connections.");
    sample(out, "sluice_connections_rejected_total", "", static_cast<double>(s.connections_rejected.load()));
    header(out, "sluice_network_bytes_in_total", "counter", "Bytes read from clients.");
    sample(out, "sluice_network_bytes_in_total", "", static_cast<double>(s.bytes_in.load()));
    header(out, "sluice_network_bytes_out_total", "counter", "Bytes written to clients.");
    sample(out, "sluice_network_bytes_out_total", "", static_cast<double>(s.bytes_out.load()));
  }
  if (src.requests) src.requests->render(out, api_name);

  if (src.partitions) {
    struct row {
      std::string labels;
      storage::log* log;
    };
    std::vector<row> rows;
    std::vector<std::shared_ptr<cluster::partition>> keep;
    for (const auto& t : src.partitions->topics()) {
      for (int32_t p = 0; p < t.partitions; ++p) {
        auto part = src.partitions->get(t.name, p);
        if (!part) continue;
        rows.push_back({"topic=\"" + label_value(t.name) + "\",partition=\"" + std::to_string(p) + "\"", &part->log()});
        keep.push_back(std::move(part));
      }
    }
    header(out, "sluice_log_start_offset", "gauge", "First offset still readable, per partition.");
    for (const auto& r : rows) sample(out, "sluice_log_start_offset", r.labels, static_cast<double>(r.log->log_start_offset().value()));
    header(out, "sluice_log_end_offset", "gauge", "The next offset to be written, per partition.");
    for (const auto& r : rows) sample(out, "sluice_log_end_offset", r.labels, static_cast<double>(r.log->log_end_offset().value()));
    std::string sizes, counts;
    for (const auto& r : rows) {
      uint64_t bytes = 0;
      auto segs = r.log->segments();
      for (const auto& s : segs) bytes += s.size_bytes;
      sample(sizes, "sluice_log_size_bytes", r.labels, static_cast<double>(bytes));
      sample(counts, "sluice_log_segments", r.labels, static_cast<double>(segs.size()));
    }
    header(out, "sluice_log_size_bytes", "gauge", "Bytes of segment files, per partition.");
    out += sizes;
    header(out, "sluice_log_segments", "gauge", "Segment files, per partition.");
    out += counts;
  }
  return out;
}

}  // namespace sluice::broker
