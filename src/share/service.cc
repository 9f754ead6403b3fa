#include "share/service.h"

#include <algorithm>
#include <chrono>
#include <set>

#include "base/limits.h"
#include "base/log.h"
#include "config/broker_config.h"
#include "metadata/internal_log.h"
#include "metadata/partition_manager.h"
#include "model/record_batch.h"
#include "protocol/records/record_batch.h"

namespace sluice::share {

namespace {

const std::string kTopic(share_state_topic);

using kafka::error_code;
error_code to_kafka(errc e) { return kafka::to_kafka_error(e); }

// What a share consumer is told when its share partition here was dropped
// or could not be loaded: leadership moved, or the state was fenced (reset
// or deleted by an admin, written by a newer leader) is NOT_LEADER_OR_FOLLOWER,
// so the client looks again and retries; anything else as it is.
error_code leader_error(errc e) {
  return e == errc::not_leader || e == errc::fenced_leader_epoch || e == errc::fenced_state_epoch
             ? error_code::not_leader_or_follower
             : to_kafka(e);
}

}  // namespace

// One share partition led here: a share group's view of a topic partition
// this broker leads, with its writes to the share coordinator.
struct service::entry {
  share_key key;
  std::shared_ptr<cluster::partition> part;
  int32_t leader_epoch = -1;
  int32_t state_epoch = 0;
  // The broker whose share coordinator holds the state (this one, or
  // another in a cluster); while `loading` the state is being read there
  // and `sp` is null: what needs it waits in `ready`.
  int32_t coordinator = -1;
  bool loading = false;
  std::vector<std::function<void(result<std::shared_ptr<entry>>)>> ready;
  std::unique_ptr<share_partition> sp;
  group_settings gs;
  // Every change bumps `version`; `durable` is the version the share
  // coordinator has made durable. One write is in flight at a time, always
  // of the whole state as it is when the write starts.
  uint64_t version = 0;
  uint64_t durable = 0;
  bool writing = false;
  bool dropped = false;
  // A dead-letter batch in flight; when the last one failed, not before
  // this monotonic time.
  bool dl_writing = false;
  int64_t dl_retry_at_ms = 0;
  std::vector<std::pair<uint64_t, std::function<void(status)>>> waiters;
};

service_config service_config::from(const config::broker_config& b) {
  service_config c;
  c.membership.session_timeout_ms = b.group_share_session_timeout_ms;
  c.membership.heartbeat_interval_ms = b.group_share_heartbeat_interval_ms;
  c.membership.max_size = b.group_share_max_size;
  c.defaults.partition.record_lock_duration_ms = b.group_share_record_lock_duration_ms;
  c.defaults.partition.delivery_count_limit = b.group_share_delivery_count_limit;
  c.defaults.partition.max_record_locks = b.group_share_partition_max_record_locks;
  c.state_partitions = b.share_state_topic_num_partitions;
  return c;
}

std::vector<config::config_entry> share_state_configs(const config::broker_config& b, int32_t replicas) {
  return {
      {"cleanup.policy", "compact"},
      {"min.insync.replicas", std::to_string(std::min(b.share_state_topic_min_isr, std::max(replicas, 1)))},
      {"segment.bytes", std::to_string(b.share_state_topic_segment_bytes)},
  };
}

result<std::unique_ptr<service>> service::open(cluster::partition_manager& partitions, sluice::clock& clk,
                                               const config::broker_config& cfg, int32_t node_id) {
  service_config scfg = service_config::from(cfg);
  if (auto t = partitions.topic(kTopic)) {
    // A share partition's coordinator partition is its key's hash modulo
    // the count: the topic's count wins.
    scfg.state_partitions = t->partitions;
  } else if (!partitions.store().follows_controller()) {
    if (auto e = partitions.create_topic(kTopic, scfg.state_partitions, 1, share_state_configs(cfg, 1), false)) {
      if (e->code != errc::already_exists) return error{errc::io_error, "creating " + kTopic + ": " + e->message};
    }
  }
  return std::unique_ptr<service>(new service(partitions, clk, scfg, node_id));
}

service::service(cluster::partition_manager& partitions, sluice::clock& clk, service_config cfg, int32_t node_id)
    : partitions_(partitions),
      clk_(clk),
      cfg_(cfg),
      node_id_(node_id),
      cluster_(partitions.store().follows_controller()),
      log_(std::make_unique<cluster::internal_log>(partitions, clk, kTopic)),
      groups_(cfg.membership),
      coord_(std::max(cfg.state_partitions, 1)) {}

service::~service() { stop(); }

void service::start() {
  thread_ = std::thread([this] { run(); });
}

void service::stop() {
  {
    std::lock_guard g(run_mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  run_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  // Jobs queued for other brokers are dropped; what waits on them is
  // answered below.
  workers_.stop();
  std::vector<std::function<void()>> after;
  {
    std::lock_guard g(mu_);
    const status down(errc::shutting_down, "the broker is shutting down");
    for (auto& [k, e] : entries_) {
      e->dropped = true;
      for (auto& [v, w] : e->waiters) after.push_back([w = std::move(w), down] { w(down); });
      e->waiters.clear();
      for (auto& r : e->ready) after.push_back([r = std::move(r), down] { r(down.err()); });
      e->ready.clear();
    }
    entries_.clear();
  }
  for (auto& f : after) f();
}

void service::on_leadership(int32_t p, bool leads) {
  if (!cluster_ || p < 0 || p >= coord_.num_partitions()) return;
  if (!leads) {
    std::lock_guard g(mu_);
    coord_.unload(p);
    return;
  }
  std::lock_guard g(run_mu_);
  if (stopping_) return;
  queue_.push_back([this, p] { load_partition(p); });
  run_cv_.notify_all();
}

void service::load_partition(int32_t p) {
  auto part = partitions_.get(kTopic, p);
  if (!part || !part->is_leader()) return;
  {
    std::lock_guard g(mu_);
    coord_.begin_load(p);
  }
  status failed;
  auto s = log_->read(
      p,
      [&](std::span<const uint8_t> key, std::optional<std::span<const uint8_t>> value) {
        std::lock_guard g(mu_);
        if (!failed.ok()) return;
        if (auto r = coord_.replay(p, key, value); !r.ok()) failed = r;
      },
      [this] {
        std::lock_guard g(run_mu_);
        return stopping_;
      });
  std::lock_guard g(mu_);
  if (!s.ok() || !failed.ok()) {
    // State that cannot be read must not be served as if there were none:
    // the partition stays unloaded (NOT_COORDINATOR) and the error logged.
    SLUICE_LOG_ERROR("share coordinator: loading {}-{}: {}", kTopic, p, (!s.ok() ? s : failed).err().message);
    coord_.unload(p);
    return;
  }
  coord_.finish_load(p);
}

void service::run() {
  // A single broker leads every partition of __share_group_state from the
  // start.
  if (!cluster_) {
    for (int32_t p = 0; p < coord_.num_partitions(); ++p) load_partition(p);
  }
  std::unique_lock g(run_mu_);
  while (!stopping_) {
    while (!queue_.empty() && !stopping_) {
      auto fn = std::move(queue_.front());
      queue_.pop_front();
      g.unlock();
      fn();
      g.lock();
    }
    if (stopping_) break;
    run_cv_.wait_for(g, std::chrono::milliseconds(clk_.sleep_ms_until(clk_.monotonic_ms() + limits::share_tick_ms)));
    if (stopping_) break;
    g.unlock();
    tick();
    g.lock();
  }
}

group_settings service::settings_for(const std::string& group_id) {
  return group_settings_ ? group_settings_(group_id, cfg_.defaults) : cfg_.defaults;
}

std::optional<topic_info> service::lookup_topic(const std::string& name) {
  auto t = partitions_.topic(name);
  if (!t) return std::nullopt;
  return topic_info{t->id, t->partitions};
}

// ---- Group coordinator --------------------------------------------------------

heartbeat_answer service::heartbeat(const heartbeat_request& in) {
  heartbeat_request req = in;
  const auto gs = settings_for(req.group_id);
  req.session_timeout_ms = gs.session_timeout_ms;
  req.heartbeat_interval_ms = gs.heartbeat_interval_ms;
  std::lock_guard g(mu_);
  if (!groups_.exists(req.group_id) && groups_.size() >= limits::max_share_groups) {
    heartbeat_answer a;
    a.error = kafka::error_code::group_max_size_reached;
    a.message = "this broker coordinates the most share groups it may";
    return a;
  }
  return groups_.heartbeat(req, [this](const std::string& n) { return lookup_topic(n); }, clk_.monotonic_ms());
}

std::optional<group_view> service::describe(const std::string& group_id) {
  std::lock_guard g(mu_);
  return groups_.describe(group_id, [this](const std::string& n) { return lookup_topic(n); });
}

std::vector<std::string> service::list_groups() {
  std::lock_guard g(mu_);
  return groups_.list();
}

bool service::is_share_group(const std::string& group_id) {
  std::lock_guard g(mu_);
  return groups_.exists(group_id);
}

kafka::error_code service::delete_group(const std::string& group_id) {
  // The keys whose state may exist: the partitions of the group's topics,
  // and every state of the group held here (its topic may be gone).
  std::set<share_key> keys;
  for (const auto& name : group_topics(group_id)) {
    if (auto t = partitions_.topic(name))
      for (int32_t p = 0; p < t->partitions; ++p) keys.insert(share_key{group_id, t->id, p});
  }
  {
    std::lock_guard g(mu_);
    if (auto e = groups_.remove(group_id); e != kafka::error_code::none) return e;
    for (const auto& [k, s] : coord_.group_state(group_id)) keys.insert(k);
  }
  // Deleted at each key's share coordinator, here or at another broker,
  // after the answer: a state left behind by a failure is harmless (a
  // group of this id created again reads it as its own).
  std::vector<std::pair<share_key, int64_t>> work;
  work.reserve(keys.size());
  for (const auto& k : keys) work.emplace_back(k, -1);
  admin_run(admin_op::remove, std::move(work), [](std::vector<offset_answer> answers) {
    for (const auto& a : answers)
      if (a.error != error_code::none)
        SLUICE_LOG_WARN("share coordinator: deleting the state of {}: {}", to_string(a.key), a.message);
  });
  return kafka::error_code::none;
}

// ---- Group coordinator: the admin offset APIs -----------------------------------

struct service::admin_job {
  admin_op op;
  std::vector<std::pair<share_key, int64_t>> keys;  // the start offsets for alter
  std::mutex mu;  // guards what follows
  std::vector<offset_answer> answers;
  size_t waiting = 0;
  offsets_fn done;

  void finish_one() {
    offsets_fn fire;
    {
      std::lock_guard g(mu);
      if (--waiting > 0) return;
      fire = std::move(done);
    }
    fire(std::move(answers));
  }
  void fail(size_t i, kafka::error_code e, std::string message) {
    {
      std::lock_guard g(mu);
      answers[i].error = e;
      answers[i].message = std::move(message);
    }
    finish_one();
  }
};

std::vector<std::string> service::group_topics(const std::string& group_id) {
  std::lock_guard g(mu_);
  auto names = groups_.topics(group_id);
  for (const auto& [k, snap] : coord_.group_state(group_id)) {
    auto t = partitions_.topic_by_id(k.topic_id);
    if (t && std::find(names.begin(), names.end(), t->name) == names.end()) names.push_back(t->name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

kafka::error_code service::prepare_admin_change(const std::string& group_id) {
  std::lock_guard g(mu_);
  if (!groups_.exists(group_id) && groups_.size() >= limits::max_share_groups) return error_code::group_max_size_reached;
  return groups_.prepare_admin_change(group_id);
}

void service::describe_offsets(std::vector<share_key> keys, offsets_fn done) {
  std::vector<std::pair<share_key, int64_t>> k;
  k.reserve(keys.size());
  for (auto& key : keys) k.emplace_back(std::move(key), -1);
  admin_run(admin_op::describe, std::move(k), std::move(done));
}

void service::alter_offsets(std::vector<std::pair<share_key, int64_t>> starts, offsets_fn done) {
  admin_run(admin_op::alter, std::move(starts), std::move(done));
}

void service::delete_offsets(const std::string& group_id, const std::vector<std::string>& topics,
                             std::vector<share_key> keys, offsets_fn done) {
  {
    std::lock_guard g(mu_);
    for (const auto& t : topics) groups_.forget_topic(group_id, t);
  }
  std::vector<std::pair<share_key, int64_t>> k;
  k.reserve(keys.size());
  for (auto& key : keys) k.emplace_back(std::move(key), -1);
  admin_run(admin_op::remove, std::move(k), std::move(done));
}

void service::admin_run(admin_op op, std::vector<std::pair<share_key, int64_t>> keys, offsets_fn done) {
  auto job = std::make_shared<admin_job>();
  job->op = op;
  job->keys = std::move(keys);
  job->answers.resize(job->keys.size());
  for (size_t i = 0; i < job->keys.size(); ++i) job->answers[i].key = job->keys[i].first;
  job->done = std::move(done);
  job->waiting = job->keys.size() + 1;  // +1: this call, until every key is on its way
  for (size_t i = 0; i < job->keys.size(); ++i) admin_one(op, job, i);
  job->finish_one();
}

void service::fill_offsets(offset_answer& a, const std::optional<share_snapshot>& s) {
  if (!s) return;
  a.start_offset = s->state.start_offset;
  a.leader_epoch = s->leader_epoch;
  a.in_flight = share_in_flight(s->state);
  a.archived = s->state.archived_count;
  auto t = partitions_.topic_by_id(a.key.topic_id);
  auto part = t ? partitions_.get(t->name, a.key.partition) : nullptr;
  if (!part) return;
  const bool committed = settings_for(a.key.group_id).read_committed;
  a.lag = share_lag(s->state, (committed ? part->last_stable_offset() : part->high_watermark()).value());
}

void service::admin_append_locked(const std::shared_ptr<admin_job>& job, size_t i, const share::state_write& w,
                                  std::vector<std::function<void()>>& after) {
  // A share partition led here forgets what it held: the state it was
  // read from is replaced.
  drop_locked(w.key, status(errc::fenced_state_epoch, "the share partition's state was reset"), after);
  after.push_back([this, job, i, w] {
    append_state(w, [this, job, i](status s) {
      if (!s.ok()) {
        {
          std::lock_guard g(mu_);
          reload_locked(coord_.partition_for(job->answers[i].key));
        }
        job->fail(i, to_kafka(s.code()), s.err().message);
        return;
      }
      job->finish_one();
    });
  });
}

void service::admin_one(admin_op op, const std::shared_ptr<admin_job>& job, size_t i) {
  const share_key key = job->keys[i].first;
  const int64_t start = job->keys[i].second;
  const int32_t c = coordinator_of(key);
  if (c < 0) return job->fail(i, error_code::coordinator_not_available, "the share coordinator of " + to_string(key) + " is not known");
  if (c != node_id_) {
    if (!remote_) return job->fail(i, error_code::coordinator_not_available, "no way to reach broker " + std::to_string(c));
    const bool queued = workers_.submit(c, [this, op, job, i, key, start, c] {
      // On broker c's worker: blocking calls to its share coordinator.
      status st;
      if (op == admin_op::remove) {
        st = remote_->delete_state(c, key);
      } else {
        auto r = remote_->read_state(c, key, -1);
        if (!r.ok()) {
          st = r.err();
        } else if (op == admin_op::describe) {
          std::lock_guard g(job->mu);
          fill_offsets(job->answers[i], *r);
        } else {
          st = remote_->initialize_state(c, key, r->has_value() ? (*r)->state_epoch + 1 : 0, start);
        }
      }
      if (op != admin_op::describe) {
        std::vector<std::function<void()>> after;
        {
          std::lock_guard g(mu_);
          drop_locked(key, status(errc::fenced_state_epoch, "the share partition's state was reset"), after);
        }
        for (auto& f : after) f();
      }
      if (!st.ok()) return job->fail(i, to_kafka(st.code()), st.err().message);
      job->finish_one();
    });
    if (!queued) job->fail(i, error_code::coordinator_not_available, "the broker is shutting down");
    return;
  }
  std::vector<std::function<void()>> after;
  std::optional<error> failed;
  {
    std::lock_guard g(mu_);
    switch (op) {
      case admin_op::describe: {
        auto r = coord_.read(key, -1);
        if (!r.ok()) {
          failed = r.err();
        } else {
          std::lock_guard g2(job->mu);
          fill_offsets(job->answers[i], *r);
          after.push_back([job] { job->finish_one(); });
        }
        break;
      }
      case admin_op::alter: {
        auto w = coord_.initialize(key, -1, start, clk_.now_ms());
        if (!w.ok()) {
          failed = w.err();
        } else {
          admin_append_locked(job, i, *w, after);
        }
        break;
      }
      case admin_op::remove: {
        auto w = coord_.remove(key);
        if (!w.ok()) {
          failed = w.err();
        } else if (w->has_value()) {
          admin_append_locked(job, i, **w, after);
        } else {
          after.push_back([job] { job->finish_one(); });
        }
        break;
      }
    }
  }
  for (auto& f : after) f();
  if (failed) job->fail(i, to_kafka(failed->code), failed->message);
}

// ---- Share-partition leader ---------------------------------------------------

int64_t service::reset_point(cluster::partition& part, const group_settings& gs) {
  switch (gs.reset) {
    case offset_reset::earliest: return part.log_start_offset().value();
    case offset_reset::by_duration: {
      // The first batch written no earlier than now - duration; none: the
      // end of the log (everything is older).
      auto r = part.offset_for_timestamp(clk_.now_ms() - gs.reset_duration_ms);
      if (r.ok() && r->has_value()) return std::max((*r)->base.value(), part.log_start_offset().value());
      return part.high_watermark().value();
    }
    case offset_reset::latest: break;
  }
  return part.high_watermark().value();
}

int32_t service::coordinator_of(const share_key& key) {
  if (!cluster_) return node_id_;
  auto st = partitions_.store().state(kTopic, coord_.partition_for(key));
  return st ? st->leader : -1;
}

void service::with_entry_locked(const share_key& key, const std::shared_ptr<cluster::partition>& part,
                                std::function<void(result<std::shared_ptr<entry>>)> ready,
                                std::vector<std::function<void()>>& after, bool reload_if_idle) {
  const int32_t epoch = part->epoch().value();
  auto it = entries_.find(key);
  if (it != entries_.end() && (it->second->part != part || it->second->leader_epoch != epoch)) {
    // Led again at another epoch (or the topic was created again): what
    // the old entry held in memory is gone; its durable state is not.
    drop_locked(key, status(errc::not_leader, "leadership changed"), after);
    it = entries_.end();
  }
  if (it != entries_.end() && reload_if_idle) {
    // Nothing held, nothing unwritten: memory says no more than the share
    // coordinator, which may have been reset since (the admin APIs).
    const auto& e = it->second;
    if (!e->loading && !e->writing && !e->dl_writing && e->durable >= e->version &&
        e->sp->count(record_state::acquired) == 0 && e->sp->pending_dead_letters().empty()) {
      drop_locked(key, status(errc::not_leader, "read again"), after);
      it = entries_.end();
    }
  }
  if (it != entries_.end()) {
    auto e = it->second;
    if (e->loading) {
      e->ready.push_back(std::move(ready));
    } else {
      after.push_back([ready = std::move(ready), e] { ready(e); });
    }
    return;
  }
  auto fail = [&](error err) { after.push_back([ready = std::move(ready), err] { ready(err); }); };
  if (entries_.size() >= limits::max_share_partitions)
    return fail(error{errc::coordinator_not_available, "this broker leads the most share partitions it may"});
  const int32_t coordinator = coordinator_of(key);
  if (coordinator < 0)
    return fail(error{errc::coordinator_not_available, "the share coordinator of " + to_string(key) + " is not known"});
  auto e = std::make_shared<entry>();
  e->key = key;
  e->part = part;
  e->leader_epoch = epoch;
  e->coordinator = coordinator;
  e->gs = settings_for(key.group_id);
  if (coordinator != node_id_) {
    if (!remote_) return fail(error{errc::coordinator_not_available, "no way to reach broker " + std::to_string(coordinator)});
    e->loading = true;
    e->ready.push_back(std::move(ready));
    entries_[key] = e;
    after.push_back([this, e] {
      if (!workers_.submit(e->coordinator, [this, e] { load_remote(e); })) {
        std::vector<std::function<void()>> later;
        {
          std::lock_guard g(mu_);
          e->loading = false;
          for (auto& r : e->ready) later.push_back([r = std::move(r)] { r(error{errc::shutting_down, "stopping"}); });
          e->ready.clear();
          if (auto j = entries_.find(e->key); j != entries_.end() && j->second == e) entries_.erase(j);
          e->dropped = true;
        }
        for (auto& f : later) f();
      }
    });
    return;
  }
  auto read = coord_.read(key, epoch);
  if (!read.ok()) return fail(read.err());
  if (read->has_value()) {
    e->state_epoch = (*read)->state_epoch;
    e->sp = std::make_unique<share_partition>((*read)->state, e->gs.partition);
    // Retention may have moved past what the state remembers.
    e->sp->log_start_moved(part->log_start_offset().value());
  } else {
    const int64_t start = reset_point(*part, e->gs);
    auto w = coord_.initialize(key, epoch, start, clk_.now_ms());
    if (!w.ok()) return fail(w.err());
    e->state_epoch = (*coord_.read(key, epoch))->state_epoch;
    e->sp = std::make_unique<share_partition>(start, e->gs.partition);
    // The initialisation is version 1: answers wait for it like any change.
    e->version = 1;
    e->writing = true;
    auto wr = std::move(*w);
    after.push_back([this, e, wr = std::move(wr)] { append_state(wr, [this, e](status s) { written(e, 1, std::move(s)); }); });
  }
  entries_[key] = e;
  after.push_back([ready = std::move(ready), e] { ready(e); });
}

void service::load_remote(const std::shared_ptr<entry>& e) {
  // On the coordinator's worker: read the state there, or start it.
  auto r = remote_->read_state(e->coordinator, e->key, e->leader_epoch);
  std::optional<share_snapshot> snap;
  status failed;
  int64_t start = 0;
  if (!r.ok()) {
    failed = r.err();
  } else if (r->has_value()) {
    snap = std::move(**r);
  } else {
    start = reset_point(*e->part, e->gs);
    failed = remote_->initialize_state(e->coordinator, e->key, 0, start);
  }
  std::vector<std::function<void(result<std::shared_ptr<entry>>)>> ready;
  {
    std::lock_guard g(mu_);
    e->loading = false;
    ready.swap(e->ready);
    if (!failed.ok() || e->dropped) {
      if (auto j = entries_.find(e->key); j != entries_.end() && j->second == e) entries_.erase(j);
      e->dropped = true;
      if (failed.ok()) failed = status(errc::not_leader, "leadership changed");
    } else if (snap) {
      e->state_epoch = snap->state_epoch;
      e->sp = std::make_unique<share_partition>(snap->state, e->gs.partition);
      e->sp->log_start_moved(e->part->log_start_offset().value());
    } else {
      e->state_epoch = 0;
      e->sp = std::make_unique<share_partition>(start, e->gs.partition);
    }
  }
  for (auto& r2 : ready) {
    if (failed.ok()) {
      r2(e);
    } else {
      r2(failed.err());
    }
  }
}

void service::append_state(const share::state_write& w, std::function<void(status)> done) {
  log_->append(w.partition, w.key_bytes, w.value_bytes, std::move(done));
}

void service::reload_locked(int32_t cp) {
  coord_.unload(cp);
  std::lock_guard r(run_mu_);
  if (!stopping_ && (!cluster_ || partitions_.get(kTopic, cp))) {
    queue_.push_back([this, cp] { load_partition(cp); });
    run_cv_.notify_all();
  }
}

void service::drop_locked(const share_key& key, status why, std::vector<std::function<void()>>& after) {
  auto it = entries_.find(key);
  if (it == entries_.end()) return;
  auto e = it->second;
  entries_.erase(it);
  e->dropped = true;
  for (auto& [v, w] : e->waiters) after.push_back([w = std::move(w), why] { w(why); });
  e->waiters.clear();
}

void service::persist_locked(const std::shared_ptr<entry>& e, std::vector<std::function<void()>>& after) {
  if (e->dropped || e->loading || e->writing || e->durable >= e->version) return;
  const uint64_t v = e->version;
  if (e->coordinator != node_id_) {
    // At another broker's share coordinator, on its worker.
    e->writing = true;
    after.push_back([this, e, v, d = e->sp->durable()] {
      const bool queued = workers_.submit(e->coordinator, [this, e, v, d] {
        written(e, v, remote_->write_state(e->coordinator, e->key, e->state_epoch, e->leader_epoch, d));
      });
      if (!queued) written(e, v, status(errc::shutting_down, "the broker is shutting down"));
    });
    return;
  }
  auto w = coord_.write(e->key, e->state_epoch, e->leader_epoch, e->sp->durable(), clk_.now_ms());
  if (!w.ok()) {
    // Fenced (another leader, a reset) or the coordinator moved: this
    // share partition is stale here; drop it, and what waits on it fails.
    SLUICE_LOG_INFO("share partition {}: state not written: {}", to_string(e->key), w.err().message);
    drop_locked(e->key, w.err(), after);
    return;
  }
  e->writing = true;
  auto wr = std::move(*w);
  after.push_back([this, e, v, wr = std::move(wr)] { append_state(wr, [this, e, v](status s) { written(e, v, std::move(s)); }); });
}

void service::written(const std::shared_ptr<entry>& e, uint64_t version, status s) {
  std::vector<std::function<void()>> after;
  {
    std::lock_guard g(mu_);
    e->writing = false;
    if (!s.ok()) {
      // Memory is ahead of the log: reload the coordinator partition from
      // the log (share/coordinator.h) and drop the share partition, whose
      // waiters fail (retriable for the client).
      SLUICE_LOG_WARN("share partition {}: writing its state: {}", to_string(e->key), s.err().message);
      if (e->coordinator == node_id_) reload_locked(coord_.partition_for(e->key));
      if (auto j = entries_.find(e->key); j != entries_.end() && j->second == e) {
        drop_locked(e->key, s, after);
      } else {
        e->dropped = true;
        for (auto& [v, w] : e->waiters) after.push_back([w = std::move(w), s] { w(s); });
        e->waiters.clear();
      }
    } else {
      e->durable = std::max(e->durable, version);
      for (auto it = e->waiters.begin(); it != e->waiters.end();) {
        if (it->first <= e->durable) {
          after.push_back([w = std::move(it->second)] { w(status{}); });
          it = e->waiters.erase(it);
        } else {
          ++it;
        }
      }
      bool stopping;
      {
        std::lock_guard r(run_mu_);
        stopping = stopping_;
      }
      if (!stopping) {
        persist_locked(e, after);
        write_dead_letters_locked(e, after);
      }
    }
  }
  for (auto& f : after) f();
}

void service::note_archived_locked(const std::shared_ptr<entry>& e, const std::vector<archived_record>& archived) {
  if (archived.empty()) return;
  archived_total_ += static_cast<int64_t>(archived.size());
  if (!e->gs.dead_letter_topic || e->gs.dead_letter_topic->empty()) return;
  if (e->sp->dead_letter_producer_id() < 0) {
    // The share partition's own idempotent producer: a new leader writing
    // the same dead letters again is deduplicated by sequence.
    auto& ids = partitions_.producer_ids();
    auto id = ids.try_next();
    if (!id) {
      auto r = ids.next();
      if (!r.ok()) {
        SLUICE_LOG_WARN("share partition {}: no producer id for dead letters ({}); {} archived records not "
                        "written to {}",
                        to_string(e->key), r.err().message, archived.size(), *e->gs.dead_letter_topic);
        return;
      }
      id = *r;
    }
    e->sp->set_dead_letter_producer(*id, 0);
  }
  e->sp->add_dead_letters(archived);
}

void service::write_dead_letters_locked(const std::shared_ptr<entry>& e, std::vector<std::function<void()>>& after) {
  if (e->dropped || e->dl_writing || e->sp->pending_dead_letters().empty()) return;
  // Only dead letters whose archiving is durable: else a failover could
  // deliver the record again after its dead letter was written.
  if (e->writing || e->durable < e->version) return;
  if (clk_.monotonic_ms() < e->dl_retry_at_ms) return;
  if (!e->gs.dead_letter_topic || e->gs.dead_letter_topic->empty()) return;
  const auto& pending = e->sp->pending_dead_letters();
  const size_t n = std::min(pending.size(), limits::max_dead_letters_per_batch);
  std::vector<dead_letter> batch(pending.begin(), pending.begin() + static_cast<ptrdiff_t>(n));
  e->dl_writing = true;
  const std::string topic = *e->gs.dead_letter_topic;
  const bool copy = e->gs.dead_letter_copy_record;
  const int64_t pid = e->sp->dead_letter_producer_id();
  const int16_t epoch = e->sp->dead_letter_producer_epoch();
  after.push_back([this, e, batch = std::move(batch), topic, copy, pid, epoch] {
    auto fail = [&](status s) { dead_letters_written(e, batch.back().sequence, std::move(s)); };
    auto info = partitions_.topic(topic);
    if (!info || info->partitions <= 0)
      return fail(status(errc::not_found, "the dead-letter topic " + topic + " does not exist"));
    // One share partition always writes to the same partition of the
    // dead-letter topic, so its sequences there are contiguous.
    const int32_t dp = e->key.partition % info->partitions;
    auto dpart = partitions_.get(topic, dp);
    int32_t leader = node_id_;
    if (!dpart || !dpart->is_leader()) {
      auto st = cluster_ ? partitions_.store().state(topic, dp) : std::nullopt;
      if (!st || st->leader < 0 || st->leader == node_id_ || !remote_)
        return fail(status(errc::not_leader, topic + "-" + std::to_string(dp) + " has no leader to write to"));
      leader = st->leader;
    }
    std::vector<protocol::records::record_input> recs;
    recs.reserve(batch.size());
    const std::string source = partitions_.topic_by_id(e->key.topic_id) ? partitions_.topic_by_id(e->key.topic_id)->name
                                                                        : to_hex(e->key.topic_id);
    auto text = [](const std::string& s) { return std::optional<std::vector<uint8_t>>(std::vector<uint8_t>(s.begin(), s.end())); };
    for (const auto& d : batch) {
      protocol::records::record_input r;
      r.timestamp_ms = clk_.now_ms();
      r.headers.emplace_back("__dlq.errors.topic", text(source));
      r.headers.emplace_back("__dlq.errors.partition", text(std::to_string(e->key.partition)));
      r.headers.emplace_back("__dlq.errors.offset", text(std::to_string(d.offset)));
      r.headers.emplace_back("__dlq.errors.group.id", text(e->key.group_id));
      r.headers.emplace_back("__dlq.errors.delivery.count", text(std::to_string(d.delivery_count)));
      r.headers.emplace_back("__dlq.errors.reason", text(archive_reason_name(d.reason)));
      if (copy) {
        // The record as the log holds it (gone to retention: headers only).
        auto bytes = e->part->read_bytes(offset(d.offset), 1, e->part->high_watermark());
        if (bytes.ok() && !bytes->empty()) {
          auto span = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size());
          auto dec = protocol::records::decode_batch(span);
          if (dec.ok()) {
            for (const auto& rec : dec->records) {
              if (dec->header.base_offset.value() + rec.offset_delta != d.offset) continue;
              if (rec.key) r.key = std::vector<uint8_t>(rec.key->begin(), rec.key->end());
              if (rec.value) r.value = std::vector<uint8_t>(rec.value->begin(), rec.value->end());
            }
          }
        }
      }
      recs.push_back(std::move(r));
    }
    protocol::records::batch_options o;
    o.producer_id = pid;
    o.producer_epoch = epoch;
    o.base_sequence = batch.front().sequence;
    auto built = protocol::records::build_batch(o, recs);
    if (!built.ok()) return fail(built.err());
    const int32_t last_seq = batch.back().sequence;
    if (leader != node_id_) {
      // The dead-letter partition's leader is another broker: a Produce
      // there, on its worker (a retry after a failover is deduplicated by
      // the producer id and sequence).
      const size_t n = batch.size();
      const bool queued = workers_.submit(leader, [this, e, leader, topic, dp, last_seq, n, b = std::move(*built)]() mutable {
        status st = remote_->produce(leader, topic, dp, std::move(b));
        if (st.ok()) {
          std::lock_guard g(mu_);
          dead_letters_total_ += static_cast<int64_t>(n);
        }
        dead_letters_written(e, last_seq, std::move(st));
      });
      if (!queued) fail(status(errc::shutting_down, "the broker is shutting down"));
      return;
    }
    auto out = dpart->append(std::as_writable_bytes(std::span<uint8_t>(*built)), clk_.now_ms());
    if (out.error != errc::ok) return fail(status(out.error, out.message));
    const int32_t last = batch.back().sequence;
    const size_t written = out.duplicate ? 0 : batch.size();
    dpart->on_committed(out.last, [this, e, last, dpart, written](const status& s) {
      auto st = dpart->acks_all_outcome(s);
      if (st.ok()) {
        std::lock_guard g(mu_);
        dead_letters_total_ += static_cast<int64_t>(written);
      }
      dead_letters_written(e, last, std::move(st));
    });
  });
}

void service::dead_letters_written(const std::shared_ptr<entry>& e, int32_t last_sequence, status s) {
  std::vector<std::function<void()>> after;
  {
    std::lock_guard g(mu_);
    e->dl_writing = false;
    if (!s.ok()) {
      // Tried again on a later tick: the topic may be created, its leader
      // come back. The records stay pending (and durable) meanwhile.
      SLUICE_LOG_WARN("share partition {}: dead letters not written: {}", to_string(e->key), s.err().message);
      e->dl_retry_at_ms = clk_.monotonic_ms() + limits::share_dead_letter_retry_ms;
    } else if (!e->dropped) {
      e->sp->dead_letters_written(last_sequence);
      ++e->version;
      persist_locked(e, after);
    }
  }
  for (auto& f : after) f();
}

namespace {

struct batch_span {
  log_batch b;
  uint64_t pos = 0;  // in the region
  uint64_t len = 0;
  int64_t producer_id = -1;
  bool transactional = false;
};

// Batch headers are read in chunks of this many bytes: one pread for many
// small batches, one per batch for batches larger than it.
constexpr uint64_t header_read_bytes = 64 * 1024;

// The batches of the region `r` (whole batches, as the log reads them),
// from their headers alone: their records go to the socket with sendfile,
// never through this process's memory. Stops at the first header that does
// not read or check (the region ends there for the caller).
std::vector<batch_span> batch_spans(const storage::file_region& r) {
  std::vector<batch_span> out;
  std::vector<std::byte> buf;
  uint64_t buf_at = 0;  // the region position of buf[0]
  uint64_t pos = 0;
  while (pos + model::batch::header_bytes <= r.len) {
    if (pos < buf_at || pos + model::batch::header_bytes > buf_at + buf.size()) {
      buf.resize(static_cast<size_t>(std::min(header_read_bytes, r.len - pos)));
      auto got = r.file->pread(buf.data(), buf.size(), r.pos + pos);
      if (!got.ok() || *got < model::batch::header_bytes) break;
      buf.resize(*got);
      buf_at = pos;
    }
    const auto h = model::batch::parse(buf.data() + (pos - buf_at));
    if (!model::batch::check(h, static_cast<size_t>(r.len - pos), model::batch::strictness::stored).ok()) break;
    batch_span s;
    s.b.base_offset = h.base_offset.value();
    s.b.last_offset = h.last_offset().value();
    s.b.control = h.is_control();
    s.pos = pos;
    s.len = h.size_bytes();
    s.producer_id = h.producer_id;
    s.transactional = h.is_transactional();
    out.push_back(s);
    pos += h.size_bytes();
  }
  return out;
}

}  // namespace

// One fetch or acknowledgement in progress: its answers, filled partition
// by partition (some at once, some once their share partition is loaded at
// another broker), and the callback the last one runs.
struct service::fetch_job {
  std::string group_id, member_id;
  std::vector<partition_request> parts;
  bool acquire = false;
  std::mutex mu;  // guards what follows
  std::vector<partition_answer> answers;
  size_t waiting = 0;
  int64_t records_left = 0, bytes_left = 0;
  answer_fn done;

  void finish_one() {
    answer_fn fire;
    {
      std::lock_guard g(mu);
      if (--waiting > 0) return;
      fire = std::move(done);
    }
    fire(std::move(answers));
  }
};

void service::fetch(const std::string& group_id, const std::string& member_id, std::vector<partition_request> parts,
                    bool acquire, int32_t max_records, int32_t max_bytes, answer_fn done, bool new_session) {
  auto job = std::make_shared<fetch_job>();
  job->group_id = group_id;
  job->member_id = member_id;
  job->parts = std::move(parts);
  job->acquire = acquire;
  job->answers.resize(job->parts.size());
  job->done = std::move(done);
  job->waiting = job->parts.size() + 1;  // +1: this call, until every partition is on its way
  job->records_left = max_records > 0 ? max_records : INT64_MAX;
  // A share fetch answers at most the broker's fetch.max.bytes, as a fetch
  // does, whatever the client asks: the batches are read into memory.
  const int64_t cap = partitions_.broker_config()->fetch_max_bytes;
  job->bytes_left = max_bytes > 0 ? std::min<int64_t>(max_bytes, cap) : cap;
  for (size_t i = 0; i < job->parts.size(); ++i) {
    const auto& req = job->parts[i];
    auto& a = job->answers[i];
    a.topic_id = req.topic_id;
    a.partition = req.partition;
    auto topic = partitions_.topic_by_id(req.topic_id);
    std::shared_ptr<cluster::partition> part = topic ? partitions_.get(topic->name, req.partition) : nullptr;
    error_code e = error_code::none;
    std::string msg;
    if (!topic) {
      e = error_code::unknown_topic_id;
      msg = "no topic has this id";
    } else if (!part) {
      e = error_code::unknown_topic_or_partition;
      msg = "no such partition";
    } else if (!part->is_leader()) {
      e = error_code::not_leader_or_follower;
      msg = "this broker does not lead the partition";
    }
    {
      std::lock_guard g(job->mu);
      a.leader_id = part && part->is_leader() ? node_id_ : -1;
      a.leader_epoch = part ? part->epoch().value() : -1;
      if (e != error_code::none) {
        a.error = e;
        a.message = msg;
        if (!req.acks.empty()) {
          a.ack_error = e;
          a.ack_message = msg;
        }
      }
    }
    if (e != error_code::none) {
      job->finish_one();
      continue;
    }
    std::vector<std::function<void()>> after;
    {
      std::lock_guard g(mu_);
      with_entry_locked(share_key{group_id, req.topic_id, req.partition}, part,
                        [this, job, i](result<std::shared_ptr<entry>> r) { fetch_partition(job, i, std::move(r)); },
                        after, new_session);
    }
    for (auto& f : after) f();
  }
  job->finish_one();
}

void service::fetch_partition(const std::shared_ptr<fetch_job>& job, size_t i, result<std::shared_ptr<entry>> r) {
  const auto& req = job->parts[i];
  std::vector<std::function<void()>> after;
  // Only this call writes answers[i] until finish_one: fields are set here,
  // under job->mu where the budget or another thread is involved.
  auto set_error = [&](error_code e, const std::string& msg) {
    std::lock_guard g(job->mu);
    auto& a = job->answers[i];
    a.error = e;
    a.message = msg;
    if (!req.acks.empty() && a.ack_error == error_code::none) {
      a.ack_error = e;
      a.ack_message = msg;
    }
  };
  if (!r.ok()) {
    const auto code = leader_error(r.code());
    set_error(code, r.err().message);
    job->finish_one();
    return;
  }
  auto e = *r;
  bool changed = false;
  std::optional<int64_t> from;
  int64_t limit = 0;  // with `from`: acquire() takes nothing at or past it
  int64_t records_left, bytes_left;
  {
    std::lock_guard g(job->mu);
    records_left = job->records_left;
    bytes_left = job->bytes_left;
  }
  {
    std::lock_guard g(mu_);
    if (!e->dropped) {
      std::vector<archived_record> archived;
      if (!req.acks.empty()) {
        auto st = e->sp->acknowledge(job->member_id, req.acks, clk_.monotonic_ms(), archived);
        std::lock_guard g2(job->mu);
        auto& a = job->answers[i];
        for (const auto& x : st) {
          if (!x.ok() && a.ack_error == error_code::none) {
            a.ack_error = to_kafka(x.code());
            a.ack_message = x.err().message;
          }
        }
        changed = true;
      }
      note_archived_locked(e, archived);
      if (job->acquire && records_left > 0 && bytes_left > 0) {
        from = e->sp->next_fetch_offset();
        if (from) limit = e->sp->acquire_limit(*from, records_left);
      }
    }
  }
  auto& part = e->part;
  std::vector<acquired_range> acquired;
  std::vector<protocol::file_region> records;
  if (from) {
    // Read outside the lock: the share partition may change meanwhile,
    // and acquire() takes only what is still available.
    const auto upper = e->gs.read_committed ? part->last_stable_offset() : part->high_watermark();
    if (offset(*from) < upper) {
      // Read up to the batch holding the last offset acquire() can take,
      // not the whole byte budget: a consumer asking for 500 records of a
      // long backlog would otherwise have fetch.max.bytes read into memory,
      // and all but its first batches thrown away, on every fetch. (A batch
      // reaching past the limit is read whole, so one larger than the
      // window still makes progress.)
      size_t max_bytes = static_cast<size_t>(std::min<int64_t>(bytes_left, INT32_MAX));
      if (offset(limit) < upper) {
        auto head = part->read(offset(*from), 1, upper);
        auto tail = part->read(offset(limit - 1), 1, upper);
        if (head.ok() && tail.ok() && head->len > 0 && tail->len > 0 && head->file == tail->file &&
            tail->pos >= head->pos)
          max_bytes = std::min<size_t>(max_bytes, tail->pos + tail->len - head->pos);
      }
      auto region = part->read(offset(*from), max_bytes, upper);
      if (region.ok() && region->len > 0 && region->file) {
        auto spans = batch_spans(*region);
        if (e->gs.read_committed) {
          auto ab = part->aborted_transactions(offset(*from), upper);
          if (ab.ok()) {
            for (auto& sp : spans) {
              if (!sp.transactional || sp.b.control) continue;
              for (const auto& t : ab->txns)
                if (t.producer_id == sp.producer_id && t.first.value() <= sp.b.base_offset &&
                    sp.b.base_offset < t.last.value())
                  sp.b.aborted = true;
            }
          }
        }
        std::vector<log_batch> lb;
        lb.reserve(spans.size());
        for (const auto& sp : spans) lb.push_back(sp.b);
        std::lock_guard g(mu_);
        if (!e->dropped) {
          std::vector<archived_record> archived;
          acquired = e->sp->acquire(job->member_id, lb, static_cast<int32_t>(std::min<int64_t>(records_left, INT32_MAX)),
                                    clk_.monotonic_ms(), archived);
          note_archived_locked(e, archived);
          if (!acquired.empty() || !archived.empty()) changed = true;
          // The batches that hold acquired records, in log order, as file
          // regions: one per run of adjacent batches (usually one).
          size_t k = 0;
          const auto& f = region->file;
          for (const auto& sp : spans) {
            while (k < acquired.size() && acquired[k].last_offset < sp.b.base_offset) ++k;
            if (k >= acquired.size() || acquired[k].first_offset > sp.b.last_offset) continue;
            if (!records.empty() && records.back().pos + records.back().length == region->pos + sp.pos) {
              records.back().length += sp.len;
            } else {
              records.push_back(protocol::file_region{f, f->native_handle(), region->pos + sp.pos, sp.len});
            }
          }
        }
      } else if (!region.ok()) {
        set_error(to_kafka(region.code()), region.err().message);
      }
    }
  }
  {
    std::lock_guard g(job->mu);
    for (const auto& x : acquired) job->records_left -= x.last_offset - x.first_offset + 1;
    for (const auto& r : records) job->bytes_left -= static_cast<int64_t>(r.length);
    auto& a = job->answers[i];
    a.acquired = std::move(acquired);
    a.records = std::move(records);
  }
  bool answered_now = false;
  {
    std::lock_guard g(mu_);
    if (e->dropped) {
      answered_now = true;
    } else {
      if (changed) ++e->version;
      const uint64_t wait_for = e->version;
      if (e->durable >= wait_for) {
        answered_now = true;
      } else {
        e->waiters.emplace_back(wait_for, [job, i](status st) {
          if (!st.ok()) {
            std::lock_guard g2(job->mu);
            auto& x = job->answers[i];
            // Nothing of this answer is durable: no records handed out
            // (their locks run out and they are offered again).
            const auto code = leader_error(st.code());
            x.records.clear();
            x.acquired.clear();
            x.error = code;
            x.message = st.err().message;
            if (x.ack_error == error_code::none) {
              x.ack_error = code;
              x.ack_message = x.message;
            }
          }
          job->finish_one();
        });
        persist_locked(e, after);
      }
    }
  }
  if (answered_now && e->dropped) {
    std::lock_guard g(job->mu);
    auto& a = job->answers[i];
    if (a.error == error_code::none) {
      a.records.clear();
      a.acquired.clear();
      a.error = error_code::not_leader_or_follower;
      a.message = "leadership changed";
      if (!req.acks.empty() && a.ack_error == error_code::none) {
        a.ack_error = a.error;
        a.ack_message = a.message;
      }
    }
  }
  for (auto& f : after) f();
  if (answered_now) job->finish_one();
}

void service::release(const std::string& group_id, const std::string& member_id,
                      const std::vector<std::pair<sluice::topic_id, int32_t>>& parts) {
  std::vector<std::function<void()>> after;
  {
    std::lock_guard g(mu_);
    for (const auto& [tid, p] : parts) {
      auto it = entries_.find(share_key{group_id, tid, p});
      if (it == entries_.end()) continue;
      auto e = it->second;
      if (e->loading) continue;  // holds nothing yet
      std::vector<archived_record> archived;
      if (e->sp->release_member(member_id, archived)) {
        note_archived_locked(e, archived);
        ++e->version;
        persist_locked(e, after);
      }
    }
  }
  for (auto& f : after) f();
}

int32_t service::lock_duration_ms(const std::string& group_id) {
  return settings_for(group_id).partition.record_lock_duration_ms;
}

void service::tick() {
  std::vector<std::function<void()>> after;
  {
    std::lock_guard g(mu_);
    const int64_t now = clk_.monotonic_ms();
    (void)groups_.expire(now, [this](const std::string& n) { return lookup_topic(n); });
    std::vector<share_key> gone;
    for (auto& [k, e] : entries_) {
      if (!e->part->is_leader() || e->part->closed() || e->part->epoch().value() != e->leader_epoch) {
        gone.push_back(k);
        continue;
      }
      if (e->loading) continue;
      std::vector<archived_record> archived;
      bool changed = e->sp->expire_locks(now, archived);
      const int64_t before = e->sp->start_offset();
      e->sp->log_start_moved(e->part->log_start_offset().value());
      changed = changed || e->sp->start_offset() != before;
      if (changed) {
        note_archived_locked(e, archived);
        ++e->version;
        persist_locked(e, after);
      }
      write_dead_letters_locked(e, after);
    }
    for (const auto& k : gone) drop_locked(k, status(errc::not_leader, "leadership changed"), after);
  }
  for (auto& f : after) f();
}

// ---- Share coordinator ---------------------------------------------------------

result<std::optional<share_snapshot>> service::state_read(const share_key& k, int32_t leader_epoch) {
  std::lock_guard g(mu_);
  return coord_.read(k, leader_epoch);
}

void service::state_initialize(const share_key& k, int32_t state_epoch, int64_t start_offset,
                               std::function<void(status)> done) {
  result<share::state_write> w = error{errc::internal_error, ""};
  {
    std::lock_guard g(mu_);
    w = coord_.initialize(k, -1, start_offset, clk_.now_ms(), state_epoch);
  }
  if (!w.ok()) return done(w.err());
  append_state(*w, std::move(done));
}

void service::state_write(const share_key& k, int32_t state_epoch, int32_t leader_epoch, const durable_state& d,
                          std::function<void(status)> done) {
  result<share::state_write> w = error{errc::internal_error, ""};
  {
    std::lock_guard g(mu_);
    w = coord_.write(k, state_epoch, leader_epoch, d, clk_.now_ms());
  }
  if (!w.ok()) return done(w.err());
  append_state(*w, std::move(done));
}

void service::state_delete(const share_key& k, std::function<void(status)> done) {
  result<std::optional<share::state_write>> w = error{errc::internal_error, ""};
  {
    std::lock_guard g(mu_);
    w = coord_.remove(k);
  }
  if (!w.ok()) return done(w.err());
  if (!w->has_value()) return done(status{});
  append_state(**w, std::move(done));
}

service::figures service::current_figures() {
  std::lock_guard g(mu_);
  figures f;
  f.groups = groups_.size();
  for (const auto& id : groups_.list()) {
    auto d = groups_.describe(id, [](const std::string&) { return std::optional<topic_info>{}; });
    if (d) f.members += d->members.size();
  }
  f.share_partitions = entries_.size();
  for (const auto& [k, e] : entries_)
    if (!e->loading) f.acquired += e->sp->count(record_state::acquired);
  f.archived_total = archived_total_;
  f.dead_letters_total = dead_letters_total_;
  f.states = coord_.size();
  return f;
}

}  // namespace sluice::share
