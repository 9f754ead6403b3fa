#include "controller/reassignment.h"

#include <algorithm>
#include <random>
#include <set>

#include <gtest/gtest.h>

namespace sluice::controller {
namespace {

partition_state st(int32_t leader, int32_t leader_epoch, std::vector<int32_t> isr, int32_t partition_epoch) {
  return partition_state{leader, leader_epoch, std::move(isr), partition_epoch};
}

replica_set plain(partition_assignment r) { return replica_set{std::move(r), {}, {}}; }

const broker_set four{1, 2, 3, 4};
const partition_state steady = st(1, 5, {1, 2, 3}, 7);

// The replicas a reassignment starts with (leader and ISR unchanged; the
// partition epoch one up when the replicas change).
replica_set start(const replica_set& now, const partition_assignment& target) {
  auto r = start_reassignment(now, steady, target, four, four);
  EXPECT_TRUE(r.ok());
  auto want = steady;
  if (!(r->replicas == now)) ++want.partition_epoch;
  EXPECT_EQ(r->state, want);
  return r->replicas;
}

TEST(start_reassignment, grows_the_replicas_to_the_target_and_those_leaving) {
  auto r = std::optional<replica_set>(start(plain({1, 2, 3}), {2, 3, 4}));
  EXPECT_EQ(r->replicas, (partition_assignment{2, 3, 4, 1}));
  EXPECT_EQ(r->adding, (std::vector<int32_t>{4}));
  EXPECT_EQ(r->removing, (std::vector<int32_t>{1}));
  EXPECT_EQ(r->original(), (partition_assignment{2, 3, 1}));
  EXPECT_EQ(r->target(), (partition_assignment{2, 3, 4}));
}

TEST(start_reassignment, a_new_target_is_measured_from_the_original_replicas) {
  auto first = std::optional<replica_set>(start(plain({1, 2, 3}), {2, 3, 4}));
  // Moving again while the first move runs: 4 was never a replica, so it
  // is not "removed", it is just not added any more.
  auto second = std::optional<replica_set>(start(*first, {1, 2}));
  EXPECT_EQ(second->adding, (std::vector<int32_t>{}));
  EXPECT_EQ(second->removing, (std::vector<int32_t>{3}));
  EXPECT_EQ(second->replicas, (partition_assignment{1, 2, 3}));
  // The original set again: no reassignment (a cancellation of it).
  auto back = std::optional<replica_set>(start(*first, {3, 2, 1}));
  EXPECT_FALSE(back->reassigning());
  EXPECT_EQ(back->replicas, (partition_assignment{3, 2, 1}));
}

TEST(start_reassignment, refuses_empty_repeated_and_unknown_targets) {
  const auto one = st(1, 5, {1}, 7);
  EXPECT_EQ(start_reassignment(plain({1}), one, {}, four, four).code(), errc::invalid_replica_assignment);
  EXPECT_EQ(start_reassignment(plain({1}), one, {2, 2}, four, four).code(), errc::invalid_replica_assignment);
  EXPECT_EQ(start_reassignment(plain({1}), one, {2, 9}, four, four).code(), errc::invalid_replica_assignment);
}

TEST(start_reassignment, a_new_target_dropping_an_added_leader_moves_leadership) {
  auto first = start(plain({1, 2}), {3, 4});
  // 3 caught up and was made leader; then the operator targets {1, 2, 4}.
  auto r = start_reassignment(first, st(3, 6, {2, 3}, 9), {1, 2, 4}, four, four);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->replicas.replicas, (partition_assignment{1, 2, 4}));
  EXPECT_EQ(r->replicas.adding, (std::vector<int32_t>{4}));
  EXPECT_TRUE(r->replicas.removing.empty());
  EXPECT_EQ(r->state, st(2, 7, {2}, 10));
  EXPECT_EQ(r->leadership, leader_change::clean);
  // Only 3 in sync: dropping it would leave the partition with none.
  EXPECT_EQ(start_reassignment(first, st(3, 6, {3}, 9), {1, 2}, four, four).code(),
            errc::invalid_replica_assignment);
}

TEST(complete_reassignment, waits_until_every_target_replica_is_in_sync) {
  auto r = start(plain({1, 2, 3}), {2, 3, 4});
  EXPECT_FALSE(complete_reassignment(r, st(1, 5, {1, 2, 3}, 7), four));
  EXPECT_FALSE(complete_reassignment(plain({1, 2, 3}), st(1, 5, {1, 2, 3}, 7), four));  // nothing to complete
  auto done = complete_reassignment(r, st(2, 5, {1, 2, 3, 4}, 8), four);
  ASSERT_TRUE(done);
  EXPECT_EQ(done->replicas, plain({2, 3, 4}));
  EXPECT_EQ(done->state, st(2, 5, {2, 3, 4}, 9));  // 1 leaves the ISR; the leader stays
  EXPECT_EQ(done->leadership, leader_change::none);
}

TEST(complete_reassignment, a_removed_leader_hands_over_to_the_first_live_target_replica_in_sync) {
  auto r = start(plain({1, 2, 3}), {4, 3, 2});
  auto done = complete_reassignment(r, st(1, 5, {1, 2, 3, 4}, 8), broker_set{1, 3, 4});
  ASSERT_TRUE(done);
  EXPECT_EQ(done->state, st(4, 6, {2, 3, 4}, 9));
  EXPECT_EQ(done->leadership, leader_change::clean);
  // No target replica live: the move waits rather than leave the partition
  // without a leader.
  EXPECT_FALSE(complete_reassignment(r, st(1, 5, {1, 2, 3, 4}, 8), broker_set{1}));
}

TEST(cancel_reassignment, goes_back_to_the_original_replicas) {
  auto r = start(plain({1, 2, 3}), {2, 3, 4});
  auto c = cancel_reassignment(r, st(1, 5, {1, 2, 3, 4}, 8), four);
  ASSERT_TRUE(c);
  // The originals, in the merged list's order (as Kafka's cancel).
  EXPECT_EQ(c->replicas, plain({2, 3, 1}));
  EXPECT_EQ(c->state, st(1, 5, {1, 2, 3}, 9));
  // Nothing added in sync yet: only the replicas shrink back.
  c = cancel_reassignment(r, st(1, 5, {1, 2}, 8), four);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->state, st(1, 5, {1, 2}, 9));
}

TEST(cancel_reassignment, an_added_leader_hands_back_and_an_isr_of_added_replicas_waits) {
  auto r = start(plain({1, 2}), {3, 4});
  // 3 leads (the move had elected it), 2 is still in sync.
  auto c = cancel_reassignment(r, st(3, 6, {2, 3, 4}, 9), four);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->state, st(2, 7, {2}, 10));
  EXPECT_EQ(c->leadership, leader_change::clean);
  // Only added replicas in sync: going back now would empty the ISR.
  EXPECT_FALSE(cancel_reassignment(r, st(3, 6, {3, 4}, 9), four));
}

// Random moves, ISR changes and failures: every step keeps the invariants.
TEST(reassignment, random_moves_keep_the_invariants) {
  std::mt19937 rng(20261207);
  const broker_set all{1, 2, 3, 4, 5};
  for (int round = 0; round < 2000; ++round) {
    replica_set rs = plain({1, 2, 3});
    partition_state s = st(1, 0, {1, 2, 3}, 0);
    for (int i = 0; i < 20; ++i) {
      broker_set live;
      for (int32_t b : all)
        if (rng() % 5 != 0) live.insert(b);
      switch (rng() % 4) {
        case 0: {  // a new target of 1-4 distinct brokers
          std::vector<int32_t> pool{1, 2, 3, 4, 5};
          std::shuffle(pool.begin(), pool.end(), rng);
          pool.resize(1 + rng() % 4);
          if (auto r = start_reassignment(rs, s, pool, all, live); r.ok()) {
            EXPECT_EQ(r->replicas.target(), pool);
            rs = r->replicas;
            s = r->state;
          }
          break;
        }
        case 1: {  // a replica catches up (the leader's AlterPartition)
          const int32_t b = rs.replicas[rng() % rs.replicas.size()];
          if (s.leader != partition_state::no_leader &&
              std::find(s.isr.begin(), s.isr.end(), b) == s.isr.end()) {
            s.isr.push_back(b);
            ++s.partition_epoch;
          }
          break;
        }
        case 2:
          if (auto d = complete_reassignment(rs, s, live)) {
            EXPECT_EQ(d->replicas.replicas, rs.target());
            EXPECT_GE(d->state.leader_epoch, s.leader_epoch);
            EXPECT_EQ(d->state.partition_epoch, s.partition_epoch + 1);  // the replicas changed
            rs = d->replicas;
            s = d->state;
          }
          break;
        case 3:
          if (rs.reassigning()) {
            if (auto d = cancel_reassignment(rs, s, live)) {
              EXPECT_EQ(d->replicas.replicas, rs.original());
              rs = d->replicas;
              s = d->state;
            }
          }
          break;
      }
      ASSERT_FALSE(s.isr.empty());
      for (int32_t b : s.isr)
        ASSERT_NE(std::find(rs.replicas.begin(), rs.replicas.end(), b), rs.replicas.end()) << "ISR within replicas";
      ASSERT_TRUE(s.leader == partition_state::no_leader ||
                  std::find(s.isr.begin(), s.isr.end(), s.leader) != s.isr.end());
      ASSERT_EQ(std::set<int32_t>(rs.replicas.begin(), rs.replicas.end()).size(), rs.replicas.size());
    }
  }
}

}  // namespace
}  // namespace sluice::controller
