// The share coordinator's APIs (KIP-932), broker to broker: a share
// partition's leader reads, initialises, writes and deletes its durable
// state at the broker that leads the state's partition of
// __share_group_state (docs/share_groups.md, "What is durable"). Answered
// once what they change is committed there. Sluice's leaders also carry
// their pending dead letters in tagged fields (share.schema).

#include <memory>
#include <mutex>

#include "kafka/dispatcher.h"
#include "kafka/handlers/handlers.h"
#include "share/service.h"

namespace sluice::kafka {

namespace {

// Collects per-partition answers of one request; the last one answers.
template <class Resp>
struct gather {
  request req;
  Resp resp;
  std::mutex mu;
  size_t left = 0;
  void done_one() {
    bool last;
    {
      std::lock_guard g(mu);
      last = --left == 0;
    }
    if (last) req.respond(resp);
  }
};

// Runs `apply(share, key, partition, done)` for every partition a state
// request names; the answer lists them as the request does and goes once
// every `done` has run (with the partition's error, if any).
template <class Resp, class Body, class Apply>
void each_partition(request req, const Body& body, Apply apply) {
  auto g = std::make_shared<gather<Resp>>();
  g->left = 1;  // this call, until every partition is on its way
  for (const auto& t : body.topics) {
    auto& tr = g->resp.results.emplace_back();
    tr.topic_id = t.topic_id;
    for (const auto& p : t.partitions) {
      tr.partitions.emplace_back().partition = p.partition;
      ++g->left;
    }
  }
  auto* share = req.svc->share;
  g->req = std::move(req);
  for (size_t ti = 0; ti < body.topics.size(); ++ti) {
    const auto& t = body.topics[ti];
    for (size_t pi = 0; pi < t.partitions.size(); ++pi) {
      auto* pr = &g->resp.results[ti].partitions[pi];
      auto done = [g, pr](status s) {
        if (!s.ok()) {
          std::lock_guard l(g->mu);
          pr->error_code = to_wire(to_kafka_error(s.code()));
          pr->error_message = s.err().message;
        }
        g->done_one();
      };
      if (!share) {
        done(status(errc::coordinator_not_available, "share groups are not served"));
      } else {
        apply(*share, share::share_key{body.group_id, t.topic_id, t.partitions[pi].partition}, t.partitions[pi],
              std::move(done));
      }
    }
  }
  g->done_one();
}

}  // namespace

void handle_read_share_group_state(request req) {
  auto body = decode_body<protocol::read_share_group_state_request>(req);
  if (!body) return;
  protocol::read_share_group_state_response resp;
  for (const auto& t : body->topics) {
    auto& tr = resp.results.emplace_back();
    tr.topic_id = t.topic_id;
    for (const auto& p : t.partitions) {
      auto& pr = tr.partitions.emplace_back();
      pr.partition = p.partition;
      pr.state_epoch = -1;
      pr.start_offset = -1;
      if (!req.svc->share) {
        pr.error_code = to_wire(error_code::coordinator_not_available);
        continue;
      }
      auto r = req.svc->share->state_read(share::share_key{body->group_id, t.topic_id, p.partition}, p.leader_epoch);
      if (!r.ok()) {
        pr.error_code = to_wire(to_kafka_error(r.code()));
        pr.error_message = r.err().message;
        continue;
      }
      if (!r->has_value()) continue;  // no state yet: epoch -1, start -1
      pr.state_epoch = (*r)->state_epoch;
      share::to_wire((*r)->state, pr);
    }
  }
  req.respond(resp);
}

void handle_initialize_share_group_state(request req) {
  auto body = decode_body<protocol::initialize_share_group_state_request>(req);
  if (!body) return;
  each_partition<protocol::initialize_share_group_state_response>(
      std::move(req), *body, [](share::service& share, const share::share_key& k, const auto& p, auto done) {
        share.state_initialize(k, p.state_epoch, p.start_offset, std::move(done));
      });
}

void handle_write_share_group_state(request req) {
  auto body = decode_body<protocol::write_share_group_state_request>(req);
  if (!body) return;
  each_partition<protocol::write_share_group_state_response>(
      std::move(req), *body, [](share::service& share, const share::share_key& k, const auto& p, auto done) {
        share.state_write(k, p.state_epoch, p.leader_epoch, share::from_wire(p), std::move(done));
      });
}

void handle_delete_share_group_state(request req) {
  auto body = decode_body<protocol::delete_share_group_state_request>(req);
  if (!body) return;
  each_partition<protocol::delete_share_group_state_response>(
      std::move(req), *body, [](share::service& share, const share::share_key& k, const auto&, auto done) {
        share.state_delete(k, std::move(done));
      });
}

}  // namespace sluice::kafka
