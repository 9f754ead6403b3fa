#include "metadata/control_plane.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <set>

#include "base/assert.h"
#include "base/limits.h"
#include "base/log.h"

namespace sluice::cluster {

using controller::image_change;
using kind = controller::key_layout::parsed::kind;

control_plane::control_plane(etcd::client& etcd, const sluice::clock& clk, options opts)
    : etcd_(etcd), clk_(clk), opts_(std::move(opts)), keys_(opts_.prefix), image_(keys_) {}

result<std::unique_ptr<control_plane>> control_plane::start(etcd::client& etcd, const sluice::clock& clk,
                                                            options opts) {
  std::unique_ptr<control_plane> cp(new control_plane(etcd, clk, std::move(opts)));
  SLUICE_TRY(cp->init());
  return cp;
}

status control_plane::grant_lease() {
  const int64_t ttl_s = std::max<int64_t>(1, (opts_.session_timeout_ms + 999) / 1000);
  // etcd counts the TTL from when it received the grant, no earlier than now.
  const int64_t asked_ms = clk_.monotonic_ms();
  SLUICE_ASSIGN_OR_RETURN(auto lease, etcd_.lease_grant(ttl_s));
  lease_ = lease.id;
  lease_good_until_ms_.store(asked_ms + lease.ttl_s * 1000, std::memory_order_release);
  keeper_ = std::make_unique<etcd::lease_keeper>(
      etcd_, lease.id, lease.ttl_s,
      [this](const error& why) {
        SLUICE_LOG_WARN("etcd session lease lost ({}): this broker is dead to the cluster until it registers again",
                        why.message);
        session_live_.store(false, std::memory_order_release);
        std::vector<std::function<void()>> tell;
        {
          std::lock_guard g(mu_);
          lease_lost_ = true;
          cv_.notify_all();
          tell = lost_listeners_;
        }
        for (auto& fn : tell) fn();
      },
      clk_, [this](int64_t good_until_ms) { lease_good_until_ms_.store(good_until_ms, std::memory_order_release); });
  return {};
}

status control_plane::init() {
  incarnation_ = to_hex(new_topic_id());
  controller_ = std::make_unique<controller::controller>(etcd_, keys_,
                                                         controller::controller_record{opts_.node_id, incarnation_});
  // The cluster id: the first broker's, kept for the life of the cluster.
  etcd::txn_request id_req;
  id_req.compares.push_back(etcd::compare::absent(keys_.cluster_id()));
  id_req.then_ops.push_back(etcd::put_op{keys_.cluster_id(), opts_.new_cluster_id, {}});
  id_req.else_ops.push_back(etcd::range_op{etcd::key_range::one(keys_.cluster_id()), {}});
  id_req.retry_if_unknown = true;
  SLUICE_ASSIGN_OR_RETURN(auto id_r, etcd_.txn(id_req));
  if (id_r.succeeded) {
    cluster_id_ = opts_.new_cluster_id;
  } else {
    const auto& read = std::get<etcd::range_result>(id_r.results.at(0));
    if (read.kvs.empty()) return status(errc::unavailable, "the cluster id vanished from etcd; try again");
    cluster_id_ = read.kvs[0].value;
  }
  // A live broker with this node id refuses the start. A registration
  // left by this node's previous process (killed, restarted at once) goes
  // when its session runs out, so it is waited for that long first.
  const sluice::deadline patience(opts_.session_timeout_ms + limits::registration_wait_slack_ms, clk_);
  for (bool logged = false;; logged = true) {
    SLUICE_ASSIGN_OR_RETURN(auto mine, etcd_.range(etcd::key_range::one(keys_.broker(opts_.node_id))));
    if (mine.kvs.empty()) break;
    auto other = controller::decode_broker(mine.kvs[0].value);
    const std::string where = other.ok() ? other->host + ":" + std::to_string(other->port) : "an unreadable record";
    if (patience.passed()) {
      return status(errc::already_exists, "node.id " + std::to_string(opts_.node_id) +
                                              " is registered by a live broker (" + where +
                                              "); each broker of a cluster needs its own node.id");
    }
    if (!logged) {
      SLUICE_LOG_INFO("node.id {} is still registered ({}): waiting up to {} ms for that session to end",
                      opts_.node_id, where, opts_.session_timeout_ms + limits::registration_wait_slack_ms);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(clk_.sleep_ms_until(clk_.monotonic_ms() + limits::registration_poll_ms)));
  }
  SLUICE_TRY(grant_lease());
  SLUICE_ASSIGN_OR_RETURN(auto all, etcd_.range(etcd::key_range::prefix(keys_.prefix())));
  {
    std::lock_guard g(image_mu_);
    for (const auto& e : image_.load(all.kvs, all.header_revision))
      SLUICE_LOG_ERROR("cluster metadata: {} (left out)", e.message);
  }
  return start_watch(all.header_revision + 1);
}

status control_plane::start_watch(int64_t from_revision) {
  SLUICE_ASSIGN_OR_RETURN(watch_, etcd_.watch(etcd::key_range::prefix(keys_.prefix()), from_revision,
                                              [this](const etcd::watch_update& u) { on_watch(u); }));
  return {};
}

void control_plane::on_watch(const etcd::watch_update& u) {
  std::lock_guard g(mu_);
  updates_.push_back(u);
  cv_.notify_all();
}

result<int64_t> control_plane::put_registration() {
  const std::string key = keys_.broker(opts_.node_id);
  const std::string value = controller::encode(controller::broker_record{opts_.node_id, incarnation_, host_, port_, opts_.rack});
  etcd::txn_request req;
  // Absent, or this process's own record (a registration under a lease this
  // broker gave up on while etcd still held it).
  req.compares.push_back(etcd::compare::absent(key));
  req.then_ops.push_back(etcd::put_op{key, value, {lease_, false, false}});
  req.retry_if_unknown = true;
  SLUICE_ASSIGN_OR_RETURN(auto r, etcd_.txn(req));
  if (r.succeeded) return r.header_revision;
  etcd::txn_request mine;
  mine.compares.push_back(etcd::compare::value_is(key, etcd::compare_op::equal, value));
  mine.then_ops.push_back(etcd::put_op{key, value, {lease_, false, false}});
  mine.retry_if_unknown = true;
  SLUICE_ASSIGN_OR_RETURN(auto r2, etcd_.txn(mine));
  if (r2.succeeded) return r2.header_revision;
  return status(errc::already_exists, "node.id " + std::to_string(opts_.node_id) +
                                          " was registered by another broker meanwhile");
}

status control_plane::register_broker(const std::string& host, int32_t port) {
  {
    std::lock_guard g(mu_);
    host_ = host;
    port_ = port;
  }
  SLUICE_ASSIGN_OR_RETURN(const int64_t rev, put_registration());
  registered_revision_.store(rev, std::memory_order_release);
  session_live_.store(true, std::memory_order_release);
  {
    std::lock_guard g(mu_);
    registered_ = true;
  }
  thread_ = std::thread([this] { run(); });
  return {};
}

control_plane::~control_plane() { shutdown().ignore(); }  // a failure is logged there

int64_t control_plane::revision() const {
  std::lock_guard g(image_mu_);
  return image_.revision();
}

int64_t control_plane::broker_epoch() const {
  std::lock_guard g(image_mu_);
  auto it = image_.brokers().find(opts_.node_id);
  // A registration of an earlier process of this node id (not yet
  // expired) is not this broker's.
  if (it == image_.brokers().end() || it->second.record.incarnation != incarnation_) return -1;
  return it->second.mod_revision;
}

bool control_plane::is_controller() const { return controller_active_.load(); }

bool control_plane::view_current() const {
  return session_live_.load(std::memory_order_acquire) &&
         clk_.monotonic_ms() < lease_good_until_ms_.load(std::memory_order_acquire) &&
         applied_revision_.load(std::memory_order_acquire) >= registered_revision_.load(std::memory_order_acquire);
}

bool control_plane::view_trusted() const {
  return !session_lost() &&
         applied_revision_.load(std::memory_order_acquire) >= registered_revision_.load(std::memory_order_acquire);
}

bool control_plane::session_lost() const {
  if (registered_revision_.load(std::memory_order_acquire) == INT64_MAX) return false;  // not registered yet
  const bool maybe_gone = !session_live_.load(std::memory_order_acquire) ||
                          clk_.monotonic_ms() >= lease_good_until_ms_.load(std::memory_order_acquire);
  // etcd without a quorum (a member it reaches says so) expires no lease
  // and lets nobody elect: the broker goes on with what it leads.
  return maybe_gone && !etcd_.leaderless_within(opts_.session_timeout_ms);
}

session_standing control_plane::standing() const {
  if (!view_trusted()) return session_standing::lost;
  if (registered_revision_.load(std::memory_order_acquire) == INT64_MAX) return session_standing::live;
  const bool confirmed = session_live_.load(std::memory_order_acquire) &&
                         clk_.monotonic_ms() < lease_good_until_ms_.load(std::memory_order_acquire);
  return confirmed ? session_standing::live : session_standing::in_doubt;
}

void control_plane::on_session_lost(std::function<void()> fn) {
  std::lock_guard g(mu_);
  lost_listeners_.push_back(std::move(fn));
}

void control_plane::on_change(listener fn) {
  std::lock_guard g(mu_);
  listeners_.push_back(std::move(fn));
}

bool control_plane::unclean_allowed(const std::string& topic) const {
  // Called on the metadata thread, which alone writes the image.
  return controller::unclean_election_enabled(image_, topic, opts_.unclean_default);
}

std::vector<image_change> control_plane::reload() {
  std::vector<image_change> changes;
  auto all = etcd_.range(etcd::key_range::prefix(keys_.prefix()));
  if (!all.ok()) {
    SLUICE_LOG_WARN("cluster metadata: re-reading after a compaction failed: {}", all.err().message);
    std::lock_guard g(mu_);
    watch_broken_ = true;  // tried again at the next tick
    return changes;
  }
  std::lock_guard g(image_mu_);
  std::set<std::string> topics;
  for (const auto& [name, _] : image_.topics()) topics.insert(name);
  for (const auto& e : image_.load(all->kvs, all->header_revision))
    SLUICE_LOG_ERROR("cluster metadata: {} (left out)", e.message);
  for (const auto& [name, _] : image_.topics()) topics.insert(name);
  for (const auto& t : topics) changes.push_back({kind::topic, t, -1, image_.topic(t) == nullptr});
  changes.push_back({kind::broker, {}, -1, false});
  changes.push_back({kind::controller, {}, -1, false});
  changes.push_back({kind::broker_configs, {}, -1, false});
  changes.push_back({kind::group_configs, {}, -1, false, {}});  // every group's
  if (auto s = start_watch(all->header_revision + 1); !s.ok()) {
    SLUICE_LOG_WARN("cluster metadata: watching again failed: {}", s.err().message);
    std::lock_guard g2(mu_);
    watch_broken_ = true;
  }
  return changes;
}

std::vector<image_change> control_plane::apply_pending(std::deque<etcd::watch_update> updates) {
  std::vector<image_change> changes;
  for (const auto& u : updates) {
    switch (u.type) {
      case etcd::watch_update::kind::events: {
        std::lock_guard g(image_mu_);
        for (const auto& ev : u.events) {
          auto r = image_.apply(ev);
          if (!r.ok()) {
            SLUICE_LOG_ERROR("cluster metadata: {} (left out)", r.err().message);
            // The record it replaced is gone from the image: tell followers.
            auto key = keys_.parse(ev.kv.key);
            changes.push_back({key.type, key.topic, key.id, true, key.group});
          } else if (*r) {
            changes.push_back(**r);
          }
        }
        break;
      }
      case etcd::watch_update::kind::compacted: {
        SLUICE_LOG_WARN("cluster metadata: the watch fell behind etcd's compaction ({}); reading everything again",
                        u.message);
        watch_.reset();
        auto more = reload();
        changes.insert(changes.end(), more.begin(), more.end());
        break;
      }
      case etcd::watch_update::kind::interrupted:
        SLUICE_LOG_WARN("cluster metadata: etcd watch interrupted ({}); serving with the metadata as it was",
                        u.message);
        break;
      case etcd::watch_update::kind::resumed:
        SLUICE_LOG_INFO("cluster metadata: etcd watch resumed at revision {}", u.revision);
        break;
    }
  }
  return changes;
}

void control_plane::decide(bool elections_due) {
  const bool had_controller = image_.controller().has_value();
  if (const int64_t epoch = had_controller ? image_.controller()->epoch : 0; epoch != last_controller_epoch_) {
    last_controller_epoch_ = epoch;
    if (epoch != 0) controller_changes_total_.fetch_add(1, std::memory_order_relaxed);
  }
  controller_->observe(image_);
  bool registered, lost;
  {
    std::lock_guard g(mu_);
    registered = registered_;
    lost = lease_lost_;
  }
  if (!controller_->active() && registered && !lost && !had_controller) {
    auto won = controller_->campaign(lease_);
    if (!won.ok()) SLUICE_LOG_WARN("running for controller: {}", won.err().message);
  }
  const bool active = controller_->active();
  if (active && !was_controller_) {
    SLUICE_LOG_INFO("this broker is the controller (epoch {})", controller_->epoch());
    if (auto r = controller_->remove_orphans(image_); r.ok() && *r > 0)
      SLUICE_LOG_INFO("controller: removed {} partition records of creations cut short", *r);
    election_due_ = true;
  } else if (!active && was_controller_) {
    SLUICE_LOG_WARN("this broker is no longer the controller");
  }
  if (active && !was_controller_) {
    controller_since_ms_ = clk_.monotonic_ms();
    next_rebalance_ms_ = controller_since_ms_ + opts_.leader_imbalance_check_interval_ms;
  }
  was_controller_ = active;
  controller_active_ = active;
  if (active) {
    ensure_internal_topic("__consumer_offsets", opts_.offsets_partitions, opts_.offsets_replication_factor,
                          opts_.offsets_configs);
    ensure_internal_topic("__transaction_state", opts_.txn_partitions, opts_.txn_replication_factor,
                          opts_.txn_configs);
    ensure_internal_topic("__share_group_state", opts_.share_state_partitions, opts_.share_state_replication_factor,
                          opts_.share_state_configs);
    rebalance_if_due();
  }
  if (!active || !(elections_due || election_due_)) return;
  auto r = controller_->elect_after_broker_change(image_, [this](const std::string& t) { return unclean_allowed(t); });
  if (!r.ok()) {
    // A record moved (the image lags) or etcd is away: decide again later.
    SLUICE_LOG_INFO("controller: elections deferred: {}", r.err().message);
    election_due_ = true;
    return;
  }
  election_due_ = false;
  if (r->changed > 0) {
    SLUICE_LOG_INFO("controller: {} partitions changed ({} clean elections, {} unclean, {} offline)", r->changed,
                    r->clean, r->unclean, r->offline);
  }
}

void control_plane::ensure_internal_topic(const std::string& name, int32_t partitions, int16_t replication_factor,
                                          const controller::config_text& configs) {
  if (partitions <= 0 || image_.topic(name) || image_.brokers().empty()) return;
  const auto wanted = static_cast<size_t>(std::max<int16_t>(replication_factor, 1));
  // Brokers of a cluster start one after another: give them a session
  // timeout to register before settling for fewer replicas.
  if (image_.brokers().size() < wanted && clk_.monotonic_ms() - controller_since_ms_ < opts_.session_timeout_ms)
    return;
  const auto rf = static_cast<int16_t>(std::min(wanted, image_.brokers().size()));
  // Fewer replicas than asked (a smaller cluster) lower min.insync.replicas
  // with them, or nothing could ever be written there.
  controller::config_text cfg = configs;
  if (auto it = cfg.find("min.insync.replicas"); it != cfg.end()) {
    int64_t v = 0;
    const auto* end = it->second.data() + it->second.size();
    if (std::from_chars(it->second.data(), end, v).ptr == end && v > rf) it->second = std::to_string(rf);
  }
  auto r = controller_->create_topic(image_, name, partitions, rf, nullptr, cfg);
  if (r.ok()) {
    SLUICE_LOG_INFO("controller: created {} ({} partitions, {} replicas each)", name, partitions, rf);
  } else {
    SLUICE_LOG_WARN("controller: creating {}: {} (tried again later)", name, r.err().message);
  }
}

void control_plane::rebalance_if_due() {
  if (!opts_.auto_leader_rebalance || clk_.monotonic_ms() < next_rebalance_ms_) return;
  next_rebalance_ms_ = clk_.monotonic_ms() + opts_.leader_imbalance_check_interval_ms;
  std::vector<controller::partition_view> views;
  std::vector<std::pair<std::string, int32_t>> ids;
  for (const auto& [key, pe] : image_.partitions()) {
    const auto* t = image_.topic(key.first);
    if (!t || t->record.id != pe.record.topic || key.second >= static_cast<int32_t>(t->record.assignment.size()))
      continue;
    views.push_back({t->record.assignment[static_cast<size_t>(key.second)], pe.record.state});
    ids.push_back(key);
  }
  const auto moves = controller::should_rebalance(views, image_.live_brokers(), opts_.leader_imbalance_percentage);
  if (moves.empty()) return;
  std::vector<std::pair<std::string, int32_t>> chosen;
  for (size_t i : moves) chosen.push_back(ids[i]);
  auto r = controller_->elect_preferred(image_, chosen);
  if (r.ok()) {
    SLUICE_LOG_INFO("controller: leader rebalance moved {} partitions back to their preferred leaders", r->changed);
  } else {
    SLUICE_LOG_INFO("controller: leader rebalance deferred: {}", r.err().message);
  }
}

void control_plane::run_ops() {
  std::deque<std::shared_ptr<pending_op>> ops;
  {
    std::lock_guard g(mu_);
    ops.swap(ops_);
  }
  for (auto& op : ops) {
    {
      std::lock_guard g(mu_);
      if (op->abandoned) continue;  // its caller timed out and left
      op->started = true;
    }
    const int64_t before = controller_->last_write_revision();
    status s = controller_->active() ? op->op(*controller_, image_)
                                     : status(errc::not_controller, "this broker is not the controller");
    std::lock_guard g(mu_);
    op->ran = true;
    if (s.ok() && controller_->last_write_revision() > before) {
      // The caller reads what it wrote once the image has applied the op's
      // last write.
      op->until_revision = controller_->last_write_revision();
      waiting_.push_back(op);
    } else {
      op->result = s;
      op->done = true;
    }
    cv_.notify_all();
  }
}

result<int64_t> control_plane::reserve_producer_ids(int64_t count) {
  const std::string key = keys_.producer_ids();
  for (int attempt = 0; attempt < 10; ++attempt) {
    SLUICE_ASSIGN_OR_RETURN(auto r, etcd_.range(etcd::key_range::one(key)));
    int64_t first = 0;
    etcd::txn_request req;
    if (r.kvs.empty()) {
      req.compares.push_back(etcd::compare::absent(key));
    } else {
      try {
        first = std::stoll(r.kvs[0].value);
      } catch (...) {
        return error{errc::corrupt_data, key + " holds '" + r.kvs[0].value + "', not a producer id"};
      }
      req.compares.push_back(etcd::compare::unchanged_since(key, r.kvs[0].mod_revision));
    }
    req.then_ops.push_back(etcd::put_op{key, std::to_string(first + count), {}});
    req.retry_if_unknown = true;  // a second application fails the compare
    SLUICE_ASSIGN_OR_RETURN(auto t, etcd_.txn(req));
    if (t.succeeded) return first;
  }
  return error{errc::unavailable, "producer ids: too many brokers reserved at once; try again"};
}

void control_plane::request_isr_change(isr_request c) {
  SLUICE_ASSERT(!c.isr.empty(), "an empty ISR asked for");
  std::lock_guard g(mu_);
  if (stopping_) return;
  // A newer proposal for the partition replaces one not yet written.
  auto key = std::make_pair(c.topic, c.partition);
  isr_changes_.insert_or_assign(std::move(key), std::move(c));
  cv_.notify_all();
}

void control_plane::run_isr_changes() {
  std::vector<isr_request> changes;
  {
    std::lock_guard g(mu_);
    if (lease_lost_) return;  // the session first (run() renews it)
    changes.reserve(isr_changes_.size());
    for (auto& [_, c] : isr_changes_) changes.push_back(std::move(c));
    isr_changes_.clear();
  }
  for (size_t first = 0; first < changes.size(); first += limits::isr_changes_per_round) {
    {
      // Each transaction may take the whole etcd budget while etcd is
      // away: a lost session must not wait behind thousands of changes.
      std::lock_guard g(mu_);
      if (stopping_ || lease_lost_) {
        // The rest stay queued, unless a newer proposal for the same
        // partition replaced them meanwhile.
        for (size_t i = first; i < changes.size(); ++i) {
          auto key = std::make_pair(changes[i].topic, changes[i].partition);
          isr_changes_.try_emplace(std::move(key), std::move(changes[i]));
        }
        return;
      }
    }
    const size_t end = std::min(changes.size(), first + limits::isr_changes_per_round);
    write_isr_round({changes.begin() + static_cast<std::ptrdiff_t>(first),
                     changes.begin() + static_cast<std::ptrdiff_t>(end)});
  }
}

void control_plane::write_isr_round(const std::vector<isr_request>& round) {
  std::vector<controller::isr_change> batch;
  batch.reserve(round.size());
  for (const auto& c : round)
    batch.push_back({c.topic, c.partition, c.leader_epoch, c.partition_epoch, c.isr, c.added_broker_epochs});
  // The metadata thread is the image's only writer: it reads it unlocked.
  const auto results = controller::write_isr_changes(etcd_, image_, opts_.node_id, batch);
  size_t made = 0, refused = 0;
  for (size_t i = 0; i < round.size(); ++i) {
    const auto& c = round[i];
    if (results[i].ok()) {
      ++made;
      SLUICE_LOG_DEBUG("{}-{}: ISR is now {} (leader epoch {})", c.topic, c.partition, fmt::join(c.isr, ","),
                       c.leader_epoch);
      // Counted against the ISR the image held when written.
      size_t before = 0;
      if (const auto* pe = image_.partition(c.topic, c.partition)) before = pe->record.state.isr.size();
      (c.isr.size() < before ? isr_shrinks_ : isr_expands_).fetch_add(1, std::memory_order_relaxed);
    } else {
      ++refused;
      SLUICE_LOG_INFO("{}-{}: ISR change to {} not made: {}", c.topic, c.partition, fmt::join(c.isr, ","),
                      results[i].err().message);
    }
  }
  if (made == 1 && refused == 0) {
    const auto& c = round.front();
    SLUICE_LOG_INFO("{}-{}: ISR is now {} (leader epoch {})", c.topic, c.partition, fmt::join(c.isr, ","),
                    c.leader_epoch);
  } else if (made > 0) {
    SLUICE_LOG_INFO("ISR changes written: {} of {}", made, round.size());
  }
}

void control_plane::renew_session() {
  controller_->step_down();
  controller_active_ = false;
  was_controller_ = false;
  keeper_.reset();
  // etcd may still hold the old lease (it was only unreachable): give it up,
  // so the registration and any controller key it holds go at once rather
  // than leave the cluster without a working controller for a session.
  if (lease_ != 0) {
    etcd_.lease_revoke(lease_).ignore();
    lease_ = 0;
  }
  if (auto s = grant_lease(); !s.ok()) {
    SLUICE_LOG_WARN("etcd session: a new lease failed: {} (trying again)", s.err().message);
    return;
  }
  auto rev = put_registration();
  if (!rev.ok()) {
    SLUICE_LOG_WARN("etcd session: registering again failed: {} (trying again)", rev.err().message);
    keeper_.reset();
    etcd_.lease_revoke(lease_).ignore();
    return;
  }
  SLUICE_LOG_INFO("registered again in the cluster under a new session lease");
  // Each registration is a later etcd write than the one before.
  SLUICE_ASSERT(*rev > registered_revision_.load(std::memory_order_relaxed) ||
                    registered_revision_.load(std::memory_order_relaxed) == INT64_MAX,
                "a registration older than the one it replaces");
  registered_revision_.store(*rev, std::memory_order_release);
  session_live_.store(true, std::memory_order_release);
  std::lock_guard g(mu_);
  lease_lost_ = false;
}

void control_plane::run() {
  const int64_t tick_ms = limits::control_plane_tick_ms;
  for (;;) {
    std::deque<etcd::watch_update> updates;
    bool lost, broken;
    {
      std::unique_lock g(mu_);
      // Queued ISR changes wait while the session is lost: renewing it
      // comes first, once a tick (run_isr_changes leaves them queued).
      cv_.wait_for(g, std::chrono::milliseconds(clk_.sleep_ms_until(clk_.monotonic_ms() + tick_ms)), [&] {
        return stopping_ || !updates_.empty() || !ops_.empty() || (!isr_changes_.empty() && !lease_lost_);
      });
      if (stopping_) return;
      updates.swap(updates_);
      lost = lease_lost_;
      broken = watch_broken_;
      watch_broken_ = false;
    }
    if (lost) renew_session();
    auto changes = apply_pending(std::move(updates));
    if (broken) {
      auto more = reload();
      changes.insert(changes.end(), more.begin(), more.end());
    }
    decide(controller::elections_due(changes));
    if (!changes.empty()) {
      std::vector<listener> ls;
      {
        std::lock_guard g(mu_);
        ls = listeners_;
      }
      for (auto& fn : ls) fn(image_, changes);
    }
    // The listeners have now seen everything up to here (the metadata
    // cache included): view_current() may count it.
    SLUICE_ASSERT(image_.revision() >= applied_revision_.load(std::memory_order_relaxed),
                  "the applied metadata revision went back");
    applied_revision_.store(image_.revision(), std::memory_order_release);
    run_ops();
    run_isr_changes();
    std::lock_guard g(mu_);
    const int64_t rev = image_.revision();
    std::erase_if(waiting_, [&](const std::shared_ptr<pending_op>& op) {
      if (op->until_revision > rev) return false;
      op->done = true;
      return true;
    });
    cv_.notify_all();
  }
}

status control_plane::submit(controller_op op, int64_t timeout_ms) {
  auto p = std::make_shared<pending_op>();
  p->op = std::move(op);
  const sluice::deadline until(timeout_ms, clk_);
  std::unique_lock g(mu_);
  if (stopping_ || !thread_.joinable()) return status(errc::shutting_down, "the broker is stopping");
  ops_.push_back(p);
  cv_.notify_all();
  while (!p->done) {
    if (until.passed()) {
      if (!p->started) {
        p->abandoned = true;
      } else if (!p->ran) {
        // Running over the caller's references: they must outlive it.
        cv_.wait(g, [&] { return p->ran; });
        if (p->done) return p->result;
      }
      return status(errc::unavailable, "the controller did not finish in " + std::to_string(timeout_ms) + " ms");
    }
    cv_.wait_for(g, std::chrono::milliseconds(clk_.sleep_ms_until(clk_.monotonic_ms() + until.left_ms())));
  }
  return p->result;
}

status control_plane::shutdown() {
  {
    std::lock_guard g(mu_);
    if (stopping_) return {};
    stopping_ = true;
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
  watch_.reset();
  // While still registered: move leadership off this broker if it decides.
  status outcome;
  if (controller_ && controller_->active()) {
    std::lock_guard g(image_mu_);
    auto r = controller_->controlled_shutdown(image_, opts_.node_id);
    if (!r.ok()) {
      outcome = r.to_status();
      SLUICE_LOG_WARN("controlled shutdown failed: {}; the other brokers elect once this registration is gone",
                      r.err().message);
    } else if (r->changed > 0) {
      SLUICE_LOG_INFO("controlled shutdown: {} partitions changed", r->changed);
    }
  }
  keeper_.reset();
  // Giving the lease up removes the registration (and the controller key)
  // at once: the others elect without waiting for the session timeout.
  if (lease_ != 0) etcd_.lease_revoke(lease_).ignore();
  std::lock_guard g(mu_);
  for (auto& op : ops_) {
    op->result = status(errc::shutting_down, "the broker is stopping");
    op->done = true;
  }
  for (auto& op : waiting_) {
    op->result = status(errc::shutting_down, "the broker is stopping");
    op->done = true;
  }
  ops_.clear();
  waiting_.clear();
  cv_.notify_all();
  return outcome;
}

}  // namespace sluice::cluster
