#include "storage/index.h"

#include <algorithm>
#include <string>

#include "base/endian.h"
#include "base/limits.h"

namespace sluice::storage {

static_assert(offset_index::kEntryBytes == limits::offset_index_entry_bytes);
static_assert(time_index::kEntryBytes == limits::time_index_entry_bytes);

void offset_index::append(entry e) {
  SLUICE_ASSERT(entries_.empty() || (e.rel > entries_.back().rel && e.pos > entries_.back().pos),
                "offset index entries must ascend");
  entries_.push_back(e);
}

std::optional<offset_index::entry> offset_index::floor_offset(int32_t rel) const {
  auto it = std::upper_bound(entries_.begin(), entries_.end(), rel,
                             [](int32_t r, const entry& e) { return r < e.rel; });
  if (it == entries_.begin()) return std::nullopt;
  return *(it - 1);
}

std::optional<offset_index::entry> offset_index::floor_position(int64_t pos) const {
  auto it = std::upper_bound(entries_.begin(), entries_.end(), pos,
                             [](int64_t p, const entry& e) { return p < e.pos; });
  if (it == entries_.begin()) return std::nullopt;
  return *(it - 1);
}

void offset_index::truncate_from(int32_t rel) {
  auto it = std::lower_bound(entries_.begin(), entries_.end(), rel,
                             [](const entry& e, int32_t r) { return e.rel < r; });
  entries_.erase(it, entries_.end());
}

std::optional<offset_index::entry> offset_index::last() const {
  if (entries_.empty()) return std::nullopt;
  return entries_.back();
}

std::vector<std::byte> offset_index::serialize() const {
  std::vector<std::byte> out(entries_.size() * kEntryBytes);
  for (size_t i = 0; i < entries_.size(); ++i) {
    store_be<int32_t>(out.data() + i * kEntryBytes, entries_[i].rel);
    store_be<int32_t>(out.data() + i * kEntryBytes + 4, entries_[i].pos);
  }
  return out;
}

result<offset_index> offset_index::parse(std::span<const std::byte> bytes, uint64_t log_size) {
  if (bytes.size() % kEntryBytes != 0)
    return error{errc::corrupt_data, "offset index size " + std::to_string(bytes.size())};
  offset_index idx;
  idx.entries_.reserve(bytes.size() / kEntryBytes);
  for (size_t p = 0; p < bytes.size(); p += kEntryBytes) {
    entry e{load_be<int32_t>(bytes.data() + p), load_be<int32_t>(bytes.data() + p + 4)};
    const bool ascends = idx.entries_.empty() ||
                         (e.rel > idx.entries_.back().rel && e.pos > idx.entries_.back().pos);
    if (e.rel < 0 || e.pos <= 0 || static_cast<uint64_t>(e.pos) >= log_size || !ascends)
      return error{errc::corrupt_data, "offset index entry " + std::to_string(p / kEntryBytes) +
                                           " out of order or beyond the log"};
    idx.entries_.push_back(e);
  }
  return idx;
}

void time_index::maybe_append(entry e) {
  if (!entries_.empty() && (e.ts <= entries_.back().ts || e.rel <= entries_.back().rel)) return;
  entries_.push_back(e);
}

std::optional<time_index::entry> time_index::last_before(int64_t ts) const {
  auto it = std::lower_bound(entries_.begin(), entries_.end(), ts,
                             [](const entry& e, int64_t t) { return e.ts < t; });
  if (it == entries_.begin()) return std::nullopt;
  return *(it - 1);
}

void time_index::truncate_from(int32_t rel) {
  auto it = std::lower_bound(entries_.begin(), entries_.end(), rel,
                             [](const entry& e, int32_t r) { return e.rel < r; });
  entries_.erase(it, entries_.end());
}

std::optional<time_index::entry> time_index::last() const {
  if (entries_.empty()) return std::nullopt;
  return entries_.back();
}

std::vector<std::byte> time_index::serialize() const {
  std::vector<std::byte> out(entries_.size() * kEntryBytes);
  for (size_t i = 0; i < entries_.size(); ++i) {
    store_be<int64_t>(out.data() + i * kEntryBytes, entries_[i].ts);
    store_be<int32_t>(out.data() + i * kEntryBytes + 8, entries_[i].rel);
  }
  return out;
}

result<time_index> time_index::parse(std::span<const std::byte> bytes) {
  if (bytes.size() % kEntryBytes != 0)
    return error{errc::corrupt_data, "time index size " + std::to_string(bytes.size())};
  time_index idx;
  idx.entries_.reserve(bytes.size() / kEntryBytes);
  for (size_t p = 0; p < bytes.size(); p += kEntryBytes) {
    entry e{load_be<int64_t>(bytes.data() + p), load_be<int32_t>(bytes.data() + p + 8)};
    const bool ascends = idx.entries_.empty() ||
                         (e.ts > idx.entries_.back().ts && e.rel > idx.entries_.back().rel);
    if (e.rel < 0 || !ascends)
      return error{errc::corrupt_data,
                   "time index entry " + std::to_string(p / kEntryBytes) + " out of order"};
    idx.entries_.push_back(e);
  }
  return idx;
}

}  // namespace sluice::storage
