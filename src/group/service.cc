#include "group/service.h"

#include <chrono>

#include "base/limits.h"
#include "base/log.h"
#include "config/broker_config.h"
#include "config/dynamic.h"
#include "metadata/partition_manager.h"
#include "partition/log_replay.h"
#include "protocol/records/control.h"

namespace sluice::group {

// Writes the coordinator's records as batches appended to the partitions of
// __consumer_offsets, answering once the acks=all rule says durable.
class service::partition_log final : public record_log {
 public:
  partition_log(service& svc, cluster::partition_manager& partitions, sluice::clock& clk)
      : svc_(svc), partitions_(partitions), clk_(clk) {}

  void append(int32_t p, std::vector<protocol::records::record_input> records, const txn_producer* txn,
              append_done done) override {
    auto part = partitions_.get(std::string(offsets_topic), p);
    if (!part) {
      done(status(errc::not_found, "__consumer_offsets partition " + std::to_string(p) + " is missing"), -1);
      return;
    }
    // Written with acks=all, as Kafka writes it: refused before the append
    // when the ISR is below the topic's min.insync.replicas.
    if (const errc e = part->check_min_insync(); e != errc::ok) {
      done(status(e, "__consumer_offsets-" + std::to_string(p) + " has too few in-sync replicas"), -1);
      return;
    }
    if (!txn || !svc_.verify_txn_) {
      write(p, part, std::move(records), txn, {}, std::move(done));
      return;
    }
    // KIP-890: a batch that would open the producer's transaction on this
    // partition waits for its transaction coordinator's word, under a guard
    // (partition::begin_verification) that a marker ending the transaction
    // meanwhile retires.
    auto guard = part->begin_verification(txn->producer_id, txn->producer_epoch);
    if (!guard.ok()) {
      done(guard.err(), -1);
      return;
    }
    if (!*guard) {
      write(p, part, std::move(records), txn, {}, std::move(done));
      return;
    }
    svc_.verify_txn_(*txn, p,
                     [this, p, part, records = std::move(records), producer = *txn, g = **guard,
                      done = std::move(done)](errc e) mutable {
                       if (e != errc::ok) {
                         part->end_verification(producer.producer_id, g);
                         done(status(e, "the transaction coordinator did not confirm __consumer_offsets-" +
                                            std::to_string(p) + " in the producer's transaction"),
                              -1);
                         return;
                       }
                       write(p, part, std::move(records), &producer, g, std::move(done));
                     });
  }

  // Errors are logged here, where the offset is known.
  status read(int32_t p, const entry_fn& fn) override {
    auto part = partitions_.get(std::string(offsets_topic), p);
    if (!part) return {};
    auto s = cluster::replay_in_log_order(
        *part, limits::group_replay_read_bytes, [this] { return svc_.stopping(); },
        [&](std::span<const uint8_t> b, const protocol::records::decoded_batch& decoded) {
          log_entry e;
          e.batch_offset = decoded.header.base_offset.value();
          if (decoded.header.is_control()) {
            // A transaction marker: it resolves its producer's pending
            // offsets. A control batch that is not a marker was refused
            // before it was stored; one that does not parse is skipped.
            auto m = protocol::records::parse_marker(b);
            if (!m.ok()) {
              SLUICE_LOG_WARN("replaying {}-{}: control batch at {} skipped: {}", offsets_topic, p, e.batch_offset,
                              m.err().message);
              return true;
            }
            e.producer_id = decoded.header.producer_id;
            e.marker = m->commit;
            return fn(e);
          }
          e.transactional = decoded.header.is_transactional();
          if (e.transactional) e.producer_id = decoded.header.producer_id;
          for (const auto& r : decoded.records) {
            if (!r.key) continue;
            e.key = *r.key;
            e.value = r.value;
            if (!fn(e)) return false;
          }
          return true;
        });
    if (!s.ok() && s.code() != errc::shutting_down)
      SLUICE_LOG_ERROR("replaying {}; the rest of this partition is skipped", s.err().message);
    return s;
  }


 private:
  void write(int32_t p, const std::shared_ptr<cluster::partition>& part,
             std::vector<protocol::records::record_input> records, const txn_producer* txn,
             cluster::verification_guard guard, append_done done) {
    protocol::records::batch_options opts;
    if (txn) {
      // The producer's transactional batch, written by this coordinator:
      // its id and epoch, no sequence (Kafka's AppendOrigin.COORDINATOR).
      opts.transactional = true;
      opts.producer_id = txn->producer_id;
      opts.producer_epoch = txn->producer_epoch;
      opts.base_sequence = -1;
    }
    auto batch = protocol::records::build_batch(opts, records);
    if (!batch.ok()) {
      done(batch.err(), -1);
      return;
    }
    auto bytes = std::as_writable_bytes(std::span<uint8_t>(*batch));
    auto outcome = part->append(bytes, clk_.now_ms(), true, true, guard,
                                txn ? cluster::append_origin::coordinator : cluster::append_origin::client);
    if (outcome.error != errc::ok) {
      // The append's own error (not_leader, message_too_large, a storage
      // error, a fenced producer epoch...): to_group_write_error maps each
      // as Kafka does.
      done(status(outcome.error, "appending to __consumer_offsets-" + std::to_string(p) + ": " + outcome.message),
           -1);
      return;
    }
    // Committed: on the disk of every in-sync replica, so the offsets
    // survive the loss of this coordinator's broker. If that never happens
    // (followers gone, the ISR not shrunk), the coordinator answers after
    // offsets.commit.timeout.ms (offsets_partitions::expire_appends).
    part->on_committed(outcome.last, [part, base = outcome.base.value(), done = std::move(done)](const status& s) {
      const status out = part->acks_all_outcome(s);
      done(out, out.ok() ? base : -1);
    });
  }

  service& svc_;
  cluster::partition_manager& partitions_;
  sluice::clock& clk_;
};

result<std::unique_ptr<service>> service::open(cluster::partition_manager& partitions, sluice::clock& clk,
                                               const config::broker_config& cfg) {
  coordinator_config ccfg = coordinator_config::from(cfg);
  const std::string topic(offsets_topic);
  if (auto t = partitions.topic(topic)) {
    if (t->partitions != ccfg.num_partitions) {
      SLUICE_LOG_WARN("{} has {} partitions, not offsets.topic.num.partitions={}: keeping {} so groups stay where "
                      "they are",
                      topic, t->partitions, ccfg.num_partitions, t->partitions);
      ccfg.num_partitions = t->partitions;
    }
  } else if (partitions.store().follows_controller()) {
    // In a cluster the controller creates it, with
    // min(offsets.topic.replication.factor, live brokers) replicas.
    SLUICE_LOG_INFO("{} is created by the cluster's controller", topic);
  } else {
    std::vector<config::config_entry> configs = {
        {"cleanup.policy", "compact"},
        {"max.message.bytes", std::to_string(limits::offsets_topic_max_message_bytes)},
    };
    if (auto e = partitions.create_topic(topic, ccfg.num_partitions, 1, configs, false)) {
      if (e->code != errc::already_exists)
        return error{errc::io_error, "creating " + topic + ": " + e->message};
    }
  }
  return std::unique_ptr<service>(new service(partitions, clk, ccfg));
}

service::service(cluster::partition_manager& partitions, sluice::clock& clk, coordinator_config cfg)
    : partitions_(partitions),
      cluster_(partitions.store().follows_controller()),
      clk_(clk),
      cfg_(cfg),
      log_(std::make_unique<partition_log>(*this, partitions, clk)) {
  // The broker's topic table, wherever the topic's partitions are hosted.
  coord_ = std::make_unique<group::coordinator>(
      cfg_, *log_, clk_, [this](std::function<void()> fn) { post(std::move(fn)); },
      [&partitions](const std::string& topic) -> std::optional<topic_ref> {
        auto t = partitions.topic(topic);
        if (!t) return std::nullopt;
        return topic_ref{t->id, t->partitions};
      });
}

void service::on_leadership(int32_t p, bool leads) {
  if (!cluster_ || p < 0 || p >= cfg_.num_partitions) return;
  if (!leads) {
    // At once, on the telling thread, not behind the loads queued on the
    // service thread: from now on another broker may take commits for
    // these groups, and an answer from this broker's memory would show a
    // client offsets older than the ones it committed there. (Kafka's
    // coordinator stops serving a partition when it resigns it.) A load of
    // `p` under way fails its epoch check and serves nothing.
    coord_->unload_partition(p);
  }
  post([this, p, leads] {
    if (coord_->unloaded()) return;
    if (!leads) {
      if (led_.erase(p)) SLUICE_LOG_INFO("group coordinator: unloaded __consumer_offsets-{} (no longer its leader)", p);
      return;
    }
    // Told to load, but the leadership may have gone again meanwhile (its
    // unload ran at once, above): only the current leader loads.
    auto part = partitions_.get(std::string(offsets_topic), p);
    if (!part || !part->is_leader()) return;
    const auto r = coord_->load_partition(p);
    if (led_.insert(p).second)
      SLUICE_LOG_INFO("group coordinator: loaded __consumer_offsets-{} ({} records)", p, r.records);
  });
}

void service::resign() {
  if (!cluster_) return;
  for (int32_t p = 0; p < cfg_.num_partitions; ++p) coord_->unload_partition(p);
  SLUICE_LOG_INFO("group coordinator: every __consumer_offsets partition unloaded (leaving the cluster)");
}

service::~service() { stop(); }

void service::start() { thread_ = std::thread([this] { run(); }); }

void service::stop() {
  {
    std::lock_guard g(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::lock_guard g(mu_);
  queue_.clear();
}

void service::post(std::function<void()> fn) {
  {
    std::lock_guard g(mu_);
    if (stopping_) return;
    queue_.push_back(std::move(fn));
  }
  cv_.notify_one();
}

bool service::stopping() {
  std::lock_guard g(mu_);
  return stopping_;
}

void service::load() {
  const int64_t t0_ms = clk_.monotonic_ms();
  size_t records = 0, skipped = 0;
  for (int32_t p = 0; p < cfg_.num_partitions; ++p) {
    if (stopping()) return;
    if (cluster_) {
      // Only what this broker leads now; on_leadership loads the rest as
      // it gains them.
      auto part = partitions_.get(std::string(offsets_topic), p);
      if (!part || !part->is_leader()) {
        coord_->unload_partition(p);
        continue;
      }
      led_.insert(p);
    }
    if (coord_->unloaded()) {
      SLUICE_LOG_INFO("group coordinator: shutting down before its replay finished");
      return;
    }
    const auto r = coord_->load_partition(p);
    records += r.records;
    skipped += r.skipped;
  }
  if (!coord_->set_loaded()) {
    SLUICE_LOG_INFO("group coordinator: replay finished after shutdown began; not serving");
    return;
  }
  SLUICE_LOG_INFO("group coordinator loaded {} records ({} skipped), {} groups, in {} ms", records, skipped,
                  coord_->group_count(), clk_.monotonic_ms() - t0_ms);
}

void service::run() {
  load();
  // Ticks follow clk_ (base/clock.h, "Waiting on a clock"), so a manual
  // clock drives session and rebalance timeouts in tests.
  int64_t next_tick_ms = clk_.monotonic_ms();
  std::unique_lock lk(mu_);
  while (!stopping_) {
    if (queue_.empty())
      cv_.wait_for(lk, std::chrono::milliseconds(clk_.sleep_ms_until(next_tick_ms)),
                   [&] { return stopping_ || !queue_.empty(); });
    if (stopping_) break;
    while (!queue_.empty()) {
      auto fn = std::move(queue_.front());
      queue_.pop_front();
      lk.unlock();
      fn();
      lk.lock();
    }
    if (clk_.monotonic_ms() >= next_tick_ms) {
      lk.unlock();
      coord_->tick();
      lk.lock();
      next_tick_ms = clk_.monotonic_ms() + limits::tick_interval_ms;
    }
  }
}

}  // namespace sluice::group
