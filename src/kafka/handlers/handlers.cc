// The table of implemented APIs and the versions advertised in ApiVersions.
// A version is listed only when its handler serves it fully; the reasons for
// each range are in docs/protocol.md.

#include "kafka/handlers/handlers.h"

#include "kafka/dispatcher.h"

namespace sluice::kafka {

namespace {

// A row for the API of request type Req: its key and highest version come
// from the schema (protocol/schema/*.schema, whose `versions=` is the range
// Sluice implements), so raising a range is one edit there.
template <class Req>
constexpr api_handler serve(void (*handle)(request), int16_t min_version = Req::min_version) {
  return {Req::api_key, min_version, Req::max_version, handle};
}

// Produce below v3 and Fetch below v4 carry the pre-0.11 message formats
// (magic 0 and 1), which Sluice neither stores nor converts: the schema
// decodes them, the handlers do not serve them.
constexpr api_handler table[] = {
    serve<protocol::produce_request>(handle_produce, 3),
    serve<protocol::fetch_request>(handle_fetch, 4),
    serve<protocol::list_offsets_request>(handle_list_offsets),
    serve<protocol::metadata_request>(handle_metadata),
    serve<protocol::offset_commit_request>(handle_offset_commit),
    serve<protocol::offset_fetch_request>(handle_offset_fetch),
    serve<protocol::find_coordinator_request>(handle_find_coordinator),
    serve<protocol::join_group_request>(handle_join_group),
    serve<protocol::heartbeat_request>(handle_heartbeat),
    serve<protocol::leave_group_request>(handle_leave_group),
    serve<protocol::sync_group_request>(handle_sync_group),
    serve<protocol::describe_groups_request>(handle_describe_groups),
    serve<protocol::list_groups_request>(handle_list_groups),
    serve<protocol::api_versions_request>(handle_api_versions),
    serve<protocol::create_topics_request>(handle_create_topics),
    serve<protocol::delete_topics_request>(handle_delete_topics),
    serve<protocol::delete_records_request>(handle_delete_records),
    serve<protocol::init_producer_id_request>(handle_init_producer_id),
    serve<protocol::offset_for_leader_epoch_request>(handle_offset_for_leader_epoch),
    serve<protocol::describe_configs_request>(handle_describe_configs),
    serve<protocol::alter_configs_request>(handle_alter_configs),
    serve<protocol::describe_log_dirs_request>(handle_describe_log_dirs),
    serve<protocol::create_partitions_request>(handle_create_partitions),
    serve<protocol::delete_groups_request>(handle_delete_groups),
    serve<protocol::incremental_alter_configs_request>(handle_incremental_alter_configs),
    serve<protocol::offset_delete_request>(handle_offset_delete),
    serve<protocol::describe_cluster_request>(handle_describe_cluster),
    serve<protocol::describe_producers_request>(handle_describe_producers),
    serve<protocol::describe_topic_partitions_request>(handle_describe_topic_partitions),
    serve<protocol::elect_leaders_request>(handle_elect_leaders),
    serve<protocol::write_txn_markers_request>(handle_write_txn_markers),
    serve<protocol::add_partitions_to_txn_request>(handle_add_partitions_to_txn),
    serve<protocol::add_offsets_to_txn_request>(handle_add_offsets_to_txn),
    serve<protocol::end_txn_request>(handle_end_txn),
    serve<protocol::describe_transactions_request>(handle_describe_transactions),
    serve<protocol::list_transactions_request>(handle_list_transactions),
    serve<protocol::txn_offset_commit_request>(handle_txn_offset_commit),
    serve<protocol::share_group_heartbeat_request>(handle_share_group_heartbeat),
    serve<protocol::share_group_describe_request>(handle_share_group_describe),
    serve<protocol::share_fetch_request>(handle_share_fetch),
    serve<protocol::share_acknowledge_request>(handle_share_acknowledge),
    serve<protocol::describe_share_group_offsets_request>(handle_describe_share_group_offsets),
    serve<protocol::alter_share_group_offsets_request>(handle_alter_share_group_offsets),
    serve<protocol::delete_share_group_offsets_request>(handle_delete_share_group_offsets),
    serve<protocol::initialize_share_group_state_request>(handle_initialize_share_group_state),
    serve<protocol::read_share_group_state_request>(handle_read_share_group_state),
    serve<protocol::write_share_group_state_request>(handle_write_share_group_state),
    serve<protocol::delete_share_group_state_request>(handle_delete_share_group_state),
};

}  // namespace

std::span<const api_handler> api_handlers() { return table; }

// Produce is advertised from v0 although only v3+ is served: librdkafka up
// to 2.11 (Debian's is 2.0.2) turns on gzip, snappy and lz4 only when the
// broker's Produce range reaches down to v0, and silently sends those codecs
// uncompressed otherwise. Kafka 4.0 does the same (KAFKA-18659) and answers
// v0-v2 with UNSUPPORTED_VERSION per partition rather than closing the
// connection; so does handle_produce. Clients pick the highest common
// version, so none sends v0-v2 to us.
int16_t advertised_min_version(const api_handler& h) {
  return h.api_key == protocol::produce_request::api_key ? int16_t{0} : h.min_version;
}

int16_t advertised_max_version(const api_handler& h) {
  return h.api_key == protocol::add_partitions_to_txn_request::api_key ? int16_t{3} : h.max_version;
}

}  // namespace sluice::kafka
