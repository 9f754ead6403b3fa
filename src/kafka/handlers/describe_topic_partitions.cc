// DescribeTopicPartitions (KIP-966): Metadata's description of topics and
// their partitions, a page at a time, so an admin client can describe a
// cluster of many partitions without one huge answer. As Kafka 3.9's broker
// answers it (DescribeTopicPartitionsRequestHandler and the KRaft metadata
// cache):
//
// - An empty topic list asks for every topic. Topics are answered once
//   each, sorted by name, and only those at or after the cursor's topic.
// - A cursor whose partition index is negative, or whose topic is not in a
//   non-empty topic list, makes the whole request INVALID_REQUEST: every
//   requested topic is answered with that error and nothing else (Kafka's
//   error answer for the request).
// - A page holds at most min(response_partition_limit,
//   max.request.partition.size.limit) partitions. The cursor's topic starts
//   at the cursor's partition, every other topic at 0. When the limit cuts
//   a topic short, next_cursor is that topic and its first partition left
//   out; when it runs out just before a topic, that topic at partition 0;
//   when everything fitted, null. A negative limit answers nothing.
// - A named topic that does not exist is answered UNKNOWN_TOPIC_OR_PARTITION
//   (INVALID_TOPIC_EXCEPTION when the name is not a valid one) with a zero id
//   and no partitions, and takes nothing from the limit. With an empty list
//   only existing topics are listed.
//
// Partitions are described as Metadata describes them (describe_partition),
// except that a partition without a leader yet has error 0 and leader -1,
// as Kafka answers it.
// Sluice has no eligible leader replicas (KIP-966's ELR): both lists are
// empty, as Kafka answers them for a partition that never had any (not
// null). No ACLs: topic_authorized_operations keeps its "not asked" value.

#include <algorithm>
#include <set>

#include "kafka/dispatcher.h"
#include "kafka/handlers/handlers.h"
#include "metadata/partition_manager.h"

namespace sluice::kafka {

void handle_describe_topic_partitions(request req) {
  auto body = decode_body<protocol::describe_topic_partitions_request>(req);
  if (!body) return;
  const services& svc = *req.svc;
  auto& pm = *svc.partitions;
  const auto& cursor = body->cursor;
  const bool all = body->topics.empty();
  const std::string from = cursor ? cursor->topic_name : "";

  std::set<std::string> names;
  if (all) {
    for (const auto& t : svc.metadata->topics())
      if (t.name >= from) names.insert(t.name);
  } else {
    for (const auto& t : body->topics)
      if (t.name >= from) names.insert(t.name);
  }

  protocol::describe_topic_partitions_response resp;
  if (cursor && (cursor->partition_index < 0 || (!all && !names.count(from)))) {
    for (const auto& t : body->topics) {
      auto& out = resp.topics.emplace_back();
      out.error_code = to_wire(error_code::invalid_request);
      out.name = t.name;
    }
    req.respond(resp);
    return;
  }

  // At least one partition a page, so that following next_cursor always
  // moves on (a limit of 0 would answer the same cursor for ever).
  int64_t remaining = std::max<int64_t>(
      1, std::min<int64_t>(body->response_partition_limit, pm.broker_config()->max_request_partition_size_limit));
  for (const auto& name : names) {
    if (remaining < 0) break;
    if (remaining == 0) {
      resp.next_cursor.emplace().topic_name = name;
      break;
    }
    auto t = svc.metadata->topic(name);
    if (!t) {
      if (all) continue;  // deleted since it was listed
      auto& out = resp.topics.emplace_back();
      out.error_code = to_wire(cluster::validate_topic_name(name).ok() ? error_code::unknown_topic_or_partition
                                                                       : error_code::invalid_topic_exception);
      out.name = name;
      out.is_internal = cluster::is_internal_topic(name);
      continue;
    }
    auto& out = resp.topics.emplace_back();
    out.error_code = to_wire(error_code::none);
    out.name = name;
    out.topic_id = t->id;
    out.is_internal = cluster::is_internal_topic(name);
    const int32_t first = cursor && name == from ? cursor->partition_index : 0;
    const auto end = static_cast<int32_t>(std::min<int64_t>(t->partitions, first + remaining));
    for (int32_t p = first; p < end; ++p) {
      auto& part = out.partitions.emplace_back();
      fill_partition(svc, *t, p, part);
      // Kafka's DescribeTopicPartitions tells a partition without a leader
      // by its leader -1 alone, never by an error code (clients treat any
      // partition error as a failed describe).
      if (part.error_code == to_wire(error_code::leader_not_available)) part.error_code = to_wire(error_code::none);
      part.eligible_leader_replicas.emplace();
      part.last_known_elr.emplace();
    }
    if (end < t->partitions) {
      auto& next = resp.next_cursor.emplace();
      next.topic_name = name;
      next.partition_index = end;
      break;
    }
    remaining -= std::max(0, end - first);
  }
  req.respond(resp);
}

}  // namespace sluice::kafka
