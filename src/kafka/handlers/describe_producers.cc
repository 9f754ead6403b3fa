// DescribeProducers: the idempotent and transactional producers each
// partition remembers (cluster::producer_state): id, epoch, last sequence,
// the timestamp of their last batch, the coordinator epoch of their last
// transaction marker and the first offset of the transaction they have open
// there (-1 for none).

#include "kafka/dispatcher.h"
#include "kafka/handlers/handlers.h"
#include "metadata/partition_manager.h"

namespace sluice::kafka {

void handle_describe_producers(request req) {
  auto body = decode_body<protocol::describe_producers_request>(req);
  if (!body) return;
  auto& pm = *req.svc->partitions;
  protocol::describe_producers_response resp;
  for (const auto& t : body->topics) {
    auto& rt = resp.topics.emplace_back();
    rt.name = t.name;
    for (int32_t index : t.partition_indexes) {
      auto& rp = rt.partitions.emplace_back();
      rp.partition_index = index;
      auto part = pm.get(t.name, index);
      if (!part) {
        rp.error_code = to_wire(pm.missing_partition_error(t.name, index));
        continue;
      }
      for (const auto& p : part->producers()) {
        auto& out = rp.active_producers.emplace_back();
        out.producer_id = p.producer_id;
        out.producer_epoch = p.producer_epoch;
        out.last_sequence = p.last_sequence;
        out.last_timestamp = p.last_timestamp_ms;
        out.coordinator_epoch = p.coordinator_epoch;
        out.current_txn_start_offset = p.current_txn_start_offset;
      }
    }
  }
  req.respond(resp);
}

}  // namespace sluice::kafka
