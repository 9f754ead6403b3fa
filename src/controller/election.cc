#include "controller/election.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

namespace sluice::controller {

namespace {

bool contains(const std::vector<int32_t>& v, int32_t b) {
  return std::find(v.begin(), v.end(), b) != v.end();
}

// The first replica in assignment order that passes `ok`, or -1.
template <class Pred>
int32_t first_replica(const partition_assignment& assignment, Pred ok) {
  for (int32_t r : assignment) {
    if (ok(r)) return r;
  }
  return partition_state::no_leader;
}

// The change from `state` to a leader and ISR, with the epochs bumped as
// Kafka's rules say, or nullopt when both are as they were.
std::optional<partition_change> make_change(const partition_state& state, int32_t leader,
                                            std::vector<int32_t> isr, leader_change kind) {
  SLUICE_ASSERT(!isr.empty(), "the ISR never becomes empty");
  SLUICE_ASSERT(leader == partition_state::no_leader || contains(isr, leader),
                "a leader outside its ISR");
  if (leader == state.leader && isr == state.isr) return std::nullopt;
  partition_change c;
  c.next.leader = leader;
  c.next.isr = std::move(isr);
  c.next.leader_epoch = state.leader_epoch + (leader != state.leader ? 1 : 0);
  c.next.partition_epoch = state.partition_epoch + 1;
  c.leadership = leader == state.leader ? leader_change::none : kind;
  return c;
}

}  // namespace

std::optional<partition_change> on_brokers_changed(const partition_state& state,
                                                   const partition_assignment& assignment,
                                                   const broker_set& live, bool unclean_allowed) {
  SLUICE_ASSERT(!state.isr.empty(), "the ISR never becomes empty");
  std::vector<int32_t> isr;
  for (int32_t b : state.isr) {
    if (live.contains(b)) isr.push_back(b);
  }
  // Every ISR member holds every committed record, so with none live the
  // whole ISR stays: whichever comes back first can lead without loss.
  if (isr.empty()) isr = state.isr;

  int32_t leader = state.leader;
  if (leader != partition_state::no_leader && live.contains(leader) && contains(isr, leader)) {
    return make_change(state, leader, std::move(isr), leader_change::none);
  }
  leader =
      first_replica(assignment, [&](int32_t r) { return live.contains(r) && contains(isr, r); });
  if (leader != partition_state::no_leader)
    return make_change(state, leader, std::move(isr), leader_change::clean);
  if (unclean_allowed) {
    leader = first_replica(assignment, [&](int32_t r) { return live.contains(r); });
    if (leader != partition_state::no_leader)
      return make_change(state, leader, {leader}, leader_change::unclean);
  }
  return make_change(state, partition_state::no_leader, std::move(isr), leader_change::offline);
}

std::optional<partition_change> controlled_shutdown(const partition_state& state,
                                                    const partition_assignment& assignment,
                                                    const broker_set& live, int32_t leaving) {
  SLUICE_ASSERT(!state.isr.empty(), "the ISR never becomes empty");
  std::vector<int32_t> isr = state.isr;
  if (isr.size() > 1) std::erase(isr, leaving);

  int32_t leader = state.leader;
  leader_change kind = leader_change::none;
  if (leader == leaving) {
    leader = first_replica(assignment, [&](int32_t r) {
      return r != leaving && live.contains(r) && contains(state.isr, r);
    });
    kind = leader == partition_state::no_leader ? leader_change::offline : leader_change::clean;
  }
  return make_change(state, leader, std::move(isr), kind);
}

std::optional<partition_change> elect_preferred(const partition_state& state,
                                                const partition_assignment& assignment,
                                                const broker_set& live) {
  if (assignment.empty()) return std::nullopt;
  const int32_t preferred = assignment.front();
  if (preferred == state.leader || !live.contains(preferred) || !contains(state.isr, preferred))
    return std::nullopt;
  return make_change(state, preferred, state.isr, leader_change::clean);
}

result<partition_change> elect_on_request(requested_election kind, const partition_state& state,
                                          const partition_assignment& assignment, const broker_set& live) {
  SLUICE_ASSERT(!state.isr.empty(), "the ISR never becomes empty");
  if (kind == requested_election::preferred) {
    if (assignment.empty()) return error{errc::preferred_leader_not_available, "the partition has no replicas"};
    const int32_t preferred = assignment.front();
    if (preferred == state.leader) {
      return error{errc::election_not_needed, fmt::format("The preferred replica {} already leads.", preferred)};
    }
    if (!live.contains(preferred) || !contains(state.isr, preferred)) {
      return error{errc::preferred_leader_not_available,
                   fmt::format("The preferred replica {} is {}.", preferred,
                               live.contains(preferred) ? "not in the ISR" : "not live")};
    }
    auto change = elect_preferred(state, assignment, live);
    SLUICE_ASSERT(change.has_value(), "a live in-sync preferred replica that does not lead is elected");
    return *change;
  }
  if (state.leader != partition_state::no_leader && live.contains(state.leader) && contains(state.isr, state.leader)) {
    return error{errc::election_not_needed, fmt::format("Broker {} leads and is in sync.", state.leader)};
  }
  auto change = on_brokers_changed(state, assignment, live, /*unclean_allowed=*/true);
  // No change at all: an offline partition that stays offline.
  if (!change || change->next.leader == partition_state::no_leader) {
    return error{errc::eligible_leaders_not_available, "No replica of the partition is live."};
  }
  return *change;
}

std::vector<size_t> should_rebalance(const std::vector<partition_view>& partitions,
                                     const broker_set& live, int32_t imbalance_percentage) {
  struct tally {
    int64_t preferred = 0;        // partitions the broker is preferred leader of
    std::vector<size_t> not_led;  // ... that it does not lead
  };
  std::map<int32_t, tally> brokers;
  for (size_t i = 0; i < partitions.size(); ++i) {
    const auto& p = partitions[i];
    if (p.assignment.empty()) continue;
    tally& t = brokers[p.assignment.front()];
    ++t.preferred;
    if (p.state.leader != p.assignment.front()) t.not_led.push_back(i);
  }
  std::vector<size_t> out;
  for (const auto& [broker, t] : brokers) {
    // ratio > percentage / 100, in integers.
    if (static_cast<int64_t>(t.not_led.size()) * 100 <= int64_t{imbalance_percentage} * t.preferred)
      continue;
    for (size_t i : t.not_led) {
      if (elect_preferred(partitions[i].state, partitions[i].assignment, live)) out.push_back(i);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

namespace {

status check_new_isr(const partition_state& state, const std::vector<int32_t>& new_isr,
                     const partition_assignment& assignment, const broker_set& eligible) {
  broker_set seen;
  for (int32_t b : new_isr) {
    if (!seen.insert(b).second) {
      return status(errc::invalid_argument,
                    fmt::format("The new ISR names broker {} more than once.", b));
    }
    if (!contains(assignment, b)) {
      return status(errc::invalid_argument,
                    fmt::format("The new ISR names broker {}, which is not a replica.", b));
    }
  }
  if (!seen.contains(state.leader)) {
    return status(errc::invalid_argument,
                  fmt::format("The new ISR lacks the leader {}.", state.leader));
  }
  for (int32_t b : new_isr) {
    if (!eligible.contains(b)) {
      return status(errc::ineligible_replica,
                    fmt::format("Broker {} is not eligible to join the ISR.", b));
    }
  }
  return {};
}

}  // namespace

status validate_isr_change(const partition_state& state, int32_t requester,
                           int32_t requester_leader_epoch, int32_t partition_epoch,
                           const std::vector<int32_t>& new_isr,
                           const partition_assignment& assignment, const broker_set& eligible) {
  if (requester_leader_epoch > state.leader_epoch || partition_epoch > state.partition_epoch) {
    return status(
        errc::not_controller,
        fmt::format(
            "Leader epoch {} or partition epoch {} is newer than this controller's {} and {}.",
            requester_leader_epoch, partition_epoch, state.leader_epoch, state.partition_epoch));
  }
  if (requester_leader_epoch < state.leader_epoch) {
    return status(errc::fenced_leader_epoch,
                  fmt::format("Leader epoch {} is older than the current {}.",
                              requester_leader_epoch, state.leader_epoch));
  }
  if (requester != state.leader) {
    return status(
        errc::fenced_leader_epoch,
        fmt::format("Broker {} does not lead; the leader is {}.", requester, state.leader));
  }
  if (partition_epoch < state.partition_epoch) {
    return status(errc::invalid_update_version,
                  fmt::format("Partition epoch {} is older than the current {}.", partition_epoch,
                              state.partition_epoch));
  }
  return check_new_isr(state, new_isr, assignment, eligible);
}

partition_state apply_isr_change(const partition_state& state,
                                 const std::vector<int32_t>& new_isr) {
  SLUICE_ASSERT(!new_isr.empty() && contains(new_isr, state.leader),
                "apply_isr_change of an unchecked ISR");
  partition_state next = state;
  next.isr = new_isr;
  ++next.partition_epoch;
  return next;
}

}  // namespace sluice::controller
