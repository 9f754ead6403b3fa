#include "partition/truncation.h"

#include <algorithm>

#include "base/assert.h"

namespace sluice::cluster {

epoch_end epoch_end_for(const std::vector<storage::epoch_entry>& epochs, offset log_end,
                        int32_t requested) {
  if (requested < 0 || epochs.empty()) return {};
  const leader_epoch e(requested);
  if (epochs.back().epoch == e) return {requested, log_end.value()};
  // The first entry of a later epoch, and (just before it) the largest <= e.
  auto higher = std::upper_bound(epochs.begin(), epochs.end(), e,
                                 [](leader_epoch x, const storage::epoch_entry& en) { return x < en.epoch; });
  if (higher == epochs.end()) return {};  // above every known epoch
  if (higher == epochs.begin()) return {requested, higher->start.value()};
  return {(higher - 1)->epoch.value(), higher->start.value()};
}

std::vector<storage::epoch_entry> with_current_epoch(std::vector<storage::epoch_entry> epochs,
                                                     leader_epoch current, offset log_end) {
  if (epochs.empty() || epochs.back().epoch < current) epochs.push_back({current, log_end});
  return epochs;
}

std::optional<int32_t> epoch_to_ask(const std::vector<storage::epoch_entry>& local_epochs) {
  if (local_epochs.empty()) return std::nullopt;
  return local_epochs.back().epoch.value();
}

namespace {

truncation_step decide_unchecked(const std::vector<storage::epoch_entry>& local_epochs,
                                 offset local_end, offset local_hw, epoch_end leader_answer) {
  if (leader_answer.undefined()) return {std::min(local_hw, local_end), true};
  const offset leader_end(leader_answer.end_offset);
  if (leader_answer.leader_epoch < 0) return {std::min(leader_end, local_end), true};
  const epoch_end mine = epoch_end_for(local_epochs, local_end, leader_answer.leader_epoch);
  if (mine.undefined()) return {std::min(leader_end, local_end), true};
  const offset mine_end(mine.end_offset);
  if (mine.leader_epoch != leader_answer.leader_epoch) return {std::min(mine_end, local_end), false};
  return {std::min({mine_end, leader_end, local_end}), true};
}

}  // namespace

truncation_step decide_truncation(const std::vector<storage::epoch_entry>& local_epochs,
                                  offset local_end, offset local_hw, epoch_end leader_answer) {
  const truncation_step step = decide_unchecked(local_epochs, local_end, local_hw, leader_answer);
  // A truncation only cuts: it never moves the log end up.
  SLUICE_ASSERT(step.truncate_to <= local_end, "a truncation point past the log end");
  return step;
}

}  // namespace sluice::cluster
