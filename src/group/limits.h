#pragma once

// The group coordinator's hard limits. They bound what client input can
// make the coordinator hold in memory and write in one record. (The
// operator's settings, group.max.size and the session timeout range, live in
// the config schema; these are the fixed bounds beside them. They sit here
// rather than in base/limits.h only because src/base is owned elsewhere;
// move them there when convenient.)

#include <cstddef>
#include <cstdint>

namespace sluice::group::limits {

// Groups one broker coordinates, counting groups that only hold offsets.
inline constexpr size_t max_groups = 100'000;
// A group id; Kafka has no bound, but ours must fit the int16-length string
// of the record key with room to spare.
inline constexpr size_t max_group_id_bytes = 2048;
// Client-chosen ids: group.instance.id, protocol type and names.
inline constexpr size_t max_name_bytes = 2048;
// Protocols one member may offer in JoinGroup (the consumer offers one per
// assignor, usually one to three).
inline constexpr size_t max_protocols_per_member = 32;
// Sum of one member's protocol metadata bytes (subscriptions, with owned
// partitions for the cooperative protocol).
inline constexpr size_t max_member_metadata_bytes = 256 * 1024;
// One member's assignment as the leader sends it in SyncGroup.
inline constexpr size_t max_assignment_bytes = 256 * 1024;
// Kafka's offset.metadata.max.bytes default: the metadata string of one
// committed offset.
inline constexpr size_t max_offset_metadata_bytes = 4096;
// Committed partitions one group may hold.
inline constexpr size_t max_offsets_per_group = 100'000;
// max.message.bytes of __consumer_offsets: one group record of a large group
// must fit.
inline constexpr int32_t offsets_topic_max_message_bytes = 16 * 1024 * 1024;
// How often the coordinator's timer runs (session and rebalance timeouts,
// the initial rebalance delay); timeouts fire up to this late.
inline constexpr int64_t tick_interval_ms = 50;

}  // namespace sluice::group::limits
