// DeleteTopics. Up to v5 a request names topics by name; from v6 each entry
// names one by name or by id (KIP-516). The rules are those of Kafka's
// controller (ControllerApis.deleteTopics), entry by entry:
//
// - an entry with both a name and a non-zero id, or with neither, is
//   INVALID_REQUEST;
// - a name (or an id) given in more than one entry is INVALID_REQUEST,
//   answered once, and that topic is not deleted;
// - a name whose topic's id another entry gives is INVALID_REQUEST for both
//   entries, and the topic is not deleted (Kafka answers the pair once);
// - an unknown name is UNKNOWN_TOPIC_OR_PARTITION, an unknown id
//   UNKNOWN_TOPIC_ID (with a null name);
// - internal topics are never deleted (INVALID_TOPIC_EXCEPTION).
//
// A topic found by id is answered with its name, and one found by name with
// its id (v6), as Kafka does. Answers keep the request's order (Kafka
// shuffles them; clients match them by name or id).

#include <map>
#include <set>

#include "cluster/partition_manager.h"
#include "kafka/dispatcher.h"
#include "kafka/handlers/handlers.h"

namespace sluice::kafka {

namespace {

using entry = protocol::delete_topics_request::delete_topic_state;
using result = protocol::delete_topics_response::deletable_topic_result;

// The request's entries in v6's form.
std::vector<entry> entries_of(const protocol::delete_topics_request& body, int16_t version) {
  if (version >= 6) return body.topics;
  std::vector<entry> out;
  for (const auto& name : body.topic_names) out.emplace_back().name = name;
  return out;
}

void fail(result& out, error_code e, std::string message) {
  out.error_code = to_wire(e);
  out.error_message = std::move(message);
}

}  // namespace

void handle_delete_topics(request req) {
  auto body = decode_body<protocol::delete_topics_request>(req);
  if (!body) return;
  auto& pm = *req.svc->partitions;
  const bool enabled = pm.broker_config()->delete_topic_enable;
  const std::vector<entry> entries = entries_of(*body, req.version());
  const protocol::uuid no_id{};

  // How often each name and id is given, and the ids of the named topics,
  // for the rules on repeats above.
  std::map<std::string, int> name_count;
  std::map<protocol::uuid, int> id_count;
  for (const auto& e : entries) {
    if (e.name && e.topic_id == no_id) ++name_count[*e.name];
    if (!e.name && e.topic_id != no_id) ++id_count[e.topic_id];
  }
  std::set<protocol::uuid> ids_of_named;
  for (const auto& [name, n] : name_count) {
    if (auto t = pm.topic(name)) ids_of_named.insert(t->id);
  }
  std::set<std::string> repeated_names_answered;
  std::set<protocol::uuid> repeated_ids_answered;

  protocol::delete_topics_response resp;
  for (const auto& e : entries) {
    const bool by_id = e.topic_id != no_id;
    if (e.name && !by_id && name_count[*e.name] > 1 && !repeated_names_answered.insert(*e.name).second) continue;
    if (!e.name && by_id && id_count[e.topic_id] > 1 && !repeated_ids_answered.insert(e.topic_id).second) continue;
    auto& out = resp.responses.emplace_back();
    out.name = e.name;
    out.topic_id = e.topic_id;
    if (!enabled) {
      fail(out, error_code::topic_deletion_disabled, "delete.topic.enable is false");
      continue;
    }
    if (e.name && by_id) {
      fail(out, error_code::invalid_request, "name a topic by its name or by its id, not both");
      continue;
    }
    if (!e.name && !by_id) {
      fail(out, error_code::invalid_request, "an entry names no topic: give a name or an id");
      continue;
    }
    const std::string what = by_id ? "topic id" : "topic name";
    if ((by_id ? id_count[e.topic_id] : name_count[*e.name]) > 1) {
      fail(out, error_code::invalid_request, what + " given more than once in the request");
      continue;
    }
    cluster::topic_info deleted;
    if (by_id) {
      if (ids_of_named.count(e.topic_id)) {
        fail(out, error_code::invalid_request, "the topic of this id is also named by its name");
        continue;
      }
      auto err = pm.delete_topic_by_id(e.topic_id, &deleted);
      if (!deleted.name.empty()) out.name = deleted.name;
      if (err) fail(out, err->code, err->message);
      continue;
    }
    if (auto t = pm.topic(*e.name); t && id_count.count(t->id)) {
      out.topic_id = t->id;
      fail(out, error_code::invalid_request, "this topic is also named by its id");
      continue;
    }
    auto err = pm.delete_topic(*e.name, &deleted);
    if (!deleted.name.empty()) out.topic_id = deleted.id;
    if (err) fail(out, err->code, err->message);
  }
  req.respond(resp);
}

}  // namespace sluice::kafka
