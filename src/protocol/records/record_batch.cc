#include "protocol/records/record_batch.h"

#include <algorithm>
#include <cstring>
#include <functional>

#include "protocol/codec.h"

namespace sluice::protocol::records {

namespace {

// The smallest encoded record: length, attributes, timestamp delta, offset
// delta, key length, value length and header count, one byte each.
constexpr size_t min_record_bytes = 7;

error corrupt(std::string what) { return error{errc::corrupt_data, "record batch: " + std::move(what)}; }

std::optional<std::span<const uint8_t>> read_varbytes(reader& r) {
  const int32_t n = r.read_varint();
  if (!r.ok()) return std::nullopt;
  if (n < -1) {
    r.fail("negative length in a record");
    return std::nullopt;
  }
  if (n == -1) return std::nullopt;
  return r.read_raw(static_cast<size_t>(n));
}

void write_varbytes(writer& w, const std::optional<std::vector<uint8_t>>& b) {
  if (!b) {
    w.write_varint(-1);
    return;
  }
  w.write_varint(static_cast<int32_t>(b->size()));
  w.write_raw(*b);
}

}  // namespace

bool record_header::operator==(const record_header& o) const {
  auto eq = [](std::span<const uint8_t> a, std::span<const uint8_t> b) {
    return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size()) == 0);
  };
  if (!eq(key, o.key) || value.has_value() != o.value.has_value()) return false;
  return !value || eq(*value, *o.value);
}

result<std::vector<std::span<const uint8_t>>> split_batches(std::span<const uint8_t> records,
                                                             size_t* trailing_bytes) {
  std::vector<std::span<const uint8_t>> out;
  size_t pos = 0;
  while (pos < records.size()) {
    const auto rest = records.subspan(pos);
    if (rest.size() < model::batch::header_bytes) break;
    SLUICE_ASSIGN_OR_RETURN(model::batch::header h, model::batch::read_header(rest));
    if (h.size_bytes() > rest.size()) break;
    out.push_back(rest.first(h.size_bytes()));
    pos += h.size_bytes();
  }
  if (trailing_bytes) *trailing_bytes = records.size() - pos;
  return out;
}

status for_each_record(std::span<const uint8_t> bytes, int32_t count, bool with_headers,
                       const std::function<status(int32_t, record&)>& fn) {
  if (count < 0) return corrupt("negative record count");
  if (static_cast<size_t>(count) > bytes.size() / min_record_bytes)
    return corrupt("record count " + std::to_string(count) + " cannot fit in " + std::to_string(bytes.size()) +
                   " bytes");
  reader r(bytes);
  record rec;
  for (int32_t i = 0; i < count; ++i) {
    const int32_t len = r.read_varint();
    if (!r.ok()) break;
    if (len < static_cast<int32_t>(min_record_bytes - 1) || static_cast<size_t>(len) > r.remaining())
      return corrupt("record " + std::to_string(i) + " has length " + std::to_string(len));
    reader rr(r.read_raw(static_cast<size_t>(len)));
    rec.attributes = rr.read_int8();
    rec.timestamp_delta = rr.read_varlong();
    rec.offset_delta = rr.read_varint();
    rec.key = read_varbytes(rr);
    rec.value = read_varbytes(rr);
    rec.headers.clear();
    const int32_t header_count = rr.read_varint();
    if (rr.ok() && (header_count < 0 || static_cast<size_t>(header_count) > rr.remaining() / 2))
      return corrupt("record " + std::to_string(i) + " has " + std::to_string(header_count) + " headers");
    if (with_headers && rr.ok()) rec.headers.reserve(static_cast<size_t>(header_count));
    for (int32_t j = 0; j < header_count && rr.ok(); ++j) {
      auto k = read_varbytes(rr);
      if (rr.ok() && !k) return corrupt("record " + std::to_string(i) + " has a null header key");
      auto v = read_varbytes(rr);
      if (with_headers && rr.ok()) rec.headers.push_back(record_header{*k, v});
    }
    if (!rr.ok()) return corrupt("record " + std::to_string(i) + ": " + rr.to_status().err().message);
    if (rr.remaining() != 0) return corrupt("record " + std::to_string(i) + " is longer than its fields");
    SLUICE_TRY(fn(i, rec));
  }
  if (!r.ok()) return corrupt(r.to_status().err().message);
  if (r.remaining() != 0) return corrupt(std::to_string(r.remaining()) + " bytes after the last record");
  return {};
}

result<std::vector<record>> decode_records(std::span<const uint8_t> bytes, int32_t count) {
  std::vector<record> out;
  SLUICE_TRY(for_each_record(bytes, count, true, [&](int32_t, record& rec) {
    if (out.empty()) out.reserve(static_cast<size_t>(count));
    out.push_back(std::move(rec));
    return status{};
  }));
  return out;
}

result<decoded_batch> decode_batch(std::span<const uint8_t> batch, size_t max_decompressed_bytes) {
  SLUICE_ASSIGN_OR_RETURN(model::batch::header h, model::batch::read_header(batch));
  if (h.size_bytes() != batch.size())
    return corrupt("batch_length says " + std::to_string(h.size_bytes()) + " bytes, have " +
                   std::to_string(batch.size()));
  if (!model::batch::crc_matches(batch)) return corrupt("CRC-32C mismatch");
  decoded_batch out;
  out.header = h;
  auto payload = batch.subspan(model::batch::header_bytes);
  // An emptied batch (compaction keeps an idempotent producer's last one)
  // carries its codec bits but no payload at all, as Kafka writes it.
  if (h.codec() != compression::none && !(h.records_count == 0 && payload.empty())) {
    SLUICE_ASSIGN_OR_RETURN(out.decompressed, decompress(h.codec(), payload, max_decompressed_bytes));
    payload = out.decompressed;
  }
  SLUICE_ASSIGN_OR_RETURN(out.records, decode_records(payload, h.records_count));
  for (const record& r : out.records) {
    if (r.offset_delta < 0 || r.offset_delta > h.last_offset_delta)
      return corrupt("offset delta " + std::to_string(r.offset_delta) + " outside the batch");
  }
  return out;
}

result<std::vector<uint8_t>> build_batch(const batch_options& o, std::span<const record_input> records) {
  if (records.empty() && !o.last_offset_delta)
    return error{errc::invalid_argument, "a batch needs at least one record"};
  const int64_t base_ts = o.base_timestamp_ms ? *o.base_timestamp_ms
                          : records.empty()   ? o.empty_max_timestamp_ms
                                              : records.front().timestamp_ms;
  int64_t max_ts = records.empty() ? o.empty_max_timestamp_ms : records.front().timestamp_ms;
  int32_t last_delta = 0;
  writer body;
  for (size_t i = 0; i < records.size(); ++i) {
    const record_input& in = records[i];
    const int32_t delta = in.offset_delta.value_or(static_cast<int32_t>(i));
    if (delta < 0) return error{errc::invalid_argument, "negative offset delta"};
    last_delta = std::max(last_delta, delta);
    max_ts = std::max(max_ts, in.timestamp_ms);
    writer rec;
    rec.write_int8(0);
    rec.write_varlong(in.timestamp_ms - base_ts);
    rec.write_varint(delta);
    write_varbytes(rec, in.key);
    write_varbytes(rec, in.value);
    rec.write_varint(static_cast<int32_t>(in.headers.size()));
    for (const auto& [k, v] : in.headers) {
      rec.write_varint(static_cast<int32_t>(k.size()));
      rec.write_raw(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(k.data()), k.size()));
      write_varbytes(rec, v);
    }
    body.write_varint(static_cast<int32_t>(rec.owned_bytes().size()));
    body.write_raw(rec.owned_bytes());
  }
  if (o.last_offset_delta) {
    if (*o.last_offset_delta < last_delta) return error{errc::invalid_argument, "last offset delta below a record's"};
    last_delta = *o.last_offset_delta;
  }
  std::vector<uint8_t> payload;
  if (!records.empty()) {
    SLUICE_ASSIGN_OR_RETURN(payload, compress(o.codec, body.owned_bytes()));
  }

  if (o.ts_type == model::timestamp_type::log_append_time && o.log_append_time_ms) max_ts = *o.log_append_time_ms;

  const size_t total = model::batch::header_bytes + payload.size();
  if (total - model::batch::length_field_end > static_cast<size_t>(limits::max_batch_bytes))
    return error{errc::message_too_large, "built batch exceeds limits::max_batch_bytes"};
  model::batch::header h;
  h.base_offset = offset(o.base_offset);
  h.batch_length = static_cast<int32_t>(total - model::batch::length_field_end);
  h.partition_leader_epoch = o.partition_leader_epoch;
  h.attributes = model::attr::make(o.codec, o.ts_type, o.transactional, o.control, o.delete_horizon);
  h.last_offset_delta = last_delta;
  h.base_timestamp = base_ts;
  h.max_timestamp = max_ts;
  h.producer_id = o.producer_id;
  h.producer_epoch = o.producer_epoch;
  h.base_sequence = o.base_sequence;
  h.records_count = static_cast<int32_t>(records.size());
  std::vector<uint8_t> out(total);
  model::batch::write(out.data(), h);
  std::copy(payload.begin(), payload.end(), out.begin() + static_cast<std::ptrdiff_t>(model::batch::header_bytes));
  model::batch::update_crc(out);
  return out;
}

}  // namespace sluice::protocol::records
