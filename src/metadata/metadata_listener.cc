#include "metadata/metadata_listener.h"

#include "metadata/etcd_store.h"

#include <set>
#include <string>

namespace sluice::cluster {

void metadata_listener::apply(const controller::metadata_image& img,
                              const std::vector<controller::image_change>& changes) {
  using kind = controller::key_layout::parsed::kind;
  bool brokers = false;
  bool defaults = false;
  bool all_groups = false;
  std::set<std::string> topics;
  for (const auto& c : changes) {
    switch (c.kind) {
      case kind::broker:
      case kind::controller:
        brokers = true;
        break;
      case kind::broker_configs:
        defaults = true;
        break;
      case kind::topic:
        topics.insert(c.topic);
        break;
      case kind::group_configs:
        if (c.group.empty()) {
          all_groups = true;  // a reload: every group's may have changed
        } else if (const auto* e = img.group_configs(c.group)) {
          partitions_.apply_group_configs(c.group, etcd_store::to_group_configs(c.group, e->record.configs));
        } else {
          partitions_.apply_group_configs(c.group, {});
        }
        break;
      case kind::partition: {
        const controller::topic_entry* t = img.topic(c.topic);
        const controller::partition_entry* pe = img.partition(c.topic, c.id);
        if (!t || !pe || c.id < 0 || static_cast<size_t>(c.id) >= t->record.assignment.size()) break;
        if (pe->record.topic != t->record.id) break;  // a deleted topic's leftover
        partitions_.apply_state(c.topic, c.id, t->record.assignment[static_cast<size_t>(c.id)], pe->record.state);
        break;
      }
      default:
        break;
    }
  }
  for (const auto& t : topics) partitions_.on_store_change(t);
  if (defaults) partitions_.on_broker_defaults_change();
  if (all_groups) {
    // From the image in hand, as every change here is applied.
    config::group_config_table groups;
    for (const auto& [group, e] : img.group_configs()) {
      auto c = etcd_store::to_group_configs(group, e.record.configs);
      if (!c.empty()) groups.emplace(group, std::move(c));
    }
    partitions_.apply_all_group_configs(std::move(groups));
  }
  if (brokers) publish_brokers(img);
}

void metadata_listener::publish_brokers(const controller::metadata_image& img) {
  std::vector<broker_endpoint> live;
  for (const auto& [id, b] : img.brokers()) live.push_back({id, b.record.host, b.record.port, b.record.rack, b.mod_revision});
  cache_.set_brokers(std::move(live), img.controller() ? img.controller()->record.id : -1);
}

}  // namespace sluice::cluster
