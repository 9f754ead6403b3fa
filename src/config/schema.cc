#include "config/schema.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>

#include <arpa/inet.h>
#include <netinet/in.h>

#include "base/limits.h"
#include "config/internal.h"

namespace sluice::config {
namespace {

constexpr int64_t i32_max = std::numeric_limits<int32_t>::max();
constexpr int64_t i64_max = std::numeric_limits<int64_t>::max();

constexpr std::array<std::string_view, 2> cleanup_policies = {"compact", "delete"};
constexpr std::array<std::string_view, 6> compression_types = {"uncompressed", "zstd", "lz4",
                                                               "snappy",       "gzip", "producer"};
constexpr std::array<std::string_view, 2> fsync_scopes = {"file", "filesystem"};
constexpr std::array<std::string_view, 2> timestamp_types = {"CreateTime", "LogAppendTime"};

// Splits "host:port" or "[v6]:port"; nullopt when it is not that shape.
std::optional<std::string> check_host_port(std::string_view hp) {
  size_t colon = hp.rfind(':');
  if (colon == std::string_view::npos) return "\"" + std::string(hp) + "\" is not host:port";
  std::string_view host = hp.substr(0, colon);
  std::string_view port = hp.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string_view::npos) {
    return "\"" + std::string(hp) + "\": write an IPv6 address in brackets, [::1]:9092";
  }
  int p = -1;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
  if (ec != std::errc() || end != port.data() + port.size() || p < 0 || p > 65535) {
    return "\"" + std::string(hp) + "\" has no port in 0..65535";
  }
  return std::nullopt;
}

// A listener is [PLAINTEXT://]host:port; Sluice speaks PLAINTEXT only.
std::optional<std::string> check_listeners(const config_value& v) {
  for (const auto& item : std::get<std::vector<std::string>>(v)) {
    std::string_view s = item;
    size_t scheme = s.find("://");
    if (scheme != std::string_view::npos) {
      if (s.substr(0, scheme) != "PLAINTEXT") {
        return "\"" + item + "\": only PLAINTEXT listeners are supported";
      }
      s.remove_prefix(scheme + 3);
    }
    if (auto e = check_host_port(s)) return e;
  }
  return std::nullopt;
}

// An empty address disables the endpoint.
std::optional<std::string> check_optional_address(const config_value& v) {
  const auto& s = std::get<std::string>(v);
  if (s.empty()) return std::nullopt;
  return check_host_port(s);
}

std::optional<std::string> check_path(const config_value& v) {
  for (const auto& item : std::get<std::vector<std::string>>(v)) {
    if (item.empty()) return "an empty directory name";
  }
  return std::nullopt;
}

// sluice.etcd.endpoints: every item an http://host:port URL, and no
// endpoint twice, however it is spelled.
std::optional<std::string> check_etcd_endpoints(const config_value& v) {
  std::vector<std::string> seen;
  for (const auto& item : std::get<std::vector<std::string>>(v)) {
    auto normal = detail::normalize_etcd_endpoint(item);
    if (!normal.ok()) return normal.err().message;
    if (std::find(seen.begin(), seen.end(), *normal) != seen.end()) {
      return "\"" + item + "\" is listed twice (as " + *normal + ")";
    }
    seen.push_back(std::move(normal).value());
  }
  return std::nullopt;
}

// sluice.etcd.prefix: every key of the cluster is this followed by a
// relative path, so it is a whole path segment, '/' on both ends.
std::optional<std::string> check_etcd_prefix(const config_value& v) {
  const auto& p = std::get<std::string>(v);
  const std::string shown = "\"" + p + "\"";
  if (p.size() < 2 || p.size() > limits::max_etcd_prefix_bytes) {
    return shown + " is not 2 to " + std::to_string(limits::max_etcd_prefix_bytes) +
           " characters long";
  }
  for (char c : p) {
    if (c <= ' ' || c > '~') {
      return shown + " has a character other than printable ASCII without spaces";
    }
  }
  if (p.front() != '/' || p.back() != '/') {
    return shown + " must start and end with '/', like /sluice/";
  }
  return std::nullopt;
}

// Row builders keep the table below readable.
setting int_row(std::string_view name, std::string_view topic, value_type t, std::string_view def,
                int64_t lo, int64_t hi, bool dynamic, std::string_view doc) {
  setting s{};
  s.name = name;
  s.topic_name = topic;
  s.type = t;
  s.default_text = def;
  s.int_min = lo;
  s.int_max = hi;
  s.dynamic = dynamic;
  s.doc = doc;
  return s;
}

setting bool_row(std::string_view name, std::string_view topic, std::string_view def, bool dynamic,
                 std::string_view doc) {
  setting s{};
  s.name = name;
  s.topic_name = topic;
  s.type = value_type::boolean;
  s.default_text = def;
  s.dynamic = dynamic;
  s.doc = doc;
  return s;
}

setting text_row(std::string_view name, std::string_view topic, value_type t, std::string_view def,
                 std::span<const std::string_view> allowed, size_t min_items, size_t max_items,
                 value_check check, bool dynamic, std::string_view doc) {
  setting s{};
  s.name = name;
  s.topic_name = topic;
  s.type = t;
  s.default_text = def;
  s.allowed = allowed;
  s.min_items = min_items;
  s.max_items = max_items;
  s.check = check;
  s.dynamic = dynamic;
  s.doc = doc;
  return s;
}

using vt = value_type;

// THE SCHEMA. One row per setting: broker key, topic key (for broker
// defaults of topic settings), type, default, bounds, dynamic, doc.
// Kafka's names and defaults wherever Kafka has the setting; where Sluice
// departs from Kafka's default the doc line says so.
std::vector<setting> make_schema() {
  const int64_t seg_min = limits::min_segment_bytes;
  const int64_t seg_max = limits::max_segment_bytes;
  std::vector<setting> s;
  // ---- The node and its listeners.
  s.push_back(int_row("node.id", "", vt::int32, "0", 0, i32_max, false,
                      "Id of this broker in Metadata responses (Kafka: node.id/broker.id)."));
  s.push_back(text_row("broker.rack", "", vt::string, "", {}, 0, 0, nullptr, false,
                       "Rack (or zone) of this broker: placement puts a partition's replicas "
                       "on distinct racks, and Metadata reports it; empty: none."));
  s.push_back(text_row("listeners", "", vt::list, "PLAINTEXT://127.0.0.1:9092", {}, 1, 1,
                       check_listeners, false,
                       "Address to listen on, [PLAINTEXT://]host:port; port 0 picks a free one."));
  s.push_back(text_row("advertised.listeners", "", vt::list, "", {}, 0, 1, check_listeners, false,
                       "Address clients are told to connect to; empty: the listener's."));
  s.push_back(text_row("log.dirs", "", vt::list, "./sluice-data", {}, 1, 1, check_path, false,
                       "The data directory (Sluice keeps exactly one)."));
  s.push_back(int_row("num.io.threads", "", vt::int32, "0", 0, limits::max_io_threads, false,
                      "I/O threads, each owning its connections; 0: one per core."));
  // ---- The cluster: its metadata in etcd, leadership (docs/configuration.md,
  // "Running a cluster").
  s.push_back(text_row("sluice.etcd.endpoints", "", vt::list, "", {}, 0, limits::max_etcd_endpoints,
                       check_etcd_endpoints, false,
                       "etcd client URLs, http://host:port, comma-separated, that hold the "
                       "cluster's metadata; empty: a single node, its metadata in the data "
                       "directory."));
  s.push_back(text_row("sluice.etcd.prefix", "", vt::string, "/sluice/", {}, 0, 0,
                       check_etcd_prefix, false,
                       "Prefix of every etcd key of this cluster, starting and ending with '/'; "
                       "clusters sharing an etcd need different ones."));
  s.push_back(int_row("sluice.etcd.session.timeout.ms", "", vt::int32, "10000",
                      limits::min_etcd_session_timeout_ms, limits::max_etcd_session_timeout_ms,
                      false,
                      "How long a silent broker stays registered: its etcd lease TTL, rounded up "
                      "to whole seconds."));
  // The etcd client's own default: one attempt of a few inside its 5 s
  // retry budget, so a hung member leaves time to fail over.
  s.push_back(int_row("sluice.etcd.request.timeout.ms", "", vt::int32, "2000",
                      limits::min_etcd_request_timeout_ms, limits::max_etcd_request_timeout_ms,
                      false,
                      "Deadline of one attempt of an etcd request, after which the next endpoint "
                      "is tried; below sluice.etcd.session.timeout.ms."));
  s.push_back(bool_row("auto.leader.rebalance.enable", "", "true", false,
                       "Move leadership back to each partition's preferred replica (the first "
                       "listed) when leader.imbalance.per.broker.percentage is exceeded."));
  s.push_back(int_row("leader.imbalance.per.broker.percentage", "", vt::int32, "10", 0, 100, false,
                      "Share of a broker's preferred partitions led by others above which "
                      "leadership is rebalanced."));
  // At most i64_max / 1000 so that the interval in milliseconds fits an int64.
  s.push_back(int_row("leader.imbalance.check.interval.seconds", "", vt::int64, "300", 1,
                      i64_max / 1000, false, "How often leader imbalance is checked."));
  // ---- Replication (docs/replication.md).
  s.push_back(int_row("replica.lag.time.max.ms", "", vt::int64, "30000", 1, i64_max / 2, false,
                      "A follower that has not caught up with its leader for this long leaves the "
                      "in-sync replicas."));
  s.push_back(int_row("replica.fetch.wait.max.ms", "", vt::int32, "500", 0, i32_max, false,
                      "Longest a leader holds a follower's fetch waiting for new data; below "
                      "replica.lag.time.max.ms."));
  s.push_back(int_row("replica.fetch.max.bytes", "", vt::int32, "1048576", 0, i32_max, false,
                      "Bytes a follower asks for per partition in one fetch (at least one batch)."));
  s.push_back(int_row("replica.fetch.response.max.bytes", "", vt::int32, "10485760", 0, i32_max, false,
                      "Bytes a follower asks for in one fetch over all its partitions."));
  s.push_back(int_row("replica.fetch.backoff.ms", "", vt::int32, "1000", 0, i32_max, false,
                      "Pause of a follower's fetcher after its leader failed to answer."));
  s.push_back(int_row("replica.socket.timeout.ms", "", vt::int32, "30000", 1, i32_max, false,
                      "Deadline of a follower's fetch; above replica.fetch.wait.max.ms."));
  // ---- Network limits.
  s.push_back(int_row("socket.request.max.bytes", "", vt::int32, "104857600", 1,
                      limits::max_socket_request_max_bytes, false,
                      "Largest request frame; a larger one closes the connection."));
  s.push_back(int_row("fetch.max.bytes", "", vt::int32, "57671680", limits::min_fetch_max_bytes,
                      i32_max, false,
                      "Largest Fetch response, whatever the client asks; the first batch "
                      "returned may exceed it."));
  s.push_back(int_row("sluice.fetch.bytes.per.rtt.ms", "", vt::int64, "10485760", 0,
                      limits::max_fetch_bytes_per_rtt_ms, false,
                      "A Fetch answer carries at most this many bytes per ms of the connection's "
                      "minimum round trip, and at least 1 MiB; 0: answers fill fetch.max.bytes, "
                      "as Kafka's do."));
  s.push_back(int_row("connections.max.idle.ms", "", vt::int64, "600000", 1, i64_max, false,
                      "Idle connections are closed after this long."));
  s.push_back(int_row("max.connections", "", vt::int32, "10000", 1,
                      limits::max_connections_upper_bound, true,
                      "Connections accepted at once; more are refused (Kafka: unbounded)."));
  s.push_back(int_row("sluice.max.inflight.requests.per.connection", "", vt::int32, "64", 1,
                      limits::max_inflight_requests_per_connection, false,
                      "Requests in flight per connection past which reading it pauses."));
  s.push_back(int_row("queued.max.request.bytes", "", vt::int64, "268435456",
                      limits::request_budget_reserve_bytes + 1,
                      limits::max_queued_max_request_bytes, false,
                      "Bytes of request frames held at once, being read or awaiting their "
                      "answer, by declared size; a frame that does not fit waits unread. At "
                      "least socket.request.max.bytes plus 16 MiB (Kafka: -1, unbounded)."));
  s.push_back(int_row("sluice.request.read.timeout.ms", "", vt::int64, "30000", 1,
                      limits::max_request_read_timeout_ms, false,
                      "A request frame must arrive whole within this of its admission under "
                      "queued.max.request.bytes, or its connection is closed."));
  // ---- Topics.
  s.push_back(bool_row("auto.create.topics.enable", "", "true", true,
                       "Create unknown topics on Metadata and Produce."));
  s.push_back(int_row("num.partitions", "", vt::int32, "1", 1, limits::max_partitions_per_topic,
                      true, "Partitions of an auto-created topic."));
  s.push_back(int_row("default.replication.factor", "", vt::int32, "1", 1,
                      limits::max_replication_factor, true,
                      "Replication factor of a topic created without one (auto-created, or -1 "
                      "in CreateTopics); checked against the live brokers when the topic is "
                      "created."));
  s.push_back(bool_row("delete.topic.enable", "", "true", true, "Allow DeleteTopics."));
  s.push_back(int_row("max.request.partition.size.limit", "", vt::int32, "2000", 1, i32_max, false,
                      "Most partitions one DescribeTopicPartitions answer describes, whatever "
                      "the request asks; the client pages through the rest."));
  // ---- Broker defaults of topic settings.
  s.push_back(text_row("log.cleanup.policy", "cleanup.policy", vt::list, "delete", cleanup_policies,
                       1, 2, nullptr, true,
                       "delete old segments, compact to the newest value per key, or both."));
  s.push_back(text_row("compression.type", "compression.type", vt::enumeration, "producer",
                       compression_types, 0, 0, nullptr, true,
                       "Codec of stored batches; producer keeps the producer's."));
  s.push_back(int_row("log.cleaner.delete.retention.ms", "delete.retention.ms", vt::int64,
                      "86400000", 0, i64_max, true,
                      "Tombstones are kept this long after compaction reaches them."));
  s.push_back(int_row("log.segment.delete.delay.ms", "file.delete.delay.ms", vt::int64, "60000", 0,
                      i64_max, true, "Delay between retiring a segment and removing its files."));
  s.push_back(int_row("log.flush.interval.messages", "flush.messages", vt::int64,
                      "9223372036854775807", 1, i64_max, true,
                      "fsync at least every this many messages, whatever the acks."));
  s.push_back(int_row("log.flush.interval.ms", "flush.ms", vt::int64, "9223372036854775807", 0,
                      i64_max, true, "fsync at least every this many ms, whatever the acks."));
  s.push_back(int_row("log.index.interval.bytes", "index.interval.bytes", vt::int32, "4096", 0,
                      i32_max, true, "Bytes of log between offset index entries."));
  s.push_back(int_row("log.cleaner.max.compaction.lag.ms", "max.compaction.lag.ms", vt::int64,
                      "9223372036854775807", 1, i64_max, true,
                      "Longest a record stays uncompacted."));
  s.push_back(int_row("message.max.bytes", "max.message.bytes", vt::int32, "1048588", 0,
                      limits::max_batch_bytes, true, "Largest record batch accepted."));
  s.push_back(text_row("log.message.timestamp.type", "message.timestamp.type", vt::enumeration,
                       "CreateTime", timestamp_types, 0, 0, nullptr, true,
                       "CreateTime keeps the producer's timestamp, LogAppendTime stamps it."));
  {
    setting r{};
    r.name = "log.cleaner.min.cleanable.ratio";
    r.topic_name = "min.cleanable.dirty.ratio";
    r.type = vt::float64;
    r.default_text = "0.5";
    r.float_min = 0;
    r.float_max = 1;
    r.dynamic = true;
    r.doc = "Dirty share of a log above which it is compacted.";
    s.push_back(r);
  }
  s.push_back(int_row("log.cleaner.min.compaction.lag.ms", "min.compaction.lag.ms", vt::int64, "0",
                      0, i64_max, true, "Shortest a record stays uncompacted."));
  s.push_back(int_row("min.insync.replicas", "min.insync.replicas", vt::int32, "1", 1, i32_max,
                      true, "Replicas that must have a batch for acks=all."));
  s.push_back(int_row("log.retention.bytes", "retention.bytes", vt::int64, "-1", -1, i64_max, true,
                      "Size a partition is cut back to by deleting old segments; -1: none."));
  s.push_back(int_row("log.retention.ms", "retention.ms", vt::int64, "604800000", -1, i64_max, true,
                      "Age past which closed segments are deleted; -1: forever."));
  s.push_back(int_row("log.segment.bytes", "segment.bytes", vt::int32, "1073741824", seg_min,
                      seg_max, true, "Size at which a new segment is rolled."));
  s.push_back(int_row("log.index.size.max.bytes", "segment.index.bytes", vt::int32, "10485760",
                      static_cast<int64_t>(limits::time_index_entry_bytes), i32_max, true,
                      "Size of a segment's index files; a full index rolls the segment."));
  s.push_back(int_row("log.roll.ms", "segment.ms", vt::int64, "604800000", 1, i64_max, true,
                      "Age at which a new segment is rolled."));
  s.push_back(bool_row("unclean.leader.election.enable", "unclean.leader.election.enable", "false",
                       true, "Allow an out-of-sync replica to become leader."));
  s.push_back(bool_row("sluice.log.fsync.enable", "sluice.fsync.enable", "true", true,
                       "Answer acks=all only after fsync; false trades durability for speed."));
  s.push_back(text_row("sluice.log.fsync.scope", "", vt::enumeration, "filesystem", fsync_scopes, 0, 0,
                       nullptr, false,
                       "How a group commit of many partitions syncs: file fdatasyncs each file; "
                       "filesystem makes one syncfs and one device flush serve them all, and also "
                       "writes whatever else is dirty on the data directory's file system."));
  // ---- Background log work.
  s.push_back(int_row("log.retention.check.interval.ms", "", vt::int64, "300000", 1, i64_max, true,
                      "How often retention looks for segments to delete."));
  s.push_back(int_row("log.flush.offset.checkpoint.interval.ms", "", vt::int32, "60000", 0, i32_max,
                      false, "How often the recovery-point checkpoint is written."));
  s.push_back(int_row("sluice.max.open.segment.files", "", vt::int32, "1024", 1,
                      limits::max_open_segment_files_upper_bound, false,
                      "Open segment files; idle ones are closed beyond this."));
  s.push_back(int_row("sluice.follower.cache.drop.behind.bytes", "", vt::int64, "33554432", 0,
                      limits::max_follower_cache_drop_behind_bytes, false,
                      "On a follower, synced bytes further than this behind a partition's end "
                      "leave the page cache, so its writes reuse the pages; 0: never."));
  s.push_back(int_row("sluice.log.scrub.bytes.per.second", "", vt::int64, "16777216", 0,
                      limits::max_scrub_bytes_per_second, false,
                      "Read rate of the scrubber that checks every segment's CRCs; 0: off."));
  s.push_back(bool_row("log.cleaner.enable", "", "true", false, "Run the log cleaner."));
  s.push_back(int_row("log.cleaner.threads", "", vt::int32, "1", 0, limits::max_cleaner_threads,
                      false, "Log cleaner threads."));
  s.push_back(int_row("log.cleaner.dedupe.buffer.size", "", vt::int64, "134217728",
                      limits::min_cleaner_dedupe_buffer_bytes,
                      limits::max_cleaner_dedupe_buffer_bytes, false,
                      "Bytes of the cleaners' key-hash to offset map, all threads together."));
  s.push_back(int_row("log.cleaner.backoff.ms", "", vt::int64, "15000", 0, i64_max, false,
                      "Cleaner sleep when there is nothing to clean."));
  // ---- Consumer groups.
  s.push_back(int_row("group.min.session.timeout.ms", "", vt::int32, "6000", 1, i32_max, true,
                      "Shortest session timeout a member may ask for."));
  s.push_back(int_row("group.max.session.timeout.ms", "", vt::int32, "1800000", 1, i32_max, true,
                      "Longest session timeout a member may ask for."));
  s.push_back(int_row("group.max.size", "", vt::int32, "10000", 1, limits::max_group_size, true,
                      "Members per group (Kafka: unbounded)."));
  s.push_back(int_row("group.initial.rebalance.delay.ms", "", vt::int32, "3000", 0, i32_max, true,
                      "Wait for more members before the first rebalance of a group."));
  s.push_back(int_row("offsets.topic.num.partitions", "", vt::int32, "50", 1,
                      limits::max_partitions_per_topic, false,
                      "Partitions of __consumer_offsets (fixed once it exists)."));
  s.push_back(int_row("offsets.topic.replication.factor", "", vt::int16, "3", 1,
                      limits::max_replication_factor, false,
                      "__consumer_offsets gets min(this, live brokers) replicas when it is "
                      "created (Kafka refuses to create it with fewer live brokers)."));
  s.push_back(int_row("offsets.retention.minutes", "", vt::int32, "10080", 1, i32_max, true,
                      "Committed offsets of an empty group expire after this."));
  s.push_back(int_row("offsets.retention.check.interval.ms", "", vt::int64, "600000", 1, i64_max,
                      false, "How often expired offsets are looked for."));
  s.push_back(int_row("offsets.commit.timeout.ms", "", vt::int32, "5000", 1, i32_max, false,
                      "How long a write to __consumer_offsets (a commit, a group's assignment) "
                      "may wait to be committed before the request is answered with an error."));
  // ---- Transactions (docs/transactions.md). Kafka's names, defaults and
  // lower bounds (all at least 1); the upper bounds are Sluice's limits
  // where a topic is created from the value.
  s.push_back(int_row("transaction.state.log.num.partitions", "", vt::int32, "50", 1,
                      limits::max_partitions_per_topic, false,
                      "Partitions of __transaction_state (fixed once it exists)."));
  s.push_back(int_row("transaction.state.log.replication.factor", "", vt::int16, "3", 1,
                      limits::max_replication_factor, false,
                      "__transaction_state gets min(this, live brokers) replicas when it is "
                      "created."));
  s.push_back(int_row("transaction.state.log.min.isr", "", vt::int32, "2", 1, i32_max, false,
                      "min.insync.replicas of __transaction_state when it is created, at most its "
                      "replication factor."));
  s.push_back(int_row("transaction.state.log.segment.bytes", "", vt::int32, "104857600", seg_min,
                      seg_max, false,
                      "segment.bytes of __transaction_state when it is created."));
  s.push_back(int_row("transaction.max.timeout.ms", "", vt::int32, "900000", 1, i32_max, false,
                      "Longest transaction.timeout.ms a producer may ask for; a longer one is "
                      "refused with INVALID_TRANSACTION_TIMEOUT."));
  s.push_back(int_row("transactional.id.expiration.ms", "", vt::int32, "604800000", 1, i32_max,
                      false,
                      "A transactional id with no transaction open and no update for this long "
                      "is removed."));
  s.push_back(int_row("transaction.abort.timed.out.transaction.cleanup.interval.ms", "", vt::int32,
                      "10000", 1, i32_max, false,
                      "How often transactions open past their timeout are looked for and "
                      "aborted."));
  s.push_back(int_row("transaction.remove.expired.transaction.cleanup.interval.ms", "", vt::int32,
                      "3600000", 1, i32_max, false,
                      "How often transactional ids past transactional.id.expiration.ms are "
                      "looked for and removed."));
  s.push_back(int_row("group.share.record.lock.duration.ms", "", vt::int32,
                      "30000",
                      limits::share_record_lock_duration_setting_min_ms, limits::share_record_lock_duration_setting_max_ms, false,
                      "How long a record handed to a share consumer stays its own before it is "
                      "offered again (a share group's share.record.lock.duration.ms overrides it)."));
  s.push_back(int_row("group.share.delivery.count.limit", "", vt::int16,
                      "5",
                      limits::min_share_delivery_count_limit, limits::max_share_delivery_count_limit, false,
                      "Deliveries of a record to a share group before it is archived (and sent to "
                      "the group's dead-letter topic, if it names one)."));
  s.push_back(int_row("group.share.partition.max.record.locks", "", vt::int32,
                      "2000",
                      limits::min_share_max_record_locks, limits::max_share_max_record_locks, false,
                      "Records in flight per share partition: how far past its start offset a share "
                      "group may have records handed out."));
  s.push_back(int_row("group.share.session.timeout.ms", "", vt::int32,
                      "45000", 1, i32_max, false,
                      "A share-group member that sends no heartbeat for this long leaves the group."));
  s.push_back(int_row("group.share.heartbeat.interval.ms", "", vt::int32,
                      "5000", 1, i32_max, false,
                      "How often share-group members are told to heartbeat."));
  s.push_back(int_row("group.share.max.size", "", vt::int32, "200",
                      1, 1000, false, "Members of one share group."));
  s.push_back(int_row("share.coordinator.state.topic.num.partitions", "", vt::int32,
                      "50", 1, limits::max_partitions_per_topic,
                      false, "Partitions of __share_group_state (fixed once it exists)."));
  s.push_back(int_row("share.coordinator.state.topic.replication.factor", "", vt::int16,
                      "3", 1,
                      limits::max_replication_factor, false,
                      "__share_group_state gets min(this, live brokers) replicas when it is created."));
  s.push_back(int_row("share.coordinator.state.topic.min.isr", "", vt::int32,
                      "2", 1, i32_max, false,
                      "min.insync.replicas of __share_group_state when it is created, at most its "
                      "replication factor."));
  s.push_back(int_row("share.coordinator.state.topic.segment.bytes", "", vt::int32,
                      "104857600", seg_min, seg_max, false,
                      "segment.bytes of __share_group_state when it is created."));
  s.push_back(int_row("transaction.version", "", vt::int16, "2", 1, 2, false,
                      "The finalized level of the feature transaction.version that ApiVersions "
                      "advertises: 2 lets clients that know it (Java 4.x, franz-go) use transaction "
                      "version 2 (KIP-890 part 2: an epoch bump at every end, partitions added by "
                      "their leaders); 1 pins them to version 1. Kafka sets it with its features "
                      "tool; every broker of a cluster should say the same."));
  // ---- Operations.
  s.push_back(text_row("sluice.metrics.listener", "", vt::string, "127.0.0.1:9644", {}, 0, 0,
                       check_optional_address, false,
                       "host:port of the HTTP /metrics and /health endpoint; empty: off."));
  s.push_back(int_row("sluice.retention.headroom.alert.ms", "", vt::int64, "86400000", 0, i64_max,
                      true, "Alert when a group's retention headroom falls below this."));
  s.push_back(int_row("sluice.metrics.write.rate.window.ms", "", vt::int64, "300000",
                      limits::min_write_rate_window_ms, limits::max_write_rate_window_ms, false,
                      "Window over which /metrics measures each partition's write rate."));
  return s;
}

const std::vector<setting>& schema() {
  static const std::vector<setting> rows = make_schema();
  return rows;
}

std::string quoted(std::string_view s) {
  return "\"" + std::string(s) + "\"";
}

error bad(std::string_view key, const std::string& what) {
  return error{errc::invalid_config, std::string(key) + ": " + what};
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool has_control_char(std::string_view s) {
  return std::any_of(s.begin(), s.end(),
                     [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; });
}

std::string join_allowed(std::span<const std::string_view> allowed) {
  std::string out;
  for (auto a : allowed) {
    if (!out.empty()) out += ", ";
    out += a;
  }
  return out;
}

std::string lower_ascii(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// RFC 1123 host names (letters, digits and inner hyphens, dot-separated
// labels of 1..63), plus '_', which resolvers accept and container tools
// put in names.
bool is_host_name(std::string_view h) {
  if (h.empty() || h.size() > 253) return false;
  while (true) {
    size_t dot = h.find('.');
    std::string_view label = h.substr(0, dot);
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-') {
      return false;
    }
    for (char c : label) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') return false;
    }
    if (dot == std::string_view::npos) return true;
    h.remove_prefix(dot + 1);
  }
}

}  // namespace

namespace detail {

bool is_unspecified_address(std::string_view host) {
  if (host.empty()) return true;
  const std::string h(host);
  in_addr v4{};
  if (inet_pton(AF_INET, h.c_str(), &v4) == 1) return v4.s_addr == INADDR_ANY;
  in6_addr v6{};
  if (inet_pton(AF_INET6, h.c_str(), &v6) == 1) return IN6_IS_ADDR_UNSPECIFIED(&v6);
  return false;
}

result<std::string> normalize_etcd_endpoint(std::string_view url) {
  auto refuse = [&](const std::string& why) {
    return error{errc::invalid_config, quoted(url) + ": " + why};
  };
  const size_t scheme_end = url.find("://");
  const std::string scheme =
      scheme_end == std::string_view::npos ? "" : lower_ascii(url.substr(0, scheme_end));
  if (scheme == "https") return refuse("TLS to etcd is not supported yet; give http:// URLs");
  if (scheme != "http") return refuse("not an http://host:port URL");
  std::string_view rest = url.substr(scheme_end + 3);
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);  // "http://h:2379/" is h:2379
  if (rest.find_first_of("/?#@") != std::string_view::npos) {
    return refuse("only http://host:port is accepted, without a path, query or user");
  }
  const size_t colon = rest.rfind(':');
  const bool bracketed = !rest.empty() && rest.front() == '[';
  if (colon == std::string_view::npos || (bracketed && rest.substr(0, colon).back() != ']')) {
    return refuse("no port; write http://host:port (etcd's client port is usually 2379)");
  }
  std::string_view host = rest.substr(0, colon);
  const std::string_view port = rest.substr(colon + 1);
  int p = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
  if (port.empty() || ec != std::errc() || end != port.data() + port.size() || p < 1 || p > 65535) {
    return refuse("port \"" + std::string(port) + "\" is not in 1..65535");
  }
  std::string normal_host;
  char buf[INET6_ADDRSTRLEN] = {};
  if (bracketed) {
    const std::string inner(host.substr(1, host.size() - 2));
    in6_addr a{};
    if (inet_pton(AF_INET6, inner.c_str(), &a) != 1) {
      return refuse("\"" + std::string(host) + "\" is not an IPv6 address");
    }
    const char* written = inet_ntop(AF_INET6, &a, buf, sizeof buf);
    SLUICE_ASSERT(written != nullptr, "inet_ntop(AF_INET6) into INET6_ADDRSTRLEN bytes");
    normal_host = "[" + std::string(buf) + "]";
  } else if (host.find(':') != std::string_view::npos) {
    return refuse("write an IPv6 address in brackets, http://[::1]:2379");
  } else if (!host.empty() && host.find_first_not_of("0123456789.") == std::string_view::npos) {
    const std::string h(host);
    in_addr a{};
    if (inet_pton(AF_INET, h.c_str(), &a) != 1) {
      return refuse("\"" + h + "\" is not an IPv4 address");
    }
    const char* written = inet_ntop(AF_INET, &a, buf, sizeof buf);
    SLUICE_ASSERT(written != nullptr, "inet_ntop(AF_INET) into INET6_ADDRSTRLEN bytes");
    normal_host = buf;
  } else if (is_host_name(host)) {
    normal_host = lower_ascii(host);
  } else {
    return refuse("\"" + std::string(host) + "\" is not a host name or IP address");
  }
  if (is_unspecified_address(bracketed ? host.substr(1, host.size() - 2) : host)) {
    return refuse(std::string(host) + " is no address to connect to; name an etcd member");
  }
  return "http://" + normal_host + ":" + std::to_string(p);
}

}  // namespace detail

std::string_view value_type_name(value_type t) {
  switch (t) {
    case value_type::boolean:
      return "bool";
    case value_type::int16:
      return "int16";
    case value_type::int32:
      return "int32";
    case value_type::int64:
      return "int64";
    case value_type::float64:
      return "double";
    case value_type::string:
      return "string";
    case value_type::list:
      return "list";
    case value_type::enumeration:
      return "enum";
  }
  return "unknown";
}

int8_t kafka_config_type(value_type t) {
  // Kafka's DescribeConfigsResponse ConfigType: BOOLEAN=1, STRING=2, INT=3,
  // SHORT=4, LONG=5, DOUBLE=6, LIST=7.
  switch (t) {
    case value_type::boolean:
      return 1;
    case value_type::string:
      return 2;
    case value_type::enumeration:
      return 2;
    case value_type::int32:
      return 3;
    case value_type::int16:
      return 4;
    case value_type::int64:
      return 5;
    case value_type::float64:
      return 6;
    case value_type::list:
      return 7;
  }
  return 0;
}

std::string format_value(const config_value& v) {
  struct visitor {
    std::string operator()(bool b) const { return b ? "true" : "false"; }
    std::string operator()(int64_t i) const { return std::to_string(i); }
    std::string operator()(double d) const {
      // Shortest text that reads back as the same double.
      char buf[64];
      auto [end, ec] = std::to_chars(buf, buf + sizeof buf, d);
      SLUICE_ASSERT(ec == std::errc(), "to_chars(double)");
      return std::string(buf, end);
    }
    std::string operator()(const std::string& s) const { return s; }
    std::string operator()(const std::vector<std::string>& l) const {
      std::string out;
      for (const auto& item : l) {
        if (!out.empty()) out += ',';
        out += item;
      }
      return out;
    }
  };
  return std::visit(visitor{}, v);
}

std::span<const setting> all_settings() {
  return schema();
}

const setting* find_broker_setting(std::string_view name) {
  for (const auto& s : schema()) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

const setting* find_topic_setting(std::string_view topic_name) {
  if (topic_name.empty()) return nullptr;
  for (const auto& s : schema()) {
    if (s.topic_name == topic_name) return &s;
  }
  return nullptr;
}

const config_value& default_value(const setting& s) {
  // Parsed once, in schema order; a default that fails its own validation is
  // a bug in the table above and stops the process at the first lookup.
  static const std::vector<config_value> defaults = [] {
    std::vector<config_value> out;
    for (const auto& row : schema()) {
      auto v = parse_value(row, row.name, row.default_text);
      if (!v.ok()) {
        std::fprintf(stderr, "config schema: bad default: %s\n", v.err().message.c_str());
        SLUICE_ASSERT(false, "schema default fails validation");
      }
      out.push_back(std::move(v).value());
    }
    return out;
  }();
  const auto& rows = schema();
  SLUICE_ASSERT(&s >= rows.data() && &s < rows.data() + rows.size(), "setting not in schema");
  return defaults[static_cast<size_t>(&s - rows.data())];
}

result<config_value> parse_value(const setting& s, std::string_view key, std::string_view text) {
  if (text.size() > limits::max_config_value_bytes) {
    return bad(key,
               "value longer than " + std::to_string(limits::max_config_value_bytes) + " bytes");
  }
  if (has_control_char(text)) return bad(key, "value contains a control character");
  const std::string_view t = trim(text);
  config_value v;
  switch (s.type) {
    case value_type::boolean: {
      std::string lower(t);
      std::transform(lower.begin(), lower.end(), lower.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      if (lower == "true") {
        v = true;
      } else if (lower == "false") {
        v = false;
      } else {
        return bad(key, quoted(text) + " is not a bool (true or false)");
      }
      break;
    }
    case value_type::int16:
    case value_type::int32:
    case value_type::int64: {
      int64_t i = 0;
      auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), i);
      if (ec == std::errc::result_out_of_range) {
        return bad(key, quoted(text) + " is out of range [" + std::to_string(s.int_min) + ", " +
                            std::to_string(s.int_max) + "]");
      }
      if (t.empty() || ec != std::errc() || end != t.data() + t.size()) {
        return bad(key, quoted(text) + " is not an integer (" +
                            std::string(value_type_name(s.type)) + ")");
      }
      v = i;
      break;
    }
    case value_type::float64: {
      double d = 0;
      auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), d);
      if (t.empty() || ec != std::errc() || end != t.data() + t.size()) {
        return bad(key, quoted(text) + " is not a number (double)");
      }
      v = d;
      break;
    }
    case value_type::string:
    case value_type::enumeration:
      v = std::string(t);
      break;
    case value_type::list: {
      std::vector<std::string> items;
      if (!t.empty()) {
        std::string_view rest = t;
        while (true) {
          size_t comma = rest.find(',');
          items.emplace_back(trim(rest.substr(0, comma)));
          if (comma == std::string_view::npos) break;
          rest.remove_prefix(comma + 1);
        }
      }
      v = std::move(items);
      break;
    }
  }
  SLUICE_TRY(check_value(s, key, v));
  return v;
}

status check_value(const setting& s, std::string_view key, const config_value& v) {
  const std::string type_name(value_type_name(s.type));
  switch (s.type) {
    case value_type::boolean:
      if (!std::holds_alternative<bool>(v)) return bad(key, "expected a bool");
      break;
    case value_type::int16:
    case value_type::int32:
    case value_type::int64: {
      if (!std::holds_alternative<int64_t>(v))
        return bad(key, "expected an integer (" + type_name + ")");
      int64_t i = std::get<int64_t>(v);
      if (i < s.int_min || i > s.int_max) {
        return bad(key, std::to_string(i) + " is out of range [" + std::to_string(s.int_min) +
                            ", " + std::to_string(s.int_max) + "]");
      }
      break;
    }
    case value_type::float64: {
      if (!std::holds_alternative<double>(v)) return bad(key, "expected a number (double)");
      double d = std::get<double>(v);
      if (!std::isfinite(d) || d < s.float_min || d > s.float_max) {
        return bad(key, format_value(v) + " is out of range [" + format_value(s.float_min) + ", " +
                            format_value(s.float_max) + "]");
      }
      break;
    }
    case value_type::string:
    case value_type::enumeration: {
      if (!std::holds_alternative<std::string>(v)) return bad(key, "expected a string");
      const auto& str = std::get<std::string>(v);
      if (str.size() > limits::max_config_value_bytes || has_control_char(str)) {
        return bad(key, "string too long or with a control character");
      }
      if (s.type == value_type::enumeration &&
          std::find(s.allowed.begin(), s.allowed.end(), str) == s.allowed.end()) {
        return bad(key, quoted(str) + " is not one of " + join_allowed(s.allowed));
      }
      break;
    }
    case value_type::list: {
      if (!std::holds_alternative<std::vector<std::string>>(v)) {
        return bad(key, "expected a list of strings");
      }
      const auto& items = std::get<std::vector<std::string>>(v);
      if (format_value(v).size() > limits::max_config_value_bytes) {
        return bad(key,
                   "list longer than " + std::to_string(limits::max_config_value_bytes) + " bytes");
      }
      for (size_t i = 0; i < items.size(); ++i) {
        const auto& item = items[i];
        if (item.empty()) return bad(key, "empty list item");
        if (has_control_char(item) || item.find(',') != std::string::npos || trim(item) != item) {
          return bad(key, "list item " + quoted(item) + " has a comma, space or control character");
        }
        if (!s.allowed.empty() &&
            std::find(s.allowed.begin(), s.allowed.end(), item) == s.allowed.end()) {
          return bad(key, quoted(item) + " is not one of " + join_allowed(s.allowed));
        }
        if (std::find(items.begin(), items.begin() + static_cast<ptrdiff_t>(i), item) !=
            items.begin() + static_cast<ptrdiff_t>(i)) {
          return bad(key, quoted(item) + " is listed twice");
        }
      }
      if (items.size() < s.min_items || items.size() > s.max_items) {
        std::string want = s.min_items == s.max_items
                               ? "exactly " + std::to_string(s.min_items)
                               : std::to_string(s.min_items) + " to " + std::to_string(s.max_items);
        return bad(key, std::to_string(items.size()) + " items, expected " + want);
      }
      break;
    }
  }
  if (s.check != nullptr) {
    if (auto problem = s.check(v)) return bad(key, *problem);
  }
  return {};
}

const config_value* config_map::find(std::string_view key) const {
  auto it = values_.find(key);
  return it == values_.end() ? nullptr : &it->second;
}

bool config_map::erase(std::string_view key) {
  auto it = values_.find(key);
  if (it == values_.end()) return false;
  values_.erase(it);
  return true;
}

}  // namespace sluice::config
