// `sluice cluster describe|elect-leaders`: the cluster's brokers and
// controller, the etcd behind it, and leader elections on demand.
//
// Both speak raw Kafka requests (raw_client.h): librdkafka 2.0.2 shows
// neither broker racks nor the controller id, and has no ElectLeaders.
// `describe --etcd` also reads etcd directly, as an operator checking a
// cluster whose brokers may be down would.

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cli/commands.h"
#include "protocol/error_code.h"
#include "protocol/raw_client.h"
#include "controller/records.h"
#include "etcd/grpc_client.h"

namespace sluice::cli {
namespace {

using protocol::elect_leaders_version;
using protocol::endpoint_of;
using protocol::kafka_error_name;
using protocol::metadata_version;
using protocol::raw_connection;

using namespace std::chrono_literals;

struct cluster_options {
  std::string bootstrap = default_bootstrap;
  int timeout_ms = default_timeout_ms;
  std::string etcd;  // empty: do not ask etcd
  std::string prefix = "/sluice/";
  std::string topic;
  int partition = -1;
  bool unclean = false;
};

int fail(const std::string& what) {
  std::fprintf(stderr, "sluice cluster: %s\n", what.c_str());
  return 1;
}

// Brokers and controller (no topics) from any bootstrap broker.
result<protocol::metadata_response> cluster_metadata(raw_connection& conn) {
  protocol::metadata_request req;
  req.topics.emplace();  // none
  req.allow_auto_topic_creation = false;
  return conn.call<protocol::metadata_response>(req, metadata_version);
}

// What etcd says: each member's health, and the controller key's create
// revision, which is the controller epoch (controller/controller.h).
int describe_etcd(const cluster_options& o) {
  etcd::grpc_client_options eo;
  eo.endpoints = o.etcd;
  // An operator's look: a dead member should not hold the answer up long.
  eo.request_timeout_ms = 2000;
  eo.retry_budget_ms = std::min<int64_t>(o.timeout_ms, 5000);
  auto client = etcd::grpc_client::create(eo, sluice::clock::system());
  if (!client) return fail("etcd: " + client.err().message);
  int rc = 0;
  auto st = (*client)->endpoints_status();
  if (!st) {
    rc = fail("etcd status: " + st.err().message);
  } else {
    for (const auto& e : *st) {
      if (!e.reachable) {
        std::printf("etcd member %s\tunreachable\terror=%s\n", e.endpoint.c_str(), e.error.c_str());
        continue;
      }
      std::string alarms;
      for (const auto& a : e.alarms) alarms += (alarms.empty() ? "" : ",") + a;
      std::printf("etcd member %s\t%s\tid=%llx\tleader=%llx\tterm=%llu\tversion=%s\tdb_size_bytes=%lld%s\n",
                  e.endpoint.c_str(), e.alarms.empty() ? "healthy" : "alarmed",
                  static_cast<unsigned long long>(e.member_id), static_cast<unsigned long long>(e.leader_id),
                  static_cast<unsigned long long>(e.raft_term), e.version.c_str(),
                  static_cast<long long>(e.db_size_bytes), alarms.empty() ? "" : ("\talarms=" + alarms).c_str());
    }
  }
  std::string prefix = o.prefix;
  if (prefix.empty() || prefix.back() != '/') prefix += '/';
  const controller::key_layout keys(prefix);
  auto r = (*client)->range(etcd::key_range::one(keys.controller()));
  if (!r) return fail("etcd: reading " + keys.controller() + ": " + r.err().message);
  if (r->kvs.empty()) {
    std::printf("controller_epoch=none\t(no controller under %s)\n", prefix.c_str());
    return rc;
  }
  const auto& kv = r->kvs.front();
  auto rec = controller::decode_controller(kv.value);
  std::printf("controller_epoch=%lld\tcontroller=%s\n", static_cast<long long>(kv.create_revision),
              rec ? std::to_string(rec->id).c_str() : ("unreadable (" + rec.err().message + ")").c_str());
  return rc;
}

int run_describe(const cluster_options& o) {
  auto conn = raw_connection::connect_any(o.bootstrap, std::chrono::milliseconds(o.timeout_ms));
  int rc = 0;
  if (!conn) {
    rc = fail(conn.err().message);
  } else if (auto md = cluster_metadata(*conn); !md) {
    rc = fail("metadata: " + md.err().message);
  } else {
    std::sort(md->brokers.begin(), md->brokers.end(),
              [](const auto& a, const auto& b) { return a.node_id < b.node_id; });
    std::printf("cluster_id=%s\n", md->cluster_id.value_or("").c_str());
    std::printf("controller=%d\n", md->controller_id);
    for (const auto& b : md->brokers) {
      std::printf("broker %d\tendpoint=%s\track=%s%s\n", b.node_id, endpoint_of(b.host, b.port).c_str(),
                  b.rack.value_or("-").c_str(), b.node_id == md->controller_id ? "\tcontroller" : "");
    }
  }
  if (!o.etcd.empty()) rc = std::max(rc, describe_etcd(o));
  return rc;
}

// The controller's connection: the bootstrap broker when it is the
// controller, else a new one to the controller's endpoint.
result<raw_connection> connect_controller(const cluster_options& o) {
  const auto timeout = std::chrono::milliseconds(o.timeout_ms);
  SLUICE_ASSIGN_OR_RETURN(auto conn, raw_connection::connect_any(o.bootstrap, timeout));
  SLUICE_ASSIGN_OR_RETURN(auto md, cluster_metadata(conn));
  for (const auto& b : md.brokers) {
    if (b.node_id == md.controller_id) return raw_connection::connect(endpoint_of(b.host, b.port), timeout);
  }
  return error{errc::unavailable, "the cluster has no controller now (controller id " +
                                      std::to_string(md.controller_id) + ")"};
}

// The partitions of --topic, or the one --partition names.
result<std::vector<int32_t>> partitions_to_elect(const cluster_options& o) {
  if (o.partition >= 0) return std::vector<int32_t>{o.partition};
  SLUICE_ASSIGN_OR_RETURN(auto conn,
                          raw_connection::connect_any(o.bootstrap, std::chrono::milliseconds(o.timeout_ms)));
  protocol::metadata_request req;
  req.topics.emplace().emplace_back().name = o.topic;
  req.allow_auto_topic_creation = false;
  SLUICE_ASSIGN_OR_RETURN(auto md, conn.call<protocol::metadata_response>(req, metadata_version));
  if (md.topics.size() != 1 || md.topics[0].error_code != 0) {
    return error{errc::not_found, "topic " + o.topic + ": " +
                                      (md.topics.empty() ? "no answer" : kafka_error_name(md.topics[0].error_code))};
  }
  std::vector<int32_t> out;
  for (const auto& p : md.topics[0].partitions) out.push_back(p.partition_index);
  std::sort(out.begin(), out.end());
  return out;
}

constexpr int16_t not_controller_code = kafka::to_wire(kafka::error_code::not_controller);
constexpr int16_t election_not_needed_code = kafka::to_wire(kafka::error_code::election_not_needed);

int run_elect_leaders(const cluster_options& o) {
  protocol::elect_leaders_request req;
  req.election_type = o.unclean ? 1 : 0;
  req.timeout_ms = o.timeout_ms;
  if (!o.topic.empty()) {
    auto parts = partitions_to_elect(o);
    if (!parts) return fail(parts.err().message);
    auto& t = req.topic_partitions.emplace().emplace_back();
    t.topic = o.topic;
    t.partitions = std::move(*parts);
  } else if (o.partition >= 0) {
    return fail("--partition needs --topic");
  }
  // The controller may move while we ask: NOT_CONTROLLER means find it
  // again, until the timeout.
  const sluice::deadline until(o.timeout_ms, sluice::clock::system());
  for (;;) {
    auto conn = connect_controller(o);
    std::string why;
    if (conn) {
      auto resp = conn->call<protocol::elect_leaders_response>(req, elect_leaders_version);
      if (resp && resp->error_code == 0) {
        int rc = 0;
        size_t shown = 0;
        for (const auto& t : resp->replica_election_results) {
          for (const auto& p : t.partition_result) {
            ++shown;
            if (p.error_code == 0) {
              std::printf("%s-%d\telected\n", t.topic.c_str(), p.partition_id);
              continue;
            }
            if (p.error_code != election_not_needed_code) rc = 1;
            std::printf("%s-%d\t%s\t%s\n", t.topic.c_str(), p.partition_id, kafka_error_name(p.error_code).c_str(),
                        p.error_message.value_or("").c_str());
          }
        }
        if (shown == 0) std::printf("no election needed\n");
        return rc;
      }
      if (!resp) return fail("elect leaders: " + resp.err().message);
      if (resp->error_code != not_controller_code) return fail("elect leaders: " + kafka_error_name(resp->error_code));
      why = "NOT_CONTROLLER";
    } else {
      why = conn.err().message;
    }
    if (until.passed()) return fail("elect leaders: " + why);
    std::this_thread::sleep_for(500ms);
  }
}

}  // namespace

void add_cluster_command(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<cluster_options>();
  CLI::App* cluster = app.add_subcommand("cluster", "Describe the cluster and elect partition leaders");
  cluster->require_subcommand(1);
  auto common = [&](CLI::App* c) {
    c->add_option("--bootstrap,-b", o->bootstrap, "Broker addresses host:port[,host:port...]")->capture_default_str();
    c->add_option("--timeout-ms", o->timeout_ms, "How long to wait for the brokers")->capture_default_str();
  };

  CLI::App* describe = cluster->add_subcommand(
      "describe", "Brokers, their endpoints and racks, the controller; with --etcd, etcd's health and the controller epoch");
  describe->add_option("--etcd", o->etcd, "etcd endpoints http://host:port[,...]");
  describe->add_option("--prefix", o->prefix, "The cluster's etcd prefix (sluice.etcd.prefix)")->capture_default_str();
  common(describe);
  describe->callback([o, exit_code] { *exit_code = run_describe(*o); });

  CLI::App* elect = cluster->add_subcommand(
      "elect-leaders", "Elect preferred leaders (or, with --unclean, any live replica of a partition without a live "
                       "in-sync one); every partition unless --topic");
  elect->add_option("--topic,-t", o->topic, "Only this topic's partitions");
  elect->add_option("--partition,-p", o->partition, "Only this partition of --topic")->check(CLI::NonNegativeNumber);
  elect->add_flag("--unclean", o->unclean, "Unclean election: records the ISR had may be lost");
  common(elect);
  elect->callback([o, exit_code] { *exit_code = run_elect_leaders(*o); });
}

}  // namespace sluice::cli
