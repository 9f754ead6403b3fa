// Fetch: read each partition from its log as file regions (sent with
// sendfile), long-poll up to max_wait_ms until min_bytes are available, and
// keep incremental fetch sessions (kafka/fetch_sessions.h).
//
// From v13 topics are named by id (KIP-516). An id that names no topic is
// UNKNOWN_TOPIC_ID; an id whose name now belongs to a newer topic (a
// session that remembers the name from before the topic was deleted and
// created again) is INCONSISTENT_TOPIC_ID. Either way the client refreshes
// its metadata and fetches by the new id: nothing of the new topic is ever
// answered under the old id.
//
// A fetch with a replica id (v0-14 in the request, v15+ in its replica
// state) is a follower's (docs/replication.md): it reads up to the log end
// offset rather than the high watermark, only from a leader at the
// follower's leader epoch, and its fetch offset tells the leader what the
// follower holds on disk (partition::on_follower_fetch), which moves the
// high watermark. It counts only when it names the follower's registered
// broker epoch (v15+, KIP-903; cluster::replica_fetch_trusted), else it is
// answered STALE_BROKER_EPOCH. A follower's fetch (v12+) also names the
// epoch of its last batch; when that epoch ends below the fetch offset in
// this leader's history, or this leader never had it, the partition is
// answered with diverging_epoch and no records, the follower truncates
// there (partition/truncation.h) and its fetch offset is not counted
// (KIP-320, KIP-595). A consumer fetching between the high
// watermark and the log end offset gets no records and no error, as from
// Kafka: that data is not committed yet.
//
// Reading from followers (KIP-392): a consumer that names its rack (Fetch
// v11+, client.rack) is sent, by a leader outside that rack, to an in-sync
// replica inside it (preferred_read_replica, no records, answered at once);
// a follower serves such consumers up to its own high watermark, and
// answers OFFSET_NOT_AVAILABLE (retriable) for an offset past its log end.

#include <map>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <optional>

#include "base/log.h"
#include "kafka/delayed_ops.h"
#include "kafka/dispatcher.h"
#include "kafka/fetch_sessions.h"
#include "kafka/fetch_sizing.h"
#include "kafka/handlers/handlers.h"
#include "metadata/partition_manager.h"

namespace sluice::kafka {

namespace {

using topic_response = protocol::fetch_response::fetchable_topic_response;
using partition_data = topic_response::partition_data;

struct fetch_target {
  sluice::topic_id topic_id{};  // all zero before v13
  std::string topic;            // empty: an id that names no topic
  int32_t partition;
  int64_t fetch_offset;
  int32_t max_bytes;
  std::shared_ptr<cluster::partition> part;  // null: unknown partition
  std::shared_ptr<session_partition> in_session;  // for incremental answers
  error_code id_error = error_code::none;  // why a topic named by id has no `part`
  int32_t current_leader_epoch = -1;       // the client's, v9+ (-1: not given)
  int32_t preferred_replica = -1;          // KIP-392: where this consumer should read instead
  int32_t last_fetched_epoch = -1;         // a follower's, v12+ (-1: not given)
  int64_t log_start_offset = -1;           // a follower's own, v5+ (-1: not given)
  // A follower's log diverged from this leader's before its fetch offset
  // (KIP-595's check): the leader's end of the follower's last epoch, sent
  // back as diverging_epoch instead of records.
  std::optional<std::pair<int32_t, int64_t>> diverging;
};

// KIP-392's rack-aware choice: when this broker leads `p` and is not in
// `rack`, an in-sync replica whose broker is; -1 otherwise.
int32_t preferred_replica(const services& svc, const cluster::partition& p, const std::string& rack) {
  if (rack.empty() || !p.is_leader()) return -1;
  const auto bc = svc.partitions->broker_config();
  if (bc->rack && *bc->rack == rack) return -1;
  const auto brokers = svc.metadata->brokers();
  for (const auto& m : p.replicas().isr) {
    if (m.node_id == svc.node_id) continue;
    for (const auto& b : brokers)
      if (b.node_id == m.node_id && b.rack && *b.rack == rack) return m.node_id;
  }
  return -1;
}

// The follower's replica id, or -1 for a consumer.
int32_t replica_of(const protocol::fetch_request& body, int16_t version) {
  const int32_t id = version >= 15 ? body.replica_state.replica_id : body.replica_id;
  return id >= 0 ? id : -1;
}

// The broker epoch a follower's fetch names (v15+, KIP-903), or -1.
int64_t replica_epoch_of(const protocol::fetch_request& body, int16_t version) {
  return version >= 15 ? body.replica_state.replica_epoch : -1;
}

// The target for a partition named by `name` (before v13) or by `id` (v13+;
// `name` is then the name a session remembers for the id, or empty).
fetch_target make_target(const cluster::partition_manager& pm, bool by_id, const sluice::topic_id& id,
                         std::string name, int32_t partition, int64_t fetch_offset, int32_t max_bytes,
                         std::shared_ptr<session_partition> in_session) {
  fetch_target t{id, std::move(name), partition, fetch_offset, max_bytes, nullptr, std::move(in_session)};
  if (!by_id) {
    t.part = pm.get(t.topic, partition);
    return t;
  }
  if (t.topic.empty()) {
    auto known = pm.topic_by_id(id);
    if (!known) {
      t.id_error = error_code::unknown_topic_id;
      return t;
    }
    t.topic = known->name;
  }
  t.part = pm.get(t.topic, partition);
  if (t.part && t.part->topic_id() != id) {
    // The name belongs to a newer topic than the id the client knows.
    t.part = nullptr;
    t.id_error = error_code::inconsistent_topic_id;
  } else if (!t.part && !pm.topic_by_id(id)) {
    t.id_error = error_code::unknown_topic_id;
  }
  return t;
}

// One fetch in progress. Attempts run on the I/O thread first, then on the
// thread that woke it (an append, for a follower's fetch) or the
// delayed-ops thread (a consumer's, and the timeout); `done_` makes sure
// exactly one answers.
class fetch_op : public std::enable_shared_from_this<fetch_op> {
 public:
  request req;
  protocol::fetch_request body;
  std::vector<fetch_target> targets;
  std::shared_ptr<fetch_session> session;  // null: sessionless
  int32_t replica = -1;  // a follower's fetch: its broker id
  int64_t replica_epoch = -1;  // and the broker epoch it was trusted with
  bool any_replica = false;  // a consumer that may read from followers (v11+)
  bool incremental = false;
  int32_t response_session_id = 0;
  // Bytes of records this answer may carry: a consumer's by
  // fetch_answer_max_bytes (kafka/fetch_sizing.h), a follower's by
  // replica.fetch.response.max.bytes, as in Kafka.
  uint64_t max_total = 0;
  int64_t deadline_ms = 0;  // on req.svc->clk's monotonic time: max_wait_ms from arrival
  // The session's cursor, or without a session the connection's; and the
  // target the scan for records starts at (the one after where the last
  // answer stopped).
  std::shared_ptr<fetch_cursor> cursor;
  size_t scan_start = 0;

  // Reads everything; answers if there is enough (or `final`). Returns true
  // when answered.
  bool attempt(bool final);
  void park();

 private:
  void unlisten();

  std::atomic<bool> done_{false};
  std::mutex mu_;  // guards tokens_ and timer_
  std::vector<std::pair<std::shared_ptr<cluster::partition>, uint64_t>> tokens_;
  std::shared_ptr<delayed_ops::timer> timer_;
};

bool fetch_op::attempt(bool final) {
  if (done_.load()) return true;
  const bool read_committed = body.isolation_level == 1;
  uint64_t total = 0;
  bool any_error = false;
  protocol::fetch_response resp;
  resp.session_id = response_session_id;
  // What each session partition in the answer tells the client, recorded
  // in the session only if this attempt answers.
  struct told {
    session_partition* sp;
    int64_t high_watermark, log_start;
  };
  std::vector<told> told_session;
  // Records are read in scan order, from scan_start round the targets, so a
  // full answer leaves out the partitions after it rather than always the
  // same ones; the answer lists partitions in the request's order.
  struct partition_read {
    int16_t error = 0;
    int64_t high_watermark = -1, log_start = -1, last_stable = -1;
    std::vector<storage::aborted_txn> aborted;  // read_committed: the aborts the records overlap
    int32_t preferred_replica = -1;
    std::optional<std::pair<int32_t, int64_t>> diverging;
    uint64_t record_bytes = 0;
    std::optional<protocol::file_region> records;
  };
  std::vector<partition_read> reads(targets.size());
  std::optional<size_t> last_served;
  for (size_t k = 0; k < targets.size(); ++k) {
    const size_t i = (scan_start + k) % targets.size();
    const auto& t = targets[i];
    auto& rd = reads[i];
    if (!t.part || t.part->closed()) {
      // Unknown, being created, or deleted while this fetch waited.
      error_code e = t.id_error;
      if (e == error_code::none && t.topic_id != sluice::topic_id{} && t.part) e = error_code::unknown_topic_id;
      if (e == error_code::none) {
        e = t.part ? error_code::unknown_topic_or_partition
                   : to_kafka_error(req.svc->partitions->missing_partition_error(t.topic, t.partition));
      }
      rd.error = to_wire(e);
      any_error = true;
      continue;
    }
    const bool from_follower = any_replica && !t.part->is_leader();
    // A consumer reads from a leader only as far as the leadership gate
    // lets it: a broker whose session is lost (or in doubt, its followers
    // gone) may have missed what the next leader took, and answering
    // OFFSET_OUT_OF_RANGE past its stale log end would reset the consumer.
    // A follower's fetch is not gated: it keeps a leader in doubt leading.
    if (auto e = from_follower ? t.part->check_replica(t.current_leader_epoch)
                 : replica >= 0 ? t.part->check_leader(t.current_leader_epoch)
                                : req.svc->leadership->check_leader(*t.part, t.current_leader_epoch);
        e != errc::ok) {
      // Another broker leads (or the client's epoch is not this leader's):
      // the client refreshes its metadata and goes there.
      rd.error = to_wire(e);
      any_error = true;
      continue;
    }
    const offset hw = t.part->high_watermark();
    const offset start = t.part->log_start_offset();
    const offset end = t.part->log_end_offset();
    const offset lso = t.part->last_stable_offset();
    // A follower reads all the leader has; a consumer what is committed,
    // and a read_committed one what is stable (docs/transactions.md).
    offset upper = replica >= 0 ? end : read_committed ? lso : hw;
    rd.high_watermark = hw.value();
    rd.log_start = start.value();
    rd.last_stable = lso.value();
    const offset at(t.fetch_offset);
    if (t.preferred_replica >= 0) {
      // Read elsewhere: no records, and answered at once.
      rd.preferred_replica = t.preferred_replica;
      any_error = true;
    } else if (t.diverging) {
      // The follower truncates first: no records, and answered at once.
      rd.diverging = t.diverging;
      any_error = true;
    } else if (from_follower && at > end) {
      // The leader has it and this follower not yet.
      rd.error = to_wire(error_code::offset_not_available);
      any_error = true;
    } else if (at < start || at > end) {
      rd.error = to_wire(error_code::offset_out_of_range);
      any_error = true;
    } else if (at < upper && t.max_bytes > 0) {
      // The first batch returned may be larger than the limits (KIP-74);
      // after that, only batches that fit.
      uint64_t budget = std::min<uint64_t>(static_cast<uint64_t>(t.max_bytes),
                                           max_total > total ? max_total - total : 0);
      bool readable = total == 0 || budget > 0;
      if (readable && read_committed && replica < 0) {
        // The aborts overlapping what may be read, and where reading stops
        // if there are more than one answer names.
        auto ab = t.part->aborted_transactions(at, upper);
        if (!ab.ok()) {
          rd.error = to_wire(to_kafka_error(ab.code()));
          any_error = true;
          readable = false;
        } else {
          rd.aborted = std::move(ab->txns);
          upper = ab->read_upper;
        }
      }
      if (readable) {
        auto region =
            t.part->read(at, total == 0 ? std::max<uint64_t>(budget, 1) : budget, upper);
        if (!region.ok()) {
          rd.error = to_wire(to_kafka_error(region.code()));
          any_error = true;
        } else if (region->len > 0 && (total == 0 || region->len <= budget)) {
          const auto& f = region->file;
          rd.records = protocol::file_region{f, f->native_handle(), region->pos, region->len};
          rd.record_bytes = region->len;
          // Only the aborts that began within the records returned.
          std::erase_if(rd.aborted, [&](const storage::aborted_txn& a) { return a.first >= region->next_offset; });
          total += region->len;
          last_served = i;
        }
      }
    }
  }
  for (size_t i = 0; i < targets.size(); ++i) {
    const auto& t = targets[i];
    auto& rd = reads[i];
    partition_data pd;
    pd.partition_index = t.partition;
    pd.records = protocol::records_field::empty();
    if (!read_committed) {
      pd.aborted_transactions.reset();  // Kafka names none to read_uncommitted consumers
    } else {
      pd.aborted_transactions.emplace();
      if (!rd.records) rd.aborted.clear();
      for (const auto& a : rd.aborted) {
        auto& x = pd.aborted_transactions->emplace_back();
        x.producer_id = a.producer_id;
        x.first_offset = a.first.value();
      }
    }
    pd.error_code = rd.error;
    pd.high_watermark = rd.high_watermark;
    pd.last_stable_offset = rd.last_stable;
    pd.log_start_offset = rd.log_start;
    pd.preferred_read_replica = rd.preferred_replica;
    if (rd.diverging) {
      pd.diverging_epoch.epoch = rd.diverging->first;
      pd.diverging_epoch.end_offset = rd.diverging->second;
    }
    if (rd.records) pd.records.append(std::move(*rd.records));
    if (incremental && t.in_session) {
      // Only partitions with news go into an incremental answer.
      std::lock_guard g(session->mu);
      auto& sp = *t.in_session;
      bool news = pd.records.size_bytes() > 0 || pd.error_code != 0 || !sp.sent ||
                  sp.last_high_watermark != pd.high_watermark || sp.last_log_start != pd.log_start_offset;
      if (!news) continue;
    }
    if (t.in_session)
      told_session.push_back({t.in_session.get(), pd.high_watermark, pd.log_start_offset});
    const bool same_topic = !resp.responses.empty() && resp.responses.back().topic_id == t.topic_id &&
                            resp.responses.back().topic == t.topic;
    auto* tr = same_topic ? &resp.responses.back() : &resp.responses.emplace_back();
    tr->topic = t.topic;
    tr->topic_id = t.topic_id;
    tr->partitions.push_back(std::move(pd));
  }
  const bool enough = total >= static_cast<uint64_t>(std::max(body.min_bytes, 0)) || any_error ||
                      body.max_wait_ms <= 0 || req.svc->clk->monotonic_ms() >= deadline_ms;
  if (!final && !enough) return false;
  // Attempts may run at once on several threads (a follower's fetch is
  // woken on each appending thread): the one that claims the answer
  // records what it tells and sends it.
  if (done_.exchange(true)) return true;
  // Record what the client is told, for the next incremental answer.
  if (session) {
    std::lock_guard g(session->mu);
    for (const auto& w : told_session) {
      w.sp->sent = true;
      w.sp->last_high_watermark = w.high_watermark;
      w.sp->last_log_start = w.log_start;
    }
  }
  if (replica >= 0) {
    // What followers copy, for the leader's replication figures.
    for (size_t i = 0; i < targets.size(); ++i)
      if (reads[i].record_bytes > 0) targets[i].part->note_replicated_out(reads[i].record_bytes);
  }
  if (cursor && last_served) {
    std::lock_guard g(cursor->mu);
    cursor->topic = targets[*last_served].topic;
    cursor->partition = targets[*last_served].partition;
  }
  unlisten();
  req.respond(resp);
  return true;
}

void fetch_op::unlisten() {
  std::lock_guard g(mu_);
  for (auto& [p, token] : tokens_) p->remove_listener(token);
  tokens_.clear();
  if (timer_) timer_->cancel();
}

void fetch_op::park() {
  auto self = shared_from_this();
  auto* delayed = req.svc->delayed;
  {
    std::lock_guard g(mu_);
    for (auto& [p, token] : tokens_) p->remove_listener(token);
    tokens_.clear();
    for (auto& t : targets) {
      if (!t.part) continue;
      // A follower's fetch is answered on the thread that appended (after
      // every partition of its request, partition::wake_after_append): a
      // hop through the delayed-ops thread would only add a wake-up to
      // the replication round trip that acks=all waits for. A consumer's
      // is looked at on the delayed-ops thread, off the thread that moved
      // the high watermark (a follower's fetch being handled).
      auto wake = replica >= 0 ? std::function<void()>([self] {
        if (!self->attempt(false)) self->park();
      })
                               : std::function<void()>([self, delayed] {
                                   delayed->post([self] {
                                     if (!self->attempt(false)) self->park();
                                   });
                                 });
      uint64_t token = t.part->add_listener(
          std::move(wake),
          replica >= 0 ? cluster::partition::wake_on::append : cluster::partition::wake_on::high_watermark);
      tokens_.emplace_back(t.part, token);
    }
    if (!timer_) {
      const int64_t left_ms = std::max<int64_t>(deadline_ms - req.svc->clk->monotonic_ms(), 0);
      timer_ = delayed->after(std::chrono::milliseconds(left_ms), [self](bool) { self->attempt(true); });
    }
  }
  // Data may have arrived before the listeners were in place: look once
  // more, here (the listeners are in place, so nothing is missed after
  // this look). If there is still not enough, the listeners and the timer
  // are set and will call again; parking again here would spin.
  attempt(false);
}

}  // namespace

void handle_fetch(request req) {
  auto body = decode_body<protocol::fetch_request>(req);
  if (!body) return;
  services& svc = *req.svc;
  auto op = std::make_shared<fetch_op>();
  op->deadline_ms = svc.clk->monotonic_ms() + std::max(body->max_wait_ms, 0);

  // Sessions exist from v7; topic ids from v13.
  const bool by_id = req.version() >= 13;
  const auto& pm = *svc.partitions;
  auto resolve_name = [&](const sluice::topic_id& id) {
    auto t = pm.topic_by_id(id);
    return t ? t->name : std::string();
  };
  const int32_t sid = req.version() >= 7 ? body->session_id : 0;
  const int32_t epoch = req.version() >= 7 ? body->session_epoch : -1;
  auto top_error = [&](error_code e) {
    protocol::fetch_response resp;
    resp.error_code = to_wire(e);
    req.respond(resp);
  };
  // A fetch claiming a follower's replica id counts (reads to the log end,
  // moves the high watermark) only when it names that broker's registered
  // epoch (cluster::replica_fetch_trusted); otherwise it is answered
  // STALE_BROKER_EPOCH and nothing is read or counted. A single node has
  // no followers and knows no broker epoch: it refuses every such fetch.
  if (const int32_t claimed = replica_of(*body, req.version()); claimed >= 0) {
    const int64_t sent = replica_epoch_of(*body, req.version());
    const auto registered = svc.metadata->broker_epoch(claimed);
    if (!cluster::replica_fetch_trusted(sent, registered)) {
      SLUICE_LOG_DEBUG("fetch claiming replica {} with broker epoch {} refused (registered: {})", claimed, sent,
                       registered.value_or(-1));
      return top_error(error_code::stale_broker_epoch);
    }
  }
  if (epoch == -1 || epoch == 0) {
    if (sid != 0) svc.fetch_sessions->remove(sid);
    if (epoch == 0) {
      op->session = svc.fetch_sessions->create();
      if (op->session) {
        op->session->uses_topic_ids = by_id;
        op->response_session_id = op->session->id;
      }
    }
  } else {
    op->session = svc.fetch_sessions->find(sid);
    if (!op->session) return top_error(error_code::fetch_session_id_not_found);
    op->incremental = true;
    op->response_session_id = sid;
  }

  // A session that cannot hold the partitions (limits.h,
  // max_fetch_session_partitions*) ends: a new one is answered without a
  // session, an incremental one with FETCH_SESSION_ID_NOT_FOUND.
  bool too_many = false;
  if (op->session) {
    // One fetch at a time per session: clients never pipeline them, and a
    // second one would only get INVALID_FETCH_SESSION_EPOCH.
    std::lock_guard g(op->session->mu);
    if (op->incremental) {
      if (op->session->next_epoch != epoch) return top_error(error_code::invalid_fetch_session_epoch);
      if (op->session->uses_topic_ids != by_id) return top_error(error_code::fetch_session_topic_id_error);
      for (const auto& ft : body->forgotten_topics_data)
        for (int32_t p : ft.partitions) op->session->forget(ft.topic_id, ft.topic, p);
    }
    for (const auto& t : body->topics) {
      const std::string name = by_id ? resolve_name(t.topic_id) : t.topic;
      for (const auto& p : t.partitions)
        if (!too_many && !op->session->upsert(t.topic_id, name, p.partition, p.fetch_offset, p.partition_max_bytes))
          too_many = true;
    }
  }
  if (too_many) {
    SLUICE_LOG_DEBUG("fetch session {} cannot hold more partitions; ended", op->session->id);
    svc.fetch_sessions->remove(op->session->id);
    op->session = nullptr;
    if (op->incremental) return top_error(error_code::fetch_session_id_not_found);
    op->response_session_id = 0;
  }
  if (op->session) {
    std::lock_guard g(op->session->mu);
    op->session->next_epoch = op->incremental ? (epoch == INT32_MAX ? 1 : epoch + 1) : 1;
    // The leader epochs this request names (a session's other partitions
    // carry none: -1).
    std::map<std::pair<std::string, int32_t>, int32_t> epochs;
    for (const auto& t : body->topics) {
      const std::string name = by_id ? resolve_name(t.topic_id) : t.topic;
      for (const auto& p : t.partitions) epochs[{name, p.partition}] = p.current_leader_epoch;
    }
    for (auto& sp : op->session->partitions) {
      op->targets.push_back(
          make_target(pm, by_id, sp->topic_id, sp->topic, sp->partition, sp->fetch_offset, sp->max_bytes, sp));
      if (auto e = epochs.find({sp->topic, sp->partition}); e != epochs.end())
        op->targets.back().current_leader_epoch = e->second;
    }
  } else {
    for (const auto& t : body->topics) {
      // One lookup per topic, not per partition.
      const std::string name = by_id ? resolve_name(t.topic_id) : t.topic;
      for (const auto& p : t.partitions) {
        op->targets.push_back(
            make_target(pm, by_id, t.topic_id, name, p.partition, p.fetch_offset, p.partition_max_bytes, nullptr));
        op->targets.back().current_leader_epoch = p.current_leader_epoch;
        op->targets.back().last_fetched_epoch = p.last_fetched_epoch;
        op->targets.back().log_start_offset = p.log_start_offset;
      }
    }
  }
  // The scan for records starts after the partition that ended the last
  // answer (the session's, or without one the connection's), so partitions
  // take turns when answers fill up, whatever order they are listed in.
  op->cursor = op->session ? op->session->cursor : req.fetch_cursor;
  if (op->cursor) {
    std::lock_guard g(op->cursor->mu);
    for (size_t i = 0; i < op->targets.size(); ++i)
      if (op->targets[i].partition == op->cursor->partition &&
          op->targets[i].topic == op->cursor->topic) {
        op->scan_start = (i + 1) % op->targets.size();
        break;
      }
  }
  // max_bytes is in every version served (v4 and up, handlers.cc).
  const auto bc = svc.partitions->broker_config();
  op->replica = replica_of(*body, req.version());
  op->replica_epoch = replica_epoch_of(*body, req.version());
  if (op->replica >= 0) {
    // A follower asks for replica.fetch.response.max.bytes; the leader
    // holds any fetch claiming a replica id to its own value of it too.
    op->max_total = static_cast<uint64_t>(
        std::clamp(body->max_bytes, 1, std::max(bc->replica_fetch_response_max_bytes, 1)));
    // What the follower holds: every offset below its fetch offset, on its
    // disk. Counted once per request; attempts after waiting re-read only.
    // A follower whose log diverged from this leader's holds a tail that is
    // not this leader's: it is told where to truncate and counts for
    // nothing until it fetches again from there (as Kafka's leader skips
    // the follower's fetch state then).
    for (auto& t : op->targets) {
      if (!t.part || t.part->check_leader(t.current_leader_epoch) != errc::ok) continue;
      const offset at(t.fetch_offset);
      if (at < t.part->log_start_offset() || at > t.part->log_end_offset()) continue;
      t.diverging = t.part->diverging_epoch(t.last_fetched_epoch, at);
      if (t.diverging) continue;
      t.part->on_follower_fetch(op->replica, at, op->replica_epoch, offset(t.log_start_offset));
    }
  } else {
    op->max_total = fetch_answer_max_bytes(body->max_bytes, body->min_bytes, bc->fetch_max_bytes,
                                           bc->fetch_bytes_per_rtt_ms, req.min_rtt);
    op->any_replica = req.version() >= 11;
    if (op->any_replica && !body->rack_id.empty())
      for (auto& t : op->targets)
        if (t.part) t.preferred_replica = preferred_replica(svc, *t.part, body->rack_id);
  }
  op->body = std::move(*body);
  op->req = std::move(req);
  if (!op->attempt(false)) op->park();
}

}  // namespace sluice::kafka
