#pragma once

// The coordinator's side of __consumer_offsets, shared by membership (group
// records) and offset_manager (offset records, tombstones): where records
// go (record_log), which partitions this coordinator serves, the error a
// group's requests get while its partition is not served, and appends
// whose completions run on the coordinator's executor under its mutex.
//
// A partition is one of:
//   loading    its records are being replayed: COORDINATOR_LOAD_IN_PROGRESS
//   loaded     its groups are served
//   not_owned  another broker coordinates it: NOT_COORDINATOR; none of its
//              groups or offsets are in memory
// A new coordinator starts with every partition loading (a single broker
// coordinates them all). close() (shutdown) is final: from then on every
// group gets COORDINATOR_LOAD_IN_PROGRESS, so clients wait for this broker
// to come back rather than look for another coordinator.
//
// Every start of a load and every unload begins a new epoch of the
// partition. An append whose completion comes in a later epoch than the
// one it was issued in completes with errc::not_coordinator and must
// change nothing: the record, if durable, is replayed by the next load.
//
// An append not committed within offsets.commit.timeout.ms (a leader whose
// followers stopped fetching, before the ISR shrinks) completes with
// errc::unavailable when expire_appends() finds it overdue, so the request
// is answered (Kafka's delayed produce timing out: REQUEST_TIMED_OUT for a
// commit, COORDINATOR_NOT_AVAILABLE for a group's record). It changes
// nothing here; if the record commits later, its completion is dropped and
// the next load replays it, as Kafka's coordinator leaves a late record to
// its next load.
//
// Thread rules: not thread-safe. Every method is called with the
// coordinator's mutex (the one passed in) held, except append()'s
// completion, which record_log may run on any thread: it posts to the
// executor, which takes the mutex and runs `then` with an outbox.

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/result.h"
#include "protocol/error_code.h"
#include "protocol/records/record_batch.h"

namespace sluice::group {

// The producer a transactional batch of the coordinator is written for
// (TxnOffsetCommit): its records are pending until that producer's marker.
struct txn_producer {
  std::string transactional_id;
  int64_t producer_id = -1;
  int16_t producer_epoch = -1;
  // TxnOffsetCommit v5 (transaction version 2): the producer sent no
  // AddOffsetsToTxn, so its coordinator is asked to add the partition.
  bool add = false;
};

// One entry read back from a partition of __consumer_offsets, in log order:
// a keyed record, or a transaction marker.
struct log_entry {
  int64_t batch_offset = -1;    // base offset of the batch holding it (a marker: its own offset)
  int64_t producer_id = -1;     // of a transactional batch or a marker; -1 otherwise
  bool transactional = false;   // a record of a transactional batch
  std::optional<bool> marker;   // a control batch: true COMMIT, false ABORT (key and value empty)
  std::span<const uint8_t> key;
  std::optional<std::span<const uint8_t>> value;  // nullopt: a tombstone
};

// Where the coordinator's records go and come back from: partition `p` of
// __consumer_offsets.
class record_log {
 public:
  virtual ~record_log() = default;
  // The outcome of an append: ok with the log offset of the batch's first
  // record, or the error (base_offset -1).
  using append_done = std::function<void(status, int64_t base_offset)>;
  // Appends `records` as one batch and calls `done` once it is durable (or
  // failed). `done` may run on any thread, even before append returns.
  // With `txn` the batch is transactional: it carries the producer's id and
  // epoch and no sequence, is written as the coordinator's
  // (cluster::append_origin::coordinator), opens the producer's transaction
  // in the partition, and is refused when the partition knows a newer
  // epoch of the producer (errc::invalid_producer_epoch). This is where a
  // verification with the producer's transaction coordinator (KIP-890)
  // belongs, as Kafka verifies in its append path: a refusal is an errc
  // the caller maps (kafka::group_write::txn_offset_commit).
  virtual void append(int32_t p, std::vector<protocol::records::record_input> records, const txn_producer* txn,
                      append_done done) = 0;
  // One entry read back. Returns false to stop the read.
  using entry_fn = std::function<bool(const log_entry&)>;
  // Reads partition `p` from its log start offset to its end, calling `fn`
  // with every keyed record and every marker in offset order, on the
  // calling thread. An error when the rest of the partition cannot be read
  // (the entries before it were passed), errc::shutting_down when the
  // owner stops (the partition then stays loading); a partition that does
  // not exist holds no records.
  virtual status read(int32_t p, const entry_fn& fn) = 0;
};

// Responses gathered under the coordinator's mutex and sent after it is
// released: declare the outbox before the lock guard, so that it runs
// after the unlock.
class outbox {
 public:
  outbox() = default;
  outbox(const outbox&) = delete;
  outbox& operator=(const outbox&) = delete;
  ~outbox() {
    for (auto& f : fns_) f();
  }
  void add(std::function<void()> f) { fns_.push_back(std::move(f)); }

 private:
  std::vector<std::function<void()>> fns_;
};

// Queues `resp` for `cb` in `out` and empties `cb`, so a callback is
// answered at most once; nothing when `cb` is empty.
template <class T>
void answer(std::function<void(T)>& cb, T resp, outbox& out) {
  if (!cb) return;
  out.add([cb = std::move(cb), r = std::move(resp)]() mutable { cb(std::move(r)); });
  cb = nullptr;
}

enum class partition_state { not_owned, loading, loaded };

class offsets_partitions {
 public:
  // Runs a task on the coordinator's executor (one task at a time).
  using post_fn = std::function<void(std::function<void()>)>;
  // A completion: the append's outcome, and where its answers go.
  using then_fn = std::function<void(status, outbox&)>;

  // `mu` is the coordinator's mutex; every object outlives this one.
  // Appends not committed within `commit_timeout_ms` of `clk`'s monotonic
  // time are answered by expire_appends().
  offsets_partitions(int32_t num_partitions, record_log& log, post_fn post, std::mutex& mu, sluice::clock& clk,
                     int64_t commit_timeout_ms);
  offsets_partitions(const offsets_partitions&) = delete;
  offsets_partitions& operator=(const offsets_partitions&) = delete;

  int32_t count() const { return static_cast<int32_t>(parts_.size()); }
  int32_t partition_of(std::string_view group_id) const;
  partition_state state(int32_t p) const;
  uint64_t epoch(int32_t p) const;
  // Whether partition `p`'s groups are served now (loaded, not closed).
  bool serves(int32_t p) const;
  // What a request for `group_id` gets before anything else is checked:
  // none (served), COORDINATOR_LOAD_IN_PROGRESS (loading, or closed) or
  // NOT_COORDINATOR (not owned, or owned but this broker's view of the
  // cluster is not known to be current: see set_view_check).
  kafka::error_code gate(std::string_view group_id) const;
  // Whether the partition of `group_id` is loaded (whatever the view):
  // its groups' state is held here. For the coordinator's own work
  // (observers, tombstones), not for answering requests.
  bool holds(std::string_view group_id) const { return serves(partition_of(group_id)); }
  // `current` answers whether this broker's view of the cluster can be
  // trusted (cluster::control_plane::view_trusted: its session not lost,
  // an etcd quorum loss aside, and its metadata applied up to its
  // registration). While it is
  // not, as just after a pause or a network cut that outlasted the
  // session, another broker may lead these partitions and have taken
  // commits this one has not seen: requests get NOT_COORDINATOR rather
  // than an answer from memory. Set once, before requests come; none: the
  // view is always current (a single broker). Must be quick and lock-free.
  void set_view_check(std::function<bool()> current) { view_current_ = std::move(current); }
  bool any_loading() const;

  // Transitions (see the header comment). begin_load and unload start a
  // new epoch; finish_load returns false, changing nothing, unless `p` is
  // loading in `epoch`.
  void begin_load(int32_t p);
  bool finish_load(int32_t p, uint64_t epoch);
  void unload(int32_t p);
  void close() { closed_ = true; }
  bool closed() const { return closed_; }

  // Appends `records` to the partition of `group_id`; `then` runs on the
  // executor with the mutex held (see the header comment).
  void append(std::string_view group_id, std::vector<protocol::records::record_input> records, then_fn then);
  // The same, for a write whose completion needs the log offset of its
  // batch (-1 on failure), and transactional for `txn` when given
  // (record_log::append).
  using at_then_fn = std::function<void(status, int64_t base_offset, outbox&)>;
  void append_at(std::string_view group_id, std::vector<protocol::records::record_input> records,
                 std::optional<txn_producer> txn, at_then_fn then);
  // Completes every append issued commit_timeout_ms or longer ago and not
  // completed yet with errc::unavailable (its answers go to `out`). The
  // owner calls it periodically (coordinator::tick).
  void expire_appends(outbox& out);
  // Appends issued and not completed yet (tests).
  size_t pending_appends() const { return pending_.size(); }

 private:
  struct slot {
    partition_state state = partition_state::loading;
    uint64_t epoch = 0;
  };
  slot& at(int32_t p);  // asserts `p` is a partition
  const slot& at(int32_t p) const;

  // An append issued and not completed yet. Kept in issue order, which is
  // deadline order (one timeout for all).
  struct pending {
    int32_t p = 0;
    uint64_t epoch = 0;
    int64_t deadline_ms = 0;  // monotonic
    at_then_fn then;
  };
  // Runs the completion of append `id` with `s`, unless it has completed
  // (timed out) already.
  void complete(uint64_t id, status s, int64_t base_offset);

  record_log& log_;
  const post_fn post_;
  std::mutex& mu_;
  sluice::clock& clk_;
  const int64_t commit_timeout_ms_;
  std::vector<slot> parts_;
  bool closed_ = false;
  std::function<bool()> view_current_;
  uint64_t next_append_id_ = 0;
  std::map<uint64_t, pending> pending_;  // by append id
};

}  // namespace sluice::group
