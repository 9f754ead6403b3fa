// DeleteRecords: moves a partition's log start offset up; whole segments
// below it are deleted by the log.

#include "cluster/partition_manager.h"
#include "kafka/dispatcher.h"
#include "kafka/handlers/handlers.h"

namespace sluice::kafka {

void handle_delete_records(request req) {
  auto body = decode_body<protocol::delete_records_request>(req);
  if (!body) return;
  auto& pm = *req.svc->partitions;
  protocol::delete_records_response resp;
  for (const auto& t : body->topics) {
    auto& tr = resp.topics.emplace_back();
    tr.name = t.name;
    for (const auto& p : t.partitions) {
      auto& out = tr.partitions.emplace_back();
      out.partition_index = p.partition_index;
      out.low_watermark = -1;
      auto part = pm.get(t.name, p.partition_index);
      if (!part) {
        out.error_code = to_wire(pm.missing_partition_error(t.name, p.partition_index));
        continue;
      }
      if (auto e = part->check_leader(); e != errc::ok) {
        out.error_code = to_wire(e);
        continue;
      }
      // -1 means "up to the high watermark".
      offset target = p.offset == -1 ? part->high_watermark() : offset(p.offset);
      if (target < offset(0) || target > part->high_watermark()) {
        out.error_code = to_wire(error_code::offset_out_of_range);
        continue;
      }
      if (target > part->log_start_offset()) {
        if (auto s = part->delete_records_before(target); !s.ok()) {
          out.error_code = to_wire(to_kafka_error(s.code()));
          continue;
        }
      }
      out.low_watermark = part->log_start_offset().value();
    }
  }
  req.respond(resp);
}

}  // namespace sluice::kafka
