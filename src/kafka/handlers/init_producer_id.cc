// InitProducerId: a new producer id for an idempotent producer. Ids are
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

namespace sluice::kafka {

void handle_init_producer_id(request req) {
  auto body = decode_body<protocol::init_producer_id_request>(req);
  if (!body) return;
  protocol::init_producer_id_response resp;
  resp.producer_id = -1;
  resp.producer_epoch = -1;
  if (body->transactional_id) {
    // Transactions come with a later issue; until then a transactional
    // producer gets a fatal, unambiguous error instead of retrying forever.
    resp.error_code = to_wire(error_code::transactional_id_authorization_failed);
    req.respond(resp);
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
