#include "base/limits.h"
#include "base/log.h"
#include "kafka/delayed_ops.h"
#include "kafka/dispatcher.h"
#include "kafka/forwarder.h"
#include "kafka/handlers/handlers.h"
#include "metadata/control_plane.h"
#include "metadata/partition_manager.h"

// Metadata: brokers, controller, cluster id and the topics asked for.
// Automatic creation (auto.create.topics.enable and the request's
// allow_auto_topic_creation): a single broker creates a missing topic at
// once and describes it; in a cluster the controller does, asked through
// the forwarder (kafka/forwarder.h) from whichever broker got the request,
// and the topic answers LEADER_NOT_AVAILABLE until the client's next
// Metadata finds it, as Kafka's brokers answer.
//
// A stale view: a cluster broker whose view is not known to be current
// (control_plane::view_current: just resumed from a pause, or back from a
// network cut, that outlasted its session) holds the request back until
// the view is current again, looking every limits::metadata_view_poll_ms,
// for up to limits::metadata_stale_view_wait_ms. It does not name the
// leaders it had before: the controller has moved them meanwhile, and a
// client sent back to the old leader for a moment can be left there (the
// librdkafka of Debian 12 ignores leader epochs in Metadata). Past the
// wait it answers with what it has: etcd is then away for longer than a
// resumed broker needs to catch up (a lost quorum, say), nobody can move a
// leadership meanwhile, and the brokers keep serving with the metadata
// they have (docs/controller.md, "Failures").

namespace sluice::kafka {

namespace {

using topic_response = protocol::metadata_response::response_topic;

void describe_topic(const services& svc, const cluster::topic_info& t, topic_response& out) {
  out.error_code = to_wire(error_code::none);
  out.name = t.name;
  out.topic_id = t.id;
  out.is_internal = cluster::is_internal_topic(t.name);
  for (int32_t p = 0; p < t.partitions; ++p) fill_partition(svc, t, p, out.partitions.emplace_back());
}


void answer_metadata(request req, const protocol::metadata_request* body);

struct parked_metadata {
  request req;
  protocol::metadata_request body;
  int64_t give_up_ms = 0;  // on svc->clk's monotonic clock
  // The next look; held here, since delayed_ops forgets a timer nobody
  // holds. (A cycle with the timer's function until it runs.)
  std::shared_ptr<delayed_ops::timer> timer;
};

void wait_for_current_view(std::shared_ptr<parked_metadata> p) {
  services& svc = *p->req.svc;
  p->timer = svc.delayed->after(std::chrono::milliseconds(limits::metadata_view_poll_ms), [p](bool cancelled) {
    services& svc = *p->req.svc;
    const bool current = svc.control->view_current();
    if (current || cancelled || svc.clk->monotonic_ms() >= p->give_up_ms) {
      answer_metadata(std::move(p->req), &p->body);
      return;
    }
    wait_for_current_view(p);
  });
}

}  // namespace

void handle_metadata(request req) {
  auto body = decode_body<protocol::metadata_request>(req);
  if (!body) return;
  services& svc = *req.svc;
  if (svc.control && svc.delayed && !svc.control->view_current()) {
    auto p = std::make_shared<parked_metadata>();
    p->give_up_ms = svc.clk->monotonic_ms() + limits::metadata_stale_view_wait_ms;
    p->body = std::move(*body);
    p->req = std::move(req);
    wait_for_current_view(std::move(p));
    return;
  }
  answer_metadata(std::move(req), &*body);
}

namespace {

void answer_metadata(request req, const protocol::metadata_request* body) {
  services& svc = *req.svc;
  auto& pm = *svc.partitions;
  const auto cfg = pm.broker_config();

  protocol::metadata_response resp;
  const cluster::metadata_cache& md = *svc.metadata;
  for (const auto& e : md.brokers()) {
    auto& b = resp.brokers.emplace_back();
    b.node_id = e.node_id;
    b.host = e.host;
    b.port = e.port;
    b.rack = e.rack;
  }
  resp.cluster_id = md.cluster_id();
  resp.controller_id = md.controller_id();

  // v0 sends an empty list for "all topics"; v1+ sends null.
  const bool all = !body->topics.has_value() || (req.version() == 0 && body->topics->empty());
  if (all) {
    for (const auto& t : md.topics()) describe_topic(svc, t, resp.topics.emplace_back());
    req.respond(resp);
    return;
  }
  // allow_auto_topic_creation exists from v4; older clients always allow it.
  const bool may_create = cfg->auto_create_topics_enable && body->allow_auto_topic_creation;
  constexpr protocol::uuid no_id{};
  std::vector<std::string> to_create;  // automatically, by the controller
  for (const auto& rt : *body->topics) {
    auto& out = resp.topics.emplace_back();
    // Topic ids in a request are served from v12 (KIP-516); v10-11 define
    // the field but a client must leave it zero and name the topic, as
    // Kafka's broker insists.
    if (req.version() < 12 && (rt.topic_id != no_id || !rt.name)) {
      out.name = rt.name;
      out.topic_id = rt.topic_id;
      out.error_code = to_wire(error_code::invalid_request);
      continue;
    }
    if (rt.topic_id != no_id) {
      // By id: never creates a topic. A deleted topic's id is unknown even
      // when a topic of the same name exists again.
      if (auto t = md.topic_by_id(rt.topic_id)) {
        describe_topic(svc, *t, out);
      } else {
        out.name = std::nullopt;
        out.topic_id = rt.topic_id;
        out.error_code = to_wire(error_code::unknown_topic_id);
      }
      continue;
    }
    if (!rt.name) {
      out.error_code = to_wire(error_code::invalid_request);
      continue;
    }
    const std::string name = *rt.name;
    out.name = name;
    auto t = md.topic(name);
    if (!t && may_create) {
      if (auto bad = cluster::validate_topic_name(name); !bad.ok()) {
        out.error_code = to_wire(error_code::invalid_topic_exception);
        continue;
      }
      if (svc.forward) {
        // A cluster: the controller creates it (which waits on etcd, so
        // never on this I/O thread); the client asks again meanwhile.
        to_create.push_back(name);
        out.error_code = to_wire(error_code::leader_not_available);
        continue;
      }
      auto e = pm.create_topic(name, -1, -1, {}, false);
      if (e && e->code != errc::already_exists) {
        SLUICE_LOG_WARN("auto-creating topic {}: {}", name, e->message);
        out.error_code = to_wire(e->code);
        continue;
      }
      t = md.topic(name);
    }
    if (!t) {
      out.error_code = to_wire(cluster::validate_topic_name(name).ok() ? error_code::unknown_topic_or_partition
                                                                       : error_code::invalid_topic_exception);
      continue;
    }
    describe_topic(svc, *t, out);
  }
  if (!to_create.empty()) {
    const int32_t controller = md.controller_id();
    std::optional<cluster::broker_endpoint> b;
    if (controller >= 0 && controller != svc.node_id) b = md.broker(controller);
    if (controller < 0 || (controller != svc.node_id && !b)) {
      SLUICE_LOG_DEBUG("automatic creation of {} waits for a controller", to_create.front());
    } else {
      svc.forward->create_topics(std::move(to_create), b ? b->host : std::string(), b ? b->port : 0);
    }
  }
  req.respond(resp);
}

}  // namespace

}  // namespace sluice::kafka
