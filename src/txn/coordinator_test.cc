#include "txn/coordinator.h"

#include <map>
#include <memory>

#include <gtest/gtest.h>

#include "base/clock.h"

namespace sluice::txn {
namespace {

using s = txn_state;

constexpr int16_t init_v = 5;  // InitProducerId, newest
constexpr int16_t add_v1 = 3;  // AddPartitionsToTxn from a client
constexpr int16_t end_v1 = 4;  // EndTxn, transaction version 0/1
constexpr int16_t end_v2 = 5;  // EndTxn, transaction version 2

// A coordinator over an in-memory __transaction_state: commit() appends a
// write to its partition's log and reports it durable, reload() builds a
// new coordinator from the logs (a restart or a failover), so every test
// can check that replay rebuilds what the live coordinator held.
class TxnCoordinatorTest : public ::testing::Test {
 protected:
  struct record {
    std::vector<uint8_t> key;
    std::optional<std::vector<uint8_t>> value;
  };

  void SetUp() override { reload(); }

  void reload(int32_t coordinator_epoch = 0) {
    c_ = std::make_unique<coordinator>(cfg_, clk_, [this]() -> result<int64_t> {
      if (pid_error_) return error{*pid_error_, "no producer id"};
      return next_pid_++;
    });
    loaded_markers_.clear();
    for (int32_t p = 0; p < cfg_.num_partitions; ++p) {
      c_->begin_load(p, coordinator_epoch);
      for (const auto& r : log_[p]) {
        std::optional<std::span<const uint8_t>> v;
        if (r.value) v = std::span<const uint8_t>(*r.value);
        ASSERT_TRUE(c_->replay(p, r.key, v).ok());
      }
      for (auto& m : c_->finish_load(p)) loaded_markers_.push_back(std::move(m));
    }
  }

  write_done commit(const write& w) {
    log_[w.ref.partition].push_back({w.key, w.value});
    return c_->written(w.ref);
  }

  // Runs a decision to its answer, committing its write if it has one.
  answer run(decision d) {
    last_markers_.reset();
    if (!d.to_write) return d.now;
    auto done = commit(*d.to_write);
    last_markers_ = done.to_send;
    return done.reply;
  }

  answer init(const std::string& id, int64_t pid = -1, int16_t epoch = -1, int16_t version = init_v,
              int32_t timeout_ms = 60'000) {
    return run(c_->init_producer_id({id, timeout_ms, pid, epoch, version}));
  }
  answer add(const std::string& id, int64_t pid, int16_t epoch, partition_set parts, int16_t version = add_v1) {
    return run(c_->add_partitions({id, pid, epoch, std::move(parts), version}));
  }
  answer end(const std::string& id, int64_t pid, int16_t epoch, bool commit, int16_t version = end_v1) {
    return run(c_->end_txn({id, pid, epoch, commit, version}));
  }
  // Writes the completion record of `m` (every marker written).
  void complete(const markers& m) {
    auto w = c_->markers_written(m);
    ASSERT_TRUE(w.ok()) << errc_name(w.code());
    auto done = commit(*w);
    EXPECT_EQ(done.reply.error, errc::ok);
  }
  // Completes the markers the last request returned.
  void complete_last() {
    ASSERT_TRUE(last_markers_.has_value());
    const markers m = *last_markers_;
    complete(m);
  }
  const txn_log_value& state_of(const std::string& id) {
    const txn_metadata* md = c_->find(id);
    EXPECT_NE(md, nullptr) << id;
    static const txn_log_value none;
    return md ? md->durable() : none;
  }
  // Checks that a coordinator rebuilt from the logs holds what this one
  // holds for `id`.
  void expect_replay_matches(const std::string& id) {
    const txn_log_value live = state_of(id);
    reload();
    EXPECT_EQ(state_of(id), live) << "after replay of " << id;
  }
  // An id with an open transaction on partition t-0 (transaction version
  // 0/1 unless `v2`); returns its producer id and epoch.
  std::pair<int64_t, int16_t> open(const std::string& id, bool v2 = false) {
    answer a = init(id);
    EXPECT_EQ(a.error, errc::ok);
    EXPECT_EQ(add(id, a.producer_id, a.producer_epoch, {{"t", 0}}, v2 ? 5 : add_v1).error, errc::ok);
    return {a.producer_id, a.producer_epoch};
  }
  // Writes a record straight into the log (a state reached on another
  // coordinator), then reloads.
  void seed(const std::string& id, const txn_log_value& v) {
    log_[partition_for(id, cfg_.num_partitions)].push_back({encode_key(id), encode_value(v)});
    reload();
  }

  coordinator_config cfg_;
  manual_clock clk_{1'700'000'000'000};
  int64_t next_pid_ = 1000;
  std::optional<errc> pid_error_;
  std::map<int32_t, std::vector<record>> log_;
  std::unique_ptr<coordinator> c_;
  std::optional<markers> last_markers_;
  std::vector<markers> loaded_markers_;
};

// ---- InitProducerId -------------------------------------------------------------------

TEST_F(TxnCoordinatorTest, NewIdGetsANewProducerIdAtEpochZero) {
  answer a = init("tx");
  EXPECT_EQ(a, (answer{errc::ok, 1000, 0}));
  EXPECT_EQ(state_of("tx").state, s::empty);
  EXPECT_EQ(state_of("tx").timeout_ms, 60'000);
  EXPECT_EQ(log_[partition_for("tx", 50)].size(), 1u);
  EXPECT_EQ(c_->id_count(), 1u);
  expect_replay_matches("tx");
}

TEST_F(TxnCoordinatorTest, InitAgainBumpsTheEpochAndFencesTheOldProducer) {
  answer first = init("tx");
  answer second = init("tx");
  EXPECT_EQ(second, (answer{errc::ok, first.producer_id, 1}));
  // The zombie at epoch 0 is refused everywhere, with the code its
  // request version knows.
  EXPECT_EQ(add("tx", first.producer_id, 0, {{"t", 0}}).error, errc::producer_fenced);
  EXPECT_EQ(add("tx", first.producer_id, 0, {{"t", 0}}, 1).error, errc::invalid_producer_epoch);
  EXPECT_EQ(end("tx", first.producer_id, 0, true).error, errc::producer_fenced);
  EXPECT_EQ(end("tx", first.producer_id, 0, true, 1).error, errc::invalid_producer_epoch);
  EXPECT_EQ(run(c_->add_offsets({"tx", first.producer_id, 0, {"__consumer_offsets", 3}, 1})).error,
            errc::invalid_producer_epoch);
  EXPECT_EQ(c_->verify_partitions("tx", first.producer_id, 0, {{"t", 0}}).error, errc::producer_fenced);
  // The new producer works.
  EXPECT_EQ(add("tx", first.producer_id, 1, {{"t", 0}}).error, errc::ok);
  expect_replay_matches("tx");
}

TEST_F(TxnCoordinatorTest, InitRefusesBadInput) {
  EXPECT_EQ(init("").error, errc::invalid_argument);
  EXPECT_EQ(init(std::string(limits::max_transactional_id_bytes + 1, 'x')).error, errc::policy_violation);
  EXPECT_EQ(init("tx", -1, -1, init_v, 0).error, errc::invalid_transaction_timeout);
  EXPECT_EQ(init("tx", -1, -1, init_v, -5).error, errc::invalid_transaction_timeout);
  EXPECT_EQ(init("tx", -1, -1, init_v, cfg_.max_timeout_ms + 1).error, errc::invalid_transaction_timeout);
  EXPECT_EQ(init("tx", -1, -1, init_v, cfg_.max_timeout_ms).error, errc::ok);
  EXPECT_EQ(init("tx", 1000, -1).error, errc::invalid_argument);
  EXPECT_EQ(init("tx", -1, 0).error, errc::invalid_argument);
  // The producer id source's error is the answer.
  pid_error_ = errc::coordinator_load_in_progress;
  EXPECT_EQ(init("other").error, errc::coordinator_load_in_progress);
  EXPECT_EQ(c_->find("other"), nullptr);
}

TEST_F(TxnCoordinatorTest, NewIdsStopAtTheLimit) {
  for (size_t i = 0; i < limits::max_transactional_ids; ++i) {
    decision d = c_->init_producer_id({"id-" + std::to_string(i), 1000, -1, -1, init_v});
    ASSERT_TRUE(d.to_write.has_value()) << i;
    ASSERT_EQ(c_->written(d.to_write->ref).reply.error, errc::ok);
  }
  EXPECT_EQ(c_->id_count(), limits::max_transactional_ids);
  EXPECT_EQ(init("one-more").error, errc::policy_violation);
  EXPECT_EQ(c_->find("one-more"), nullptr);
  // Ids already held are served as usual.
  EXPECT_EQ(init("id-7").producer_epoch, 1);
}

TEST_F(TxnCoordinatorTest, RequestsForPartitionsNotServedHere) {
  const int32_t p = partition_for("tx", 50);
  c_->unload(p);
  EXPECT_EQ(init("tx").error, errc::not_coordinator);
  EXPECT_EQ(c_->describe("tx").error, errc::not_coordinator);
  c_->begin_load(p, 1);
  EXPECT_EQ(init("tx").error, errc::coordinator_load_in_progress);
  EXPECT_EQ(add("tx", 1, 0, {{"t", 0}}).error, errc::coordinator_load_in_progress);
  EXPECT_EQ(end("tx", 1, 0, true).error, errc::coordinator_load_in_progress);
  EXPECT_EQ(c_->describe("tx").error, errc::coordinator_load_in_progress);
  EXPECT_EQ(c_->list({}).error, errc::coordinator_load_in_progress);
  EXPECT_TRUE(c_->finish_load(p).empty());
  EXPECT_EQ(init("tx").error, errc::ok);
}

TEST_F(TxnCoordinatorTest, ExhaustedEpochRotatesTheProducerId) {
  txn_log_value v;
  v.producer_id = 77;
  v.producer_epoch = max_producer_epoch - 1;
  v.timeout_ms = 1000;
  v.state = s::complete_commit;
  seed("tx", v);
  answer a = init("tx");
  EXPECT_EQ(a, (answer{errc::ok, 1000, 0}));
  EXPECT_EQ(state_of("tx").previous_producer_id, 77);
  EXPECT_EQ(state_of("tx").last_producer_epoch, no_producer_epoch);
  expect_replay_matches("tx");
}

TEST_F(TxnCoordinatorTest, Kip360RotationRetryAfterALostAnswer) {
  txn_log_value v;
  v.producer_id = 77;
  v.producer_epoch = max_producer_epoch - 1;
  v.timeout_ms = 1000;
  v.state = s::complete_abort;
  seed("tx", v);
  // The producer recovers with its exhausted epoch: a new id, the old epoch kept.
  answer a = init("tx", 77, max_producer_epoch - 1);
  EXPECT_EQ(a, (answer{errc::ok, 1000, 0}));
  EXPECT_EQ(state_of("tx").last_producer_epoch, max_producer_epoch - 1);
  // Its answer was lost; the retry names the old id and gets the same answer,
  // after a failover too.
  reload(1);
  EXPECT_EQ(init("tx", 77, max_producer_epoch - 1), (answer{errc::ok, 1000, 0}));
  // The old id with an epoch that is not exhausted is a zombie.
  EXPECT_EQ(init("tx", 77, 5).error, errc::producer_fenced);
  EXPECT_EQ(init("tx", 77, 5, 3).error, errc::invalid_producer_epoch);
}

TEST_F(TxnCoordinatorTest, Kip360RecoveryBumpsTheEpoch) {
  auto [pid, epoch] = open("tx");
  // An abortable error: the producer aborts, then recovers with its id.
  EXPECT_EQ(end("tx", pid, epoch, false).error, errc::ok);
  ASSERT_TRUE(last_markers_.has_value());
  complete_last();
  answer a = init("tx", pid, epoch);
  EXPECT_EQ(a, (answer{errc::ok, pid, static_cast<int16_t>(epoch + 1)}));
  EXPECT_EQ(state_of("tx").last_producer_epoch, epoch);
  // The answer was lost: the retry gets the same epoch, unbumped, also after
  // a coordinator failover.
  reload(1);
  EXPECT_EQ(init("tx", pid, epoch), a);
  // A stale epoch is fenced, with the code the request version knows.
  EXPECT_EQ(init("tx", pid, static_cast<int16_t>(epoch + 7)).error, errc::producer_fenced);
  EXPECT_EQ(init("tx", pid, static_cast<int16_t>(epoch + 7), 3).error, errc::invalid_producer_epoch);
  // An id that was never this transactional id's.
  EXPECT_EQ(init("tx", pid + 50, 0).error, errc::producer_fenced);
  // A plain InitProducerId (another instance) forgets the last epoch: the
  // old producer's retry is fenced now.
  EXPECT_EQ(init("tx").producer_epoch, epoch + 2);
  EXPECT_EQ(init("tx", pid, epoch).error, errc::producer_fenced);
  expect_replay_matches("tx");
}

TEST_F(TxnCoordinatorTest, InitOnAnOpenTransactionAbortsItFirst) {
  auto [pid, epoch] = open("tx");
  // The new instance is told to retry while the old transaction aborts.
  answer a = init("tx");
  EXPECT_EQ(a.error, errc::concurrent_transactions);
  ASSERT_TRUE(last_markers_.has_value());
  const markers m = *last_markers_;
  EXPECT_EQ(m.type, marker_type::abort);
  EXPECT_EQ(m.producer_id, pid);
  EXPECT_GT(m.producer_epoch, epoch);  // the zombie is fenced by the markers
  EXPECT_EQ(m.partitions, (std::vector<topic_partition>{{"t", 0}}));
  EXPECT_EQ(state_of("tx").state, s::prepare_abort);
  // Until the markers are written every request waits.
  EXPECT_EQ(init("tx").error, errc::concurrent_transactions);
  // (The pending check comes before the epoch check, as Kafka 4 orders them.)
  EXPECT_EQ(add("tx", pid, epoch, {{"t", 1}}).error, errc::concurrent_transactions);
  EXPECT_EQ(end("tx", pid, m.producer_epoch, false).error, errc::concurrent_transactions);
  complete(m);
  EXPECT_EQ(state_of("tx").state, s::complete_abort);
  answer b = init("tx");
  EXPECT_EQ(b.error, errc::ok);
  EXPECT_EQ(b.producer_id, pid);
  EXPECT_EQ(b.producer_epoch, m.producer_epoch + 1);
  expect_replay_matches("tx");
}

TEST_F(TxnCoordinatorTest, InitOnAnOpenTransactionWithVersion1FencesAtTheBumpedEpoch) {
  cfg_.server_version = txn_version::tv0;
  reload();
  auto [pid, epoch] = open("tx");
  EXPECT_EQ(init("tx").error, errc::concurrent_transactions);
  ASSERT_TRUE(last_markers_.has_value());
  EXPECT_EQ(last_markers_->producer_epoch, epoch + 1);
  complete_last();
  EXPECT_EQ(init("tx").producer_epoch, epoch + 2);
}

TEST_F(TxnCoordinatorTest, Kip360RecoveryOfAnIdThisCoordinatorDoesNotKnow) {
  // The id expired (or was never here): the producer's old id and epoch
  // are accepted and it gets a new producer id at epoch 0.
  answer a = init("tx", 4242, 17);
  EXPECT_EQ(a, (answer{errc::ok, 1000, 0}));
  EXPECT_EQ(state_of("tx").last_producer_epoch, no_producer_epoch);
}

TEST_F(TxnCoordinatorTest, FenceAtTheLastUsableEpochEndsInARotation) {
  txn_log_value v;
  v.producer_id = 77;
  v.producer_epoch = max_producer_epoch - 1;
  v.timeout_ms = 60'000;
  v.state = s::ongoing;
  v.partitions = {{"t", 0}};
  v.start_ms = clk_.now_ms();
  seed("tx", v);
  // The fence takes the largest epoch; no client is ever given it.
  EXPECT_EQ(init("tx").error, errc::concurrent_transactions);
  ASSERT_TRUE(last_markers_.has_value());
  EXPECT_EQ(last_markers_->producer_epoch, max_producer_epoch);
  complete_last();
  EXPECT_EQ(state_of("tx").producer_epoch, max_producer_epoch);
  // The retry finds the epoch exhausted and moves to a new producer id.
  EXPECT_EQ(init("tx"), (answer{errc::ok, 1000, 0}));
  // A request claiming the largest epoch cannot push it past the end.
  EXPECT_EQ(add("tx", 1000, 0, {{"t", 0}}, 5).error, errc::ok);
  v.producer_id = 1000;
  v.producer_epoch = max_producer_epoch;
  v.client_version = txn_version::tv2;
  seed("tx", v);
  EXPECT_EQ(end("tx", 1000, max_producer_epoch, false, end_v2), (answer{errc::ok, 1001, 0}));
  ASSERT_TRUE(last_markers_.has_value());
  EXPECT_EQ(last_markers_->producer_epoch, max_producer_epoch);
  complete_last();
  EXPECT_EQ(state_of("tx").producer_id, 1001);
  EXPECT_EQ(state_of("tx").producer_epoch, 0);
}

TEST_F(TxnCoordinatorTest, VerifyAndAddWhileLoading) {
  c_->begin_load(partition_for("tx", 50), 2);
  EXPECT_EQ(c_->verify_partitions("tx", 1, 0, {{"t", 0}}).error, errc::coordinator_load_in_progress);
  EXPECT_EQ(run(c_->add_offsets({"tx", 1, 0, {"__consumer_offsets", 1}, 3})).error,
            errc::coordinator_load_in_progress);
  c_->unload(partition_for("tx", 50));
  EXPECT_EQ(c_->verify_partitions("tx", 1, 0, {{"t", 0}}).partitions.at({"t", 0}), errc::not_coordinator);
}

// ---- AddPartitionsToTxn, AddOffsetsToTxn, verification -----------------------------------

TEST_F(TxnCoordinatorTest, AddPartitionsErrors) {
  EXPECT_EQ(add("nobody", 1, 0, {{"t", 0}}).error, errc::invalid_producer_id_mapping);
  EXPECT_EQ(add("", 1, 0, {{"t", 0}}).error, errc::invalid_argument);
  answer a = init("tx");
  EXPECT_EQ(add("tx", a.producer_id + 1, 0, {{"t", 0}}).error, errc::invalid_producer_id_mapping);
  EXPECT_EQ(add("tx", a.producer_id, 3, {{"t", 0}}).error, errc::producer_fenced);
  // One write in flight per id.
  decision d = c_->add_partitions({"tx", a.producer_id, 0, {{"t", 0}}, add_v1});
  ASSERT_TRUE(d.to_write.has_value());
  EXPECT_EQ(add("tx", a.producer_id, 0, {{"t", 1}}).error, errc::concurrent_transactions);
  EXPECT_EQ(end("tx", a.producer_id, 0, true).error, errc::concurrent_transactions);
  EXPECT_EQ(init("tx").error, errc::concurrent_transactions);
  EXPECT_EQ(commit(*d.to_write).reply.error, errc::ok);
  // Partitions already in the transaction: answered at once, nothing written.
  const size_t records = log_[partition_for("tx", 50)].size();
  decision again = c_->add_partitions({"tx", a.producer_id, 0, {{"t", 0}}, add_v1});
  EXPECT_FALSE(again.to_write.has_value());
  EXPECT_EQ(again.now.error, errc::ok);
  EXPECT_EQ(log_[partition_for("tx", 50)].size(), records);
  // Too many partitions for one transaction.
  partition_set many;
  for (int32_t i = 0; i < static_cast<int32_t>(limits::max_partitions_per_transaction); ++i) many.insert({"m", i});
  EXPECT_EQ(add("tx", a.producer_id, 0, many).error, errc::policy_violation);
  many.erase(many.begin());
  EXPECT_EQ(add("tx", a.producer_id, 0, many).error, errc::ok);  // with t-0: exactly the limit
  EXPECT_EQ(state_of("tx").partitions.size(), limits::max_partitions_per_transaction);
  expect_replay_matches("tx");
}

TEST_F(TxnCoordinatorTest, AddPartitionsGrowsTheTransactionAndStartsTheClockOnce) {
  answer a = init("tx");
  const int64_t t0 = clk_.now_ms();
  EXPECT_EQ(add("tx", a.producer_id, 0, {{"t", 0}}).error, errc::ok);
  clk_.advance_ms(500);
  EXPECT_EQ(add("tx", a.producer_id, 0, {{"t", 1}, {"u", 0}}).error, errc::ok);
  EXPECT_EQ(run(c_->add_offsets({"tx", a.producer_id, 0, {"__consumer_offsets", 9}, 3})).error, errc::ok);
  const auto& v = state_of("tx");
  EXPECT_EQ(v.state, s::ongoing);
  EXPECT_EQ(v.start_ms, t0);
  EXPECT_EQ(v.last_update_ms, t0 + 500);
  EXPECT_EQ(v.partitions, (partition_set{{"__consumer_offsets", 9}, {"t", 0}, {"t", 1}, {"u", 0}}));
  expect_replay_matches("tx");
}

TEST_F(TxnCoordinatorTest, AddPartitionsFromABrokerIsVersion2) {
  answer a = init("tx");
  EXPECT_EQ(add("tx", a.producer_id, 0, {{"t", 0}}, 5).error, errc::ok);
  EXPECT_EQ(state_of("tx").client_version, txn_version::tv2);
  EXPECT_EQ(add("tx", a.producer_id, 0, {{"t", 1}}, 3).error, errc::ok);
  EXPECT_EQ(state_of("tx").client_version, txn_version::tv0);
}

TEST_F(TxnCoordinatorTest, VerifyOnlyChecksMembershipAtTheEpoch) {
  auto [pid, epoch] = open("tx");
  auto v = c_->verify_partitions("tx", pid, epoch, {{"t", 0}, {"t", 9}});
  EXPECT_EQ(v.error, errc::ok);
  EXPECT_EQ(v.partitions.at({"t", 0}), errc::ok);
  EXPECT_EQ(v.partitions.at({"t", 9}), errc::transaction_abortable);
  EXPECT_EQ(c_->verify_partitions("tx", pid, static_cast<int16_t>(epoch + 1), {{"t", 0}}).partitions.at({"t", 0}),
            errc::producer_fenced);
  EXPECT_EQ(c_->verify_partitions("tx", pid + 1, epoch, {{"t", 0}}).error, errc::invalid_producer_id_mapping);
  EXPECT_EQ(c_->verify_partitions("nobody", pid, epoch, {{"t", 0}}).error, errc::invalid_producer_id_mapping);
  EXPECT_EQ(c_->verify_partitions("", pid, epoch, {{"t", 0}}).error, errc::invalid_argument);
  // Nothing is written by a verification.
  const size_t records = log_[partition_for("tx", 50)].size();
  (void)c_->verify_partitions("tx", pid, epoch, {{"t", 0}});
  EXPECT_EQ(log_[partition_for("tx", 50)].size(), records);
  // While the transaction ends: concurrent.
  decision d = c_->end_txn({"tx", pid, epoch, true, end_v1});
  ASSERT_TRUE(d.to_write.has_value());
  commit(*d.to_write);
  EXPECT_EQ(c_->verify_partitions("tx", pid, epoch, {{"t", 0}}).error, errc::concurrent_transactions);
}

// ---- EndTxn, transaction version 0/1 --------------------------------------------------------

TEST_F(TxnCoordinatorTest, CommitWritesPrepareThenMarkersThenComplete) {
  auto [pid, epoch] = open("tx");
  EXPECT_EQ(add("tx", pid, epoch, {{"u", 2}}).error, errc::ok);
  answer a = end("tx", pid, epoch, true);
  EXPECT_EQ(a, (answer{errc::ok, -1, -1}));
  EXPECT_EQ(state_of("tx").state, s::prepare_commit);
  ASSERT_TRUE(last_markers_.has_value());
  const markers m = *last_markers_;
  EXPECT_EQ(m.transactional_id, "tx");
  EXPECT_EQ(m.type, marker_type::commit);
  EXPECT_EQ(m.producer_id, pid);
  EXPECT_EQ(m.producer_epoch, epoch);
  EXPECT_EQ(m.coordinator_epoch, 0);
  EXPECT_EQ(m.partitions, (std::vector<topic_partition>{{"t", 0}, {"u", 2}}));
  // Markers in flight: the id is busy; a retried commit waits, an abort is refused.
  EXPECT_EQ(end("tx", pid, epoch, true).error, errc::concurrent_transactions);
  EXPECT_EQ(end("tx", pid, epoch, false).error, errc::concurrent_transactions);
  EXPECT_EQ(add("tx", pid, epoch, {{"t", 0}}).error, errc::concurrent_transactions);
  EXPECT_EQ(c_->describe("tx").state, s::prepare_commit);
  complete(m);
  EXPECT_EQ(state_of("tx").state, s::complete_commit);
  EXPECT_TRUE(state_of("tx").partitions.empty());
  // A retried commit of a completed commit succeeds; an abort of it does not.
  EXPECT_EQ(end("tx", pid, epoch, true).error, errc::ok);
  EXPECT_EQ(end("tx", pid, epoch, false).error, errc::invalid_txn_state);
  // The next transaction at the same epoch.
  EXPECT_EQ(add("tx", pid, epoch, {{"t", 5}}).error, errc::ok);
  EXPECT_EQ(end("tx", pid, epoch, false).error, errc::ok);
  complete_last();
  EXPECT_EQ(state_of("tx").state, s::complete_abort);
  EXPECT_EQ(end("tx", pid, epoch, false).error, errc::ok);
  EXPECT_EQ(end("tx", pid, epoch, true).error, errc::invalid_txn_state);
  expect_replay_matches("tx");
}

TEST_F(TxnCoordinatorTest, EndTxnErrorsVersion1) {
  answer a = init("tx");
  EXPECT_EQ(end("tx", a.producer_id, 0, true).error, errc::invalid_txn_state);  // Empty
  EXPECT_EQ(end("tx", a.producer_id, 0, false).error, errc::invalid_txn_state);
  EXPECT_EQ(end("nobody", a.producer_id, 0, true).error, errc::invalid_producer_id_mapping);
  EXPECT_EQ(end("", a.producer_id, 0, true).error, errc::invalid_argument);
  EXPECT_EQ(end("tx", a.producer_id + 1, 0, true).error, errc::invalid_producer_id_mapping);
  EXPECT_EQ(add("tx", a.producer_id, 0, {{"t", 0}}).error, errc::ok);
  // A higher epoch is fenced too: a client's EndTxn never bumps.
  EXPECT_EQ(end("tx", a.producer_id, 1, true).error, errc::producer_fenced);
  // While the abort's markers are written every end waits, whatever its
  // outcome: the pending completion is checked before the state.
  EXPECT_EQ(end("tx", a.producer_id, 0, false).error, errc::ok);
  EXPECT_EQ(end("tx", a.producer_id, 0, true).error, errc::concurrent_transactions);
}

TEST_F(TxnCoordinatorTest, LoadedPrepareStateWaitsForItsMarkers) {
  // A coordinator that loaded a PrepareCommit holds its completion pending
  // until the markers are written: requests see CONCURRENT_TRANSACTIONS.
  txn_log_value v;
  v.producer_id = 5;
  v.producer_epoch = 3;
  v.timeout_ms = 1000;
  v.state = s::prepare_commit;
  v.partitions = {{"t", 0}};
  v.start_ms = clk_.now_ms();
  seed("tx", v);
  ASSERT_EQ(loaded_markers_.size(), 1u);
  EXPECT_EQ(end("tx", 5, 3, true).error, errc::concurrent_transactions);
  EXPECT_EQ(end("tx", 5, 3, false).error, errc::concurrent_transactions);
  EXPECT_EQ(init("tx").error, errc::concurrent_transactions);
}

// The late-EndTxn hazard under transaction versions 0 and 1: a late EndTxn of
// an earlier transaction carries the same producer id and epoch as the open
// one and cannot be told from it. Kafka 4 commits the open transaction; so
// does this coordinator. Version 2 (below) refuses it.
TEST_F(TxnCoordinatorTest, Version1CannotTellALateEndTxnFromTheCurrentOne) {
  auto [pid, epoch] = open("tx");
  EXPECT_EQ(end("tx", pid, epoch, true).error, errc::ok);
  complete_last();
  EXPECT_EQ(add("tx", pid, epoch, {{"t", 1}}).error, errc::ok);
  // The first EndTxn's duplicate, delayed in the network, arrives now.
  EXPECT_EQ(end("tx", pid, epoch, true).error, errc::ok);
  EXPECT_EQ(state_of("tx").state, s::prepare_commit);
}

// ---- EndTxn, transaction version 2 (KIP-890 part 2) ---------------------------------------

TEST_F(TxnCoordinatorTest, Version2BumpsTheEpochAtEveryEnd) {
  auto [pid, epoch] = open("tx", true);
  answer a = end("tx", pid, epoch, true, end_v2);
  EXPECT_EQ(a, (answer{errc::ok, pid, static_cast<int16_t>(epoch + 1)}));
  ASSERT_TRUE(last_markers_.has_value());
  EXPECT_EQ(last_markers_->producer_epoch, epoch + 1);  // markers at the bumped epoch fence the old one
  EXPECT_EQ(last_markers_->version, txn_version::tv2);
  const markers m = *last_markers_;
  // A retry while the markers are written waits.
  EXPECT_EQ(end("tx", pid, epoch, true, end_v2).error, errc::concurrent_transactions);
  complete(m);
  EXPECT_EQ(state_of("tx").producer_epoch, epoch + 1);
  EXPECT_EQ(state_of("tx").last_producer_epoch, epoch);
  // A retry of the commit (the epoch before the bump): success with the
  // epoch to use next; as an abort: INVALID_TXN_STATE.
  EXPECT_EQ(end("tx", pid, epoch, true, end_v2), a);
  EXPECT_EQ(end("tx", pid, epoch, false, end_v2).error, errc::invalid_txn_state);
  // A commit at the current epoch with nothing open: INVALID_TXN_STATE; an
  // abort: allowed (the client is unsure), bumping again, no markers.
  const int16_t cur = static_cast<int16_t>(epoch + 1);
  EXPECT_EQ(end("tx", pid, cur, true, end_v2).error, errc::invalid_txn_state);
  answer b = end("tx", pid, cur, false, end_v2);
  EXPECT_EQ(b, (answer{errc::ok, pid, static_cast<int16_t>(cur + 1)}));
  ASSERT_TRUE(last_markers_.has_value());
  EXPECT_TRUE(last_markers_->partitions.empty());
  complete_last();
  EXPECT_EQ(state_of("tx").state, s::complete_abort);
  // A retried abort answers the same; an epoch older than the retry is fenced.
  EXPECT_EQ(end("tx", pid, cur, false, end_v2), b);
  EXPECT_EQ(end("tx", pid, epoch, false, end_v2).error, errc::producer_fenced);
  expect_replay_matches("tx");
}

TEST_F(TxnCoordinatorTest, Version2AbortFromEmpty) {
  answer a = init("tx");
  EXPECT_EQ(end("tx", a.producer_id, 0, true, end_v2).error, errc::invalid_txn_state);
  EXPECT_EQ(end("tx", a.producer_id, 1, false, end_v2).error, errc::producer_fenced);
  EXPECT_EQ(end("tx", a.producer_id, 0, false, end_v2), (answer{errc::ok, a.producer_id, 1}));
  EXPECT_EQ(state_of("tx").state, s::prepare_abort);
  EXPECT_EQ(state_of("tx").start_ms, clk_.now_ms());
}

TEST_F(TxnCoordinatorTest, Version2RefusesALateEndTxnOfAnEarlierTransaction) {
  auto [pid, epoch] = open("tx", true);
  EXPECT_EQ(end("tx", pid, epoch, false, end_v2).error, errc::ok);  // the first transaction aborts
  complete_last();
  const int16_t next = static_cast<int16_t>(epoch + 1);
  EXPECT_EQ(add("tx", pid, next, {{"t", 1}}, 5).error, errc::ok);  // the second transaction is open
  // The first transaction's EndTxn (commit or abort), delayed, arrives now:
  // its epoch is the old one, so it cannot end the open transaction.
  EXPECT_EQ(end("tx", pid, epoch, true, end_v2).error, errc::producer_fenced);
  EXPECT_EQ(end("tx", pid, epoch, false, end_v2).error, errc::producer_fenced);
  EXPECT_EQ(state_of("tx").state, s::ongoing);
  EXPECT_EQ(state_of("tx").partitions, (partition_set{{"t", 1}}));
  EXPECT_EQ(end("tx", pid, next, true, end_v2).error, errc::ok);
}

TEST_F(TxnCoordinatorTest, Version2EpochOverflowMovesToANewProducerId) {
  txn_log_value v;
  v.producer_id = 77;
  v.producer_epoch = max_producer_epoch - 1;
  v.timeout_ms = 60'000;
  v.state = s::ongoing;
  v.partitions = {{"t", 0}};
  v.start_ms = clk_.now_ms();
  v.client_version = txn_version::tv2;
  seed("tx", v);
  answer a = end("tx", 77, max_producer_epoch - 1, true, end_v2);
  // The producer is told its next id at epoch 0, never the last epoch.
  EXPECT_EQ(a, (answer{errc::ok, 1000, 0}));
  ASSERT_TRUE(last_markers_.has_value());
  EXPECT_EQ(last_markers_->producer_id, 77);
  EXPECT_EQ(last_markers_->producer_epoch, max_producer_epoch);
  EXPECT_EQ(state_of("tx").next_producer_id, 1000);
  const markers m = *last_markers_;
  // The new id's next transaction waits for the completion.
  EXPECT_EQ(add("tx", 1000, 0, {{"t", 1}}, 5).error, errc::concurrent_transactions);
  // A crash before the completion: the next coordinator completes it, at the new id.
  reload(1);
  ASSERT_EQ(loaded_markers_.size(), 1u);
  EXPECT_EQ(loaded_markers_[0].producer_id, 77);
  EXPECT_EQ(loaded_markers_[0].coordinator_epoch, 1);
  EXPECT_EQ(c_->markers_written(m).code(), errc::not_coordinator);  // the old coordinator's markers
  complete(loaded_markers_[0]);
  EXPECT_EQ(state_of("tx").producer_id, 1000);
  EXPECT_EQ(state_of("tx").producer_epoch, 0);
  EXPECT_EQ(state_of("tx").previous_producer_id, 77);
  // A retry of the EndTxn with the old id and epoch answers the new ones.
  EXPECT_EQ(end("tx", 77, max_producer_epoch - 1, true, end_v2), (answer{errc::ok, 1000, 0}));
  EXPECT_EQ(add("tx", 1000, 0, {{"t", 1}}, 5).error, errc::ok);
  expect_replay_matches("tx");
}

TEST_F(TxnCoordinatorTest, Version2EndWithoutAProducerIdForTheOverflow) {
  txn_log_value v;
  v.producer_id = 77;
  v.producer_epoch = max_producer_epoch - 1;
  v.timeout_ms = 60'000;
  v.state = s::ongoing;
  v.partitions = {{"t", 0}};
  v.start_ms = clk_.now_ms();
  v.client_version = txn_version::tv2;
  seed("tx", v);
  pid_error_ = errc::coordinator_load_in_progress;
  EXPECT_EQ(end("tx", 77, max_producer_epoch - 1, true, end_v2).error, errc::coordinator_load_in_progress);
  EXPECT_EQ(state_of("tx").state, s::ongoing);
  EXPECT_FALSE(c_->find("tx")->has_pending());
}

// ---- Timeouts ------------------------------------------------------------------------------

TEST_F(TxnCoordinatorTest, TimedOutTransactionIsAbortedAndItsProducerFenced) {
  auto [pid, epoch] = open("tx");
  answer other = init("quiet");  // no transaction open: never times out
  (void)other;
  clk_.advance_ms(60'000);
  EXPECT_TRUE(c_->expire_timed_out().empty());  // start + timeout is not past yet
  clk_.advance_ms(1);
  auto writes = c_->expire_timed_out();
  ASSERT_EQ(writes.size(), 1u);
  EXPECT_EQ(writes[0].ref.transactional_id, "tx");
  // Nothing else is looked at while the abort is written.
  EXPECT_TRUE(c_->expire_timed_out().empty());
  EXPECT_EQ(end("tx", pid, epoch, true).error, errc::concurrent_transactions);
  auto done = commit(writes[0]);
  ASSERT_TRUE(done.to_send.has_value());
  EXPECT_EQ(done.to_send->type, marker_type::abort);
  EXPECT_EQ(done.to_send->producer_epoch, epoch + 1);
  EXPECT_EQ(state_of("tx").state, s::prepare_abort);
  complete(*done.to_send);
  EXPECT_EQ(state_of("tx").state, s::complete_abort);
  // The producer that let it time out is fenced.
  EXPECT_EQ(end("tx", pid, epoch, true).error, errc::producer_fenced);
  EXPECT_EQ(add("tx", pid, epoch, {{"t", 0}}).error, errc::producer_fenced);
  EXPECT_TRUE(c_->expire_timed_out().empty());
  expect_replay_matches("tx");
}

TEST_F(TxnCoordinatorTest, TimedOutAbortThatFailsIsRetriedAtTheSameEpoch) {
  cfg_.server_version = txn_version::tv0;
  reload();
  auto [pid, epoch] = open("tx");
  clk_.advance_ms(60'001);
  auto writes = c_->expire_timed_out();
  ASSERT_EQ(writes.size(), 1u);
  auto f = c_->write_failed(writes[0].ref, errc::not_enough_replicas);
  EXPECT_EQ(f.reply.error, errc::coordinator_not_available);
  EXPECT_FALSE(f.retry_completion);
  EXPECT_EQ(state_of("tx").state, s::ongoing);
  // The in-memory epoch was bumped (the zombie is fenced already) ...
  EXPECT_EQ(end("tx", pid, epoch, true).error, errc::producer_fenced);
  // ... and the next attempt does not bump it again.
  writes = c_->expire_timed_out();
  ASSERT_EQ(writes.size(), 1u);
  auto done = commit(writes[0]);
  ASSERT_TRUE(done.to_send.has_value());
  EXPECT_EQ(done.to_send->producer_epoch, epoch + 1);
}

// ---- Figures for /metrics ----------------------------------------------------------------

TEST_F(TxnCoordinatorTest, FiguresCountOpenTransactionsAndEachOutcomeOnce) {
  auto f = c_->current_figures();
  EXPECT_EQ(f.ongoing, 0u);
  EXPECT_EQ(f.oldest_start_ms, -1);
  const int64_t t0 = clk_.now_ms();

  // Four transactions open, the first one oldest.
  auto [p1, e1] = open("commits");
  clk_.advance_ms(1000);
  auto [p2, e2] = open("aborts");
  open("times-out");
  open("fenced");
  init("idle");  // no transaction: not counted
  f = c_->current_figures();
  EXPECT_EQ(f.ongoing, 4u);
  EXPECT_EQ(f.oldest_start_ms, t0);

  // A commit is counted when its PrepareCommit is durable, not before.
  decision d = c_->end_txn({"commits", p1, e1, true, end_v1});
  ASSERT_TRUE(d.to_write.has_value());
  EXPECT_EQ(c_->current_figures().committed, 0u);
  auto done = commit(*d.to_write);
  f = c_->current_figures();
  EXPECT_EQ(f.committed, 1u);
  EXPECT_EQ(f.ongoing, 4u) << "PrepareCommit is still open until its markers are written";
  EXPECT_EQ(f.oldest_start_ms, t0);
  complete(*done.to_send);
  f = c_->current_figures();
  EXPECT_EQ(f.ongoing, 3u);
  EXPECT_EQ(f.oldest_start_ms, t0 + 1000);
  // A retried commit of a completed transaction changes nothing.
  EXPECT_EQ(end("commits", p1, e1, true).error, errc::ok);
  EXPECT_EQ(c_->current_figures().committed, 1u);

  // A failed abort write counts nothing; its retry counts once.
  d = c_->end_txn({"aborts", p2, e2, false, end_v1});
  ASSERT_TRUE(d.to_write.has_value());
  (void)c_->write_failed(d.to_write->ref, errc::unavailable);
  EXPECT_EQ(c_->current_figures().aborted, 0u);
  EXPECT_EQ(end("aborts", p2, e2, false).error, errc::ok);
  complete_last();
  EXPECT_EQ(c_->current_figures().aborted, 1u);

  // A newer producer fences an open transaction: an abort.
  EXPECT_EQ(init("fenced").error, errc::concurrent_transactions);
  complete_last();
  EXPECT_EQ(c_->current_figures().aborted, 2u);

  // A timeout is its own outcome.
  clk_.advance_ms(60'001);
  auto writes = c_->expire_timed_out();
  ASSERT_EQ(writes.size(), 1u);
  done = commit(writes[0]);
  complete(*done.to_send);
  f = c_->current_figures();
  EXPECT_EQ(f.timed_out, 1u);
  EXPECT_EQ(f.aborted, 2u);
  EXPECT_EQ(f.committed, 1u);
  EXPECT_EQ(f.ongoing, 0u);
  EXPECT_EQ(f.oldest_start_ms, -1);

  // Transaction version 2's abort with nothing open is no transaction's end.
  answer v2 = init("v2-empty");
  EXPECT_EQ(end("v2-empty", v2.producer_id, v2.producer_epoch, false, end_v2).error, errc::ok);
  EXPECT_EQ(c_->current_figures().aborted, 2u);

  // A reload holds the open transactions again; the counters are this
  // coordinator's own (a transaction found ending was decided before).
  open("left-open");
  reload();
  f = c_->current_figures();
  EXPECT_EQ(f.ongoing, 2u);  // left-open, and v2-empty's PrepareAbort awaiting its markers
  EXPECT_EQ(f.committed + f.aborted + f.timed_out, 0u);
}

// ---- Expiry of transactional ids -------------------------------------------------------------

TEST_F(TxnCoordinatorTest, IdleIdsExpireByTombstone) {
  init("idle");
  auto [pid, epoch] = open("busy");
  (void)pid;
  (void)epoch;
  clk_.advance_ms(cfg_.id_expiration_ms - 1);
  init("recent");
  EXPECT_TRUE(c_->expire_ids().empty());
  clk_.advance_ms(1);
  auto writes = c_->expire_ids();
  ASSERT_EQ(writes.size(), 1u);  // "busy" is Ongoing, "recent" was used lately
  EXPECT_EQ(writes[0].ref.transactional_id, "idle");
  EXPECT_FALSE(writes[0].value.has_value());
  EXPECT_EQ(init("idle").error, errc::concurrent_transactions);  // being removed
  EXPECT_EQ(c_->describe("idle").error, errc::ok);
  commit(writes[0]);
  EXPECT_EQ(c_->find("idle"), nullptr);
  EXPECT_EQ(c_->describe("idle").error, errc::transactional_id_not_found);
  EXPECT_EQ(c_->id_count(), 2u);
  reload();
  EXPECT_EQ(c_->find("idle"), nullptr);
  EXPECT_EQ(c_->id_count(), 2u);
  // The id comes back as new.
  EXPECT_EQ(init("idle").error, errc::ok);
}

TEST_F(TxnCoordinatorTest, FailedTombstoneKeepsTheId) {
  init("idle");
  clk_.advance_ms(cfg_.id_expiration_ms);
  auto writes = c_->expire_ids();
  ASSERT_EQ(writes.size(), 1u);
  EXPECT_EQ(c_->write_failed(writes[0].ref, errc::io_error).reply.error, errc::not_coordinator);
  ASSERT_NE(c_->find("idle"), nullptr);
  EXPECT_FALSE(c_->find("idle")->has_pending());
  EXPECT_EQ(init("idle").error, errc::ok);
}

// ---- Loading, failover, failed writes --------------------------------------------------------

TEST_F(TxnCoordinatorTest, CrashBetweenPrepareCommitAndCompleteCommitResendsTheMarkers) {
  auto [pid, epoch] = open("tx");
  EXPECT_EQ(end("tx", pid, epoch, true).error, errc::ok);
  ASSERT_TRUE(last_markers_.has_value());
  const markers before = *last_markers_;
  // The coordinator dies before the markers are all written; another loads
  // the partition at a higher epoch.
  reload(4);
  ASSERT_EQ(loaded_markers_.size(), 1u);
  const markers& m = loaded_markers_[0];
  EXPECT_EQ(m.type, marker_type::commit);
  EXPECT_EQ(m.producer_id, before.producer_id);
  EXPECT_EQ(m.producer_epoch, before.producer_epoch);
  EXPECT_EQ(m.partitions, before.partitions);
  EXPECT_EQ(m.coordinator_epoch, 4);
  EXPECT_EQ(end("tx", pid, epoch, true).error, errc::concurrent_transactions);
  complete(m);
  EXPECT_EQ(state_of("tx").state, s::complete_commit);
  EXPECT_EQ(end("tx", pid, epoch, true).error, errc::ok);
  // A load after the completion has nothing to resend.
  reload(5);
  EXPECT_TRUE(loaded_markers_.empty());
}

TEST_F(TxnCoordinatorTest, ReplayAfterEveryStateRebuildsTheSameMetadata) {
  answer a = init("tx");
  expect_replay_matches("tx");  // Empty
  EXPECT_EQ(add("tx", a.producer_id, 0, {{"t", 0}, {"u", 1}}).error, errc::ok);
  expect_replay_matches("tx");  // Ongoing
  EXPECT_EQ(end("tx", a.producer_id, 0, false).error, errc::ok);
  expect_replay_matches("tx");  // PrepareAbort (its markers come back at each load)
  ASSERT_EQ(loaded_markers_.size(), 1u);
  complete(loaded_markers_[0]);
  expect_replay_matches("tx");  // CompleteAbort
  EXPECT_EQ(add("tx", a.producer_id, 0, {{"t", 0}}, 5).error, errc::ok);
  EXPECT_EQ(end("tx", a.producer_id, 0, true, end_v2).error, errc::ok);
  expect_replay_matches("tx");  // PrepareCommit, version 2
  ASSERT_EQ(loaded_markers_.size(), 1u);
  complete(loaded_markers_[0]);
  expect_replay_matches("tx");  // CompleteCommit, version 2
  EXPECT_EQ(state_of("tx").producer_epoch, 1);
  EXPECT_EQ(state_of("tx").client_version, txn_version::tv2);
}

TEST_F(TxnCoordinatorTest, WritesOfAnEarlierLoadChangeNothing) {
  auto [pid, epoch] = open("tx");
  decision d = c_->end_txn({"tx", pid, epoch, true, end_v1});
  ASSERT_TRUE(d.to_write.has_value());
  // The partition moves away and back before the write completes.
  const int32_t p = partition_for("tx", 50);
  c_->unload(p);
  EXPECT_EQ(end("tx", pid, epoch, true).error, errc::not_coordinator);
  c_->begin_load(p, 1);
  for (const auto& r : log_[p]) {
    std::optional<std::span<const uint8_t>> v;
    if (r.value) v = std::span<const uint8_t>(*r.value);
    ASSERT_TRUE(c_->replay(p, r.key, v).ok());
  }
  EXPECT_TRUE(c_->finish_load(p).empty());
  auto done = c_->written(d.to_write->ref);
  EXPECT_EQ(done.reply.error, errc::not_coordinator);
  EXPECT_FALSE(done.to_send.has_value());
  EXPECT_EQ(state_of("tx").state, s::ongoing);
  EXPECT_FALSE(c_->find("tx")->has_pending());
  EXPECT_EQ(c_->write_failed(d.to_write->ref, errc::not_leader).reply.error, errc::not_coordinator);
  EXPECT_EQ(end("tx", pid, epoch, true).error, errc::ok);
}

TEST_F(TxnCoordinatorTest, FailedWriteDropsThePendingTransition) {
  answer a = init("tx");
  decision d = c_->add_partitions({"tx", a.producer_id, 0, {{"t", 0}}, add_v1});
  ASSERT_TRUE(d.to_write.has_value());
  auto f = c_->write_failed(d.to_write->ref, errc::unavailable);
  EXPECT_EQ(f.reply.error, errc::coordinator_not_available);
  EXPECT_EQ(state_of("tx").state, s::empty);
  EXPECT_FALSE(c_->find("tx")->has_pending());
  EXPECT_EQ(add("tx", a.producer_id, 0, {{"t", 0}}).error, errc::ok);
  // A new id whose first record failed stays held at epoch -1; the retry
  // gets epoch 0.
  decision n = c_->init_producer_id({"new", 1000, -1, -1, init_v});
  ASSERT_TRUE(n.to_write.has_value());
  EXPECT_EQ(c_->write_failed(n.to_write->ref, errc::message_too_large).reply.error, errc::internal_error);
  ASSERT_NE(c_->find("new"), nullptr);
  EXPECT_EQ(c_->find("new")->producer_epoch(), no_producer_epoch);
  answer b = init("new");
  EXPECT_EQ(b.producer_epoch, 0);
}

TEST_F(TxnCoordinatorTest, FailedCompletionIsRetried) {
  auto [pid, epoch] = open("tx");
  EXPECT_EQ(end("tx", pid, epoch, true).error, errc::ok);
  ASSERT_TRUE(last_markers_.has_value());
  const markers m = *last_markers_;
  auto w = c_->markers_written(m);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(c_->markers_written(m).code(), errc::concurrent_transactions);  // one completion at a time
  auto f = c_->write_failed(w->ref, errc::not_enough_replicas);
  EXPECT_TRUE(f.retry_completion);
  EXPECT_EQ(end("tx", pid, epoch, true).error, errc::concurrent_transactions);
  complete(m);
  EXPECT_EQ(state_of("tx").state, s::complete_commit);
  // Markers of a transaction that is not ending are refused.
  EXPECT_EQ(c_->markers_written(m).code(), errc::invalid_txn_state);
}

TEST_F(TxnCoordinatorTest, AppendErrorsMapAsKafkas) {
  EXPECT_EQ(map_append_error(errc::not_leader), errc::not_coordinator);
  EXPECT_EQ(map_append_error(errc::fenced_leader_epoch), errc::not_coordinator);
  EXPECT_EQ(map_append_error(errc::log_offline), errc::not_coordinator);
  EXPECT_EQ(map_append_error(errc::io_error), errc::not_coordinator);
  EXPECT_EQ(map_append_error(errc::not_enough_replicas), errc::coordinator_not_available);
  EXPECT_EQ(map_append_error(errc::not_enough_replicas_after_append), errc::coordinator_not_available);
  EXPECT_EQ(map_append_error(errc::unavailable), errc::coordinator_not_available);
  EXPECT_EQ(map_append_error(errc::not_found), errc::coordinator_not_available);
  EXPECT_EQ(map_append_error(errc::record_list_too_large), errc::internal_error);
  EXPECT_EQ(map_append_error(errc::message_too_large), errc::internal_error);
}

TEST_F(TxnCoordinatorTest, ReplayRefusesForeignAndImpossibleRecords) {
  const int32_t p = partition_for("tx", 50);
  const int32_t other = (p + 1) % 50;
  c_->begin_load(other, 0);
  txn_log_value v;
  v.producer_id = 1;
  v.producer_epoch = 0;
  const auto key = encode_key("tx");
  const auto value = encode_value(v);
  EXPECT_EQ(c_->replay(other, key, std::span<const uint8_t>(value)).code(), errc::corrupt_data);
  c_->begin_load(p, 0);
  v.state = s::dead;
  const auto dead = encode_value(v);
  EXPECT_EQ(c_->replay(p, key, std::span<const uint8_t>(dead)).code(), errc::corrupt_data);
  v.state = s::prepare_epoch_fence;
  const auto fence = encode_value(v);
  EXPECT_EQ(c_->replay(p, key, std::span<const uint8_t>(fence)).code(), errc::corrupt_data);
  const std::vector<uint8_t> junk = {1, 2, 3};
  EXPECT_FALSE(c_->replay(p, key, std::span<const uint8_t>(junk)).ok());
  EXPECT_FALSE(c_->replay(p, junk, std::span<const uint8_t>(value)).ok());
  // A tombstone of an unknown id is fine; nothing was applied.
  EXPECT_TRUE(c_->replay(p, key, std::nullopt).ok());
  EXPECT_TRUE(c_->finish_load(p).empty());
  EXPECT_EQ(c_->find("tx"), nullptr);
  EXPECT_EQ(c_->replay(p, key, std::span<const uint8_t>(value)).code(), errc::not_coordinator);  // loaded
}

TEST_F(TxnCoordinatorTest, UnloadDropsThePartitionsIds) {
  open("tx");
  init("tx2");
  const size_t before = c_->id_count();
  c_->unload(partition_for("tx", 50));
  EXPECT_LT(c_->id_count(), before);
  EXPECT_EQ(c_->find("tx"), nullptr);
  EXPECT_FALSE(c_->loaded(partition_for("tx", 50)));
  reload();
  EXPECT_EQ(c_->id_count(), before);
  EXPECT_EQ(state_of("tx").state, s::ongoing);
}

// ---- DescribeTransactions, ListTransactions --------------------------------------------------

TEST_F(TxnCoordinatorTest, DescribeAnswersFromTheMetadata) {
  auto [pid, epoch] = open("tx");
  EXPECT_EQ(add("tx", pid, epoch, {{"t", 3}, {"a", 1}}).error, errc::ok);
  auto d = c_->describe("tx");
  EXPECT_EQ(d.error, errc::ok);
  EXPECT_EQ(d.state, s::ongoing);
  EXPECT_EQ(d.producer_id, pid);
  EXPECT_EQ(d.producer_epoch, epoch);
  EXPECT_EQ(d.timeout_ms, 60'000);
  EXPECT_EQ(d.start_ms, clk_.now_ms());
  EXPECT_EQ(d.topics, (std::map<std::string, std::vector<int32_t>>{{"a", {1}}, {"t", {0, 3}}}));
  EXPECT_EQ(c_->describe("missing").error, errc::transactional_id_not_found);
  EXPECT_EQ(c_->describe("").error, errc::invalid_argument);
}

TEST_F(TxnCoordinatorTest, ListFiltersByStateProducerAndDuration) {
  auto [pid_a, ea] = open("a");
  (void)ea;
  clk_.advance_ms(10'000);
  auto [pid_b, eb] = open("b");
  (void)eb;
  answer c = init("c");
  auto all = c_->list({});
  EXPECT_EQ(all.error, errc::ok);
  ASSERT_EQ(all.transactions.size(), 3u);
  EXPECT_EQ(all.transactions[0], (list_answer::entry{"a", pid_a, s::ongoing}));
  EXPECT_EQ(all.transactions[2], (list_answer::entry{"c", c.producer_id, s::empty}));

  auto ongoing = c_->list({{"Ongoing", "Bogus"}, {}, -1});
  EXPECT_EQ(ongoing.transactions.size(), 2u);
  EXPECT_EQ(ongoing.unknown_state_filters, (std::vector<std::string>{"Bogus"}));
  EXPECT_TRUE(c_->list({{"Bogus"}, {}, -1}).transactions.empty());  // only unknown names: nothing

  auto by_pid = c_->list({{}, {pid_b}, -1});
  ASSERT_EQ(by_pid.transactions.size(), 1u);
  EXPECT_EQ(by_pid.transactions[0].transactional_id, "b");

  // Running longer than 5 s: only "a" (10 s); "b" just started, "c" has no
  // transaction (start -1 counts as very long, as Kafka's arithmetic makes it).
  clk_.advance_ms(1);
  auto longer = c_->list({{"Ongoing"}, {}, 5'000});
  ASSERT_EQ(longer.transactions.size(), 1u);
  EXPECT_EQ(longer.transactions[0].transactional_id, "a");
  EXPECT_EQ(c_->list({{}, {}, 5'000}).transactions.size(), 2u);
  EXPECT_EQ(c_->list({{}, {}, 10'001}).transactions.size(), 1u);  // "c" only
}

}  // namespace
}  // namespace sluice::txn
