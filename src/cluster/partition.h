#pragma once

// A partition as the broker serves it: the storage log plus what Kafka
// layers on top of a leader's log: idempotent-producer state, the topic's
// effective config (max.message.bytes, message.timestamp.type, fsync), the
// high watermark, and the listeners that long-polling fetches wait on.
//
// Replica state: the partition knows its role (leader or follower), leader
// epoch, replicas and in-sync replicas with their log end offsets. Single
// node today: this broker leads every partition at leader epoch 0 and is
// its only replica, so the high watermark is the log end offset; with
// followers (issue 20) it becomes the smallest log end offset in the ISR,
// never moving backwards. Durability for acks=all is separate: see
// on_durable().
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
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "base/types.h"
#include "config/topic_config.h"
#include "base/error.h"
#include "cluster/metadata_store.h"
#include "cluster/producer_state.h"
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

// The outcome of one Produce partition, in Kafka's terms.
struct produce_outcome {
  errc error = errc::ok;
  std::string message;         // error detail for logs and v8+ error_message
  offset base{-1};             // base offset assigned (or of the original, for a duplicate)
  offset last{-1};             // last offset of the batch
  int64_t log_append_time_ms = -1;  // set when the topic uses LogAppendTime
  bool duplicate = false;      // a retry: nothing was appended
};

class partition {
 public:
  // Opens the producer state (snapshot + replay of the log tail). `snapshot_path`
  // is where this partition's producer-state snapshot lives.
  static result<std::shared_ptr<partition>> open(storage::topic_partition tp,
                                                 std::shared_ptr<storage::log> log,
                                                 config::topic_config cfg, io::filesystem& fs,
                                                 std::string snapshot_path, sluice::topic_id topic = {},
                                                 int32_t node_id = 0);

  const storage::topic_partition& id() const { return tp_; }
  // The id of the topic this partition belongs to: a request naming another
  // id reached it by a name that now belongs to a newer topic.
  const sluice::topic_id& topic_id() const { return topic_id_; }

  // Appends the producer's record batch (exactly one v2 batch, as Produce v3+
  // requires) as leader. `batch` is modified in place (offsets, epoch, and
  // for LogAppendTime the timestamp and CRC). Never throws; errors are in
  // the outcome.
  produce_outcome append(std::span<std::byte> batch, int64_t now_ms);

  // Calls `cb` when every offset <= last is durable (at once when the topic
  // relaxes fsync). See storage::log::on_durable.
  void on_durable(offset last, storage::durable_callback cb);

  // Bytes of batches appended since this partition was opened (the basis of
  // the write rate /metrics reports): one relaxed add per appended batch.
  uint64_t bytes_appended() const { return bytes_appended_.load(std::memory_order_relaxed); }

  // Consumers read below it. This broker's log end offset while it is the
  // only in-sync replica (see the header comment).
  offset high_watermark() const;
  offset log_start_offset() const;
  offset log_end_offset() const;
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
  // Whether this broker leads the partition (appends are accepted).
  bool is_leader() const { return leader_.load(std::memory_order_acquire); }
  // Whether a client's request (Fetch, ListOffsets, DeleteRecords) may be
  // served here: errc::not_leader when this broker follows;
  // fenced_leader_epoch when the client's `current_leader_epoch` (-1: not
  // given) is older than this leader's, unknown_leader_epoch when newer
  // (this broker has not learnt of it yet); ok otherwise.
  errc check_leader(int32_t current_leader_epoch = -1) const;

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
  // watermark), deleting the segments wholly below it.
  status delete_records_before(offset o);

  // ---- Storage, for the operator's view and tools ------------------------------
  std::vector<storage::segment_info> segments() const;
  struct storage_health {
    bool offline = false;       // a write error took the log offline
    bool out_of_space = false;  // the last append found the disk full
    uint64_t out_of_space_errors = 0;
    storage::damage_stats damage;
  };
  storage_health health() const;

  // Long-poll support: `fn` is called once, from the appending thread, the
  // next time data is appended (or when the partition is closed). Returns a
  // token to cancel with remove_listener (a cancelled listener is never called).
  uint64_t add_listener(std::function<void()> fn);
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
  // the leader's current epoch before it has written (cluster/truncation.h,
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
  status load_producers();
  void wake_listeners();

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
  int32_t partition_epoch_ = -1;  // of the last state applied; guarded by state_mu_
  const std::shared_ptr<storage::log> log_;
  io::filesystem& fs_;
  const std::string snapshot_path_;

  mutable std::mutex cfg_mu_;
  config::topic_config cfg_;

  std::mutex snapshot_mu_;  // one snapshot write at a time, in the order taken; before append_mu_
  std::mutex append_mu_;    // guards producers_ and snapshot_offset_
  producer_state producers_;
  offset snapshot_offset_{
      -1};  // next_offset of the snapshot on disk, if this process loaded or wrote it

  std::atomic<bool> closed_{false};
  std::atomic<uint64_t> bytes_appended_{0};
  std::mutex listeners_mu_;
  uint64_t next_token_ = 1;
  std::vector<std::pair<uint64_t, std::function<void()>>> listeners_;
};

// Converts storage config fields from a topic's effective config.
storage::log_config to_log_config(const config::topic_config& cfg);

}  // namespace sluice::cluster
