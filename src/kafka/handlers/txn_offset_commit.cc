// TxnOffsetCommit: a transactional producer commits a group's offsets inside
// its transaction. The group coordinator writes them to the group's
// __consumer_offsets partition as one transactional batch of the producer
// and answers once it is durable; they are the group's committed offsets
// only after the producer's COMMIT marker lands there (docs/transactions.md,
// "Offsets in a transaction"). The checks and their errors are the
// coordinator's (group::coordinator::txn_offset_commit).

#include <memory>

#include "group/coordinator.h"
#include "kafka/dispatcher.h"
#include "kafka/handlers/handlers.h"

namespace sluice::kafka {

void handle_txn_offset_commit(request req) {
  auto body = decode_body<protocol::txn_offset_commit_request>(req);
  if (!body) return;
  auto* groups = req.svc->groups;
  if (!groups) {
    protocol::txn_offset_commit_response resp;
    for (const auto& t : body->topics) {
      auto& rt = resp.topics.emplace_back();
      rt.name = t.name;
      for (const auto& p : t.partitions)
        rt.partitions.push_back({p.partition_index, to_wire(error_code::coordinator_not_available)});
    }
    req.respond(resp);
    return;
  }
  const int16_t version = req.version();
  auto held = std::make_shared<request>(std::move(req));
  groups->txn_offset_commit(*body, version, [held](protocol::txn_offset_commit_response r) { held->respond(r); });
}

}  // namespace sluice::kafka
