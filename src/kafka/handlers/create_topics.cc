#include <atomic>
#include <memory>
#include <mutex>
#include <set>

#include "kafka/delayed_ops.h"
#include "kafka/dispatcher.h"
#include "kafka/handlers/handlers.h"
#include "metadata/partition_manager.h"

namespace sluice::kafka {

void answer_when_created(services& svc, std::vector<std::string> topics, int32_t timeout_ms,
                         std::function<void()> answer) {
  if (topics.empty() || timeout_ms <= 0) {
    answer();
    return;
  }
  struct waiter {
    std::function<void()> answer;
    std::atomic<size_t> left{0};
    std::atomic<bool> answered{false};
    std::mutex mu;  // guards timer
    std::shared_ptr<delayed_ops::timer> timer;
  };
  auto w = std::make_shared<waiter>();
  w->answer = std::move(answer);
  w->left = topics.size();
  auto finish = [w] {
    if (w->answered.exchange(true)) return;
    {
      std::lock_guard g(w->mu);
      if (w->timer) w->timer->cancel();
    }
    w->answer();
  };
  {
    std::lock_guard g(w->mu);
    w->timer =
        svc.delayed->after(std::chrono::milliseconds(timeout_ms), [finish](bool) { finish(); });
  }
  auto* delayed = svc.delayed;
  for (const auto& t : topics) {
    svc.partitions->when_created(t, [w, finish, delayed] {
      if (--w->left == 0) delayed->post(finish);
    });
  }
}

void handle_create_topics(request req) {
  auto body = decode_body<protocol::create_topics_request>(req);
  if (!body) return;
  auto& pm = *req.svc->partitions;
  protocol::create_topics_response resp;
  std::vector<std::string> created;  // whose logs are being made
  std::multiset<std::string> names;
  for (const auto& t : body->topics) names.insert(t.name);
  for (const auto& t : body->topics) {
    auto& out = resp.topics.emplace_back();
    out.name = t.name;
    auto fail = [&](error_code e, std::string msg) {
      out.error_code = to_wire(e);
      out.error_message = std::move(msg);
    };
    if (names.count(t.name) > 1) {
      fail(error_code::invalid_request, "topic named more than once in the request");
      continue;
    }
    int32_t partitions = t.num_partitions;
    int16_t rf = t.replication_factor;
    std::vector<cluster::replica_list> assignment;
    if (!t.assignments.empty()) {
      // A manual assignment, one entry per partition 0..n-1 in any order;
      // the store checks the brokers (a single broker: only itself).
      if (partitions != -1 || rf != -1) {
        fail(error_code::invalid_request, "give either an assignment or partition count and replication factor");
        continue;
      }
      assignment.resize(t.assignments.size());
      bool ok = true;
      for (const auto& a : t.assignments) {
        const auto i = static_cast<size_t>(a.partition_index);
        if (a.partition_index < 0 || i >= assignment.size() || !assignment[i].empty() || a.broker_ids.empty()) {
          ok = false;
          break;
        }
        assignment[i] = a.broker_ids;
      }
      if (!ok) {
        fail(error_code::invalid_replica_assignment,
             "the assignment must name partitions 0.." + std::to_string(assignment.size() - 1) +
                 " once each, each with at least one broker");
        continue;
      }
      partitions = static_cast<int32_t>(assignment.size());
      rf = static_cast<int16_t>(assignment[0].size());
    }
    std::vector<config::config_entry> configs;
    for (const auto& c : t.configs) configs.push_back({c.name, c.value});
    // The topic table holds the topic (durably) when this returns; the logs
    // are made on partition_manager's background thread, so a large topic
    // holds up neither this I/O thread's other clients nor the answer past
    // the request's timeout_ms.
    if (auto e = pm.create_topic(t.name, partitions, rf, configs, body->validate_only,
                                 cluster::partition_manager::create_mode::background, std::move(assignment))) {
      fail(to_kafka_error(e->code), e->message);
      continue;
    }
    if (!body->validate_only) created.push_back(t.name);
    // What was just recorded; nothing for validate_only.
    const auto info = body->validate_only ? std::nullopt : pm.topic(t.name);
    // v7: the new topic's id. A validate_only create makes no topic and
    // answers the zero id, as Kafka does.
    if (info) out.topic_id = info->id;
    if (req.version() >= 5) {
      auto cfg = pm.broker_config();
      out.num_partitions = partitions == -1 ? cfg->num_partitions : partitions;
      out.replication_factor = rf == -1 ? cfg->default_replication_factor : rf;
      config::config_map overrides;
      if (info) {
        overrides = info->overrides;
      } else if (auto ov = config::make_topic_overrides(*cfg, configs); ov.ok()) {
        overrides = *ov;  // validate_only: describe what would be created
      }
      auto described = config::describe_topic(*cfg, overrides);
      if (described.ok()) {
        auto& list = out.configs.emplace();
        for (const auto& d : *described) {
          auto& c = list.emplace_back();
          c.name = d.name;
          c.value = d.value;
          c.read_only = d.read_only;
          c.config_source = static_cast<int8_t>(d.source);
          c.is_sensitive = d.sensitive;
        }
      }
    }
  }
  const int32_t timeout_ms = body->timeout_ms;
  answer_when_created(*req.svc, std::move(created), timeout_ms,
                      [r = std::make_shared<request>(std::move(req)),
                       a = std::make_shared<protocol::create_topics_response>(std::move(resp))] {
                        r->respond(*a);
                      });
}

}  // namespace sluice::kafka
