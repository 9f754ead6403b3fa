#pragma once

// Kafka's words as types where mixing them up would be a bug. An `offset` is
// a position in a partition's log (counted in records); a file position is a
// byte position in a segment file and is a plain uint64_t named *_pos.
//
//   log start offset  the first offset still readable in a partition
//   log end offset    one past the last offset appended (the next offset)
//   high watermark    one past the last offset every in-sync replica has;
//                     consumers read below it
//   leader epoch      the number of the leadership term that wrote a batch
//   topic id          a topic's UUID (KIP-516), new each time a topic is
//                     created, so a topic deleted and created again under
//                     its name is told apart; all zero means "no id"

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <compare>
#include <cstdint>
#include <functional>

namespace sluice {

// A strongly typed integer: explicit construction, comparison, and only the
// arithmetic that makes sense for the Tag.
template <class T, class Tag>
class strong_int {
 public:
  using value_type = T;
  constexpr strong_int() = default;
  constexpr explicit strong_int(T v) : v_(v) {}
  constexpr T value() const { return v_; }
  constexpr auto operator<=>(const strong_int&) const = default;

 private:
  T v_{};
};

struct offset_tag {};
// An offset: distance arithmetic with int64_t is allowed, offset + offset is not.
class offset : public strong_int<int64_t, offset_tag> {
 public:
  using strong_int::strong_int;
  constexpr offset operator+(int64_t d) const { return offset(value() + d); }
  constexpr offset operator-(int64_t d) const { return offset(value() - d); }
  constexpr int64_t operator-(offset o) const { return value() - o.value(); }
  constexpr offset& operator+=(int64_t d) { return *this = *this + d; }
  constexpr offset& operator++() { return *this = *this + 1; }
  constexpr auto operator<=>(const offset&) const = default;
};

struct epoch_tag {};
using leader_epoch = strong_int<int32_t, epoch_tag>;

using topic_id = std::array<uint8_t, 16>;

// A topic id as 32 lower-case hex digits (the metadata files and records),
// and back: nullopt unless exactly 32 hex digits.
std::string to_hex(const topic_id& id);
std::optional<topic_id> topic_id_from_hex(std::string_view hex);
// A new random topic id; never all zero (which means "no id" on the wire).
topic_id new_topic_id();

// A partition within a topic.
struct partition_id {
  int32_t value = 0;
  constexpr auto operator<=>(const partition_id&) const = default;
};

}  // namespace sluice

template <>
struct std::hash<sluice::offset> {
  size_t operator()(sluice::offset o) const noexcept { return std::hash<int64_t>()(o.value()); }
};
