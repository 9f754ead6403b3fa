// DescribeProducers: the idempotent producers each partition remembers
// (cluster::producer_state): id, epoch, last sequence and the timestamp of
// their last batch. Sluice has no transactions, so the coordinator epoch
// and the current transaction's start offset are always -1.

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
        out.coordinator_epoch = -1;
        out.current_txn_start_offset = -1;
      }
    }
  }
  req.respond(resp);
}

}  // namespace sluice::kafka
