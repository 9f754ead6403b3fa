// The transactional producer's requests to its transaction coordinator
// (docs/transactions.md): AddPartitionsToTxn v0-3 (and v4-5, the partition
// leaders' verification, KIP-890), AddOffsetsToTxn v0-4 and
// EndTxn v0-4, each handed to txn::service, which answers once the
// coordinator's record is durable. InitProducerId with a transactional id
// is in init_producer_id.cc, FindCoordinator's key type 1 in
// find_coordinator.cc. Errors are the coordinator's, mapped once
// (to_kafka_error): NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
// CONCURRENT_TRANSACTIONS, PRODUCER_FENCED / INVALID_PRODUCER_EPOCH,
// INVALID_PRODUCER_ID_MAPPING, INVALID_TXN_STATE.

#include <memory>
#include <mutex>

#include "group/records.h"
#include "kafka/dispatcher.h"
#include "kafka/handlers/handlers.h"
#include "kafka/txn_verifier.h"
#include "metadata/partition_manager.h"
#include "txn/service.h"

namespace sluice::kafka {

namespace {

// A request answered from the transaction service's callback, which may run
// on another thread.
template <class Resp>
struct deferred {
  request req;
  Resp resp;
};

}  // namespace

// AddPartitionsToTxn v4+, broker to broker (KIP-890): each transaction's
// partitions verified (verify_only) or added (transaction version 2: the
// partition leader adds for the producer, whose Produce v12 or TxnOffsetCommit
// v5 named them), with one code per partition. The answer goes once every
// add's record is durable.
void handle_add_partitions_batched(request req, protocol::add_partitions_to_txn_request body) {
  struct batched {
    request req;
    protocol::add_partitions_to_txn_response resp;
    std::mutex mu;
    int waiting = 1;  // one per add in flight, plus the handler's own
    void done() {
      {
        std::lock_guard g(mu);
        if (--waiting > 0) return;
      }
      req.respond(resp);
    }
  };
  auto b = std::make_shared<batched>();
  const bool abortable_ok = req.version() >= 5;
  const int16_t version = req.version();
  b->req = std::move(req);
  txn::service* svc = b->req.svc->txn;
  b->resp.results_by_transaction.resize(body.transactions.size());
  for (size_t i = 0; i < body.transactions.size(); ++i) {
    const auto& t = body.transactions[i];
    // Fills entry i from a code per partition; under b->mu once adds run.
    auto fill = [b, i, t](auto code_of) {
      auto& out = b->resp.results_by_transaction[i];
      out.transactional_id = t.transactional_id;
      for (const auto& topic : t.topics) {
        auto& tr = out.topic_results.emplace_back();
        tr.name = topic.name;
        for (int32_t p : topic.partitions) {
          auto& pr = tr.results_by_partition.emplace_back();
          pr.partition_index = p;
          pr.partition_error_code = to_wire(code_of(topic.name, p));
        }
      }
    };
    if (!svc) {
      fill([](const std::string&, int32_t) { return error_code::coordinator_not_available; });
      continue;
    }
    // Only the coordinator the cluster knows answers: a broker deposed
    // without knowing it yet (cut off, paused) still holds the id's old
    // state, and its "in the transaction" for a transaction already ended
    // elsewhere would open one there that nobody ends.
    if (!coordinates_here(*b->req.svc, t.transactional_id)) {
      std::lock_guard g(b->mu);
      fill([](const std::string&, int32_t) { return error_code::not_coordinator; });
      continue;
    }
    txn::partition_set asked;
    for (const auto& topic : t.topics)
      for (int32_t p : topic.partitions) asked.insert({topic.name, p});
    if (!t.verify_only) {
      txn::add_partitions_request r;
      r.transactional_id = t.transactional_id;
      r.producer_id = t.producer_id;
      r.producer_epoch = t.producer_epoch;
      r.partitions = std::move(asked);
      r.api_version = version;
      {
        std::lock_guard g(b->mu);
        ++b->waiting;
      }
      svc->add_partitions(r, [b, fill, abortable_ok](const txn::answer& a) {
        {
          std::lock_guard g(b->mu);
          fill([&](const std::string&, int32_t) {
            const error_code e = to_kafka_error(a.error);
            return e == error_code::transaction_abortable && !abortable_ok ? error_code::invalid_txn_state : e;
          });
        }
        b->done();
      });
      continue;
    }
    const auto v = svc->verify(t.transactional_id, t.producer_id, t.producer_epoch, asked);
    std::lock_guard g(b->mu);
    fill([&](const std::string& name, int32_t p) {
      if (v.error != errc::ok) return to_kafka_error(v.error);
      auto it = v.partitions.find({name, p});
      const errc e = it == v.partitions.end() ? errc::invalid_txn_state : it->second;
      if (e == errc::transaction_abortable && !abortable_ok) return error_code::invalid_txn_state;
      return to_kafka_error(e);
    });
  }
  b->done();
}

void handle_add_partitions_to_txn(request req) {
  auto body = decode_body<protocol::add_partitions_to_txn_request>(req);
  if (!body) return;
  if (req.version() >= 4) {
    handle_add_partitions_batched(std::move(req), std::move(*body));
    return;
  }
  auto d = std::make_shared<deferred<protocol::add_partitions_to_txn_response>>();
  // Kafka's rule: if any partition is unknown, none is added; the unknown
  // ones say why, the others OPERATION_NOT_ATTEMPTED.
  txn::partition_set wanted;
  bool unknown = false;
  for (const auto& t : body->v3_and_below_topics) {
    auto topic = req.svc->partitions->topic(t.name);
    for (int32_t p : t.partitions) {
      if (!topic || p < 0 || p >= topic->partitions || cluster::is_internal_topic(t.name)) unknown = true;
      wanted.insert({t.name, p});
    }
  }
  auto fill = [d, &body](auto code_of) {
    for (const auto& t : body->v3_and_below_topics) {
      auto& tr = d->resp.results_by_topic_v3_and_below.emplace_back();
      tr.name = t.name;
      for (int32_t p : t.partitions) {
        auto& pr = tr.results_by_partition.emplace_back();
        pr.partition_index = p;
        pr.partition_error_code = code_of(t.name, p);
      }
    }
  };
  if (!req.svc->txn || unknown) {
    auto& pm = *req.svc->partitions;
    const bool no_coordinator = !req.svc->txn;
    fill([&](const std::string& name, int32_t p) {
      if (no_coordinator) return to_wire(error_code::coordinator_not_available);
      auto topic = pm.topic(name);
      if (!topic || p < 0 || p >= topic->partitions) return to_wire(error_code::unknown_topic_or_partition);
      if (cluster::is_internal_topic(name)) return to_wire(error_code::invalid_topic_exception);
      return to_wire(error_code::operation_not_attempted);
    });
    req.respond(d->resp);
    return;
  }
  txn::add_partitions_request r;
  r.transactional_id = body->v3_and_below_transactional_id;
  r.producer_id = body->v3_and_below_producer_id;
  r.producer_epoch = body->v3_and_below_producer_epoch;
  r.partitions = std::move(wanted);
  r.api_version = req.version();
  auto topics = std::move(body->v3_and_below_topics);
  d->req = std::move(req);
  auto* svc = d->req.svc->txn;
  svc->add_partitions(r, [d, topics = std::move(topics)](const txn::answer& a) {
    for (const auto& t : topics) {
      auto& tr = d->resp.results_by_topic_v3_and_below.emplace_back();
      tr.name = t.name;
      for (int32_t p : t.partitions) {
        auto& pr = tr.results_by_partition.emplace_back();
        pr.partition_index = p;
        pr.partition_error_code = to_wire(to_kafka_error(a.error));
      }
    }
    d->req.respond(d->resp);
  });
}

void handle_add_offsets_to_txn(request req) {
  auto body = decode_body<protocol::add_offsets_to_txn_request>(req);
  if (!body) return;
  auto d = std::make_shared<deferred<protocol::add_offsets_to_txn_response>>();
  auto offsets = req.svc->partitions->topic(std::string(group::offsets_topic));
  if (!req.svc->txn || !offsets) {
    d->resp.error_code = to_wire(error_code::coordinator_not_available);
    req.respond(d->resp);
    return;
  }
  txn::add_offsets_request r;
  r.transactional_id = body->transactional_id;
  r.producer_id = body->producer_id;
  r.producer_epoch = body->producer_epoch;
  r.offsets_partition = {std::string(group::offsets_topic), group::partition_for(body->group_id, offsets->partitions)};
  r.api_version = req.version();
  d->req = std::move(req);
  d->req.svc->txn->add_offsets(r, [d](const txn::answer& a) {
    d->resp.error_code = to_wire(to_kafka_error(a.error));
    d->req.respond(d->resp);
  });
}

void handle_end_txn(request req) {
  auto body = decode_body<protocol::end_txn_request>(req);
  if (!body) return;
  auto d = std::make_shared<deferred<protocol::end_txn_response>>();
  if (!req.svc->txn) {
    d->resp.error_code = to_wire(error_code::coordinator_not_available);
    req.respond(d->resp);
    return;
  }
  txn::end_txn_request r;
  r.transactional_id = body->transactional_id;
  r.producer_id = body->producer_id;
  r.producer_epoch = body->producer_epoch;
  r.commit = body->committed;
  r.api_version = req.version();
  d->req = std::move(req);
  d->req.svc->txn->end_txn(r, [d](const txn::answer& a) {
    d->resp.error_code = to_wire(to_kafka_error(a.error));
    // v5 (transaction version 2): the producer id and epoch to use next.
    d->resp.producer_id = a.producer_id;
    d->resp.producer_epoch = a.producer_epoch;
    d->req.respond(d->resp);
  });
}

}  // namespace sluice::kafka

namespace sluice::kafka {

// DescribeTransactions v0 (KIP-664): each id as its coordinator holds it;
// an id coordinated elsewhere is NOT_COORDINATOR, one unknown here
// TRANSACTIONAL_ID_NOT_FOUND.
void handle_describe_transactions(request req) {
  auto body = decode_body<protocol::describe_transactions_request>(req);
  if (!body) return;
  protocol::describe_transactions_response resp;
  for (const auto& id : body->transactional_ids) {
    auto& out = resp.transaction_states.emplace_back();
    out.transactional_id = id;
    out.producer_id = -1;
    out.producer_epoch = -1;
    out.transaction_start_time_ms = -1;
    if (!req.svc->txn) {
      out.error_code = to_wire(error_code::coordinator_not_available);
      continue;
    }
    const auto d = req.svc->txn->describe(id);
    out.error_code = to_wire(to_kafka_error(d.error));
    if (d.error != errc::ok) continue;
    out.transaction_state = std::string(txn::state_name(d.state));
    out.transaction_timeout_ms = d.timeout_ms;
    out.transaction_start_time_ms = d.start_ms;
    out.producer_id = d.producer_id;
    out.producer_epoch = d.producer_epoch;
    for (const auto& [topic, parts] : d.topics) {
      auto& t = out.topics.emplace_back();
      t.topic = topic;
      t.partitions = parts;
    }
  }
  req.respond(resp);
}

// ListTransactions v0-1: the transactions this broker coordinates, filtered
// by state, producer id and (v1) how long they have run; an admin client
// asks every broker.
void handle_list_transactions(request req) {
  auto body = decode_body<protocol::list_transactions_request>(req);
  if (!body) return;
  protocol::list_transactions_response resp;
  if (!req.svc->txn) {
    resp.error_code = to_wire(error_code::coordinator_not_available);
    req.respond(resp);
    return;
  }
  txn::list_filter f;
  f.states = body->state_filters;
  f.producer_ids = body->producer_id_filters;
  f.min_duration_ms = body->duration_filter;
  const auto l = req.svc->txn->list(f);
  resp.error_code = to_wire(to_kafka_error(l.error));
  resp.unknown_state_filters = l.unknown_state_filters;
  for (const auto& e : l.transactions) {
    auto& out = resp.transaction_states.emplace_back();
    out.transactional_id = e.transactional_id;
    out.producer_id = e.producer_id;
    out.transaction_state = std::string(txn::state_name(e.state));
  }
  req.respond(resp);
}

}  // namespace sluice::kafka
