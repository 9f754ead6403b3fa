#pragma once

// One function per Kafka API. Each decodes its body (decode_body), does its
// work through the services, and answers through req.respond() now or
// later. They are thin: validation rules live in cluster/ and config/,
// bytes in protocol/.

#include <functional>
#include <string>
#include <vector>

#include "kafka/request.h"
#include "metadata/metadata_cache.h"
#include "protocol/error_code.h"

namespace sluice::kafka {

void handle_produce(request req);
void handle_fetch(request req);
void handle_list_offsets(request req);
void handle_offset_for_leader_epoch(request req);
void handle_metadata(request req);
void handle_api_versions(request req);
void handle_create_topics(request req);
void handle_delete_topics(request req);
void handle_delete_records(request req);
void handle_init_producer_id(request req);
void handle_describe_configs(request req);
void handle_alter_configs(request req);
void handle_create_partitions(request req);
void handle_incremental_alter_configs(request req);
void handle_describe_cluster(request req);
void handle_describe_log_dirs(request req);
void handle_describe_producers(request req);
void handle_write_txn_markers(request req);
void handle_add_partitions_to_txn(request req);
void handle_add_offsets_to_txn(request req);
void handle_end_txn(request req);
void handle_describe_transactions(request req);
void handle_list_transactions(request req);
void handle_describe_topic_partitions(request req);
void handle_elect_leaders(request req);
// Consumer groups (group/coordinator.h).
void handle_find_coordinator(request req);
void handle_join_group(request req);
void handle_sync_group(request req);
void handle_heartbeat(request req);
void handle_leave_group(request req);
void handle_offset_commit(request req);
void handle_txn_offset_commit(request req);
void handle_share_group_heartbeat(request req);
void handle_share_group_describe(request req);
void handle_share_fetch(request req);
void handle_share_acknowledge(request req);
void handle_describe_share_group_offsets(request req);
void handle_alter_share_group_offsets(request req);
void handle_delete_share_group_offsets(request req);
void handle_initialize_share_group_state(request req);
void handle_read_share_group_state(request req);
void handle_write_share_group_state(request req);
void handle_delete_share_group_state(request req);
void handle_offset_fetch(request req);
void handle_offset_delete(request req);
void handle_describe_groups(request req);
void handle_list_groups(request req);
void handle_delete_groups(request req);

// AlterConfigs or IncrementalAlterConfigs.
inline bool is_alter_configs(int16_t api_key) {
  return api_key == protocol::alter_configs_request::api_key ||
         api_key == protocol::incremental_alter_configs_request::api_key;
}
// Whether an AlterConfigs or IncrementalAlterConfigs request is the
// controller's, in a cluster: it names a topic, a group or the cluster-wide
// default broker resource (name ""), whose values live in etcd, and no
// single broker, whose values are that broker's own. Such a request is forwarded
// whole to the controller (dispatcher.cc); any other is handled where it
// arrived, where a topic in it answers NOT_CONTROLLER unless this broker is
// the controller. (Kafka's clients send a request that names a broker to
// that broker.) A request that does not decode is not the controller's:
// its handler closes the connection.
bool alter_configs_for_controller(const request& req);

// Fills `out`, a partition of a Metadata or a DescribeTopicPartitions
// answer (the fields both have), from the metadata cache's leadership, so
// the two never disagree. A partition without a leader (its log still being
// created, partition_manager's create_mode::background) is described as
// Kafka's Metadata describes one: LEADER_NOT_AVAILABLE, leader and epoch
// -1, no in-sync replica; clients retry until it has one.
template <class Partition>
void fill_partition(const services& svc, const cluster::topic_info& topic, int32_t partition, Partition& out) {
  cluster::partition_leadership l = svc.metadata->leadership(topic, partition);
  out.error_code = to_wire(l.has_leader ? error_code::none : error_code::leader_not_available);
  out.partition_index = partition;
  out.leader_id = l.leader_id;
  out.leader_epoch = l.leader_epoch;
  out.replica_nodes = std::move(l.replicas);
  out.isr_nodes = std::move(l.isr);
  out.offline_replicas = std::move(l.offline_replicas);
}

// For CreateTopics and CreatePartitions: calls `answer` once the logs of
// every topic in `topics` exist (partition_manager::when_created) or after
// `timeout_ms`, whichever comes first, on the delayed-ops thread; at once
// when there is nothing to wait for or timeout_ms <= 0. Never blocks the
// calling I/O thread. Either way the topics are already recorded: a
// partition whose log is not yet made shows LEADER_NOT_AVAILABLE in
// Metadata until it is, as a partition without a leader yet does in Kafka.
void answer_when_created(services& svc, std::vector<std::string> topics, int32_t timeout_ms,
                         std::function<void()> answer);

}  // namespace sluice::kafka
