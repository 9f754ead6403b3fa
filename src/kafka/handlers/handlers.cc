// The table of implemented APIs and the versions advertised in ApiVersions.
// A version is listed only when its handler serves it fully; the reasons for
// each range are in docs/protocol.md.

#include "kafka/handlers/handlers.h"

#include "kafka/dispatcher.h"

namespace sluice::kafka {

namespace {
// Produce below v3 and Fetch below v4 carry the pre-0.11 message formats
// (magic 0 and 1), which Sluice neither stores nor converts.
constexpr api_handler table[] = {
    {0, 3, 11, handle_produce},
    {1, 4, 17, handle_fetch},
    {2, 0, 10, handle_list_offsets},
    {3, 0, 12, handle_metadata},
    {8, 0, 9, handle_offset_commit},
    {9, 0, 9, handle_offset_fetch},
    {10, 0, 5, handle_find_coordinator},
    {11, 0, 9, handle_join_group},
    {12, 0, 4, handle_heartbeat},
    {13, 0, 5, handle_leave_group},
    {14, 0, 5, handle_sync_group},
    {15, 0, 5, handle_describe_groups},
    {16, 0, 5, handle_list_groups},
    {18, 0, 4, handle_api_versions},
    {19, 0, 5, handle_create_topics},
    {20, 0, 5, handle_delete_topics},
    {21, 0, 2, handle_delete_records},
    {22, 0, 5, handle_init_producer_id},
    {32, 0, 4, handle_describe_configs},
    {33, 0, 2, handle_alter_configs},
    {35, 0, 4, handle_describe_log_dirs},
    {37, 0, 3, handle_create_partitions},
    {42, 0, 2, handle_delete_groups},
    {44, 0, 1, handle_incremental_alter_configs},
    {47, 0, 0, handle_offset_delete},
    {60, 0, 1, handle_describe_cluster},
    {61, 0, 0, handle_describe_producers},
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
  constexpr int16_t produce_api_key = 0;
  return h.api_key == produce_api_key ? int16_t{0} : h.min_version;
}

}  // namespace sluice::kafka
