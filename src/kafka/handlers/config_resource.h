#pragma once

// The resources of DescribeConfigs, AlterConfigs and IncrementalAlterConfigs
// and how a broker or group resource's name is read, shared by their
// handlers.

#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <variant>

#include "base/limits.h"

namespace sluice::kafka {

inline constexpr int8_t resource_topic = 2;   // Kafka's ConfigResource.Type TOPIC
inline constexpr int8_t resource_broker = 4;  // BROKER
inline constexpr int8_t resource_group = 32;  // GROUP (KIP-848, KIP-932): per-group configs

// A broker resource names this node ("<node.id>") or the cluster-wide
// default (""). Any other name is INVALID_REQUEST with Kafka's message,
// returned as the string.
struct broker_level {
  bool cluster_default = false;
};
inline std::variant<broker_level, std::string> parse_broker_resource(const std::string& name,
                                                                     int32_t node_id) {
  if (name.empty()) return broker_level{true};
  int32_t id = -1;
  auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), id);
  if (ec != std::errc() || end != name.data() + name.size() || id < 0) {
    return "Broker id must be an integer, but it is: " + name;
  }
  if (id != node_id) {
    return "Unexpected broker id, expected " + std::to_string(node_id) + ", but received " + name;
  }
  return broker_level{false};
}

// A group resource names one group by its id; "" (Kafka's default group
// resource) is refused with Kafka's INVALID_REQUEST message, returned as the
// string, and so is an id longer than any group may have.
inline std::optional<std::string> check_group_resource(const std::string& name) {
  if (name.empty()) return "Default group resources are not allowed.";
  if (name.size() > limits::max_group_id_bytes) {
    return "Group id longer than " + std::to_string(limits::max_group_id_bytes) + " bytes";
  }
  return std::nullopt;
}

}  // namespace sluice::kafka
