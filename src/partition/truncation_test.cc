// The follower-truncation rule over every shape of epoch history, and a tiny
// simulator of the OffsetForLeaderEpoch exchange that checks the follower
// always ends at the true divergence point of the two logs.

#include "partition/truncation.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <sstream>
#include <string>

namespace sluice::cluster {
namespace {

using E = std::vector<storage::epoch_entry>;
storage::epoch_entry e(int32_t epoch, int64_t start) { return {leader_epoch(epoch), offset(start)}; }
truncation_step step(int64_t to, bool complete) { return {offset(to), complete}; }

// A log as the leader epoch of each of its offsets, from 0.
using log_epochs = std::vector<int32_t>;

E history(const log_epochs& log) {
  E out;
  for (size_t i = 0; i < log.size(); ++i) {
    if (out.empty() || out.back().epoch.value() != log[i]) out.push_back(e(log[i], static_cast<int64_t>(i)));
  }
  return out;
}

// The divergence point: the length of the longest common prefix, comparing
// the epoch of each offset.
int64_t divergence(const log_epochs& a, const log_epochs& b) {
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  return static_cast<int64_t>(i);
}

std::string show(const log_epochs& log) {
  std::ostringstream s;
  for (int32_t x : log) s << x << ' ';
  return s.str();
}

struct outcome {
  int64_t truncated_to = -1;
  int rounds = 0;
};

// Runs the exchange of truncation.h's header to completion: the follower
// asks with its latest epoch, the leader (leading at `leader_current`)
// answers, the follower truncates; again until a step is complete.
outcome simulate(const log_epochs& leader, int32_t leader_current, log_epochs follower, int64_t follower_hw) {
  const E leader_hist = with_current_epoch(history(leader), leader_epoch(leader_current),
                                           offset(static_cast<int64_t>(leader.size())));
  outcome out;
  for (;;) {
    ++out.rounds;
    if (out.rounds > 64) {
      ADD_FAILURE() << "no convergence";
      return out;
    }
    const E mine = history(follower);
    const offset end(static_cast<int64_t>(follower.size()));
    const auto ask = epoch_to_ask(mine);
    const epoch_end answer =
        ask ? epoch_end_for(leader_hist, offset(static_cast<int64_t>(leader.size())), *ask) : epoch_end{};
    const truncation_step s = decide_truncation(mine, end, offset(follower_hw), answer);
    EXPECT_LE(s.truncate_to, end) << "never above the log end";
    EXPECT_GE(s.truncate_to.value(), 0);
    follower.resize(static_cast<size_t>(std::min(s.truncate_to, end).value()));
    follower_hw = std::min<int64_t>(follower_hw, static_cast<int64_t>(follower.size()));
    if (s.complete) break;
  }
  out.truncated_to = static_cast<int64_t>(follower.size());
  return out;
}

// ---- The leader's answer -----------------------------------------------------

TEST(EpochEndFor, AnswersAsKafkasEpochCache) {
  const E h{e(1, 0), e(3, 4), e(4, 6)};
  const offset end(10);
  EXPECT_EQ(epoch_end_for(h, end, 1), (epoch_end{1, 4}));
  EXPECT_EQ(epoch_end_for(h, end, 2), (epoch_end{1, 4}));   // never an epoch: the one before it
  EXPECT_EQ(epoch_end_for(h, end, 3), (epoch_end{3, 6}));
  EXPECT_EQ(epoch_end_for(h, end, 4), (epoch_end{4, 10}));  // the latest ends at the log end
  EXPECT_EQ(epoch_end_for(h, end, 5), epoch_end{});         // above every epoch
  EXPECT_EQ(epoch_end_for(h, end, 0), (epoch_end{0, 0}));   // below the first: where it starts
  EXPECT_EQ(epoch_end_for(h, end, -1), epoch_end{});
  EXPECT_EQ(epoch_end_for({}, end, 1), epoch_end{});
  EXPECT_TRUE(epoch_end{}.undefined());
}

TEST(EpochEndFor, BelowTheFirstAfterRetentionIsTheLogStart) {
  // Retention moved the log start to 50 inside epoch 3.
  const E h{e(3, 50), e(5, 60)};
  EXPECT_EQ(epoch_end_for(h, offset(70), 2), (epoch_end{2, 50}));
  EXPECT_EQ(epoch_end_for(h, offset(70), 4), (epoch_end{3, 60}));
}

TEST(WithCurrentEpoch, AddsTheLeadersEpochUntilItWrites) {
  EXPECT_EQ(with_current_epoch({}, leader_epoch(2), offset(0)), (E{e(2, 0)}));
  EXPECT_EQ(with_current_epoch({e(1, 0)}, leader_epoch(2), offset(5)), (E{e(1, 0), e(2, 5)}));
  EXPECT_EQ(with_current_epoch({e(1, 0), e(2, 5)}, leader_epoch(2), offset(9)), (E{e(1, 0), e(2, 5)}));
  // Its current epoch then counts as the latest: asked about it, the log end.
  const E h = with_current_epoch({e(1, 0)}, leader_epoch(4), offset(5));
  EXPECT_EQ(epoch_end_for(h, offset(5), 4), (epoch_end{4, 5}));
  EXPECT_EQ(epoch_end_for(h, offset(5), 3), (epoch_end{1, 5}));
  EXPECT_EQ(epoch_end_for(h, offset(5), 1), (epoch_end{1, 5}));
}

TEST(EpochToAsk, IsTheLatestEpoch) {
  EXPECT_FALSE(epoch_to_ask({}).has_value());
  EXPECT_EQ(epoch_to_ask({e(1, 0), e(7, 3)}), 7);
}

// ---- One step ----------------------------------------------------------------

TEST(DecideTruncation, UndefinedAnswerFallsBackToTheHighWatermark) {
  EXPECT_EQ(decide_truncation({e(1, 0)}, offset(10), offset(6), epoch_end{}), step(6, true));
  EXPECT_EQ(decide_truncation({e(1, 0)}, offset(10), offset(6), (epoch_end{3, -1})), step(6, true));
  // A high watermark above the log end (never expected) is clamped.
  EXPECT_EQ(decide_truncation({e(1, 0)}, offset(4), offset(6), epoch_end{}), step(4, true));
}

TEST(DecideTruncation, AnswerWithoutEpochIsTheLeadersEnd) {
  // OffsetForLeaderEpoch v0 carries no epoch.
  EXPECT_EQ(decide_truncation({e(1, 0)}, offset(10), offset(2), (epoch_end{-1, 7})), step(7, true));
  EXPECT_EQ(decide_truncation({e(1, 0)}, offset(5), offset(2), (epoch_end{-1, 7})), step(5, true));
}

TEST(DecideTruncation, SameEpochTakesTheSmallerEnd) {
  const E mine{e(1, 0), e(2, 4)};
  EXPECT_EQ(decide_truncation(mine, offset(10), offset(0), (epoch_end{2, 8})), step(8, true));
  EXPECT_EQ(decide_truncation(mine, offset(10), offset(0), (epoch_end{2, 12})), step(10, true));
  EXPECT_EQ(decide_truncation(mine, offset(10), offset(0), (epoch_end{1, 3})), step(3, true));
  EXPECT_EQ(decide_truncation(mine, offset(10), offset(0), (epoch_end{1, 6})), step(4, true));
}

TEST(DecideTruncation, EpochUnknownToTheFollowerAsksAgain) {
  // The leader answers epoch 3, which the follower never had: it cuts where
  // its largest epoch below (2) ends and asks again.
  const E mine{e(1, 0), e(2, 4), e(5, 7)};
  EXPECT_EQ(decide_truncation(mine, offset(10), offset(0), (epoch_end{3, 9})), step(7, false));
}

TEST(DecideTruncation, FollowerOnlyAboveTheAnswerTruncatesToItsFirstEpoch) {
  // Every epoch the follower holds (from offset 2, after retention) is above
  // the answered one: nothing from 2 on is the leader's.
  EXPECT_EQ(decide_truncation({e(4, 2)}, offset(8), offset(0), (epoch_end{2, 10})), step(2, true));
}

TEST(DecideTruncation, FollowerWithoutHistory) {
  // Empty history, non-empty log: it does not ask; the undefined answer
  // takes it to its high watermark.
  EXPECT_FALSE(epoch_to_ask({}).has_value());
  EXPECT_EQ(decide_truncation({}, offset(10), offset(3), epoch_end{}), step(3, true));
  // Told an end anyway, it trusts the leader's end.
  EXPECT_EQ(decide_truncation({}, offset(10), offset(3), (epoch_end{2, 6})), step(6, true));
  // An answer above its latest (a leader never gives it): the leader's end.
  EXPECT_EQ(decide_truncation({e(1, 0)}, offset(10), offset(3), (epoch_end{2, 6})), step(6, true));
}

// ---- The exchange, shape by shape -----------------------------------------------

TEST(TruncationExchange, IdenticalLogsKeepEverything) {
  const log_epochs l{0, 0, 1, 1, 1, 3};
  auto r = simulate(l, 4, l, 2);
  EXPECT_EQ(r.truncated_to, 6);
  EXPECT_EQ(r.rounds, 1);
}

TEST(TruncationExchange, DivergingTailInTheSameEpoch) {
  // The old leader of epoch 1 wrote 4-6; only this follower got them.
  const log_epochs leader{1, 1, 1, 1, 2, 2};
  const log_epochs follower{1, 1, 1, 1, 1, 1, 1};
  auto r = simulate(leader, 3, follower, 2);
  EXPECT_EQ(r.truncated_to, 4);
  EXPECT_EQ(r.rounds, 1);
  // And with the new leader not yet written in its epoch.
  EXPECT_EQ(simulate({1, 1, 1, 1}, 2, follower, 2).truncated_to, 4);
}

TEST(TruncationExchange, FollowerHasAnEpochTheLeaderNeverHad) {
  // The follower led epoch 2 briefly and wrote 3-5 that nobody copied.
  const log_epochs leader{1, 1, 1, 3, 3};
  const log_epochs follower{1, 1, 1, 2, 2, 2};
  auto r = simulate(leader, 3, follower, 3);
  EXPECT_EQ(r.truncated_to, 3);
  EXPECT_EQ(r.rounds, 1);
}

TEST(TruncationExchange, LeaderSkippedEpochs) {
  // truncation.h's worked example: follower epochs 1, 3; leader 1, 2, 4.
  const log_epochs leader{1, 1, 1, 1, 2, 2, 2, 4, 4};
  const log_epochs follower{1, 1, 1, 1, 1, 3, 3, 3};
  const E lh = with_current_epoch(history(leader), leader_epoch(5), offset(9));
  const E fh = history(follower);
  ASSERT_EQ(fh, (E{e(1, 0), e(3, 5)}));
  EXPECT_EQ(epoch_end_for(lh, offset(9), 3), (epoch_end{2, 7}));
  EXPECT_EQ(decide_truncation(fh, offset(8), offset(0), epoch_end{2, 7}), step(5, false));
  EXPECT_EQ(epoch_end_for(lh, offset(9), 1), (epoch_end{1, 4}));
  EXPECT_EQ(decide_truncation({e(1, 0)}, offset(5), offset(0), epoch_end{1, 4}), step(4, true));
  auto r = simulate(leader, 5, follower, 0);
  EXPECT_EQ(r.truncated_to, 4);
  EXPECT_EQ(r.rounds, 2);
}

TEST(TruncationExchange, EmptyFollowerLog) {
  auto r = simulate({1, 1, 2}, 3, {}, 0);
  EXPECT_EQ(r.truncated_to, 0);
  EXPECT_EQ(r.rounds, 1);
}

TEST(TruncationExchange, EmptyLeaderLog) {
  // The new leader has nothing (its current epoch starts at 0): the
  // follower keeps nothing, whatever its high watermark claims.
  auto r = simulate({}, 4, {1, 1, 2, 2}, 0);
  EXPECT_EQ(r.truncated_to, 0);
  // Without the leader's current epoch in its history the answer would be
  // undefined and the follower would fall back to its high watermark.
  const E bare = history({});
  EXPECT_EQ(epoch_end_for(bare, offset(0), 2), epoch_end{});
}

TEST(TruncationExchange, FollowerHistoryEmptyButLogNonEmpty) {
  // Its history lost (or never kept): it cannot ask, so it keeps what it
  // knows was committed, its high watermark, and no more.
  // (The simulator rebuilds histories from the logs, so this is one step.)
  const E none;
  EXPECT_FALSE(epoch_to_ask(none).has_value());
  EXPECT_EQ(decide_truncation(none, offset(6), offset(3), epoch_end{}), step(3, true));
}

TEST(TruncationExchange, ConvergesOverManyRounds) {
  // Each follower epoch after 1 is one the leader never had: every round
  // drops one of them, the last round settles inside epoch 1.
  const log_epochs leader{1, 1, 1, 2, 2, 4, 4, 6, 6, 8};
  const log_epochs follower{1, 1, 1, 1, 3, 3, 5, 5, 7, 7, 7};
  auto r = simulate(leader, 9, follower, 1);
  EXPECT_EQ(r.truncated_to, divergence(leader, follower));
  EXPECT_EQ(r.truncated_to, 3);
  EXPECT_EQ(r.rounds, 4);  // asks 7, 5, 3, then 1
}

// ---- Randomised histories ------------------------------------------------------

// Two logs as replication makes them: a common prefix, then each side's own
// tail. An epoch belongs to one leader, so the two tails share no epoch, and
// at most one of them goes on in the prefix's last epoch (the other side
// stopped copying it). The leader leads in an epoch above every one written;
// the follower's high watermark is at most the common prefix (what was
// committed).
struct generated {
  log_epochs leader, follower;
  int32_t leader_current = 0;
  int64_t follower_hw = 0;
};

generated generate(std::mt19937& rng) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  generated g;
  log_epochs prefix;
  int32_t epoch = pick(0, 2);
  for (int n = pick(0, 4); n > 0; --n) {
    for (int k = pick(1, 4); k > 0; --k) prefix.push_back(epoch);
    epoch += pick(1, 3);
  }
  g.leader = g.follower = prefix;
  const int32_t last = prefix.empty() ? -1 : prefix.back();
  if (last >= 0) {
    const int who = pick(0, 2);  // 0: nobody, 1: leader, 2: follower continues `last`
    log_epochs& side = who == 1 ? g.leader : g.follower;
    if (who != 0)
      for (int k = pick(1, 3); k > 0; --k) side.push_back(last);
  }
  // Later epochs: each written by the leader's side, the follower's, or
  // (a leader whose batches nobody kept) neither.
  for (int32_t ep = last + 1, n = pick(0, 6); n > 0; --n, ep += pick(1, 2)) {
    const int who = pick(0, 2);
    if (who == 2) continue;
    log_epochs& side = who == 0 ? g.leader : g.follower;
    for (int k = pick(1, 4); k > 0; --k) side.push_back(ep);
  }
  int32_t top = 0;
  for (int32_t x : g.leader) top = std::max(top, x);
  for (int32_t x : g.follower) top = std::max(top, x);
  g.leader_current = top + pick(1, 2);
  g.follower_hw = pick(0, static_cast<int>(divergence(g.leader, g.follower)));
  return g;
}

TEST(TruncationExchange, RandomHistoriesEndAtTheDivergencePoint) {
  std::mt19937 rng(20);  // issue 20; fixed so a failure replays
  for (int i = 0; i < 5000; ++i) {
    const generated g = generate(rng);
    SCOPED_TRACE("case " + std::to_string(i) + ": leader " + show(g.leader) + "(leads at " +
                 std::to_string(g.leader_current) + "), follower " + show(g.follower) + "hw " +
                 std::to_string(g.follower_hw));
    const int64_t diverge = divergence(g.leader, g.follower);
    const outcome r = simulate(g.leader, g.leader_current, g.follower, g.follower_hw);
    // Keeps no offset whose epoch differs from the leader's (or that the
    // leader lacks) ...
    for (int64_t o = 0; o < r.truncated_to; ++o) {
      ASSERT_LT(o, static_cast<int64_t>(g.leader.size())) << "kept offset " << o << " the leader lacks";
      ASSERT_EQ(g.leader[static_cast<size_t>(o)], g.follower[static_cast<size_t>(o)]) << "kept offset " << o;
    }
    // ... and throws away nothing they share.
    ASSERT_GE(r.truncated_to, diverge);
    ASSERT_EQ(r.truncated_to, diverge);
  }
}

}  // namespace
}  // namespace sluice::cluster
