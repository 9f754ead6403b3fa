#include "cluster/replica_manager.h"

#include <algorithm>
#include <mutex>

#include "base/assert.h"

namespace sluice::cluster {

bool replica_manager::hosts(const replica_list& replicas) const {
  return std::find(replicas.begin(), replicas.end(), node_id_) != replicas.end();
}

int32_t replica_manager::slot_count(const std::string& topic) const {
  std::shared_lock g(mu_);
  auto it = slots_.find(topic);
  return it == slots_.end() ? 0 : static_cast<int32_t>(it->second.size());
}

void replica_manager::add_slots(const std::string& topic, int32_t count) {
  std::unique_lock g(mu_);
  auto& slots = slots_[topic];
  if (static_cast<size_t>(count) > slots.size()) slots.resize(static_cast<size_t>(count));
}

void replica_manager::install(const std::string& topic, int32_t p, std::shared_ptr<partition> part,
                              const replica_list& replicas, const partition_state& st) {
  part->apply_state(replicas, st);
  std::unique_lock g(mu_);
  auto it = slots_.find(topic);
  SLUICE_ASSERT(it != slots_.end() && p >= 0 && static_cast<size_t>(p) < it->second.size(),
                "a partition is installed into its topic's slots");
  it->second[static_cast<size_t>(p)] = std::move(part);
}

std::vector<std::shared_ptr<partition>> replica_manager::remove_topic(const std::string& topic) {
  std::unique_lock g(mu_);
  auto it = slots_.find(topic);
  if (it == slots_.end()) return {};
  auto parts = std::move(it->second);
  slots_.erase(it);
  return parts;
}

bool replica_manager::apply(const std::string& topic, int32_t p, const replica_list& replicas,
                            const partition_state& st) {
  auto part = get(topic, p);
  return part && part->apply_state(replicas, st);
}

std::shared_ptr<partition> replica_manager::get(const std::string& topic, int32_t p) const {
  std::shared_lock g(mu_);
  auto it = slots_.find(topic);
  if (it == slots_.end() || p < 0 || static_cast<size_t>(p) >= it->second.size()) return nullptr;
  return it->second[static_cast<size_t>(p)];
}

bool replica_manager::being_created(const std::string& topic, int32_t p) const {
  std::shared_lock g(mu_);
  auto it = slots_.find(topic);
  return it != slots_.end() && p >= 0 && static_cast<size_t>(p) < it->second.size() &&
         !it->second[static_cast<size_t>(p)];
}

errc replica_manager::missing_partition_error(const std::string& topic, int32_t p) const {
  if (!validate_topic_name(topic).ok()) return errc::invalid_topic;
  return being_created(topic, p) ? errc::not_leader : errc::not_found;
}

std::vector<std::shared_ptr<partition>> replica_manager::all() const {
  std::vector<std::shared_ptr<partition>> out;
  std::shared_lock g(mu_);
  for (const auto& [_, slots] : slots_)
    for (const auto& p : slots)
      if (p) out.push_back(p);
  return out;
}

std::vector<std::shared_ptr<partition>> replica_manager::of_topic(const std::string& topic) const {
  std::vector<std::shared_ptr<partition>> out;
  std::shared_lock g(mu_);
  auto it = slots_.find(topic);
  if (it == slots_.end()) return out;
  for (const auto& p : it->second)
    if (p) out.push_back(p);
  return out;
}

}  // namespace sluice::cluster
