#pragma once

// The keys and values the group coordinator writes to __consumer_offsets
// (docs/group_records.md has the grammar), and the group -> partition rule.
// Pure functions over bytes; decoding treats its input as untrusted (a
// corrupt or foreign record is an error value, never an assertion).

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/result.h"
#include "base/types.h"

namespace sluice::group {

inline constexpr std::string_view offsets_topic = "__consumer_offsets";

// The partition of __consumer_offsets that holds `group_id`: Kafka's
// Utils.abs(hashCode) % partitions (base/java_hash.h). `partitions` > 0.
int32_t partition_for(std::string_view group_id, int32_t partitions);

struct offset_key {
  std::string group;
  std::string topic;
  int32_t partition = 0;
  bool operator==(const offset_key&) const = default;
  auto operator<=>(const offset_key&) const = default;
};

struct group_key {
  std::string group;
  bool operator==(const group_key&) const = default;
};

using record_key = std::variant<offset_key, group_key>;

struct offset_value {
  int64_t offset = 0;
  int32_t leader_epoch = -1;
  std::string metadata;
  int64_t commit_timestamp_ms = 0;
  // The topic the offset was committed against (version 4's tagged field
  // 0); all zero when not known: a record of version 0 to 3, written before
  // ids were kept (docs/group_records.md, "Topic ids").
  sluice::topic_id topic_id{};
  bool operator==(const offset_value&) const = default;
};

struct member_value {
  std::string member_id;
  std::optional<std::string> group_instance_id;
  std::string client_id;
  std::string client_host;
  int32_t rebalance_timeout_ms = -1;
  int32_t session_timeout_ms = 0;
  std::vector<uint8_t> subscription;
  std::vector<uint8_t> assignment;
  bool operator==(const member_value&) const = default;
};

struct group_value {
  std::string protocol_type;
  int32_t generation = 0;
  std::optional<std::string> protocol;
  std::optional<std::string> leader;
  int64_t current_state_timestamp_ms = -1;
  std::vector<member_value> members;
  bool operator==(const group_value&) const = default;
};

std::vector<uint8_t> encode_key(const record_key& k);
std::vector<uint8_t> encode_value(const offset_value& v);
std::vector<uint8_t> encode_value(const group_value& v);

// errc::unsupported_format for key versions that are not ours (Kafka's
// newer record types): callers skip those. errc::corrupt_data otherwise.
result<record_key> decode_key(std::span<const uint8_t> bytes);
result<offset_value> decode_offset_value(std::span<const uint8_t> bytes);
result<group_value> decode_group_value(std::span<const uint8_t> bytes);

}  // namespace sluice::group
