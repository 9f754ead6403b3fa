// DescribeConfigs: topic, broker and group settings with their sources
// and, when asked, synonyms and documentation (config/dynamic.h and
// config/group_config.h do the work). The broker resource named by this
// node's id lists every broker setting; the one named "" (the cluster-wide
// default) only the settings given a dynamic default, as Kafka answers
// them. A group resource (type 32) lists every group key, DYNAMIC_GROUP_CONFIG
// for those set for the group, whether or not the group exists, from this
// broker's copy of the group configs (any broker of a cluster answers).

#include <set>
#include <variant>

#include "config/dynamic.h"
#include "config/group_config.h"
#include "kafka/dispatcher.h"
#include "kafka/handlers/config_resource.h"
#include "kafka/handlers/handlers.h"
#include "metadata/partition_manager.h"

namespace sluice::kafka {

void handle_describe_configs(request req) {
  auto body = decode_body<protocol::describe_configs_request>(req);
  if (!body) return;
  auto& pm = *req.svc->partitions;
  const auto cfg = pm.broker_config();
  protocol::describe_configs_response resp;
  for (const auto& r : body->resources) {
    auto& out = resp.results.emplace_back();
    out.resource_type = r.resource_type;
    out.resource_name = r.resource_name;
    result<std::vector<config::described_config>> described = std::vector<config::described_config>{};
    if (r.resource_type == resource_topic) {
      auto t = pm.topic(r.resource_name);
      if (!t) {
        out.error_code = to_wire(error_code::unknown_topic_or_partition);
        out.error_message = "topic '" + r.resource_name + "' does not exist";
        continue;
      }
      described = config::describe_topic(*cfg, t->overrides);
    } else if (r.resource_type == resource_broker) {
      auto level = parse_broker_resource(r.resource_name, req.svc->node_id);
      if (auto* why = std::get_if<std::string>(&level)) {
        out.error_code = to_wire(error_code::invalid_request);
        out.error_message = *why;
        continue;
      }
      described = std::get<broker_level>(level).cluster_default
                      ? config::describe_broker_defaults(*cfg)
                      : config::describe_broker(*cfg);
    } else if (r.resource_type == resource_group) {
      if (auto why = check_group_resource(r.resource_name)) {
        out.error_code = to_wire(error_code::invalid_request);
        out.error_message = *why;
        continue;
      }
      described = config::describe_group(*cfg, pm.group_config(r.resource_name));
    } else {
      out.error_code = to_wire(error_code::invalid_request);
      out.error_message = "resource type " + std::to_string(r.resource_type) + " is not supported";
      continue;
    }
    if (!described.ok()) {
      out.error_code = to_wire(to_kafka_error(described.code()));
      out.error_message = described.err().message;
      continue;
    }
    // Kafka leaves out keys it does not know rather than failing.
    std::set<std::string> wanted;
    if (r.configuration_keys) wanted.insert(r.configuration_keys->begin(), r.configuration_keys->end());
    for (const auto& d : *described) {
      if (!wanted.empty() && !wanted.count(d.name)) continue;
      auto& c = out.configs.emplace_back();
      c.name = d.name;
      c.value = d.value;
      c.read_only = d.read_only;
      c.is_default = d.is_default;
      c.config_source = static_cast<int8_t>(d.source);
      c.is_sensitive = d.sensitive;
      c.config_type = d.config_type;
      if (body->include_documentation) c.documentation = d.documentation;
      if (body->include_synonyms) {
        for (const auto& s : d.synonyms) {
          auto& syn = c.synonyms.emplace_back();
          syn.name = s.name;
          syn.value = s.value;
          syn.source = static_cast<int8_t>(s.source);
        }
      }
    }
  }
  req.respond(resp);
}

}  // namespace sluice::kafka
