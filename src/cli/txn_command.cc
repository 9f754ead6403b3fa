// `sluice txn list|describe|describe-producers|abort`: the operator's view of
// transactions (KIP-664), as Kafka's kafka-transactions.sh gives it.
//
//   list                 ListTransactions to every live broker (each answers
//                        for the transactions it coordinates)
//   describe ID          FindCoordinator (key type 1), then DescribeTransactions
//                        at the coordinator
//   describe-producers   DescribeProducers at a partition's leader: each
//                        producer's epoch, last sequence, coordinator epoch
//                        and the first offset of its open transaction there
//   abort                ends a *hanging* transaction of one partition (one
//                        its coordinator no longer knows, so it holds the
//                        last stable offset back forever): WriteTxnMarkers
//                        ABORT at the partition's leader, with the producer
//                        id, epoch and coordinator epoch that DescribeProducers
//                        shows for the transaction starting at --start-offset,
//                        or as given (Kafka's AbortTransactionSpec)
//
// Raw Kafka requests (raw_client.h): Debian's librdkafka 2.0.2 has none of
// these admin APIs. Exit status: 0 done, 1 the brokers refused or could not
// be reached (a message on stderr names Kafka's error), 2 bad usage.

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "base/clock.h"
#include "cli/commands.h"
#include "cli/raw_requests.h"
#include "protocol/error_code.h"
#include "protocol/raw_client.h"

namespace sluice::cli {
namespace {

using protocol::endpoint_of;
using protocol::kafka_error_name;
using protocol::metadata_version;
using protocol::raw_connection;

using namespace std::chrono_literals;

// The versions sent: every Kafka since 3.0 serves them (ListTransactions v1
// since 3.8, sent only with --duration-filter).
constexpr int16_t describe_transactions_version = 0;
constexpr int16_t describe_producers_version = 0;
constexpr int16_t write_txn_markers_version = 1;

constexpr int16_t none_code = 0;
constexpr int16_t not_leader_code = kafka::to_wire(kafka::error_code::not_leader_or_follower);
constexpr int16_t load_in_progress_code = kafka::to_wire(kafka::error_code::coordinator_load_in_progress);
constexpr int16_t not_coordinator_code = kafka::to_wire(kafka::error_code::not_coordinator);

// Kafka's TransactionState names (ListTransactions' state filters).
const std::vector<std::string> kafka_states = {"Empty",          "Ongoing",      "PrepareCommit",
                                               "PrepareAbort",   "CompleteCommit", "CompleteAbort",
                                               "Dead",           "PrepareEpochFence"};

struct txn_options {
  std::string bootstrap = default_bootstrap;
  int timeout_ms = default_timeout_ms;
  // list
  std::vector<std::string> states;
  std::vector<int64_t> producer_ids;
  int64_t duration_filter_ms = -1;
  // describe
  std::string transactional_id;
  // describe-producers, abort
  std::string topic;
  int32_t partition = -1;
  std::optional<int64_t> start_offset;
  std::optional<int64_t> producer_id;
  std::optional<int32_t> producer_epoch;
  std::optional<int32_t> coordinator_epoch;
};

int fail(const std::string& what) {
  std::fprintf(stderr, "sluice txn: %s\n", what.c_str());
  return 1;
}

int usage(const std::string& what) {
  std::fprintf(stderr, "sluice txn: %s\n", what.c_str());
  return 2;
}

std::chrono::milliseconds timeout(const txn_options& o) { return std::chrono::milliseconds(o.timeout_ms); }

// Metadata of `topic`, or of the brokers alone when it is empty.
result<protocol::metadata_response> metadata(raw_connection& conn, const std::string& topic) {
  protocol::metadata_request req;
  auto& topics = req.topics.emplace();
  if (!topic.empty()) topics.emplace_back().name = topic;
  req.allow_auto_topic_creation = false;
  return conn.call<protocol::metadata_response>(req, metadata_version);
}

// ---- list ---------------------------------------------------------------------------

int run_list(const txn_options& o) {
  for (const auto& s : o.states) {
    if (std::find(kafka_states.begin(), kafka_states.end(), s) == kafka_states.end())
      return usage("--state " + s + " is not a transaction state (one of Empty, Ongoing, PrepareCommit, "
                   "PrepareAbort, CompleteCommit, CompleteAbort, Dead, PrepareEpochFence)");
  }
  auto conn = raw_connection::connect_any(o.bootstrap, timeout(o));
  if (!conn) return fail(conn.err().message);
  auto md = metadata(*conn, "");
  if (!md) return fail("metadata: " + md.err().message);
  std::sort(md->brokers.begin(), md->brokers.end(), [](const auto& a, const auto& b) { return a.node_id < b.node_id; });

  protocol::list_transactions_request req;
  req.state_filters = o.states;
  req.producer_id_filters = o.producer_ids;
  req.duration_filter = o.duration_filter_ms;
  const int16_t version = o.duration_filter_ms >= 0 ? 1 : 0;
  // transactional id -> (coordinator, producer id, state)
  std::vector<std::tuple<std::string, int32_t, int64_t, std::string>> rows;
  int rc = 0;
  const sluice::deadline until(o.timeout_ms, sluice::clock::system());
  for (const auto& b : md->brokers) {
    const std::string where = "broker " + std::to_string(b.node_id) + " (" + endpoint_of(b.host, b.port) + ")";
    for (;;) {
      auto bc = raw_connection::connect(endpoint_of(b.host, b.port), timeout(o));
      if (!bc) {
        rc = fail(where + ": " + bc.err().message);
        break;
      }
      auto r = bc->call<protocol::list_transactions_response>(req, version);
      if (!r) {
        rc = fail(where + ": " + r.err().message);
        break;
      }
      // A broker still loading its partitions of __transaction_state answers
      // for none of them yet: ask again.
      if (r->error_code == load_in_progress_code && !until.passed()) {
        std::this_thread::sleep_for(200ms);
        continue;
      }
      if (r->error_code != none_code) {
        rc = fail(where + ": " + kafka_error_name(r->error_code));
        break;
      }
      for (const auto& u : r->unknown_state_filters) rc = fail(where + ": unknown state filter " + u);
      for (const auto& t : r->transaction_states)
        rows.emplace_back(t.transactional_id, b.node_id, t.producer_id, t.transaction_state);
      break;
    }
  }
  std::sort(rows.begin(), rows.end());
  for (const auto& [id, coordinator, pid, state] : rows)
    std::printf("%s\tcoordinator=%d\tproducer_id=%lld\tstate=%s\n", id.c_str(), coordinator,
                static_cast<long long>(pid), state.c_str());
  return rc;
}

// ---- describe -----------------------------------------------------------------------

int run_describe(const txn_options& o) {
  const sluice::deadline until(o.timeout_ms, sluice::clock::system());
  for (;;) {
    auto coordinator =
        connect_coordinator(o.bootstrap, o.transactional_id, coordinator_key_transaction, timeout(o), until);
    if (!coordinator) return fail(coordinator.err().message);
    auto& [node, conn] = *coordinator;
    protocol::describe_transactions_request req;
    req.transactional_ids = {o.transactional_id};
    auto r = conn.call<protocol::describe_transactions_response>(req, describe_transactions_version);
    if (!r) return fail("describe " + o.transactional_id + ": " + r.err().message);
    if (r->transaction_states.size() != 1) return fail("describe " + o.transactional_id + ": no answer for it");
    const auto& t = r->transaction_states[0];
    if ((t.error_code == load_in_progress_code || t.error_code == not_coordinator_code) && !until.passed()) {
      std::this_thread::sleep_for(200ms);  // loading, or it moved: find it again
      continue;
    }
    if (t.error_code != none_code) return fail(o.transactional_id + ": " + kafka_error_name(t.error_code));
    std::string start = "-", duration = "-";
    if (t.transaction_start_time_ms >= 0) {
      start = std::to_string(t.transaction_start_time_ms);
      duration = std::to_string(std::max<int64_t>(sluice::clock::system().now_ms() - t.transaction_start_time_ms, 0));
    }
    std::printf("txn %s\tcoordinator=%d\tstate=%s\tproducer_id=%lld\tproducer_epoch=%d\ttimeout_ms=%d\t"
                "start_time_ms=%s\tduration_ms=%s\n",
                t.transactional_id.c_str(), node, t.transaction_state.c_str(), static_cast<long long>(t.producer_id),
                t.producer_epoch, t.transaction_timeout_ms, start.c_str(), duration.c_str());
    std::vector<std::pair<std::string, int32_t>> parts;
    for (const auto& tt : t.topics)
      for (int32_t p : tt.partitions) parts.emplace_back(tt.topic, p);
    std::sort(parts.begin(), parts.end());
    for (const auto& [topic, p] : parts) std::printf("partition %s-%d\n", topic.c_str(), p);
    return 0;
  }
}

// ---- describe-producers and abort: at the partition's leader ------------------------------

using producer_entry =
    protocol::describe_producers_response::describe_producers_topic_response::describe_producers_partition_response::
        producer_state_entry;

// A connection to the leader of --topic/--partition, asking again while the
// partition has none.
result<raw_connection> connect_leader(const txn_options& o, const sluice::deadline& until) {
  for (;;) {
    SLUICE_ASSIGN_OR_RETURN(auto conn, raw_connection::connect_any(o.bootstrap, timeout(o)));
    SLUICE_ASSIGN_OR_RETURN(auto md, metadata(conn, o.topic));
    if (md.topics.size() != 1 || md.topics[0].error_code != none_code)
      return error{errc::not_found, "topic " + o.topic + ": " +
                                        (md.topics.empty() ? "no answer" : kafka_error_name(md.topics[0].error_code))};
    int32_t leader = -1;
    bool found = false;
    for (const auto& p : md.topics[0].partitions) {
      if (p.partition_index != o.partition) continue;
      found = true;
      leader = p.leader_id;
    }
    if (!found) return error{errc::not_found, o.topic + " has no partition " + std::to_string(o.partition)};
    for (const auto& b : md.brokers)
      if (b.node_id == leader) return raw_connection::connect(endpoint_of(b.host, b.port), timeout(o));
    if (until.passed())
      return error{errc::unavailable, o.topic + "-" + std::to_string(o.partition) + " has no leader now"};
    std::this_thread::sleep_for(200ms);
  }
}

// The producers the partition's leader remembers.
result<std::vector<producer_entry>> describe_producers(const txn_options& o, const sluice::deadline& until) {
  for (;;) {
    SLUICE_ASSIGN_OR_RETURN(auto conn, connect_leader(o, until));
    protocol::describe_producers_request req;
    auto& t = req.topics.emplace_back();
    t.name = o.topic;
    t.partition_indexes = {o.partition};
    SLUICE_ASSIGN_OR_RETURN(auto r, conn.call<protocol::describe_producers_response>(req, describe_producers_version));
    if (r.topics.size() != 1 || r.topics[0].partitions.size() != 1)
      return error{errc::corrupt_data, "DescribeProducers answered another partition"};
    auto& p = r.topics[0].partitions[0];
    if (p.error_code == not_leader_code && !until.passed()) {
      std::this_thread::sleep_for(200ms);  // the leader moved
      continue;
    }
    if (p.error_code != none_code)
      return error{errc::unavailable, "describing the producers of " + o.topic + "-" + std::to_string(o.partition) +
                                          ": " + kafka_error_name(p.error_code) +
                                          (p.error_message ? " (" + *p.error_message + ")" : "")};
    return std::move(p.active_producers);
  }
}

int run_describe_producers(const txn_options& o) {
  const sluice::deadline until(o.timeout_ms, sluice::clock::system());
  auto producers = describe_producers(o, until);
  if (!producers) return fail(producers.err().message);
  std::sort(producers->begin(), producers->end(),
            [](const auto& a, const auto& b) { return a.producer_id < b.producer_id; });
  for (const auto& p : *producers) {
    std::printf("producer %lld\tepoch=%d\tcoordinator_epoch=%d\tlast_sequence=%d\tlast_timestamp_ms=%lld\t"
                "txn_start_offset=%s\n",
                static_cast<long long>(p.producer_id), p.producer_epoch, p.coordinator_epoch, p.last_sequence,
                static_cast<long long>(p.last_timestamp),
                p.current_txn_start_offset >= 0 ? std::to_string(p.current_txn_start_offset).c_str() : "-");
  }
  return 0;
}

// What WriteTxnMarkers is told: Kafka's AbortTransactionSpec.
struct abort_spec {
  int64_t producer_id = -1;
  int16_t producer_epoch = -1;
  int32_t coordinator_epoch = 0;
};

int run_abort(const txn_options& o) {
  const bool explicit_form = o.producer_id || o.producer_epoch || o.coordinator_epoch;
  if (o.start_offset && explicit_form)
    return usage("give either --start-offset or --producer-id, --producer-epoch and --coordinator-epoch, not both");
  if (!o.start_offset && !o.producer_id)
    return usage("the transaction to abort must be identified either with --start-offset or with --producer-id, "
                 "--producer-epoch and --coordinator-epoch");
  if (!o.start_offset && !o.producer_epoch) return usage("missing --producer-epoch");
  if (!o.start_offset && !o.coordinator_epoch) return usage("missing --coordinator-epoch");
  if (o.producer_epoch && (*o.producer_epoch < 0 || *o.producer_epoch > INT16_MAX))
    return usage("--producer-epoch must be 0 to 32767");

  const sluice::deadline until(o.timeout_ms, sluice::clock::system());
  const std::string tp = o.topic + "-" + std::to_string(o.partition);
  abort_spec spec;
  if (o.start_offset) {
    auto producers = describe_producers(o, until);
    if (!producers) return fail(producers.err().message);
    auto it = std::find_if(producers->begin(), producers->end(),
                           [&](const auto& p) { return p.current_txn_start_offset == *o.start_offset; });
    if (it == producers->end())
      return fail("no open transaction starts at offset " + std::to_string(*o.start_offset) + " on " + tp);
    spec.producer_id = it->producer_id;
    spec.producer_epoch = static_cast<int16_t>(it->producer_epoch);
    spec.coordinator_epoch = it->coordinator_epoch;
  } else {
    spec.producer_id = *o.producer_id;
    spec.producer_epoch = static_cast<int16_t>(*o.producer_epoch);
    spec.coordinator_epoch = *o.coordinator_epoch;
  }
  // A producer that never had a marker here shows coordinator epoch -1: 0 is
  // at or below every coordinator epoch a marker can have (Kafka's tool does
  // the same).
  spec.coordinator_epoch = std::max(spec.coordinator_epoch, 0);

  protocol::write_txn_markers_request req;
  auto& m = req.markers.emplace_back();
  m.producer_id = spec.producer_id;
  m.producer_epoch = spec.producer_epoch;
  m.transaction_result = false;  // ABORT
  m.coordinator_epoch = spec.coordinator_epoch;
  auto& mt = m.topics.emplace_back();
  mt.name = o.topic;
  mt.partition_indexes = {o.partition};
  for (;;) {
    auto conn = connect_leader(o, until);
    if (!conn) return fail(conn.err().message);
    auto r = conn->call<protocol::write_txn_markers_response>(req, write_txn_markers_version);
    if (!r) return fail("WriteTxnMarkers to the leader of " + tp + ": " + r.err().message);
    if (r->markers.size() != 1 || r->markers[0].topics.size() != 1 || r->markers[0].topics[0].partitions.size() != 1)
      return fail("WriteTxnMarkers answered another partition");
    const int16_t e = r->markers[0].topics[0].partitions[0].error_code;
    if (e == not_leader_code && !until.passed()) {
      std::this_thread::sleep_for(200ms);
      continue;
    }
    if (e != none_code)
      return fail("aborting the transaction of producer " + std::to_string(spec.producer_id) + " at epoch " +
                  std::to_string(spec.producer_epoch) + " on " + tp + ": " + kafka_error_name(e));
    std::printf("aborted\t%s\tproducer_id=%lld\tproducer_epoch=%d\tcoordinator_epoch=%d\n", tp.c_str(),
                static_cast<long long>(spec.producer_id), spec.producer_epoch, spec.coordinator_epoch);
    return 0;
  }
}

}  // namespace

void add_txn_command(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<txn_options>();
  CLI::App* txn = app.add_subcommand("txn", "List and describe transactions; abort a hanging one");
  txn->require_subcommand(1);
  auto common = [&](CLI::App* c) {
    c->add_option("--bootstrap,-b", o->bootstrap, "Broker addresses host:port[,host:port...]")->capture_default_str();
    c->add_option("--timeout-ms", o->timeout_ms, "How long to wait for the brokers")->capture_default_str();
  };
  auto partition_options = [&](CLI::App* c) {
    c->add_option("--topic,-t", o->topic, "Topic")->required();
    c->add_option("--partition,-p", o->partition, "Partition")->required()->check(CLI::NonNegativeNumber);
  };

  CLI::App* list = txn->add_subcommand("list", "Transactions of every broker's coordinator: id, coordinator, "
                                               "producer id, state");
  list->add_option("--state", o->states, "Only transactions in this state (Kafka's names: Ongoing, ...); repeatable");
  list->add_option("--producer-id", o->producer_ids, "Only transactions of this producer id; repeatable");
  list->add_option("--duration-filter", o->duration_filter_ms,
                   "Only transactions running longer than this many ms (ListTransactions v1)")
      ->check(CLI::NonNegativeNumber);
  common(list);
  list->callback([o, exit_code] { *exit_code = run_list(*o); });

  CLI::App* describe = txn->add_subcommand("describe", "A transactional id's state at its coordinator and the "
                                                       "partitions of its transaction");
  describe->add_option("transactional_id", o->transactional_id, "The transactional id")->required();
  common(describe);
  describe->callback([o, exit_code] { *exit_code = run_describe(*o); });

  CLI::App* producers = txn->add_subcommand(
      "describe-producers", "The producers a partition's leader remembers, and where their open transaction starts");
  partition_options(producers);
  common(producers);
  producers->callback([o, exit_code] { *exit_code = run_describe_producers(*o); });

  CLI::App* abort = txn->add_subcommand(
      "abort", "Abort a hanging transaction of one partition: the one starting at --start-offset, or the one of "
               "--producer-id/--producer-epoch/--coordinator-epoch");
  partition_options(abort);
  abort->add_option("--start-offset", o->start_offset, "First offset of the transaction to abort")
      ->check(CLI::NonNegativeNumber);
  abort->add_option("--producer-id", o->producer_id, "Producer id of the transaction (with the two below)");
  abort->add_option("--producer-epoch", o->producer_epoch, "Its producer epoch");
  abort->add_option("--coordinator-epoch", o->coordinator_epoch, "Its coordinator epoch (-1: 0)");
  common(abort);
  abort->callback([o, exit_code] { *exit_code = run_abort(*o); });
}

}  // namespace sluice::cli
