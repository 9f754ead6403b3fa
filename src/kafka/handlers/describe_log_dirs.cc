// DescribeLogDirs: the one log directory (log.dirs) with the size of each
// partition it holds. Sluice has no replica movement between directories,
// so no partition is a "future" replica, and as every partition is led
// here its offset lag is 0. A null topic list asks for every partition; a
// named partition this broker does not hold is left out, as Kafka does.
// v4 adds the file system's total and usable bytes (statvfs); -1 when they
// cannot be read.

#include <cstdint>

#include "io/file.h"
#include "kafka/dispatcher.h"
#include "kafka/handlers/handlers.h"
#include "metadata/partition_manager.h"

namespace sluice::kafka {

namespace {

using result_topic =
    protocol::describe_log_dirs_response::describe_log_dirs_result::describe_log_dirs_topic;

void add_partition(cluster::partition_manager& pm, const std::string& topic, int32_t index,
                   result_topic& out) {
  auto part = pm.get(topic, index);
  if (!part) return;
  auto& p = out.partitions.emplace_back();
  p.partition_index = index;
  p.partition_size = static_cast<int64_t>(part->size_bytes());
  p.offset_lag = 0;
  p.is_future_key = false;
}

}  // namespace

void handle_describe_log_dirs(request req) {
  auto body = decode_body<protocol::describe_log_dirs_request>(req);
  if (!body) return;
  auto& pm = *req.svc->partitions;
  protocol::describe_log_dirs_response resp;
  auto& dir = resp.results.emplace_back();
  dir.log_dir = pm.broker_config()->data_dir;
  if (auto* fs = req.svc->fs) {
    auto total = fs->total_bytes(dir.log_dir);
    auto usable = fs->free_bytes(dir.log_dir);
    if (total.ok()) dir.total_bytes = static_cast<int64_t>(*total);
    if (usable.ok()) dir.usable_bytes = static_cast<int64_t>(*usable);
  }
  if (!body->topics) {
    for (const auto& t : pm.topics()) {
      result_topic rt;
      rt.name = t.name;
      for (int32_t i = 0; i < t.partitions; ++i) add_partition(pm, t.name, i, rt);
      if (!rt.partitions.empty()) dir.topics.push_back(std::move(rt));
    }
  } else {
    for (const auto& t : *body->topics) {
      result_topic rt;
      rt.name = t.topic;
      for (int32_t i : t.partitions) add_partition(pm, t.topic, i, rt);
      if (!rt.partitions.empty()) dir.topics.push_back(std::move(rt));
    }
  }
  req.respond(resp);
}

}  // namespace sluice::kafka
