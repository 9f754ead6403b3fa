#include "protocol/records/control.h"

#include <string>

#include "base/endian.h"
#include "model/record_batch.h"
#include "protocol/records/record_batch.h"

namespace sluice::protocol::records {
namespace {

constexpr int16_t abort_type = 0;
constexpr int16_t commit_type = 1;
constexpr int16_t marker_key_version = 0;
constexpr int16_t marker_value_version = 0;
constexpr size_t key_bytes = 4;
constexpr size_t value_bytes = 6;

}  // namespace

std::vector<uint8_t> build_marker_batch(int64_t producer_id, int16_t producer_epoch, const txn_marker& marker,
                                        int64_t timestamp_ms) {
  std::vector<uint8_t> key(key_bytes), value(value_bytes);
  store_be(key.data(), marker_key_version);
  store_be(key.data() + 2, marker.commit ? commit_type : abort_type);
  store_be(value.data(), marker_value_version);
  store_be(value.data() + 2, marker.coordinator_epoch);
  batch_options o;
  o.transactional = true;
  o.control = true;
  o.producer_id = producer_id;
  o.producer_epoch = producer_epoch;
  record_input r;
  r.key = std::move(key);
  r.value = std::move(value);
  r.timestamp_ms = timestamp_ms;
  auto built = build_batch(o, std::span<const record_input>(&r, 1));
  // One small uncompressed record with a key and a value: nothing build_batch refuses.
  return std::move(built).value();
}

result<txn_marker> parse_marker(std::span<const uint8_t> batch) {
  auto bad = [](const std::string& why) { return error{errc::invalid_txn_marker, "transaction marker: " + why}; };
  auto h = model::batch::read_header(batch);
  if (!h.ok()) return bad(h.err().message);
  if (!h->is_control() || !h->is_transactional()) return bad("not a transactional control batch");
  if (h->codec() != model::compression::none) return bad("compressed");
  if (h->records_count != 1) return bad(std::to_string(h->records_count) + " records, not one");
  if (h->size_bytes() > batch.size()) return bad("shorter than its length");
  txn_marker m;
  auto s = for_each_record(batch.subspan(model::batch::header_bytes, h->size_bytes() - model::batch::header_bytes), 1,
                           false, [&](int32_t, record& r) -> status {
                             if (!r.key || r.key->size() < key_bytes) return status(errc::invalid_txn_marker, "key");
                             if (load_be<int16_t>(r.key->data()) < 0) return status(errc::invalid_txn_marker, "key version");
                             const int16_t type = load_be<int16_t>(r.key->data() + 2);
                             if (type != abort_type && type != commit_type)
                               return status(errc::invalid_txn_marker, "control type " + std::to_string(type));
                             m.commit = type == commit_type;
                             if (!r.value || r.value->size() < value_bytes)
                               return status(errc::invalid_txn_marker, "value");
                             m.coordinator_epoch = load_be<int32_t>(r.value->data() + 2);
                             return {};
                           });
  if (!s.ok()) return bad(s.err().message);
  return m;
}

}  // namespace sluice::protocol::records
