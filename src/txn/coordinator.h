#pragma once

// The transaction coordinator's decisions (Kafka's TransactionCoordinator
// with its TransactionStateManager), as plain logic: no threads, no I/O, no
// network. The broker wiring (handlers, the __transaction_state partitions,
// the marker sender) owns one coordinator and calls it.
//
// A state machine over records in __transaction_state
// (docs/transactions.md): a request is answered at once (an error, or a
// success that changes nothing durable), or it returns a *write*, the
// record to append to the id's partition of __transaction_state. Nothing
// changes in memory but the id's pending transition until the caller says
// how the write went:
//
//   written(ref)            the record is durable (acks=all): the metadata
//                           becomes it; returns the answer for the request
//                           that waits, and, after PrepareCommit or
//                           PrepareAbort, the markers to write
//   write_failed(ref, e)    the append failed with `e`: the pending
//                           transition is dropped; returns the answer (e
//                           mapped as Kafka maps append errors)
//   markers_written(m)      every marker of `m` is written (or its
//                           partition no longer exists): returns the write
//                           of CompleteCommit / CompleteAbort
//
// While a write (or the markers of an ending transaction) is in flight the
// id has a pending transition, and every request that would change the id
// answers CONCURRENT_TRANSACTIONS (retriable), as Kafka's pendingState does
// (a verification, DescribeTransactions and ListTransactions answer from
// the durable state). An append whose outcome is not known in time (acks=all
// not reached within the request timeout) is reported as write_failed with
// errc::unavailable: if the record lands later, the next load replays it.
//
// Loading: a partition of __transaction_state is loaded by replay
// (begin_load, replay of every record in log order, finish_load); until then
// its ids answer COORDINATOR_LOAD_IN_PROGRESS, and ids of partitions not
// loaded here NOT_COORDINATOR. finish_load returns the markers of
// transactions found in PrepareCommit/PrepareAbort: a coordinator that took
// over finishes what the last one started. The coordinator epoch given at
// load (the leader epoch of the partition) goes with every write and
// marker; a write or marker answer from an earlier load of the partition
// is refused (NOT_COORDINATOR), so a late completion cannot touch state
// loaded since.
//
// Time: every timestamp is the injected clock's wall-clock now_ms(), as
// Kafka's records carry. Timers are the caller's: expire_timed_out() every
// transaction.abort.timed.out.transaction.cleanup.interval.ms, expire_ids()
// every transaction.remove.expired.transaction.cleanup.interval.ms
// (txn::service_config).
//
// Thread safety: none. The owner serialises every call (one mutex, or one
// thread). Producer ids come from the injected source, called only from
// inside these calls.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/limits.h"
#include "base/result.h"
#include "txn/records.h"
#include "txn/state.h"

namespace sluice::txn {

struct coordinator_config {
  // transaction.state.log.num.partitions (the topic's partition count once
  // it exists).
  int32_t num_partitions = limits::default_transaction_state_partitions;
  // transaction.max.timeout.ms.
  int32_t max_timeout_ms = limits::default_transaction_max_timeout_ms;
  // transactional.id.expiration.ms.
  int64_t id_expiration_ms = limits::default_transactional_id_expiration_ms;
  // The cluster's transaction.version: the version of the aborts the
  // coordinator starts itself (fencing by InitProducerId, timeouts), as
  // Kafka uses its own feature level for them.
  txn_version server_version = txn_version::tv2;
};

// The next producer id (metadata/producer_ids.h in a broker), or an error
// answered as is. Called with the owner's serialisation held, from
// init_producer_id and end_txn when a new producer id is due, so it should
// not block: in a broker, the allocator's try_next, answering
// errc::coordinator_load_in_progress (retriable) while the next block of
// ids is fetched elsewhere, as Kafka's coordinator answers when its block
// runs out.
using producer_id_source = std::function<result<int64_t>()>;

// A request's answer. producer_id/producer_epoch are set on success of
// InitProducerId and of EndTxn v5+ (the id and epoch the producer uses
// next); -1 otherwise.
struct answer {
  errc error = errc::ok;
  int64_t producer_id = no_producer_id;
  int16_t producer_epoch = no_producer_epoch;
  bool operator==(const answer&) const = default;
};

// Kafka's control record types of a transaction marker.
enum class marker_type : int16_t { abort = 0, commit = 1 };

// The markers to write for an ending transaction (WriteTxnMarkers): one per
// partition, each a control batch of `type` for `producer_id` at
// `producer_epoch`, stamped with `coordinator_epoch` (a partition refuses a
// marker of an older coordinator epoch than it has seen). An empty list
// (an abort with nothing added, transaction version 2) has nothing to
// write: call markers_written at once.
struct markers {
  std::string transactional_id;
  int64_t producer_id = no_producer_id;
  int16_t producer_epoch = no_producer_epoch;
  int32_t coordinator_epoch = 0;
  marker_type type = marker_type::abort;
  txn_version version = txn_version::tv0;
  std::vector<topic_partition> partitions;
};

// Names one write to the caller's callbacks: written()/write_failed() take
// it back.
struct write_ref {
  uint64_t id = 0;  // unique over the coordinator's life
  int32_t partition = 0;
  int32_t coordinator_epoch = 0;
  std::string transactional_id;
};

// One record to append, as one batch (magic 2, no compression, producer id
// -1), to `ref.partition` of __transaction_state with acks=all. At most one
// write per id is in flight.
struct write {
  write_ref ref;
  std::vector<uint8_t> key;
  std::optional<std::vector<uint8_t>> value;  // nullopt: a tombstone
};

// A request's outcome: `now` is the answer unless `to_write` is set; then
// the request waits for written()/write_failed() of it.
struct decision {
  std::optional<write> to_write;
  answer now;
};

// What written() returns.
struct write_done {
  // The answer for the request that waits on this write, if one does
  // (writes from expire_timed_out, expire_ids and markers_written have
  // none; their answer is informational).
  answer reply;
  // After PrepareCommit/PrepareAbort: the markers to send.
  std::optional<markers> to_send;
};

// What write_failed() returns.
struct write_failure {
  answer reply;
  // A completion record (CompleteCommit/CompleteAbort) failed: the markers
  // stay written and the transaction stays ending (CONCURRENT_TRANSACTIONS
  // for its id); call markers_written(m) again to retry the record, as
  // Kafka retries while the partition is led here. A retry is pointless
  // after NOT_COORDINATOR: the partition is being unloaded.
  bool retry_completion = false;
};

struct init_producer_id_request {
  std::string transactional_id;  // the handler answers a null one without the coordinator
  int32_t transaction_timeout_ms = 0;
  // KIP-360 (v3+): the producer's current id and epoch, both -1 for none.
  int64_t producer_id = no_producer_id;
  int16_t producer_epoch = no_producer_epoch;
  int16_t api_version = 0;
};

struct add_partitions_request {
  std::string transactional_id;
  int64_t producer_id = no_producer_id;
  int16_t producer_epoch = no_producer_epoch;
  // Partitions the caller found to exist; this checks only their count
  // (limits::max_partitions_per_transaction).
  partition_set partitions;
  // 0-3: a client's AddPartitionsToTxn (transaction version 0); 4+ with
  // verify_only false: a partition leader adding for a producer of
  // transaction version 2 (KIP-890 part 2). verify_only goes to
  // verify_partitions instead.
  int16_t api_version = 0;
};

struct add_offsets_request {
  std::string transactional_id;
  int64_t producer_id = no_producer_id;
  int16_t producer_epoch = no_producer_epoch;
  // The partition of __consumer_offsets that holds the group (the caller
  // asks the group coordinator's partition_for).
  topic_partition offsets_partition;
  int16_t api_version = 0;
};

struct end_txn_request {
  std::string transactional_id;
  int64_t producer_id = no_producer_id;
  int16_t producer_epoch = no_producer_epoch;
  bool commit = false;
  // 5+: transaction version 2 (the epoch is bumped at every end).
  int16_t api_version = 0;
};

// AddPartitionsToTxn v4+ verify_only (KIP-890 part 1), asked by a partition
// leader before it appends a transactional batch: `error` for the whole
// request, else per partition ok or TRANSACTION_ABORTABLE (not in the
// transaction). The leader maps TRANSACTION_ABORTABLE for producers too
// old to know it (Kafka answers them INVALID_TXN_STATE).
struct verify_answer {
  errc error = errc::ok;
  std::map<topic_partition, errc> partitions;
};

struct describe_answer {
  errc error = errc::ok;
  std::string transactional_id;
  txn_state state = txn_state::empty;
  int32_t timeout_ms = 0;
  int64_t start_ms = -1;
  int64_t producer_id = no_producer_id;
  int16_t producer_epoch = no_producer_epoch;
  std::map<std::string, std::vector<int32_t>> topics;  // partitions ascending
};

struct list_filter {
  std::vector<std::string> states;     // Kafka's names; empty: every state
  std::vector<int64_t> producer_ids;   // empty: every producer id
  int64_t min_duration_ms = -1;        // v1: only transactions running longer; -1: all
};

struct list_answer {
  errc error = errc::ok;
  std::vector<std::string> unknown_state_filters;
  struct entry {
    std::string transactional_id;
    int64_t producer_id = no_producer_id;
    txn_state state = txn_state::empty;
    bool operator==(const entry&) const = default;
  };
  std::vector<entry> transactions;  // by transactional id
};

// A failed append to __transaction_state as Kafka's coordinator answers it:
// the partition not led here or its log failed -> NOT_COORDINATOR; too few
// in-sync replicas, a write that timed out or a partition missing ->
// COORDINATOR_NOT_AVAILABLE (retriable); a record too large ->
// UNKNOWN_SERVER_ERROR (errc::internal_error); anything else
// COORDINATOR_NOT_AVAILABLE.
errc map_append_error(errc e);

class coordinator {
 public:
  coordinator(coordinator_config cfg, sluice::clock& clk, producer_id_source next_producer_id);
  coordinator(const coordinator&) = delete;
  coordinator& operator=(const coordinator&) = delete;

  const coordinator_config& config() const { return cfg_; }
  // The partition of __transaction_state that holds `transactional_id`.
  int32_t partition_for(std::string_view transactional_id) const;

  // ---- Loading -----------------------------------------------------------------
  // Partition `p` starts loading at `coordinator_epoch` (its leader epoch
  // here). Whatever it held is dropped first, writes in flight included
  // (their written() answers NOT_COORDINATOR).
  void begin_load(int32_t p, int32_t coordinator_epoch);
  // Applies one record of partition `p` (loading) in log order: a value
  // replaces the id's metadata, a tombstone (nullopt) removes the id. A
  // record that does not decode, belongs to another partition, or carries a
  // state Kafka never writes (Dead, PrepareEpochFence) changes nothing and
  // is returned as an error for the caller to log; errc::unsupported_format
  // is a newer writer's record. errc::not_coordinator when `p` is not
  // loading.
  status replay(int32_t p, std::span<const uint8_t> key, std::optional<std::span<const uint8_t>> value);
  // Ends the load of `p`: its ids are served. Returns the markers of every
  // transaction found ending (PrepareCommit/PrepareAbort), in id order; each
  // id stays ending (CONCURRENT_TRANSACTIONS) until markers_written and the
  // completion record. Empty when `p` is not loading.
  std::vector<markers> finish_load(int32_t p);
  // Drops partition `p`'s ids (another coordinator has them now): later
  // requests for them answer NOT_COORDINATOR, and so do written() and
  // markers_written() of anything started before.
  void unload(int32_t p);
  bool loaded(int32_t p) const;
  bool loading(int32_t p) const;

  // ---- Requests ----------------------------------------------------------------
  decision init_producer_id(const init_producer_id_request& req);
  decision add_partitions(const add_partitions_request& req);
  verify_answer verify_partitions(const std::string& transactional_id, int64_t producer_id, int16_t producer_epoch,
                                  const partition_set& partitions);
  decision add_offsets(const add_offsets_request& req);
  decision end_txn(const end_txn_request& req);
  describe_answer describe(const std::string& transactional_id) const;
  list_answer list(const list_filter& filter) const;

  // ---- Completions -------------------------------------------------------------
  write_done written(const write_ref& ref);
  write_failure write_failed(const write_ref& ref, errc append_error);
  // Every marker of `m` is written: the completion record of its
  // transaction. NOT_COORDINATOR when `m` is of an earlier load or the
  // partition is gone; CONCURRENT_TRANSACTIONS while the completion record
  // is already in flight; INVALID_TXN_STATE when the id is not ending that
  // transaction.
  result<write> markers_written(const markers& m);

  // ---- Timers ------------------------------------------------------------------
  // Aborts every transaction Ongoing past its start + timeout (and with no
  // write in flight), fencing its producer with a bumped epoch, as Kafka's
  // abortTimedOutTransactions: one PrepareAbort write per id; written()
  // then returns its markers.
  std::vector<write> expire_timed_out();
  // Removes ids idle (Empty, CompleteCommit, CompleteAbort, nothing in
  // flight) for id_expiration_ms since their last update: one tombstone
  // write each, at most limits::max_expired_transactional_ids_per_pass;
  // written() forgets the id.
  std::vector<write> expire_ids();

  // Ids held, over all partitions (tests and metrics).
  size_t id_count() const { return id_count_; }

  // ---- Figures for /metrics ----------------------------------------------------
  struct figures {
    // Ids of loaded partitions whose durable state is Ongoing,
    // PrepareCommit or PrepareAbort: transactions open or ending.
    size_t ongoing = 0;
    // The start time (wall clock) of the oldest of them; -1: none.
    int64_t oldest_start_ms = -1;
    // Transactions this coordinator decided since it was made, counted when
    // the PrepareCommit/PrepareAbort record of an Ongoing transaction is
    // durable: committed, aborted (by the client's EndTxn, or fenced by a
    // newer producer's InitProducerId), and aborted because they outlived
    // their transaction.timeout.ms. An abort of nothing open (transaction
    // version 2) and a transaction found ending at load (decided by an
    // earlier coordinator) are not counted.
    uint64_t committed = 0;
    uint64_t aborted = 0;
    uint64_t timed_out = 0;
  };
  // Walks every id held (at most limits::max_transactional_ids).
  figures current_figures() const;
  // The metadata of an id, for tests and the operator's view; nullptr when
  // not held (or its partition is loading).
  const txn_metadata* find(const std::string& transactional_id) const;

 private:
  enum class part_state { loading, loaded };
  // What a pending write is, to answer and follow it up when it is done.
  enum class write_kind { init, add, end, fence_for_init, fence_for_timeout, complete, expire };
  struct in_flight {
    uint64_t id = 0;
    write_kind kind = write_kind::init;
    // Answer PRODUCER_FENCED as INVALID_PRODUCER_EPOCH (old request versions).
    bool old_fenced_code = false;
  };
  struct entry {
    txn_metadata md;
    std::optional<in_flight> write;
  };
  struct partition {
    part_state state = part_state::loading;
    int32_t coordinator_epoch = 0;
    std::map<std::string, entry, std::less<>> ids;
  };
  // The id's partition and entry, or the error its partition answers
  // (COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR); entry nullptr when
  // the partition is loaded and the id unknown.
  struct lookup {
    errc error = errc::ok;
    partition* part = nullptr;
    entry* e = nullptr;
  };
  lookup find_id(std::string_view transactional_id);
  decision make_write(partition& part, entry& e, const txn_log_value& transit, write_kind kind,
                      bool old_fenced_code);
  decision add_to_txn(const std::string& transactional_id, int64_t producer_id, int16_t producer_epoch,
                      const partition_set& partitions, txn_version version, bool old_fenced_code);
  // Kafka's endTransaction: a client's EndTxn (from_client) or an abort the
  // coordinator starts.
  decision end_transaction(const end_txn_request& req, txn_version version, bool old_fenced_code);
  markers markers_of(const partition& part, const txn_metadata& md) const;
  entry* entry_of(const write_ref& ref, partition** part);
  void drop_partition(int32_t p);

  coordinator_config cfg_;
  sluice::clock& clk_;
  producer_id_source next_producer_id_;
  std::map<int32_t, partition> partitions_;
  size_t id_count_ = 0;
  uint64_t next_write_id_ = 1;
  uint64_t committed_ = 0;
  uint64_t aborted_ = 0;
  uint64_t timed_out_ = 0;
};

}  // namespace sluice::txn
