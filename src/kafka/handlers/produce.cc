// Produce: validate and append each partition's batch, then answer by the
// acks rule: acks=0 never (a failure closes the connection so the producer
// notices, as Kafka does), acks=1 once written, acks=-1 once committed:
// fsynced here (group commit; at once when the topic relaxes fsync) and
// below the high watermark, so on every in-sync replica's disk
// (partition::on_committed).
//
// min.insync.replicas (acks=-1 only, as in Kafka): with fewer in-sync
// replicas than it asks, nothing is written and the partition answers
// NOT_ENOUGH_REPLICAS; when the ISR shrank below it while the batch waited,
// NOT_ENOUGH_REPLICAS_AFTER_APPEND (the batch is written; the producer's
// retry of an idempotent batch is recognised). A batch not committed within
// the request's timeout_ms answers REQUEST_TIMED_OUT.
//
// A cluster broker whose etcd session is lost (control_plane::session_lost)
// is dead to the cluster, which elects other leaders for its partitions:
// it appends nothing and answers NOT_LEADER_OR_FOLLOWER, so the client
// refreshes its metadata, and the acks=all batches waiting when the session
// went are answered the same (the broker calls
// partition::answer_commit_waiters). A REQUEST_TIMED_OUT instead, after
// the request's timeout, makes the librdkafka of Debian 12 (2.0.2) fail the
// idempotent producer with OUT_OF_ORDER_SEQUENCE_NUMBER on the next leader.

#include <atomic>
#include <mutex>

#include "base/log.h"
#include "kafka/delayed_ops.h"
#include "kafka/dispatcher.h"
#include "kafka/handlers/handlers.h"
#include "kafka/pending_answer.h"
#include "metadata/control_plane.h"
#include "metadata/partition_manager.h"
#include "txn/service.h"
#include "model/record_batch.h"

namespace sluice::kafka {

namespace {

using partition_response = protocol::produce_response::topic_produce_response::partition_produce_response;

// One acks=-1 produce waiting for its batches to commit.
using pending_produce = pending_answer<protocol::produce_response, partition_response>;

std::span<std::byte> mutable_view(request& req, std::span<const uint8_t> v) {
  auto* base = reinterpret_cast<const uint8_t*>(req.frame.data());
  size_t off = static_cast<size_t>(v.data() - base);
  return {req.frame.data() + off, v.size()};
}

}  // namespace

namespace {

// KIP-890 part 1: asks the producer's transaction coordinator whether
// `topic`-`p` is in the producer's ongoing transaction. NONE when it is (or
// the batch is not transactional: the partition refuses a transactional
// one it is not told about). The coordinator's own trouble (not here,
// loading, completing the last transaction) is NOT_ENOUGH_REPLICAS, which
// every client retries, as Kafka answers; a partition outside the
// transaction is TRANSACTION_ABORTABLE from Produce v11, INVALID_TXN_STATE
// before.
error_code verify_transaction(const services& svc, const std::string& transactional_id, const std::string& topic,
                              int32_t p, std::span<const uint8_t> records, int16_t version) {
  auto h = model::batch::read_header(records);
  if (!h.ok() || !h->is_transactional()) return error_code::none;
  if (!svc.txn) return error_code::not_enough_replicas;
  auto v = svc.txn->verify(transactional_id, h->producer_id, h->producer_epoch, {{topic, p}});
  switch (v.error) {
    case errc::ok: break;
    case errc::not_coordinator:
    case errc::coordinator_load_in_progress:
    case errc::coordinator_not_available:
    case errc::concurrent_transactions: return error_code::not_enough_replicas;
    default: return to_kafka_error(v.error);
  }
  for (const auto& [tp, e] : v.partitions) {
    if (e == errc::ok) continue;
    if (e == errc::transaction_abortable)
      return version >= 11 ? error_code::transaction_abortable : error_code::invalid_txn_state;
    return to_kafka_error(e);
  }
  return error_code::none;
}

}  // namespace

void handle_produce(request req) {
  auto body = decode_body<protocol::produce_request>(req);
  if (!body) return;
  services& svc = *req.svc;
  const int16_t acks = body->acks;
  const int64_t now = svc.clk->now_ms();

  auto op = std::make_shared<pending_produce>();
  bool any_error = false;
  // (partition, index into resp) of partitions whose durability to await.
  struct awaited {
    std::shared_ptr<cluster::partition> part;
    partition_response* pr;
    offset last;
  };
  std::vector<awaited> await;
  // Partitions appended, whose waiting fetches are woken once all are:
  // a follower's fetch then finds every partition of this request.
  std::vector<std::pair<std::shared_ptr<cluster::partition>, bool>> appended;
  op->resp.responses.reserve(body->topic_data.size());
  for (auto& td : body->topic_data) {
    auto& tr = op->resp.responses.emplace_back();
    tr.name = td.name;
    tr.partition_responses.reserve(td.partition_data.size());
    for (auto& pd : td.partition_data) {
      auto& pr = tr.partition_responses.emplace_back();
      pr.index = pd.index;
      pr.base_offset = -1;
      auto set_error = [&](error_code e, std::string msg) {
        pr.error_code = to_wire(e);
        pr.error_message = std::move(msg);
        any_error = true;
      };
      if (req.version() < 3) {
        // Advertised, never served (advertised_min_version, handlers.cc).
        set_error(error_code::unsupported_version,
                  "Produce v0-v2 (message formats 0 and 1) are not served; use v3 or later");
        continue;
      }
      if (acks != 0 && acks != 1 && acks != -1) {
        set_error(error_code::invalid_required_acks, "acks must be -1, 0 or 1");
        continue;
      }
      if (cluster::is_internal_topic(td.name)) {
        // As Kafka: only the broker writes its internal topics.
        set_error(error_code::invalid_topic_exception, "cannot append to internal topic " + td.name);
        continue;
      }
      auto part = svc.partitions->get(td.name, pd.index);
      if (!part) {
        const auto e = svc.partitions->missing_partition_error(td.name, pd.index);
        set_error(to_kafka_error(e), e == errc::not_leader ? "partition is being created"
                                                             : "no such topic or partition");
        continue;
      }
      if (auto st = svc.leadership->check(*part); !st.ok()) {
        set_error(to_kafka_error(st.code()), st.err().message);
        continue;
      }
      if (pd.records.is_null() || pd.records.size_bytes() == 0) {
        set_error(error_code::corrupt_message, "no record batch");
        continue;
      }
      if (acks == -1) {
        if (auto e = part->check_min_insync(); e != errc::ok) {
          set_error(to_kafka_error(e), "fewer in-sync replicas than min.insync.replicas");
          continue;
        }
      }
      // A transactional batch goes in only once the producer's transaction
      // coordinator says this partition is in its ongoing transaction
      // (KIP-890 part 1).
      bool verified = false;
      if (body->transactional_id) {
        auto e = verify_transaction(svc, *body->transactional_id, td.name, pd.index, pd.records.view(), req.version());
        if (e != error_code::none) {
          set_error(e, "the transaction coordinator did not confirm this partition in the producer's transaction");
          continue;
        }
        verified = true;
      }
      // Kafka: zstd came with Produce v7 (KIP-110); older clients cannot
      // read it back, so it is refused from them.
      auto out = part->append(mutable_view(req, pd.records.view()), now, /*wake_readers=*/false,
                              /*zstd_allowed=*/req.version() >= 7, verified);
      pr.log_start_offset = part->log_start_offset().value();
      if (out.error == errc::ok && !out.duplicate) appended.emplace_back(part, out.hw_moved);
      if (out.error != errc::ok) {
        SLUICE_LOG_DEBUG("produce to {}-{} refused: {} ({})", td.name, pd.index, errc_name(out.error), out.message);
        set_error(to_kafka_error(out.error), out.message);
        continue;
      }
      pr.base_offset = out.base.value();
      pr.log_append_time_ms = out.log_append_time_ms;
      if (acks == -1) await.push_back({part, &pr, out.last});
    }
  }

  for (auto& [part, hw_moved] : appended) part->wake_after_append(hw_moved);

  if (acks == 0) {
    if (any_error) {
      req.responder.close_connection();
    } else {
      req.responder.no_response();
    }
    return;
  }
  op->req = std::move(req);
  if (await.empty()) {
    op->req.respond(op->resp);
    return;
  }
  // One extra count so no callback can answer before every wait is set up.
  op->waiting.store(static_cast<int>(await.size()) + 1);
  // Every waiting partition is outstanding before the timeout can fire: a
  // timer due at once (timeout_ms 0) must answer them REQUEST_TIMED_OUT,
  // never send the answer as a success before they committed.
  {
    std::lock_guard g(op->mu);
    for (const auto& a : await) op->outstanding.push_back(a.pr);
  }
  bool replicated = false;
  for (const auto& a : await) replicated |= a.part->has_followers();
  if (replicated) {
    // Followers may fail to fetch until the leader drops them from the
    // ISR; the producer's timeout bounds the wait (a lone replica's wait
    // is its own fsync only).
    op->arm_timeout(std::chrono::milliseconds(std::max(body->timeout_ms, 0)), [](partition_response& pr) {
      pr.error_code = to_wire(error_code::request_timed_out);
      pr.error_message = "not replicated to the in-sync replicas within timeout_ms";
    });
  }
  for (auto& a : await) {
    // Everything up to the batch's last offset (the original batch's, for
    // a duplicate) must be committed.
    a.part->on_committed(a.last, [op, pr = a.pr, part = a.part](const status& s) {
      {
        std::lock_guard g(op->mu);
        if (op->answered) return;
        // Kafka's DelayedProduce: the batch committed, but with the ISR
        // below min.insync.replicas it answers
        // NOT_ENOUGH_REPLICAS_AFTER_APPEND. Whatever the error, the answer
        // keeps the base offset the batch was written at, as Kafka's does
        // (an answer carries the batch's base offset once it was appended;
        // clients read it only on success).
        const status outcome = part->acks_all_outcome(s);
        if (!outcome.ok()) {
          pr->error_code = to_wire(to_kafka_error(outcome.code()));
          pr->error_message = outcome.err().message;
        }
        std::erase(op->outstanding, pr);
      }
      op->done();
    });
  }
  op->done();
}

}  // namespace sluice::kafka
