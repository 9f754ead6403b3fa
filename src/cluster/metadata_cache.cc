#include "cluster/metadata_cache.h"

#include "cluster/partition_manager.h"

namespace sluice::cluster {

metadata_cache::metadata_cache(const partition_manager& pm, int32_t node_id, std::string cluster_id)
    : pm_(pm), node_id_(node_id), cluster_id_(std::move(cluster_id)) {}

void metadata_cache::set_brokers(std::vector<broker_endpoint> brokers, int32_t controller_id) {
  std::lock_guard g(mu_);
  brokers_ = std::move(brokers);
  controller_id_ = controller_id;
}

std::vector<broker_endpoint> metadata_cache::brokers() const {
  std::lock_guard g(mu_);
  return brokers_;
}

std::optional<broker_endpoint> metadata_cache::broker(int32_t node_id) const {
  std::lock_guard g(mu_);
  for (const auto& b : brokers_)
    if (b.node_id == node_id) return b;
  return std::nullopt;
}

int32_t metadata_cache::controller_id() const {
  std::lock_guard g(mu_);
  return controller_id_;
}

std::optional<topic_info> metadata_cache::topic(const std::string& name) const { return pm_.topic(name); }

std::optional<topic_info> metadata_cache::topic_by_id(const topic_id& id) const { return pm_.topic_by_id(id); }

std::vector<topic_info> metadata_cache::topics() const { return pm_.topics(); }

partition_leadership metadata_cache::leadership(const std::string& topic, int32_t partition) const {
  partition_leadership l;
  auto part = pm_.get(topic, partition);
  if (!part) {
    // Its log is still being created: no leader yet. The assignment is this
    // broker until the metadata store holds assignments (issue 19).
    l.replicas = {node_id_};
    return l;
  }
  const replica_state st = part->replicas();
  l.has_leader = st.leader_id >= 0;
  l.leader_id = st.leader_id;
  l.leader_epoch = l.has_leader ? st.epoch.value() : -1;
  l.replicas = st.replicas;
  for (const auto& m : st.isr) l.isr.push_back(m.node_id);
  return l;
}

}  // namespace sluice::cluster
