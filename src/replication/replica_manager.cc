#include "replication/replica_manager.h"

#include <algorithm>
#include <mutex>

#include "base/assert.h"
#include "base/limits.h"
#include "base/log.h"
#include "partition/topic_names.h"

namespace sluice::cluster {

bool replica_manager::hosts(const replica_list& replicas) const {
  return std::find(replicas.begin(), replicas.end(), node_id_) != replicas.end();
}

int32_t replica_manager::slot_count(const std::string& topic) const {
  std::shared_lock g(mu_);
  auto it = slots_.find(topic);
  return it == slots_.end() ? 0 : static_cast<int32_t>(it->second.size());
}

void replica_manager::add_slots(const std::string& topic, int32_t count) {
  std::unique_lock g(mu_);
  auto& slots = slots_[topic];
  if (static_cast<size_t>(count) > slots.size()) slots.resize(static_cast<size_t>(count));
}

void replica_manager::install(const std::string& topic, int32_t p, std::shared_ptr<partition> part,
                              const replica_list& replicas, const partition_state& st) {
  part->apply_state(replicas, st);
  {
    std::unique_lock g(mu_);
    auto it = slots_.find(topic);
    SLUICE_ASSERT(it != slots_.end() && p >= 0 && static_cast<size_t>(p) < it->second.size(),
                  "a partition is installed into its topic's slots");
    it->second[static_cast<size_t>(p)] = part;
  }
  follow(part);
}

std::vector<std::shared_ptr<partition>> replica_manager::remove_topic(const std::string& topic) {
  std::vector<std::shared_ptr<partition>> parts;
  {
    std::unique_lock g(mu_);
    auto it = slots_.find(topic);
    if (it == slots_.end()) return {};
    parts = std::move(it->second);
    slots_.erase(it);
  }
  for (const auto& part : parts)
    if (part) unfollow(part);
  return parts;
}

bool replica_manager::apply(const std::string& topic, int32_t p, const replica_list& replicas,
                            const partition_state& st) {
  auto part = get(topic, p);
  if (!part || !part->apply_state(replicas, st)) return false;
  follow(part);
  return true;
}

replica_manager::~replica_manager() { stop_replication(); }

void replica_manager::start_replication(replication_options opts, const sluice::clock& clk) {
  {
    std::lock_guard g(rep_mu_);
    SLUICE_ASSERT(!rep_, "replication starts once");
    rep_ = std::move(opts);
    clk_ = &clk;
  }
  for (const auto& part : all()) follow(part);
  if (rep_->own_threads) upkeep_thread_ = std::thread([this] { upkeep(); });
}

bool replica_manager::run_fetch_rounds() {
  std::vector<replica_fetcher*> fs;
  {
    std::lock_guard g(rep_mu_);
    SLUICE_ASSERT(rep_ && !rep_->own_threads, "fetch rounds of a replica manager with threads of its own");
    for (auto& [_, f] : fetchers_) fs.push_back(f.get());
  }
  // Fetchers leave fetchers_ only at stop_replication, on this same thread.
  bool worked = false;
  for (auto* f : fs) worked = f->run_round().worked || worked;
  return worked;
}

bool replica_manager::run_fetch_round(int32_t source) {
  replica_fetcher* f = nullptr;
  {
    std::lock_guard g(rep_mu_);
    SLUICE_ASSERT(rep_ && !rep_->own_threads, "fetch rounds of a replica manager with threads of its own");
    auto it = fetchers_.find(source);
    if (it == fetchers_.end()) return false;
    f = it->second.get();
  }
  return f->run_round().worked;
}

void replica_manager::run_upkeep_round() {
  int64_t lag_max;
  isr_writer write;
  const leadership_gate* gate;
  {
    std::lock_guard g(rep_mu_);
    SLUICE_ASSERT(rep_ && !rep_->own_threads, "an upkeep round of a replica manager with threads of its own");
    lag_max = rep_->lag_max_ms;
    write = rep_->write_isr;
    gate = rep_->gate;
  }
  upkeep_round(lag_max, write, gate);
}

void replica_manager::stop_replication() {
  std::map<int32_t, std::unique_ptr<replica_fetcher>> gone;
  {
    std::lock_guard g(rep_mu_);
    rep_stopping_ = true;
    gone.swap(fetchers_);
  }
  rep_cv_.notify_all();
  if (upkeep_thread_.joinable()) upkeep_thread_.join();
  gone.clear();  // joins each fetcher's thread, outside rep_mu_
}

uint64_t replica_manager::replication_bytes_in() const {
  std::lock_guard g(rep_mu_);
  uint64_t total = retired_bytes_in_;
  for (const auto& [_, f] : fetchers_) total += f->bytes_in();
  return total;
}

void replica_manager::follow(const std::shared_ptr<partition>& part) {
  std::lock_guard g(rep_mu_);
  if (!rep_ || rep_stopping_) return;
  const int32_t leader = part->is_leader() ? node_id_ : part->leader_id();
  for (auto& [source, f] : fetchers_)
    if (source != leader) f->remove(part);
  if (leader < 0 || leader == node_id_ || part->closed()) return;
  auto& f = fetchers_[leader];
  if (!f) {
    fetcher_options o = rep_->fetch;
    o.node_id = node_id_;
    o.source = leader;
    f = std::make_unique<replica_fetcher>(
        o, rep_->links ? rep_->links : tcp_links(rep_->endpoints, node_id_, o.socket_timeout_ms), *clk_,
        rep_->own_threads);
  }
  f->add(part);
}

void replica_manager::unfollow(const std::shared_ptr<partition>& part) {
  std::lock_guard g(rep_mu_);
  for (auto& [_, f] : fetchers_) f->remove(part);
}

void replica_manager::upkeep() {
  std::unique_lock g(rep_mu_);
  const int64_t interval = std::clamp<int64_t>(rep_->lag_max_ms / 2, 1, limits::isr_upkeep_max_interval_ms);
  int64_t next_checkpoint = clk_->monotonic_ms() + limits::high_watermark_checkpoint_interval_ms;
  while (!rep_stopping_) {
    const int64_t until = clk_->monotonic_ms() + interval;
    while (!rep_stopping_ && clk_->monotonic_ms() < until)
      rep_cv_.wait_for(g, std::chrono::milliseconds(std::max<int64_t>(clk_->sleep_ms_until(until), 1)));
    if (rep_stopping_) return;
    const int64_t lag_max = rep_->lag_max_ms;
    const isr_writer write = rep_->write_isr;
    const auto checkpoint = rep_->checkpoint;
    const leadership_gate* gate = rep_->gate;
    g.unlock();
    if (checkpoint && clk_->monotonic_ms() >= next_checkpoint) {
      checkpoint();
      next_checkpoint = clk_->monotonic_ms() + limits::high_watermark_checkpoint_interval_ms;
    }
    upkeep_round(lag_max, write, gate);
    g.lock();
  }
}

void replica_manager::upkeep_round(int64_t lag_max, const isr_writer& write, const leadership_gate* gate) {
  // A proposal stands until etcd shows it, so it comes again every
  // round: logged one line a partition, a leader of thousands wrote
  // thousands of lines a second while a restarted follower came back.
  size_t asked = 0;
  for (const auto& part : all()) {
    if (gate && part->is_leader()) {
      if (auto st = gate->check(*part); !st.ok()) {
        part->answer_commit_waiters(st);
        continue;
      }
    }
    if (auto req = part->propose_isr(lag_max)) {
      SLUICE_LOG_DEBUG("{}-{}: asking for ISR {} (leader epoch {}, partition epoch {})", req->topic, req->partition,
                       fmt::join(req->isr, ","), req->leader_epoch, req->partition_epoch);
      if (write) write(*req);
      ++asked;
    }
  }
  if (asked > 0) SLUICE_LOG_INFO("asking for {} ISR change{}", asked, asked == 1 ? "" : "s");
}

std::shared_ptr<partition> replica_manager::get(const std::string& topic, int32_t p) const {
  std::shared_lock g(mu_);
  auto it = slots_.find(topic);
  if (it == slots_.end() || p < 0 || static_cast<size_t>(p) >= it->second.size()) return nullptr;
  return it->second[static_cast<size_t>(p)];
}

bool replica_manager::being_created(const std::string& topic, int32_t p) const {
  std::shared_lock g(mu_);
  auto it = slots_.find(topic);
  return it != slots_.end() && p >= 0 && static_cast<size_t>(p) < it->second.size() &&
         !it->second[static_cast<size_t>(p)];
}

errc replica_manager::missing_partition_error(const std::string& topic, int32_t p) const {
  if (!validate_topic_name(topic).ok()) return errc::invalid_topic;
  return being_created(topic, p) ? errc::not_leader : errc::not_found;
}

std::vector<std::shared_ptr<partition>> replica_manager::all() const {
  std::vector<std::shared_ptr<partition>> out;
  std::shared_lock g(mu_);
  for (const auto& [_, slots] : slots_)
    for (const auto& p : slots)
      if (p) out.push_back(p);
  return out;
}

std::vector<std::shared_ptr<partition>> replica_manager::of_topic(const std::string& topic) const {
  std::vector<std::shared_ptr<partition>> out;
  std::shared_lock g(mu_);
  auto it = slots_.find(topic);
  if (it == slots_.end()) return out;
  for (const auto& p : it->second)
    if (p) out.push_back(p);
  return out;
}

}  // namespace sluice::cluster
