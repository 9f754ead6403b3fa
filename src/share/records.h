#pragma once

// The keys and values the share coordinator writes to __share_group_state
// (schema/share_state.schema has the layout, docs/share_groups.md the
// rules), and the share partition -> coordinator partition rule. Decoding
// treats its input as untrusted: a corrupt or foreign record is an error
// value, never an assertion.

#include <compare>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "base/types.h"
#include "share/share_partition.h"

namespace sluice::share {

inline constexpr std::string_view share_state_topic = "__share_group_state";

// A share partition: a share group's view of one topic partition, named as
// Kafka names it (the topic by id, so a topic deleted and created again
// under its name starts with no state).
struct share_key {
  std::string group_id;
  sluice::topic_id topic_id{};
  int32_t partition = 0;
  auto operator<=>(const share_key&) const = default;
  bool operator==(const share_key&) const = default;
};
// "group:topic-id-hex:partition", for logs.
std::string to_string(const share_key& k);

// The partition of __share_group_state that holds `k`: Kafka's
// Utils.abs(hashCode) % partitions of "group:topicId:partition"
// (base/java_hash.h). `partitions` > 0.
int32_t partition_for(const share_key& k, int32_t partitions);

// What a share partition's snapshot record holds.
struct share_snapshot {
  int32_t state_epoch = 0;
  int32_t leader_epoch = -1;
  durable_state state;
  int64_t write_timestamp_ms = 0;
  bool operator==(const share_snapshot&) const = default;
};

// A durable state in any of its wire forms (__share_group_state's value,
// ReadShareGroupState's answer, WriteShareGroupState's request), which
// name its fields alike: start_offset, state_batches and the dead-letter
// fields and archived_count. from_wire() checks nothing: validate() the
// result.
template <class W>
void to_wire(const durable_state& d, W& w) {
  w.start_offset = d.start_offset;
  w.state_batches.clear();
  for (const auto& b : d.batches) {
    auto& o = w.state_batches.emplace_back();
    o.first_offset = b.first_offset;
    o.last_offset = b.last_offset;
    o.delivery_state = static_cast<int8_t>(b.state);
    o.delivery_count = b.delivery_count;
  }
  w.dead_letter_producer_id = d.dead_letter_producer_id;
  w.dead_letter_producer_epoch = d.dead_letter_producer_epoch;
  w.dead_letter_sequence = d.dead_letter_sequence;
  w.pending_dead_letters.clear();
  for (const auto& l : d.pending_dead_letters) {
    auto& o = w.pending_dead_letters.emplace_back();
    o.offset = l.offset;
    o.delivery_count = l.delivery_count;
    o.reason = static_cast<int8_t>(l.reason);
    o.sequence = l.sequence;
  }
  w.archived_count = d.archived_count;
}

template <class W>
durable_state from_wire(const W& w) {
  durable_state d;
  d.start_offset = w.start_offset;
  for (const auto& b : w.state_batches)
    d.batches.push_back({b.first_offset, b.last_offset, static_cast<record_state>(b.delivery_state), b.delivery_count});
  d.dead_letter_producer_id = w.dead_letter_producer_id;
  d.dead_letter_producer_epoch = w.dead_letter_producer_epoch;
  d.dead_letter_sequence = w.dead_letter_sequence;
  for (const auto& l : w.pending_dead_letters)
    d.pending_dead_letters.push_back(
        {l.offset, l.delivery_count, static_cast<archive_reason>(l.reason), l.sequence});
  d.archived_count = w.archived_count;
  return d;
}

std::vector<uint8_t> encode_key(const share_key& k);
std::vector<uint8_t> encode_snapshot(const share_snapshot& s);
result<share_key> decode_key(std::span<const uint8_t> bytes);
// Checks what share_partition's constructor relies on: batches in offset
// order, none below the start offset, none overlapping, known states,
// delivery counts not negative.
result<share_snapshot> decode_snapshot(std::span<const uint8_t> bytes);
// The same checks of a state from elsewhere (a WriteShareGroupState).
status validate(const durable_state& d);

}  // namespace sluice::share
