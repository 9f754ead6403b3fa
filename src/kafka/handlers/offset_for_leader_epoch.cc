// OffsetForLeaderEpoch: for each partition, the largest leader epoch <= the
// one asked that this leader knows and the offset where it ended
// (partition/truncation.h, epoch_end_for; -1/-1 when it knows none). A
// follower asks before fetching from a new leader, to find where its log
// diverges (KIP-101, KIP-279); a consumer asks after a leader change, to
// detect truncation below its position (KIP-320).
//
// Errors, as Kafka's: an unknown partition is UNKNOWN_TOPIC_OR_PARTITION (or
// what partition_manager says of one being created or deleted); a
// partition this broker does not lead is NOT_LEADER_OR_FOLLOWER; a
// current_leader_epoch (v2+) older than this broker's is FENCED_LEADER_EPOCH,
// newer UNKNOWN_LEADER_EPOCH. A request from replica id -2 (v3+, a
// debugging client) is also answered by a follower, from its own log; the
// versions before v3 carry no replica id and are never treated as debugging
// although -2 is the field's default there.

#include "kafka/dispatcher.h"
#include "kafka/handlers/handlers.h"
#include "metadata/partition_manager.h"
#include "partition/truncation.h"

namespace sluice::kafka {

namespace {

constexpr int32_t debugging_replica_id = -2;

// The leader-epoch fence alone (partition::check_leader without the
// leadership check), for the debugging client a follower answers.
errc check_epoch(const cluster::partition& p, int32_t current_leader_epoch) {
  if (current_leader_epoch < 0) return errc::ok;
  const int32_t mine = p.epoch().value();
  if (current_leader_epoch < mine) return errc::fenced_leader_epoch;
  if (current_leader_epoch > mine) return errc::unknown_leader_epoch;
  return errc::ok;
}

// The log end is read before the history: an append that lands in between
// then at worst makes the latest epoch's answer a little stale, where the
// other order could count a new epoch's first offsets as the old epoch's.
cluster::epoch_end answer(const cluster::partition& p, int32_t requested) {
  const offset end = p.log_end_offset();
  auto epochs = p.leader_epochs();
  if (p.is_leader()) epochs = cluster::with_current_epoch(std::move(epochs), p.epoch(), end);
  return cluster::epoch_end_for(epochs, end, requested);
}

}  // namespace

void handle_offset_for_leader_epoch(request req) {
  auto body = decode_body<protocol::offset_for_leader_epoch_request>(req);
  if (!body) return;
  auto& pm = *req.svc->partitions;
  const bool debugging = req.version() >= 3 && body->replica_id == debugging_replica_id;
  const bool from_broker = req.version() >= 3 && body->replica_id >= 0;
  protocol::offset_for_leader_epoch_response resp;
  for (const auto& t : body->topics) {
    auto& tr = resp.topics.emplace_back();
    tr.topic = t.topic;
    for (const auto& pr : t.partitions) {
      auto& out = tr.partitions.emplace_back();
      out.partition = pr.partition;
      auto part = pm.get(t.topic, pr.partition);
      if (!part) {
        out.error_code = to_wire(pm.missing_partition_error(t.topic, pr.partition));
        continue;
      }
      // A follower (replica id >= 0) asks the leader its image names
      // whatever the gate says: it may be the one follower whose fetches
      // keep a leader in doubt leading (replication/leadership_gate.h).
      errc e = from_broker ? part->check_leader(pr.current_leader_epoch)
                           : req.svc->leadership->check_leader(*part, pr.current_leader_epoch);
      if (e == errc::not_leader && debugging) e = check_epoch(*part, pr.current_leader_epoch);
      if (e != errc::ok) {
        out.error_code = to_wire(e);
        continue;
      }
      const cluster::epoch_end found = answer(*part, pr.leader_epoch);
      out.leader_epoch = found.leader_epoch;
      out.end_offset = found.end_offset;
    }
  }
  req.respond(resp);
}

}  // namespace sluice::kafka
