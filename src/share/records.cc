#include "share/records.h"

#include "base/java_hash.h"
#include "base/limits.h"
#include "protocol/codec.h"
#include "protocol/messages.h"

namespace sluice::share {

namespace {

constexpr int16_t snapshot_key_type = 0;
constexpr int16_t snapshot_value_version = 0;

}  // namespace

std::string to_string(const share_key& k) {
  return k.group_id + ":" + to_hex(k.topic_id) + ":" + std::to_string(k.partition);
}

int32_t partition_for(const share_key& k, int32_t partitions) {
  return java_hash_partition(to_string(k), partitions);
}

std::vector<uint8_t> encode_key(const share_key& k) {
  protocol::share_snapshot_key key;
  key.group_id = k.group_id;
  key.topic_id = k.topic_id;
  key.partition = k.partition;
  protocol::writer w;
  w.write_int16(snapshot_key_type);
  key.encode(w, 0);
  auto b = w.owned_bytes();
  return {b.begin(), b.end()};
}

std::vector<uint8_t> encode_snapshot(const share_snapshot& s) {
  protocol::share_snapshot_value v;
  v.state_epoch = s.state_epoch;
  v.leader_epoch = s.leader_epoch;
  to_wire(s.state, v);
  v.write_timestamp_ms = s.write_timestamp_ms;
  protocol::writer w;
  w.write_int16(snapshot_value_version);
  v.encode(w, snapshot_value_version);
  auto b = w.owned_bytes();
  return {b.begin(), b.end()};
}

result<share_key> decode_key(std::span<const uint8_t> bytes) {
  protocol::reader r(bytes);
  const int16_t type = r.read_int16();
  if (!r.ok()) return error{errc::corrupt_data, "share state key: too short"};
  if (type != snapshot_key_type) {
    return error{errc::corrupt_data, "share state key: unknown record type " + std::to_string(type)};
  }
  protocol::share_snapshot_key key;
  SLUICE_TRY(key.decode(r, 0));
  if (r.remaining() != 0) return error{errc::corrupt_data, "share state key: bytes after the key"};
  if (key.group_id.empty() || key.partition < 0) {
    return error{errc::corrupt_data, "share state key: empty group id or negative partition"};
  }
  return share_key{std::move(key.group_id), key.topic_id, key.partition};
}

status validate(const durable_state& d) {
  if (d.start_offset < 0) return status(errc::corrupt_data, "share state: negative start offset");
  int64_t next = d.start_offset;
  for (const auto& b : d.batches) {
    if (b.state != record_state::available && b.state != record_state::acknowledged &&
        b.state != record_state::archived) {
      return status(errc::corrupt_data,
                    "share state: unknown delivery state " + std::to_string(static_cast<int>(b.state)));
    }
    if (b.last_offset - d.start_offset >= limits::max_share_max_record_locks) {
      // More in flight than any setting allows: a share partition rebuilt
      // from it would hold more than its bound.
      return status(errc::corrupt_data, "share state: in-flight records past the largest window");
    }
    if (b.first_offset < next || b.last_offset < b.first_offset || b.delivery_count < 0) {
      return status(errc::corrupt_data, "share state: batches out of order, overlapping or with a negative count");
    }
    next = b.last_offset + 1;
  }
  if (d.pending_dead_letters.size() > static_cast<size_t>(limits::max_share_max_record_locks)) {
    return status(errc::corrupt_data, "share state: more pending dead letters than any window holds");
  }
  for (const auto& l : d.pending_dead_letters) {
    if (l.reason != archive_reason::rejected && l.reason != archive_reason::delivery_count_exhausted) {
      return status(errc::corrupt_data,
                    "share state: unknown dead-letter reason " + std::to_string(static_cast<int>(l.reason)));
    }
    if (l.offset < 0 || l.delivery_count < 0 || l.sequence < 0) {
      return status(errc::corrupt_data, "share state: a dead letter with a negative offset, count or sequence");
    }
  }
  return {};
}

result<share_snapshot> decode_snapshot(std::span<const uint8_t> bytes) {
  protocol::reader r(bytes);
  const int16_t version = r.read_int16();
  if (!r.ok()) return error{errc::corrupt_data, "share state value: too short"};
  if (version != snapshot_value_version) {
    return error{errc::corrupt_data, "share state value: unknown version " + std::to_string(version)};
  }
  protocol::share_snapshot_value v;
  SLUICE_TRY(v.decode(r, version));
  share_snapshot s;
  s.state_epoch = v.state_epoch;
  s.leader_epoch = v.leader_epoch;
  s.write_timestamp_ms = v.write_timestamp_ms;
  s.state = from_wire(v);
  if (auto st = validate(s.state); !st.ok()) return error{errc::corrupt_data, "share state value: " + st.err().message};
  return s;
}

}  // namespace sluice::share
