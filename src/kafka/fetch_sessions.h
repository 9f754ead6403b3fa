#pragma once

// Incremental fetch sessions (KIP-227). A client that opens a session sends
// its full partition list once; later requests carry only what changed, and
// answers carry only partitions with news (records, a moved high watermark
// or log start offset, or an error).
//
// Session epochs, as the client sends them:
//   session_id 0, epoch -1   no session: a full fetch, answered in full
//   any id,       epoch 0    open a new session (closing `id` if set)
//   id,           epoch -1   close session `id`; a full fetch
//   id,           epoch n>0  an incremental fetch in session `id`, whose next
//                            epoch must be n
//
// Topic ids (Fetch v13+, KIP-516): a session opened by a request that names
// topics by id keys its partitions by id, and remembers the name the id had
// when the partition joined the session (empty while the id is unknown). A
// request must name topics the way its session does, or it gets
// FETCH_SESSION_TOPIC_ID_ERROR.
//
// Bounded: at most `max_sessions` sessions (Kafka's
// max.incremental.fetch.session.cache.slots); the least recently used is
// evicted for a new one. A client whose session was evicted gets
// FETCH_SESSION_ID_NOT_FOUND and opens a new one.
//
// Thread safety: the cache is thread-safe; a session is used by one fetch at
// a time (a client does not pipeline fetches within a session), and its
// fields are guarded by the session's own mutex.

#include <atomic>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "base/limits.h"
#include "base/types.h"
#include "protocol/error_code.h"

namespace sluice::kafka {

// Where the last Fetch answer with records stopped: the last partition that
// got records in it. The next answer's scan for records starts after it,
// so when answers fill up, partitions take turns in whatever order they are
// listed. A session keeps one; so does each connection, for fetches
// without a session. Fetch attempts run on the I/O thread and the
// delayed-ops thread, hence the lock.
struct fetch_cursor {
  std::mutex mu;
  std::string topic;       // guarded by mu
  int32_t partition = -1;  // guarded by mu; -1: no answer with records yet
};

struct session_partition {
  sluice::topic_id topic_id{};  // all zero in a session that names topics
  std::string topic;            // the name; in an id session, as first resolved
  int32_t partition = 0;
  int64_t fetch_offset = 0;
  int32_t max_bytes = 0;
  // What the client was last told, to send only changes.
  int64_t last_high_watermark = -1;
  int64_t last_log_start = -1;
  bool sent = false;
};

// Partitions held by every session of a cache together
// (limits::max_fetch_session_partitions_total). Thread-safe.
class session_partition_budget {
 public:
  explicit session_partition_budget(size_t total) : total_(total) {}
  // Takes one; false when all are taken.
  bool take() {
    size_t cur = used_.load(std::memory_order_relaxed);
    do {
      if (cur >= total_) return false;
    } while (!used_.compare_exchange_weak(cur, cur + 1, std::memory_order_relaxed));
    return true;
  }
  void give(size_t n) { used_.fetch_sub(n, std::memory_order_relaxed); }
  size_t used() const { return used_.load(std::memory_order_relaxed); }

 private:
  const size_t total_;
  std::atomic<size_t> used_{0};
};

struct fetch_session {
  fetch_session() = default;
  fetch_session(const fetch_session&) = delete;
  fetch_session& operator=(const fetch_session&) = delete;
  ~fetch_session() {
    if (budget) budget->give(partitions.size());
  }

  int32_t id = 0;
  // The cache's budget, which the session's partitions count against (null:
  // unbounded, for tests of a session alone).
  std::shared_ptr<session_partition_budget> budget;
  bool uses_topic_ids = false;  // set at creation
  std::mutex mu;
  int32_t next_epoch = 1;
  // In the order the client first named them; answers list them so, and
  // `cursor` says where the scan for records starts. Shared so that a fetch
  // in progress keeps its entries even if a misbehaving client changes the
  // session meanwhile; their fields are guarded by `mu`.
  std::vector<std::shared_ptr<session_partition>> partitions;
  // By topic (id, or name in a session without ids) and partition; the
  // entries of `partitions`.
  using key = std::tuple<sluice::topic_id, std::string, int32_t>;
  std::map<key, session_partition*> index;

  // Adds or updates a partition; removes one. In an id session `topic` is
  // the name the id resolves to now (empty if unknown); a partition keeps
  // the first name it had, and an unknown one takes a name once resolved.
  // False, changing nothing, when a new partition would take the session
  // past limits::max_fetch_session_partitions or the cache's budget past
  // its total.
  [[nodiscard]] bool upsert(const sluice::topic_id& id, const std::string& topic, int32_t partition,
                            int64_t fetch_offset, int32_t max_bytes);
  void forget(const sluice::topic_id& id, const std::string& topic, int32_t partition);

  std::shared_ptr<fetch_cursor> cursor = std::make_shared<fetch_cursor>();
};

class fetch_session_cache {
 public:
  explicit fetch_session_cache(size_t max_sessions = limits::max_fetch_sessions,
                               size_t max_partitions_total = limits::max_fetch_session_partitions_total)
      : max_sessions_(max_sessions), budget_(std::make_shared<session_partition_budget>(max_partitions_total)) {}

  // A new, empty session, or nullptr when max_sessions is 0.
  std::shared_ptr<fetch_session> create();
  // The session with `id`, or nullptr. Marks it recently used.
  std::shared_ptr<fetch_session> find(int32_t id);
  void remove(int32_t id);
  size_t size() const;
  // Partitions held by all sessions.
  size_t partitions() const { return budget_->used(); }

 private:
  const size_t max_sessions_;
  const std::shared_ptr<session_partition_budget> budget_;
  mutable std::mutex mu_;
  int32_t next_id_ = 1;
  std::list<int32_t> lru_;  // most recently used at the front
  std::unordered_map<int32_t, std::pair<std::shared_ptr<fetch_session>, std::list<int32_t>::iterator>> sessions_;
};

}  // namespace sluice::kafka
