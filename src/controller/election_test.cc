#include "controller/election.h"

#include <algorithm>
#include <map>
#include <random>

#include <gtest/gtest.h>

#include "controller/placement.h"

namespace sluice::controller {
namespace {

partition_state st(int32_t leader, int32_t leader_epoch, std::vector<int32_t> isr,
                   int32_t partition_epoch) {
  return partition_state{leader, leader_epoch, std::move(isr), partition_epoch};
}

const partition_assignment abc{1, 2, 3};

// --- on_brokers_changed ---

TEST(on_brokers_changed, nothing_changes_when_all_live) {
  EXPECT_FALSE(on_brokers_changed(st(1, 5, {1, 2, 3}, 7), abc, {1, 2, 3}, false));
  // A replica outside the ISR coming and going changes nothing either.
  EXPECT_FALSE(on_brokers_changed(st(1, 5, {1, 2}, 7), abc, {1, 2}, false));
}

TEST(on_brokers_changed, dead_follower_leaves_the_isr) {
  const auto before = st(1, 5, {1, 2, 3}, 7);
  auto c = on_brokers_changed(before, abc, {1, 3}, false);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->next, st(1, 5, {1, 3}, 8));
  EXPECT_EQ(c->leadership, leader_change::none);
  EXPECT_EQ(before, st(1, 5, {1, 2, 3}, 7));  // the input is not touched
}

TEST(on_brokers_changed, dead_leader_gives_way_to_the_first_live_isr_member_in_assignment_order) {
  auto c = on_brokers_changed(st(1, 5, {1, 2, 3}, 7), abc, {2, 3}, false);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->next, st(2, 6, {2, 3}, 8));
  EXPECT_EQ(c->leadership, leader_change::clean);
  // Assignment order, not ISR order or id order.
  c = on_brokers_changed(st(1, 5, {1, 2, 3}, 7), {1, 3, 2}, {2, 3}, false);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->next.leader, 3);
}

TEST(on_brokers_changed, clean_election_skips_live_replicas_outside_the_isr) {
  auto c = on_brokers_changed(st(1, 5, {1, 3}, 7), abc, {2, 3}, false);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->next, st(3, 6, {3}, 8));
  EXPECT_EQ(c->leadership, leader_change::clean);
}

TEST(on_brokers_changed, last_isr_member_stays_in_the_isr_and_the_partition_goes_offline) {
  auto c = on_brokers_changed(st(1, 5, {1}, 7), abc, {2, 3}, false);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->next, st(-1, 6, {1}, 8));
  EXPECT_EQ(c->leadership, leader_change::offline);
  // Nothing more happens while it stays away.
  EXPECT_FALSE(on_brokers_changed(c->next, abc, {2, 3}, false));
  EXPECT_FALSE(on_brokers_changed(c->next, abc, {}, false));
}

TEST(on_brokers_changed, last_isr_member_comes_back_and_leads_with_a_higher_epoch) {
  auto off = on_brokers_changed(st(1, 5, {1}, 7), abc, {2, 3}, false);
  ASSERT_TRUE(off);
  auto back = on_brokers_changed(off->next, abc, {1, 2, 3}, false);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->next, st(1, 7, {1}, 9));
  EXPECT_EQ(back->leadership, leader_change::clean);
}

TEST(on_brokers_changed, whole_isr_lost_at_once_stays_whole) {
  // Every ISR member holds every committed record: any of them may lead.
  auto off = on_brokers_changed(st(1, 5, {1, 2}, 7), abc, {3}, false);
  ASSERT_TRUE(off);
  EXPECT_EQ(off->next, st(-1, 6, {1, 2}, 8));
  auto back = on_brokers_changed(off->next, abc, {2, 3}, false);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->next, st(2, 7, {2}, 9));
  EXPECT_EQ(back->leadership, leader_change::clean);
}

TEST(on_brokers_changed, unclean_election_when_allowed) {
  auto c = on_brokers_changed(st(1, 5, {1}, 7), abc, {2, 3}, true);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->next, st(2, 6, {2}, 8));
  EXPECT_EQ(c->leadership, leader_change::unclean);
  c = on_brokers_changed(st(1, 5, {1}, 7), {1, 3, 2}, {2, 3}, true);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->next.leader, 3);
  // From offline too, once a replica outside the ISR is live.
  c = on_brokers_changed(st(-1, 6, {1}, 8), abc, {3}, true);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->next, st(3, 7, {3}, 9));
  EXPECT_EQ(c->leadership, leader_change::unclean);
}

TEST(on_brokers_changed, unclean_allowed_still_prefers_a_clean_leader) {
  auto c = on_brokers_changed(st(1, 5, {1, 3}, 7), abc, {2, 3}, true);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->next, st(3, 6, {3}, 8));
  EXPECT_EQ(c->leadership, leader_change::clean);
}

TEST(on_brokers_changed, offline_when_no_replica_is_live) {
  auto c = on_brokers_changed(st(1, 5, {1, 2}, 7), abc, {}, true);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->next, st(-1, 6, {1, 2}, 8));
  EXPECT_EQ(c->leadership, leader_change::offline);
}

// --- controlled_shutdown ---

TEST(controlled_shutdown, leader_hands_over_to_the_first_live_isr_member) {
  auto c = controlled_shutdown(st(1, 5, {1, 2, 3}, 7), abc, {1, 2, 3}, 1);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->next, st(2, 6, {2, 3}, 8));
  EXPECT_EQ(c->leadership, leader_change::clean);
  // A dead ISR member is passed over.
  c = controlled_shutdown(st(1, 5, {1, 2, 3}, 7), abc, {1, 3}, 1);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->next, st(3, 6, {2, 3}, 8));
}

TEST(controlled_shutdown, follower_leaves_the_isr) {
  auto c = controlled_shutdown(st(1, 5, {1, 2, 3}, 7), abc, {1, 2, 3}, 2);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->next, st(1, 5, {1, 3}, 8));
  EXPECT_EQ(c->leadership, leader_change::none);
  // A follower outside the ISR, or a broker without a replica: no change.
  EXPECT_FALSE(controlled_shutdown(st(1, 5, {1, 3}, 7), abc, {1, 2, 3}, 2));
  EXPECT_FALSE(controlled_shutdown(st(1, 5, {1, 2, 3}, 7), abc, {1, 2, 3, 4}, 4));
}

TEST(controlled_shutdown, only_replica_goes_offline_and_stays_in_the_isr) {
  auto c = controlled_shutdown(st(1, 5, {1}, 7), {1}, {1}, 1);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->next, st(-1, 6, {1}, 8));
  EXPECT_EQ(c->leadership, leader_change::offline);
  // And it comes back as leader when it returns.
  auto back = on_brokers_changed(c->next, {1}, {1}, false);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->next, st(1, 7, {1}, 9));
}

TEST(controlled_shutdown, leadership_never_goes_to_the_leaving_broker) {
  // The other ISR member is dead: offline rather than stay on a broker that stops.
  auto c = controlled_shutdown(st(1, 5, {1, 2}, 7), abc, {1, 3}, 1);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->next, st(-1, 6, {2}, 8));
  EXPECT_EQ(c->leadership, leader_change::offline);
  // Offline already, the leaving last member is not elected.
  EXPECT_FALSE(controlled_shutdown(st(-1, 6, {1}, 8), abc, {1, 2, 3}, 1));
}

// --- elect_preferred ---

TEST(elect_preferred, preferred_replica_takes_over) {
  auto c = elect_preferred(st(2, 5, {1, 2, 3}, 7), abc, {1, 2, 3});
  ASSERT_TRUE(c);
  EXPECT_EQ(c->next, st(1, 6, {1, 2, 3}, 8));
  EXPECT_EQ(c->leadership, leader_change::clean);
  // Also from offline.
  c = elect_preferred(st(-1, 5, {1}, 7), abc, {1});
  ASSERT_TRUE(c);
  EXPECT_EQ(c->next, st(1, 6, {1}, 8));
}

TEST(elect_preferred, nothing_when_already_leader_dead_or_out_of_the_isr) {
  EXPECT_FALSE(elect_preferred(st(1, 5, {1, 2, 3}, 7), abc, {1, 2, 3}));
  EXPECT_FALSE(elect_preferred(st(2, 5, {1, 2, 3}, 7), abc, {2, 3}));
  EXPECT_FALSE(elect_preferred(st(2, 5, {2, 3}, 7), abc, {1, 2, 3}));
  EXPECT_FALSE(elect_preferred(st(2, 5, {2}, 7), {}, {1, 2, 3}));
}

// --- should_rebalance ---

// `n` partitions with preferred leader `preferred`, the first `moved` of
// them led by `other`.
std::vector<partition_view> led(int32_t preferred, int32_t other, int n, int moved) {
  std::vector<partition_view> out;
  for (int i = 0; i < n; ++i) {
    out.push_back(
        {{preferred, other}, st(i < moved ? other : preferred, 1, {preferred, other}, 1)});
  }
  return out;
}

TEST(should_rebalance, not_above_the_threshold) {
  EXPECT_TRUE(should_rebalance(led(1, 2, 10, 0), {1, 2}).empty());
  EXPECT_TRUE(should_rebalance(led(1, 2, 10, 1), {1, 2}).empty());  // 10% is not above 10%
}

TEST(should_rebalance, above_the_threshold_moves_the_broker_s_partitions) {
  EXPECT_EQ(should_rebalance(led(1, 2, 10, 2), {1, 2}), (std::vector<size_t>{0, 1}));
  EXPECT_EQ(should_rebalance(led(1, 2, 10, 1), {1, 2}, 0), (std::vector<size_t>{0}));
  EXPECT_TRUE(should_rebalance(led(1, 2, 10, 5), {1, 2}, 50).empty());
}

TEST(should_rebalance, per_broker_and_only_partitions_that_can_move) {
  auto parts = led(1, 2, 10, 1);  // broker 1: 10%, balanced enough
  auto more = led(3, 4, 4, 2);    // broker 3: 50%
  parts.insert(parts.end(), more.begin(), more.end());
  EXPECT_EQ(should_rebalance(parts, {1, 2, 3, 4}), (std::vector<size_t>{10, 11}));
  // The preferred replica out of the ISR cannot lead: counted, not moved.
  parts[11].state.isr = {4};
  EXPECT_EQ(should_rebalance(parts, {1, 2, 3, 4}), (std::vector<size_t>{10}));
  // Nor a dead one.
  EXPECT_TRUE(should_rebalance(parts, {1, 2, 4}).empty());
}

// --- validate_isr_change ---

const partition_state current = st(1, 5, {1, 2}, 7);
const broker_set all{1, 2, 3};

TEST(validate_isr_change, accepts_the_leader_s_current_request) {
  EXPECT_TRUE(validate_isr_change(current, 1, 5, 7, {1, 2, 3}, abc, all).ok());
  EXPECT_TRUE(validate_isr_change(current, 1, 5, 7, {1}, abc, all).ok());
  EXPECT_EQ(apply_isr_change(current, {1, 2, 3}), st(1, 5, {1, 2, 3}, 8));
  // The same request again is now one version behind.
  EXPECT_EQ(validate_isr_change(apply_isr_change(current, {1, 2, 3}), 1, 5, 7, {1, 2, 3}, abc, all)
                .code(),
            errc::invalid_update_version);
}

TEST(validate_isr_change, newer_epochs_mean_this_controller_is_behind) {
  EXPECT_EQ(validate_isr_change(current, 1, 6, 7, {1, 2}, abc, all).code(), errc::not_controller);
  EXPECT_EQ(validate_isr_change(current, 1, 5, 8, {1, 2}, abc, all).code(), errc::not_controller);
}

TEST(validate_isr_change, fences_an_old_leader_epoch_or_a_non_leader) {
  EXPECT_EQ(validate_isr_change(current, 1, 4, 7, {1, 2}, abc, all).code(),
            errc::fenced_leader_epoch);
  EXPECT_EQ(validate_isr_change(current, 2, 5, 7, {1, 2}, abc, all).code(),
            errc::fenced_leader_epoch);
  EXPECT_EQ(validate_isr_change(st(-1, 5, {1}, 7), 1, 5, 7, {1}, abc, all).code(),
            errc::fenced_leader_epoch);
}

TEST(validate_isr_change, refuses_an_old_partition_epoch) {
  EXPECT_EQ(validate_isr_change(current, 1, 5, 6, {1, 2}, abc, all).code(),
            errc::invalid_update_version);
}

TEST(validate_isr_change, refuses_a_malformed_isr) {
  EXPECT_EQ(validate_isr_change(current, 1, 5, 7, {1, 1}, abc, all).code(), errc::invalid_argument);
  EXPECT_EQ(validate_isr_change(current, 1, 5, 7, {1, 4}, abc, {1, 2, 3, 4}).code(),
            errc::invalid_argument);
  EXPECT_EQ(validate_isr_change(current, 1, 5, 7, {2, 3}, abc, all).code(), errc::invalid_argument);
  EXPECT_EQ(validate_isr_change(current, 1, 5, 7, {}, abc, all).code(), errc::invalid_argument);
}

TEST(validate_isr_change, refuses_an_ineligible_broker) {
  EXPECT_EQ(validate_isr_change(current, 1, 5, 7, {1, 2, 3}, abc, {1, 2}).code(),
            errc::ineligible_replica);
}

// --- a seeded random walk ---

struct walk {
  std::mt19937 rng;
  bool unclean_allowed;
  broker_set live;
  std::vector<partition_assignment> assignments;
  std::vector<partition_state> states;
  std::map<leader_change, int> seen;  // how often each kind of change happened

  uint32_t pick(size_t n) { return static_cast<uint32_t>(rng() % n); }

  int32_t random_of(const broker_set& s) { return *std::next(s.begin(), pick(s.size())); }

  // Checks one change against the rules and the invariants, then applies it.
  void apply(size_t i, const std::optional<partition_change>& c) {
    const partition_state& before = states[i];
    if (!c) return;
    const partition_state& next = c->next;
    ++seen[c->leadership];
    ASSERT_NE(next, before) << "a change that changes nothing";
    ASSERT_EQ(next.partition_epoch, before.partition_epoch + 1);
    ASSERT_EQ(next.leader_epoch, before.leader_epoch + (next.leader != before.leader ? 1 : 0));
    ASSERT_EQ(c->leadership == leader_change::none, next.leader == before.leader);
    if (c->leadership == leader_change::clean) {
      ASSERT_NE(std::find(before.isr.begin(), before.isr.end(), next.leader), before.isr.end())
          << "a clean election outside the ISR";
    }
    if (c->leadership == leader_change::unclean) {
      ASSERT_TRUE(unclean_allowed);
      ASSERT_EQ(next.isr, std::vector<int32_t>{next.leader});
    }
    if (c->leadership == leader_change::offline) {
      ASSERT_EQ(next.leader, -1);
    }
    states[i] = next;
  }

  void check_invariants() {
    for (size_t i = 0; i < states.size(); ++i) {
      const auto& s = states[i];
      const auto& a = assignments[i];
      ASSERT_FALSE(s.isr.empty());
      ASSERT_EQ(broker_set(s.isr.begin(), s.isr.end()).size(), s.isr.size());
      for (int32_t b : s.isr) ASSERT_NE(std::find(a.begin(), a.end(), b), a.end());
      if (s.leader != -1) {
        ASSERT_TRUE(live.contains(s.leader));
        ASSERT_NE(std::find(s.isr.begin(), s.isr.end(), s.leader), s.isr.end());
      }
    }
  }

  void brokers_changed() {
    for (size_t i = 0; i < states.size(); ++i)
      apply(i, on_brokers_changed(states[i], assignments[i], live, unclean_allowed));
  }

  void step() {
    switch (pick(5)) {
      case 0:  // a broker dies
        if (!live.empty()) live.erase(random_of(live));
        brokers_changed();
        break;
      case 1: {  // a broker comes back
        broker_set dead;
        for (int32_t b = 0; b < 5; ++b) {
          if (!live.contains(b)) dead.insert(b);
        }
        if (!dead.empty()) live.insert(random_of(dead));
        brokers_changed();
        break;
      }
      case 2: {  // a controlled shutdown, then the broker stops
        if (live.empty()) break;
        int32_t leaving = random_of(live);
        for (size_t i = 0; i < states.size(); ++i)
          apply(i, controlled_shutdown(states[i], assignments[i], live, leaving));
        check_invariants();
        live.erase(leaving);
        brokers_changed();
        break;
      }
      case 3:  // a live replica catches up and the leader adds it to the ISR
        for (size_t i = 0; i < states.size(); ++i) catch_up(i);
        break;
      case 4:  // auto.leader.rebalance
        for (size_t i : should_rebalance(views(), live))
          apply(i, elect_preferred(states[i], assignments[i], live));
        break;
    }
  }

  void catch_up(size_t i) {
    const auto& s = states[i];
    if (s.leader == -1 || pick(2) == 0) return;
    for (int32_t r : assignments[i]) {
      if (!live.contains(r) || std::find(s.isr.begin(), s.isr.end(), r) != s.isr.end()) continue;
      std::vector<int32_t> isr = s.isr;
      isr.push_back(r);
      ASSERT_TRUE(validate_isr_change(s, s.leader, s.leader_epoch, s.partition_epoch, isr,
                                      assignments[i], live)
                      .ok());
      partition_state next = apply_isr_change(s, isr);
      apply(i, partition_change{next, leader_change::none});
      return;
    }
  }

  std::vector<partition_view> views() const {
    std::vector<partition_view> out;
    for (size_t i = 0; i < states.size(); ++i) out.push_back({assignments[i], states[i]});
    return out;
  }
};

// --- elect_on_request (ElectLeaders) ---

TEST(elect_on_request, preferred_says_why_it_does_not_move) {
  const auto pref = requested_election::preferred;
  EXPECT_EQ(elect_on_request(pref, st(1, 5, {1, 2, 3}, 7), abc, {1, 2, 3}).code(), errc::election_not_needed);
  EXPECT_EQ(elect_on_request(pref, st(2, 5, {2, 3}, 7), abc, {1, 2, 3}).code(),
            errc::preferred_leader_not_available);  // out of sync
  EXPECT_EQ(elect_on_request(pref, st(2, 5, {1, 2, 3}, 7), abc, {2, 3}).code(),
            errc::preferred_leader_not_available);  // not live
  auto c = elect_on_request(pref, st(2, 5, {1, 2, 3}, 7), abc, {1, 2, 3});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->next, st(1, 6, {1, 2, 3}, 8));
  EXPECT_EQ(c->leadership, leader_change::clean);
}

TEST(elect_on_request, unclean_prefers_the_isr_and_else_takes_any_live_replica) {
  const auto unclean = requested_election::unclean;
  EXPECT_EQ(elect_on_request(unclean, st(2, 5, {2}, 7), abc, {1, 2}).code(), errc::election_not_needed);
  // Offline, an ISR member live again: a clean election, even when asked for
  // an unclean one.
  auto c = elect_on_request(unclean, st(-1, 6, {2, 3}, 8), abc, {1, 3});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->next, st(3, 7, {3}, 9));
  EXPECT_EQ(c->leadership, leader_change::clean);
  // Offline with no ISR member live: the first live replica, alone in the ISR.
  c = elect_on_request(unclean, st(-1, 6, {2}, 8), abc, {1, 3});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->next, st(1, 7, {1}, 9));
  EXPECT_EQ(c->leadership, leader_change::unclean);
  EXPECT_EQ(elect_on_request(unclean, st(-1, 6, {2}, 8), abc, {4}).code(), errc::eligible_leaders_not_available);
}

TEST(election, random_walk_keeps_the_invariants) {
  std::map<leader_change, int> seen;
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    walk w{std::mt19937(seed), seed % 2 == 0, {0, 1, 2, 3, 4}, {}, {}};
    auto placed = assign_replicas({{0, {}}, {1, {}}, {2, {}}, {3, {}}, {4, {}}}, 0, 30, 3, {});
    ASSERT_TRUE(placed.ok());
    w.assignments = placed.value();
    for (const auto& a : w.assignments) w.states.push_back(st(a.front(), 0, a, 0));
    for (int i = 0; i < 500; ++i) {
      w.step();
      if (HasFatalFailure()) return;
      w.check_invariants();
      if (HasFatalFailure()) return;
    }
    for (const auto& [kind, n] : w.seen) seen[kind] += n;
  }
  // The walk reaches every kind of change, or it proves little.
  for (auto kind : {leader_change::none, leader_change::clean, leader_change::unclean,
                    leader_change::offline}) {
    EXPECT_GT(seen[kind], 100) << static_cast<int>(kind);
  }
  std::printf("random walk: %d ISR-only, %d clean, %d unclean, %d offline changes\n",
              seen[leader_change::none], seen[leader_change::clean], seen[leader_change::unclean],
              seen[leader_change::offline]);
}

}  // namespace
}  // namespace sluice::controller
