// WriteTxnMarkers (broker to broker): the transaction coordinator has the
// leader of each partition of a transaction append the producer's COMMIT or
// ABORT marker (cluster::partition::append_marker) and answers once every
// marker is committed, as an acks=all produce, or with the partition's
// error: NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION,
// INVALID_PRODUCER_EPOCH (the producer was fenced),
// TRANSACTION_COORDINATOR_FENCED (a newer coordinator wrote a marker), or
// REQUEST_TIMED_OUT after limits::txn_marker_commit_timeout_ms. The
// coordinator retries what failed; a marker appended twice ends an empty
// transaction the second time.
//
// A marker in a partition of __consumer_offsets also ends the producer's
// pending transactional offsets there (TxnOffsetCommit): once it is
// committed, and before the answer, the group coordinator is told
// (group::coordinator::on_transaction_completed), as Kafka's
// WriteTxnMarkers tells its GroupCoordinator.

#include <chrono>

#include "base/limits.h"
#include "group/coordinator.h"
#include "group/records.h"
#include "kafka/dispatcher.h"
#include "kafka/handlers/handlers.h"
#include "kafka/pending_answer.h"
#include "metadata/partition_manager.h"

namespace sluice::kafka {

namespace {

using partition_result = protocol::write_txn_markers_response::writable_txn_marker_result::
    writable_txn_marker_topic_result::writable_txn_marker_partition_result;

struct pending_markers : pending_answer<protocol::write_txn_markers_response, partition_result> {
  void finish(partition_result* pr, const status& s) {
    {
      std::lock_guard g(mu);
      if (answered) return;
      if (!s.ok()) pr->error_code = to_wire(to_kafka_error(s.code()));
      std::erase(outstanding, pr);
    }
    done();
  }
};

}  // namespace

void handle_write_txn_markers(request req) {
  auto body = decode_body<protocol::write_txn_markers_request>(req);
  if (!body) return;
  auto& pm = *req.svc->partitions;
  auto op = std::make_shared<pending_markers>();
  struct work {
    std::shared_ptr<cluster::partition> part;
    size_t marker, topic, index;  // where its result is in the response
    partition_result* pr = nullptr;
    offset last;
    // For the group coordinator, when the partition is one of
    // __consumer_offsets.
    bool group_offsets = false;
    int64_t producer_id = -1;
    bool commit = false;
  };
  std::vector<work> todo;
  const int64_t now = req.svc->clk->now_ms();
  for (const auto& m : body->markers) {
    auto& mr = op->resp.markers.emplace_back();
    mr.producer_id = m.producer_id;
    for (const auto& t : m.topics) {
      auto& tr = mr.topics.emplace_back();
      tr.name = t.name;
      for (int32_t p : t.partition_indexes) {
        auto& out = tr.partitions.emplace_back();
        out.partition_index = p;
        auto part = pm.get(t.name, p);
        if (!part) {
          out.error_code = to_wire(pm.missing_partition_error(t.name, p));
          continue;
        }
        if (auto e = req.svc->leadership->check_leader(*part); e != errc::ok) {
          out.error_code = to_wire(e);
          continue;
        }
        auto appended = part->append_marker(m.producer_id, m.producer_epoch, m.transaction_result,
                                            m.coordinator_epoch, now);
        if (appended.error != errc::ok) {
          out.error_code = to_wire(to_kafka_error(appended.error));
          continue;
        }
        todo.push_back({part, op->resp.markers.size() - 1, mr.topics.size() - 1, tr.partitions.size() - 1, nullptr,
                        appended.last, t.name == group::offsets_topic, m.producer_id, m.transaction_result});
      }
    }
  }
  for (auto& w : todo) w.pr = &op->resp.markers[w.marker].topics[w.topic].partitions[w.index];
  op->req = std::move(req);
  if (todo.empty()) return op->req.respond(op->resp);
  op->waiting.store(static_cast<int>(todo.size()) + 1);
  {
    std::lock_guard g(op->mu);
    for (const auto& w : todo) op->outstanding.push_back(w.pr);
  }
  op->arm_timeout(std::chrono::milliseconds(limits::txn_marker_commit_timeout_ms), [](partition_result& pr) {
    pr.error_code = to_wire(error_code::request_timed_out);
  });
  auto* groups = op->req.svc->groups;
  for (auto& w : todo) {
    w.part->on_committed(w.last, [op, groups, w](const status& s) {
      // A marker is one record: its last offset is its offset.
      if (s.ok() && w.group_offsets && groups)
        groups->on_transaction_completed(w.part->id().partition, w.producer_id, w.commit, w.last.value());
      op->finish(w.pr, s);
    });
  }
  op->done();
}

}  // namespace sluice::kafka
