// AlterConfigs (replaces a resource's whole set of values) and
// IncrementalAlterConfigs (set, delete, append, subtract), for topics, for
// the broker: its own dynamic values (resource name = node.id) or the
// cluster-wide default (resource name ""), and for groups (resource type
// 32, named by group id, whether or not the group exists). Validated by
// config/dynamic.h and config/group_config.h;
// a refused request changes nothing: INVALID_CONFIG naming the key for a bad
// value, INVALID_REQUEST for a broker setting that cannot change at runtime
// or another broker's id. A valid change is persisted, then applied to the
// running partitions and subsystems (partition_manager).
//
// In a cluster a topic's configs, the cluster-wide default and group
// configs live in etcd and only the controller changes them: a request
// naming them and no single broker is forwarded to the controller
// (alter_configs_for_controller, handlers.h); a broker's own values stay in
// its local file.

#include <variant>

#include "config/dynamic.h"
#include "config/group_config.h"
#include "kafka/dispatcher.h"
#include "kafka/handlers/config_resource.h"
#include "kafka/handlers/handlers.h"
#include "metadata/partition_manager.h"

namespace sluice::kafka {

namespace {

template <class resource_response>
void fail(resource_response& out, error_code code, std::string message) {
  out.error_code = to_wire(code);
  out.error_message = std::move(message);
}

template <class resource_response>
void fail(resource_response& out, const status& s) {
  fail(out, to_kafka_error(s.code()), s.err().message);
}

// Runs a topic change; `compute` builds the topic's next overrides from
// its current ones, under partition_manager's change lock.
template <class resource_response>
void apply_topic(cluster::partition_manager& pm, const std::string& topic, bool validate_only,
                 resource_response& out,
                 const cluster::partition_manager::topic_overrides_fn& compute) {
  if (auto s = pm.alter_topic_overrides(topic, compute, validate_only); !s.ok()) fail(out, s);
}

// Runs a broker change for resource `name`; `compute` builds the next
// snapshot from the current one for the level the name selects.
template <class resource_response, class compute_fn>
void apply_broker(const request& req, const std::string& name, bool validate_only,
                  resource_response& out, const compute_fn& compute) {
  auto level = parse_broker_resource(name, req.svc->node_id);
  if (auto* why = std::get_if<std::string>(&level))
    return fail(out, error_code::invalid_request, *why);
  const bool cluster_default = std::get<broker_level>(level).cluster_default;
  auto s = req.svc->partitions->alter_broker_config(
      cluster_default,
      [&](const config::broker_config& current) { return compute(current, cluster_default); },
      validate_only);
  if (!s.ok()) fail(out, s);
}

// Runs a group change; `compute` builds the group's next configs from its
// current ones, under partition_manager's group change lock.
template <class resource_response>
void apply_group(cluster::partition_manager& pm, const std::string& group, bool validate_only,
                 resource_response& out, const cluster::partition_manager::group_configs_fn& compute) {
  if (auto why = check_group_resource(group)) return fail(out, error_code::invalid_request, *why);
  if (auto s = pm.alter_group_configs(group, compute, validate_only); !s.ok()) fail(out, s);
}

template <class resource_response>
bool supported_type(int8_t type, const std::string& name, resource_response& out) {
  out.resource_type = type;
  out.resource_name = name;
  if (type == resource_topic || type == resource_broker || type == resource_group) return true;
  fail(out, error_code::invalid_request,
       "resource type " + std::to_string(type) + " is not supported");
  return false;
}

template <class Body>
bool names_controller_resources(const request& req) {
  auto bytes = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(req.frame.data()), req.frame.size());
  protocol::reader rd(bytes);
  if (!protocol::decode_request_header(rd).ok()) return false;
  Body body;
  body.read(rd, req.version());
  if (!rd.to_status().ok()) return false;
  bool controllers = false;
  for (const auto& r : body.resources) {
    if (r.resource_type == resource_broker && !r.resource_name.empty()) return false;
    if (r.resource_type == resource_topic || r.resource_type == resource_broker ||
        r.resource_type == resource_group)
      controllers = true;
  }
  return controllers;
}

}  // namespace

bool alter_configs_for_controller(const request& req) {
  if (req.api_key() == 33) return names_controller_resources<protocol::alter_configs_request>(req);
  if (req.api_key() == 44) return names_controller_resources<protocol::incremental_alter_configs_request>(req);
  return false;
}

void handle_alter_configs(request req) {
  auto body = decode_body<protocol::alter_configs_request>(req);
  if (!body) return;
  auto& pm = *req.svc->partitions;
  protocol::alter_configs_response resp;
  for (const auto& r : body->resources) {
    auto& out = resp.responses.emplace_back();
    if (!supported_type(r.resource_type, r.resource_name, out)) continue;
    std::vector<config::config_entry> entries;
    for (const auto& c : r.configs) entries.push_back({c.name, c.value});
    if (r.resource_type == resource_broker) {
      apply_broker(req, r.resource_name, body->validate_only, out,
                   [&](const config::broker_config& current, bool cluster_default) {
                     return config::replace_broker_config(current, cluster_default, entries);
                   });
      continue;
    }
    if (r.resource_type == resource_group) {
      // As Kafka's controller answers the legacy API for a group: the
      // group's whole set becomes the entries given.
      apply_group(pm, r.resource_name, body->validate_only, out,
                  [&](const config::broker_config& broker, const config::config_map&) {
                    return config::replace_group_configs(broker, entries);
                  });
      continue;
    }
    apply_topic(pm, r.resource_name, body->validate_only, out,
                [&](const config::broker_config& broker, const config::config_map&) {
                  return config::make_topic_overrides(broker, entries);
                });
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
    if (!supported_type(r.resource_type, r.resource_name, out)) continue;
    std::vector<config::alter_request> ops;
    bool bad_op = false;
    for (const auto& c : r.configs) {
      if (c.config_operation < 0 || c.config_operation > 3) bad_op = true;
      ops.push_back({c.name, static_cast<config::alter_op>(c.config_operation), c.value});
    }
    if (bad_op) {
      fail(out, error_code::invalid_request,
           "config_operation must be 0 (set), 1 (delete), 2 (append) or 3 (subtract)");
      continue;
    }
    if (r.resource_type == resource_broker) {
      apply_broker(req, r.resource_name, body->validate_only, out,
                   [&](const config::broker_config& current, bool cluster_default) {
                     return config::alter_broker_config(current, cluster_default, ops);
                   });
      continue;
    }
    if (r.resource_type == resource_group) {
      apply_group(pm, r.resource_name, body->validate_only, out,
                  [&](const config::broker_config& broker, const config::config_map& current) {
                    return config::alter_group_configs(broker, current, ops);
                  });
      continue;
    }
    apply_topic(pm, r.resource_name, body->validate_only, out,
                [&](const config::broker_config& broker, const config::config_map& current) {
                  return config::alter_topic_overrides(broker, current, ops);
                });
  }
  req.respond(resp);
}

}  // namespace sluice::kafka
