#include "base/log.h"
#include "kafka/dispatcher.h"
#include "kafka/handlers/handlers.h"
#include "metadata/partition_manager.h"
#include "protocol/records/record_batch.h"

namespace sluice::kafka {

namespace {

// Whether the newest batch of a replica of `topic` held here has a keyed
// record: a topic whose records carry keys, for which more partitions move
// most keys to another partition. One batch read per partition.
bool carries_keys(cluster::partition_manager& pm, const std::string& topic, int32_t partitions) {
  for (int32_t p = 0; p < partitions; ++p) {
    auto part = pm.get(topic, p);
    if (!part) continue;
    const auto hw = part->high_watermark();
    if (hw.value() <= part->log_start_offset().value()) continue;
    auto bytes = part->read_bytes(offset(hw.value() - 1), 1, hw);  // the whole batch holding it
    if (!bytes.ok() || bytes->empty()) continue;
    auto dec = protocol::records::decode_batch(
        std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size()));
    if (!dec.ok() || dec->header.is_control()) continue;
    for (const auto& r : dec->records)
      if (r.key) return true;
  }
  return false;
}

}  // namespace

void handle_create_partitions(request req) {
  auto body = decode_body<protocol::create_partitions_request>(req);
  if (!body) return;
  auto& pm = *req.svc->partitions;
  protocol::create_partitions_response resp;
  std::vector<std::string> grown;  // whose new logs are being made
  for (const auto& t : body->topics) {
    auto& out = resp.results.emplace_back();
    out.name = t.name;
    std::vector<cluster::replica_list> assignment;
    if (t.assignments) {
      // One entry per new partition, in order; the store checks the brokers.
      for (const auto& a : *t.assignments) assignment.push_back(a.broker_ids);
    }
    // The brief: adding partitions moves which partition each key maps
    // to, which breaks per-key order for a while. Said in the log; the
    // request is not refused (clients decide, as with Kafka).
    auto before = pm.topic(t.name);
    const bool keyed = !body->validate_only && before && t.count > before->partitions &&
                       carries_keys(pm, t.name, before->partitions);
    // As CreateTopics: recorded now, the logs made in the background.
    if (auto e = pm.add_partitions(t.name, t.count, body->validate_only,
                                   cluster::partition_manager::create_mode::background, std::move(assignment))) {
      out.error_code = to_wire(e->code);
      out.error_message = e->message;
    } else if (!body->validate_only) {
      if (keyed)
        SLUICE_LOG_WARN("CreatePartitions: {} goes from {} to {} partitions and its records carry keys: most keys now "
                        "map to another partition, so a key's new records may be read before its older ones",
                        t.name, before->partitions, t.count);
      grown.push_back(t.name);
    }
  }
  const int32_t timeout_ms = body->timeout_ms;
  answer_when_created(*req.svc, std::move(grown), timeout_ms,
                      [r = std::make_shared<request>(std::move(req)),
                       a = std::make_shared<protocol::create_partitions_response>(
                           std::move(resp))] { r->respond(*a); });
}

}  // namespace sluice::kafka
