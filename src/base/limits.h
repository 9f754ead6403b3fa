#pragma once

// Every hard limit of Sluice in one place. Settings an operator may change
// (segment.bytes, message.max.bytes, ...) live in the configuration schema
// (config/); this file holds the fixed bounds those settings must stay
// within and the defaults Kafka documents. Units are in the names.

#include <cstddef>
#include <cstdint>

namespace sluice::limits {

// ---- Record batches (Kafka's RecordBatch v2) -------------------------------
// The fixed header of a v2 batch, up to and including the record count.
inline constexpr size_t batch_header_bytes = 61;
// Largest batch the log accepts, whatever message.max.bytes says.
inline constexpr int64_t max_batch_bytes = 64ll << 20;
// Kafka's default message.max.bytes (1 MiB plus overhead).
inline constexpr int64_t default_message_max_bytes = 1'048'588;

// ---- Segments and indexes ---------------------------------------------------
inline constexpr int64_t default_segment_bytes = 1ll << 30;             // 1 GiB
inline constexpr int64_t min_segment_bytes = 14;                        // Kafka's lower bound
inline constexpr int64_t max_segment_bytes = (1ll << 31) - 1;           // positions fit in int32
inline constexpr int64_t default_segment_ms = 7ll * 24 * 3600 * 1000;   // 7 days
inline constexpr int64_t default_index_interval_bytes = 4096;
inline constexpr int64_t default_segment_index_bytes = 10ll << 20;      // 10 MiB per index file
inline constexpr size_t offset_index_entry_bytes = 8;                   // relative offset, position
inline constexpr size_t time_index_entry_bytes = 12;                    // timestamp, relative offset
// Kafka's file.delete.delay.ms: a retired segment's files are removed this
// long after they leave the log.
inline constexpr int64_t default_file_delete_delay_ms = 60'000;

// ---- Time (base/clock.h) ------------------------------------------------------
// The longest one sleep of a thread waiting for a deadline on the real
// clock; a later deadline takes several (no duration overflows).
inline constexpr int64_t max_clock_sleep_ms = 24ll * 3600 * 1000;
// How often threads waiting on a manual clock (tests) read it again: an
// advance is noticed within this much real time.
inline constexpr int64_t manual_clock_poll_ms = 5;

// Log lines a client can cause over and over (connections refused beyond
// max.connections, versions the broker does not serve) are written at most
// once per this interval at their level; the rest are counted or go to
// DEBUG, so a client retrying in a loop cannot flood the log.
inline constexpr int64_t rate_limited_log_interval_ms = 1000;

// ---- The etcd client (etcd/, docs/etcd_client.md) ---------------------------
// Defaults of etcd::grpc_client_options. One request (one attempt at one
// endpoint) gets this long before it counts as failed and the next endpoint
// is tried.
inline constexpr int64_t default_etcd_request_timeout_ms = 2'000;
// All attempts of one call together: after this long the call returns
// errc::unavailable naming the endpoints. A little over two elections of a
// default etcd (election timeout 1 s), so a leader change does not fail calls.
inline constexpr int64_t default_etcd_retry_budget_ms = 5'000;
// Backoff between attempts: starts here, doubles up to the max, and each
// wait is shortened by a random share of up to jitter_percent.
inline constexpr int64_t default_etcd_backoff_initial_ms = 50;
inline constexpr int64_t default_etcd_backoff_max_ms = 1'000;
inline constexpr int64_t default_etcd_backoff_jitter_percent = 50;
// How long gRPC waits between attempts to reconnect to a member that went
// away (its own exponential backoff, from the initial value and capped here
// so a restarted member is used again within about a second).
inline constexpr int64_t etcd_reconnect_backoff_initial_ms = 100;
inline constexpr int64_t etcd_reconnect_backoff_max_ms = 1'000;
// How long one connection attempt to a member may take, handshake
// included (gRPC's minimum connect timeout). Generous: a busy machine or a
// SYN retransmitted after a network cut healed must not cut an attempt
// that would have succeeded. Calls do not wait for it: each has its own
// deadline, and another member is tried meanwhile.
inline constexpr int64_t etcd_connect_timeout_ms = 5'000;
// After SIGTERM a broker gives etcd this long to answer what a clean stop
// needs (a controlled shutdown, revoking its lease): etcd::client::wind_down.
// Past it the broker stops anyway, and etcd expires the lease after the
// session timeout.
inline constexpr int64_t etcd_shutdown_grace_ms = 2'000;
// Endpoints in one client's list, and the longest endpoint list string.
inline constexpr size_t max_etcd_endpoints = 16;
inline constexpr size_t max_etcd_endpoints_string_bytes = 4096;
// A lease_keeper retries a failed keepalive after this long (or sooner, at a
// third of the TTL, when that is shorter).
inline constexpr int64_t etcd_keepalive_retry_ms = 500;
// The largest message the client accepts from etcd (etcd's own default
// --max-request-bytes is 1.5 MiB; ranges may answer with more).
inline constexpr int etcd_max_receive_message_bytes = 64 << 20;
// Operations the controller puts in one etcd transaction: etcd refuses
// more than --max-txn-ops (128 by default), and the controller adds its own
// compares beside them.
inline constexpr size_t controller_txn_max_ops = 100;
// A batch of leaders' ISR changes (controller::write_isr_changes) goes to
// etcd in transactions of at most this many compares, puts and else-branch
// reads each (etcd checks each list against --max-txn-ops, 128 by
// default), and at most this many bytes of keys and values, well inside
// etcd's --max-request-bytes (1.5 MiB by default).
inline constexpr size_t isr_txn_max_ops = 100;
inline constexpr size_t isr_txn_max_bytes = 256 << 10;
// ISR changes the metadata thread writes between two looks at its session
// (a lost lease is renewed before more are written).
inline constexpr size_t isr_changes_per_round = 200;
// The broker's etcd settings (config/schema.cc; docs/configuration.md,
// "Running a cluster"). max_etcd_endpoints above also bounds
// sluice.etcd.endpoints.
// sluice.etcd.prefix starts every key of a cluster; a short bound keeps
// every key (prefix, then topic names of up to 249 bytes) well inside
// etcd's limits and listings readable.
inline constexpr size_t max_etcd_prefix_bytes = 128;
// sluice.etcd.session.timeout.ms, the TTL of a broker's etcd lease. etcd
// raises any TTL below its own minimum (1.5 election timeouts, 2 s once
// rounded up with its default settings) to that minimum anyway, so a
// smaller value would promise what etcd does not do. Five minutes is the
// longest a dead broker may stay registered.
inline constexpr int64_t min_etcd_session_timeout_ms = 2'000;
inline constexpr int64_t max_etcd_session_timeout_ms = 300'000;
// sluice.etcd.request.timeout.ms (default default_etcd_request_timeout_ms):
// one attempt's deadline before the next endpoint is tried.
inline constexpr int64_t min_etcd_request_timeout_ms = 100;
inline constexpr int64_t max_etcd_request_timeout_ms = 60'000;
// A cluster broker whose view of the cluster is not known current
// (cluster::control_plane::view_current) holds a Metadata request back
// until it is, looking this often, and for this long at most before it
// answers with the view it has (kafka/handlers/metadata.cc). A resumed
// broker renews its session and catches up in tens of milliseconds, one
// back from a network cut within a second; while etcd is away for longer
// (a lost quorum) every Metadata answer takes this long. The wait ends
// well inside any client's request timeout.
inline constexpr int64_t metadata_view_poll_ms = 10;
inline constexpr int64_t metadata_stale_view_wait_ms = 3'000;
// A broker starting with the node id of a registration that is still live
// (its previous process, killed and restarted at once) waits for that
// session to end: the session timeout and this much more, looking again
// this often.
inline constexpr int64_t registration_wait_slack_ms = 1'000;
inline constexpr int64_t registration_poll_ms = 200;
// The metadata thread (cluster::control_plane::run) wakes at least this
// often when nothing arrives, to renew a lost session, run due elections
// and retry queued ISR changes.
inline constexpr int64_t control_plane_tick_ms = 500;
// The ISR upkeep of a leader (cluster::replica_manager) runs every half of
// replica.lag.time.max.ms, and at least this often.
inline constexpr int64_t isr_upkeep_max_interval_ms = 1'000;
// A controller request forwarded to the controller (kafka/forwarder.cc)
// looks at its deadline at least this often while it waits on the socket.
inline constexpr int64_t forward_poll_ms = 1'000;

// ---- Files ------------------------------------------------------------------
// The longest a flush.ms timer is armed for: a larger flush.ms syncs after
// this long instead.
inline constexpr int64_t max_flush_timer_ms = 24ll * 3600 * 1000;
// Open segment file handles per broker; idle segments are closed beyond this.
inline constexpr size_t default_max_open_segment_files = 1024;
// Checkpoint files are small text files; a larger one on disk is corrupt.
inline constexpr size_t max_checkpoint_file_bytes = 16ll << 20;
// Recovery reads segment files in chunks of this size (one buffer at a time,
// freed after the scan; a batch larger than this gets a buffer of its size).
inline constexpr size_t recovery_scan_chunk_bytes = 1 << 20;

// The scrubber (docs/log_format.md, "Damaged batches"): it reads every
// segment at sluice.log.scrub.bytes.per.second (default 16 MiB/s, a small
// share of a disk; 0 turns it off), one pass at start-up and then at most
// one pass per interval, so small data directories are not reread (and
// their file handles not churned) over and over.
inline constexpr int64_t default_scrub_bytes_per_second = 16ll << 20;
inline constexpr int64_t max_scrub_bytes_per_second = 1ll << 40;
inline constexpr int64_t scrub_pass_interval_ms = 3'600'000;
// Checked byte ranges remembered per segment (reads check the batches of a
// range no scan has checked before serving them). One catch-up consumer
// grows one range; a range forgotten beyond this is only checked again.
inline constexpr size_t max_verified_ranges_per_segment = 64;

// The batches of a partition's log are reread in chunks of this size when
// its idempotent-producer state is rebuilt from the batch headers at open.
inline constexpr size_t producer_state_replay_read_bytes = 8 << 20;

// Idempotent-producer state snapshots a partition keeps in its log
// directory, one per roll (docs/metadata_format.md): a truncation rebuilds
// from the newest one at or below its cut. Older ones go first.
inline constexpr size_t max_producer_snapshots = 16;

// Disk blocks an active segment reserves ahead of its end, at most up to
// segment.bytes (io::file::reserve, fallocate without a size change): an
// append into reserved blocks allocates nothing, so each group commit writes
// the data and the inodes' sizes but no block bitmaps or group descriptors.
// Three brokers on one disk at 20,000 msgs/s, 16 partitions: rounds of
// syncs like theirs took 18% less time and 28% less CPU with reserved
// blocks (0.52 against 0.63 ms at the median). A roll releases what its
// segment did not use; at most this much per partition is reserved unused.
inline constexpr uint64_t segment_reserve_bytes = 8 << 20;
// The active segment's prepared tail (storage/README.md, "Prepared tails"):
// zeros are written and synced this far past its end, at most up to
// segment.bytes, and written again once less than half of it is left, so
// a group commit of appends inside it syncs their data without metadata
// (on this VM a round took 0.27 instead of 0.48 ms, with 113 instead of 262
// us of CPU, for three processes syncing 7 files each). The zeros are
// written in pieces, each with the log's mutex held (appends wait for one
// piece at most).
inline constexpr uint64_t segment_prepare_bytes = 1 << 20;
inline constexpr size_t segment_prepare_piece_bytes = 64 << 10;
// The preparing thread's pause after each piece: at most 64 MB/s of zeros
// per broker, so the tails of partitions that grow alike (and so ask
// together) are written one after another, not in a burst that holds up the
// group commits (rounds of 4-11 ms every 400 ms at 20,000 msgs/s without).
inline constexpr int64_t segment_prepare_piece_pause_us = 1000;
// A log whose appends ran past its prepared tail (faster than the tail is
// written) prepares none for this long: at such rates the group commits
// are large, their metadata is a small part, and the zeros only doubled
// the writes (unlimited cluster publish fell by a third).
inline constexpr int64_t segment_prepare_backoff_ms = 1000;

// sluice.follower.cache.drop.behind.bytes: on a follower, once synced, the
// bytes of a partition's active segment further than this behind its end
// leave the page cache (posix_fadvise DONTNEED). Nobody reads a follower's
// copy (consumers read leaders; KIP-392 readers and a future leadership
// read the tail), so its cache would only take memory; the follower's next
// writes reuse the pages instead. Page-cache growth is not free: the memory
// has to be found, and on a VM whose host takes back the guest's free
// memory (as this project's benchmark VM's does), every new page costs a
// host fault. With three brokers writing 550 MB/s there (two thirds of it
// follower copies), growing the cache cost 80% of the brokers' CPU, 6.2 us
// a message; with followers dropping 32 MiB behind the end, 2.8-3.4 us and
// half again the publish rate, while catch-up consumers still read the
// leaders' cache. 0: never dropped (as Kafka).
inline constexpr int64_t default_follower_cache_drop_behind_bytes = 32ll << 20;
inline constexpr int64_t max_follower_cache_drop_behind_bytes = 1ll << 40;
// Bytes dropped at a time, at least (a quarter of the setting, within these
// bounds): one fadvise per step, not one per group commit.
inline constexpr uint64_t min_cache_drop_step_bytes = 64 << 10;
inline constexpr uint64_t max_cache_drop_step_bytes = 4 << 20;

// Threads of the group-commit flusher. One round of syncs runs at a time
// and takes every log queued (one syncfs for all of them, or their
// fdatasyncs started together: sluice.log.fsync.scope): rounds that
// overlap contend for the same device flushes and lengthen each other
// (measured with three brokers at 20,000 msgs/s, three runs each: one
// round at a time gave publish p99 9.2-16 ms, two at once 21-41 ms). The
// second thread seals what a round's logs rolled, and serves flush.ms
// timers, while the next round runs.
inline constexpr int flusher_threads = 2;
// Threads that close partition logs and write producer snapshots at
// shutdown (and open logs at start). Like the flusher's, they overlap the
// syncs of different partitions in the device queue and the file system's
// journal; a few are enough to keep a device busy.
inline constexpr size_t shutdown_threads = 8;
// Logs that log_manager::get_or_create_all creates under its lock before
// one sync of the data directory makes all their names durable: the lock
// is held for tens of milliseconds (a log's creation is a
// few file operations and no sync), and 20,000 new partitions cost 40
// directory syncs instead of 20,000.
inline constexpr size_t logs_created_per_directory_sync = 512;
// A replica fetcher whose broker's own registration is not in its image
// yet (the moments after a start or a new session) sends no fetch, since
// the leader would refuse it (STALE_BROKER_EPOCH) and the fetcher would
// wait replica.fetch.backoff.ms (1 s); it looks for the epoch again after
// this long instead.
inline constexpr int64_t replica_fetch_epoch_poll_ms = 20;
// How often a cluster broker writes its replicas' high watermarks to
// meta/high_watermarks (Kafka's replica.high.watermark.checkpoint.interval.ms
// default), so that a restarted replica does not start from its log start.
inline constexpr int64_t high_watermark_checkpoint_interval_ms = 5'000;
// A leader asks for the same ISR change again after this long (a change
// still in flight, or refused), not at every upkeep.
inline constexpr int64_t isr_proposal_repeat_ms = 2'000;
// The largest meta/high_watermarks file read back (a line per partition).
inline constexpr size_t max_high_watermark_checkpoint_bytes = 64 << 20;

// ---- Network ----------------------------------------------------------------
// The server's own buffers (net/server.cc).
// Bytes read from a socket per read call. Also bounds how many bytes of
// not-yet-dispatched requests a paused connection holds in memory.
inline constexpr size_t read_buffer_bytes = 64 * 1024;
// A frame's buffer is reserved up to this size when its length arrives,
// so the bytes of a typical produce request (librdkafka batches up to 1 MB)
// are copied once rather than again at every doubling; a larger frame grows
// from here as its bytes arrive. A reservation is address space: glibc maps
// a block this big fresh or reuses a freed one, and its pages are touched
// only as bytes land in them.
inline constexpr size_t frame_reserve_bytes = 1 << 20;
// Most iovecs and bytes handed to one sendmsg call.
inline constexpr int max_iovecs = 64;
inline constexpr uint64_t max_gather_bytes = 4ull << 20;
// Largest count for one sendfile call (Linux caps it at 0x7ffff000 anyway).
inline constexpr uint64_t max_sendfile_bytes = 1ull << 30;
// socket.request.max.bytes, Kafka's default.
inline constexpr int64_t default_socket_request_max_bytes = 100ll << 20;  // 100 MiB
// fetch.max.bytes: largest Fetch answer the broker builds, whatever the
// request asks (Kafka's default, 55 MiB, and its lower bound).
inline constexpr int64_t default_fetch_max_bytes = 55ll << 20;
inline constexpr int64_t min_fetch_max_bytes = 1024;
// sluice.fetch.bytes.per.rtt.ms: a Fetch answer carries at most this many
// bytes per millisecond of its connection's minimum round trip
// (net/tcp_info.h), and never less than fetch_rtt_sized_floor_bytes.
// librdkafka keeps one fetch in flight per broker and parses an answer only
// once all of it has arrived, so the answer must cover a few round trips of
// the path to keep it busy: 10 MiB per ms is about four round trips at
// 20 Gbit/s. A larger answer adds nothing on that path; on a short one it
// only falls out of the client's cache before it is parsed (on the 2-core
// benchmark machine one consumer read loopback about twice as fast with
// 1 MiB answers as with its default 16 MiB ones: tools/bench/README.md).
inline constexpr int64_t default_fetch_bytes_per_rtt_ms = 10ll << 20;
inline constexpr int64_t max_fetch_bytes_per_rtt_ms = 1ll << 40;
// The smallest answer that sizing makes: librdkafka's and the Java client's
// default max.partition.fetch.bytes, so a partition's whole share fits.
inline constexpr int64_t fetch_rtt_sized_floor_bytes = 1ll << 20;
inline constexpr int64_t default_connections_max_idle_ms = 10ll * 60 * 1000;
inline constexpr int64_t default_max_connections = 10'000;
inline constexpr int64_t default_max_inflight_requests_per_connection = 64;
// Bytes of request frames handed to the broker and not yet answered on one
// connection past which the server stops reading from it.
inline constexpr int64_t default_max_inflight_request_bytes_per_connection = 64ll << 20;  // 64 MiB
// Owned response bytes waiting to be written on one connection past which
// the server stops reading from it (file regions sent by sendfile do not
// count: they cost no memory).
inline constexpr int64_t default_max_queued_response_bytes_per_connection = 64ll << 20;  // 64 MiB
// The listening socket's accept queue (listen(2)'s backlog).
inline constexpr int default_listen_backlog = 1024;
// After a failed accept (out of descriptors and the like) the server waits
// this long before accepting again, rather than spin.
inline constexpr int64_t accept_retry_delay_ms = 100;
// How long a graceful stop waits for in-flight requests to be answered.
inline constexpr int64_t default_shutdown_drain_timeout_ms = 10'000;
// queued.max.request.bytes: bytes of request frames the whole server holds
// at once, being read or handed to the broker and not yet answered, counted
// by declared length from when a frame's length arrives; a frame that does
// not fit waits, unread, until some are freed (net/server.h). Kafka's
// default is -1 (unbounded): 30 connections each sending 99 MiB of a
// 100 MiB frame then hold 3 GB. Must be at least socket.request.max.bytes
// plus request_budget_reserve_bytes, so one largest frame always fits.
inline constexpr int64_t default_queued_max_request_bytes = 256ll << 20;  // 256 MiB
// Frames declaring at most this many bytes are "small": they may use the
// whole bound, including the reserve below that larger frames cannot
// touch, and do not queue behind larger frames. Metadata, heartbeats,
// offset commits and fetch requests are small, so they keep being served
// while large frames hold the rest.
inline constexpr int64_t request_budget_small_frame_bytes = 64ll << 10;  // 64 KiB
// The part of queued.max.request.bytes only small frames may use.
inline constexpr int64_t request_budget_reserve_bytes = 16ll << 20;  // 16 MiB
// The rule above, in one place (config validation and the server's start):
// the smallest queued.max.request.bytes that lets a frame of
// socket_request_max_bytes be read beside `reserve_bytes`.
constexpr int64_t min_queued_max_request_bytes(int64_t socket_request_max_bytes,
                                               int64_t reserve_bytes = request_budget_reserve_bytes) {
  return socket_request_max_bytes + reserve_bytes;
}
// sluice.request.read.timeout.ms: once a request frame is admitted under
// queued.max.request.bytes, the whole frame must arrive within this, or the
// connection is closed and the frame's share freed. Clients give up on a
// request after their request.timeout.ms (30 s by default) anyway; this
// stops a client that stalls or trickles mid-frame (slowloris), or declares
// a large frame and sends nothing, from holding its share for longer.
inline constexpr int64_t default_request_read_timeout_ms = 30'000;

// ---- The log cleaner (maintenance/compaction.h) ----------------------------------
// Bytes read from a segment per read_segment call.
inline constexpr size_t cleaner_read_chunk_bytes = 1 << 20;
// Cleaned bytes gathered before one append to the cleaned copy.
inline constexpr size_t cleaner_write_chunk_bytes = 1 << 20;

// ---- Idempotent producers (partition/producer_state.h) ---------------------------
// Batches remembered per producer for duplicate detection: Kafka's bound on
// max.in.flight.requests.per.connection with idempotence.
inline constexpr size_t batches_per_producer = 5;

// ---- Transactions in a partition (partition/partition.h) -------------------
// Aborted transactions one read_committed fetch answer names per partition:
// the client needs those that began below the answer's end; a consumer far
// behind many aborts gets the first ones and the rest with its next fetches
// (the answer's records end before what it cannot name: partition::
// aborted_transactions returns where to stop reading).
inline constexpr size_t max_aborted_txns_per_fetch = 1'000;
// Aborted transactions the log cleaner holds while it cleans one partition
// (16 bytes each): a partition with more is not cleaned (logged), rather
// than cleaned past aborted records that could hide committed ones.
inline constexpr size_t max_aborted_txns_per_clean = 1'000'000;
// How long a leader waits for a transaction marker it appended to commit
// before it answers the coordinator REQUEST_TIMED_OUT (Kafka's
// request.timeout.ms default); the coordinator then writes it again.
inline constexpr int64_t txn_marker_commit_timeout_ms = 30'000;
// How soon a transaction marker that could not be written (its partition's
// leader moving, not reachable) is tried again.
inline constexpr int64_t txn_marker_retry_ms = 500;
// KIP-890: producers whose first transactional batch on one partition is
// being verified with their coordinator at once (partition::
// begin_verification; Kafka has no bound). Beyond it, NOT_ENOUGH_REPLICAS,
// which producers retry.
inline constexpr size_t max_verifications_per_partition = 10'000;
// Verifications (AddPartitionsToTxn v4+ verify_only) waiting to be sent to
// other brokers' transaction coordinators at once (kafka/txn_verifier.h).
// Beyond it a Produce is answered NOT_ENOUGH_REPLICAS.
inline constexpr size_t max_remote_verifications_queued = 10'000;
// How long a leader waits for another broker's coordinator to answer a
// verification before it answers the producer NOT_ENOUGH_REPLICAS.
inline constexpr int64_t txn_verify_timeout_ms = 5'000;
// How long AddPartitionsToTxn / AddOffsetsToTxn wait for the transactional
// id's last transaction to complete (its markers and completion record)
// before they answer CONCURRENT_TRANSACTIONS, and how many may wait at once
// on one broker (beyond, answered at once).
inline constexpr int64_t txn_concurrent_wait_ms = 2'000;
inline constexpr size_t max_parked_txn_requests = 10'000;
// The transaction service thread's wake-up when idle: marker retries and
// the coordinator's timers are checked this often.
inline constexpr int64_t txn_service_tick_ms = 100;

// ---- Topics (broker/) -----------------------------------------------------
// Kafka's limit on a topic name's length. "<topic>-<partition>" does not
// always fit a file name with it (249 + 1 + 10 digits > 255): see
// storage::topic_partition::dir_name for the names that do not.
inline constexpr size_t max_topic_name_bytes = 249;
// NAME_MAX of every file system Linux brokers run on (ext4, xfs, tmpfs,
// btrfs): the longest name of one directory entry. Partition directories,
// their "-delete" renames and the producer snapshots' names stay within it.
inline constexpr size_t max_file_name_bytes = 255;

// Idempotent producers remembered per partition; the least recently active
// are forgotten beyond this (Kafka bounds them by producer.id.expiration.ms).
inline constexpr size_t max_producers_per_partition = 100'000;

// ---- Consumer groups (group/) ----------------------------------------------
// They bound what client input can make the group coordinator hold in memory
// and write in one record. The operator's settings (group.max.size, the
// session timeout range) live in the config schema; these are the fixed
// bounds beside them.
// Groups one broker coordinates, counting groups that only hold offsets.
inline constexpr size_t max_groups = 100'000;
// A group id; Kafka has no bound, but ours must fit the int16-length string
// of the record key with room to spare.
inline constexpr size_t max_group_id_bytes = 2048;
// Client-chosen ids: group.instance.id, protocol type and names.
inline constexpr size_t max_name_bytes = 2048;
// Protocols one member may offer in JoinGroup (the consumer offers one per
// assignor, usually one to three).
inline constexpr size_t max_protocols_per_member = 32;
// Sum of one member's protocol metadata bytes (subscriptions, with owned
// partitions for the cooperative protocol).
inline constexpr size_t max_member_metadata_bytes = 256 * 1024;
// One member's assignment as the leader sends it in SyncGroup.
inline constexpr size_t max_assignment_bytes = 256 * 1024;
// Kafka's offset.metadata.max.bytes default: the metadata string of one
// committed offset.
inline constexpr size_t max_offset_metadata_bytes = 4096;
// Committed partitions one group may hold, its pending transactional
// offsets (TxnOffsetCommit, one per producer and partition until the
// producer's marker) counted with them.
inline constexpr size_t max_offsets_per_group = 100'000;
// max.message.bytes of __consumer_offsets: one group record of a large group
// must fit.
inline constexpr int32_t offsets_topic_max_message_bytes = 16 * 1024 * 1024;
// __consumer_offsets is replayed at start in reads of this size.
inline constexpr size_t group_replay_read_bytes = 1 << 20;

// ---- Group configs (GROUP config resources, config/group_config.h) ---------
// Per-group configs set with IncrementalAlterConfigs on resource type 32.
// Kafka bounds neither the groups nor their configs; these keep what
// clients can make every broker hold (and a single broker rewrite at each
// change) small.
// Groups that hold at least one config at once; a SET that would add one
// more is refused (INVALID_CONFIG). Group ids are bounded by
// max_group_id_bytes above.
inline constexpr size_t max_groups_with_configs = 10'000;
// One group config value in its textual form: the longest one a client has
// reason to send is a dead-letter topic name (249 bytes at most) or a
// by_duration:<ISO-8601> reset.
inline constexpr size_t max_group_config_value_bytes = 255;
// A single broker's meta/group_configs (every group's configs, one file
// replaced whole at each change). A change that would make it larger is
// refused; at ordinary group-id lengths max_groups_with_configs groups with
// every key set take about 5 MiB.
inline constexpr size_t max_group_configs_file_bytes = 16 << 20;
// The bounds Kafka's broker settings put on group values by default
// (GroupCoordinatorConfig, ShareGroupConfig of Kafka 4.2 and KIP-1240),
// used for a group value while Sluice's schema has no broker setting of
// that name (group.share.min.record.lock.duration.ms, ...): when the
// setting exists its value bounds the group value instead
// (config/group_config.h).
inline constexpr int64_t min_share_record_lock_duration_ms = 15'000;   // group.share.min.record.lock.duration.ms
inline constexpr int64_t max_share_record_lock_duration_ms = 60'000;   // group.share.max.record.lock.duration.ms
inline constexpr int64_t min_share_delivery_count_limit = 2;           // group.share.min.delivery.count.limit
inline constexpr int64_t max_share_delivery_count_limit = 10;          // group.share.max.delivery.count.limit
inline constexpr int64_t min_share_session_timeout_ms = 45'000;        // group.share.min.session.timeout.ms
inline constexpr int64_t max_share_session_timeout_ms = 60'000;        // group.share.max.session.timeout.ms
inline constexpr int64_t min_share_heartbeat_interval_ms = 5'000;      // group.share.min.heartbeat.interval.ms
inline constexpr int64_t max_share_heartbeat_interval_ms = 15'000;     // group.share.max.heartbeat.interval.ms
inline constexpr int64_t min_consumer_session_timeout_ms = 45'000;     // group.consumer.min.session.timeout.ms
inline constexpr int64_t max_consumer_session_timeout_ms = 60'000;     // group.consumer.max.session.timeout.ms
inline constexpr int64_t min_consumer_heartbeat_interval_ms = 5'000;   // group.consumer.min.heartbeat.interval.ms
inline constexpr int64_t max_consumer_heartbeat_interval_ms = 15'000;  // group.consumer.max.heartbeat.interval.ms
// How often the coordinator's timer runs (session and rebalance timeouts,
// the initial rebalance delay); timeouts fire up to this late.
inline constexpr int64_t tick_interval_ms = 50;

// ---- Transactions (txn/) --------------------------------------------------
// Kafka's defaults for the transaction coordinator's settings, and the fixed
// bounds on what client input can make it hold in memory and write in one
// record of __transaction_state.
// transaction.state.log.num.partitions.
inline constexpr int32_t default_transaction_state_partitions = 50;
// transaction.state.log.replication.factor: __transaction_state gets
// min(this, live brokers) replicas when the controller creates it.
inline constexpr int16_t default_transaction_state_replication_factor = 3;
// transaction.state.log.min.isr: its min.insync.replicas (at most its
// replicas).
inline constexpr int32_t default_transaction_state_min_isr = 2;
// transaction.max.timeout.ms: the longest transaction.timeout.ms a producer
// may ask for (15 minutes).
inline constexpr int32_t default_transaction_max_timeout_ms = 900'000;
// transactional.id.expiration.ms: an id idle this long (no transaction open)
// is removed (7 days).
inline constexpr int64_t default_transactional_id_expiration_ms = 7ll * 24 * 3600 * 1000;
// transaction.abort.timed.out.transaction.cleanup.interval.ms: how often
// transactions past their timeout are looked for and aborted.
inline constexpr int64_t default_transaction_abort_interval_ms = 10'000;
// transaction.remove.expired.transaction.cleanup.interval.ms: how often idle
// transactional ids are looked for and removed.
inline constexpr int64_t default_transactional_id_removal_interval_ms = 3'600'000;
// Transactional ids one broker's coordinator holds over all its partitions
// of __transaction_state (Kafka has no bound). A new id beyond it is refused
// (POLICY_VIOLATION); ids of replayed records always load.
inline constexpr size_t max_transactional_ids = 100'000;
// A transactional id; Kafka has no bound, but ours must fit the int16-length
// string of the record key with room to spare.
inline constexpr size_t max_transactional_id_bytes = 2048;
// Partitions in one transaction (Kafka has no bound). With topic names of
// at most 249 bytes one transaction record stays under
// transaction_state_max_message_bytes.
inline constexpr size_t max_partitions_per_transaction = 10'000;
// max.message.bytes of __transaction_state: one record of a transaction at
// max_partitions_per_transaction, every partition in its own topic of the
// longest name (about 2.6 MB), fits.
inline constexpr int32_t transaction_state_max_message_bytes = 4 * 1024 * 1024;
// Tombstones one pass of transactional-id expiry writes (all partitions
// together); the rest wait for the next pass, so one pass cannot build an
// unbounded batch.
inline constexpr size_t max_expired_transactional_ids_per_pass = 10'000;

// ---- Configuration bounds (config/schema.cc) --------------------------------
// Upper bounds on settings an operator may raise, so that no setting can make
// a structure grow without limit.
inline constexpr int64_t max_socket_request_max_bytes = 1ll << 30;     // 1 GiB frames at most
inline constexpr int64_t max_io_threads = 256;
inline constexpr int64_t max_connections_upper_bound = 1'000'000;
inline constexpr int64_t max_inflight_requests_per_connection = 1024;
inline constexpr int64_t max_queued_max_request_bytes = 64ll << 30;         // 64 GiB
inline constexpr int64_t max_request_read_timeout_ms = 24ll * 3600 * 1000;  // a day
inline constexpr int64_t max_partitions_per_topic = 10'000;
// Partitions one broker holds, over all topics (auto-creation included), so
// clients cannot grow open logs and memory without bound.
inline constexpr int64_t max_partitions_per_broker = 100'000;
// The log manager's clean-shutdown record names every log that closed
// cleanly: at most this many bytes (every partition a broker may hold, each
// name at its longest, plus the header and checksum lines).
inline constexpr size_t max_clean_shutdown_record_bytes =
    static_cast<size_t>(max_partitions_per_broker) * (max_file_name_bytes + 1) + 4096;
// Replicas of one partition (default.replication.factor,
// offsets.topic.replication.factor, CreateTopics). Kafka bounds it only by
// its int16 (32767). Sluice holds a partition's assignment, and on its
// leader a fetch state per follower, per replica, so a bound keeps what one
// CreateTopics can make every broker hold small; 32 is far beyond any use
// (3 is usual, 5 rare). Whether the live brokers can meet a factor is
// checked when a topic is created, not here.
inline constexpr int64_t max_replication_factor = 32;
// Members per consumer group (Kafka's group.max.size is unbounded by default).
inline constexpr int64_t max_group_size = 10'000;
inline constexpr int64_t max_open_segment_files_upper_bound = 1 << 20;
inline constexpr int64_t max_cleaner_threads = 64;
inline constexpr int64_t min_cleaner_dedupe_buffer_bytes = 1ll << 20;   // 1 MiB
inline constexpr int64_t max_cleaner_dedupe_buffer_bytes = 16ll << 30;  // 16 GiB
// The TOML config file and persisted override files.
inline constexpr size_t max_config_file_bytes = 1 << 20;
// One configuration value in its textual form.
inline constexpr size_t max_config_value_bytes = 4096;

// ---- Protocol decoding (protocol/) ------------------------------------------
// Array elements one request may declare, summed over all its arrays. Each
// decoded element costs more memory than its wire bytes (a two-byte flexible
// struct becomes a C++ struct of tens of bytes), so the frame size alone does
// not bound memory; this does. A fetch of every partition of a 100,000
// partition broker stays well inside it.
inline constexpr size_t max_decoded_array_elements = 1u << 18;
// A record batch is decompressed into at most this many bytes; a larger
// result is refused as corrupt (a compression bomb cannot grow memory).
inline constexpr size_t max_decompressed_batch_bytes = 256ull << 20;
// All produced batches being decompressed for validation at once hold at
// most this many bytes (protocol/records/validate.h); each batch may
// decompress to at most its topic's max.message.bytes, as Kafka bounds a
// batch, so a compression bomb costs at most that.
inline constexpr size_t max_produce_decompression_bytes = 128ull << 20;
// A validation first leases what its batch is likely to decompress to:
// this many times its compressed payload, and at least the floor below
// (never more than max.message.bytes). A batch that decompresses to more
// gives the lease back and leases max.message.bytes to decompress again, so
// small batches of a topic with a large max.message.bytes do not each
// hold the budget's whole share.
inline constexpr size_t produce_decompression_lease_ratio = 16;
inline constexpr size_t produce_decompression_lease_min_bytes = 64ull << 10;
// A thread that validates produced batches keeps its decompression buffer
// for the next batch while it is at most this large (a default topic's
// batch fits), outside the budget above: I/O threads times this.
inline constexpr size_t max_retained_decompression_buffer_bytes = 2ull << 20;
// Incremental fetch sessions held at once (Kafka's
// max.incremental.fetch.session.cache.slots default); beyond it the least
// recently used is evicted for a new one.
inline constexpr size_t max_fetch_sessions = 1000;
// Partitions one fetch session holds, and all sessions together (each costs
// a few hundred bytes): a full fetch naming more than a session can take
// is answered without a session (session id 0, as Kafka answers when its
// cache has no room), and an incremental one that would grow a session past
// either bound ends the session (FETCH_SESSION_ID_NOT_FOUND; the client's
// next full fetch is answered without one). So sessions hold at most
// 100 MiB or so whatever clients send.
inline constexpr size_t max_fetch_session_partitions = 50'000;
inline constexpr size_t max_fetch_session_partitions_total = 300'000;
// Records fields (and other byte views) shorter than this are copied into the
// response buffer instead of being referenced, so small fetches do not turn
// into many tiny iovecs.
inline constexpr size_t min_referenced_chunk_bytes = 512;

// ---- The operator's view (broker/retention_watch.h) --------------------------
// sluice.metrics.write.rate.window.ms: the window of each partition's write
// rate, sampled this many times per window (one small ring per partition).
inline constexpr int64_t min_write_rate_window_ms = 1000;
inline constexpr int64_t max_write_rate_window_ms = 86'400'000;
inline constexpr int64_t write_rate_samples_per_window = 30;
// Series of messages lost to retention kept for (group, partition) pairs
// whose committed offset has gone (group deleted, offset expired); the
// pairs that still hold an offset are bounded by the coordinator's limits.
inline constexpr size_t max_orphan_lost_series = 10'000;
// Bytes of one request body the /metrics HTTP endpoint accepts (a scrape
// sends none).
inline constexpr size_t max_metrics_http_request_bytes = 8192;

// ---- Share groups (src/share, docs/share_groups.md) ---------------------------
// Kafka's defaults and ranges of the share-group settings (group.share.*,
// and the per-group share.* overrides).
// group.share.record.lock.duration.ms: how long a record handed to a
// consumer stays its own before it is offered again (the broker setting's
// own range; a group's override is bounded by min/max above).
inline constexpr int32_t default_share_record_lock_duration_ms = 30'000;
inline constexpr int32_t share_record_lock_duration_setting_min_ms = 1'000;
inline constexpr int32_t share_record_lock_duration_setting_max_ms = 3'600'000;
// group.share.delivery.count.limit: deliveries before a record is archived
// (range: min/max_share_delivery_count_limit above).
inline constexpr int16_t default_share_delivery_count_limit = 5;
// group.share.partition.max.record.locks: records in flight per share
// partition (its end offset at most this far past its start), which bounds
// a share partition's memory (a few bytes per record) and its state record.
inline constexpr int32_t default_share_max_record_locks = 2'000;
inline constexpr int32_t min_share_max_record_locks = 100;
inline constexpr int32_t max_share_max_record_locks = 10'000;
// group.share.session.timeout.ms / group.share.heartbeat.interval.ms.
inline constexpr int32_t default_share_session_timeout_ms = 45'000;
inline constexpr int32_t default_share_heartbeat_interval_ms = 5'000;
// group.share.max.size: members of one share group.
inline constexpr int32_t default_share_group_max_size = 200;
// Share groups one broker coordinates, and share partitions one broker
// leads state for (each a few KB at most): a heartbeat or fetch that would
// pass them is refused (GROUP_MAX_SIZE_REACHED / a retriable error).
inline constexpr size_t max_share_groups = 10'000;
inline constexpr size_t max_share_partitions = 100'000;
// group.share.max.share.sessions: share sessions one broker keeps (each
// names its member and its partitions); a new one past it is
// SHARE_SESSION_LIMIT_REACHED.
inline constexpr size_t max_share_sessions = 2'000;
// Partitions one share session may hold.
inline constexpr size_t max_share_session_partitions = 10'000;
// share.coordinator.state.topic.*: __share_group_state's layout.
inline constexpr int32_t default_share_state_partitions = 50;
inline constexpr int16_t default_share_state_replication_factor = 3;
inline constexpr int32_t default_share_state_min_isr = 2;
inline constexpr int64_t default_share_state_segment_bytes = 100ll * 1024 * 1024;
// How long a share partition's state write may take before its fetch or
// acknowledgement is answered with a retriable error.
inline constexpr int64_t share_state_write_timeout_ms = 5'000;
// How often the share service looks for expired acquisition locks and
// share-group sessions when nothing woke it sooner.
inline constexpr int64_t share_tick_ms = 100;
// Dead letters one share partition writes to its group's dead-letter topic
// in one batch (one append, one sequence range).
inline constexpr size_t max_dead_letters_per_batch = 100;
// How soon a dead-letter batch that could not be written (the topic missing,
// its leader elsewhere or failing) is tried again.
inline constexpr int64_t share_dead_letter_retry_ms = 1'000;

}  // namespace sluice::limits
