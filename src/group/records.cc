#include "group/records.h"

#include <cstring>

#include "base/endian.h"
#include "base/java_hash.h"
#include "protocol/codec.h"

namespace sluice::group {

namespace {

constexpr int16_t offset_key_version = 1;
constexpr int16_t group_key_version = 2;
constexpr int16_t offset_value_version = 4;
// Version 4's tagged field that holds the topic id (Kafka 4.1's tag).
constexpr uint32_t topic_id_tag = 0;
constexpr int16_t group_value_version = 3;

class out {
 public:
  template <class T>
  void num(T v) {
    size_t at = buf_.size();
    buf_.resize(at + sizeof(T));
    store_be<T>(buf_.data() + at, v);
  }
  // Strings longer than int16 allows cannot be produced: the coordinator
  // bounds ids and metadata below 32767 bytes before writing.
  void str(std::string_view s) {
    num<int16_t>(static_cast<int16_t>(s.size()));
    buf_.insert(buf_.end(), s.begin(), s.end());
  }
  void nullable_str(const std::optional<std::string>& s) {
    if (!s) {
      num<int16_t>(-1);
      return;
    }
    str(*s);
  }
  void bytes(std::span<const uint8_t> b) {
    num<int32_t>(static_cast<int32_t>(b.size()));
    buf_.insert(buf_.end(), b.begin(), b.end());
  }
  std::vector<uint8_t> take() { return std::move(buf_); }

 private:
  std::vector<uint8_t> buf_;
};

// A bounds-checked reader: after the first short read every later read
// fails too and ok() is false.
class in {
 public:
  explicit in(std::span<const uint8_t> b) : b_(b) {}
  template <class T>
  T num() {
    if (!need(sizeof(T))) return T{};
    T v = load_be<T>(b_.data() + pos_);
    pos_ += sizeof(T);
    return v;
  }
  std::optional<std::string> nullable_str() {
    int16_t n = num<int16_t>();
    if (n == -1) return std::nullopt;
    if (n < 0) {
      ok_ = false;
      return std::string();
    }
    if (!need(static_cast<size_t>(n))) return std::string();
    std::string s(reinterpret_cast<const char*>(b_.data() + pos_), static_cast<size_t>(n));
    pos_ += static_cast<size_t>(n);
    return s;
  }
  std::string str() {
    auto s = nullable_str();
    if (!s) {
      ok_ = false;
      return {};
    }
    return std::move(*s);
  }
  std::vector<uint8_t> bytes() {
    int32_t n = num<int32_t>();
    if (n == -1) return {};
    if (n < 0 || !need(static_cast<size_t>(n))) {
      ok_ = false;
      return {};
    }
    std::vector<uint8_t> v(b_.begin() + static_cast<ptrdiff_t>(pos_), b_.begin() + static_cast<ptrdiff_t>(pos_ + n));
    pos_ += static_cast<size_t>(n);
    return v;
  }
  bool ok() const { return ok_; }
  size_t remaining() const { return ok_ ? b_.size() - pos_ : 0; }

 private:
  bool need(size_t n) {
    if (!ok_ || b_.size() - pos_ < n) {
      ok_ = false;
      return false;
    }
    return true;
  }
  std::span<const uint8_t> b_;
  size_t pos_ = 0;
  bool ok_ = true;
};

}  // namespace

int32_t partition_for(std::string_view group_id, int32_t partitions) {
  return java_hash_partition(group_id, partitions);
}

std::vector<uint8_t> encode_key(const record_key& k) {
  out o;
  if (const auto* ok = std::get_if<offset_key>(&k)) {
    o.num<int16_t>(offset_key_version);
    o.str(ok->group);
    o.str(ok->topic);
    o.num<int32_t>(ok->partition);
  } else {
    o.num<int16_t>(group_key_version);
    o.str(std::get<group_key>(k).group);
  }
  return o.take();
}

std::vector<uint8_t> encode_value(const offset_value& v) {
  // Version 4 is flexible (Kafka's compact string and tagged fields), so
  // it is written with the protocol's codec.
  protocol::writer w;
  w.write_int16(offset_value_version);
  w.write_int64(v.offset);
  w.write_int32(v.leader_epoch);
  w.write_string(v.metadata, true);
  w.write_int64(v.commit_timestamp_ms);
  const bool has_id = v.topic_id != sluice::topic_id{};
  w.write_uvarint(has_id ? 1 : 0);
  if (has_id) {
    w.write_uvarint(topic_id_tag);
    w.write_uvarint(static_cast<uint32_t>(v.topic_id.size()));
    w.write_uuid(v.topic_id);
  }
  const auto b = w.owned_bytes();
  return std::vector<uint8_t>(b.begin(), b.end());
}

std::vector<uint8_t> encode_value(const group_value& v) {
  out o;
  o.num<int16_t>(group_value_version);
  o.str(v.protocol_type);
  o.num<int32_t>(v.generation);
  o.nullable_str(v.protocol);
  o.nullable_str(v.leader);
  o.num<int64_t>(v.current_state_timestamp_ms);
  o.num<int32_t>(static_cast<int32_t>(v.members.size()));
  for (const auto& m : v.members) {
    o.str(m.member_id);
    o.nullable_str(m.group_instance_id);
    o.str(m.client_id);
    o.str(m.client_host);
    o.num<int32_t>(m.rebalance_timeout_ms);
    o.num<int32_t>(m.session_timeout_ms);
    o.bytes(m.subscription);
    o.bytes(m.assignment);
  }
  return o.take();
}

result<record_key> decode_key(std::span<const uint8_t> bytes) {
  in r(bytes);
  int16_t version = r.num<int16_t>();
  if (!r.ok()) return error{errc::corrupt_data, "record key shorter than its version"};
  if (version == 0 || version == 1) {
    offset_key k;
    k.group = r.str();
    k.topic = r.str();
    k.partition = r.num<int32_t>();
    if (!r.ok()) return error{errc::corrupt_data, "truncated offset key"};
    return record_key(std::move(k));
  }
  if (version == 2) {
    group_key k;
    k.group = r.str();
    if (!r.ok()) return error{errc::corrupt_data, "truncated group key"};
    return record_key(std::move(k));
  }
  return error{errc::unsupported_format, "record key version " + std::to_string(version)};
}

result<offset_value> decode_offset_value(std::span<const uint8_t> bytes) {
  protocol::reader r(bytes);
  const int16_t version = r.read_int16();
  if (r.ok() && (version < 0 || version > offset_value_version))
    return error{errc::unsupported_format, "offset value version " + std::to_string(version)};
  const bool flex = version >= 4;
  offset_value v;
  v.offset = r.read_int64();
  if (version >= 3) v.leader_epoch = r.read_int32();
  v.metadata = r.read_string(flex);
  v.commit_timestamp_ms = r.read_int64();
  if (version == 1) (void)r.read_int64();  // expire timestamp: retention is ours to decide
  if (flex) {
    // Tagged fields: the topic id (tag 0) is ours; unknown tags are a
    // newer writer's and are skipped by their size.
    const uint32_t count = r.read_uvarint();
    for (uint32_t i = 0; i < count && r.ok(); ++i) {
      const uint32_t tag = r.read_uvarint();
      protocol::reader field = r.tagged_value();
      if (tag != topic_id_tag) continue;
      if (field.remaining() != v.topic_id.size()) return error{errc::corrupt_data, "offset value topic id size"};
      v.topic_id = field.read_uuid();
    }
  }
  if (!r.ok()) return error{errc::corrupt_data, "truncated offset value"};
  return v;
}

result<group_value> decode_group_value(std::span<const uint8_t> bytes) {
  in r(bytes);
  int16_t version = r.num<int16_t>();
  if (r.ok() && (version < 0 || version > group_value_version))
    return error{errc::unsupported_format, "group value version " + std::to_string(version)};
  group_value v;
  v.protocol_type = r.str();
  v.generation = r.num<int32_t>();
  v.protocol = r.nullable_str();
  v.leader = r.nullable_str();
  if (version >= 2) v.current_state_timestamp_ms = r.num<int64_t>();
  int32_t n = r.num<int32_t>();
  // Each member takes at least 20 bytes, so a count larger than the bytes
  // left is corrupt, and memory stays bounded by the input.
  if (!r.ok() || n < 0 || static_cast<size_t>(n) > r.remaining() / 20)
    return error{errc::corrupt_data, "bad group value member count"};
  v.members.reserve(static_cast<size_t>(n));
  for (int32_t i = 0; i < n && r.ok(); ++i) {
    member_value m;
    m.member_id = r.str();
    if (version >= 3) m.group_instance_id = r.nullable_str();
    m.client_id = r.str();
    m.client_host = r.str();
    if (version >= 1) m.rebalance_timeout_ms = r.num<int32_t>();
    m.session_timeout_ms = r.num<int32_t>();
    m.subscription = r.bytes();
    m.assignment = r.bytes();
    v.members.push_back(std::move(m));
  }
  if (!r.ok()) return error{errc::corrupt_data, "truncated group value"};
  return v;
}

}  // namespace sluice::group
