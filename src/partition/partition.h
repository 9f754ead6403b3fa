#pragma once

// A partition as the broker serves it: the storage log plus what Kafka
// layers on top of a leader's log: idempotent-producer state, the topic's
// effective config (max.message.bytes, message.timestamp.type, fsync), the
// high watermark, and the listeners that long-polling fetches wait on.
//
// Replica state: the partition knows its role (leader or follower), leader
// epoch, replicas and in-sync replicas with their log end offsets
// (docs/replication.md). A single node leads every partition at leader
// epoch 0 as its only replica, so the high watermark is the log end offset.
// A leader with followers keeps the replica_tracker's rules: the high
// watermark is the smallest log end offset in the ISR, never moving
// backwards, and acks=all waits for it (on_committed). A follower appends
// the leader's batches unchanged (append_replicated), truncates where its
// log diverged, and takes its high watermark from the leader's answers.
//
// The only door to a partition's data: nothing outside cluster/ reaches its
// storage::log. Reads, log-start moves and the storage's health go through
// the methods below, so that a follower, a high watermark below the log
// end, a leader epoch above 0 or a log-start move that must be replicated
// each have one place to be guarded.
//
// Thread safety: every method is thread-safe. Appends are serialised by
// append_mu_ so that the producer-state check, the log append and the
// producer-state update are one step; apply_state takes append_mu_ too, so a
// batch is stamped with the epoch of a leadership still held. Lock order:
// snapshot_mu_, append_mu_, state_mu_.

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <span>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/error.h"
#include "base/result.h"
#include "base/types.h"
#include "config/topic_config.h"
#include "partition/producer_state.h"
#include "partition/replica_tracker.h"
#include "partition/state.h"
#include "storage/aborted_index.h"
#include "storage/log_types.h"

namespace sluice::storage {
class log;
}  // namespace sluice::storage

namespace sluice::cluster {

enum class replica_role { leader, follower };

// An in-sync replica and the log end offset it is known to have.
struct isr_member {
  int32_t node_id = -1;
  offset log_end{0};
  bool operator==(const isr_member&) const = default;
};

// Who holds a partition, as this broker sees it (Metadata, DescribeTopicPartitions
// and, with replication, the leader's high-watermark rule).
struct replica_state {
  replica_role role = replica_role::leader;
  int32_t leader_id = -1;
  leader_epoch epoch{0};
  offset high_watermark{0};
  std::vector<int32_t> replicas;  // every assigned replica, preferred leader first
  std::vector<isr_member> isr;
};

// A leader's word that a producer's transactional batch may begin its
// transaction here once the coordinator confirmed it (partition::
// begin_verification). 0: none.
struct verification_guard {
  uint64_t id = 0;
  // The partition's leadership when it was handed out: one a change of
  // leadership retired is answered as the lost leadership it is.
  uint64_t generation = 0;
};

// The outcome of one Produce partition, in Kafka's terms.
struct produce_outcome {
  errc error = errc::ok;
  std::string message;         // error detail for logs and v8+ error_message
  offset base{-1};             // base offset assigned (or of the original, for a duplicate)
  offset last{-1};             // last offset of the batch
  int64_t log_append_time_ms = -1;  // set when the topic uses LogAppendTime
  bool duplicate = false;      // a retry: nothing was appended
  bool hw_moved = false;       // the append moved the high watermark (a leader alone in its ISR)
};


class partition : public std::enable_shared_from_this<partition> {
 public:
  // Opens the producer state (snapshot + replay of the log tail). `snapshot_path`
  // is where this partition's producer-state snapshot lives. `sole_replica`:
  // this broker is the partition's only replica for good (a single node),
  // so all it holds is committed; otherwise the high watermark starts at
  // `checkpointed_hw` (what the last checkpoint recorded, within the log)
  // or the log start offset, and rises as the leader tells it: a restarted
  // replica cannot know what of the rest of its tail was committed.
  static result<std::shared_ptr<partition>> open(storage::topic_partition tp,
                                                 std::shared_ptr<storage::log> log,
                                                 config::topic_config cfg, io::filesystem& fs,
                                                 std::string snapshot_path, sluice::topic_id topic,
                                                 int32_t node_id, const sluice::clock& clk,
                                                 bool sole_replica = true,
                                                 std::optional<offset> checkpointed_hw = std::nullopt);

  const storage::topic_partition& id() const { return tp_; }

  // ---- Transactions (docs/transactions.md) ----------------------------------
  // Appends a COMMIT or ABORT marker for `producer_id` as leader (the
  // coordinator's WriteTxnMarkers), ending the producer's transaction here.
  // Refused, writing nothing: a fenced producer epoch
  // (INVALID_PRODUCER_EPOCH), an older coordinator epoch
  // (TRANSACTION_COORDINATOR_FENCED), not leading. An abort goes to the
  // aborted-transaction index. The caller waits for on_committed(out.last)
  // before it answers, as for acks=all.
  produce_outcome append_marker(int64_t producer_id, int16_t producer_epoch, bool commit, int32_t coordinator_epoch,
                                int64_t now_ms);
  // The last stable offset: the high watermark, or below it the first
  // offset of the oldest transaction that is open here or whose marker is
  // not committed yet. read_committed consumers read below it.
  offset last_stable_offset() const;
  // What a read_committed fetch of [from, upper) must name: the aborted
  // transactions that end at or after `from` and began below `upper`,
  // sorted by first offset, and where that fetch must stop reading (below
  // `upper` only when more aborted transactions overlap the range than one
  // answer names, limits::max_aborted_txns_per_fetch).
  struct aborted_answer {
    std::vector<storage::aborted_txn> txns;
    offset read_upper;
  };
  result<aborted_answer> aborted_transactions(offset from, offset upper) const;
  // Every aborted transaction that ended below `upper`, in marker order, at
  // most `max` (the cleaner: records of aborted transactions never decide
  // which record of a key is the newest).
  result<std::vector<storage::aborted_txn>> aborted_below(offset upper, size_t max) const {
    return aborted_->collect(offset(0), upper, max);
  }
  // Transactions open here (DescribeProducers and /metrics).
  size_t open_transactions();
  // Ended transactions whose marker the high watermark had not passed when
  // last looked at: what the last stable offset still waits for. Bounded by
  // the markers not yet replicated (tests).
  size_t unstable_ended_transactions() const;
  // The id of the topic this partition belongs to: a request naming another
  // id reached it by a name that now belongs to a newer topic.
  const sluice::topic_id& topic_id() const { return topic_id_; }

  // Appends the producer's record batch (exactly one v2 batch, as Produce v3+
  // requires) as leader. `batch` is modified in place (offsets, epoch, and
  // for LogAppendTime the timestamp and CRC). Never throws; errors are in
  // the outcome. `wake_readers` false leaves waking the waiting fetches to
  // the caller (wake_after_append, once every partition of a request is
  // appended), so a follower's fetch parked on several partitions is
  // answered with all of them, not with the first alone. `zstd_allowed`
  // false refuses a zstd batch (errc::unsupported_compression): Kafka's
  // answer to a Produce below v7, whose clients cannot read zstd back. The
  // header is parsed here once and handed down to the log.
  // A transactional batch opens (or continues) its producer's transaction
  // here (docs/transactions.md); the coordinator ends it with append_marker.
  // A transactional batch that would begin its producer's transaction
  // here is taken only with the `guard` begin_verification() handed out,
  // still current: the caller has since checked with the producer's
  // transaction coordinator that the partition is in its ongoing
  // transaction (a transaction nobody ends would hold the last stable
  // offset for good); else it is INVALID_TXN_STATE. One that continues the
  // producer's open transaction here, at the same epoch, needs no guard.
  // `origin` append_origin::coordinator: a batch the broker's own
  // coordinator wrote for a producer (producer_state.h has the rules it
  // keeps); the coordinator answers for the transaction it writes into, so
  // no guard is asked of it (one it brings is checked all the same).
  produce_outcome append(std::span<std::byte> batch, int64_t now_ms, bool wake_readers = true,
                         bool zstd_allowed = true, verification_guard guard = {},
                         append_origin origin = append_origin::client);
  // KIP-890 part 1, the leader's half (Kafka's verification guard): before
  // asking the coordinator whether this partition is in the ongoing
  // transaction of `producer_id`, the caller takes a guard here; the append
  // that follows a yes must present it. A marker for the producer (its
  // transaction ended while the question was out), a transactional batch of
  // it appended, or a change of leadership retires the guard, so a late
  // batch verified against a transaction that has since ended cannot open
  // a new one (INVALID_TXN_STATE; NOT_LEADER_OR_FOLLOWER, retriable, when
  // it was the leadership that changed). nullopt: no verification is needed (the producer's
  // transaction at this epoch is open here already). NOT_ENOUGH_REPLICAS
  // (retriable) when limits::max_verifications_per_partition producers are
  // being verified at once. end_verification() retires a guard whose
  // verification failed.
  result<std::optional<verification_guard>> begin_verification(int64_t producer_id, int16_t producer_epoch);
  void end_verification(int64_t producer_id, verification_guard guard);
  // What append(..., false) left out: wakes the followers' fetches, and the
  // consumers' when the outcome said `hw_moved`.
  void wake_after_append(bool hw_moved) { wake_listeners(hw_moved, true); }

  // Calls `cb` when every offset <= last is durable (at once when the topic
  // relaxes fsync). See storage::log::on_durable.
  void on_durable(offset last, storage::durable_callback cb);
  // Calls `cb` when every offset <= last is committed: durable here and
  // below the high watermark, so on the disk of every in-sync replica
  // (acks=all, the group coordinator's writes). errc::not_leader when this
  // broker stops leading first (the batch may or may not survive: the
  // client retries, and an idempotent producer's retry is recognised).
  // `cb` runs on a flusher thread or the thread that moved the high
  // watermark (a follower's fetch), never under a lock of the partition.
  void on_committed(offset last, storage::durable_callback cb);

  // Bytes of batches appended since this partition was opened (the basis of
  // the write rate /metrics reports): one relaxed add per appended batch.
  uint64_t bytes_appended() const { return bytes_appended_.load(std::memory_order_relaxed); }

  // Consumers read below it: the smallest log end offset in the ISR on a
  // leader, the leader's last word (capped by its own log end) on a
  // follower. The log end offset while this broker is the only in-sync
  // replica.
  offset high_watermark() const { return offset(hw_.load(std::memory_order_acquire)); }
  // True while this broker leads and its high watermark is below the
  // offset its leadership began at (its followers have not fetched from it
  // yet): the high watermark may then be lower than the previous leader's,
  // so ListOffsets answers OFFSET_NOT_AVAILABLE rather than show it move
  // back (Kafka's KIP-207).
  bool high_watermark_behind_epoch_start() const;
  // The size of the ISR the store holds (min.insync.replicas counts it).
  size_t in_sync_count() const { return static_cast<size_t>(isr_count_.load(std::memory_order_acquire)); }
  // errc::not_enough_replicas when the ISR is smaller than the topic's
  // min.insync.replicas (acks=all), else ok.
  errc check_min_insync() const {
    return isr_count_.load(std::memory_order_acquire) < min_insync_.load(std::memory_order_relaxed)
               ? errc::not_enough_replicas
               : errc::ok;
  }
  // The answer to an acks=-1 batch once on_committed called back with
  // `waited` (Kafka's Partition.checkEnoughReplicasReachOffset, which its
  // DelayedProduce asks): `waited` itself when it failed; else, the high
  // watermark having passed the batch,
  // errc::not_enough_replicas_after_append when the maximal ISR (the
  // store's ISR plus the followers this leader asked to add, KIP-497) is
  // smaller than min.insync.replicas: the batch is written and committed,
  // but by fewer replicas than the topic asks for (the ISR shrank while it
  // waited). Kafka counts the store's ISR before the append
  // (check_min_insync) and the maximal ISR after it; so does this. Any
  // thread; takes the state lock, so not from under it.
  status acks_all_outcome(const status& waited) const;
  // Whether the partition has replicas other than this broker.
  bool has_followers() const { return replica_count_.load(std::memory_order_acquire) > 1; }
  offset log_start_offset() const;
  offset log_end_offset() const;
  // Every offset below it is on this replica's disk (at most the log end
  // offset; the log end offset itself when the topic relaxes fsync).
  offset durable_offset() const;
  leader_epoch epoch() const;
  // A copy of the replica state, with this broker's log end offset current.
  replica_state replicas() const;
  // Takes the controller's word for this partition: its assignment and
  // state from the metadata store. This broker leads when `st.leader` is
  // its node id and follows otherwise (an append then answers
  // errc::not_leader); the leader epoch becomes `st.leader_epoch`. A state
  // older than the one held (a lower leader epoch, or the same with a lower
  // partition epoch) changes nothing and returns false.
  bool apply_state(const replica_list& replicas, const partition_state& st);
  // Stops taking appends at once (a broker leaving its cluster): later
  // appends answer errc::not_leader, so clients go to the leader the
  // controller elects next. The next apply_state decides again.
  void stop_leading();
  // The same for good (a broker shutting down): no later apply_state makes
  // this broker lead again, whatever the store still names (a watch event
  // that arrives before the control plane stops would otherwise take
  // appends again after the controlled shutdown began).
  void leave();
  // Answers every acks=all append waiting to commit here with `why`
  // (errc::not_leader) at once, leaving the role alone: this broker's etcd
  // session is lost and the cluster is electing another leader, so the
  // waits would only end in a timeout. The batches stay in the log; a
  // producer's retry to whichever broker leads next is recognised there
  // if it was replicated, or appended if not.
  void answer_commit_waiters(const status& why);
  // Whether this broker leads the partition (appends are accepted).
  bool is_leader() const { return leader_.load(std::memory_order_acquire); }
  // The leader the store names (-1: none), whoever it is.
  int32_t leader_id() const;
  // Whether a client's request (Fetch, ListOffsets, DeleteRecords) may be
  // served here: errc::not_leader when this broker follows;
  // fenced_leader_epoch when the client's `current_leader_epoch` (-1: not
  // given) is older than this leader's, unknown_leader_epoch when newer
  // (this broker has not learnt of it yet); ok otherwise.
  errc check_leader(int32_t current_leader_epoch = -1) const;
  // The same for a consumer reading from any replica (KIP-392): a follower
  // serves too, with the same leader-epoch check against the epoch it
  // follows at.
  errc check_replica(int32_t current_leader_epoch = -1) const;

  // ---- Replication: the leader's side ------------------------------------------
  // Follower `replica` fetched at `fetch_offset` (everything below it is on
  // its disk), trusted with `broker_epoch` (-1: none); moves the high
  // watermark and answers the commit waiters it covers. Call only for an
  // offset within [log start, log end].
  // `follower_log_start`: the follower's log start offset its fetch named
  // (-1: not given), which a DeleteRecords waits on (on_low_watermark).
  void on_follower_fetch(int32_t replica, offset fetch_offset, int64_t broker_epoch = -1,
                         offset follower_log_start = offset(-1));
  // The ISR change this leader should ask for now (replica_tracker's
  // propose_isr with replica.lag.time.max.ms), or nullopt.
  std::optional<isr_request> propose_isr(int64_t lag_max_ms);
  // Whether this broker leads and every other member of the ISR caught up
  // within `lag_max_ms` (replica_tracker::isr_following): its followers
  // still fetch from it, so no other replica was elected meanwhile.
  bool isr_following(int64_t lag_max_ms) const;
  // What the leader knows of each follower (metrics, tools); empty on a
  // follower.
  std::vector<follower_progress> follower_progress_view() const;

  // ---- Replication: the follower's side -----------------------------------------
  // Appends the leader's batches unchanged (offsets, epochs, producer
  // fields), as a follower; the producer state follows, so that after a
  // leader change a producer's retry is still recognised. `batches`
  // answer a fetch sent at leader epoch `fetched_at` from `fetch_offset`
  // (the log end offset then): they are appended only while this replica
  // still follows at that epoch and its log still ends there, checked under
  // the lock apply_state and truncation take, so a fetch that left before a
  // leader change or a truncation never appends after it (Kafka's fetcher
  // checks its fetch state and the log end the same way). Refusals:
  // errc::invalid_argument for a leader (it appends only its own
  // producers' batches), errc::fenced_leader_epoch when the epoch moved on,
  // errc::offset_out_of_range when the log end moved, or the first batch
  // starts below it. A first batch above it is a gap compaction left on the
  // leader and is kept, as Kafka keeps it.
  // `headers`: one per batch, as the fetcher's check_whole_prefix parsed
  // and checked them (nothing parses them again); the bytes are only read.
  result<storage::append_result> append_replicated(std::span<const std::byte> batches,
                                                   std::span<const model::batch::header> headers,
                                                   leader_epoch fetched_at, offset fetch_offset);
  // The same for batches not checked yet (check_all at strictness::stored).
  result<storage::append_result> append_replicated(std::span<const std::byte> batches, leader_epoch fetched_at,
                                                   offset fetch_offset);
  // The leader epoch of this replica's last batch (-1: none), which a
  // follower's fetch names as its last fetched epoch (Fetch v12+, KIP-595's
  // divergence check on the leader).
  int32_t last_written_epoch() const;
  // The leader's side of that check: the end of `last_fetched_epoch` in
  // this leader's history (with its current epoch, as OffsetForLeaderEpoch
  // answers it), when it shows that a follower fetching at `fetch_offset`
  // holds a tail this leader does not (Kafka's Partition.fetchRecords):
  // that epoch ends below `fetch_offset` here, or this leader knows only a
  // smaller one. nullopt: no divergence (or nothing to compare).
  std::optional<std::pair<int32_t, int64_t>> diverging_epoch(int32_t last_fetched_epoch, offset fetch_offset) const;
  // The leader's high watermark from a fetch answer: this replica's
  // becomes min(it, the log end offset), never lower than it was.
  void set_leader_high_watermark(offset leader_hw);
  // The leader's log start offset from a fetch answer: a follower's log
  // start follows it up (DeleteRecords and the leader's retention reach
  // every replica, so a failover never makes deleted records readable
  // again), capped at this replica's high watermark as Kafka caps it.
  // Nothing on a leader or for a start at or below this replica's.
  status follow_log_start(offset leader_log_start);
  // Discards every offset >= `o` (the follower's truncation,
  // partition/truncation.h); the producer state is rebuilt from what is left.
  // Offsets below the high watermark that go were committed: an unclean
  // election lost them; they are counted (truncated_committed()) and logged.
  // `decided_at`: the leader epoch the fetcher decided the cut at; once the
  // partition's epoch moved on (another leader, whose log it may not fit)
  // the cut is refused with errc::fenced_leader_epoch, under the lock
  // apply_state takes.
  status truncate_to(offset o, std::optional<leader_epoch> decided_at = std::nullopt);
  // Empties the log and restarts it at `o` (the leader's log starts past
  // this replica's end); `decided_at` as for truncate_to.
  status reset_to(offset o, std::optional<leader_epoch> decided_at = std::nullopt);
  // Committed offsets this replica threw away by truncation (unclean
  // elections), since it opened.
  uint64_t truncated_committed() const { return truncated_committed_.load(std::memory_order_relaxed); }
  // Bytes of batches followers fetched from this replica as leader.
  void note_replicated_out(uint64_t n) { replicated_out_.fetch_add(n, std::memory_order_relaxed); }
  uint64_t replicated_out() const { return replicated_out_.load(std::memory_order_relaxed); }

  // ---- Reading (storage::log::read's contract) ------------------------------
  // The region of whole batches from the one holding `o`, at most
  // `max_bytes` (at least one batch), below `upper` (consumers pass the high
  // watermark); empty at `upper`; offset_out_of_range outside the log.
  result<storage::file_region> read(offset o, size_t max_bytes, std::optional<offset> upper = std::nullopt);
  // The same bytes copied into memory (small reads: a batch header, a
  // control record).
  result<std::vector<std::byte>> read_bytes(offset o, size_t max_bytes,
                                            std::optional<offset> upper = std::nullopt);
  // ListOffsets by time: the first batch whose max timestamp >= ts_ms.
  result<std::optional<storage::timestamp_lookup>> offset_for_timestamp(int64_t ts_ms);
  // ListOffsets MAX_TIMESTAMP: the first batch carrying the largest one.
  result<std::optional<storage::timestamp_lookup>> offset_of_max_timestamp();
  // The time of the batch at `o` below the high watermark (its base
  // timestamp, or its max timestamp under LogAppendTime): exact when `o`
  // starts a batch, else older by at most the batch's span. nullopt when
  // there is no batch at `o` or it carries no timestamp.
  std::optional<int64_t> batch_time_at(offset o);

  // ---- Log start (DeleteRecords) ---------------------------------------------
  // Moves the log start offset up to `o` (never down; <= the high
  // watermark), deleting the segments wholly below it. Followers take it
  // from their fetch answers (follow_log_start).
  status delete_records_before(offset o);
  // The same on a flusher thread (DeleteRecords: its checkpoint's fsyncs
  // stay off the I/O thread); `done` runs there with the outcome.
  void delete_records_before_async(offset o, std::function<void(status)> done);
  // The leader's low watermark: the smallest log start offset over the
  // ISR, this replica's included (replica_tracker::low_watermark); this
  // replica's own log start offset when it has no followers. -1 while an
  // in-sync follower has not said its own yet.
  offset low_watermark() const;
  // Calls `cb` once the low watermark reaches `target` (Kafka's delayed
  // DeleteRecords): ok then; errc::not_leader when this broker stops
  // leading first. At once when it is there already. `cb` runs on the
  // thread that moved it (a follower's fetch) or the caller's, never under
  // a lock of the partition.
  void on_low_watermark(offset target, storage::durable_callback cb);

  // ---- Storage, for the operator's view and tools ------------------------------
  std::vector<storage::segment_info> segments() const;
  struct storage_health {
    bool offline = false;       // a write error took the log offline
    bool out_of_space = false;  // the last append found the disk full
    uint64_t out_of_space_errors = 0;
    storage::damage_stats damage;
  };
  storage_health health() const;

  // Long-poll support: `fn` is called once, from the thread that made the
  // change, the next time there is more to read for its kind of reader
  // (or when the partition is closed or its leadership or leader epoch
  // changes; a consumer's also at any other state change): for a
  // consumer (wake_on::high_watermark) when the high watermark moves, for
  // a follower's fetch (wake_on::append) when the log end moves. So a
  // commit wakes no follower and an append that commits nothing yet wakes
  // no consumer. Returns a token to cancel with remove_listener (a
  // cancelled listener is never called).
  enum class wake_on { high_watermark, append };
  uint64_t add_listener(std::function<void()> fn, wake_on on = wake_on::high_watermark);
  void remove_listener(uint64_t token);

  config::topic_config config() const;
  // Applies a new effective config; the log refuses values out of its limits.
  status set_config(const config::topic_config& cfg);

  // The idempotent producers this partition remembers (DescribeProducers).
  std::vector<producer_info> producers();
  // Bytes of the partition's segment files (DescribeLogDirs).
  uint64_t size_bytes() const;

  // See producer_state::last_batch_bases (for the log cleaner).
  std::vector<offset> producer_last_batch_bases();

  // Writes the producer-state snapshot: on the flusher thread after a
  // segment roll was sealed (the log's seal hook), never on the append path.
  // The state is copied under the append lock and written without it.
  status snapshot_producers();
  // The same at shutdown, skipped when it would change nothing: the
  // snapshot on disk (loaded or written) already covers the log end offset,
  // or there is none and nothing to put in one (an empty log, no producers).
  status snapshot_producers_if_changed();
  // Marks the partition gone (its topic was deleted, or the broker stops)
  // and wakes every listener; a waiting fetch then answers
  // UNKNOWN_TOPIC_OR_PARTITION at once instead of at max_wait_ms.
  void close();
  bool closed() const { return closed_.load(); }

  // ---- Leader epochs (OffsetForLeaderEpoch, follower truncation) -------------
  // This replica's leader-epoch history: each epoch that wrote to the log and
  // the first offset it wrote, ascending (storage::log::leader_epochs).
  std::vector<storage::epoch_entry> leader_epochs() const;
  // The largest epoch <= `e` in that history and the offset where it ended
  // (the start of the next epoch, or the log end offset for the latest);
  // nullopt when no epoch <= `e` is known (storage::log::end_offset_for_epoch).
  // The log's view only: Kafka's answer to OffsetForLeaderEpoch also counts
  // the leader's current epoch before it has written (partition/truncation.h,
  // leader_epoch_end).
  std::optional<storage::epoch_entry> end_offset_for_epoch(leader_epoch e) const;

 private:
  // cluster/'s own maintenance (retention, the cleaner) and tests work on
  // the log itself.
  friend class retention_task;
  friend class log_cleaner;
  friend struct partition_test_access;
  storage::log& log() { return *log_; }

  partition(storage::topic_partition tp, std::shared_ptr<storage::log> log, config::topic_config cfg,
            io::filesystem& fs, std::string snapshot_path);
  // Rebuilds producers_ from the newest usable snapshot at or below the log
  // end and the batches after it. append_mu_ held (or not yet shared).
  status load_producers();
  // The snapshot files in the log directory (their next offsets,
  // ascending) and the path of one. snapshots_ is filled at open.
  std::string snapshot_file(offset next) const;
  void list_snapshots();
  // Takes out of snapshots_ those above `end` (a truncation) and, beyond
  // the newest, those below `start` or past limits::max_producer_snapshots;
  // returns them, for remove_snapshots. append_mu_ held.
  std::vector<offset> prune_snapshots_locked(offset start, offset end);
  // Removes the files of snapshots pruned from the list (no lock needed:
  // no load looks at a snapshot once it is out of snapshots_).
  void remove_snapshots(const std::vector<offset>& gone);
  // The error a cut decided at `decided_at` gets once this partition's
  // leader epoch moved on (nullopt: none, or the cut holds). append_mu_ held.
  std::optional<status> fenced_cut(std::optional<leader_epoch> decided_at, const char* what) const;
  // Wakes the consumers' listeners when the high watermark moved, the
  // followers' when the log end did (both by default: every reader looks).
  void wake_listeners(bool hw_moved = true, bool appended = true);
  // Waits for the high watermark to pass `last` (on_committed's second half).
  void wait_high_watermark(offset last, storage::durable_callback cb);
  // Takes the tracker's high watermark; returns the commit waiters it
  // covers, for the caller to answer outside state_mu_. state_mu_ held.
  std::vector<storage::durable_callback> publish_high_watermark_locked();
  // Every commit and low-watermark waiter, to answer with `s` (leadership
  // lost). state_mu_ held.
  std::vector<storage::durable_callback> take_commit_waiters_locked();
  // The low-watermark waiters the low watermark now covers. state_mu_ held.
  std::vector<storage::durable_callback> take_low_watermark_waiters_locked();
  offset low_watermark_locked() const;  // state_mu_ held
  static void answer(std::vector<storage::durable_callback> cbs, const status& s);
  status rebuild_producers();
  // A marker ended `t` (appended as leader or follower, or replayed):
  // unstable until the high watermark passes its marker, and an abort goes
  // to the aborted index unless it is already there (replay after a
  // restart). Publishes the first open transaction. append_mu_ held.
  status note_ended_locked(const completed_txn& t);
  // Publishes producers_' first open transaction for last_stable_offset.
  // append_mu_ held.
  void publish_open_txns_locked();
  // The least first offset of the transactions still unstable below `hw`
  // besides the open ones, or nullopt. state_mu_ held.
  std::optional<offset> first_unreplicated_locked(offset hw) const;

  const storage::topic_partition tp_;
  sluice::topic_id topic_id_{};  // set once by open()
  int32_t node_id_ = 0;          // this broker; set once by open()
  mutable std::mutex state_mu_;
  // Guarded by state_mu_. Its epoch and high watermark and this broker's
  // own ISR log_end are filled in by replicas(): the epoch lives in epoch_
  // (every append reads it, so without the lock) and the high watermark is
  // derived.
  replica_state state_;
  std::atomic<int32_t> epoch_{0};
  std::atomic<bool> leader_{true};
  std::atomic<bool> left_{false};  // leave(): never leads again
  std::atomic<int64_t> hw_{0};
  std::atomic<int32_t> isr_count_{1};
  std::atomic<int32_t> replica_count_{1};
  std::atomic<int32_t> min_insync_{1};  // the config's min.insync.replicas
  const sluice::clock* clk_ = &sluice::clock::system();
  replica_tracker tracker_;  // guarded by state_mu_; meaningful while leading
  // The last ISR change proposed (propose_isr); guarded by state_mu_.
  std::vector<int32_t> last_proposed_;
  int32_t last_proposed_epoch_ = -1;
  int64_t last_proposed_ms_ = 0;
  // acks=all and group writes waiting for the high watermark, by last
  // offset; guarded by state_mu_.
  std::multimap<int64_t, storage::durable_callback> commit_waiters_;
  // DeleteRecords waiting for the low watermark, by target; state_mu_.
  std::multimap<int64_t, storage::durable_callback> low_watermark_waiters_;
  std::atomic<uint64_t> truncated_committed_{0};
  std::atomic<uint64_t> replicated_out_{0};
  int32_t partition_epoch_ = -1;  // of the last state applied; guarded by state_mu_
  const std::shared_ptr<storage::log> log_;
  io::filesystem& fs_;
  const std::string snapshot_path_;

  mutable std::mutex cfg_mu_;
  config::topic_config cfg_;

  std::mutex snapshot_mu_;  // one snapshot write at a time, in the order taken; before append_mu_
  std::mutex append_mu_;    // guards producers_, snapshot_offset_ and snapshots_
  producer_state producers_;
  offset snapshot_offset_{
      -1};
  // Next offsets of the snapshot files in the log directory, ascending.
  std::vector<offset> snapshots_;
  // The single snapshot earlier versions kept (snapshot_path_) exists; set
  // at open, cleared once a snapshot in the log directory replaces it.
  bool legacy_snapshot_ = false;
  // Transactions: the first offset of the oldest one open here (-1: none),
  // written under append_mu_ and state_mu_ both, read under either.
  std::atomic<int64_t> open_txn_first_{-1};
  // KIP-890's guards handed out and not yet retired, by producer id;
  // guarded by append_mu_. Ids are never reused (next_guard_).
  std::unordered_map<int64_t, uint64_t> verifications_;
  uint64_t next_guard_ = 1;
  uint64_t guard_generation_ = 0;  // bumped when a leadership change retires every guard
  // Transactions a marker ended while its marker was not yet below the high
  // watermark: still unstable until it is (pruned as the reads pass).
  // Guarded by state_mu_.
  mutable std::vector<completed_txn> unreplicated_txns_;
  // Whether unreplicated_txns_ holds any: written under state_mu_, read
  // without it, so a partition that never saw a transaction answers
  // last_stable_offset() with one atomic load (every Fetch asks).
  mutable std::atomic<bool> has_unreplicated_{false};
  // The aborted transactions (storage/aborted_index.h); set once by open().
  std::unique_ptr<storage::aborted_index> aborted_;
  offset producers_loaded_from_{-1};  // where the last load_producers began its replay (tests)  // next_offset of the snapshot on disk, if this process loaded or wrote it

  std::atomic<bool> closed_{false};
  std::atomic<uint64_t> bytes_appended_{0};
  std::mutex listeners_mu_;
  uint64_t next_token_ = 1;
  std::vector<std::pair<uint64_t, std::function<void()>>> listeners_;           // wake_on::high_watermark
  std::vector<std::pair<uint64_t, std::function<void()>>> append_listeners_;    // wake_on::append
};

// Converts storage config fields from a topic's effective config.
storage::log_config to_log_config(const config::topic_config& cfg);

}  // namespace sluice::cluster
