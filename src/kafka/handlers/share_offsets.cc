// The admin share-group offset APIs (KIP-932), at the group's coordinator:
// DescribeShareGroupOffsets (90), AlterShareGroupOffsets (91) and
// DeleteShareGroupOffsets (92). The share coordinators hold the states;
// share::service reaches them. These handlers resolve topic names, check
// the group, and encode what the service answers.

#include <map>
#include <memory>

#include "kafka/dispatcher.h"
#include "kafka/handlers/handlers.h"
#include "kafka/handlers/share_gate.h"
#include "metadata/partition_manager.h"
#include "share/service.h"

namespace sluice::kafka {

namespace {

// A requested topic resolved: its id and partition count, or why not.
struct resolved_topic {
  sluice::topic_id id{};
  int32_t partitions = 0;
  bool known = false;
};

resolved_topic resolve(services& svc, const std::string& name) {
  auto t = svc.partitions->topic(name);
  if (!t) return {};
  return {t->id, t->partitions, true};
}

// Calls `done` once the last of `n` parts has finished.
struct join_counter {
  size_t left;
  std::function<void()> done;
  std::mutex mu;
  void one() {
    {
      std::lock_guard g(mu);
      if (--left > 0) return;
    }
    done();
  }
};

// The group-level refusal of AlterShareGroupOffsets and
// DeleteShareGroupOffsets, set in `resp`: the gate's, or NON_EMPTY_GROUP
// (share::service::prepare_admin_change). False when the change may go on.
template <class Resp>
bool refuse_admin_change(services& svc, const std::string& group_id, Resp& resp) {
  std::string message;
  auto e = share_group_gate(svc, group_id, message);
  if (e == error_code::none) {
    e = svc.share->prepare_admin_change(group_id);
    if (e == error_code::non_empty_group) message = "share group " + group_id + " has members: stop them first";
    if (e == error_code::group_max_size_reached) message = "this broker coordinates the most share groups it may";
  }
  if (e == error_code::none) return false;
  resp.error_code = to_wire(e);
  resp.error_message = message;
  return true;
}

constexpr const char* kNoTopic = "no such topic";
constexpr const char* kNoPartition = "no such partition";

}  // namespace

void handle_describe_share_group_offsets(request req) {
  auto body = decode_body<protocol::describe_share_group_offsets_request>(req);
  if (!body) return;
  services& svc = *req.svc;
  auto resp = std::make_shared<protocol::describe_share_group_offsets_response>();
  auto shared_req = std::make_shared<request>(std::move(req));
  auto join = std::make_shared<join_counter>();
  join->left = body->groups.size() + 1;
  join->done = [shared_req, resp] { shared_req->respond(*resp); };
  resp->groups.resize(body->groups.size());
  for (size_t gi = 0; gi < body->groups.size(); ++gi) {
    const auto& in = body->groups[gi];
    auto& out = resp->groups[gi];
    out.group_id = in.group_id;
    std::string message;
    if (auto e = share_group_gate(svc, in.group_id, message); e != error_code::none) {
      out.error_code = to_wire(e);
      out.error_message = message;
      join->one();
      continue;
    }
    // Null topics: every topic the group's share partitions may have state
    // for, each with all its partitions.
    std::vector<std::pair<std::string, std::vector<int32_t>>> wanted;
    if (in.topics) {
      for (const auto& t : *in.topics) wanted.emplace_back(t.topic_name, t.partitions);
    } else {
      for (const auto& name : svc.share->group_topics(in.group_id)) {
        auto r = resolve(svc, name);
        std::vector<int32_t> all;
        for (int32_t p = 0; p < r.partitions; ++p) all.push_back(p);
        wanted.emplace_back(name, std::move(all));
      }
      if (wanted.empty() && !svc.share->is_share_group(in.group_id)) {
        out.error_code = to_wire(error_code::group_id_not_found);
        out.error_message = "no share group " + in.group_id;
        join->one();
        continue;
      }
    }
    // The answer's shape now; the offsets of known partitions once the
    // share coordinators answer. slots[i] is the partition result keys[i]
    // fills.
    std::vector<share::share_key> keys;
    std::vector<std::pair<size_t, size_t>> slots;
    for (const auto& [name, parts] : wanted) {
      auto r = resolve(svc, name);
      auto& t = out.topics.emplace_back();
      t.topic_name = name;
      t.topic_id = r.id;
      for (int32_t p : parts) {
        auto& pr = t.partitions.emplace_back();
        pr.partition_index = p;
        pr.start_offset = -1;
        pr.leader_epoch = -1;
        pr.lag = -1;
        if (!r.known || p < 0 || p >= r.partitions) {
          pr.error_code = to_wire(error_code::unknown_topic_or_partition);
          pr.error_message = r.known ? kNoPartition : kNoTopic;
          continue;
        }
        keys.push_back(share::share_key{in.group_id, r.id, p});
        slots.emplace_back(out.topics.size() - 1, t.partitions.size() - 1);
      }
    }
    svc.share->describe_offsets(std::move(keys), [resp, gi, slots, join](std::vector<share::service::offset_answer> as) {
      auto& g = resp->groups[gi];
      for (size_t i = 0; i < as.size(); ++i) {
        auto& pr = g.topics[slots[i].first].partitions[slots[i].second];
        pr.error_code = to_wire(as[i].error);
        if (as[i].error != error_code::none) pr.error_message = as[i].message;
        pr.start_offset = as[i].start_offset;
        pr.leader_epoch = as[i].leader_epoch;
        pr.lag = as[i].lag;
        pr.in_flight = as[i].in_flight;
        pr.archived = as[i].archived;
      }
      join->one();
    });
  }
  join->one();
}

void handle_alter_share_group_offsets(request req) {
  auto body = decode_body<protocol::alter_share_group_offsets_request>(req);
  if (!body) return;
  services& svc = *req.svc;
  auto resp = std::make_shared<protocol::alter_share_group_offsets_response>();
  if (refuse_admin_change(svc, body->group_id, *resp)) return req.respond(*resp);
  std::vector<std::pair<share::share_key, int64_t>> starts;
  std::vector<std::pair<size_t, size_t>> slots;
  for (const auto& t : body->topics) {
    auto r = resolve(svc, t.topic_name);
    auto& tr = resp->responses.emplace_back();
    tr.topic_name = t.topic_name;
    tr.topic_id = r.id;
    for (const auto& p : t.partitions) {
      auto& pr = tr.partitions.emplace_back();
      pr.partition_index = p.partition_index;
      if (!r.known || p.partition_index < 0 || p.partition_index >= r.partitions) {
        pr.error_code = to_wire(error_code::unknown_topic_or_partition);
        pr.error_message = r.known ? kNoPartition : kNoTopic;
        continue;
      }
      if (p.start_offset < 0) {
        pr.error_code = to_wire(error_code::invalid_request);
        pr.error_message = "a start offset is not negative";
        continue;
      }
      starts.emplace_back(share::share_key{body->group_id, r.id, p.partition_index}, p.start_offset);
      slots.emplace_back(resp->responses.size() - 1, tr.partitions.size() - 1);
    }
  }
  auto shared_req = std::make_shared<request>(std::move(req));
  svc.share->alter_offsets(std::move(starts), [shared_req, resp, slots](std::vector<share::service::offset_answer> as) {
    for (size_t i = 0; i < as.size(); ++i) {
      auto& pr = resp->responses[slots[i].first].partitions[slots[i].second];
      pr.error_code = to_wire(as[i].error);
      if (as[i].error != error_code::none) pr.error_message = as[i].message;
    }
    shared_req->respond(*resp);
  });
}

void handle_delete_share_group_offsets(request req) {
  auto body = decode_body<protocol::delete_share_group_offsets_request>(req);
  if (!body) return;
  services& svc = *req.svc;
  auto resp = std::make_shared<protocol::delete_share_group_offsets_response>();
  if (refuse_admin_change(svc, body->group_id, *resp)) return req.respond(*resp);
  // Whole topics: every partition's state goes; a topic answers the first
  // error among its partitions.
  std::vector<share::share_key> keys;
  std::vector<size_t> slots;
  std::vector<std::string> forgotten;
  for (const auto& t : body->topics) {
    auto r = resolve(svc, t.topic_name);
    auto& tr = resp->responses.emplace_back();
    tr.topic_name = t.topic_name;
    tr.topic_id = r.id;
    if (!r.known) {
      tr.error_code = to_wire(error_code::unknown_topic_or_partition);
      tr.error_message = kNoTopic;
      continue;
    }
    forgotten.push_back(t.topic_name);
    for (int32_t p = 0; p < r.partitions; ++p) {
      keys.push_back(share::share_key{body->group_id, r.id, p});
      slots.push_back(resp->responses.size() - 1);
    }
  }
  auto shared_req = std::make_shared<request>(std::move(req));
  svc.share->delete_offsets(body->group_id, forgotten, std::move(keys),
                            [shared_req, resp, slots](std::vector<share::service::offset_answer> as) {
                              for (size_t i = 0; i < as.size(); ++i) {
                                auto& tr = resp->responses[slots[i]];
                                if (as[i].error == error_code::none || tr.error_code != 0) continue;
                                tr.error_code = to_wire(as[i].error);
                                tr.error_message = as[i].message;
                              }
                              shared_req->respond(*resp);
                            });
}

}  // namespace sluice::kafka
