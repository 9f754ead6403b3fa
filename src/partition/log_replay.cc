#include "partition/log_replay.h"

#include <string>

#include "partition/partition.h"

namespace sluice::cluster {

status replay_in_log_order(partition& part, size_t read_bytes, const std::function<bool()>& stopping,
                           const std::function<bool(std::span<const uint8_t> bytes,
                                                    const protocol::records::decoded_batch& batch)>& fn) {
  offset o = part.log_start_offset();
  const offset end = part.log_end_offset();
  const std::string name = part.id().topic + "-" + std::to_string(part.id().partition);
  while (o < end) {
    if (stopping()) return status(errc::shutting_down, "stopping");
    auto bytes = part.read_bytes(o, read_bytes);
    if (!bytes.ok()) return status(bytes.code(), name + " at " + std::to_string(o.value()) + ": " + bytes.err().message);
    auto data = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size());
    auto batches = protocol::records::split_batches(data);
    if (!batches.ok() || batches->empty())
      return status(errc::corrupt_data, name + " at " + std::to_string(o.value()) + ": unreadable batches");
    for (const auto& b : *batches) {
      auto decoded = protocol::records::decode_batch(b);
      if (!decoded.ok())
        return status(decoded.code(), name + " at " + std::to_string(o.value()) + ": " + decoded.err().message);
      o = offset(decoded->header.last_offset() + 1);
      if (!fn(b, *decoded)) return {};
    }
  }
  return {};
}

}  // namespace sluice::cluster
