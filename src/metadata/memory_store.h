#pragma once

// A metadata store in memory, for tests: the seam a cluster's etcd store
// and deterministic tests (the simulated cluster) plug into. Topics are
// created on this store's node alone, leading at epoch 0; a test writes
// what a controller would with set_state.

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "metadata/metadata_store.h"

namespace sluice::cluster::testing {

class memory_store final : public metadata_store {
 public:
  std::optional<topic_info> get(const std::string& name) const override {
    std::lock_guard g(mu_);
    ++whole_topic_reads;
    auto it = topics_.find(name);
    return it == topics_.end() ? std::nullopt : std::optional<topic_info>(it->second);
  }
  std::optional<topic_info> get_by_id(const topic_id& id) const override {
    std::lock_guard g(mu_);
    for (const auto& [_, t] : topics_)
      if (t.id == id) return t;
    return std::nullopt;
  }
  std::vector<topic_info> list() const override {
    std::lock_guard g(mu_);
    std::vector<topic_info> out;
    for (const auto& [_, t] : topics_) out.push_back(t);
    return out;
  }
  size_t size() const override {
    std::lock_guard g(mu_);
    return topics_.size();
  }
  explicit memory_store(int32_t node = 0, bool follows = false) : node_(node), follows_(follows) {}
  status check_request(const partition_request&) const override { return {}; }
  bool follows_controller() const override { return follows_; }
  result<topic_info> create(const std::string& name, const partition_request& req,
                            const config::config_map& overrides) override {
    std::lock_guard g(mu_);
    if (topics_.count(name)) return error{errc::already_exists, name};
    topic_info t{name, {}, 0, overrides, {}};
    t.id[0] = static_cast<uint8_t>(++created_);  // new and never all zero
    topics_[name] = t;
    add_locked(name, req);
    return topics_[name];
  }
  status remove(const std::string& name) override {
    std::lock_guard g(mu_);
    std::erase_if(states_, [&](const auto& e) { return e.first.first == name; });
    return topics_.erase(name) ? status() : status(errc::not_found, name);
  }
  status add_partitions(const std::string& name, const partition_request& req) override {
    std::lock_guard g(mu_);
    if (!topics_.count(name)) return status(errc::not_found, name);
    add_locked(name, req);
    return {};
  }
  status set_overrides(const std::string& name, const config::config_map& overrides) override {
    std::lock_guard g(mu_);
    if (!topics_.count(name)) return status(errc::not_found, name);
    topics_[name].overrides = overrides;
    return {};
  }
  std::optional<partition_state> state(const std::string& topic, int32_t p) const override {
    std::lock_guard g(mu_);
    auto it = states_.find({topic, p});
    return it == states_.end() ? std::nullopt : std::optional<partition_state>(it->second);
  }
  // One partition's worth, as etcd_store answers it.
  std::optional<placed_partition> placed(const std::string& topic, int32_t p) const override {
    std::lock_guard g(mu_);
    auto t = topics_.find(topic);
    auto st = states_.find({topic, p});
    if (t == topics_.end() || st == states_.end() || p < 0 || p >= t->second.partitions) return std::nullopt;
    return placed_partition{t->second.assignment[static_cast<size_t>(p)], st->second};
  }
  // Calls of get(), which copy a topic's whole assignment.
  mutable int whole_topic_reads = 0;
  // Each new partition on this store's node alone, leading at epoch 0.
  void add_locked(const std::string& name, const partition_request& req) {
    auto& t = topics_[name];
    for (int32_t i = 0; i < req.count; ++i) {
      const replica_list a = req.assignment.empty() ? replica_list{node_} : req.assignment[static_cast<size_t>(i)];
      states_[{name, t.partitions++}] = {a[0], 0, a, 0};
      t.assignment.push_back(a);
    }
  }
  // Broker defaults, kept only when the test asks (a cluster's store).
  std::optional<config::config_map> broker_defaults() const override {
    std::lock_guard g(mu_);
    return defaults_;
  }
  status set_broker_defaults(const config::config_map& d) override {
    std::lock_guard g(mu_);
    defaults_ = d;
    return {};
  }
  void keep_broker_defaults() { set_broker_defaults({}).ignore(); }
  // Group configs, kept only when the test asks (a cluster's store).
  void keep_group_configs() {
    std::lock_guard g(mu_);
    keeps_groups_ = true;
  }
  bool keeps_group_configs() const override {
    std::lock_guard g(mu_);
    return keeps_groups_;
  }
  config::group_config_table group_configs() const override {
    std::lock_guard g(mu_);
    return groups_;
  }
  status set_group_configs(const std::string& group, const config::config_map& configs) override {
    std::lock_guard g(mu_);
    if (!keeps_groups_) return status(errc::invalid_argument, "this store does not keep group configs");
    if (configs.empty()) {
      groups_.erase(group);
    } else {
      groups_.insert_or_assign(group, configs);
    }
    return {};
  }
  // What a controller would write: a test sets a partition's replicas and state.
  void set_state(const std::string& topic, int32_t p, replica_list replicas, partition_state st) {
    std::lock_guard g(mu_);
    topics_[topic].assignment[static_cast<size_t>(p)] = std::move(replicas);
    states_[{topic, p}] = std::move(st);
  }

 private:
  const int32_t node_;
  const bool follows_;
  mutable std::mutex mu_;
  std::map<std::string, topic_info> topics_;
  std::map<std::pair<std::string, int32_t>, partition_state> states_;
  std::optional<config::config_map> defaults_;
  bool keeps_groups_ = false;
  config::group_config_table groups_;
  int created_ = 0;
};

}  // namespace sluice::cluster::testing
