// ApiVersions: every API of the handler table at its advertised range, and
// from v3 the features (KIP-584) clients choose protocols by:
// transaction.version, supported 0-2, finalized at the broker's
// `transaction.version` setting (2 unless pinned to 1). A client of
// transaction version 2 (Java 4.x, franz-go) uses EndTxn v5, TxnOffsetCommit
// v5 and Produce v12 only when the finalized level is 2; librdkafka and
// sarama ignore it and keep version 1. Both are served at once.

#include "config/broker_config.h"
#include "kafka/dispatcher.h"
#include "kafka/handlers/handlers.h"
#include "metadata/partition_manager.h"

namespace sluice::kafka {

void handle_api_versions(request req) {
  auto body = decode_body<protocol::api_versions_request>(req);
  if (!body) return;
  protocol::api_versions_response resp;
  for (const api_handler& h : api_handlers()) {
    auto& row = resp.api_keys.emplace_back();
    row.api_key = h.api_key;
    row.min_version = advertised_min_version(h);
    row.max_version = advertised_max_version(h);
  }
  if (req.svc->partitions) {
    const int16_t level = req.svc->partitions->broker_config()->transaction_version;
    resp.supported_features.push_back({"transaction.version", 0, 2});
    // The epoch of the finalized features: they never change while a
    // broker runs (a restart with another setting is a new process).
    resp.finalized_features_epoch = 0;
    resp.finalized_features.push_back({"transaction.version", level, level});
    // Share groups (KIP-932): level 1 serves ShareGroupHeartbeat,
    // ShareFetch and ShareAcknowledge v1.
    if (req.svc->share) {
      resp.supported_features.push_back({"share.version", 0, 1});
      resp.finalized_features.push_back({"share.version", 1, 1});
    }
  }
  req.respond(resp);
}

}  // namespace sluice::kafka
