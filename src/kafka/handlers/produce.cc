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
#include "kafka/txn_verifier.h"
#include "model/record_batch.h"
#include "txn/service.h"

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

// What one Produce request carries from its validation to its answer,
// across a wait for another broker's transaction coordinator.
struct produce_run {
  std::shared_ptr<pending_produce> op;
  int16_t acks = 0;
  int32_t timeout_ms = 0;
  int16_t version = 0;
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
  // Transactional batches waiting for the coordinator's word (KIP-890).
  struct unverified {
    std::shared_ptr<cluster::partition> part;
    partition_response* pr;
    std::span<std::byte> batch;
    cluster::verification_guard guard;
    txn::topic_partition tp;
    int64_t producer_id = -1;
  };
  std::vector<unverified> waiting;

  void set_error(partition_response& pr, error_code e, std::string msg) {
    pr.error_code = to_wire(e);
    pr.error_message = std::move(msg);
    any_error = true;
  }
};

// The coordinator's answer about one partition as the producer hears it
// (Kafka's): the coordinator's own trouble (not here, loading, completing
// the producer's last transaction, unreachable) is NOT_ENOUGH_REPLICAS,
// which every client retries; a partition outside the transaction is
// TRANSACTION_ABORTABLE from Produce v11, INVALID_TXN_STATE before; the
// rest (a fenced epoch, an unknown producer id) as the coordinator said.
error_code verification_error(error_code e, int16_t version) {
  switch (e) {
    case error_code::not_coordinator:
    case error_code::coordinator_load_in_progress:
    case error_code::coordinator_not_available:
    case error_code::concurrent_transactions:
    case error_code::request_timed_out: return error_code::not_enough_replicas;
    case error_code::transaction_abortable:
      return version >= 11 ? error_code::transaction_abortable : error_code::invalid_txn_state;
    default: return e;
  }
}

// Appends one partition's batch (validated up to the append) and notes
// what the answer waits for.
void append_batch(produce_run& run, const std::shared_ptr<cluster::partition>& part, partition_response& pr,
                  std::span<std::byte> batch, cluster::verification_guard guard, int64_t now) {
  // Kafka: zstd came with Produce v7 (KIP-110); older clients cannot read
  // it back, so it is refused from them.
  auto out = part->append(batch, now, /*wake_readers=*/false, /*zstd_allowed=*/run.version >= 7, guard);
  pr.log_start_offset = part->log_start_offset().value();
  if (out.error == errc::ok && !out.duplicate) run.appended.emplace_back(part, out.hw_moved);
  if (out.error != errc::ok) {
    SLUICE_LOG_DEBUG("produce to {}-{} refused: {} ({})", part->id().topic, part->id().partition, errc_name(out.error),
                     out.message);
    run.set_error(pr, to_kafka_error(out.error), out.message);
    return;
  }
  pr.base_offset = out.base.value();
  pr.log_append_time_ms = out.log_append_time_ms;
  if (run.acks == -1) run.await.push_back({part, &pr, out.last});
}

// The answer once every batch is appended (or refused): at once, or when
// the acks=-1 batches are committed.
void finish(std::shared_ptr<produce_run> run) {
  for (auto& [part, hw_moved] : run->appended) part->wake_after_append(hw_moved);
  auto op = run->op;
  if (run->acks == 0) {
    if (run->any_error) {
      op->req.responder.close_connection();
    } else {
      op->req.responder.no_response();
    }
    return;
  }
  auto& await = run->await;
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
    op->arm_timeout(std::chrono::milliseconds(std::max(run->timeout_ms, 0)), [](partition_response& pr) {
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

// The batches waiting for the coordinator's word, with its answer per
// partition: appended with their guards, or refused.
void verified(const std::shared_ptr<produce_run>& run, const std::map<txn::topic_partition, error_code>& answer,
              int64_t now) {
  for (auto& u : run->waiting) {
    auto it = answer.find(u.tp);
    const error_code said = it == answer.end() ? error_code::not_coordinator : it->second;
    const error_code e = verification_error(said, run->version);
    if (e != error_code::none) {
      u.part->end_verification(u.producer_id, u.guard);
      run->set_error(*u.pr, e,
                     "the transaction coordinator did not confirm this partition in the producer's transaction (" +
                         std::string(error_name(said)) + ")");
      continue;
    }
    append_batch(*run, u.part, *u.pr, u.batch, u.guard, now);
  }
  run->waiting.clear();
  finish(run);
}

}  // namespace

void handle_produce(request req) {
  auto body = decode_body<protocol::produce_request>(req);
  if (!body) return;
  services& svc = *req.svc;
  const int64_t now = svc.clk->now_ms();

  auto run = std::make_shared<produce_run>();
  run->op = std::make_shared<pending_produce>();
  run->acks = body->acks;
  run->timeout_ms = body->timeout_ms;
  run->version = req.version();
  // The frame moves with the request; the batches' bytes stay where they are.
  run->op->req = std::move(req);
  request& r = run->op->req;
  auto& resp = run->op->resp;
  // A transactional request's producer, once its first batch is read.
  std::optional<int64_t> txn_producer_id;
  std::optional<int16_t> txn_producer_epoch;
  resp.responses.reserve(body->topic_data.size());
  for (auto& td : body->topic_data) {
    auto& tr = resp.responses.emplace_back();
    tr.name = td.name;
    tr.partition_responses.reserve(td.partition_data.size());
    for (auto& pd : td.partition_data) {
      auto& pr = tr.partition_responses.emplace_back();
      pr.index = pd.index;
      pr.base_offset = -1;
      auto set_error = [&](error_code e, std::string msg) { run->set_error(pr, e, std::move(msg)); };
      if (r.version() < 3) {
        // Advertised, never served (advertised_min_version, handlers.cc).
        set_error(error_code::unsupported_version,
                  "Produce v0-v2 (message formats 0 and 1) are not served; use v3 or later");
        continue;
      }
      if (run->acks != 0 && run->acks != 1 && run->acks != -1) {
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
      if (run->acks == -1) {
        if (auto e = part->check_min_insync(); e != errc::ok) {
          set_error(to_kafka_error(e), "fewer in-sync replicas than min.insync.replicas");
          continue;
        }
      }
      const auto batch = mutable_view(r, pd.records.view());
      auto h = model::batch::read_header(pd.records.view());
      if (!h.ok() || !h->is_transactional()) {
        // The append checks the header (and refuses a transactional batch
        // without a transactional id).
        append_batch(*run, part, pr, batch, {}, now);
        continue;
      }
      if (!body->transactional_id) {
        set_error(error_code::invalid_txn_state, "a transactional batch needs the request's transactional id");
        continue;
      }
      if ((txn_producer_id && *txn_producer_id != h->producer_id) ||
          (txn_producer_epoch && *txn_producer_epoch != h->producer_epoch)) {
        set_error(error_code::invalid_record, "the batches of one transactional request come from one producer");
        continue;
      }
      txn_producer_id = h->producer_id;
      txn_producer_epoch = h->producer_epoch;
      // KIP-890 part 1: a transactional batch that would begin its
      // producer's transaction here goes in only once the producer's
      // coordinator confirms the partition is in its ongoing transaction.
      auto guard = part->begin_verification(h->producer_id, h->producer_epoch);
      if (!guard.ok()) {
        set_error(to_kafka_error(guard.code()), guard.err().message);
        continue;
      }
      if (!*guard) {
        append_batch(*run, part, pr, batch, {}, now);
        continue;
      }
      run->waiting.push_back({part, &pr, batch, **guard, {td.name, pd.index}, h->producer_id});
    }
  }
  if (run->waiting.empty()) {
    finish(run);
    return;
  }
  // The producer's coordinator: the leader of its transactional id's
  // partition of __transaction_state; here, or asked over the network.
  txn::partition_set asked;
  for (const auto& u : run->waiting) asked.insert(u.tp);
  const std::string& txn_id = *body->transactional_id;
  // Produce v12 comes from a producer of transaction version 2, which sends
  // no AddPartitionsToTxn: the coordinator is asked to add the partitions.
  const bool add = r.version() >= 12;
  const int32_t coordinator = svc.txn ? svc.txn->coordinator_of(txn_id) : -1;
  if (coordinator == svc.node_id && svc.control && !coordinates_here(svc, txn_id)) {
    // Named here by a view this broker cannot trust now: ask again later.
    std::map<txn::topic_partition, error_code> answer;
    for (const auto& tp : asked) answer[tp] = error_code::not_coordinator;
    verified(run, answer, now);
    return;
  }
  if (svc.txn && add && (coordinator == svc.node_id || !svc.control)) {
    txn::add_partitions_request a;
    a.transactional_id = txn_id;
    a.producer_id = *txn_producer_id;
    a.producer_epoch = *txn_producer_epoch;
    a.partitions = asked;
    a.api_version = protocol::add_partitions_to_txn_request::max_version;
    svc.txn->add_partitions(a, [run, asked, clk = svc.clk](const txn::answer& ans) {
      std::map<txn::topic_partition, error_code> answer;
      for (const auto& tp : asked) answer[tp] = to_kafka_error(ans.error);
      verified(run, answer, clk->now_ms());
    });
    return;
  }
  if (svc.txn && (coordinator == svc.node_id || !svc.control)) {
    const auto v = svc.txn->verify(txn_id, *txn_producer_id, *txn_producer_epoch, asked);
    std::map<txn::topic_partition, error_code> answer;
    for (const auto& tp : asked) {
      auto it = v.partitions.find(tp);
      answer[tp] = to_kafka_error(v.error != errc::ok ? v.error : it == v.partitions.end() ? errc::invalid_txn_state
                                                                                           : it->second);
    }
    verified(run, answer, now);
    return;
  }
  if (coordinator < 0 || !svc.verifier) {
    std::map<txn::topic_partition, error_code> answer;
    for (const auto& tp : asked) answer[tp] = error_code::coordinator_not_available;
    verified(run, answer, now);
    return;
  }
  kafka::txn_verifier::question q;
  q.transactional_id = txn_id;
  q.producer_id = *txn_producer_id;
  q.producer_epoch = *txn_producer_epoch;
  q.partitions = std::move(asked);
  q.add = add;
  svc.verifier->ask(coordinator, std::move(q), [run, clk = svc.clk](const kafka::txn_verifier::answer& a) {
    verified(run, a, clk->now_ms());
  });
}

}  // namespace sluice::kafka
