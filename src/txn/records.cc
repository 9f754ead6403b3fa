#include "txn/records.h"

#include <array>
#include <map>

#include "base/java_hash.h"
#include "protocol/codec.h"

namespace sluice::txn {

namespace {

constexpr int16_t key_version = 0;
// Kafka's tags of TransactionLogValue version 1.
constexpr uint32_t previous_producer_id_tag = 0;
constexpr uint32_t next_producer_id_tag = 1;
constexpr uint32_t client_version_tag = 2;

constexpr std::array<std::string_view, 8> state_names = {
    "Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence",
};

}  // namespace

int32_t partition_for(std::string_view transactional_id, int32_t partitions) {
  return java_hash_partition(transactional_id, partitions);
}

std::string_view state_name(txn_state s) {
  const auto i = static_cast<size_t>(s);
  return i < state_names.size() ? state_names[i] : "Unknown";
}

std::optional<txn_state> state_from_name(std::string_view name) {
  for (size_t i = 0; i < state_names.size(); ++i)
    if (state_names[i] == name) return static_cast<txn_state>(i);
  return std::nullopt;
}

std::vector<uint8_t> encode_key(std::string_view transactional_id) {
  protocol::writer w;
  w.write_int16(key_version);
  w.write_string(transactional_id, false);
  const auto b = w.owned_bytes();
  return {b.begin(), b.end()};
}

std::vector<uint8_t> encode_value(const txn_log_value& v) {
  protocol::writer w;
  w.write_int16(txn_value_version);
  w.write_int64(v.producer_id);
  w.write_int16(v.producer_epoch);
  w.write_int32(v.timeout_ms);
  w.write_int8(static_cast<int8_t>(v.state));
  if (v.state == txn_state::empty) {
    w.write_null_array(true);
  } else {
    std::map<std::string_view, std::vector<int32_t>> by_topic;
    for (const auto& tp : v.partitions) by_topic[tp.topic].push_back(tp.partition);
    w.write_array_length(by_topic.size(), true);
    for (const auto& [topic, ids] : by_topic) {
      w.write_string(topic, true);
      w.write_array_length(ids.size(), true);
      for (int32_t id : ids) w.write_int32(id);
      w.write_uvarint(0);  // the entry's tagged fields: none
    }
  }
  w.write_int64(v.last_update_ms);
  w.write_int64(v.start_ms);
  // Tagged fields in ascending tag order, each only when it differs from
  // its default, as Kafka writes them.
  struct tagged {
    uint32_t tag;
    protocol::writer value;
  };
  std::vector<tagged> tags;
  if (v.previous_producer_id != no_producer_id) {
    tags.push_back({previous_producer_id_tag, {}});
    tags.back().value.write_int64(v.previous_producer_id);
  }
  if (v.next_producer_id != no_producer_id) {
    tags.push_back({next_producer_id_tag, {}});
    tags.back().value.write_int64(v.next_producer_id);
  }
  if (v.client_version != txn_version::tv0) {
    tags.push_back({client_version_tag, {}});
    tags.back().value.write_int16(static_cast<int16_t>(v.client_version));
  }
  if (v.last_producer_epoch != no_producer_epoch) {
    tags.push_back({last_producer_epoch_tag, {}});
    tags.back().value.write_int16(v.last_producer_epoch);
  }
  w.write_uvarint(static_cast<uint32_t>(tags.size()));
  for (const auto& t : tags) {
    w.write_uvarint(t.tag);
    w.write_tagged_value(t.value);
  }
  const auto b = w.owned_bytes();
  return {b.begin(), b.end()};
}

result<std::string> decode_key(std::span<const uint8_t> bytes) {
  protocol::reader r(bytes);
  const int16_t version = r.read_int16();
  if (!r.ok()) return error{errc::corrupt_data, "transaction log key shorter than its version"};
  if (version != key_version)
    return error{errc::unsupported_format, "transaction log key version " + std::to_string(version)};
  std::string id = r.read_string(false);
  if (!r.ok()) return error{errc::corrupt_data, "truncated transaction log key"};
  if (r.remaining() != 0) return error{errc::corrupt_data, "bytes after the transaction log key"};
  return id;
}

result<txn_log_value> decode_value(std::span<const uint8_t> bytes) {
  protocol::reader r(bytes);
  const int16_t version = r.read_int16();
  if (!r.ok()) return error{errc::corrupt_data, "transaction log value shorter than its version"};
  if (version < 0 || version > txn_value_version)
    return error{errc::unsupported_format, "transaction log value version " + std::to_string(version)};
  const bool flex = version >= 1;
  txn_log_value v;
  v.producer_id = r.read_int64();
  v.producer_epoch = r.read_int16();
  v.timeout_ms = r.read_int32();
  const int8_t state = r.read_int8();
  if (r.ok() && (state < 0 || state > static_cast<int8_t>(txn_state::prepare_epoch_fence)))
    return error{errc::corrupt_data, "transaction state " + std::to_string(state)};
  v.state = static_cast<txn_state>(state);
  // A topic entry takes at least 3 bytes flexible (name, ids, tags), 6 not.
  const int64_t topics = r.read_array_length(flex, flex ? 3 : 6);
  for (int64_t t = 0; t < topics && r.ok(); ++t) {
    std::string topic = r.read_string(flex);
    const int64_t ids = r.read_array_length(flex, 4);
    if (ids < 0) {
      r.fail("null partition list");
      break;
    }
    for (int64_t i = 0; i < ids && r.ok(); ++i) v.partitions.insert({topic, r.read_int32()});
    if (flex) {
      const uint32_t n = r.read_uvarint();
      for (uint32_t i = 0; i < n && r.ok(); ++i) {
        (void)r.read_uvarint();
        (void)r.tagged_value();  // an entry's tags: none known, skipped by size
      }
    }
  }
  v.last_update_ms = r.read_int64();
  v.start_ms = r.read_int64();
  if (flex) {
    const uint32_t n = r.read_uvarint();
    for (uint32_t i = 0; i < n && r.ok(); ++i) {
      const uint32_t tag = r.read_uvarint();
      protocol::reader field = r.tagged_value();
      if (!r.ok()) break;
      switch (tag) {
        case previous_producer_id_tag: v.previous_producer_id = field.read_int64(); break;
        case next_producer_id_tag: v.next_producer_id = field.read_int64(); break;
        case client_version_tag: {
          const int16_t cv = field.read_int16();
          if (cv < 0 || cv > static_cast<int16_t>(txn_version::tv2))
            return error{errc::corrupt_data, "client transaction version " + std::to_string(cv)};
          v.client_version = static_cast<txn_version>(cv);
          break;
        }
        case last_producer_epoch_tag: v.last_producer_epoch = field.read_int16(); break;
        default: continue;  // a newer writer's tag: skipped by its size
      }
      if (!field.ok() || field.remaining() != 0)
        return error{errc::corrupt_data, "tagged field " + std::to_string(tag) + " of the wrong size"};
    }
  }
  if (!r.ok()) return error{errc::corrupt_data, "truncated transaction log value: " + r.to_status().err().message};
  if (r.remaining() != 0) return error{errc::corrupt_data, "bytes after the transaction log value"};
  return v;
}

}  // namespace sluice::txn
