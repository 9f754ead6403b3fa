#include "replication/leadership_gate.h"

#include <string>

#include "partition/partition.h"

namespace sluice::cluster {

status leadership_gate::check(const partition& p) const {
  if (!standing_) return {};
  switch (standing_()) {
    case session_standing::live:
      return {};
    case session_standing::lost:
      return status(errc::not_leader, "this broker lost its cluster session; the partition's leadership is moving");
    case session_standing::in_doubt:
      if (p.isr_following(lag_max_ms_)) return {};
      return status(errc::not_leader, "this broker cannot reach etcd's quorum and the in-sync replicas of " +
                                          p.id().topic + "-" + std::to_string(p.id().partition) +
                                          " stopped fetching from it: another leader may have been elected");
  }
  return {};
}

errc leadership_gate::check_leader(const partition& p, int32_t current_leader_epoch) const {
  if (const errc e = p.check_leader(current_leader_epoch); e != errc::ok) return e;
  return check(p).code();
}

}  // namespace sluice::cluster
