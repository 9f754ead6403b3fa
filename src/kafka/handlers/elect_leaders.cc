// ElectLeaders (KIP-460): an operator asks the controller to elect
// leaders, type 0 the preferred replica, type 1 (v1+) a live replica even
// out of sync when no in-sync one is live. The decisions are the
// controller's (controller::elect_on_request); this handler names the
// partitions, runs them on the control plane, and answers each partition
// with its outcome:
//   - NONE: the leadership moved;
//   - ELECTION_NOT_NEEDED: the preferred replica leads already (type 0), or
//     a live in-sync replica leads (type 1). A single broker always leads
//     its partitions, so it answers this for every one;
//   - PREFERRED_LEADER_NOT_AVAILABLE: the preferred replica is not live or
//     not in the ISR;
//   - ELIGIBLE_LEADERS_NOT_AVAILABLE: no replica is live (type 1);
//   - UNKNOWN_TOPIC_OR_PARTITION.
// A request for every partition (null topic list) lists, as Kafka's does,
// only the partitions whose election was needed. Sent to a broker that is
// not the controller, it is forwarded there (kafka/forwarder.h); when the
// controller cannot be reached it answers NOT_CONTROLLER, at the top level
// from v1, for each named partition in v0, which has no top-level code.

#include <algorithm>
#include <map>

#include "kafka/dispatcher.h"
#include "kafka/handlers/handlers.h"
#include "metadata/control_plane.h"
#include "metadata/partition_manager.h"

namespace sluice::kafka {

namespace {

constexpr int8_t preferred_election = 0;
constexpr int8_t unclean_election = 1;
// A request's timeout_ms bounds the wait for the controller, within these
// bounds: below the first a busy controller would time out every request;
// the second bounds how long the thread that runs this handler is held (in
// a cluster the forwarding thread, which the controller's other admin
// requests share: dispatcher.cc).
constexpr int32_t min_timeout_ms = 1000;
constexpr int32_t max_timeout_ms = 30000;

using partition_list = std::vector<std::pair<std::string, int32_t>>;
using outcome = controller::controller::election_outcome;

// A single broker leads every partition it has: nothing to elect.
std::vector<outcome> single_broker_outcomes(const cluster::partition_manager& pm, const partition_list& asked) {
  std::vector<outcome> out;
  for (const auto& [topic, p] : asked) {
    const auto t = pm.topic(topic);
    if (!t || p < 0 || p >= t->partitions) {
      out.push_back({topic, p, status(errc::not_found, "This server does not host this topic-partition.")});
    } else {
      out.push_back({topic, p, status(errc::election_not_needed, "The only broker leads the partition.")});
    }
  }
  return out;
}

}  // namespace

void handle_elect_leaders(request req) {
  auto body = decode_body<protocol::elect_leaders_request>(req);
  if (!body) return;
  services& svc = *req.svc;
  const int8_t type = req.version() >= 1 ? body->election_type : preferred_election;
  protocol::elect_leaders_response resp;
  std::optional<partition_list> asked;
  if (body->topic_partitions) {
    asked.emplace();
    for (const auto& t : *body->topic_partitions)
      for (int32_t p : t.partitions) asked->emplace_back(t.topic, p);
  }
  auto fail_all = [&](error_code e, const std::string& msg) {
    if (req.version() >= 1) {
      resp.error_code = to_wire(e);
      return;
    }
    if (!asked) return;
    for (const auto& t : *body->topic_partitions) {
      auto& rt = resp.replica_election_results.emplace_back();
      rt.topic = t.topic;
      for (int32_t p : t.partitions) {
        auto& rp = rt.partition_result.emplace_back();
        rp.partition_id = p;
        rp.error_code = to_wire(e);
        rp.error_message = msg;
      }
    }
  };
  if (type != preferred_election && type != unclean_election) {
    fail_all(error_code::invalid_request, "unknown election type " + std::to_string(type));
    req.respond(resp);
    return;
  }

  std::vector<outcome> outcomes;
  if (!svc.control) {
    if (asked) outcomes = single_broker_outcomes(*svc.partitions, *asked);
  } else {
    const auto kind = type == unclean_election ? controller::requested_election::unclean
                                               : controller::requested_election::preferred;
    // The op runs while submit() waits, or never (control_plane.h): it may
    // borrow these locals.
    const status s = svc.control->submit(
        [&](controller::controller& k, const controller::metadata_image& img) -> status {
          auto r = k.elect_on_request(img, kind, asked ? &*asked : nullptr);
          if (!r.ok()) return r.to_status();
          outcomes = std::move(r->outcomes);
          return {};
        },
        std::clamp(body->timeout_ms, min_timeout_ms, max_timeout_ms));
    if (!s.ok()) {
      fail_all(to_kafka_error(s.err().code), s.err().message);
      req.respond(resp);
      return;
    }
  }

  // One result per topic, in the order the topics first appear.
  std::map<std::string, size_t> topic_index;
  for (auto& o : outcomes) {
    if (!asked && o.result.code() == errc::election_not_needed) continue;
    auto [it, added] = topic_index.try_emplace(o.topic, resp.replica_election_results.size());
    if (added) resp.replica_election_results.emplace_back().topic = o.topic;
    auto& rp = resp.replica_election_results[it->second].partition_result.emplace_back();
    rp.partition_id = o.partition;
    if (!o.result.ok()) {
      rp.error_code = to_wire(o.result.err().code);
      rp.error_message = o.result.err().message;
    }
  }
  req.respond(resp);
}

}  // namespace sluice::kafka
