// AlterConfigs (replaces a topic's overrides) and IncrementalAlterConfigs
// (set, delete, append, subtract). Validated by config/dynamic.h; an invalid
// value is refused with INVALID_CONFIG naming the key and changes nothing.
// A valid change is persisted, then applied to the running partitions.

#include "cluster/partition_manager.h"
#include "config/dynamic.h"
#include "kafka/dispatcher.h"
#include "kafka/handlers/handlers.h"

namespace sluice::kafka {

namespace {

constexpr int8_t resource_topic = 2;
constexpr int8_t resource_broker = 4;

// Checks the resource and returns its topic's current overrides, or fills
// `out` with the error.
template <class resource_response>
std::optional<config::config_map> current_overrides(cluster::partition_manager& pm, int8_t type,
                                                    const std::string& name, resource_response& out) {
  out.resource_type = type;
  out.resource_name = name;
  if (type == resource_broker) {
    out.error_code = to_wire(error_code::invalid_request);
    out.error_message = "broker settings cannot be changed at runtime yet; restart with the new value";
    return std::nullopt;
  }
  if (type != resource_topic) {
    out.error_code = to_wire(error_code::invalid_request);
    out.error_message = "resource type " + std::to_string(type) + " is not supported";
    return std::nullopt;
  }
  auto t = pm.topic(name);
  if (!t) {
    out.error_code = to_wire(error_code::unknown_topic_or_partition);
    out.error_message = "topic '" + name + "' does not exist";
    return std::nullopt;
  }
  return t->overrides;
}

template <class resource_response>
void apply(cluster::partition_manager& pm, const std::string& topic, const result<config::config_map>& next,
           bool validate_only, resource_response& out) {
  if (!next.ok()) {
    out.error_code = to_wire(to_kafka_error(next.code()));
    out.error_message = next.err().message;
    return;
  }
  if (validate_only) return;
  if (auto s = pm.set_topic_overrides(topic, *next); !s.ok()) {
    out.error_code = to_wire(to_kafka_error(s.code()));
    out.error_message = s.err().message;
  }
}

}  // namespace

void handle_alter_configs(request req) {
  auto body = decode_body<protocol::alter_configs_request>(req);
  if (!body) return;
  auto& pm = *req.svc->partitions;
  protocol::alter_configs_response resp;
  for (const auto& r : body->resources) {
    auto& out = resp.responses.emplace_back();
    auto current = current_overrides(pm, r.resource_type, r.resource_name, out);
    if (!current) continue;
    std::vector<config::config_entry> entries;
    for (const auto& c : r.configs) entries.push_back({c.name, c.value});
    apply(pm, r.resource_name, config::make_topic_overrides(*pm.broker_config(), entries), body->validate_only, out);
  }
  req.respond(resp);
}

void handle_incremental_alter_configs(request req) {
  auto body = decode_body<protocol::incremental_alter_configs_request>(req);
  if (!body) return;
  auto& pm = *req.svc->partitions;
  protocol::incremental_alter_configs_response resp;
  for (const auto& r : body->resources) {
    auto& out = resp.responses.emplace_back();
    auto current = current_overrides(pm, r.resource_type, r.resource_name, out);
    if (!current) continue;
    std::vector<config::alter_request> ops;
    bool bad_op = false;
    for (const auto& c : r.configs) {
      if (c.config_operation < 0 || c.config_operation > 3) bad_op = true;
      ops.push_back({c.name, static_cast<config::alter_op>(c.config_operation), c.value});
    }
    if (bad_op) {
      out.error_code = to_wire(error_code::invalid_request);
      out.error_message = "config_operation must be 0 (set), 1 (delete), 2 (append) or 3 (subtract)";
      continue;
    }
    apply(pm, r.resource_name, config::alter_topic_overrides(*pm.broker_config(), *current, ops), body->validate_only,
          out);
  }
  req.respond(resp);
}

}  // namespace sluice::kafka
