#include "txn/state.h"

#include <gtest/gtest.h>

namespace sluice::txn {
namespace {

using s = txn_state;
constexpr s all_states[] = {s::empty,          s::ongoing,        s::prepare_commit, s::prepare_abort,
                            s::complete_commit, s::complete_abort, s::dead,           s::prepare_epoch_fence};

// Kafka's validPreviousStates, written out as its table.
TEST(TxnState, TransitionsAreKafkas) {
  auto allowed = [](s from, s to, txn_version v) {
    const bool idle = from == s::empty || from == s::complete_commit || from == s::complete_abort;
    switch (to) {
      case s::empty: return idle;
      case s::ongoing: return idle || from == s::ongoing;
      case s::prepare_commit: return from == s::ongoing;
      case s::prepare_abort:
        return from == s::ongoing || from == s::prepare_epoch_fence || (idle && v == txn_version::tv2);
      case s::complete_commit: return from == s::prepare_commit;
      case s::complete_abort: return from == s::prepare_abort;
      case s::dead: return idle;
      case s::prepare_epoch_fence: return from == s::ongoing;
    }
    return false;
  };
  int yes = 0;
  for (auto v : {txn_version::tv0, txn_version::tv2})
    for (s from : all_states)
      for (s to : all_states) {
        EXPECT_EQ(valid_transition(from, to, v), allowed(from, to, v))
            << state_name(from) << " -> " << state_name(to) << " v" << static_cast<int>(v);
        yes += valid_transition(from, to, v);
      }
  EXPECT_EQ(yes, 2 * 16 + 3);  // 16 allowed pairs, 3 more with version 2
  EXPECT_FALSE(valid_transition(s::complete_commit, s::prepare_commit, txn_version::tv2));
  EXPECT_FALSE(valid_transition(s::empty, s::prepare_abort, txn_version::tv0));
}

txn_metadata fresh(int64_t pid = 100) { return txn_metadata("tx", pid, 60'000, 1000); }

TEST(TxnState, NewIdBumpsToEpochZeroOnlyWhenApplied) {
  auto md = fresh();
  EXPECT_EQ(md.state(), s::empty);
  EXPECT_EQ(md.producer_epoch(), no_producer_epoch);
  auto t = md.prepare_increment_epoch(30'000, std::nullopt, 2000);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->producer_epoch, 0);
  EXPECT_EQ(t->timeout_ms, 30'000);
  EXPECT_EQ(t->last_update_ms, 2000);
  EXPECT_TRUE(md.has_pending());
  EXPECT_EQ(md.producer_epoch(), no_producer_epoch);  // nothing applied yet
  md.apply_pending();
  EXPECT_FALSE(md.has_pending());
  EXPECT_EQ(md.producer_epoch(), 0);
  EXPECT_EQ(md.durable().timeout_ms, 30'000);
}

TEST(TxnState, DroppedTransitionChangesNothing) {
  auto md = fresh();
  ASSERT_TRUE(md.prepare_increment_epoch(30'000, std::nullopt, 2000).ok());
  md.apply_pending();
  const txn_log_value before = md.durable();
  (void)md.prepare_add_partitions({{"t", 0}}, 3000, txn_version::tv0);
  md.drop_pending();
  EXPECT_FALSE(md.has_pending());
  EXPECT_EQ(md.durable(), before);
}

TEST(TxnState, Kip360BumpRetryAndFence) {
  auto md = fresh();
  ASSERT_TRUE(md.prepare_increment_epoch(1000, std::nullopt, 1).ok());
  md.apply_pending();  // epoch 0
  // The current epoch: bumped, the old kept as the last.
  auto t = md.prepare_increment_epoch(1000, int16_t{0}, 2);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->producer_epoch, 1);
  EXPECT_EQ(t->last_producer_epoch, 0);
  md.apply_pending();
  // The last epoch again (the answer was lost): the same answer, no bump.
  t = md.prepare_increment_epoch(1000, int16_t{0}, 3);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->producer_epoch, 1);
  EXPECT_EQ(t->last_producer_epoch, 0);
  md.apply_pending();
  // Anything else is a zombie.
  auto f = md.prepare_increment_epoch(1000, int16_t{5}, 4);
  EXPECT_EQ(f.code(), errc::producer_fenced);
  EXPECT_FALSE(md.has_pending());
  // A bump without an expected epoch forgets the last one: the old
  // producer's retry is fenced from then on.
  ASSERT_TRUE(md.prepare_increment_epoch(1000, std::nullopt, 5).ok());
  md.apply_pending();
  EXPECT_EQ(md.producer_epoch(), 2);
  EXPECT_EQ(md.prepare_increment_epoch(1000, int16_t{0}, 6).code(), errc::producer_fenced);
}

TEST(TxnState, AddPartitionsStartsTheClockOnce) {
  auto md = fresh();
  ASSERT_TRUE(md.prepare_increment_epoch(1000, std::nullopt, 1).ok());
  md.apply_pending();
  auto t = md.prepare_add_partitions({{"a", 0}}, 500, txn_version::tv0);
  EXPECT_EQ(t.start_ms, 500);
  md.apply_pending();
  t = md.prepare_add_partitions({{"b", 1}}, 900, txn_version::tv0);
  EXPECT_EQ(t.start_ms, 500);
  EXPECT_EQ(t.partitions, (partition_set{{"a", 0}, {"b", 1}}));
  md.apply_pending();
  EXPECT_EQ(md.state(), s::ongoing);
}

TEST(TxnState, Version1EndKeepsTheEpochVersion2BumpsIt) {
  for (auto v : {txn_version::tv0, txn_version::tv2}) {
    auto md = fresh();
    ASSERT_TRUE(md.prepare_increment_epoch(1000, std::nullopt, 1).ok());
    md.apply_pending();
    (void)md.prepare_add_partitions({{"a", 0}}, 2, v);
    md.apply_pending();
    auto t = md.prepare_abort_or_commit(s::prepare_commit, v, no_producer_id, 3, false);
    EXPECT_EQ(t.producer_epoch, v == txn_version::tv2 ? 1 : 0);
    EXPECT_EQ(t.partitions, (partition_set{{"a", 0}}));
    md.apply_pending();
    auto c = md.prepare_complete(4);
    EXPECT_EQ(c.state, s::complete_commit);
    EXPECT_TRUE(c.partitions.empty());
    EXPECT_EQ(c.producer_epoch, v == txn_version::tv2 ? 1 : 0);
    EXPECT_EQ(c.producer_id, 100);
    md.apply_pending();
    EXPECT_EQ(md.state(), s::complete_commit);
  }
}

TEST(TxnState, Version2OverflowMovesToTheNextProducerId) {
  txn_log_value v;
  v.producer_id = 100;
  v.producer_epoch = max_producer_epoch - 1;
  v.timeout_ms = 1000;
  v.state = s::ongoing;
  v.partitions = {{"a", 0}};
  v.start_ms = 1;
  v.client_version = txn_version::tv2;
  txn_metadata md("tx", v);
  auto t = md.prepare_abort_or_commit(s::prepare_commit, txn_version::tv2, 555, 2, false);
  EXPECT_EQ(t.producer_epoch, max_producer_epoch);
  EXPECT_EQ(t.next_producer_id, 555);
  md.apply_pending();
  auto c = md.prepare_complete(3);
  EXPECT_EQ(c.producer_id, 555);
  EXPECT_EQ(c.producer_epoch, 0);
  EXPECT_EQ(c.previous_producer_id, 100);
  EXPECT_EQ(c.next_producer_id, no_producer_id);
  EXPECT_EQ(c.last_producer_epoch, max_producer_epoch - 1);
}

TEST(TxnState, Version1FenceBumpsInMemoryOnceEvenWhenItsWriteFails) {
  auto md = fresh();
  ASSERT_TRUE(md.prepare_increment_epoch(1000, std::nullopt, 1).ok());
  md.apply_pending();
  (void)md.prepare_add_partitions({{"a", 0}}, 2, txn_version::tv0);
  md.apply_pending();
  auto t = md.prepare_fence_and_abort(txn_version::tv0, 3);
  EXPECT_EQ(t.state, s::prepare_abort);
  EXPECT_EQ(t.producer_epoch, 1);
  EXPECT_EQ(md.producer_epoch(), 1);  // Kafka bumps before the write
  md.drop_pending();
  // The next fence does not bump again: epoch 1 was never handed out.
  t = md.prepare_fence_and_abort(txn_version::tv0, 4);
  EXPECT_EQ(t.producer_epoch, 1);
  md.apply_pending();
  EXPECT_EQ(md.producer_epoch(), 1);
  EXPECT_EQ(md.state(), s::prepare_abort);
}

TEST(TxnState, Version2FenceBumpsOnceAndNotBeforeTheWrite) {
  auto md = fresh();
  ASSERT_TRUE(md.prepare_increment_epoch(1000, std::nullopt, 1).ok());
  md.apply_pending();
  (void)md.prepare_add_partitions({{"a", 0}}, 2, txn_version::tv2);
  md.apply_pending();
  auto t = md.prepare_fence_and_abort(txn_version::tv2, 3);
  EXPECT_EQ(t.producer_epoch, 1);
  EXPECT_EQ(t.last_producer_epoch, 0);
  EXPECT_EQ(md.producer_epoch(), 0);
  md.drop_pending();
  t = md.prepare_fence_and_abort(txn_version::tv2, 4);
  EXPECT_EQ(t.producer_epoch, 1);
}

TEST(TxnState, DeadIsATombstoneNeverApplied) {
  auto md = fresh();
  ASSERT_TRUE(md.prepare_increment_epoch(1000, std::nullopt, 1).ok());
  md.apply_pending();
  auto t = md.prepare_dead();
  EXPECT_EQ(t.state, s::dead);
  EXPECT_EQ(md.pending_state(), s::dead);
}

TEST(TxnState, ReplayedRecordReplacesTheMetadata) {
  auto md = fresh();
  ASSERT_TRUE(md.prepare_increment_epoch(1000, std::nullopt, 1).ok());
  txn_log_value v;
  v.producer_id = 9;
  v.producer_epoch = 4;
  v.state = s::complete_abort;
  md.apply_record(v);
  EXPECT_FALSE(md.has_pending());
  EXPECT_EQ(md.durable(), v);
}

}  // namespace
}  // namespace sluice::txn
