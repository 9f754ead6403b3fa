// Share groups (KIP-932, docs/share_groups.md): ShareGroupHeartbeat and
// ShareGroupDescribe at the group's coordinator, ShareFetch and
// ShareAcknowledge at the partitions' leaders. The decisions live in
// share/ (share::service); these handlers decode, keep the share sessions
// (kafka/share_sessions.h), long-poll an empty fetch, and encode.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <utility>

#include "group/coordinator.h"
#include "kafka/delayed_ops.h"
#include "kafka/dispatcher.h"
#include "kafka/handlers/handlers.h"
#include "kafka/handlers/share_gate.h"
#include "kafka/share_sessions.h"
#include "metadata/partition_manager.h"
#include "share/service.h"

namespace sluice::kafka {

namespace {

// The acknowledgement batches of a ShareFetch or ShareAcknowledge partition.
template <class Batch>
std::vector<share::ack_batch> to_acks(const std::vector<Batch>& in) {
  std::vector<share::ack_batch> out;
  out.reserve(in.size());
  for (const auto& b : in) {
    share::ack_batch a;
    a.first_offset = b.first_offset;
    a.last_offset = b.last_offset;
    for (auto t : b.acknowledge_types) a.types.push_back(static_cast<share::ack_type>(t));
    out.push_back(std::move(a));
  }
  return out;
}

void release_all(services& svc, const std::string& group_id, const share_session_cache::outcome& o) {
  for (const auto& [who, parts] : o.released) {
    if (who.first == group_id || !parts.empty()) svc.share->release(who.first, who.second, parts);
  }
}

bool valid_id(const std::optional<std::string>& s) { return s && !s->empty(); }

// What a ShareFetch or ShareAcknowledge (`what`) is refused with before
// anything else, or nullopt: the broker must serve share groups, and the
// request name its group and member.
template <class Body>
std::optional<std::pair<error_code, std::string>> refusal(services& svc, const Body& body, const std::string& what) {
  if (!svc.share || !svc.share_sessions) return std::pair{error_code::unsupported_version, std::string("share groups are not served")};
  if (!valid_id(body.group_id)) return std::pair{error_code::invalid_request, "a " + what + " names its group"};
  if (!valid_id(body.member_id)) return std::pair{error_code::invalid_request, "a " + what + " names its member"};
  return std::nullopt;
}

// One ShareFetch: the first round applies the acknowledgements and
// acquires; an answer with no records and no errors waits (up to
// max_wait_ms) for records to become available, looking again when a
// partition's high watermark moves and every limits::share_tick_ms (a lock
// that runs out makes records available without any append).
class share_fetch_op : public std::enable_shared_from_this<share_fetch_op> {
 public:
  request req;
  protocol::share_fetch_request body;
  std::vector<share::partition_request> parts;  // the session's partitions, acknowledgements on the first round
  std::set<share_tp> acked;                      // partitions whose acknowledgements are answered
  bool acquire = true;
  int64_t deadline_ms = 0;
  // The first round's acknowledgement outcomes, kept for the answer.
  std::map<share_tp, std::pair<error_code, std::string>> ack_results;

  // The request opens a share session: the first round reads idle share
  // partitions again (share::service::fetch).
  bool new_session = false;

  void round() {
    auto self = shared_from_this();
    const bool fresh = std::exchange(new_session, false);
    req.svc->share->fetch(
        *body.group_id, *body.member_id, parts, acquire, body.max_records, body.max_bytes,
        [self](std::vector<share::partition_answer> answers) { self->answered(std::move(answers)); }, fresh);
  }

 private:
  void answered(std::vector<share::partition_answer> answers) {
    bool any = false;
    for (auto& a : answers) {
      const share_tp tp{a.topic_id, a.partition};
      if (acked.count(tp) && !ack_results.count(tp)) ack_results[tp] = {a.ack_error, a.ack_message};
      any = any || !a.acquired.empty() || a.error != error_code::none;
    }
    for (auto& p : parts) p.acks.clear();  // applied once
    if (any || !acquire || body.max_wait_ms <= 0 || req.svc->clk->monotonic_ms() >= deadline_ms) {
      respond(answers);
      return;
    }
    park();
  }

  void park() {
    auto self = shared_from_this();
    auto* delayed = req.svc->delayed;
    std::lock_guard g(mu_);
    for (const auto& p : parts) {
      auto t = req.svc->partitions->topic_by_id(p.topic_id);
      auto part = t ? req.svc->partitions->get(t->name, p.partition) : nullptr;
      if (!part) continue;
      const uint64_t token = part->add_listener([self, delayed] { delayed->post([self] { self->wake(); }); });
      tokens_.emplace_back(part, token);
    }
    const int64_t left = std::max<int64_t>(deadline_ms - req.svc->clk->monotonic_ms(), 0);
    timer_ = delayed->after(std::chrono::milliseconds(std::min<int64_t>(left, limits::share_tick_ms)),
                            [self](bool cancelled) {
                              if (!cancelled) self->wake();
                            });
  }

  // The first wake-up of a parking (a listener or the timer) takes it and
  // starts the next round; the others find nothing to take. Cancelling the
  // timer runs its function here with cancelled = true, which does nothing.
  void wake() {
    std::vector<std::pair<std::shared_ptr<cluster::partition>, uint64_t>> tokens;
    std::shared_ptr<delayed_ops::timer> timer;
    {
      std::lock_guard g(mu_);
      if (tokens_.empty() && !timer_) return;
      tokens.swap(tokens_);
      timer.swap(timer_);
    }
    for (auto& [p, token] : tokens) p->remove_listener(token);
    if (timer) timer->cancel();
    round();
  }

  void respond(std::vector<share::partition_answer>& answers) {
    protocol::share_fetch_response resp;
    resp.acquisition_lock_timeout_ms = req.svc->share->lock_duration_ms(*body.group_id);
    // One entry per topic, whatever order the partitions took turns in.
    std::map<sluice::topic_id, size_t> topic_index;
    for (auto& a : answers) {
      const share_tp tp{a.topic_id, a.partition};
      auto ack = ack_results.find(tp);
      const bool had_acks = ack != ack_results.end();
      if (a.acquired.empty() && a.error == error_code::none && !had_acks) continue;
      auto [ti, fresh] = topic_index.emplace(a.topic_id, resp.responses.size());
      if (fresh) resp.responses.emplace_back();
      auto* tr = &resp.responses[ti->second];
      tr->topic_id = a.topic_id;
      auto& pd = tr->partitions.emplace_back();
      pd.partition_index = a.partition;
      pd.error_code = to_wire(a.error);
      if (a.error != error_code::none) pd.error_message = a.message;
      if (had_acks) {
        pd.acknowledge_error_code = to_wire(ack->second.first);
        if (ack->second.first != error_code::none) pd.acknowledge_error_message = ack->second.second;
      }
      pd.current_leader.leader_id = a.leader_id;
      pd.current_leader.leader_epoch = a.leader_epoch;
      pd.records = protocol::records_field::empty();
      for (auto& r : a.records) pd.records.append(std::move(r));
      for (const auto& r : a.acquired) {
        auto& x = pd.acquired_records.emplace_back();
        x.first_offset = r.first_offset;
        x.last_offset = r.last_offset;
        x.delivery_count = r.delivery_count;
      }
    }
    req.respond(resp);
  }

  std::mutex mu_;
  std::vector<std::pair<std::shared_ptr<cluster::partition>, uint64_t>> tokens_;
  std::shared_ptr<delayed_ops::timer> timer_;
};

}  // namespace

error_code share_group_gate(services& svc, const std::string& group_id, std::string& message) {
  if (!svc.share || !svc.groups) {
    message = "share groups are not served by this broker";
    return error_code::coordinator_not_available;
  }
  if (auto e = svc.groups->gate(group_id); e != error_code::none) {
    message = "this broker does not coordinate group " + group_id + " now";
    return e;
  }
  if (svc.groups->has_classic_group(group_id)) {
    message = "group " + group_id + " is not a share group";
    return error_code::group_id_not_found;
  }
  return error_code::none;
}

void handle_share_group_heartbeat(request req) {
  auto body = decode_body<protocol::share_group_heartbeat_request>(req);
  if (!body) return;
  services& svc = *req.svc;
  protocol::share_group_heartbeat_response resp;
  std::string message;
  if (auto e = share_group_gate(svc, body->group_id, message); e != error_code::none) {
    resp.error_code = to_wire(e);
    resp.error_message = message;
    req.respond(resp);
    return;
  }
  share::heartbeat_request h;
  h.group_id = body->group_id;
  h.member_id = body->member_id;
  h.member_epoch = body->member_epoch;
  h.rack_id = body->rack_id;
  h.subscribed_topic_names = body->subscribed_topic_names;
  h.client_id = req.header.client_id.value_or("");
  h.client_host = req.client_host;
  auto a = svc.share->heartbeat(h);
  resp.error_code = to_wire(a.error);
  resp.heartbeat_interval_ms = a.heartbeat_interval_ms;
  if (a.error != error_code::none) {
    resp.error_message = a.message;
    resp.member_epoch = body->member_epoch;
    req.respond(resp);
    return;
  }
  resp.member_id = a.member_id;
  resp.member_epoch = a.member_epoch;
  if (a.assigned) {
    auto& as = resp.assignment.emplace();
    for (const auto& [tid, ps] : *a.assigned) {
      auto& t = as.topic_partitions.emplace_back();
      t.topic_id = tid;
      t.partitions = ps;
    }
  }
  req.respond(resp);
}

void handle_share_group_describe(request req) {
  auto body = decode_body<protocol::share_group_describe_request>(req);
  if (!body) return;
  services& svc = *req.svc;
  protocol::share_group_describe_response resp;
  for (const auto& id : body->group_ids) {
    auto& g = resp.groups.emplace_back();
    g.group_id = id;
    std::string message;
    if (auto e = share_group_gate(svc, id, message); e != error_code::none) {
      g.error_code = to_wire(e);
      g.error_message = message;
      continue;
    }
    auto d = svc.share->describe(id);
    if (!d) {
      g.error_code = to_wire(error_code::group_id_not_found);
      g.error_message = "no share group " + id;
      g.group_state = "Dead";
      continue;
    }
    g.group_state = d->state;
    g.group_epoch = d->group_epoch;
    g.assignment_epoch = d->assignment_epoch;
    g.assignor_name = "simple";
    for (const auto& m : d->members) {
      auto& o = g.members.emplace_back();
      o.member_id = m.member_id;
      o.rack_id = m.rack_id;
      o.member_epoch = m.member_epoch;
      o.client_id = m.client_id;
      o.client_host = m.client_host;
      o.subscribed_topic_names = m.subscribed_topic_names;
      for (const auto& [tid, ps] : m.assigned) {
        auto& t = o.assignment.topic_partitions.emplace_back();
        t.topic_id = tid;
        auto info = svc.partitions->topic_by_id(tid);
        t.topic_name = info ? info->name : "";
        t.partitions = ps;
      }
    }
  }
  req.respond(resp);
}

void handle_share_fetch(request req) {
  auto body = decode_body<protocol::share_fetch_request>(req);
  if (!body) return;
  services& svc = *req.svc;
  protocol::share_fetch_response top;
  auto refuse = [&](error_code e, std::string m) {
    top.error_code = to_wire(e);
    top.error_message = std::move(m);
    req.respond(top);
  };
  if (auto why = refusal(svc, *body, "share fetch")) return refuse(why->first, std::move(why->second));
  std::vector<share_tp> added, forgotten;
  std::map<share_tp, std::vector<share::ack_batch>> acks;
  for (const auto& t : body->topics) {
    for (const auto& p : t.partitions) {
      const share_tp tp{t.topic_id, p.partition_index};
      added.push_back(tp);
      if (!p.acknowledgement_batches.empty()) acks[tp] = to_acks(p.acknowledgement_batches);
    }
  }
  for (const auto& t : body->forgotten_topics_data)
    for (int32_t p : t.partitions) forgotten.push_back({t.topic_id, p});
  if (body->share_session_epoch == 0 && !acks.empty())
    return refuse(error_code::invalid_request, "acknowledgements cannot open a share session");
  auto o = svc.share_sessions->fetch(*body->group_id, *body->member_id, body->share_session_epoch, added, forgotten,
                                     svc.clk->monotonic_ms());
  release_all(svc, *body->group_id, o);
  if (o.error != error_code::none) return refuse(o.error, o.message);
  auto op = std::make_shared<share_fetch_op>();
  const bool closing = body->share_session_epoch == -1;
  op->acquire = !closing && body->max_records > 0;
  if (closing) {
    // Closing: only the acknowledgements, then what the member holds goes
    // back (released above, after these are applied below... the release
    // above ran first, so acknowledgements of records it released fail
    // with INVALID_RECORD_STATE, as Kafka's would).
    for (auto& [tp, a] : acks) op->parts.push_back({tp.first, tp.second, std::move(a)});
  } else {
    for (const auto& tp : o.partitions) {
      share::partition_request p{tp.first, tp.second, {}};
      if (auto it = acks.find(tp); it != acks.end()) p.acks = std::move(it->second);
      op->parts.push_back(std::move(p));
    }
  }
  // The partitions take turns at the record budget: each fetch of the
  // session starts one further along (docs/share_groups.md).
  if (op->parts.size() > 1 && body->share_session_epoch > 0)
    std::rotate(op->parts.begin(),
                op->parts.begin() + static_cast<ptrdiff_t>(static_cast<size_t>(body->share_session_epoch) %
                                                           op->parts.size()),
                op->parts.end());
  for (const auto& p : op->parts)
    if (!p.acks.empty()) op->acked.insert({p.topic_id, p.partition});
  op->new_session = body->share_session_epoch == 0;
  op->deadline_ms = svc.clk->monotonic_ms() + std::max(body->max_wait_ms, 0);
  op->req = std::move(req);
  op->body = std::move(*body);
  op->round();
}

void handle_share_acknowledge(request req) {
  auto body = decode_body<protocol::share_acknowledge_request>(req);
  if (!body) return;
  services& svc = *req.svc;
  protocol::share_acknowledge_response top;
  auto refuse = [&](error_code e, std::string m) {
    top.error_code = to_wire(e);
    top.error_message = std::move(m);
    req.respond(top);
  };
  if (auto why = refusal(svc, *body, "share acknowledgement")) return refuse(why->first, std::move(why->second));
  std::vector<share::partition_request> parts;
  for (const auto& t : body->topics)
    for (const auto& p : t.partitions)
      parts.push_back(share::partition_request{t.topic_id, p.partition_index, to_acks(p.acknowledgement_batches)});
  const bool closing = body->share_session_epoch == -1;
  auto o = svc.share_sessions->acknowledge(*body->group_id, *body->member_id, body->share_session_epoch,
                                           svc.clk->monotonic_ms());
  if (o.error != error_code::none) return refuse(o.error, o.message);
  const std::string group = *body->group_id, member = *body->member_id;
  auto shared_req = std::make_shared<request>(std::move(req));
  svc.share->fetch(group, member, std::move(parts), false, 0, 0,
                   [shared_req, closing, o, group](std::vector<share::partition_answer> answers) {
                     // On close, what the member still holds goes back once
                     // its last acknowledgements are in.
                     if (closing) release_all(*shared_req->svc, group, o);
                     protocol::share_acknowledge_response resp;
                     for (auto& a : answers) {
                       auto* tr = !resp.responses.empty() && resp.responses.back().topic_id == a.topic_id
                                      ? &resp.responses.back()
                                      : &resp.responses.emplace_back();
                       tr->topic_id = a.topic_id;
                       auto& pd = tr->partitions.emplace_back();
                       pd.partition_index = a.partition;
                       const error_code e = a.ack_error != error_code::none ? a.ack_error : a.error;
                       pd.error_code = to_wire(e);
                       if (e != error_code::none) pd.error_message = a.ack_error != error_code::none ? a.ack_message : a.message;
                       pd.current_leader.leader_id = a.leader_id;
                       pd.current_leader.leader_epoch = a.leader_epoch;
                     }
                     shared_req->respond(resp);
                   });
}

}  // namespace sluice::kafka
