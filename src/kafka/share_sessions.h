#pragma once

// Share sessions (KIP-932): the partitions a share consumer fetches from
// this broker, kept between its ShareFetch requests so that each request
// names only what changed. One session per (group, member) on each broker.
//
// Epochs, as the client sends them:
//   0   opens a session with the request's partitions (a member's existing
//       session is replaced; what it held is released). No
//       acknowledgements may ride on it: nothing was handed out in it yet.
//   n>0 the session's next epoch (each request moves it on by one, 1 after
//       INT32_MAX): the request's partitions are added, its forgotten ones
//       removed (and what the member held in them released). A session
//       this broker does not have is SHARE_SESSION_NOT_FOUND; another
//       epoch is INVALID_SHARE_SESSION_EPOCH.
//   -1  closes the session after the request's acknowledgements; nothing
//       is fetched and what the member still holds is released.
//
// Bounded: at most limits::max_share_sessions sessions (a new one past it
// evicts the least recently used session idle longer than
// `idle_eviction_ms`, else is SHARE_SESSION_LIMIT_REACHED) of at most
// limits::max_share_session_partitions partitions each.
//
// Thread safety: every method is thread-safe.

#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/types.h"
#include "protocol/error_code.h"

namespace sluice::kafka {

using share_tp = std::pair<sluice::topic_id, int32_t>;

class share_session_cache {
 public:
  explicit share_session_cache(int64_t idle_eviction_ms) : idle_eviction_ms_(idle_eviction_ms) {}

  struct outcome {
    error_code error = error_code::none;
    std::string message;
    // The session's partitions after the request (what a fetch reads).
    std::vector<share_tp> partitions;
    // Partitions the member no longer fetches here: its records in them
    // are to be released. `released_member`: whose (a replaced session's
    // member is the same member; an evicted one's is another).
    std::vector<std::pair<std::pair<std::string, std::string>, std::vector<share_tp>>> released;
  };

  // A ShareFetch at `epoch` adding `added` and removing `forgotten`.
  outcome fetch(const std::string& group_id, const std::string& member_id, int32_t epoch,
                const std::vector<share_tp>& added, const std::vector<share_tp>& forgotten, int64_t now_ms);
  // A ShareAcknowledge at `epoch` (0 is INVALID_SHARE_SESSION_EPOCH).
  outcome acknowledge(const std::string& group_id, const std::string& member_id, int32_t epoch, int64_t now_ms);

  size_t size() const;

 private:
  struct session {
    int32_t next_epoch = 1;
    std::set<share_tp> partitions;
    int64_t last_used_ms = 0;
  };
  using key = std::pair<std::string, std::string>;
  // Checks `epoch` against the session of `k`; moves it on when it fits.
  error_code advance(session* s, int32_t epoch, std::string& message);
  // Closes the session at `it` (epoch -1): its partitions go to `out` as
  // released; SHARE_SESSION_NOT_FOUND when there is none.
  void close(std::map<key, session>::iterator it, outcome& out);

  const int64_t idle_eviction_ms_;
  mutable std::mutex mu_;
  std::map<key, session> sessions_;
};

}  // namespace sluice::kafka
