#include "controller/placement.h"

#include <algorithm>
#include <tuple>

#include <fmt/format.h>

namespace sluice::controller {

namespace {

// The brokers of one assign_replicas call, sorted by id (index i is the
// i-th smallest id, so comparing indexes is comparing ids), with what this
// call and the cluster already placed on each.
struct placement {
  std::vector<int32_t> ids;
  std::vector<size_t> rack_of;        // broker index -> rack index
  std::vector<broker_load> cluster;   // broker index -> load before this call
  std::vector<broker_load> call;      // broker index -> placed by this call
  std::vector<int32_t> rack_leaders;  // rack index -> leaders placed by this call
};

status check_brokers(const std::vector<broker_desc>& live) {
  broker_set seen;
  for (const auto& b : live) {
    if (b.id < 0) return status(errc::invalid_argument, fmt::format("Invalid broker id {}.", b.id));
    if (!seen.insert(b.id).second) {
      return status(errc::invalid_argument, fmt::format("Broker {} is listed twice.", b.id));
    }
  }
  return {};
}

placement make_placement(const std::vector<broker_desc>& live, const cluster_load& load) {
  std::vector<broker_desc> sorted = live;
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  // Racks in a fixed order (no rack first) so rack indexes are deterministic.
  std::vector<std::optional<std::string>> racks;
  for (const auto& b : sorted) racks.push_back(b.rack);
  std::sort(racks.begin(), racks.end());
  racks.erase(std::unique(racks.begin(), racks.end()), racks.end());

  placement p;
  for (const auto& b : sorted) {
    p.ids.push_back(b.id);
    p.rack_of.push_back(
        static_cast<size_t>(std::lower_bound(racks.begin(), racks.end(), b.rack) - racks.begin()));
    auto it = load.find(b.id);
    p.cluster.push_back(it == load.end() ? broker_load{} : it->second);
  }
  p.call.assign(sorted.size(), broker_load{});
  p.rack_leaders.assign(racks.size(), 0);
  return p;
}

// The preferred leader of the next partition (rules 2, 3 and 4).
size_t choose_leader(const placement& p) {
  auto key = [&](size_t i) {
    return std::make_tuple(p.call[i].leaders, p.cluster[i].leaders,
                           p.call[i].replicas + p.cluster[i].replicas, p.rack_leaders[p.rack_of[i]],
                           i);
  };
  size_t best = 0;
  for (size_t i = 1; i < p.ids.size(); ++i) {
    if (key(i) < key(best)) best = i;
  }
  return best;
}

// The next follower of a partition whose replicas so far are `chosen`
// (broker indexes, the leader first): rules 1, 3 and 4.
size_t choose_follower(const placement& p, const std::vector<size_t>& chosen) {
  const size_t n = p.ids.size();
  std::vector<int32_t> rack_use(p.rack_leaders.size(), 0);  // one entry per rack
  for (size_t c : chosen) ++rack_use[p.rack_of[c]];
  auto key = [&](size_t i) {
    size_t after_leader = (i + n - chosen.front()) % n;
    return std::make_tuple(rack_use[p.rack_of[i]], p.call[i].replicas + p.cluster[i].replicas,
                           p.call[i].replicas, after_leader);
  };
  std::optional<size_t> best;
  for (size_t i = 0; i < n; ++i) {
    if (std::find(chosen.begin(), chosen.end(), i) != chosen.end()) continue;
    if (!best || key(i) < key(*best)) best = i;
  }
  SLUICE_ASSERT(best.has_value(), "replication factor above the broker count");
  return *best;
}

partition_assignment place_one(placement& p, int16_t replication_factor) {
  std::vector<size_t> chosen{choose_leader(p)};
  ++p.call[chosen.front()].leaders;
  ++p.rack_leaders[p.rack_of[chosen.front()]];
  ++p.call[chosen.front()].replicas;
  while (chosen.size() < static_cast<size_t>(replication_factor)) {
    size_t f = choose_follower(p, chosen);
    ++p.call[f].replicas;
    chosen.push_back(f);
  }
  partition_assignment out;
  for (size_t c : chosen) out.push_back(p.ids[c]);
  return out;
}

}  // namespace

result<std::vector<partition_assignment>> assign_replicas(const std::vector<broker_desc>& live,
                                                          int32_t first_partition, int32_t count,
                                                          int16_t replication_factor,
                                                          const cluster_load& load) {
  if (replication_factor < 1) {
    return error{errc::invalid_replication_factor, "Replication factor must be larger than 0."};
  }
  if (static_cast<size_t>(replication_factor) > live.size()) {
    return error{errc::invalid_replication_factor,
                 fmt::format("Replication factor: {} larger than available brokers: {}.",
                             replication_factor, live.size())};
  }
  if (count < 1) {
    return error{errc::invalid_partitions, "Number of partitions must be larger than 0."};
  }
  if (first_partition < 0) {
    return error{errc::invalid_argument,
                 fmt::format("Invalid first partition {}.", first_partition)};
  }
  SLUICE_TRY(check_brokers(live));

  placement p = make_placement(live, load);
  std::vector<partition_assignment> out;
  out.reserve(static_cast<size_t>(count));
  for (int32_t i = 0; i < count; ++i) out.push_back(place_one(p, replication_factor));
  return out;
}

void add_load(cluster_load& load, const std::vector<partition_assignment>& assignments) {
  for (const auto& replicas : assignments) {
    if (replicas.empty()) continue;
    ++load[replicas.front()].leaders;
    for (int32_t b : replicas) ++load[b].replicas;
  }
}

namespace {

status refuse(std::string message) {
  return status(errc::invalid_replica_assignment, std::move(message));
}

status check_replicas(const partition_assignment& replicas, const broker_set& registered) {
  if (replicas.empty())
    return refuse("The manual partition assignment includes an empty replica list.");
  broker_set seen;
  for (int32_t b : replicas) {
    if (!seen.insert(b).second) {
      return refuse(
          fmt::format("The manual partition assignment includes the broker {} more than once.", b));
    }
    if (!registered.contains(b)) {
      return refuse(fmt::format(
          "The manual partition assignment includes broker {}, but no such broker is registered.",
          b));
    }
  }
  return {};
}

}  // namespace

status validate_assignment(const std::vector<manual_assignment>& manual, int32_t first_partition,
                           const broker_set& registered,
                           std::optional<int16_t> replication_factor) {
  if (manual.empty()) return refuse("The manual partition assignment is empty.");
  std::optional<size_t> rf;
  if (replication_factor) rf = static_cast<size_t>(*replication_factor);
  std::set<int32_t> partitions;
  for (const auto& m : manual) {
    if (!partitions.insert(m.partition).second) {
      return refuse(fmt::format("Found multiple manual partition assignments for partition {}.",
                                m.partition));
    }
    SLUICE_TRY(check_replicas(m.replicas, registered));
    if (rf && m.replicas.size() != *rf) {
      return refuse(
          fmt::format("The manual partition assignment includes a partition with {} replica(s), "
                      "but this is not "
                      "consistent with previous partitions, which have {} replica(s).",
                      m.replicas.size(), *rf));
    }
    rf = m.replicas.size();
  }
  // Distinct indexes, so contiguous exactly when the smallest is first_partition
  // and the largest first_partition + size - 1.
  const int64_t last = int64_t{first_partition} + static_cast<int64_t>(manual.size()) - 1;
  if (*partitions.begin() != first_partition || *partitions.rbegin() != last) {
    return refuse(
        fmt::format("The manual partition assignment must name partitions {} to {} contiguously, "
                    "but names {} to {}.",
                    first_partition, last, *partitions.begin(), *partitions.rbegin()));
  }
  return {};
}

}  // namespace sluice::controller
