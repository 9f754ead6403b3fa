#include "controller/placement.h"

#include <algorithm>
#include <random>

#include <gtest/gtest.h>

namespace sluice::controller {
namespace {

std::vector<broker_desc> brokers(int32_t n) {
  std::vector<broker_desc> out;
  for (int32_t i = 0; i < n; ++i) out.push_back({i, std::nullopt});
  return out;
}

// Brokers 0..racks.size()-1, broker i on racks[i] ("" = no rack).
std::vector<broker_desc> racked(const std::vector<std::string>& racks) {
  std::vector<broker_desc> out;
  for (size_t i = 0; i < racks.size(); ++i) {
    out.push_back(
        {static_cast<int32_t>(i), racks[i].empty() ? std::nullopt : std::optional(racks[i])});
  }
  return out;
}

std::vector<partition_assignment> place(const std::vector<broker_desc>& live, int32_t count,
                                        int16_t rf, const cluster_load& load = {}) {
  auto r = assign_replicas(live, 0, count, rf, load);
  EXPECT_TRUE(r.ok()) << r.err().message;
  return r.ok() ? r.value() : std::vector<partition_assignment>{};
}

TEST(placement, refuses_replication_factor_out_of_range) {
  auto r = assign_replicas(brokers(2), 0, 1, 3, {});
  ASSERT_EQ(r.code(), errc::invalid_replication_factor);
  EXPECT_EQ(r.err().message, "Replication factor: 3 larger than available brokers: 2.");
  EXPECT_EQ(assign_replicas(brokers(2), 0, 1, 0, {}).code(), errc::invalid_replication_factor);
  EXPECT_EQ(assign_replicas(brokers(2), 0, 1, -1, {}).code(), errc::invalid_replication_factor);
  EXPECT_EQ(assign_replicas({}, 0, 1, 1, {}).code(), errc::invalid_replication_factor);
}

TEST(placement, refuses_bad_counts_and_brokers) {
  EXPECT_EQ(assign_replicas(brokers(3), 0, 0, 1, {}).code(), errc::invalid_partitions);
  EXPECT_EQ(assign_replicas(brokers(3), 0, -2, 1, {}).code(), errc::invalid_partitions);
  EXPECT_EQ(assign_replicas(brokers(3), -1, 1, 1, {}).code(), errc::invalid_argument);
  EXPECT_EQ(assign_replicas({{1, {}}, {1, {}}}, 0, 1, 1, {}).code(), errc::invalid_argument);
  EXPECT_EQ(assign_replicas({{-5, {}}, {1, {}}}, 0, 1, 1, {}).code(), errc::invalid_argument);
}

TEST(placement, fresh_cluster_is_a_ring) {
  auto a = place(brokers(3), 3, 3);
  EXPECT_EQ(a, (std::vector<partition_assignment>{{0, 1, 2}, {1, 2, 0}, {2, 0, 1}}));
}

TEST(placement, replicas_are_distinct_and_count_is_right) {
  for (int32_t n = 1; n <= 9; ++n) {
    for (int16_t rf = 1; rf <= n; ++rf) {
      auto a = place(brokers(n), 17, rf);
      ASSERT_EQ(a.size(), 17u);
      for (const auto& p : a) {
        ASSERT_EQ(p.size(), static_cast<size_t>(rf));
        broker_set s(p.begin(), p.end());
        EXPECT_EQ(s.size(), p.size()) << "n=" << n << " rf=" << rf;
      }
    }
  }
}

TEST(placement, one_partition_topics_spread_their_leaders) {
  cluster_load load;
  std::map<int32_t, int> leaders;
  for (int t = 0; t < 9; ++t) {
    auto a = place(brokers(3), 1, 2, load);
    add_load(load, a);
    ++leaders[a[0][0]];
  }
  EXPECT_EQ(leaders, (std::map<int32_t, int>{{0, 3}, {1, 3}, {2, 3}}));
}

TEST(placement, a_topic_spreads_over_a_fresh_broker_too) {
  // Broker 3 just joined: it gets its share of the topic, not the whole topic.
  cluster_load load{{0, {30, 10}}, {1, {30, 10}}, {2, {30, 10}}};
  auto a = place(brokers(4), 8, 1, load);
  std::map<int32_t, int> leaders;
  for (const auto& p : a) ++leaders[p[0]];
  EXPECT_EQ(leaders, (std::map<int32_t, int>{{0, 2}, {1, 2}, {2, 2}, {3, 2}}));
  // And the remainder of an uneven topic goes to the least loaded broker.
  EXPECT_EQ(place(brokers(4), 1, 1, load)[0], partition_assignment{3});
}

// The largest difference between brokers' counts in `load`.
std::pair<int32_t, int32_t> spread(const cluster_load& load, int32_t n) {
  int32_t lmin = INT32_MAX, lmax = 0, rmin = INT32_MAX, rmax = 0;
  for (int32_t b = 0; b < n; ++b) {
    auto it = load.find(b);
    broker_load l = it == load.end() ? broker_load{} : it->second;
    lmin = std::min(lmin, l.leaders), lmax = std::max(lmax, l.leaders);
    rmin = std::min(rmin, l.replicas), rmax = std::max(rmax, l.replicas);
  }
  return {lmax - lmin, rmax - rmin};
}

// Topics of 1..12 partitions created one after another, the load of each
// added before the next is placed.
std::pair<int32_t, int32_t> worst_spread(const std::vector<broker_desc>& live, int16_t rf,
                                         uint32_t seed) {
  std::mt19937 rng(seed);
  cluster_load load;
  std::pair<int32_t, int32_t> worst{0, 0};
  for (int t = 0; t < 200; ++t) {
    int32_t count = static_cast<int32_t>(rng() % 12) + 1;
    auto a = place(live, count, rf, load);
    add_load(load, a);
    auto s = spread(load, static_cast<int32_t>(live.size()));
    worst = {std::max(worst.first, s.first), std::max(worst.second, s.second)};
  }
  return worst;
}

TEST(placement, evenness_without_racks) {
  std::pair<int32_t, int32_t> worst{0, 0};
  for (int32_t n = 1; n <= 9; ++n) {
    for (int16_t rf = 1; rf <= std::min(3, n); ++rf) {
      for (uint32_t seed = 1; seed <= 5; ++seed) {
        auto w = worst_spread(brokers(n), rf, seed);
        EXPECT_LE(w.first, 1) << "leaders n=" << n << " rf=" << rf << " seed=" << seed;
        EXPECT_LE(w.second, 2) << "replicas n=" << n << " rf=" << rf << " seed=" << seed;
        worst = {std::max(worst.first, w.first), std::max(worst.second, w.second)};
      }
    }
  }
  std::printf("worst spread without racks: leaders %d, replicas %d\n", worst.first, worst.second);
}

// Rack layouts of 1..9 brokers: one rack each, a few racks of equal size,
// uneven racks, and some brokers without a rack.
std::vector<std::vector<std::string>> rack_layouts() {
  std::vector<std::vector<std::string>> out;
  for (int32_t n = 1; n <= 9; ++n) {
    for (int32_t racks = 1; racks <= n; ++racks) {
      std::vector<std::string> grouped, striped;
      for (int32_t i = 0; i < n; ++i) {
        grouped.push_back(std::string(1, static_cast<char>('a' + i * racks / n)));
        striped.push_back(std::string(1, static_cast<char>('a' + i % racks)));
      }
      out.push_back(grouped);
      out.push_back(striped);
    }
    std::vector<std::string> uneven(n, "a"), mixed;
    uneven.back() = "b";
    for (int32_t i = 0; i < n; ++i)
      mixed.push_back(i % 3 == 0 ? "" : std::string(1, static_cast<char>('a' + i % 2)));
    out.push_back(uneven);
    out.push_back(mixed);
  }
  return out;
}

TEST(placement, replicas_on_distinct_racks_as_far_as_racks_allow) {
  for (const auto& layout : rack_layouts()) {
    auto live = racked(layout);
    const size_t racks = std::set<std::string>(layout.begin(), layout.end()).size();
    for (int16_t rf = 1; rf <= std::min<int>(3, static_cast<int>(live.size())); ++rf) {
      cluster_load load;
      for (int t = 0; t < 20; ++t) {
        auto a = place(live, 1 + t % 12, rf, load);
        add_load(load, a);
        for (const auto& p : a) {
          std::set<std::string> used;
          for (int32_t b : p) used.insert(layout[static_cast<size_t>(b)]);
          ASSERT_EQ(used.size(), std::min(racks, p.size()))
              << "brokers " << live.size() << " racks " << racks << " rf " << rf;
        }
      }
    }
  }
}

TEST(placement, leaders_alternate_between_racks) {
  // Brokers in id order fill rack a first; leaders still alternate.
  auto live = racked({"a", "a", "a", "b", "b", "b"});
  auto a = place(live, 6, 2);
  std::string leader_racks;
  for (const auto& p : a) leader_racks += p[0] <= 2 ? 'a' : 'b';
  EXPECT_EQ(leader_racks, "ababab");
}

TEST(placement, missing_rack_is_a_rack_of_its_own) {
  auto live = racked({"a", "a", "", ""});
  for (const auto& p : place(live, 8, 2)) {
    EXPECT_NE(p[0] <= 1, p[1] <= 1) << p[0] << "," << p[1];
  }
}

TEST(placement, evenness_with_balanced_racks) {
  std::pair<int32_t, int32_t> worst{0, 0};
  for (int32_t racks = 2; racks <= 3; ++racks) {
    for (int32_t per_rack = 1; per_rack <= 3; ++per_rack) {
      std::vector<std::string> layout;
      for (int32_t i = 0; i < racks * per_rack; ++i)
        layout.push_back(std::string(1, static_cast<char>('a' + i % racks)));
      for (int16_t rf = 1; rf <= std::min(3, racks * per_rack); ++rf) {
        for (uint32_t seed = 1; seed <= 5; ++seed) {
          auto w = worst_spread(racked(layout), rf, seed);
          EXPECT_LE(w.first, 1) << "leaders racks=" << racks << "x" << per_rack << " rf=" << rf;
          EXPECT_LE(w.second, 2) << "replicas racks=" << racks << "x" << per_rack << " rf=" << rf;
          worst = {std::max(worst.first, w.first), std::max(worst.second, w.second)};
        }
      }
    }
  }
  std::printf("worst spread with balanced racks: leaders %d, replicas %d\n", worst.first,
              worst.second);
}

TEST(placement, deterministic_whatever_the_broker_order) {
  auto live = racked({"a", "b", "c", "a", "b", "", "c"});
  cluster_load load{{0, {5, 2}}, {3, {1, 0}}, {6, {9, 4}}};
  auto first = place(live, 12, 3, load);
  std::mt19937 rng(7);
  for (int i = 0; i < 20; ++i) {
    std::shuffle(live.begin(), live.end(), rng);
    EXPECT_EQ(place(live, 12, 3, load), first);
  }
  // first_partition only names the partitions.
  auto shifted = assign_replicas(live, 40, 12, 3, load);
  ASSERT_TRUE(shifted.ok());
  EXPECT_EQ(shifted.value(), first);
}

TEST(placement, add_load_counts_replicas_and_preferred_leaders) {
  cluster_load load{{1, {1, 1}}};
  add_load(load, {{1, 2}, {2, 3}});
  EXPECT_EQ(load[1].replicas, 2);
  EXPECT_EQ(load[1].leaders, 2);
  EXPECT_EQ(load[2].replicas, 2);
  EXPECT_EQ(load[2].leaders, 1);
  EXPECT_EQ(load[3].replicas, 1);
  EXPECT_EQ(load[3].leaders, 0);
}

// validate_assignment: one test per INVALID_REPLICA_ASSIGNMENT case.
const broker_set registered{1, 2, 3};

TEST(validate_assignment, accepts_a_good_assignment) {
  EXPECT_TRUE(validate_assignment({{0, {1, 2}}, {1, {2, 3}}, {2, {3, 1}}}, 0, registered).ok());
  // In any order, starting from the first new partition (CreatePartitions).
  EXPECT_TRUE(validate_assignment({{4, {1}}, {3, {2}}}, 3, registered, int16_t{1}).ok());
}

TEST(validate_assignment, refuses_no_partitions) {
  EXPECT_EQ(validate_assignment({}, 0, registered).code(), errc::invalid_replica_assignment);
}

TEST(validate_assignment, refuses_an_empty_replica_list) {
  auto s = validate_assignment({{0, {1}}, {1, {}}}, 0, registered);
  EXPECT_EQ(s.code(), errc::invalid_replica_assignment);
  EXPECT_EQ(s.err().message, "The manual partition assignment includes an empty replica list.");
}

TEST(validate_assignment, refuses_a_broker_twice_in_a_partition) {
  auto s = validate_assignment({{0, {1, 2, 1}}}, 0, registered);
  EXPECT_EQ(s.code(), errc::invalid_replica_assignment);
  EXPECT_EQ(s.err().message,
            "The manual partition assignment includes the broker 1 more than once.");
}

TEST(validate_assignment, refuses_an_unknown_broker) {
  auto s = validate_assignment({{0, {1, 4}}}, 0, registered);
  EXPECT_EQ(s.code(), errc::invalid_replica_assignment);
  EXPECT_EQ(s.err().message,
            "The manual partition assignment includes broker 4, but no such broker is registered.");
  EXPECT_EQ(validate_assignment({{0, {-1}}}, 0, registered).code(),
            errc::invalid_replica_assignment);
}

TEST(validate_assignment, refuses_differing_replica_counts) {
  EXPECT_EQ(validate_assignment({{0, {1, 2}}, {1, {3}}}, 0, registered).code(),
            errc::invalid_replica_assignment);
  // Against the topic's replication factor (CreatePartitions).
  EXPECT_EQ(validate_assignment({{3, {1}}}, 3, registered, int16_t{2}).code(),
            errc::invalid_replica_assignment);
}

TEST(validate_assignment, refuses_a_partition_given_twice) {
  auto s = validate_assignment({{0, {1}}, {0, {2}}}, 0, registered);
  EXPECT_EQ(s.code(), errc::invalid_replica_assignment);
  EXPECT_EQ(s.err().message, "Found multiple manual partition assignments for partition 0.");
}

TEST(validate_assignment, refuses_partitions_not_contiguous_from_the_first_new_one) {
  EXPECT_EQ(validate_assignment({{0, {1}}, {2, {2}}}, 0, registered).code(),
            errc::invalid_replica_assignment);
  EXPECT_EQ(validate_assignment({{1, {1}}, {2, {2}}}, 0, registered).code(),
            errc::invalid_replica_assignment);
  EXPECT_EQ(validate_assignment({{2, {1}}, {3, {2}}}, 3, registered).code(),
            errc::invalid_replica_assignment);
  EXPECT_EQ(validate_assignment({{-1, {1}}, {0, {2}}}, 0, registered).code(),
            errc::invalid_replica_assignment);
}

}  // namespace
}  // namespace sluice::controller
