#include "partition/producer_state.h"

#include <algorithm>
#include <climits>
#include <vector>

#include "base/crc32c.h"
#include "base/endian.h"
#include "base/limits.h"
#include "model/record_batch.h"
#include "protocol/records/control.h"

namespace sluice::cluster {
namespace {

namespace batch = model::batch;

// The sequence that follows `s` (sequences wrap from INT32_MAX to 0).
int32_t next_sequence(int32_t s) { return s == INT32_MAX ? 0 : s + 1; }

constexpr uint32_t snapshot_magic = 0x534c5053;  // "SLPS"
// Version 2 adds each producer's coordinator epoch and open transaction;
// version 1 (no transactions) still loads.
constexpr uint16_t snapshot_version = 2;

}  // namespace

producer_batch producer_batch::from_header(const batch::header& h) {
  producer_batch b;
  b.producer_id = h.producer_id;
  b.producer_epoch = h.producer_epoch;
  b.first_sequence = h.base_sequence;
  int64_t last = static_cast<int64_t>(b.first_sequence) + h.last_offset_delta;
  b.last_sequence = static_cast<int32_t>(last > INT32_MAX ? last - INT32_MAX - 1 : last);
  b.max_timestamp = h.max_timestamp;
  b.transactional = h.is_transactional();
  b.control = h.is_control();
  return b;
}

producer_check producer_state::check(const producer_batch& b, append_origin origin) const {
  producer_check r;
  if (!b.idempotent()) return r;
  if (origin == append_origin::coordinator) {
    // Kafka's ProducerAppendInfo with AppendOrigin.COORDINATOR: the epoch
    // check alone (no sequences to check).
    if (b.producer_epoch < 0) {
      r.error = errc::invalid_record;
      r.message = "a coordinator's batch for producer " + std::to_string(b.producer_id) + " without an epoch";
      return r;
    }
    auto it = producers_.find(b.producer_id);
    if (it != producers_.end() && b.producer_epoch < it->second.epoch) {
      r.error = errc::invalid_producer_epoch;
      r.message = "producer " + std::to_string(b.producer_id) + " epoch " + std::to_string(b.producer_epoch) +
                  " is older than the current epoch " + std::to_string(it->second.epoch);
    }
    return r;
  }
  if (b.producer_epoch < 0 || b.first_sequence < 0) {
    r.error = errc::invalid_record;
    r.message = "idempotent batch without producer epoch or sequence";
    return r;
  }
  auto it = producers_.find(b.producer_id);
  if (it == producers_.end()) {
    // An unknown producer: new, or its state expired or its batches were
    // removed by retention, or its first batches never reached this
    // leader (they were on a leader deposed before they were replicated,
    // and were truncated away). A new producer starts at sequence 0. Any
    // other first sequence is refused with UNKNOWN_PRODUCER_ID, as Kafka
    // did before KIP-360: accepting it (as Kafka 2.5+ does) tells the
    // client every lower sequence is stored, and an idempotent client
    // (librdkafka) then reports its uncertain earlier batches delivered
    // when the last case lost them. The client resets its sequence under
    // a bumped epoch (KIP-360) or fails those messages; none is lost
    // silently.
    if (b.first_sequence != 0) {
      r.error = errc::unknown_producer_id;
      r.message = "no state for producer " + std::to_string(b.producer_id) + " here, and sequence " +
                  std::to_string(b.first_sequence) + " is not a new producer's first";
    }
    return r;
  }
  const entry& e = it->second;
  if (!b.transactional && e.txn_first && b.producer_epoch <= e.epoch) {
    r.error = errc::invalid_txn_state;
    r.message = "producer " + std::to_string(b.producer_id) + " has a transaction open here since offset " +
                std::to_string(e.txn_first->value()) + "; a non-transactional batch cannot join it";
    return r;
  }
  if (b.producer_epoch < e.epoch) {
    r.error = errc::invalid_producer_epoch;
    r.message = "producer " + std::to_string(b.producer_id) + " epoch " + std::to_string(b.producer_epoch) +
                " is older than the current epoch " + std::to_string(e.epoch);
    return r;
  }
  if (b.producer_epoch > e.epoch) {
    // A bumped epoch restarts the sequence at 0.
    if (b.first_sequence != 0) {
      r.error = errc::out_of_order_sequence;
      r.message = "new epoch " + std::to_string(b.producer_epoch) + " must start at sequence 0, not " +
                  std::to_string(b.first_sequence);
    }
    return r;
  }
  for (const auto& m : e.batches) {
    if (m.first_sequence == b.first_sequence && m.last_sequence == b.last_sequence) {
      r.duplicate_base = m.base;
      r.duplicate_last = m.last;
      return r;
    }
  }
  if (!e.batches.empty() && b.first_sequence != next_sequence(e.batches.back().last_sequence)) {
    r.error = errc::out_of_order_sequence;
    r.message = "producer " + std::to_string(b.producer_id) + " sent sequence " +
                std::to_string(b.first_sequence) + ", expected " +
                std::to_string(next_sequence(e.batches.back().last_sequence));
  }
  return r;
}

void producer_state::record(const producer_batch& b, offset base, offset last) {
  if (!b.idempotent()) return;
  entry& e = producers_[b.producer_id];
  if (b.producer_epoch != e.epoch) e.batches.clear();
  e.epoch = b.producer_epoch;
  e.last_timestamp = std::max(e.last_timestamp, b.max_timestamp);
  // A coordinator's batch has no sequence: nothing for a retry to match.
  if (b.first_sequence >= 0) {
    e.batches.push_back({b.first_sequence, b.last_sequence, base, last});
    while (e.batches.size() > batches_per_producer) e.batches.pop_front();
  }
  if (b.transactional && !e.txn_first) {
    e.txn_first = base;
    open_[base] = b.producer_id;
  }
}

producer_check producer_state::check_marker(int64_t producer_id, int16_t producer_epoch,
                                            int32_t coordinator_epoch) const {
  producer_check r;
  if (producer_id < 0 || producer_epoch < 0) {
    r.error = errc::invalid_txn_marker;
    r.message = "a transaction marker needs a producer id and epoch";
    return r;
  }
  auto it = producers_.find(producer_id);
  if (it == producers_.end()) return r;
  const entry& e = it->second;
  if (producer_epoch < e.epoch) {
    r.error = errc::invalid_producer_epoch;
    r.message = "marker for producer " + std::to_string(producer_id) + " at epoch " + std::to_string(producer_epoch) +
                ", older than its current epoch " + std::to_string(e.epoch);
  } else if (coordinator_epoch < e.coordinator_epoch) {
    r.error = errc::coordinator_fenced;
    r.message = "marker from coordinator epoch " + std::to_string(coordinator_epoch) + ", older than " +
                std::to_string(e.coordinator_epoch);
  }
  return r;
}

completed_txn producer_state::record_marker(int64_t producer_id, int16_t producer_epoch, int32_t coordinator_epoch,
                                            bool commit, offset at, int64_t timestamp_ms) {
  entry& e = producers_[producer_id];
  completed_txn t{producer_id, e.txn_first.value_or(at), at, !commit};
  if (e.txn_first) open_.erase(*e.txn_first);
  e.txn_first.reset();
  // A marker at a newer epoch (a fenced producer's transaction aborted under
  // the bump, or transaction version 2's bump at every end) starts that
  // epoch's sequences afresh.
  if (producer_epoch != e.epoch) e.batches.clear();
  e.epoch = producer_epoch;
  e.coordinator_epoch = coordinator_epoch;
  e.last_timestamp = std::max(e.last_timestamp, timestamp_ms);
  return t;
}

result<std::optional<completed_txn>> producer_state::apply_stored(const batch::header& h,
                                                                  std::span<const std::byte> bytes) {
  if (!h.is_control()) {
    record(producer_batch::from_header(h), h.base_offset, h.last_offset());
    return std::optional<completed_txn>();
  }
  SLUICE_ASSIGN_OR_RETURN(auto m, protocol::records::parse_marker(bytes.subspan(0, h.size_bytes())));
  return std::optional<completed_txn>(record_marker(h.producer_id, h.producer_epoch, m.coordinator_epoch, m.commit,
                                                    h.base_offset, h.max_timestamp));
}

std::vector<producer_info> producer_state::producers() const {
  std::vector<producer_info> out;
  out.reserve(producers_.size());
  for (const auto& [id, e] : producers_) {
    out.push_back({id, e.epoch, e.batches.empty() ? -1 : e.batches.back().last_sequence, e.last_timestamp,
                   e.coordinator_epoch, e.txn_first ? e.txn_first->value() : -1});
  }
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.producer_id < b.producer_id; });
  return out;
}

status producer_state::replay(std::span<const std::byte> batches,
                              const std::function<void(const completed_txn&)>& ended) {
  size_t pos = 0;
  while (pos + batch::header_bytes <= batches.size()) {
    const std::byte* p = batches.data() + pos;
    batch::header h = batch::parse(p);
    SLUICE_TRY(batch::check(h, batches.size() - pos, batch::strictness::stored));
    SLUICE_ASSIGN_OR_RETURN(auto t, apply_stored(h, batches.subspan(pos)));
    if (t && ended) ended(*t);
    pos += h.size_bytes();
  }
  if (pos != batches.size()) return status(errc::corrupt_data, "partial batch in producer state replay");
  return {};
}

void producer_state::expire(int64_t min_timestamp_ms, size_t max_producers) {
  std::erase_if(producers_,
                [&](const auto& kv) { return !kv.second.txn_first && kv.second.last_timestamp < min_timestamp_ms; });
  if (producers_.size() <= max_producers) return;
  std::vector<std::pair<int64_t, int64_t>> by_age;  // (last timestamp, id)
  by_age.reserve(producers_.size());
  for (const auto& [id, e] : producers_)
    if (!e.txn_first) by_age.emplace_back(e.last_timestamp, id);
  std::sort(by_age.begin(), by_age.end());
  const size_t excess = producers_.size() - max_producers;
  for (size_t i = 0; i < excess && i < by_age.size(); ++i) producers_.erase(by_age[i].second);
}

std::vector<std::byte> producer_state::encode_snapshot(offset next_offset) const {
  std::vector<std::byte> out;
  auto put = [&](auto v) {
    size_t at = out.size();
    out.resize(at + sizeof v);
    store_be(out.data() + at, v);
  };
  put(snapshot_magic);
  put(snapshot_version);
  put(next_offset.value());
  put(static_cast<uint32_t>(producers_.size()));
  for (const auto& [id, e] : producers_) {
    put(id);
    put(e.epoch);
    put(e.last_timestamp);
    put(static_cast<uint8_t>(e.batches.size()));
    for (const auto& m : e.batches) {
      put(m.first_sequence);
      put(m.last_sequence);
      put(m.base.value());
      put(m.last.value());
    }
    put(e.coordinator_epoch);
    put(e.txn_first ? e.txn_first->value() : int64_t{-1});
  }
  put(crc32c(out.data(), out.size()));
  return out;
}

result<producer_state::loaded> producer_state::load_snapshot(io::filesystem& fs, const std::string& path) {
  SLUICE_ASSIGN_OR_RETURN(auto bytes, fs.read_all(path, limits::max_checkpoint_file_bytes));
  auto corrupt = [&](const char* why) { return error{errc::corrupt_data, path + ": " + why}; };
  if (bytes.size() < 4 + 2 + 8 + 4 + 4) return corrupt("too short");
  size_t body = bytes.size() - 4;
  if (crc32c(bytes.data(), body) != load_be<uint32_t>(bytes.data() + body)) return corrupt("checksum mismatch");
  size_t pos = 0;
  bool short_read = false;
  auto get = [&]<class T>(T) -> T {
    if (pos + sizeof(T) > body) {
      short_read = true;
      return T{};
    }
    T v = load_be<T>(bytes.data() + pos);
    pos += sizeof(T);
    return v;
  };
  if (get(uint32_t{}) != snapshot_magic) return corrupt("not a producer state snapshot");
  const uint16_t version = get(uint16_t{});
  if (version != 1 && version != snapshot_version) return corrupt("unknown snapshot version");
  loaded l{producer_state{}, offset(get(int64_t{}))};
  uint32_t n = get(uint32_t{});
  for (uint32_t i = 0; i < n && !short_read; ++i) {
    int64_t id = get(int64_t{});
    entry e;
    e.epoch = get(int16_t{});
    e.last_timestamp = get(int64_t{});
    uint8_t nb = get(uint8_t{});
    if (nb > batches_per_producer) return corrupt("too many batches for a producer");
    for (uint8_t j = 0; j < nb; ++j) {
      batch_meta m{get(int32_t{}), get(int32_t{}), offset(get(int64_t{})), offset(get(int64_t{}))};
      e.batches.push_back(m);
    }
    if (version >= 2) {
      e.coordinator_epoch = get(int32_t{});
      const int64_t first = get(int64_t{});
      if (first < -1) return corrupt("negative transaction start");
      if (first >= 0) {
        e.txn_first = offset(first);
        l.state.open_[offset(first)] = id;
      }
    }
    l.state.producers_[id] = std::move(e);
  }
  if (short_read || pos != body) return corrupt("truncated or trailing bytes");
  return l;
}

}  // namespace sluice::cluster

namespace sluice::cluster {

std::vector<offset> producer_state::last_batch_bases() const {
  std::vector<offset> out;
  for (const auto& [id, e] : producers_)
    if (!e.batches.empty()) out.push_back(e.batches.back().base);
  return out;
}

}  // namespace sluice::cluster
