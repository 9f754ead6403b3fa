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

#include "kafka/dispatcher.h"
#include "kafka/handlers/handlers.h"
#include "metadata/partition_manager.h"

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

constexpr protocol::uuid no_id{};

// What the rules on repeats need to know of the whole request.
struct census {
  std::map<std::string, int> names;       // entries naming each name alone
  std::map<protocol::uuid, int> ids;      // entries giving each id alone
  std::set<protocol::uuid> ids_of_named;  // ids of the topics named by name

  census(const std::vector<entry>& entries, const cluster::partition_manager& pm) {
    for (const auto& e : entries) {
      if (e.name && e.topic_id == no_id) ++names[*e.name];
      if (!e.name && e.topic_id != no_id) ++ids[e.topic_id];
    }
    for (const auto& [name, n] : names) {
      if (auto t = pm.topic(name)) ids_of_named.insert(t->id);
    }
  }
  // How many entries give what `e` gives; 0 for an entry with both a name
  // and an id or neither, which is refused on its own.
  int count(const entry& e) const {
    const bool by_id = e.topic_id != no_id;
    if (e.name && !by_id) return names.count(*e.name) ? names.at(*e.name) : 0;
    if (!e.name && by_id) return ids.count(e.topic_id) ? ids.at(e.topic_id) : 0;
    return 0;
  }
};

// Checks one entry against the rules and deletes its topic; `out` already
// holds the entry's name and id.
void delete_entry(cluster::partition_manager& pm, const census& c, const entry& e, result& out) {
  const bool by_id = e.topic_id != no_id;
  if (e.name && by_id) return fail(out, error_code::invalid_request, "name a topic by its name or by its id, not both");
  if (!e.name && !by_id) return fail(out, error_code::invalid_request, "an entry names no topic: give a name or an id");
  if (c.count(e) > 1) {
    return fail(out, error_code::invalid_request,
                std::string(by_id ? "topic id" : "topic name") + " given more than once in the request");
  }
  cluster::topic_info deleted;
  if (by_id) {
    if (c.ids_of_named.count(e.topic_id)) {
      return fail(out, error_code::invalid_request, "the topic of this id is also named by its name");
    }
    auto err = pm.delete_topic_by_id(e.topic_id, &deleted);
    if (!deleted.name.empty()) out.name = deleted.name;
    if (err) fail(out, to_kafka_error(err->code), err->message);
    return;
  }
  if (auto t = pm.topic(*e.name); t && c.ids.count(t->id)) {
    out.topic_id = t->id;
    return fail(out, error_code::invalid_request, "this topic is also named by its id");
  }
  auto err = pm.delete_topic(*e.name, &deleted);
  if (!deleted.name.empty()) out.topic_id = deleted.id;
  if (err) fail(out, to_kafka_error(err->code), err->message);
}

}  // namespace

void handle_delete_topics(request req) {
  auto body = decode_body<protocol::delete_topics_request>(req);
  if (!body) return;
  auto& pm = *req.svc->partitions;
  const bool enabled = pm.broker_config()->delete_topic_enable;
  const std::vector<entry> entries = entries_of(*body, req.version());
  const census c(entries, pm);
  std::set<std::string> repeated_names_answered;
  std::set<protocol::uuid> repeated_ids_answered;

  protocol::delete_topics_response resp;
  for (const auto& e : entries) {
    // A repeated name or id is answered once, at its first entry.
    if (c.count(e) > 1 && (e.name ? !repeated_names_answered.insert(*e.name).second
                                  : !repeated_ids_answered.insert(e.topic_id).second)) {
      continue;
    }
    auto& out = resp.responses.emplace_back();
    out.name = e.name;
    out.topic_id = e.topic_id;
    if (enabled) {
      delete_entry(pm, c, e, out);
    } else {
      fail(out, error_code::topic_deletion_disabled, "delete.topic.enable is false");
    }
  }
  req.respond(resp);
}

}  // namespace sluice::kafka
