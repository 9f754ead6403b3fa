#pragma once

// Where a follower's log stops agreeing with its new leader's, decided from
// leader-epoch histories alone (KIP-101, KIP-279). Pure functions over plain
// data: no partition, no lock, no I/O, so every shape of history can be
// tested and simulated (truncation_test.cc).
//
// Words. An epoch history is the list of (leader epoch, first offset written
// in it), ascending in both, as storage::log keeps it (storage::epoch_entry).
// An epoch "ends" where the next one starts, the latest at the log end
// offset. The divergence point of two logs is the length of their longest
// common prefix, comparing each offset's leader epoch: the offset a follower
// must truncate to before it fetches.
//
// The exchange, as Kafka's follower runs it (AbstractFetcherThread):
//   1. The follower asks the leader (OffsetForLeaderEpoch) about
//      epoch_to_ask(its history). With no history it does not ask: it
//      truncates to its high watermark (decide_truncation with epoch_end{}).
//   2. The leader answers epoch_end_for(with_current_epoch(its history, its
//      epoch, its log end), its log end, the asked epoch).
//   3. The follower truncates to decide_truncation(...).truncate_to. When the
//      step is not complete it asks again from 1 with its (now shorter)
//      history; each round drops at least its latest epoch, so the exchange
//      ends.
// Worked example (leader skipped an epoch the follower has):
//   leader   epochs 1@0 2@4 4@7, log end 9     follower epochs 1@0 3@5, log end 8
//   round 1: ask 3 -> leader (2, 7): largest epoch <= 3 is 2, ended at 7.
//            follower's largest epoch <= 2 is 1, not 2: it truncates to
//            where its epoch 1 ended, 5, and asks again (incomplete).
//   round 2: ask 1 -> leader (1, 4). Same epoch: truncate to
//            min(5, 4, 5) = 4, complete. Offsets 0-3 (epoch 1) are common.
//
// Thread safety: none needed; every function is pure.

#include <cstdint>
#include <optional>
#include <vector>

#include "base/types.h"
#include "storage/log_types.h"

namespace sluice::cluster {

// What a follower learns from OffsetForLeaderEpoch before fetching from a
// new leader: the largest epoch the leader knows <= the one asked, and where
// it ended. -1/-1 (Kafka's UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET): the
// leader knows no such epoch. leader_epoch -1 with an end offset: an answer
// of OffsetForLeaderEpoch v0, which carries no epoch.
struct epoch_end {
  int32_t leader_epoch = -1;
  int64_t end_offset = -1;
  bool undefined() const { return end_offset < 0; }
  bool operator==(const epoch_end&) const = default;
};

// complete=false: truncate to `truncate_to`, then ask again with the
// follower's latest epoch after truncating.
struct truncation_step {
  offset truncate_to{0};
  bool complete = false;
  bool operator==(const truncation_step&) const = default;
};

// The end of `requested` in `epochs` (a history, ascending) over a log ending
// at `log_end`, as Kafka's LeaderEpochFileCache.endOffsetFor answers it:
//   - a negative epoch, or an empty history: undefined;
//   - the latest epoch: (it, log_end);
//   - above the latest: undefined;
//   - below the first: (requested, start of the first), so that a follower
//     holding only older epochs truncates to where the leader's history
//     begins rather than to its high watermark;
//   - otherwise: (largest epoch <= requested, start of the next epoch).
// Both sides use it: the leader to answer, the follower to find where its
// own copy of the answered epoch ends.
epoch_end epoch_end_for(const std::vector<storage::epoch_entry>& epochs, offset log_end,
                        int32_t requested);

// A leader's history as it answers OffsetForLeaderEpoch: Kafka records a new
// leader's epoch at its log end when it is elected, Sluice's log only with
// the first batch written in it. So `current` is added, starting at
// `log_end`, when the history does not already end with it (or a later
// epoch). Without it a follower asking about an epoch the leader passed over
// would be told "undefined" and fall back to its high watermark.
std::vector<storage::epoch_entry> with_current_epoch(std::vector<storage::epoch_entry> epochs,
                                                     leader_epoch current, offset log_end);

// The epoch a follower asks about: its latest. nullopt for an empty history
// (a new replica, or one whose history was lost): it then asks nothing and
// truncates to its high watermark, decide_truncation(..., epoch_end{}), as
// Kafka truncates partitions without epochs.
std::optional<int32_t> epoch_to_ask(const std::vector<storage::epoch_entry>& local_epochs);

// One step of a follower's truncation, Kafka's getOffsetTruncationState.
// `local_epochs`: this replica's history, ascending; `local_end` its log end
// offset; `local_hw` its high watermark; `leader_answer` the leader's
// epoch_end for the epoch asked. Never above `local_end`:
//   - undefined answer: truncate to the high watermark, complete;
//   - answer without an epoch (v0): to the leader's end offset, complete;
//   - the follower's largest epoch <= the answered one (epoch_end_for over
//     its own history) is another epoch: the leader never had the
//     follower's later epochs; truncate to where that smaller epoch ends
//     locally, incomplete (ask again);
//   - the same epoch: to min(its local end, the leader's end offset),
//     complete;
//   - the follower holds only epochs above the answered one: epoch_end_for
//     gives (answered epoch, start of the follower's first epoch), so it
//     truncates to min(that start, the leader's end offset), complete; every
//     epoch it holds is one the leader does not have;
//   - the follower knows no epoch at all (empty history, or the answer above
//     its latest, which a correct leader never gives): to the leader's end
//     offset, complete.
truncation_step decide_truncation(const std::vector<storage::epoch_entry>& local_epochs,
                                  offset local_end, offset local_hw, epoch_end leader_answer);

}  // namespace sluice::cluster
