#include "broker/metrics_view.h"

#include <algorithm>

#include "base/clock.h"
#include "protocol/frame.h"

namespace sluice::broker {

namespace {

using metrics::header;
using metrics::label_value;
using metrics::sample;

std::string_view api_name(int16_t key) {
  const auto* a = protocol::find_api(key);
  return a ? a->name : std::string_view("unknown");
}

// The control plane as this broker sees it: whether it is the controller,
// and the cluster as its image shows it.
void render_cluster(std::string& out, const cluster::control_plane& cp) {
  header(out, "sluice_controller_active", "gauge", "1 while this broker is the cluster's controller.");
  sample(out, "sluice_controller_active", "", cp.is_controller() ? 1 : 0);
  header(out, "sluice_controller_changes_total", "counter",
         "Controllers (controller epochs) this broker has seen come in, the first included.");
  sample(out, "sluice_controller_changes_total", "", static_cast<double>(cp.controller_changes_total()));
  header(out, "sluice_leader_elections_total", "counter",
         "Partition leaders this broker elected while it was the controller: from the ISR (clean) or "
         "from outside it (unclean).");
  sample(out, "sluice_leader_elections_total", "kind=\"clean\"", static_cast<double>(cp.clean_elections_total()));
  sample(out, "sluice_leader_elections_total", "kind=\"unclean\"",
         static_cast<double>(cp.unclean_elections_total()));
  struct figures {
    size_t offline = 0;
    size_t brokers = 0;
  };
  const figures f = cp.with_image([](const controller::metadata_image& img) {
    figures f;
    f.brokers = img.live_brokers().size();
    for (const auto& [key, pe] : img.partitions()) {
      const auto* t = img.topic(key.first);
      if (t && t->record.id == pe.record.topic && pe.record.state.leader == controller::partition_state::no_leader)
        ++f.offline;
    }
    return f;
  });
  header(out, "sluice_offline_partitions", "gauge", "Partitions without a leader (-1), as this broker's metadata shows.");
  sample(out, "sluice_offline_partitions", "", static_cast<double>(f.offline));
  header(out, "sluice_brokers_alive", "gauge", "Brokers registered in etcd, as this broker's metadata shows.");
  sample(out, "sluice_brokers_alive", "", static_cast<double>(f.brokers));
  header(out, "sluice_isr_shrinks_total", "counter", "ISR changes this broker wrote as leader that removed replicas.");
  sample(out, "sluice_isr_shrinks_total", "", static_cast<double>(cp.isr_shrinks_total()));
  header(out, "sluice_isr_expands_total", "counter", "ISR changes this broker wrote as leader that added replicas.");
  sample(out, "sluice_isr_expands_total", "", static_cast<double>(cp.isr_expands_total()));
}

// Replication as the partitions this broker hosts see it (docs/replication.md).
void render_replication(std::string& out, cluster::partition_manager& pm, int64_t now_ms) {
  size_t under_replicated = 0, under_min_isr = 0;
  uint64_t truncated = 0, out_bytes = 0;
  std::string lag_messages, lag_ms;
  for (const auto& part : pm.replicas().all()) {
    truncated += part->truncated_committed();
    out_bytes += part->replicated_out();
    if (!part->is_leader()) continue;
    const auto st = part->replicas();
    if (st.isr.size() < st.replicas.size()) ++under_replicated;
    if (part->check_min_insync() != errc::ok) ++under_min_isr;
    const std::string base =
        "topic=\"" + label_value(part->id().topic) + "\",partition=\"" + std::to_string(part->id().partition) + "\"";
    const int64_t end = part->log_end_offset().value();
    for (const auto& f : part->follower_progress_view()) {
      const std::string labels = base + ",replica=\"" + std::to_string(f.id) + "\"";
      if (f.log_end.value() >= 0) sample(lag_messages, "sluice_replica_lag_messages", labels,
                                         static_cast<double>(std::max<int64_t>(end - f.log_end.value(), 0)));
      sample(lag_ms, "sluice_replica_lag_ms", labels, static_cast<double>(std::max<int64_t>(now_ms - f.last_caught_up_ms, 0)));
    }
  }
  header(out, "sluice_under_replicated_partitions", "gauge",
         "Partitions this broker leads whose ISR is smaller than their replicas.");
  sample(out, "sluice_under_replicated_partitions", "", static_cast<double>(under_replicated));
  header(out, "sluice_under_min_isr_partitions", "gauge",
         "Partitions this broker leads whose ISR is smaller than min.insync.replicas (acks=all is refused).");
  sample(out, "sluice_under_min_isr_partitions", "", static_cast<double>(under_min_isr));
  header(out, "sluice_replica_lag_messages", "gauge", "Offsets a follower lacks of its leader's log (on the leader).");
  out += lag_messages;
  header(out, "sluice_replica_lag_ms", "gauge", "Milliseconds since a follower was last caught up (on the leader).");
  out += lag_ms;
  header(out, "sluice_replication_bytes_in_total", "counter", "Bytes of batches this broker copied from leaders.");
  sample(out, "sluice_replication_bytes_in_total", "", static_cast<double>(pm.replicas().replication_bytes_in()));
  header(out, "sluice_replication_bytes_out_total", "counter",
         "Bytes of batches followers fetched from this broker's leaders (of the partitions hosted now).");
  sample(out, "sluice_replication_bytes_out_total", "", static_cast<double>(out_bytes));
  header(out, "sluice_truncated_committed_offsets_total", "counter",
         "Committed offsets this broker's replicas threw away when truncating after an unclean election.");
  sample(out, "sluice_truncated_committed_offsets_total", "", static_cast<double>(truncated));
}

// Share groups (docs/share_groups.md): what this broker coordinates and leads.
void render_share_groups(std::string& out, share::service& shares) {
  const auto f = shares.current_figures();
  header(out, "sluice_share_groups", "gauge", "Share groups this broker coordinates.");
  sample(out, "sluice_share_groups", "", static_cast<double>(f.groups));
  header(out, "sluice_share_group_members", "gauge", "Members of the share groups this broker coordinates.");
  sample(out, "sluice_share_group_members", "", static_cast<double>(f.members));
  header(out, "sluice_share_partitions", "gauge", "Share partitions (a share group's view of a partition) led here.");
  sample(out, "sluice_share_partitions", "", static_cast<double>(f.share_partitions));
  header(out, "sluice_share_records_acquired", "gauge", "Records handed to share consumers and not yet acknowledged.");
  sample(out, "sluice_share_records_acquired", "", static_cast<double>(f.acquired));
  header(out, "sluice_share_records_archived_total", "counter",
         "Records archived (rejected by a consumer, or their delivery count exhausted) since start.");
  sample(out, "sluice_share_records_archived_total", "", static_cast<double>(f.archived_total));
  header(out, "sluice_share_dead_letters_total", "counter",
         "Archived records written to their group's dead-letter topic since start.");
  sample(out, "sluice_share_dead_letters_total", "", static_cast<double>(f.dead_letters_total));
}

// The transaction coordinator's figures (docs/operations.md, "Transactions").
void render_transactions(std::string& out, txn::service& txns, int64_t now_ms) {
  const auto f = txns.figures();
  header(out, "sluice_transactions_ongoing", "gauge",
         "Transactions this broker coordinates that are open or ending (Ongoing, PrepareCommit, PrepareAbort).");
  sample(out, "sluice_transactions_ongoing", "", static_cast<double>(f.ongoing));
  header(out, "sluice_transactions_oldest_ongoing_age_seconds", "gauge",
         "Age of the oldest of those transactions (since its first partition was added); 0 when there is none.");
  sample(out, "sluice_transactions_oldest_ongoing_age_seconds", "",
         f.oldest_start_ms < 0 ? 0.0 : static_cast<double>(std::max<int64_t>(now_ms - f.oldest_start_ms, 0)) / 1000.0);
  header(out, "sluice_transactions_total", "counter",
         "Transactions this broker's coordinator ended since it started, by outcome: committed, aborted (by the "
         "producer, or fenced by a newer one), or aborted past their transaction.timeout.ms.");
  sample(out, "sluice_transactions_total", "outcome=\"commit\"", static_cast<double>(f.committed));
  sample(out, "sluice_transactions_total", "outcome=\"abort\"", static_cast<double>(f.aborted));
  sample(out, "sluice_transactions_total", "outcome=\"timeout\"", static_cast<double>(f.timed_out));
}

// The file system under log.dirs, beside sluice_disk_used_bytes and
// sluice_disk_retention_projected_bytes (retention_watch): whether what
// retention will hold fits. A figure statvfs cannot read is left out.
void render_file_system(std::string& out, io::filesystem& fs, const std::string& dir) {
  header(out, "sluice_disk_total_bytes", "gauge", "Size of the file system holding log.dirs.");
  if (auto total = fs.total_bytes(dir); total.ok())
    sample(out, "sluice_disk_total_bytes", "", static_cast<double>(*total));
  header(out, "sluice_disk_usable_bytes", "gauge",
         "Bytes still free to the broker on the file system holding log.dirs (statvfs f_bavail).");
  if (auto usable = fs.free_bytes(dir); usable.ok())
    sample(out, "sluice_disk_usable_bytes", "", static_cast<double>(*usable));
}

}  // namespace

std::string render_metrics(const metrics_sources& src) {
  std::string out;
  out.reserve(16 << 10);
  header(out, "sluice_up", "gauge", "1 while the broker serves.");
  sample(out, "sluice_up", "", 1);

  if (src.server) {
    const auto& s = *src.server;
    header(out, "sluice_connections_active", "gauge", "Open client connections.");
    sample(out, "sluice_connections_active", "", static_cast<double>(s.connections_active.load()));
    header(out, "sluice_connections_accepted_total", "counter", "Connections accepted.");
    sample(out, "sluice_connections_accepted_total", "", static_cast<double>(s.connections_accepted.load()));
    header(out, "sluice_connections_rejected_total", "counter", "Connections refused over max.connections.");
    sample(out, "sluice_connections_rejected_total", "", static_cast<double>(s.connections_rejected.load()));
    header(out, "sluice_network_bytes_in_total", "counter", "Bytes read from clients.");
    sample(out, "sluice_network_bytes_in_total", "", static_cast<double>(s.bytes_in.load()));
    header(out, "sluice_network_bytes_out_total", "counter", "Bytes written to clients.");
    sample(out, "sluice_network_bytes_out_total", "", static_cast<double>(s.bytes_out.load()));
    header(out, "sluice_request_bytes_held", "gauge",
           "Bytes of request frames admitted under queued.max.request.bytes and not yet answered.");
    sample(out, "sluice_request_bytes_held", "", static_cast<double>(s.request_bytes_held.load()));
    header(out, "sluice_request_budget_waiting_connections", "gauge",
           "Connections whose next request waits for room under queued.max.request.bytes.");
    sample(out, "sluice_request_budget_waiting_connections", "",
           static_cast<double>(s.connections_waiting_on_budget.load()));
    header(out, "sluice_request_budget_waits_total", "counter",
           "Request frames that waited for room under queued.max.request.bytes.");
    sample(out, "sluice_request_budget_waits_total", "",
           static_cast<double>(s.budget_waits.load()));
    header(out, "sluice_connections_closed_read_timeout_total", "counter",
           "Connections closed because a request frame did not arrive whole within "
           "sluice.request.read.timeout.ms.");
    sample(out, "sluice_connections_closed_read_timeout_total", "",
           static_cast<double>(s.connections_closed_read_timeout.load()));
  }
  if (src.requests) src.requests->render(out, api_name);
  if (src.control) render_cluster(out, *src.control);
  if (src.control && src.partitions)
    render_replication(out, *src.partitions, sluice::clock::system().monotonic_ms());
  if (src.etcd) src.etcd->render(out);
  if (src.txns) render_transactions(out, *src.txns, sluice::clock::system().now_ms());
  if (src.shares) render_share_groups(out, *src.shares);

  if (src.partitions) {
    // One copy of each partition's segment summaries serves every section.
    std::vector<retention_watch::partition_row> rows;
    for (const auto& t : src.partitions->topics()) {
      for (int32_t p = 0; p < t.partitions; ++p) {
        auto part = src.partitions->get(t.name, p);
        if (!part) continue;
        retention_watch::partition_row r;
        r.topic = t.name;
        r.partition = p;
        r.labels = "topic=\"" + label_value(t.name) + "\",partition=\"" + std::to_string(p) + "\"";
        // Segments first: retention moves the log start before it drops
        // segments, so a log start read after them is never older than the
        // segment list (one segment left means retention is done).
        r.segments = part->segments();
        r.log_start = part->log_start_offset().value();
        r.log_end = part->log_end_offset().value();
        r.high_watermark = part->high_watermark().value();
        for (const auto& s : r.segments) r.size_bytes += s.size_bytes;
        r.health = part->health();
        r.part = std::move(part);
        rows.push_back(std::move(r));
      }
    }
    header(out, "sluice_log_start_offset", "gauge", "First offset still readable, per partition.");
    for (const auto& r : rows)
      sample(out, "sluice_log_start_offset", r.labels, static_cast<double>(r.log_start));
    header(out, "sluice_log_end_offset", "gauge", "The next offset to be written, per partition.");
    for (const auto& r : rows)
      sample(out, "sluice_log_end_offset", r.labels, static_cast<double>(r.log_end));
    header(out, "sluice_log_size_bytes", "gauge", "Bytes of segment files, per partition.");
    for (const auto& r : rows)
      sample(out, "sluice_log_size_bytes", r.labels, static_cast<double>(r.size_bytes));
    header(out, "sluice_log_segments", "gauge", "Segment files, per partition.");
    for (const auto& r : rows)
      sample(out, "sluice_log_segments", r.labels, static_cast<double>(r.segments.size()));
    header(out, "sluice_log_out_of_space", "gauge",
           "1 while the partition's last write was refused for lack of disk space (writes resume by "
           "themselves when space returns), per partition.");
    for (const auto& r : rows)
      sample(out, "sluice_log_out_of_space", r.labels, r.health.out_of_space ? 1.0 : 0.0);
    header(out, "sluice_log_out_of_space_errors_total", "counter",
           "Writes refused for lack of disk space, per partition.");
    for (const auto& r : rows)
      sample(out, "sluice_log_out_of_space_errors_total", r.labels,
             static_cast<double>(r.health.out_of_space_errors));
    header(out, "sluice_log_offline", "gauge",
           "1 when the partition was taken offline for writes by an I/O error other than a full disk "
           "(until a restart recovers it), per partition.");
    for (const auto& r : rows)
      sample(out, "sluice_log_offline", r.labels, r.health.offline ? 1.0 : 0.0);
    // Damaged batches (docs/log_format.md, "Damaged batches"), found by
    // recovery or the scrubber since the broker started.
    std::vector<storage::damage_stats> damage;
    for (const auto& r : rows) damage.push_back(r.health.damage);
    header(out, "sluice_log_damaged_ranges_total", "counter",
           "Damaged ranges (one or more batches failing their CRC or header check) found, per partition.");
    for (size_t i = 0; i < rows.size(); ++i)
      sample(out, "sluice_log_damaged_ranges_total", rows[i].labels, static_cast<double>(damage[i].ranges_found));
    header(out, "sluice_log_damaged_bytes_total", "counter", "Bytes of the damaged ranges found, per partition.");
    for (size_t i = 0; i < rows.size(); ++i)
      sample(out, "sluice_log_damaged_bytes_total", rows[i].labels, static_cast<double>(damage[i].bytes_found));
    header(out, "sluice_log_damaged_bytes_removed_total", "counter",
           "Damaged bytes removed from segment files by a rewrite, per partition.");
    for (size_t i = 0; i < rows.size(); ++i)
      sample(out, "sluice_log_damaged_bytes_removed_total", rows[i].labels,
             static_cast<double>(damage[i].bytes_removed));
    // What read_committed consumers cannot read yet, on the partitions
    // this broker leads: the high watermark minus the last stable offset.
    // The LSO is read first: the high watermark only grows, so the
    // difference is never negative.
    header(out, "sluice_partition_lso_lag_messages", "gauge",
           "High watermark minus last stable offset: offsets held back from read_committed consumers by "
           "transactions still open, per partition this broker leads.");
    for (const auto& r : rows) {
      if (!r.part->is_leader()) continue;
      const int64_t lso = r.part->last_stable_offset().value();
      const int64_t hw = r.part->high_watermark().value();
      sample(out, "sluice_partition_lso_lag_messages", r.labels, static_cast<double>(std::max<int64_t>(hw - lso, 0)));
    }
    if (src.watch) src.watch->render(out, rows);
  }
  if (src.fs && !src.log_dir.empty()) render_file_system(out, *src.fs, src.log_dir);
  if (src.logs) {
    const auto sc = src.logs->scrubbing();
    header(out, "sluice_log_scrub_bytes_total", "counter", "Bytes the scrubber read and checked.");
    sample(out, "sluice_log_scrub_bytes_total", "", static_cast<double>(sc.bytes));
    header(out, "sluice_log_scrub_passes_total", "counter", "Passes the scrubber finished over every log.");
    sample(out, "sluice_log_scrub_passes_total", "", static_cast<double>(sc.passes));
  }
  return out;
}

}  // namespace sluice::broker
