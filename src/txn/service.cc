#include "txn/service.h"

#include <algorithm>
#include <chrono>

#include "base/limits.h"
#include "base/log.h"
#include "config/broker_config.h"
#include "config/dynamic.h"
#include "metadata/internal_log.h"
#include "metadata/partition_manager.h"

namespace sluice::txn {

namespace {

const std::string kTopic(transaction_state_topic);
constexpr std::string_view kOffsetsTopic = "__consumer_offsets";

}  // namespace

service_config service_config::from(const config::broker_config& b) {
  service_config c;
  c.coordinator.num_partitions = b.transaction_state_log_num_partitions;
  c.coordinator.max_timeout_ms = b.transaction_max_timeout_ms;
  c.coordinator.id_expiration_ms = b.transactional_id_expiration_ms;
  c.abort_interval_ms = b.transaction_abort_interval_ms;
  c.id_removal_interval_ms = b.transactional_id_removal_interval_ms;
  return c;
}

// One sending thread per remote leader, each working through its own queue
// of marker requests in order: a leader that does not answer holds up only
// the markers it leads. Threads start on a leader's first request and are
// joined by stop(), after a request in progress has returned (its
// connection times out at limits::txn_marker_commit_timeout_ms).
class service::remote_senders {
 public:
  using done_fn = std::function<void(std::map<topic_partition, errc>)>;
  explicit remote_senders(remote_markers_fn send) : send_(std::move(send)) {}
  ~remote_senders() { stop(); }

  void submit(int32_t leader, markers m, std::vector<topic_partition> tps, done_fn done) {
    std::unique_lock g(mu_);
    if (stopping_) return;
    auto& w = workers_[leader];
    w.queue.push_back({std::move(m), std::move(tps), std::move(done)});
    if (!w.thread.joinable()) w.thread = std::thread([this, leader] { run(leader); });
    cv_.notify_all();
  }

  void stop() {
    {
      std::lock_guard g(mu_);
      stopping_ = true;
      cv_.notify_all();
    }
    std::lock_guard j(join_mu_);
    for (auto& [id, w] : workers_)
      if (w.thread.joinable()) w.thread.join();
  }

 private:
  struct request {
    markers m;
    std::vector<topic_partition> tps;
    done_fn done;
  };
  struct worker {
    std::deque<request> queue;
    std::thread thread;
  };
  void run(int32_t leader) {
    for (;;) {
      request r;
      {
        std::unique_lock g(mu_);
        cv_.wait(g, [&] { return stopping_ || !workers_[leader].queue.empty(); });
        if (stopping_) return;
        r = std::move(workers_[leader].queue.front());
        workers_[leader].queue.pop_front();
      }
      r.done(send_(leader, r.m, r.tps));
    }
  }

  const remote_markers_fn send_;
  std::mutex join_mu_;  // one stop() joins
  std::mutex mu_;       // guards workers_' queues and the map, stopping_
  std::condition_variable cv_;
  std::map<int32_t, worker> workers_;  // nodes are stable: threads keep references
  bool stopping_ = false;
};

std::vector<config::config_entry> transaction_state_configs(const config::broker_config& b, int32_t replicas) {
  return {
      {"cleanup.policy", "compact"},
      {"max.message.bytes", std::to_string(limits::transaction_state_max_message_bytes)},
      {"min.insync.replicas", std::to_string(std::min(b.transaction_state_log_min_isr, std::max(replicas, 1)))},
      {"segment.bytes", std::to_string(b.transaction_state_log_segment_bytes)},
  };
}

result<std::unique_ptr<service>> service::open(cluster::partition_manager& partitions, sluice::clock& clk,
                                               const config::broker_config& cfg) {
  service_config scfg = service_config::from(cfg);
  if (auto t = partitions.topic(kTopic)) {
    // An id's partition is its hash modulo the count: the topic's count
    // wins, or every id would be looked for in the wrong partition.
    if (t->partitions != scfg.coordinator.num_partitions)
      SLUICE_LOG_WARN("{} has {} partitions, not transaction.state.log.num.partitions={}: keeping {} so "
                      "transactional ids stay where they are",
                      kTopic, t->partitions, scfg.coordinator.num_partitions, t->partitions);
    scfg.coordinator.num_partitions = t->partitions;
  } else if (partitions.store().follows_controller()) {
    SLUICE_LOG_INFO("{} does not exist yet: transactional ids are answered COORDINATOR_NOT_AVAILABLE", kTopic);
  } else {
    // A single broker: one replica, whatever transaction.state.log.replication.factor
    // says (as __consumer_offsets gets min(factor, live brokers)).
    if (auto e = partitions.create_topic(kTopic, scfg.coordinator.num_partitions, 1,
                                         transaction_state_configs(cfg, 1), false)) {
      if (e->code != errc::already_exists) return error{errc::io_error, "creating " + kTopic + ": " + e->message};
    }
  }
  return std::unique_ptr<service>(new service(partitions, clk, scfg));
}

service::service(cluster::partition_manager& partitions, sluice::clock& clk, service_config cfg)
    : partitions_(partitions),
      cluster_(partitions.store().follows_controller()),
      clk_(clk),
      cfg_(cfg.coordinator),
      abort_interval_ms_(cfg.abort_interval_ms),
      id_removal_interval_ms_(cfg.id_removal_interval_ms),
      log_(std::make_unique<cluster::internal_log>(partitions, clk, kTopic)) {
  coord_ = std::make_unique<coordinator>(cfg_, clk_, [&partitions]() -> result<int64_t> {
    auto& ids = partitions.producer_ids();
    if (auto id = ids.try_next()) return *id;
    return ids.next();
  });
}

service::~service() { stop(); }

int32_t service::partition_for(std::string_view transactional_id) const {
  return coord_->partition_for(transactional_id);
}
int32_t service::num_partitions() const { return cfg_.num_partitions; }

int32_t service::coordinator_of(std::string_view transactional_id) const {
  auto st = partitions_.store().state(kTopic, partition_for(transactional_id));
  return st ? st->leader : -1;
}

void service::start() {
  if (send_remote_) senders_ = std::make_unique<remote_senders>(send_remote_);
  thread_ = std::thread([this] { run(); });
}

void service::stop() {
  {
    std::lock_guard g(mb_->mu);
    if (mb_->stopping) return;
    mb_->stopping = true;
  }
  mb_->cv.notify_all();
  if (thread_.joinable()) thread_.join();
  if (senders_) senders_->stop();
  std::lock_guard g(mb_->mu);
  mb_->queue.clear();
}

bool service::stopping() {
  std::lock_guard g(mb_->mu);
  return mb_->stopping;
}

void service::mailbox::post(std::function<void()> fn) {
  {
    std::lock_guard g(mu);
    if (stopping) return;
    queue.push_back(std::move(fn));
  }
  cv.notify_one();
}

void service::post(std::function<void()> fn) { mb_->post(std::move(fn)); }

void service::on_leadership(int32_t p, bool leads) {
  if (!cluster_ || p < 0 || p >= cfg_.num_partitions) return;
  if (!leads) {
    std::lock_guard g(coord_mu_);
    coord_->unload(p);
    wake_expired_locked(/*all=*/true);  // asked again: NOT_COORDINATOR
    return;
  }
  post([this, p] { load_partition(p); });
}

void service::resign() {
  if (!cluster_) return;
  std::lock_guard g(coord_mu_);
  for (int32_t p = 0; p < cfg_.num_partitions; ++p) coord_->unload(p);
  wake_expired_locked(/*all=*/true);
}

void service::load_partition(int32_t p) {
  auto part = partitions_.get(kTopic, p);
  if (!part || !part->is_leader()) return;
  {
    std::lock_guard g(coord_mu_);
    coord_->begin_load(p, part->epoch().value());
  }
  size_t records = 0;
  auto s = log_->read(
      p,
      [&](std::span<const uint8_t> key, std::optional<std::span<const uint8_t>> value) {
        std::lock_guard g(coord_mu_);
        ++records;
        if (auto r = coord_->replay(p, key, value); !r.ok())
          SLUICE_LOG_WARN("transaction coordinator: {}-{}: record skipped: {}", kTopic, p, r.err().message);
      },
      [this] { return stopping(); });
  if (!s.ok()) {
    SLUICE_LOG_ERROR("transaction coordinator: loading {}-{}: {}", kTopic, p, s.err().message);
    std::lock_guard g(coord_mu_);
    coord_->unload(p);
    return;
  }
  std::lock_guard g(coord_mu_);
  auto pending = coord_->finish_load(p);
  for (auto& m : pending) start_markers_locked(std::move(m));
  if (records > 0 || !pending.empty())
    SLUICE_LOG_INFO("transaction coordinator: loaded {}-{} ({} records, {} transactions completing)", kTopic, p,
                    records, pending.size());
}

void service::init_producer_id(const init_producer_id_request& req, reply_fn reply) {
  std::lock_guard g(coord_mu_);
  apply_locked(coord_->init_producer_id(req), std::move(reply));
}

void service::add_partitions(const add_partitions_request& req, reply_fn reply) {
  add_partitions_until(req, std::move(reply), clk_.monotonic_ms() + limits::txn_concurrent_wait_ms);
}

void service::add_offsets(const add_offsets_request& req, reply_fn reply) {
  add_offsets_until(req, std::move(reply), clk_.monotonic_ms() + limits::txn_concurrent_wait_ms);
}

void service::add_partitions_until(const add_partitions_request& req, reply_fn reply, int64_t deadline_ms) {
  std::lock_guard g(coord_mu_);
  park_or_apply_locked(req.transactional_id, coord_->add_partitions(req), std::move(reply), deadline_ms,
                       [this, req](reply_fn r, int64_t d) { add_partitions_until(req, std::move(r), d); });
}

void service::add_offsets_until(const add_offsets_request& req, reply_fn reply, int64_t deadline_ms) {
  std::lock_guard g(coord_mu_);
  park_or_apply_locked(req.transactional_id, coord_->add_offsets(req), std::move(reply), deadline_ms,
                       [this, req](reply_fn r, int64_t d) { add_offsets_until(req, std::move(r), d); });
}

void service::park_or_apply_locked(const std::string& transactional_id, decision d, reply_fn reply,
                                   int64_t deadline_ms,
                                   std::function<void(reply_fn, int64_t)> again) {
  if (!d.to_write && d.now.error == errc::concurrent_transactions && clk_.monotonic_ms() < deadline_ms &&
      parked_count_ < limits::max_parked_txn_requests) {
    parked_[transactional_id].push_back({deadline_ms, std::move(reply), std::move(again)});
    ++parked_count_;
    return;
  }
  apply_locked(std::move(d), std::move(reply));
}

void service::wake_locked(const std::string& transactional_id) {
  auto it = parked_.find(transactional_id);
  if (it == parked_.end()) return;
  auto waiting = std::move(it->second);
  parked_.erase(it);
  parked_count_ -= waiting.size();
  for (auto& w : waiting)
    post([again = std::move(w.again), reply = std::move(w.reply), d = w.deadline_ms]() mutable {
      again(std::move(reply), d);
    });
}

void service::wake_expired_locked(bool all) {
  const int64_t now = clk_.monotonic_ms();
  std::vector<std::string> due;
  for (const auto& [id, ws] : parked_)
    for (const auto& w : ws)
      if (all || w.deadline_ms <= now) {
        due.push_back(id);
        break;
      }
  for (const auto& id : due) wake_locked(id);
}

void service::end_txn(const end_txn_request& req, reply_fn reply) {
  std::lock_guard g(coord_mu_);
  apply_locked(coord_->end_txn(req), std::move(reply));
}

verify_answer service::verify(const std::string& transactional_id, int64_t producer_id, int16_t producer_epoch,
                              const partition_set& partitions) {
  std::lock_guard g(coord_mu_);
  return coord_->verify_partitions(transactional_id, producer_id, producer_epoch, partitions);
}

describe_answer service::describe(const std::string& transactional_id) {
  std::lock_guard g(coord_mu_);
  return coord_->describe(transactional_id);
}

list_answer service::list(const list_filter& filter) {
  std::lock_guard g(coord_mu_);
  return coord_->list(filter);
}

coordinator::figures service::figures() {
  std::lock_guard g(coord_mu_);
  return coord_->current_figures();
}

void service::apply_locked(decision d, reply_fn reply) {
  if (!d.to_write) {
    if (reply) reply(d.now);
    return;
  }
  append_locked(std::move(*d.to_write), std::move(reply));
}

void service::append_locked(write w, reply_fn reply) {
  const write_ref ref = w.ref;
  log_->append(w.ref.partition, w.key, w.value, [this, mb = mb_, ref, reply = std::move(reply)](status s) mutable {
    mb->post([this, ref, s = std::move(s), reply = std::move(reply)] { on_written(ref, s, reply); });
  });
}

void service::on_written(const write_ref& ref, const status& s, const reply_fn& reply) {
  std::lock_guard g(coord_mu_);
  // The id's record is in (or failed): what waited for it asks again.
  wake_locked(ref.transactional_id);
  const auto completing = completions_.find(ref.id);
  std::optional<markers> completed;
  if (completing != completions_.end()) {
    completed = std::move(completing->second);
    completions_.erase(completing);
  }
  if (s.ok()) {
    auto done = coord_->written(ref);
    if (reply) reply(done.reply);
    if (done.to_send) start_markers_locked(std::move(*done.to_send));
    return;
  }
  SLUICE_LOG_WARN("transaction coordinator: writing {}'s record to {}-{}: {}", ref.transactional_id, kTopic,
                  ref.partition, s.err().message);
  auto failed = coord_->write_failed(ref, s.code());
  if (reply) reply(failed.reply);
  if (failed.retry_completion && completed) {
    // The markers are written; the completion record is tried again later.
    marker_job job;
    job.m = std::move(*completed);
    job.due_ms = clk_.monotonic_ms() + limits::txn_marker_retry_ms;
    jobs_.emplace(next_job_++, std::move(job));
  }
}

void service::start_markers_locked(markers m) {
  marker_job job;
  job.left.insert(m.partitions.begin(), m.partitions.end());
  job.m = std::move(m);
  job.due_ms = 0;
  jobs_.emplace(next_job_++, std::move(job));
  post([this] { run_markers(); });
}

void service::run_markers() {
  struct ask {
    uint64_t job;
    markers m;
    std::vector<topic_partition> tps;
  };
  std::vector<ask> asks;
  {
    std::lock_guard g(coord_mu_);
    const int64_t now = clk_.monotonic_ms();
    for (auto it = jobs_.begin(); it != jobs_.end();) {
      marker_job& job = it->second;
      if (job.left.empty()) {
        // Every marker written: the transaction's completion record.
        auto w = coord_->markers_written(job.m);
        if (!w.ok()) {
          SLUICE_LOG_WARN("transaction coordinator: completing {}: {}", job.m.transactional_id, w.err().message);
        } else {
          completions_[w->ref.id] = std::move(job.m);
          append_locked(std::move(*w), nullptr);
        }
        it = jobs_.erase(it);
        continue;
      }
      if (job.due_ms <= now) {
        ask a{it->first, job.m, {}};
        for (const auto& tp : job.left)
          if (job.in_flight.insert(tp).second) a.tps.push_back(tp);
        if (!a.tps.empty()) asks.push_back(std::move(a));
      }
      ++it;
    }
  }
  for (auto& a : asks) {
    const bool commit = a.m.type == marker_type::commit;
    std::map<int32_t, std::vector<topic_partition>> remote;
    for (const auto& tp : a.tps) {
      auto part = partitions_.get(tp.topic, tp.partition);
      if (!part) {
        // Gone with its topic: nothing to end there. Else its leader is
        // not known here yet: tried again later.
        marker_done(a.job, tp, !partitions_.topic(tp.topic), -1);
        continue;
      }
      if (!part->is_leader()) {
        auto st = partitions_.store().state(tp.topic, tp.partition);
        if (st && st->leader >= 0 && senders_) {
          remote[st->leader].push_back(tp);
        } else {
          marker_done(a.job, tp, false, -1);
        }
        continue;
      }
      auto out = part->append_marker(a.m.producer_id, a.m.producer_epoch, commit, a.m.coordinator_epoch,
                                     clk_.now_ms());
      if (out.error == errc::invalid_producer_epoch || out.error == errc::coordinator_fenced) {
        // A newer epoch or coordinator ended it there already: nothing to do.
        SLUICE_LOG_WARN("transaction coordinator: marker for {} on {}-{} refused: {}", a.m.transactional_id,
                        tp.topic, tp.partition, out.message);
        marker_done(a.job, tp, true, -1);
        continue;
      }
      if (out.error != errc::ok) {
        marker_done(a.job, tp, false, -1);
        continue;
      }
      const int64_t at = out.last.value();
      part->on_committed(out.last, [this, mb = mb_, job = a.job, tp, at](const status& s) {
        const bool ok = s.ok();
        mb->post([this, job, tp, ok, at] { marker_done(job, tp, ok, at); });
      });
    }
    for (auto& [leader, tps] : remote) {
      senders_->submit(leader, a.m, tps, [this, mb = mb_, job = a.job](std::map<topic_partition, errc> outcome) {
        mb->post([this, job, outcome = std::move(outcome)] {
          for (const auto& [tp, e] : outcome)
            marker_done(job, tp, e == errc::ok || e == errc::invalid_producer_epoch || e == errc::coordinator_fenced,
                        -1);
        });
      });
    }
  }
}

void service::marker_done(uint64_t job, const topic_partition& tp, bool ok, int64_t local_offset) {
  bool complete = false;
  int64_t producer_id = -1;
  bool commit = false;
  {
    std::lock_guard g(coord_mu_);
    auto it = jobs_.find(job);
    if (it == jobs_.end()) return;
    marker_job& j = it->second;
    j.in_flight.erase(tp);
    if (!ok) {
      j.due_ms = clk_.monotonic_ms() + limits::txn_marker_retry_ms;
      return;
    }
    if (j.left.erase(tp) == 0) return;  // counted already
    producer_id = j.m.producer_id;
    commit = j.m.type == marker_type::commit;
    complete = j.left.empty();
  }
  // Outside coord_mu_: the group coordinator asks this service (verify)
  // while it holds its own lock.
  if (local_offset >= 0 && tp.topic == kOffsetsTopic && offsets_marker_)
    offsets_marker_(tp.partition, producer_id, commit, local_offset);
  if (complete) post([this] { run_markers(); });
}

void service::run() {
  if (!cluster_) {
    for (int32_t p = 0; p < cfg_.num_partitions && !stopping(); ++p) load_partition(p);
  }
  int64_t next_abort = clk_.monotonic_ms() + abort_interval_ms_;
  int64_t next_expiry = clk_.monotonic_ms() + id_removal_interval_ms_;
  while (true) {
    std::deque<std::function<void()>> work;
    {
      std::unique_lock g(mb_->mu);
      mb_->cv.wait_for(g, std::chrono::milliseconds(limits::txn_service_tick_ms),
                       [this] { return mb_->stopping || !mb_->queue.empty(); });
      if (mb_->stopping) return;
      work.swap(mb_->queue);
    }
    for (auto& fn : work) fn();
    run_markers();
    {
      std::lock_guard g(coord_mu_);
      wake_expired_locked(false);
    }
    const int64_t now = clk_.monotonic_ms();
    if (now >= next_abort) {
      next_abort = now + abort_interval_ms_;
      std::lock_guard g(coord_mu_);
      for (auto& w : coord_->expire_timed_out()) append_locked(std::move(w), nullptr);
    }
    if (now >= next_expiry) {
      next_expiry = now + id_removal_interval_ms_;
      std::lock_guard g(coord_mu_);
      for (auto& w : coord_->expire_ids()) append_locked(std::move(w), nullptr);
    }
  }
}

}  // namespace sluice::txn
