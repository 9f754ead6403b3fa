// ListOffsets: earliest (-2), latest (-1), the first offset whose record
// timestamp is at or after a time, and from v7 on the record with the
// largest timestamp (-3, KIP-734). Sluice keeps no tiered storage, so the
// earliest local offset (-4, v8+, KIP-405) is the log start offset and the
// latest tiered offset (-5, v9+, KIP-1005) is "none" (-1), as Kafka answers
// for a topic without remote storage; v10's timeout only bounds remote
// reads and is ignored. A special timestamp below the version that defines
// it is an INVALID_REQUEST. A read_committed request (v2+) sees the
// partition up to its last stable offset: latest is the last stable offset,
// and a lookup that finds an offset at or past it finds none.

#include "kafka/dispatcher.h"
#include "kafka/handlers/handlers.h"
#include "metadata/partition_manager.h"
#include "model/record_batch.h"
#include "protocol/records/record_batch.h"

namespace sluice::kafka {

namespace {

constexpr int64_t latest_timestamp = -1;
constexpr int64_t earliest_timestamp = -2;
constexpr int64_t max_timestamp = -3;             // v7+
constexpr int64_t earliest_local_timestamp = -4;  // v8+
constexpr int64_t latest_tiered_timestamp = -5;   // v9+

struct found {
  error_code error = error_code::none;
  int64_t offset = -1;
  int64_t timestamp = -1;
  int32_t leader_epoch = -1;  // of the batch found; -1: the partition's
};

// Decodes the one batch at `base`; nullopt when it cannot be read or
// decoded (the caller then answers with the batch-level facts).
std::optional<protocol::records::decoded_batch> batch_at(cluster::partition& p, offset base) {
  auto bytes = p.read_bytes(base, 1);
  if (!bytes.ok() || bytes->empty()) return std::nullopt;
  auto span =
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size());
  auto first = protocol::records::split_batches(span);
  if (!first.ok() || first->empty()) return std::nullopt;
  auto batch = protocol::records::decode_batch(first->front());
  if (!batch.ok()) return std::nullopt;
  // Record views point into `bytes` only for uncompressed batches: copy
  // what the callers read (offsets and timestamps) before it goes.
  auto out = std::move(batch).value();
  for (auto& r : out.records) {
    r.key.reset();
    r.value.reset();
    r.headers.clear();
  }
  return out;
}

int64_t record_timestamp(const protocol::records::decoded_batch& b,
                         const protocol::records::record& r) {
  const auto& h = b.header;
  return h.ts_type() == model::timestamp_type::log_append_time
             ? h.max_timestamp
             : h.base_timestamp + r.timestamp_delta;
}

// The first record with timestamp >= ts: the storage index finds the batch,
// then the batch's records are decoded to find the record inside it. As in
// Kafka, the search starts at the log start offset: in a batch that
// straddles it (DeleteRecords moved it into the batch), the records below
// `lookup.base` are gone and never answered.
found by_timestamp(cluster::partition& p, int64_t ts) {
  auto hit = p.offset_for_timestamp(ts);
  if (!hit.ok()) return {to_kafka_error(hit.code())};
  if (!hit->has_value()) return {};  // every record is older
  const offset base = (*hit)->base;
  const found fallback{error_code::none, base.value(), (*hit)->max_timestamp};
  auto batch = batch_at(p, base);
  if (!batch) return fallback;
  for (const auto& r : batch->records) {
    const int64_t o = (batch->header.base_offset + r.offset_delta).value();
    const int64_t rts = record_timestamp(*batch, r);
    if (o >= base.value() && rts >= ts) return {error_code::none, o, rts, batch->header.partition_leader_epoch};
  }
  return fallback;
}

// The first record carrying the largest timestamp of the partition: the
// log finds the first batch with the largest max_timestamp, and that batch
// alone is decoded. Records below `lookup.base` (the log start offset, in a
// batch that straddles it) are not considered. An empty log, or one whose
// records carry no timestamp, answers offset and timestamp -1.
found by_max_timestamp(cluster::partition& p) {
  auto hit = p.offset_of_max_timestamp();
  if (!hit.ok()) return {to_kafka_error(hit.code())};
  if (!hit->has_value()) return {};
  const offset base = (*hit)->base;
  const found fallback{error_code::none, base.value(), (*hit)->max_timestamp};
  auto batch = batch_at(p, base);
  if (!batch) return fallback;
  found best;
  for (const auto& r : batch->records) {
    const int64_t o = (batch->header.base_offset + r.offset_delta).value();
    const int64_t rts = record_timestamp(*batch, r);
    if (o < base.value()) continue;
    if (best.offset < 0 || rts > best.timestamp) best = {error_code::none, o, rts};
  }
  if (best.offset < 0) return fallback;
  best.leader_epoch = batch->header.partition_leader_epoch;
  return best;
}

}  // namespace

void handle_list_offsets(request req) {
  auto body = decode_body<protocol::list_offsets_request>(req);
  if (!body) return;
  auto& pm = *req.svc->partitions;
  const int16_t version = req.version();
  // read_committed (v2+): what such a consumer can read ends at the last
  // stable offset, not the high watermark (docs/transactions.md).
  const bool read_committed = body->isolation_level == 1;
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
      if (auto e = req.svc->leadership->check_leader(*part, pr.current_leader_epoch); e != errc::ok) {
        out.error_code = to_wire(e);
        continue;
      }
      if (part->high_watermark_behind_epoch_start()) {
        // A new leader whose followers have not fetched from it yet: its
        // high watermark may be below what the previous leader answered.
        // Kafka's answer (KIP-207), which clients retry.
        out.error_code = to_wire(error_code::offset_not_available);
        continue;
      }
      found f;
      bool tiered = false;
      if (pr.timestamp == latest_timestamp) {
        f.offset = (read_committed ? part->last_stable_offset() : part->high_watermark()).value();
      } else if (pr.timestamp == earliest_timestamp ||
                 (pr.timestamp == earliest_local_timestamp && version >= 8)) {
        f.offset = part->log_start_offset().value();
      } else if (pr.timestamp == max_timestamp && version >= 7) {
        f = by_max_timestamp(*part);
      } else if (pr.timestamp == latest_tiered_timestamp && version >= 9) {
        tiered = true;  // nothing is tiered: offset -1, no error
      } else if (pr.timestamp < 0) {
        f.error = error_code::invalid_request;
      } else {
        f = by_timestamp(*part, pr.timestamp);
      }
      const bool by_time = pr.timestamp >= 0 || pr.timestamp == max_timestamp;
      if (read_committed && by_time && f.offset >= part->last_stable_offset().value()) {
        f = found{};  // found past what a read_committed consumer may read: none, as Kafka answers
      }
      out.error_code = to_wire(f.error);
      if (version == 0) {
        if (f.error == error_code::none && f.offset >= 0) out.old_style_offsets = {f.offset};
      } else {
        out.offset = f.offset;
        out.timestamp = f.timestamp;
        if (tiered || f.offset < 0) {
          out.leader_epoch = -1;
        } else {
          out.leader_epoch = f.leader_epoch >= 0 ? f.leader_epoch : part->epoch().value();
        }
      }
    }
  }
  req.respond(resp);
}

}  // namespace sluice::kafka
