// ListOffsets: earliest (-2), latest (-1), or the first offset whose record
// timestamp is at or after a time.

#include "cluster/partition_manager.h"
#include "kafka/dispatcher.h"
#include "kafka/handlers/handlers.h"
#include "protocol/records/record_batch.h"

namespace sluice::kafka {

namespace {

constexpr int64_t latest_timestamp = -1;
constexpr int64_t earliest_timestamp = -2;

struct found {
  error_code error = error_code::none;
  int64_t offset = -1;
  int64_t timestamp = -1;
};

// The first record with timestamp >= ts: the storage index finds the batch,
// then the batch's records are decoded to find the record inside it.
found by_timestamp(cluster::partition& p, int64_t ts) {
  auto hit = p.log().offset_for_timestamp(ts);
  if (!hit.ok()) return {to_kafka_error(hit.code())};
  if (!hit->has_value()) return {};  // every record is older
  const offset base = (*hit)->base;
  auto bytes = p.log().read_bytes(base, 1);
  if (!bytes.ok() || bytes->empty()) return {error_code::none, base.value(), (*hit)->max_timestamp};
  auto span = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size());
  auto first = protocol::records::split_batches(span);
  if (!first.ok() || first->empty()) return {error_code::none, base.value(), (*hit)->max_timestamp};
  auto batch = protocol::records::decode_batch(first->front());
  if (!batch.ok()) return {error_code::none, base.value(), (*hit)->max_timestamp};
  const auto& h = batch->header;
  for (const auto& r : batch->records) {
    int64_t rts = h.ts_type() == protocol::records::timestamp_type::log_append_time
                      ? h.max_timestamp
                      : h.base_timestamp + r.timestamp_delta;
    if (rts >= ts) return {error_code::none, h.base_offset + r.offset_delta, rts};
  }
  return {error_code::none, base.value(), (*hit)->max_timestamp};
}

}  // namespace

void handle_list_offsets(request req) {
  auto body = decode_body<protocol::list_offsets_request>(req);
  if (!body) return;
  auto& pm = *req.svc->partitions;
  protocol::list_offsets_response resp;
  for (const auto& t : body->topics) {
    auto& tr = resp.topics.emplace_back();
    tr.name = t.name;
    for (const auto& pr : t.partitions) {
      auto& out = tr.partitions.emplace_back();
      out.partition_index = pr.partition_index;
      auto part = pm.get(t.name, pr.partition_index);
      if (!part) {
        out.error_code = to_wire(pm.missing_partition_error(t.name, pr.partition_index));
        continue;
      }
      found f;
      if (pr.timestamp == latest_timestamp) {
        f.offset = part->high_watermark().value();
      } else if (pr.timestamp == earliest_timestamp) {
        f.offset = part->log_start_offset().value();
      } else if (pr.timestamp < 0) {
        f.error = error_code::invalid_request;
      } else {
        f = by_timestamp(*part, pr.timestamp);
      }
      out.error_code = to_wire(f.error);
      if (req.version() == 0) {
        if (f.error == error_code::none && f.offset >= 0) out.old_style_offsets = {f.offset};
      } else {
        out.offset = f.offset;
        out.timestamp = f.timestamp;
        out.leader_epoch = f.offset >= 0 ? part->epoch().value() : -1;
      }
    }
  }
  req.respond(resp);
}

}  // namespace sluice::kafka
