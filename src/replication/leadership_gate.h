#pragma once

// Whether this broker may act as the leader its metadata image names for
// a partition: take writes (Produce), answer consumers and admin requests
// as the leader (Fetch, ListOffsets, OffsetForLeaderEpoch, DeleteRecords),
// and name itself leader in Metadata. The partition's own state
// (partition::check_leader) says whom the image names and fences stale
// leader epochs; the gate adds what the image cannot show, from where this
// broker's etcd session stands (control_plane::session_standing):
//   - live (and a single node, which has no session): the image holds;
//   - lost: never. The cluster counts this broker dead and has elected, or
//     is electing, other leaders it cannot see;
//   - in doubt (no renewal confirmed for a session timeout while the etcd
//     members it reaches know no leader): only while the partition's ISR
//     follows it, every other member having caught up within
//     replica.lag.time.max.ms (partition::isr_following). If etcd lost its
//     quorum, nobody elects and the followers go on fetching from it, so
//     data keeps flowing as the brief wants ("message traffic never goes
//     through etcd"); if instead this broker reaches only a minority while
//     the majority expired its lease, the majority elected other leaders
//     from its ISR, the followers fetch from them, and within the lag
//     limit this broker stops answering as the leader: NOT_LEADER_OR_FOLLOWER
//     rather than acks=all writes that wait out their timeout (which
//     Debian 12's librdkafka turns into a fatal OUT_OF_ORDER_SEQUENCE_NUMBER
//     on the next leader) or OFFSET_OUT_OF_RANGE past its stale log end
//     (which resets consumers). A leader alone in its ISR keeps leading:
//     no other replica can be elected cleanly.
//
// Thread safety: const and thread-safe once built; the standing function
// must be.

#include <cstdint>
#include <functional>

#include "base/result.h"

namespace sluice::cluster {

class partition;

enum class session_standing { live, in_doubt, lost };

class leadership_gate {
 public:
  using standing_fn = std::function<session_standing()>;
  // A single node: always open.
  leadership_gate() = default;
  // `standing`: control_plane::session_standing; `lag_max_ms`:
  // replica.lag.time.max.ms.
  leadership_gate(standing_fn standing, int64_t lag_max_ms)
      : standing_(std::move(standing)), lag_max_ms_(lag_max_ms) {}

  // ok, or errc::not_leader with why, for a partition the image says this
  // broker leads (one it does not lead is the partition's own answer).
  status check(const partition& p) const;
  // The gate, then the partition's leadership and the client's leader
  // epoch (partition::check_leader).
  errc check_leader(const partition& p, int32_t current_leader_epoch = -1) const;
  // Whether every leadership the image names holds without looking at the
  // partition (a single node, or a live session): callers over many
  // partitions (Metadata) skip their lookups then.
  bool session_live() const { return !standing_ || standing_() == session_standing::live; }
  // Whether the session is lost (the broker names no controller then).
  bool session_lost() const { return standing_ && standing_() == session_standing::lost; }

 private:
  standing_fn standing_;
  int64_t lag_max_ms_ = 0;
};

}  // namespace sluice::cluster
