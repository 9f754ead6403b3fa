#include "metadata/internal_log.h"

#include "base/limits.h"
#include "metadata/partition_manager.h"
#include "partition/log_replay.h"
#include "protocol/records/record_batch.h"

namespace sluice::cluster {

void internal_log::append(int32_t p, const std::vector<uint8_t>& key, const std::optional<std::vector<uint8_t>>& value,
                          std::function<void(status)> done) {
  auto part = partitions_.get(topic_, p);
  if (!part) {
    done(status(errc::not_coordinator, topic_ + "-" + std::to_string(p) + " is not here"));
    return;
  }
  if (const errc e = part->check_min_insync(); e != errc::ok) {
    done(status(e, topic_ + "-" + std::to_string(p) + " has too few in-sync replicas"));
    return;
  }
  protocol::records::record_input r;
  r.key = key;
  r.value = value;
  r.timestamp_ms = clk_.now_ms();
  auto batch = protocol::records::build_batch({}, std::span<const protocol::records::record_input>(&r, 1));
  if (!batch.ok()) {
    done(batch.err());
    return;
  }
  auto bytes = std::as_writable_bytes(std::span<uint8_t>(*batch));
  auto outcome = part->append(bytes, clk_.now_ms());
  if (outcome.error != errc::ok) {
    done(status(outcome.error, "appending to " + topic_ + "-" + std::to_string(p) + ": " + outcome.message));
    return;
  }
  part->on_committed(outcome.last, [part, done = std::move(done)](const status& s) { done(part->acks_all_outcome(s)); });
}

status internal_log::read(
    int32_t p, const std::function<void(std::span<const uint8_t>, std::optional<std::span<const uint8_t>>)>& fn,
    const std::function<bool()>& stopping) {
  auto part = partitions_.get(topic_, p);
  if (!part) return {};
  return replay_in_log_order(*part, limits::group_replay_read_bytes, stopping,
                             [&](std::span<const uint8_t>, const protocol::records::decoded_batch& d) {
                               if (d.header.is_control()) return true;
                               for (const auto& r : d.records)
                                 if (r.key) fn(*r.key, r.value);
                               return true;
                             });
}

}  // namespace sluice::cluster
