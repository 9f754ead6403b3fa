// DeleteRecords: moves a partition's log start offset up; whole segments
// below it are deleted by the log. The move runs on a flusher thread (its
// checkpoint is written with fsyncs, which an I/O thread must not wait
// for), and the answer waits, as Kafka's delayed DeleteRecords does, until
// the low watermark (the smallest log start offset over the in-sync
// replicas, which take the leader's from their fetch answers) reaches the
// target: so a failover never makes the deleted records readable again nor
// the earliest offset go back. Waiting longer than the request's
// timeout_ms answers REQUEST_TIMED_OUT; losing the leadership meanwhile,
// NOT_LEADER_OR_FOLLOWER. Either way with low watermark -1, as Kafka.

#include <atomic>
#include <chrono>
#include <mutex>

#include "kafka/delayed_ops.h"
#include "kafka/dispatcher.h"
#include "kafka/handlers/handlers.h"
#include "kafka/pending_answer.h"
#include "metadata/partition_manager.h"

namespace sluice::kafka {

namespace {

using partition_result = protocol::delete_records_response::delete_records_topic_result::delete_records_partition_result;

// One DeleteRecords waiting for its partitions.
struct pending_delete : pending_answer<protocol::delete_records_response, partition_result> {
  // A partition's outcome: `low` on success, or the error.
  void finish(partition_result* pr, const status& s, offset low) {
    {
      std::lock_guard g(mu);
      if (answered) return;
      if (s.ok()) {
        pr->low_watermark = low.value();
      } else {
        pr->error_code = to_wire(to_kafka_error(s.code()));
        pr->low_watermark = -1;
      }
      std::erase(outstanding, pr);
    }
    done();
  }
};

}  // namespace

void handle_delete_records(request req) {
  auto body = decode_body<protocol::delete_records_request>(req);
  if (!body) return;
  auto& pm = *req.svc->partitions;
  auto op = std::make_shared<pending_delete>();
  struct work {
    std::shared_ptr<cluster::partition> part;
    size_t topic, index;        // where its result is in the response
    partition_result* pr = nullptr;  // set once the response stops growing
    offset target;
  };
  std::vector<work> todo;
  for (const auto& t : body->topics) {
    auto& tr = op->resp.topics.emplace_back();
    tr.name = t.name;
    for (const auto& p : t.partitions) {
      auto& out = tr.partitions.emplace_back();
      out.partition_index = p.partition_index;
      out.low_watermark = -1;
      auto part = pm.get(t.name, p.partition_index);
      if (!part) {
        out.error_code = to_wire(pm.missing_partition_error(t.name, p.partition_index));
        continue;
      }
      if (auto e = req.svc->leadership->check_leader(*part); e != errc::ok) {
        out.error_code = to_wire(e);
        continue;
      }
      // -1 means "up to the high watermark".
      offset target = p.offset == -1 ? part->high_watermark() : offset(p.offset);
      if (target < offset(0) || target > part->high_watermark()) {
        out.error_code = to_wire(error_code::offset_out_of_range);
        continue;
      }
      todo.push_back({part, op->resp.topics.size() - 1, tr.partitions.size() - 1, nullptr, target});
    }
  }
  for (auto& w : todo) w.pr = &op->resp.topics[w.topic].partitions[w.index];
  op->req = std::move(req);
  if (todo.empty()) return op->req.respond(op->resp);
  op->waiting.store(static_cast<int>(todo.size()) + 1);
  {
    std::lock_guard g(op->mu);
    for (const auto& w : todo) op->outstanding.push_back(w.pr);
  }
  // As Kafka's: the wait (and its timeout) begins once every local move is
  // done, so a timeout of 0 still answers a partition whose replicas are
  // all there already.
  const int32_t timeout = std::max(body->timeout_ms, 0);
  auto arm = [op, timeout] {
    op->arm_timeout(std::chrono::milliseconds(timeout), [](partition_result& pr) {
      pr.error_code = to_wire(error_code::request_timed_out);
      pr.low_watermark = -1;
    });
    op->done();
  };
  auto moves_left = std::make_shared<std::atomic<size_t>>(todo.size());
  for (auto& w : todo) {
    w.part->delete_records_before_async(w.target, [op, w, moves_left, arm](const status& s) {
      if (!s.ok()) {
        op->finish(w.pr, s, offset(-1));
      } else {
        w.part->on_low_watermark(w.target, [op, w](const status& s2) {
          op->finish(w.pr, s2, s2.ok() ? w.part->low_watermark() : offset(-1));
        });
      }
      if (moves_left->fetch_sub(1) == 1) arm();
    });
  }
}

}  // namespace sluice::kafka
