#include "metadata/metadata_cache.h"

#include <algorithm>

#include "partition/partition.h"
#include "replication/replica_manager.h"

namespace sluice::cluster {

metadata_cache::metadata_cache(const metadata_store& store, const replica_manager& replicas, int32_t node_id,
                               std::string cluster_id)
    : store_(store), replicas_(replicas), node_id_(node_id), cluster_id_(std::move(cluster_id)) {}

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

std::optional<int64_t> metadata_cache::broker_epoch(int32_t node_id) const {
  std::lock_guard g(mu_);
  for (const auto& b : brokers_)
    if (b.node_id == node_id) return b.epoch;
  return std::nullopt;
}

int32_t metadata_cache::controller_id() const {
  if (gate_ && gate_->session_lost()) return -1;
  std::lock_guard g(mu_);
  return controller_id_;
}

std::optional<topic_info> metadata_cache::topic(const std::string& name) const { return store_.get(name); }

std::optional<topic_info> metadata_cache::topic_by_id(const topic_id& id) const { return store_.get_by_id(id); }

std::vector<topic_info> metadata_cache::topics() const { return store_.list(); }

partition_leadership metadata_cache::leadership(const std::string& topic, int32_t partition) const {
  auto t = store_.get(topic);
  return t ? leadership(*t, partition) : partition_leadership{};
}

partition_leadership metadata_cache::leadership(const topic_info& t, int32_t partition) const {
  partition_leadership l;
  const std::string& topic = t.name;
  auto st = store_.state(topic, partition);
  if (!st || partition < 0 || partition >= t.partitions) return l;
  l.replicas = t.assignment[static_cast<size_t>(partition)];
  {
    std::lock_guard g(mu_);
    if (!brokers_.empty()) {
      auto live = [&](int32_t id) {
        return std::any_of(brokers_.begin(), brokers_.end(), [&](const auto& b) { return b.node_id == id; });
      };
      for (int32_t r : l.replicas)
        if (!live(r)) l.offline_replicas.push_back(r);
      if (st->leader >= 0 && !live(st->leader)) st->leader = -1;
    }
  }
  // This broker leads but has no log to serve yet (create_mode::background).
  if (st->leader == node_id_ && replicas_.being_created(topic, partition)) st->leader = -1;
  // Its session lost (or in doubt, its followers gone), this broker's
  // leadership is being moved elsewhere.
  if (st->leader == node_id_ && gate_ && !gate_->session_live()) {
    auto part = replicas_.get(topic, partition);
    if (part && !gate_->check(*part).ok()) st->leader = -1;
  }
  l.has_leader = st->leader >= 0;
  l.leader_id = st->leader;
  l.leader_epoch = l.has_leader ? st->leader_epoch : -1;
  l.isr = st->isr;
  return l;
}

}  // namespace sluice::cluster
