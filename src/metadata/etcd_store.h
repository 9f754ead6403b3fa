#pragma once

// The metadata_store of a broker in a cluster: topics, assignments and
// partition states as the control plane's image of etcd holds them
// (metadata/control_plane.h). Reads come from the image this broker has
// applied; changes are the controller's: run on this broker when it is the
// controller (control_plane::submit, which returns once this broker's
// image shows the change), errc::not_controller otherwise (Kafka's
// NOT_CONTROLLER; the topic APIs reach the controller anyway, forwarded by
// kafka/forwarder.h). It follows the controller (follows_controller()): the
// partition manager changes logs when the control plane reports a change.
//
// Thread safety: every method is thread-safe.

#include <functional>
#include <memory>

#include "config/broker_config.h"
#include "metadata/control_plane.h"
#include "metadata/metadata_store.h"

namespace sluice::cluster {

class etcd_store final : public metadata_store {
 public:
  // `cp` must outlive the store; `timeout_ms` bounds each change. Topic
  // overrides are read against the schema's topic settings.
  etcd_store(control_plane& cp, int64_t timeout_ms) : cp_(cp), timeout_ms_(timeout_ms) {}

  std::optional<topic_info> get(const std::string& name) const override;
  std::optional<topic_info> get_by_id(const topic_id& id) const override;
  std::vector<topic_info> list() const override;
  size_t size() const override;
  status check_request(const partition_request& req) const override;
  result<topic_info> create(const std::string& name, const partition_request& req,
                            const config::config_map& overrides) override;
  status remove(const std::string& name) override;
  status add_partitions(const std::string& name, const partition_request& req) override;
  status set_overrides(const std::string& name, const config::config_map& overrides) override;
  std::optional<partition_state> state(const std::string& topic, int32_t partition) const override;
  std::optional<placed_partition> placed(const std::string& topic, int32_t partition) const override;
  bool follows_controller() const override { return true; }
  // Never nullopt: the image's configs/brokers record (empty when absent).
  std::optional<config::config_map> broker_defaults() const override;
  status set_broker_defaults(const config::config_map& defaults) override;
  bool keeps_group_configs() const override { return true; }
  config::group_config_table group_configs() const override;
  status set_group_configs(const std::string& group, const config::config_map& configs) override;

  // A topic record as the broker sees a topic (overrides parsed against
  // the schema; keys it does not know are left out).
  static topic_info to_info(const std::string& name, const controller::topic_record& r);
  static controller::config_text to_text(const config::config_map& overrides);
  // The configs/brokers record as a level of dynamic broker values.
  static config::config_map to_broker_level(const controller::config_text& text);
  // A configs/groups record as the group's configs (keys parsed against the
  // group keys; what they refuse is left out, logged).
  static config::config_map to_group_configs(const std::string& group, const controller::config_text& text);

 private:
  control_plane& cp_;
  const int64_t timeout_ms_;
};

}  // namespace sluice::cluster
