// InitProducerId: a new producer id for an idempotent producer (a
// transactional one is its transaction coordinator's: txn/service.h). Ids are
// unique across restarts (metadata/producer_ids.h); each starts at epoch 0.
// In a cluster, a request that needs the next block of ids from etcd is
// handed to the forwarding thread (kafka/forwarder.h), so an I/O thread
// never waits on etcd: while etcd has no quorum, the other connections of
// that thread are served as usual.

#include "base/log.h"
#include "kafka/dispatcher.h"
#include "kafka/forwarder.h"
#include "kafka/handlers/handlers.h"
#include "metadata/partition_manager.h"
#include "txn/service.h"

namespace sluice::kafka {

void handle_init_producer_id(request req) {
  auto body = decode_body<protocol::init_producer_id_request>(req);
  if (!body) return;
  protocol::init_producer_id_response resp;
  resp.producer_id = -1;
  resp.producer_epoch = -1;
  if (body->transactional_id) {
    // A transactional producer: its transaction coordinator decides
    // (txn::coordinator::init_producer_id: a new id, or the epoch bumped,
    // fencing the producer's older instance).
    if (!req.svc->txn) {
      resp.error_code = to_wire(error_code::coordinator_not_available);
      req.respond(resp);
      return;
    }
    txn::init_producer_id_request r;
    r.transactional_id = *body->transactional_id;
    r.transaction_timeout_ms = body->transaction_timeout_ms;
    r.producer_id = body->producer_id;
    r.producer_epoch = body->producer_epoch;
    r.api_version = req.version();
    auto held = std::make_shared<request>(std::move(req));
    held->svc->txn->init_producer_id(r, [held](const txn::answer& a) {
      protocol::init_producer_id_response out;
      out.error_code = to_wire(to_kafka_error(a.error));
      out.producer_id = a.error == errc::ok ? a.producer_id : -1;
      out.producer_epoch = a.error == errc::ok ? a.producer_epoch : int16_t{-1};
      held->respond(out);
    });
    return;
  }
  auto& ids = req.svc->partitions->producer_ids();
  result<int64_t> id = int64_t{-1};
  if (req.svc->forward && !forwarder::on_forwarding_thread()) {
    auto ready = ids.try_next();
    if (!ready) {
      req.svc->forward->handle_here(std::move(req));
      return;
    }
    id = *ready;
  } else {
    id = ids.next();
  }
  if (!id.ok()) {
    SLUICE_LOG_ERROR("allocating a producer id: {}", id.err().message);
    resp.error_code = to_wire(error_code::kafka_storage_error);
  } else {
    resp.producer_id = *id;
    resp.producer_epoch = 0;
  }
  req.respond(resp);
}

}  // namespace sluice::kafka
