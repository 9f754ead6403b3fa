#include "kafka/txn_verifier.h"

#include <chrono>
#include <set>

#include "base/limits.h"
#include "base/log.h"
#include "base/thread_name.h"
#include "kafka/request.h"
#include "metadata/partition_manager.h"
#include "protocol/raw_client.h"
#include "replication/leadership_gate.h"
#include "txn/records.h"
#include "txn/service.h"

namespace sluice::kafka {

namespace {

// The version sent: v5 answers TRANSACTION_ABORTABLE for a partition outside
// the transaction (v4 says INVALID_TXN_STATE).
constexpr int16_t kVersion = 5;

txn_verifier::answer every(const txn_verifier::question& q, error_code e) {
  txn_verifier::answer a;
  for (const auto& tp : q.partitions) a[tp] = e;
  return a;
}

}  // namespace

bool coordinates_here(const services& svc, std::string_view transactional_id) {
  if (!svc.txn || !svc.partitions) return false;
  auto part = svc.partitions->get(std::string(txn::transaction_state_topic), svc.txn->partition_for(transactional_id));
  return part && part->is_leader() && svc.leadership->check(*part).ok();
}

class txn_verifier::connections {
 public:
  std::map<int32_t, std::pair<std::string, protocol::raw_connection>> open;
};

txn_verifier::txn_verifier(endpoint_fn endpoints, int64_t timeout_ms)
    : endpoints_(std::move(endpoints)), timeout_ms_(timeout_ms), conns_(std::make_unique<connections>()) {
  thread_ = std::thread([this] {
    set_thread_name("sluice-txn-verify");
    run();
  });
}

txn_verifier::~txn_verifier() { stop(); }

void txn_verifier::stop() {
  {
    std::lock_guard g(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::map<int32_t, std::deque<pending>> left;
  {
    std::lock_guard g(mu_);
    left.swap(queue_);
    queued_ = 0;
  }
  for (auto& [id, batch] : left)
    for (auto& p : batch) p.done(every(p.q, error_code::not_coordinator));
}

void txn_verifier::ask(int32_t coordinator, question q, done_fn done) {
  bool stopped = false;
  {
    std::lock_guard g(mu_);
    stopped = stopping_;
    if (!stopped && queued_ < limits::max_remote_verifications_queued) {
      queue_[coordinator].push_back({std::move(q), std::move(done)});
      ++queued_;
      cv_.notify_one();
      return;
    }
  }
  done(every(q, stopped ? error_code::not_coordinator : error_code::not_enough_replicas));
}

protocol::add_partitions_to_txn_request txn_verifier::build_request(const std::deque<pending>& batch) {
  protocol::add_partitions_to_txn_request req;
  for (const auto& p : batch) {
    auto& t = req.transactions.emplace_back();
    t.transactional_id = p.q.transactional_id;
    t.producer_id = p.q.producer_id;
    t.producer_epoch = p.q.producer_epoch;
    t.verify_only = !p.q.add;
    for (const auto& tp : p.q.partitions) {  // ordered by topic, then partition
      if (t.topics.empty() || t.topics.back().name != tp.topic) t.topics.emplace_back().name = tp.topic;
      t.topics.back().partitions.push_back(tp.partition);
    }
  }
  return req;
}

txn_verifier::answer txn_verifier::answer_for(const question& q,
                                              const protocol::add_partitions_to_txn_response& resp) {
  if (resp.error_code != 0) return every(q, static_cast<error_code>(resp.error_code));
  answer a = every(q, error_code::not_coordinator);
  for (const auto& r : resp.results_by_transaction) {
    if (r.transactional_id != q.transactional_id) continue;
    for (const auto& t : r.topic_results)
      for (const auto& p : t.results_by_partition) {
        auto it = a.find({t.name, p.partition_index});
        if (it != a.end()) it->second = static_cast<error_code>(p.partition_error_code);
      }
  }
  return a;
}

void txn_verifier::run() {
  while (true) {
    std::map<int32_t, std::deque<pending>> round;
    {
      std::unique_lock g(mu_);
      cv_.wait(g, [this] { return stopping_ || queued_ > 0; });
      if (stopping_) return;
      // Each transactional id once per request: a second question for it
      // stays queued for the next round.
      for (auto& [id, q] : queue_) {
        std::set<std::string> ids;
        std::deque<pending> later;
        for (auto& p : q) {
          if (ids.insert(p.q.transactional_id).second) {
            round[id].push_back(std::move(p));
          } else {
            later.push_back(std::move(p));
          }
        }
        queued_ -= q.size() - later.size();
        q.swap(later);
      }
      std::erase_if(queue_, [](const auto& kv) { return kv.second.empty(); });
    }
    for (auto& [id, batch] : round) send(id, std::move(batch));
  }
}

void txn_verifier::send(int32_t coordinator, std::deque<pending> batch) {
  auto fail = [&]([[maybe_unused]] const std::string& why) {
    SLUICE_LOG_DEBUG("transaction verification at broker {}: {}", coordinator, why);
    conns_->open.erase(coordinator);
    for (auto& p : batch) p.done(every(p.q, error_code::not_coordinator));
  };
  auto ep = endpoints_(coordinator);
  if (!ep) return fail("not registered");
  const std::string where = ep->host + ":" + std::to_string(ep->port);
  auto it = conns_->open.find(coordinator);
  if (it != conns_->open.end() && it->second.first != where) {
    conns_->open.erase(it);
    it = conns_->open.end();
  }
  if (it == conns_->open.end()) {
    auto c = protocol::raw_connection::connect(where, std::chrono::milliseconds(timeout_ms_), "sluice-txn-verify");
    if (!c.ok()) return fail(c.err().message);
    it = conns_->open.emplace(coordinator, std::make_pair(where, std::move(*c))).first;
  }
  auto r = it->second.second.call<protocol::add_partitions_to_txn_response>(build_request(batch), kVersion);
  if (!r.ok()) return fail(r.err().message);
  for (auto& p : batch) p.done(answer_for(p.q, *r));
}

}  // namespace sluice::kafka
