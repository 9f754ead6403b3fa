// The cluster simulated in one process, as FoundationDB and TigerBeetle test
// theirs (docs/simulation.md): three brokers, each with its partition
// manager, replica manager and the real Kafka request dispatcher, over
// in-memory metadata stores, one manual clock, fault_fs with simulated
// syncs and a simulated network between them. Nothing runs on a thread of
// its own but the flushers, which every step waits for (replica managers
// without threads: replication_options::own_threads false); one seed
// decides every step: which broker runs a fetch round or an ISR upkeep
// round, what is produced where (straight to a leader's partition, or by
// idempotent producers through the Produce handler), when the clock moves,
// which links are cut and healed, which message is held while other steps
// run, which broker crashes (its process, or its power: fault_fs drops what
// no sync covered) and restarts on what its disk kept, which file the
// kernel writes back, and when the controller (this file: it applies ISR
// changes by their partition epoch and the broker epochs they name, as
// AlterPartition does, moves leaderships within the ISR, and fences a
// crashed broker when its session expires) acts. A follower's Fetch travels
// through a simulated leader_link into the leader's dispatcher (responder::
// to_function) and back, so the leader's side is the broker's own Fetch
// handler.
//
// Checked at every step: no replica's high watermark goes back within a
// process and none passes its log end (the code asserts more:
// partition/partition.cc); at every election, the new leader holds every
// batch acknowledged so far; every answer to an idempotent producer is a
// success or an error it retries. At the end, with every broker restarted,
// every link healed and the rounds run until the replicas agree: every
// batch acknowledged (acks=all) is on the leader at its offset with the
// CRC it had, every replica holds the same batches (base offset, leader
// epoch, CRC) below the high watermark, and each idempotent producer's
// sequences are there once each, in order.
//
// SLUICE_SIM_SEEDS (default 1,500) seeds of SLUICE_SIM_STEPS (default
// 1,500) steps run from SLUICE_SIM_FIRST_SEED (default 1); a failing seed
// is named in the failure and replays exactly with
// SLUICE_SIM_FIRST_SEED=<seed> SLUICE_SIM_SEEDS=1, SLUICE_SIM_TRACE=1
// printing every step and the partitions' state after it.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <unistd.h>
#include <vector>

#include "config/broker_config.h"
#include "io/fault_fs.h"
#include "kafka/delayed_ops.h"
#include "kafka/dispatcher.h"
#include "kafka/fetch_sessions.h"
#include "kafka/request.h"
#include "metadata/memory_store.h"
#include "metadata/metadata_cache.h"
#include "metadata/partition_manager.h"
#include "metadata/test_managers.h"
#include "model/record_batch.h"
#include "protocol/codec.h"
#include "protocol/frame.h"
#include "replication/leader_link.h"
#include "storage/batch_builder.h"
#include "storage/test_util.h"
#include "protocol/error_code.h"

namespace sluice::sim {
namespace {

using cluster::partition_state;
using cluster::replica_list;

constexpr int32_t kBrokers = 3;
constexpr int32_t kPartitions = 2;
constexpr int64_t kLagMaxMs = 3'000;
constexpr int kProducers = 3;
constexpr int16_t kProduceVersion = 9;
const std::string kTopic = "sim";

int64_t env_int(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoll(v, nullptr, 10) : fallback;
}

class simulation;

// One broker: its storage and partitions, the metadata it is shown, and the
// services and dispatcher its Kafka requests go through.
// Its storage (fs) outlives its processes: a crash ends the process (every
// member below fs), a restart opens a new one on what the disk kept.
struct broker {
  int32_t id = 0;
  io::fault_fs fs{io::filesystem::posix()};
  bool up = true;         // a process runs
  bool fenced = false;    // its session expired: the controller took it out of every ISR
  int incarnation = 0;    // processes started before this one; a link belongs to one
  int64_t broker_epoch = 0;  // of the current registration (KIP-903)
  std::set<int32_t> lagging;  // partitions whose latest state this process has not applied yet
  cluster::testing::memory_store* store = nullptr;  // owned by the partition manager
  cluster::testing::managers m;
  std::unique_ptr<cluster::metadata_cache> md;
  std::unique_ptr<kafka::delayed_ops> delayed;
  std::unique_ptr<kafka::fetch_session_cache> sessions;
  kafka::services svc;
  std::unique_ptr<kafka::dispatcher> dispatch;
};

// A follower's link to a leader across the simulated network: each call
// is encoded as a client would, handed to the leader's dispatcher, and the
// answer decoded; a cut link (either way), a crashed end or a restarted
// leader fails the call, as a timeout. The simulation may hold the request
// before the leader sees it, or the answer before the follower does, while
// other steps run (simulation::maybe_hold).
class sim_link final : public cluster::leader_link {
 public:
  sim_link(simulation& s, int32_t from, int32_t to, int to_incarnation)
      : sim_(s), from_(from), to_(to), to_incarnation_(to_incarnation) {}
  result<protocol::fetch_response> fetch(const protocol::fetch_request& req, int16_t version) override {
    if (trace()) {
      std::string what;
      for (const auto& t : req.topics)
        for (const auto& p : t.partitions)
          what += " p" + std::to_string(p.partition) + "@" + std::to_string(p.fetch_offset) + " epoch " +
                  std::to_string(p.current_leader_epoch) + " last " + std::to_string(p.last_fetched_epoch);
      std::printf("fetch b%d->b%d:%s\n", from_, to_, what.c_str());
    }
    return call<protocol::fetch_response>(req, version);
  }
  result<protocol::offset_for_leader_epoch_response> offset_for_leader_epoch(
      const protocol::offset_for_leader_epoch_request& req, int16_t version) override {
    return call<protocol::offset_for_leader_epoch_response>(req, version);
  }

 private:
  template <class Resp, class Req>
  result<Resp> call(const Req& req, int16_t version);
  bool trace() const;

  simulation& sim_;
  const int32_t from_, to_;
  const int to_incarnation_;  // a restart of the leader breaks the connection
  int32_t correlation_ = 0;
  std::vector<uint8_t> answer_;  // the last answer's bytes: its records point here
};

// A response's bytes in one buffer (its file regions read now).
result<std::vector<uint8_t>> flatten(const net::response& r) {
  std::vector<uint8_t> bytes;
  for (const auto& c : r.chunks) {
    if (const auto* b = std::get_if<std::vector<std::byte>>(&c)) {
      const auto* u = reinterpret_cast<const uint8_t*>(b->data());
      bytes.insert(bytes.end(), u, u + b->size());
    } else {
      const auto& f = std::get<net::file_region>(c);
      const size_t at = bytes.size();
      bytes.resize(at + f.len);
      if (::pread(f.fd, bytes.data() + at, f.len, static_cast<off_t>(f.pos)) != static_cast<ssize_t>(f.len))
        return error{errc::io_error, "reading a file region of the answer"};
    }
  }
  return bytes;
}

// The frame a server hands a handler: the request encoded as a client
// sends it, without its length prefix.
template <class Req>
result<std::vector<std::byte>> request_frame(int32_t correlation, int16_t version, const Req& req,
                                             const std::string& client) {
  auto encoded = protocol::encode_request(correlation, version, req, client).flatten();
  if (!encoded.ok()) return encoded.err();
  std::vector<std::byte> frame(encoded->size() - 4);
  std::memcpy(frame.data(), encoded->data() + 4, frame.size());
  return frame;
}

// An idempotent producer (acks=all, one batch in flight per partition, as
// max.in.flight.requests.per.connection=1): its id and epoch, as
// InitProducerId would give them, and per partition the next sequence and
// the batch it sends until one answer acknowledges it.
struct producer {
  struct batch {
    std::vector<std::byte> bytes;  // what every attempt sends
    int32_t base_seq = 0, count = 0;
    uint32_t crc = 0;
    // The current attempt, numbered across every batch of the simulation:
    // the answer of an earlier attempt (the client gave up on it) is
    // ignored, even one of an earlier batch that comes late.
    int attempt = 0;
    bool waiting = false;  // the current attempt's answer is still to come
  };
  int64_t id = 0;
  int16_t epoch = 0;
  std::map<int32_t, int32_t> next_seq;
  std::map<int32_t, std::optional<batch>> sending;
};

class simulation {
 public:
  simulation(uint64_t seed, const std::string& dir) : rng_(seed), dir_(dir) {
    for (int32_t id = 1; id <= kBrokers; ++id) {
      brokers_.push_back(std::make_unique<broker>());
      broker& b = *brokers_.back();
      b.id = id;
      b.broker_epoch = next_broker_epoch_++;
      b.fs.simulate_syncs(true);
    }
    for (auto& b : brokers_) start_process(*b, /*restart=*/false);
    for (int k = 0; k < kProducers; ++k) producers_.push_back({1000 + k, 0, {}, {}});
    // The topic, on every store alike: partition p led by its first replica.
    for (auto& b : brokers_) {
      cluster::partition_request req;
      req.count = kPartitions;
      req.replication_factor = kBrokers;
      for (int32_t p = 0; p < kPartitions; ++p) req.assignment.push_back(assignment(p));
      auto t = b->store->create(kTopic, req, {});
      EXPECT_TRUE(t.ok());
    }
    for (int32_t p = 0; p < kPartitions; ++p) {
      const auto a = assignment(p);
      publish(p, {a[0], 1, a, 1});
    }
    for (auto& b : brokers_) b->m.partitions->on_store_change(kTopic);
    // The logs are created on the partition managers' own thread: every
    // step after this one runs on this thread alone.
    for (auto& b : brokers_) b->m.partitions->wait_for_creations();
    for (int32_t p = 0; p < kPartitions; ++p)
      for (auto& b : brokers_) b->m.partitions->refresh_state(kTopic, p);
    for (auto& b : brokers_) start_replication(*b);
  }

  ~simulation() {
    for (auto& b : brokers_)
      if (b->up) b->m.partitions->replicas().stop_replication();
    for (auto& b : brokers_)
      if (b->up) stop_process(*b);
  }

  bool connected(int32_t a, int32_t b) const { return !cuts_.count({std::min(a, b), std::max(a, b)}); }
  broker& at(int32_t id) { return *brokers_[static_cast<size_t>(id - 1)]; }
  // Whether a call from `from` reaches `to`'s process `incarnation`.
  bool reaches(int32_t from, int32_t to, int incarnation) {
    return connected(from, to) && at(from).up && at(to).up && at(to).incarnation == incarnation;
  }

  // One step the seed chooses.
  void step() {
    const int r = pick(1000);
    std::string what;
    if (r < 130) {
      const int32_t p = pick(kPartitions);
      what = "append to p" + std::to_string(p);
      produce(p);
    } else if (r < 330) {
      const int k = pick(kProducers);
      const int32_t p = pick(kPartitions);
      what = "producer " + std::to_string(k) + " to p" + std::to_string(p) + ": " + send(k, p);
    } else if (r < 630) {
      const int32_t b = 1 + pick(kBrokers);
      what = "fetch round b" + std::to_string(b);
      if (at(b).up) fetch_round(b, what);
      else what += " (down)";
    } else if (r < 660) {
      const int32_t b = 1 + pick(kBrokers);
      what = "metadata reaches b" + std::to_string(b);
      if (at(b).up) catch_up(at(b));
      else what += " (down)";
    } else if (r < 730) {
      const int32_t b = 1 + pick(kBrokers);
      what = "upkeep round b" + std::to_string(b);
      if (at(b).up) at(b).m.partitions->replicas().run_upkeep_round();
      else what += " (down)";
    } else if (r < 745) {
      // What the upkeep thread of a real broker does every few seconds.
      const int32_t b = 1 + pick(kBrokers);
      what = "high watermark checkpoint b" + std::to_string(b);
      if (at(b).up) at(b).m.partitions->checkpoint_high_watermarks().ignore();
      else what += " (down)";
    } else if (r < 770) {
      const int32_t b = 1 + pick(kBrokers);
      what = "writeback b" + std::to_string(b) + writeback(b);
    } else if (r < 840) {
      what = "controller: ISR requests";
      apply_isr_requests();
    } else if (r < 900) {
      const int ms = pick(1'500);
      what = "clock +" + std::to_string(ms) + " ms";
      clk_.advance_ms(ms);
    } else if (r < 930) {
      const int32_t a = 1 + pick(kBrokers), b = 1 + pick(kBrokers);
      if (a != b) {
        const bool cut = connected(a, b);
        what = std::string(cut ? "cut " : "heal ") + std::to_string(a) + "-" + std::to_string(b);
        if (cut) cuts_.insert({std::min(a, b), std::max(a, b)});
        else cuts_.erase({std::min(a, b), std::max(a, b)});
      }
    } else if (r < 960) {
      const int32_t p = pick(kPartitions);
      what = "controller: move leader of p" + std::to_string(p);
      move_leader(p);
    } else if (r < 968) {
      const int32_t b = 1 + pick(kBrokers);
      const bool power_loss = pick(2) == 0;
      what = std::string(power_loss ? "power loss" : "crash") + " of b" + std::to_string(b);
      if (!may_crash(b)) what += " (not now)";
      else crash(b, power_loss);
    } else if (r < 984) {
      what = "controller: sessions expire";
      for (int32_t id = 1; id <= kBrokers; ++id)
        if (!at(id).up && !at(id).fenced) {
          what += " b" + std::to_string(id);
          expire(id);
        }
    } else {
      what = "restart";
      for (int32_t id = 1; id <= kBrokers; ++id)
        if (at(id).fenced) {
          what += " b" + std::to_string(id);
          restart(id);
        }
    }
    quiesce();
    // SLUICE_SIM_TRACE=1: every step and the state after it, for a replay
    // (a step run while a message was held is indented by its depth).
    if (trace_)
      std::printf("%*sstep %d: %s\n%s", 2 * static_cast<int>(in_flight_.size()), "", ++steps_, what.c_str(),
                  describe().c_str());
    check_watermarks();
  }

  // Restarts every broker down, heals every link and runs rounds until
  // every replica holds what its leader holds, up to its high watermark;
  // false when they never agree.
  bool settle() {
    settling_ = true;  // nothing held from here: the network and the metadata deliver at once
    for (auto& b : brokers_)
      if (b->up) catch_up(*b);
    for (int32_t id = 1; id <= kBrokers; ++id) {
      if (at(id).up) continue;
      if (!at(id).fenced) expire(id);
      restart(id);
    }
    cuts_.clear();
    for (int i = 0; i < 400; ++i) {
      for (int32_t id = 1; id <= kBrokers; ++id) at(id).m.partitions->replicas().run_fetch_rounds();
      for (int32_t id = 1; id <= kBrokers; ++id) at(id).m.partitions->replicas().run_upkeep_round();
      apply_isr_requests();
      clk_.advance_ms(200);
      quiesce();
      check_watermarks();
      if (agreed()) return true;
    }
    return false;
  }

  // The end checks; each failure says what differs.
  void check_history(uint64_t seed) {
    for (int32_t p = 0; p < kPartitions; ++p) {
      const int32_t leader = state_[p].leader;
      auto lead = at(leader).m.partitions->get(kTopic, p);
      ASSERT_NE(lead, nullptr);
      const offset hw = lead->high_watermark();
      const auto want = batches(*lead, hw);
      for (const auto& [base, crc] : acked_[p]) {
        auto it = want.find(base);
        ASSERT_TRUE(it != want.end()) << "seed " << seed << ": acknowledged batch at " << kTopic << "-" << p
                                      << "/" << base << " is not on leader " << leader << " (hw " << hw.value()
                                      << ")";
        EXPECT_EQ(it->second.second, crc) << "seed " << seed << ": acknowledged batch at " << p << "/" << base
                                          << " differs on the leader";
      }
      for (int32_t id = 1; id <= kBrokers; ++id) {
        auto rep = at(id).m.partitions->get(kTopic, p);
        ASSERT_NE(rep, nullptr);
        EXPECT_EQ(batches(*rep, hw), want)
            << "seed " << seed << ": broker " << id << " differs from leader " << leader << " below " << hw.value()
            << " in partition " << p;
      }
    }
  }

  // Every idempotent producer's batches on each leader, below its high
  // watermark, in offset order: their sequences follow one another from 0
  // (none twice, none missing before one that is there).
  void check_producers(uint64_t seed) {
    for (int32_t p = 0; p < kPartitions; ++p) {
      auto lead = at(state_[p].leader).m.partitions->get(kTopic, p);
      ASSERT_NE(lead, nullptr);
      std::map<int64_t, int32_t> next;  // producer id -> the sequence expected next
      for (const auto& h : headers(*lead, lead->high_watermark())) {
        if (h.producer_id < 0) continue;
        auto& want = next[h.producer_id];
        EXPECT_EQ(h.base_sequence, want) << "seed " << seed << ": partition " << p << ", producer " << h.producer_id
                                         << ": the batch at " << h.base_offset.value() << " has sequence "
                                         << h.base_sequence << (h.base_sequence < want ? " (a duplicate)" : " (a gap)");
        want = h.base_sequence + h.records_count;
      }
    }
  }

  // Each partition's state and every replica's log end and high watermark.
  std::string describe() {
    std::string out;
    for (int32_t p = 0; p < kPartitions; ++p) {
      const auto& st = state_[p];
      out += "partition " + std::to_string(p) + ": leader " + std::to_string(st.leader) + " epoch " +
             std::to_string(st.leader_epoch) + " isr";
      for (int32_t id : st.isr) out += " " + std::to_string(id);
      for (int32_t id = 1; id <= kBrokers; ++id) {
        if (!at(id).up) {
          out += "; b" + std::to_string(id) + (at(id).fenced ? " down, fenced" : " down");
          continue;
        }
        auto rep = at(id).m.partitions->get(kTopic, p);
        if (!rep) {
          out += "; b" + std::to_string(id) + " none";
          continue;
        }
        out += "; b" + std::to_string(id) + " end " + std::to_string(rep->log_end_offset().value()) + " hw " +
               std::to_string(rep->high_watermark().value()) + (rep->is_leader() ? " (leads)" : "") + " epoch " +
               std::to_string(rep->epoch().value());
      }
      out += "\n";
    }
    return out;
  }

  size_t acknowledged() const {
    size_t n = 0;
    for (const auto& [_, a] : acked_) n += a.size();
    return n;
  }
  int crashes() const { return crashes_; }
  int delays() const { return delays_; }
  bool tracing() const { return trace_; }
  int idempotent_acks() const { return idempotent_acks_; }

  // A message from `from` to `to` is held here, at the seed's word, while
  // some steps run (the other brokers, the controller, the clock, even
  // `to`'s crash): a request that reaches the leader late, or an answer
  // that reaches the follower after a leadership moved. The follower's
  // fetcher waits for it meanwhile, as a real one blocks on its socket;
  // nothing else of `from` waits. At most two held at once.
  void maybe_hold(int32_t from, int32_t to, const char* what) {
    if (settling_ || in_flight_.size() >= 2 || pick(100) >= (in_flight_.empty() ? 6 : 3)) return;
    const int n = 1 + pick(8);
    ++delays_;
    if (trace_)
      std::printf("%*s%s b%d->b%d held for %d steps\n", 2 * static_cast<int>(in_flight_.size()), "", what, from,
                  to, n);
    in_flight_.push_back({from, to});
    for (int i = 0; i < n && !::testing::Test::HasFatalFailure(); ++i) step();
    in_flight_.pop_back();
  }

 private:
  friend class sim_link;

  int pick(int n) { return static_cast<int>(rng_() % static_cast<uint64_t>(n)); }

  static replica_list assignment(int32_t p) {
    replica_list a;
    for (int32_t k = 0; k < kBrokers; ++k) a.push_back(1 + (p + k) % kBrokers);
    return a;
  }

  // The brokers the controller counts live (not fenced), with their
  // current registrations: what every broker's metadata shows.
  std::vector<cluster::broker_endpoint> live_brokers() {
    std::vector<cluster::broker_endpoint> eps;
    for (int32_t k = 1; k <= kBrokers; ++k)
      if (!at(k).fenced) eps.push_back({k, "b" + std::to_string(k), 9000 + k, std::nullopt, at(k).broker_epoch});
    return eps;
  }
  void publish_brokers() {
    const auto eps = live_brokers();
    for (auto& b : brokers_)
      if (b->up) b->md->set_brokers(eps, 1);
  }

  // A process of broker `b` on what its disk holds. At a restart its store
  // shows what the controller holds now (the topic and each partition's
  // state), and the partition manager opens the logs as a broker does at
  // start-up (the log manager's recovery, the high watermark checkpoint,
  // the producer state).
  void start_process(broker& b, bool restart) {
    const std::string logs = dir_ + "/broker-" + std::to_string(b.id);
    config::config_map cm;
    cm.set("log.dirs", std::vector<std::string>{logs});
    cm.set("node.id", int64_t{b.id});
    // Durable at once (no flusher thread in the way of acknowledgements):
    // what happens follows from the seed alone. Unsynced bytes are what a
    // power loss takes (fault_fs::drop_unsynced): acks=all then relies on
    // the other in-sync replicas, as in Kafka.
    cm.set("sluice.log.fsync.enable", false);
    // Small segments and a dense index: rolls, sealed segments and index
    // entries on every replica, for recovery to find after a crash.
    cm.set("log.segment.bytes", int64_t{4096});
    cm.set("log.index.interval.bytes", int64_t{256});
    auto cfg = config::make_broker_config(std::move(cm));
    EXPECT_TRUE(cfg.ok()) << cfg.err().message;
    auto store = std::make_unique<cluster::testing::memory_store>(b.id, /*follows=*/true);
    b.store = store.get();
    if (restart) {
      cluster::partition_request req;
      req.count = kPartitions;
      req.replication_factor = kBrokers;
      for (int32_t p = 0; p < kPartitions; ++p) req.assignment.push_back(assignment(p));
      EXPECT_TRUE(store->create(kTopic, req, {}).ok());
      for (int32_t p = 0; p < kPartitions; ++p) store->set_state(kTopic, p, assignment(p), state_[p]);
    }
    b.m = cluster::testing::open_managers(b.fs, logs, *cfg, std::move(store), clk_);
    ASSERT_NE(b.m.partitions, nullptr) << "broker " << b.id << " did not open";
    b.md = std::make_unique<cluster::metadata_cache>(b.m.partitions->store(), b.m.partitions->replicas(), b.id,
                                                     "sim");
    b.md->set_brokers(live_brokers(), 1);
    b.delayed = std::make_unique<kafka::delayed_ops>(clk_);
    b.sessions = std::make_unique<kafka::fetch_session_cache>();
    b.svc = {};
    b.svc.partitions = b.m.partitions.get();
    b.svc.metadata = b.md.get();
    b.svc.clk = &clk_;
    b.svc.delayed = b.delayed.get();
    b.svc.fetch_sessions = b.sessions.get();
    b.svc.node_id = b.id;
    b.dispatch = std::make_unique<kafka::dispatcher>(b.svc);
    if (!restart) return;
    b.m.partitions->wait_for_creations();
    start_replication(b);
  }

  // Ends a process without a word to anyone. Nothing it does from the
  // crash on reaches the disk (fault_fs counts the machine crashed while
  // its objects are torn down); a power loss also takes every byte no sync
  // covered.
  void stop_process(broker& b) {
    b.lagging.clear();  // a new process reads the store at open
    b.m.partitions->replicas().stop_replication();
    b.dispatch.reset();
    b.delayed.reset();
    b.sessions.reset();
    b.md.reset();
    b.m.partitions->shutdown();
    b.m.partitions.reset();
    b.m.logs->shutdown().ignore();
    b.m.logs.reset();
  }

  void start_replication(broker& b) {
    cluster::replica_manager::replication_options o;
    o.fetch.broker_epoch = [this, id = b.id] { return at(id).broker_epoch; };
    o.fetch.wait_max_ms = 0;  // answered at once: nothing parks
    o.fetch.backoff_ms = 100;
    o.fetch.partition_max_bytes = 64 << 10;
    o.fetch.response_max_bytes = 256 << 10;
    o.fetch.socket_timeout_ms = 30'000;
    o.lag_max_ms = kLagMaxMs;
    o.own_threads = false;
    o.links = [this, id = b.id](int32_t source) -> result<std::unique_ptr<cluster::leader_link>> {
      if (!reaches(id, source, at(source).incarnation)) return error{errc::unavailable, "cut"};
      return std::unique_ptr<cluster::leader_link>(std::make_unique<sim_link>(*this, id, source, at(source).incarnation));
    };
    o.write_isr = [this, id = b.id](const cluster::isr_request& r) { isr_requests_.push_back({id, r}); };
    b.m.partitions->replicas().start_replication(std::move(o), clk_);
  }

  // The work a step asked of the flushers (seals: index files, checkpoints,
  // producer snapshots) is done before the next step, so the files on disk
  // follow from the seed alone.
  void quiesce() {
    for (auto& b : brokers_)
      if (b->up) b->m.logs->wait_idle();
  }

  // The kernel writes one of a running broker's files back to the disk,
  // as it does with dirty pages on its own: after a power loss each file
  // holds what it held at its last sync or writeback, so files come back
  // from different moments (a segment and its index, a checkpoint and the
  // log it describes). Returns what it wrote back, for the trace.
  std::string writeback(int32_t id) {
    broker& b = at(id);
    if (!b.up) return " (down)";
    std::vector<std::string> files;
    std::error_code ec;
    for (auto it = std::filesystem::recursive_directory_iterator(dir_ + "/broker-" + std::to_string(id), ec);
         !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec))
      // A retired file (".deleted") goes on the deleter's thread, at a time
      // no seed decides; recovery removes what is left of them anyway.
      if (it->is_regular_file() && it->path().extension() != ".deleted") files.push_back(it->path().string());
    if (files.empty()) return " (nothing)";
    std::sort(files.begin(), files.end());
    const std::string path = files[static_cast<size_t>(pick(static_cast<int>(files.size())))];
    auto f = b.fs.open(path, io::open_mode::read_write);
    if (f.ok()) (*f)->sync().ignore();
    return " " + path.substr(dir_.size());
  }

  bool waiting(int32_t from, int32_t to) const {
    return std::find(in_flight_.begin(), in_flight_.end(), std::pair{from, to}) != in_flight_.end();
  }

  // Each of the broker's fetchers, in the order of their sources, but one
  // waiting for an answer (its thread is blocked on it).
  void fetch_round(int32_t b, std::string& what) {
    for (int32_t source = 1; source <= kBrokers; ++source) {
      if (source == b) continue;
      if (waiting(b, source)) {
        what += " (from b" + std::to_string(source) + " waiting)";
        continue;
      }
      at(b).m.partitions->replicas().run_fetch_round(source);
    }
  }

  // A crash keeps acknowledged records only while another in-sync replica
  // holds them (fsync off: what a replica acknowledged may be lost with its
  // power): one broker down at a time, and never the last of an ISR.
  bool may_crash(int32_t id) {
    // A fetcher waiting for an answer is on this thread's stack.
    for (const auto& [from, _] : in_flight_)
      if (from == id) return false;
    for (int32_t k = 1; k <= kBrokers; ++k)
      if (!at(k).up || at(k).fenced) return false;
    for (const auto& [p, st] : state_)
      if (st.isr.size() < 2 && std::find(st.isr.begin(), st.isr.end(), id) != st.isr.end()) return false;
    return true;
  }

  void crash(int32_t id, bool power_loss) {
    broker& b = at(id);
    b.m.logs->wait_idle();  // the crash comes at an instant: no seal or sync runs after it
    b.fs.crash_after_ops(0);
    stop_process(b);
    if (power_loss) {
      EXPECT_TRUE(b.fs.drop_unsynced().ok());
    }
    b.fs.crash_after_ops(std::nullopt);
    b.up = false;
    ++crashes_;
    // Its ISR requests not yet written die with it.
    std::erase_if(isr_requests_, [&](const auto& r) { return r.first == id; });
    for (int32_t p = 0; p < kPartitions; ++p) hw_seen_.erase({id, p});
  }

  // Its session expired: the controller fences the broker and takes it out
  // of every ISR, electing another ISR member where it led, at the next
  // leader epoch (Kafka's controller does the same when a broker's session
  // ends; a broker that restarts registers anew only after this).
  void expire(int32_t id) {
    at(id).fenced = true;
    publish_brokers();
    for (int32_t p = 0; p < kPartitions; ++p) {
      partition_state st = state_[p];
      auto it = std::find(st.isr.begin(), st.isr.end(), id);
      if (it == st.isr.end()) {
        ASSERT_NE(st.leader, id) << "a leader outside its ISR";
        continue;
      }
      st.isr.erase(it);
      ASSERT_FALSE(st.isr.empty()) << "partition " << p << ": the crashed broker " << id
                                   << " was its last in-sync replica";
      st.partition_epoch += 1;
      const bool elect = st.leader == id;
      if (elect) {
        st.leader = st.isr[static_cast<size_t>(pick(static_cast<int>(st.isr.size())))];
        st.leader_epoch += 1;
      }
      publish(p, st);
      apply_everywhere(p);
      if (elect) check_leader_holds_acked(p);
    }
  }

  // A new process, registered with a new broker epoch, after its session
  // expired; it follows the controller's current states.
  void restart(int32_t id) {
    broker& b = at(id);
    b.incarnation += 1;
    b.broker_epoch = next_broker_epoch_++;
    b.fenced = false;
    b.up = true;
    start_process(b, /*restart=*/true);
    publish_brokers();
  }

  // What the controller writes, every running broker's store alike.
  void publish(int32_t p, const partition_state& st) {
    state_[p] = st;
    for (auto& b : brokers_)
      if (b->up) b->store->set_state(kTopic, p, assignment(p), st);
  }
  // Each running broker applies the controller's new state of p now or, at
  // the seed's word, at a later step (its metadata lags): meanwhile it acts
  // on the state before, a deposed leader leading on.
  void apply_everywhere(int32_t p) {
    for (auto& b : brokers_) {
      if (!b->up) continue;
      if (!settling_ && pick(100) < 30) {
        b->lagging.insert(p);
        continue;
      }
      b->lagging.erase(p);
      b->m.partitions->refresh_state(kTopic, p);
    }
  }
  // A lagging broker's metadata catches up: the store's current states.
  void catch_up(broker& b) {
    for (int32_t p : b.lagging) b.m.partitions->refresh_state(kTopic, p);
    b.lagging.clear();
  }

  // AlterPartition: a leader's ISR change holds at the leader epoch and
  // partition epoch it was asked at, names only assigned replicas, and adds
  // a replica only with the broker epoch of its live registration (KIP-903:
  // not a fenced broker, nor a restarted one on its earlier process's word).
  void apply_isr_requests() {
    auto reqs = std::move(isr_requests_);
    isr_requests_.clear();
    for (const auto& [from, r] : reqs) {
      partition_state& st = state_[r.partition];
      if (r.leader_epoch != st.leader_epoch || r.partition_epoch != st.partition_epoch || r.isr.empty()) continue;
      bool eligible = true;
      for (int32_t id : r.isr) {
        if (std::find(st.isr.begin(), st.isr.end(), id) != st.isr.end()) continue;
        auto e = r.added_broker_epochs.find(id);
        if (e == r.added_broker_epochs.end() || at(id).fenced || e->second != at(id).broker_epoch) eligible = false;
      }
      if (!eligible) continue;
      partition_state next = st;
      next.isr = r.isr;
      next.partition_epoch += 1;
      publish(r.partition, next);
      apply_everywhere(r.partition);
    }
  }

  // A clean election within the ISR (as a controlled shutdown or a
  // preferred-leader election makes): another ISR member leads at the next
  // leader epoch. The controller may pick a broker that crashed and whose
  // session has not expired yet: it does not know.
  void move_leader(int32_t p) {
    partition_state st = state_[p];
    std::vector<int32_t> others;
    for (int32_t id : st.isr)
      if (id != st.leader) others.push_back(id);
    if (others.empty()) return;
    st.leader = others[static_cast<size_t>(pick(static_cast<int>(others.size())))];
    st.leader_epoch += 1;
    st.partition_epoch += 1;
    publish(p, st);
    apply_everywhere(p);
    check_leader_holds_acked(p);
  }

  // At an election to an ISR member: the new leader's log holds every
  // batch acknowledged so far, as it was acknowledged (a member of the ISR
  // holds everything below the high watermark).
  void check_leader_holds_acked(int32_t p) {
    const int32_t leader = state_[p].leader;
    if (!at(leader).up) return;  // crashed, its session not expired yet: elected again then
    auto lead = at(leader).m.partitions->get(kTopic, p);
    ASSERT_NE(lead, nullptr);
    const auto held = batches(*lead, lead->log_end_offset());
    for (const auto& [base, crc] : acked_[p]) {
      auto it = held.find(base);
      ASSERT_TRUE(it != held.end() && it->second.second == crc)
          << "partition " << p << ": broker " << leader << ", elected at leader epoch " << state_[p].leader_epoch
          << ", lacks the acknowledged batch at " << base << " (its log ends at " << lead->log_end_offset().value()
          << ")\n"
          << describe() << "its batches: " << list(held);
    }
  }

  // A batch appended straight to the partition of the broker the
  // controller names, or now and then of another (one whose metadata lags
  // may still lead).
  void produce(int32_t p) {
    const int32_t to = pick(6) == 0 ? 1 + pick(kBrokers) : state_[p].leader;
    if (!at(to).up) return;
    auto lead = at(to).m.partitions->get(kTopic, p);
    if (!lead || !lead->is_leader()) return;
    auto b = storage::testing::make_batch(1 + pick(3), 20, static_cast<uint32_t>(++produced_));
    auto out = lead->append(b, clk_.now_ms());
    if (out.error != errc::ok) return;
    const int64_t base = out.base.value();
    const uint32_t crc = model::batch::parse(b.data()).crc;
    lead->on_committed(out.last, [this, p, base, crc](const status& s) {
      if (s.ok()) acked_[p][base] = crc;
    });
  }

  // Producer k's batch to partition p: a new one once the last was
  // acknowledged; else the same again (a retry) when its last attempt
  // failed, or when the client gives up waiting for an answer (its
  // request timeout). Sent through the Produce handler of the broker the
  // producer takes for the leader (now and then a stale one). Returns what
  // it did, for the trace.
  std::string send(int k, int32_t p) {
    producer& pr = producers_[static_cast<size_t>(k)];
    auto& sending = pr.sending[p];
    std::string what;
    if (!sending) {
      producer::batch b;
      b.base_seq = pr.next_seq[p];
      b.count = 1 + pick(3);
      storage::batch_spec spec;
      spec.records = b.count;
      spec.value_bytes = 20;
      spec.seed = ++produced_;
      spec.base_timestamp = clk_.now_ms();
      spec.producer_id = pr.id;
      spec.producer_epoch = pr.epoch;
      spec.base_sequence = b.base_seq;
      b.bytes = storage::build_batch(spec);
      b.crc = model::batch::parse(b.bytes.data()).crc;
      sending = std::move(b);
      what = "sequence " + std::to_string(sending->base_seq);
    } else if (sending->waiting) {
      if (pick(4) != 0) return "waiting for sequence " + std::to_string(sending->base_seq);
      what = "gave up waiting; retry of sequence " + std::to_string(sending->base_seq);
    } else {
      what = "retry of sequence " + std::to_string(sending->base_seq);
    }
    const int attempt = ++attempts_;
    sending->attempt = attempt;
    sending->waiting = true;
    const int32_t to = pick(8) == 0 ? 1 + pick(kBrokers) : state_[p].leader;
    what += " to b" + std::to_string(to);
    if (!at(to).up) {
      sending->waiting = false;
      return what + " (down)";
    }
    protocol::produce_request req;
    req.acks = -1;
    // Never timed out on the broker: the delayed-ops thread would answer at
    // a time no seed decides. The client gives up instead (above).
    req.timeout_ms = INT32_MAX;
    auto& t = req.topic_data.emplace_back();
    t.name = kTopic;
    auto& pd = t.partition_data.emplace_back();
    pd.index = p;
    const auto* u = reinterpret_cast<const uint8_t*>(sending->bytes.data());
    pd.records = protocol::records_field::of(std::span<const uint8_t>(u, sending->bytes.size()));
    const int32_t correlation = ++correlation_;
    auto frame = request_frame(correlation, kProduceVersion, req, "producer-" + std::to_string(k));
    EXPECT_TRUE(frame.ok());
    if (!frame.ok()) return what;
    net::connection_context ctx;
    ctx.id = static_cast<uint64_t>(100 + k);
    ctx.peer = "producer-" + std::to_string(k);
    // The leader the controller names, applying its latest state: its
    // producer state is the partition's. Another broker (one that led, its
    // metadata lagging) may lack batches acknowledged since.
    const bool current = to == state_[p].leader && !at(to).lagging.count(p);
    at(to).dispatch->on_request(
        ctx, std::move(*frame),
        net::responder::to_function(
            [this, k, p, attempt, correlation, current](net::responder::outcome o, net::response r) {
              answered(k, p, attempt, correlation, current, o, r);
            }));
    return what;
  }

  // An answer to attempt `attempt` of producer k's batch to partition p.
  void answered(int k, int32_t p, int attempt, int32_t correlation, bool current, net::responder::outcome o,
                const net::response& r) {
    producer& pr = producers_[static_cast<size_t>(k)];
    auto& sending = pr.sending[p];
    if (!sending || sending->attempt != attempt) return;  // the client gave up on it
    sending->waiting = false;
    if (o != net::responder::outcome::responded) return;  // the connection went: retry
    auto bytes = flatten(r);
    ASSERT_TRUE(bytes.ok());
    auto resp = protocol::decode_response<protocol::produce_response>(
        std::span<const uint8_t>(bytes->data(), bytes->size()), kProduceVersion, correlation);
    ASSERT_TRUE(resp.ok()) << resp.err().message;
    ASSERT_EQ(resp->responses.size(), 1u);
    ASSERT_EQ(resp->responses[0].partition_responses.size(), 1u);
    const auto& part = resp->responses[0].partition_responses[0];
    const auto err = static_cast<kafka::error_code>(part.error_code);
    using kafka::error_code;
    if (trace_)
      std::printf("%*sproducer %d to p%d: attempt %d of sequence %d answered: error %d, base offset %lld\n",
                  2 * static_cast<int>(in_flight_.size()), "", k, p, attempt, sending->base_seq, part.error_code,
                  static_cast<long long>(part.base_offset));
    if (err == error_code::none) {
      acked_[p][part.base_offset] = sending->crc;
      ++idempotent_acks_;
      pr.next_seq[p] = sending->base_seq + sending->count;
      sending.reset();
      return;
    }
    // What a producer retries; anything else fails an idempotent producer
    // whose every batch was sent in order and retried until acknowledged,
    // but a sequence refused by a deposed leader that does not know it yet
    // (the producer finds the leader and retries there).
    if (!current && (err == error_code::out_of_order_sequence_number || err == error_code::unknown_producer_id))
      return;
    ASSERT_TRUE(err == error_code::not_leader_or_follower || err == error_code::not_enough_replicas ||
                err == error_code::not_enough_replicas_after_append || err == error_code::request_timed_out ||
                err == error_code::leader_not_available || err == error_code::unknown_topic_or_partition)
        << "producer " << pr.id << ", partition " << p << ", sequence " << sending->base_seq << ": error "
        << part.error_code << " (" << part.error_message.value_or("") << ")\n"
        << describe();
  }

  void check_watermarks() {
    for (int32_t id = 1; id <= kBrokers; ++id) {
      if (!at(id).up) continue;
      for (int32_t p = 0; p < kPartitions; ++p) {
        auto part = at(id).m.partitions->get(kTopic, p);
        if (!part) continue;
        const int64_t hw = part->high_watermark().value();
        ASSERT_LE(hw, part->log_end_offset().value()) << "broker " << id << " partition " << p;
        // Within one process: a restarted replica starts from its checkpoint.
        auto& last = hw_seen_[{id, p}];
        ASSERT_GE(hw, last) << "broker " << id << " partition " << p << ": high watermark went back";
        last = hw;
      }
    }
  }

  bool agreed() {
    for (int32_t p = 0; p < kPartitions; ++p) {
      auto lead = at(state_[p].leader).m.partitions->get(kTopic, p);
      if (!lead) return false;
      for (int32_t id = 1; id <= kBrokers; ++id) {
        auto rep = at(id).m.partitions->get(kTopic, p);
        if (!rep || rep->log_end_offset() != lead->log_end_offset() ||
            rep->high_watermark() != lead->high_watermark() || lead->high_watermark() != lead->log_end_offset())
          return false;
      }
    }
    return true;
  }

  static std::string list(const std::map<int64_t, std::pair<int32_t, uint32_t>>& bs) {
    std::string out;
    for (const auto& [base, e] : bs) out += std::to_string(base) + "@" + std::to_string(e.first) + " ";
    return out;
  }

  // A replica's batches below `upper`: base offset -> (leader epoch, CRC).
  static std::map<int64_t, std::pair<int32_t, uint32_t>> batches(cluster::partition& part, offset upper) {
    std::map<int64_t, std::pair<int32_t, uint32_t>> out;
    for (const auto& h : headers(part, upper)) out[h.base_offset.value()] = {h.partition_leader_epoch, h.crc};
    return out;
  }

  // The headers of a replica's batches below `upper`, in offset order.
  static std::vector<model::batch::header> headers(cluster::partition& part, offset upper) {
    std::vector<model::batch::header> out;
    offset at = part.log_start_offset();
    while (at < upper) {
      auto bytes = part.read_bytes(at, 1 << 20, upper);
      if (!bytes.ok() || bytes->size() < model::batch::header_bytes) break;
      size_t pos = 0;
      while (pos + model::batch::header_bytes <= bytes->size()) {
        const auto h = model::batch::parse(bytes->data() + pos);
        if (h.base_offset >= upper) break;
        out.push_back(h);
        at = h.last_offset() + 1;
        pos += h.size_bytes();
      }
    }
    return out;
  }

  manual_clock clk_;
  const bool trace_ = env_int("SLUICE_SIM_TRACE", 0) != 0;
  int steps_ = 0;
  std::mt19937_64 rng_;
  const std::string dir_;
  std::vector<std::unique_ptr<broker>> brokers_;
  int64_t next_broker_epoch_ = 100;
  int crashes_ = 0;
  int delays_ = 0;
  bool settling_ = false;
  std::vector<std::pair<int32_t, int32_t>> in_flight_;  // (from, to) of the messages held, outermost first
  std::set<std::pair<int32_t, int32_t>> cuts_;
  std::map<int32_t, partition_state> state_;
  std::vector<std::pair<int32_t, cluster::isr_request>> isr_requests_;  // (asking broker, request)
  std::map<int32_t, std::map<int64_t, uint32_t>> acked_;  // partition -> base -> CRC
  std::map<std::pair<int32_t, int32_t>, int64_t> hw_seen_;
  uint32_t produced_ = 0;
  std::vector<producer> producers_;
  int32_t correlation_ = 0;
  int attempts_ = 0;  // producers' attempts, numbered across all batches
  int idempotent_acks_ = 0;
};

bool sim_link::trace() const { return sim_.tracing(); }

template <class Resp, class Req>
result<Resp> sim_link::call(const Req& req, int16_t version) {
  if (!sim_.reaches(from_, to_, to_incarnation_)) return error{errc::unavailable, "cut"};
  auto frame = request_frame(++correlation_, version, req, "sim-" + std::to_string(from_));
  if (!frame.ok()) return frame.err();
  sim_.maybe_hold(from_, to_, "request");
  if (!sim_.reaches(from_, to_, to_incarnation_)) return error{errc::unavailable, "cut while the request was held"};
  std::optional<net::response> answer;
  net::connection_context ctx;
  ctx.id = static_cast<uint64_t>(from_);
  ctx.peer = "b" + std::to_string(from_);
  sim_.at(to_).dispatch->on_request(
      ctx, std::move(*frame), net::responder::to_function([&](net::responder::outcome o, net::response r) {
        if (o == net::responder::outcome::responded) answer = std::move(r);
      }));
  if (!answer) return error{errc::unavailable, "no answer in the same step"};
  // The answer's bytes as they left the leader (its file regions read now:
  // the leader's log may change while the answer is held).
  auto bytes = flatten(*answer);
  if (!bytes.ok()) return bytes.err();
  answer.reset();
  sim_.maybe_hold(from_, to_, "answer");
  if (!sim_.reaches(from_, to_, to_incarnation_)) return error{errc::unavailable, "cut while the answer was held"};
  answer_ = std::move(*bytes);
  return protocol::decode_response<Resp>(std::span<const uint8_t>(answer_.data(), answer_.size()), version,
                                         correlation_);
}

// A directory for one seed's brokers, removed with it: on tmpfs when there
// is one (SLUICE_SIM_DIR, else /dev/shm), where the many files a run
// creates and removes cost a quarter of what they cost on ext4.
class sim_dir {
 public:
  sim_dir() {
    std::string base = std::getenv("SLUICE_SIM_DIR") ? std::getenv("SLUICE_SIM_DIR") : "/dev/shm";
    std::error_code ec;
    if (!std::filesystem::is_directory(base, ec) || ::access(base.c_str(), W_OK) != 0)
      base = std::filesystem::temp_directory_path().string();
    std::string tmpl = base + "/sluice-sim-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) std::abort();
    path_ = tmpl;
  }
  ~sim_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(ClusterSimulation, ReplicationKeepsEveryAcknowledgedBatchAndReplicasAgree) {
  const int64_t first = env_int("SLUICE_SIM_FIRST_SEED", 1);
  const int64_t seeds = env_int("SLUICE_SIM_SEEDS", 1500);
  const int steps = static_cast<int>(env_int("SLUICE_SIM_STEPS", 1500));
  size_t acked = 0;
  int crashes = 0, delays = 0, idempotent = 0;
  for (int64_t seed = first; seed < first + seeds; ++seed) {
    sim_dir tmp;
    simulation sim(static_cast<uint64_t>(seed), tmp.path());
    for (int i = 0; i < steps && !::testing::Test::HasFatalFailure(); ++i) sim.step();
    ASSERT_FALSE(::testing::Test::HasFatalFailure()) << "seed " << seed;
    ASSERT_TRUE(sim.settle()) << "seed " << seed << ": the replicas never agreed after every link healed\n"
                              << sim.describe();
    sim.check_history(static_cast<uint64_t>(seed));
    sim.check_producers(static_cast<uint64_t>(seed));
    ASSERT_FALSE(::testing::Test::HasFailure()) << "replay: SLUICE_SIM_FIRST_SEED=" << seed << " SLUICE_SIM_SEEDS=1";
    acked += sim.acknowledged();
    crashes += sim.crashes();
    delays += sim.delays();
    idempotent += sim.idempotent_acks();
  }
  EXPECT_GT(acked, 0u);
  EXPECT_GT(crashes, 0);
  EXPECT_GT(delays, 0);
  EXPECT_GT(idempotent, 0);
  std::printf(
      "simulated %lld seeds of %d steps: %zu batches acknowledged (%d from idempotent producers), %d crashes, %d "
      "messages held\n",
      static_cast<long long>(seeds), steps, acked, idempotent, crashes, delays);
}

}  // namespace
}  // namespace sluice::sim
