#include "broker/broker.h"

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <set>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/limits.h"
#include "base/log.h"
#include "broker/metrics_view.h"
#include "config/group_config.h"
#include "etcd/grpc_client.h"
#include "group/records.h"
#include "group/service.h"
#include "kafka/delayed_ops.h"
#include "kafka/dispatcher.h"
#include "kafka/fetch_sessions.h"
#include "kafka/forwarder.h"
#include "kafka/share_sessions.h"
#include "kafka/txn_verifier.h"
#include "maintenance/log_maintenance.h"
#include "metadata/broker_configs.h"
#include "metadata/control_plane.h"
#include "metadata/etcd_store.h"
#include "metadata/metadata_cache.h"
#include "metadata/metadata_listener.h"
#include "metadata/partition_manager.h"
#include "metrics/http_endpoint.h"
#include "net/server.h"
#include "protocol/raw_client.h"
#include "storage/log_manager.h"
#include "share/service.h"
#include "txn/service.h"

namespace sluice::broker {

namespace {

// A random cluster id in Kafka's form: 16 bytes, URL-safe base64, no padding.
std::string new_cluster_id() {
  static const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::random_device rd;
  std::string id;
  for (int i = 0; i < 22; ++i) id += alphabet[rd() % 64];
  return id;
}

// The cluster id a data directory belongs to, or nullopt when it has none yet.
result<std::optional<std::string>> read_cluster_id(io::filesystem& fs, const std::string& path) {
  if (!fs.exists(path)) return std::optional<std::string>{};
  SLUICE_ASSIGN_OR_RETURN(auto bytes, fs.read_all(path, 256));
  std::string id(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  while (!id.empty() && (id.back() == '\n' || id.back() == ' ')) id.pop_back();
  if (id.empty()) return error{errc::corrupt_data, path + " is empty"};
  return std::optional<std::string>(id);
}

status write_cluster_id(io::filesystem& fs, const std::string& path, const std::string& id) {
  std::string text = id + "\n";
  return fs.write_atomic(path, {reinterpret_cast<const std::byte*>(text.data()), text.size()});
}

result<std::string> load_cluster_id(io::filesystem& fs, const std::string& path) {
  if (fs.exists(path)) {
    SLUICE_ASSIGN_OR_RETURN(auto bytes, fs.read_all(path, 256));
    std::string id(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    while (!id.empty() && (id.back() == '\n' || id.back() == ' ')) id.pop_back();
    if (id.empty()) return error{errc::corrupt_data, path + " is empty"};
    return id;
  }
  std::string id = new_cluster_id();
  std::string text = id + "\n";
  SLUICE_TRY(fs.write_atomic(path, {reinterpret_cast<const std::byte*>(text.data()), text.size()}));
  return id;
}

// "Read-only file system (EROFS)": the text and the name an operator can
// search for.
// Takes the exclusive lock on <dir>/.lock that makes one broker per data
// directory, and writes this process's id into the file for the next one
// to name. Returns the descriptor, which holds the lock until it is closed.
// Only a lock held elsewhere (EWOULDBLOCK) is reported as another broker;
// every other failure names the step and the OS error, since a read-only,
// unreadable or missing directory is a different fix.
result<int> lock_data_dir(const std::string& dir) {
  const std::string path = io::join(dir, ".lock");
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    return error{errc::io_error, "data directory " + dir + " cannot be used: " +
                                     io::os_error("opening for writing", path, errno).message};
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    std::string holder;
    char buf[32] = {};
    if (err == EWOULDBLOCK && ::pread(fd, buf, sizeof buf - 1, 0) > 0) {
      std::string pid(buf);
      while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
      if (!pid.empty()) holder = " (pid " + pid + ")";
    }
    ::close(fd);
    if (err == EWOULDBLOCK) {
      return error{errc::io_error,
                   "data directory " + dir + " is in use by another sluice process" + holder};
    }
    return error{errc::io_error, "data directory " + dir + ": " + io::os_error("locking", path, err).message};
  }
  // Best effort: the pid only improves the next refusal's message.
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) == 0) (void)!::pwrite(fd, pid.data(), pid.size(), 0);
  return fd;
}

}  // namespace

struct broker::impl {
  std::shared_ptr<const config::broker_config>
      cfg;  // at start; the current one is partitions->broker_config()
  io::filesystem& fs = io::filesystem::posix();
  sluice::clock& clk = sluice::clock::system();
  int lock_fd = -1;
  std::unique_ptr<storage::log_manager> logs;
  // A cluster's control plane (sluice.etcd.endpoints): the etcd client
  // and this broker's membership; null on a single broker.
  std::unique_ptr<etcd::client> etcd;
  const metered_etcd* etcd_metrics = nullptr;  // etcd, for /metrics
  std::unique_ptr<cluster::control_plane> control;
  // Whether this broker may act as the leaders its image names: open on a
  // single broker; in a cluster it asks the control plane (after control,
  // so it goes before it; before everything that asks it).
  cluster::leadership_gate gate;
  std::unique_ptr<cluster::partition_manager> partitions;
  // Declared before groups so it outlives the coordinator that calls it.
  std::unique_ptr<retention_watch> watch;
  std::unique_ptr<group::service> groups;
  // The transaction coordinator (after groups: its markers on
  // __consumer_offsets reach the group coordinator).
  std::unique_ptr<txn::service> txns;
  // Share groups: their members, share partitions and share coordinator.
  std::unique_ptr<share::service> shares;
  kafka::share_session_cache share_sessions{limits::default_share_session_timeout_ms};
  kafka::delayed_ops delayed{clk};
  kafka::fetch_session_cache fetch_sessions;
  metrics::request_metrics requests;
  std::unique_ptr<metrics::http_endpoint> metrics_http;
  std::unique_ptr<cluster::metadata_cache> metadata;
  // A cluster's: applies the control plane's changes (after partitions and
  // metadata, which it calls).
  std::unique_ptr<cluster::metadata_listener> listener;
  std::unique_ptr<cluster::log_maintenance> maintenance;  // walks partitions: after them, so it goes first
  kafka::services svc;
  std::unique_ptr<kafka::forwarder> forward;  // a cluster's: controller requests to the controller
  // A cluster's: KIP-890 verifications asked of other brokers' coordinators.
  std::unique_ptr<kafka::txn_verifier> verifier;
  std::unique_ptr<kafka::dispatcher> dispatch;
  std::unique_ptr<net::server> server;
  bool stopped = false;

  ~impl() {
    if (lock_fd >= 0) ::close(lock_fd);
  }
};

namespace {

// Connects to etcd and starts this broker's part of the control plane
// (not yet registered: join_cluster does that once it serves).
result<std::unique_ptr<cluster::control_plane>> start_control_plane(broker::impl& i, const config::broker_config& cfg,
                                                                    std::string new_id) {
  etcd::grpc_client_options eo;
  for (const auto& e : cfg.etcd_endpoints) eo.endpoints += (eo.endpoints.empty() ? "" : ",") + e;
  eo.request_timeout_ms = cfg.etcd_request_timeout_ms;
  SLUICE_ASSIGN_OR_RETURN(auto client, etcd::grpc_client::create(eo, i.clk));
  auto metered = std::make_unique<metered_etcd>(std::move(client), i.clk);
  i.etcd_metrics = metered.get();
  i.etcd = std::move(metered);
  cluster::control_plane::options o;
  o.node_id = cfg.node_id;
  o.rack = cfg.rack;
  o.prefix = cfg.etcd_prefix;
  o.session_timeout_ms = cfg.etcd_session_timeout_ms;
  o.unclean_default = cfg.topic_defaults.unclean_leader_election_enable;
  o.new_cluster_id = std::move(new_id);
  o.offsets_partitions = cfg.offsets_topic_num_partitions;
  o.auto_leader_rebalance = cfg.auto_leader_rebalance_enable;
  o.leader_imbalance_percentage = cfg.leader_imbalance_per_broker_percentage;
  o.leader_imbalance_check_interval_ms = cfg.leader_imbalance_check_interval_seconds * 1000;
  o.offsets_replication_factor = cfg.offsets_topic_replication_factor;
  o.offsets_configs = {{"cleanup.policy", "compact"},
                       {"max.message.bytes", std::to_string(limits::offsets_topic_max_message_bytes)}};
  // __transaction_state as the transaction.state.log.* settings lay it
  // out; the controller lowers min.insync.replicas further when fewer
  // brokers are live than the factor asks.
  o.txn_partitions = cfg.transaction_state_log_num_partitions;
  o.txn_replication_factor = cfg.transaction_state_log_replication_factor;
  for (const auto& e : txn::transaction_state_configs(cfg, cfg.transaction_state_log_replication_factor))
    o.txn_configs[e.key] = e.value.value_or("");
  o.share_state_partitions = cfg.share_state_topic_num_partitions;
  o.share_state_replication_factor = cfg.share_state_topic_replication_factor;
  for (const auto& e : share::share_state_configs(cfg, cfg.share_state_topic_replication_factor))
    o.share_state_configs[e.key] = e.value.value_or("");
  auto cp = cluster::control_plane::start(*i.etcd, i.clk, o);
  if (!cp.ok()) return error{cp.code(), "joining the cluster in etcd (" + eo.endpoints + "): " + cp.err().message};
  return std::move(cp).value();
}

// The share service's other brokers in a cluster (share::remote_brokers):
// their share coordinators (the state APIs 83-86) and, for dead letters,
// their partitions. One connection per broker, used only by the service's
// worker thread for that broker; a call that fails drops it (the next
// connects again) and is errc::unavailable, which the service retries or
// answers as retriable.
class remote_share_brokers final : public share::remote_brokers {
 public:
  explicit remote_share_brokers(const cluster::metadata_cache& md) : md_(md) {}

  result<std::optional<share::share_snapshot>> read_state(int32_t broker, const share::share_key& k,
                                                          int32_t leader_epoch) override {
    protocol::read_share_group_state_request req;
    req.group_id = k.group_id;
    auto& t = req.topics.emplace_back();
    t.topic_id = k.topic_id;
    auto& p = t.partitions.emplace_back();
    p.partition = k.partition;
    p.leader_epoch = leader_epoch;
    auto r = call<protocol::read_share_group_state_response>(broker, req, 0);
    if (!r.ok()) return r.err();
    if (r->results.size() != 1 || r->results[0].partitions.size() != 1)
      return error{errc::unavailable, "ReadShareGroupState: an answer for other partitions"};
    const auto& pr = r->results[0].partitions[0];
    if (pr.error_code != 0) return error{from_wire(pr.error_code), pr.error_message.value_or("ReadShareGroupState")};
    if (pr.state_epoch < 0) return std::optional<share::share_snapshot>{};  // no state yet
    share::share_snapshot s;
    s.state_epoch = pr.state_epoch;
    s.leader_epoch = leader_epoch;
    s.state = share::from_wire(pr);
    if (auto v = share::validate(s.state); !v.ok()) return v.err();
    return std::optional<share::share_snapshot>{std::move(s)};
  }

  status initialize_state(int32_t broker, const share::share_key& k, int32_t state_epoch,
                          int64_t start_offset) override {
    protocol::initialize_share_group_state_request req;
    req.group_id = k.group_id;
    auto& t = req.topics.emplace_back();
    t.topic_id = k.topic_id;
    auto& p = t.partitions.emplace_back();
    p.partition = k.partition;
    p.state_epoch = state_epoch;
    p.start_offset = start_offset;
    auto r = call<protocol::initialize_share_group_state_response>(broker, req, 0);
    if (!r.ok()) return r.err();
    return first_error(*r);
  }

  status write_state(int32_t broker, const share::share_key& k, int32_t state_epoch, int32_t leader_epoch,
                     const share::durable_state& d) override {
    protocol::write_share_group_state_request req;
    req.group_id = k.group_id;
    auto& t = req.topics.emplace_back();
    t.topic_id = k.topic_id;
    auto& p = t.partitions.emplace_back();
    p.partition = k.partition;
    p.state_epoch = state_epoch;
    p.leader_epoch = leader_epoch;
    share::to_wire(d, p);
    auto r = call<protocol::write_share_group_state_response>(broker, req, 0);
    if (!r.ok()) return r.err();
    return first_error(*r);
  }

  status delete_state(int32_t broker, const share::share_key& k) override {
    protocol::delete_share_group_state_request req;
    req.group_id = k.group_id;
    auto& t = req.topics.emplace_back();
    t.topic_id = k.topic_id;
    t.partitions.emplace_back().partition = k.partition;
    auto r = call<protocol::delete_share_group_state_response>(broker, req, 0);
    if (!r.ok()) return r.err();
    return first_error(*r);
  }

  status produce(int32_t broker, const std::string& topic, int32_t partition, std::vector<uint8_t> batch) override {
    protocol::produce_request req;
    req.acks = -1;
    req.timeout_ms = static_cast<int32_t>(limits::share_state_write_timeout_ms);
    auto& t = req.topic_data.emplace_back();
    t.name = topic;
    auto& p = t.partition_data.emplace_back();
    p.index = partition;
    p.records = protocol::records_field::of(batch);
    auto r = call<protocol::produce_response>(broker, req, 9);
    if (!r.ok()) return r.err();
    if (r->responses.size() != 1 || r->responses[0].partition_responses.size() != 1)
      return status(errc::unavailable, "Produce: an answer for other partitions");
    const auto& pr = r->responses[0].partition_responses[0];
    if (pr.error_code != 0)
      return status(from_wire(pr.error_code), pr.error_message.value_or("Produce of dead letters"));
    return {};
  }

 private:
  static errc from_wire(int16_t code) {
    switch (static_cast<kafka::error_code>(code)) {
      case kafka::error_code::not_coordinator: return errc::not_coordinator;
      case kafka::error_code::coordinator_load_in_progress: return errc::coordinator_load_in_progress;
      case kafka::error_code::fenced_leader_epoch: return errc::fenced_leader_epoch;
      case kafka::error_code::fenced_state_epoch: return errc::fenced_state_epoch;
      case kafka::error_code::not_leader_or_follower: return errc::not_leader;
      case kafka::error_code::invalid_request: return errc::invalid_argument;
      default: return errc::unavailable;
    }
  }

  template <class Resp>
  static status first_error(const Resp& r) {
    for (const auto& t : r.results)
      for (const auto& p : t.partitions)
        if (p.error_code != 0) return status(from_wire(p.error_code), p.error_message.value_or("share state"));
    return {};
  }

  template <class Resp, class Req>
  result<Resp> call(int32_t broker, const Req& req, int16_t version) {
    protocol::raw_connection* conn = nullptr;
    {
      std::lock_guard g(mu_);
      auto it = conns_.find(broker);
      if (it != conns_.end()) conn = it->second.get();
    }
    if (!conn) {
      auto b = md_.broker(broker);
      if (!b) return error{errc::unavailable, "broker " + std::to_string(broker) + " is not known"};
      auto c = protocol::raw_connection::connect(b->host + ":" + std::to_string(b->port),
                                                 std::chrono::milliseconds(limits::share_state_write_timeout_ms),
                                                 "sluice-share");
      if (!c.ok()) return error{errc::unavailable, "broker " + std::to_string(broker) + ": " + c.err().message};
      std::lock_guard g(mu_);
      auto& slot = conns_[broker];
      slot = std::make_unique<protocol::raw_connection>(std::move(*c));
      conn = slot.get();
    }
    auto r = conn->call<Resp>(req, version);
    if (!r.ok()) {
      std::lock_guard g(mu_);
      conns_.erase(broker);
      return error{errc::unavailable, "broker " + std::to_string(broker) + ": " + r.err().message};
    }
    return r;
  }

  const cluster::metadata_cache& md_;
  std::mutex mu_;
  std::map<int32_t, std::unique_ptr<protocol::raw_connection>> conns_;
};

// Writes a transaction's markers at another broker that leads their
// partitions (WriteTxnMarkers, answered once committed there). A partition
// whose answer does not come is reported unavailable: the service tries it
// again.
txn::service::remote_markers_fn send_markers_to(const cluster::metadata_cache& md) {
  return [&md](int32_t leader, const txn::markers& m, const std::vector<txn::topic_partition>& tps) {
    std::map<txn::topic_partition, errc> out;
    for (const auto& tp : tps) out[tp] = errc::unavailable;
    auto b = md.broker(leader);
    if (!b) return out;
    auto conn = protocol::raw_connection::connect(b->host + ":" + std::to_string(b->port),
                                                  std::chrono::milliseconds(limits::txn_marker_commit_timeout_ms),
                                                  "sluice-txn-markers");
    if (!conn.ok()) return out;
    protocol::write_txn_markers_request req;
    auto& wm = req.markers.emplace_back();
    wm.producer_id = m.producer_id;
    wm.producer_epoch = m.producer_epoch;
    wm.transaction_result = m.type == txn::marker_type::commit;
    wm.coordinator_epoch = m.coordinator_epoch;
    for (const auto& tp : tps) {
      if (wm.topics.empty() || wm.topics.back().name != tp.topic) wm.topics.emplace_back().name = tp.topic;
      wm.topics.back().partition_indexes.push_back(tp.partition);
    }
    auto r = conn->call<protocol::write_txn_markers_response>(req, 1);
    if (!r.ok()) return out;
    for (const auto& mr : r->markers)
      for (const auto& t : mr.topics)
        for (const auto& p : t.partitions) {
          errc e = errc::unavailable;
          if (p.error_code == kafka::to_wire(kafka::error_code::none)) e = errc::ok;
          if (p.error_code == kafka::to_wire(kafka::error_code::invalid_producer_epoch)) e = errc::invalid_producer_epoch;
          if (p.error_code == kafka::to_wire(kafka::error_code::transaction_coordinator_fenced)) e = errc::coordinator_fenced;
          out[{t.name, p.partition_index}] = e;
        }
    return out;
  };
}

// Follows the cluster's metadata (logs, states, brokers) and registers
// this broker, which from then on is live to the others.
status join_cluster(broker::impl& i, const cluster::broker_endpoint& self) {
  // Its session lost, this broker is dead to the cluster, which elects
  // other leaders: acks=all produces waiting here are answered
  // NOT_LEADER_OR_FOLLOWER now (Produce refuses new ones, Metadata names
  // no leadership of this broker: metadata_cache::set_leadership_gate).
  i.control->on_session_lost([&i] {
    if (!i.control->session_lost()) return;  // etcd lost its quorum: nobody elects meanwhile
    const status why(errc::not_leader, "this broker lost its cluster session; the partition's leadership is moving");
    for (auto& p : i.partitions->replicas().all())
      if (p->is_leader()) p->answer_commit_waiters(why);
  });
  i.listener = std::make_unique<cluster::metadata_listener>(*i.partitions, *i.metadata);
  i.control->on_change([&i](const controller::metadata_image& img, const std::vector<controller::image_change>& cs) {
    i.listener->apply(img, cs);
  });
  // Follow the leaders of the partitions this broker replicates, and keep
  // the ISR of those it leads (docs/replication.md).
  cluster::replica_manager::replication_options ro;
  ro.fetch.wait_max_ms = i.cfg->replica_fetch_wait_max_ms;
  ro.fetch.partition_max_bytes = i.cfg->replica_fetch_max_bytes;
  ro.fetch.response_max_bytes = i.cfg->replica_fetch_response_max_bytes;
  ro.fetch.backoff_ms = i.cfg->replica_fetch_backoff_ms;
  ro.fetch.socket_timeout_ms = i.cfg->replica_socket_timeout_ms;
  ro.fetch.broker_epoch = [&i] { return i.control->broker_epoch(); };
  ro.lag_max_ms = i.cfg->replica_lag_time_max_ms;
  ro.gate = &i.gate;
  ro.endpoints = [&i](int32_t id) {
    return i.control->with_image([id](const controller::metadata_image& img) {
      std::optional<std::pair<std::string, int32_t>> ep;
      if (auto it = img.brokers().find(id); it != img.brokers().end())
        ep.emplace(it->second.record.host, it->second.record.port);
      return ep;
    });
  };
  ro.write_isr = [&i](const cluster::isr_request& r) {
    i.control->request_isr_change(r);
  };
  ro.checkpoint = [&i] {
    if (auto s = i.partitions->checkpoint_high_watermarks(); !s.ok())
      SLUICE_LOG_WARN("high watermark checkpoint failed: {}", s.err().message);
  };
  // Producer ids unique over the cluster, not per broker.
  i.partitions->producer_ids().set_block_source(
      [&i](int64_t count) { return i.control->reserve_producer_ids(count); });
  // The cluster-wide broker defaults may have changed since the broker
  // read them at start.
  i.partitions->on_broker_defaults_change();
  // So may the group configs (the listener applies every change from here).
  i.partitions->reload_group_configs();
  // Partitions of topics created while this broker was away: bring every
  // topic in line once (it opened what the store listed; states may be newer).
  for (const auto& t : i.partitions->topics()) i.partitions->on_store_change(t.name);
  SLUICE_TRY(i.control->register_broker(self.host, self.port));
  // Replication starts once the broker is registered: every fetch names
  // the broker epoch of its registration (KIP-903), and a fetch without one
  // is refused and waits out replica.fetch.backoff.ms, which every
  // partition of a restarted broker paid before it counted. Nothing needs
  // the fetchers earlier: partitions applied before this (the store's
  // changes, the topics brought in line above) are followed from here, and
  // a leadership this broker's new registration may get is kept from here
  // (the ISR upkeep).
  i.partitions->replicas().start_replication(std::move(ro), i.clk);
  i.control->with_image([&i](const controller::metadata_image& img) {
    i.listener->publish_brokers(img);
    return 0;
  });
  SLUICE_LOG_INFO("joined the cluster as broker {} (etcd prefix {})", i.control->node_id(),
                  i.cfg->etcd_prefix);
  return {};
}

}  // namespace

broker::broker(std::unique_ptr<impl> i) : impl_(std::move(i)) {}
broker::~broker() { stop().ignore(); }

result<std::unique_ptr<broker>> broker::open(std::shared_ptr<const config::broker_config> cfg) {
  auto i = std::make_unique<impl>();
  i->cfg = cfg;
  const std::string dir = cfg->data_dir;  // a copy: cfg is replaced below
  if (struct stat st{}; ::stat(dir.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) {
    return error{errc::io_error, "data directory " + dir + " exists and is not a directory"};
  }
  if (auto s = i->fs.create_dirs(dir); !s.ok()) {
    return error{s.code(), "data directory " + dir + " cannot be created: " + s.err().message};
  }
  SLUICE_ASSIGN_OR_RETURN(i->lock_fd, lock_data_dir(dir));
  SLUICE_TRY(i->fs.create_dirs(io::join(dir, "meta")));
  const std::string cluster_id_path = io::join(io::join(dir, "meta"), "cluster_id");
  std::string cluster_id;
  std::unique_ptr<cluster::metadata_store> store;  // null: the file-backed topic table
  if (cfg->cluster_mode()) {
    SLUICE_ASSIGN_OR_RETURN(auto local_id, read_cluster_id(i->fs, cluster_id_path));
    SLUICE_ASSIGN_OR_RETURN(i->control, start_control_plane(*i, *cfg, local_id.value_or(new_cluster_id())));
    i->gate = cluster::leadership_gate([cp = i->control.get()] { return cp->standing(); },
                                       cfg->replica_lag_time_max_ms);
    cluster_id = i->control->cluster_id();
    // A data directory of another cluster (or of a single broker) would
    // be taken for stale replicas and deleted: refuse instead.
    if (local_id && *local_id != cluster_id) {
      return error{errc::invalid_config, "data directory " + dir + " belongs to cluster " + *local_id +
                                             ", but etcd (" + cfg->etcd_prefix + ") holds cluster " + cluster_id};
    }
    if (!local_id) SLUICE_TRY(write_cluster_id(i->fs, cluster_id_path, cluster_id));
    store = std::make_unique<cluster::etcd_store>(*i->control, cfg->etcd_session_timeout_ms);
  } else {
    SLUICE_ASSIGN_OR_RETURN(cluster_id, load_cluster_id(i->fs, cluster_id_path));
  }
  // Values changed at runtime by AlterConfigs on the broker win over the
  // file and command line (metadata/broker_configs.h).
  // In a cluster the cluster-wide default level is etcd's (configs/brokers).
  const auto cluster_defaults = store ? store->broker_defaults() : std::nullopt;
  SLUICE_ASSIGN_OR_RETURN(auto with_dynamic, cluster::load_dynamic_broker_config(
                                                 i->fs, *cfg, cluster_defaults ? &*cluster_defaults : nullptr));
  if (!with_dynamic.dynamic_default_values.empty() || !with_dynamic.dynamic_broker_values.empty()) {
    SLUICE_LOG_INFO("applying {} dynamic default and {} dynamic node broker settings from {}",
                    with_dynamic.dynamic_default_values.size(),
                    with_dynamic.dynamic_broker_values.size(), cluster::broker_configs_dir(dir));
  }
  cfg = std::make_shared<const config::broker_config>(std::move(with_dynamic));
  i->cfg = cfg;

  io::filesystem::set_posix_sync_scope(cfg->fsync_scope_filesystem ? io::filesystem::sync_scope::filesystem
                                                                   : io::filesystem::sync_scope::file);
  storage::log_manager_config lcfg;
  lcfg.data_dir = io::join(dir, "logs");
  lcfg.max_open_segment_files = static_cast<size_t>(cfg->max_open_segment_files);
  lcfg.scrub_bytes_per_second = cfg->log_scrub_bytes_per_second;
  lcfg.follower_cache_drop_behind_bytes = static_cast<uint64_t>(cfg->follower_cache_drop_behind_bytes);
  lcfg.default_log = cluster::to_log_config(cfg->topic_defaults);
  SLUICE_ASSIGN_OR_RETURN(i->logs, storage::log_manager::open(i->fs, i->clk, lcfg));
  SLUICE_ASSIGN_OR_RETURN(i->partitions,
                          cluster::partition_manager::open(i->fs, i->clk, cfg, *i->logs, std::move(store)));
  i->maintenance = std::make_unique<cluster::log_maintenance>(*i->partitions, i->clk);
  i->maintenance->start();
  // The coordinator replays __consumer_offsets on its own thread; until
  // then group requests get COORDINATOR_LOAD_IN_PROGRESS.
  SLUICE_ASSIGN_OR_RETURN(i->groups, group::service::open(*i->partitions, i->clk, *cfg));
  // In a cluster the coordinator answers nothing from memory while this
  // broker's view may be stale (back from a pause or a cut that outlasted
  // its session): another broker may have taken its groups meanwhile.
  if (i->control)
    i->groups->coordinator().set_view_check([c = i->control.get()] { return c->view_trusted(); });
  // The watch observes committed offsets from the first live commit on, so
  // it is wired before the coordinator's thread starts.
  i->watch = std::make_unique<retention_watch>(*i->partitions, &i->groups->coordinator(), i->clk,
                                               cfg->write_rate_window_ms);
  i->groups->coordinator().set_offset_observer(
      [w = i->watch.get()](const std::string& g, const std::string& t, int32_t p, int64_t prev) {
        w->on_offset_replaced(g, t, p, prev);
      });
  // A deleted topic's committed offsets go with it (Kafka's
  // onPartitionsDeleted), by topic id: a topic created again under the
  // name keeps its own (docs/group_records.md, "Topic ids").
  i->partitions->on_topic_deleted([c = &i->groups->coordinator()](const std::string& topic, const topic_id& id) {
    c->delete_topic_offsets(topic, id);
  });
  // In a cluster the coordinator serves the __consumer_offsets partitions
  // this broker leads, loading and unloading them as leadership moves.
  i->partitions->on_role_change([g = i->groups.get()](const std::string& topic, int32_t p, bool leads) {
    if (topic == group::offsets_topic) g->on_leadership(p, leads);
  });
  // The transaction coordinator replays __transaction_state on its own
  // thread, as the group coordinator does __consumer_offsets.
  SLUICE_ASSIGN_OR_RETURN(i->txns, txn::service::open(*i->partitions, i->clk, *cfg));
  i->partitions->on_role_change([t = i->txns.get()](const std::string& topic, int32_t p, bool leads) {
    if (topic == txn::transaction_state_topic) t->on_leadership(p, leads);
  });
  // A marker on __consumer_offsets ends the producer's pending offsets
  // there; a TxnOffsetCommit is written only for a partition the producer's
  // transaction holds (KIP-890).
  // Share groups keep their share partitions' state in
  // __share_group_state, replayed on its own thread as the others are.
  SLUICE_ASSIGN_OR_RETURN(i->shares, share::service::open(*i->partitions, i->clk, *cfg, cfg->node_id));
  i->partitions->on_role_change([s = i->shares.get()](const std::string& topic, int32_t p, bool leads) {
    if (topic == share::share_state_topic) s->on_leadership(p, leads);
  });
  i->txns->set_offsets_marker_listener([c = &i->groups->coordinator()](int32_t p, int64_t producer_id, bool commit,
                                                                         int64_t marker_offset) {
    c->on_transaction_completed(p, producer_id, commit, marker_offset);
  });
  // The producer's transaction coordinator is asked here or, in a cluster,
  // on the broker that leads its partition of __transaction_state
  // (i->verifier, set below before the server starts).
  i->groups->set_txn_verifier([&i = *i](const group::txn_producer& tp, int32_t p, std::function<void(errc)> done) {
    const txn::topic_partition offsets{std::string(group::offsets_topic), p};
    const int32_t coordinator = i.control ? i.txns->coordinator_of(tp.transactional_id) : i.cfg->node_id;
    if (coordinator == i.cfg->node_id && i.control && !kafka::coordinates_here(i.svc, tp.transactional_id)) {
      done(errc::coordinator_not_available);  // a view this broker cannot trust now
      return;
    }
    const bool here = coordinator == i.cfg->node_id || !i.verifier;
    if (here && tp.add) {
      txn::add_partitions_request a;
      a.transactional_id = tp.transactional_id;
      a.producer_id = tp.producer_id;
      a.producer_epoch = tp.producer_epoch;
      a.partitions = {offsets};
      a.api_version = protocol::add_partitions_to_txn_request::max_version;
      i.txns->add_partitions(a, [done = std::move(done)](const txn::answer& ans) {
        done(ans.error == errc::not_coordinator || ans.error == errc::coordinator_load_in_progress ||
                     ans.error == errc::concurrent_transactions
                 ? errc::coordinator_not_available
                 : ans.error);
      });
      return;
    }
    if (here) {
      auto v = i.txns->verify(tp.transactional_id, tp.producer_id, tp.producer_epoch, {offsets});
      if (v.error == errc::not_coordinator || v.error == errc::coordinator_load_in_progress ||
          v.error == errc::concurrent_transactions) {
        done(errc::coordinator_not_available);
      } else if (v.error != errc::ok) {
        done(v.error);
      } else {
        auto it = v.partitions.find(offsets);
        done(it == v.partitions.end() ? errc::transaction_abortable : it->second);
      }
      return;
    }
    if (coordinator < 0) {
      done(errc::coordinator_not_available);
      return;
    }
    kafka::txn_verifier::question q{tp.transactional_id, tp.producer_id, tp.producer_epoch, {offsets}, tp.add};
    i.verifier->ask(coordinator, std::move(q), [offsets, done = std::move(done)](const kafka::txn_verifier::answer& a) {
      auto it = a.find(offsets);
      switch (it == a.end() ? kafka::error_code::not_coordinator : it->second) {
        case kafka::error_code::none: done(errc::ok); return;
        case kafka::error_code::transaction_abortable:
        case kafka::error_code::invalid_txn_state: done(errc::transaction_abortable); return;
        case kafka::error_code::producer_fenced: done(errc::producer_fenced); return;
        case kafka::error_code::invalid_producer_epoch: done(errc::invalid_producer_epoch); return;
        case kafka::error_code::invalid_producer_id_mapping: done(errc::invalid_producer_id_mapping); return;
        default: done(errc::coordinator_not_available); return;
      }
    });
  });
  i->watch->start();
  i->groups->start();

  i->metadata = std::make_unique<cluster::metadata_cache>(i->partitions->store(), i->partitions->replicas(),
                                                               cfg->node_id, cluster_id);
  i->metadata->set_leadership_gate(&i->gate);
  i->svc.leadership = &i->gate;
  i->svc.partitions = i->partitions.get();
  i->svc.metadata = i->metadata.get();
  i->svc.clk = &i->clk;
  i->svc.delayed = &i->delayed;
  i->svc.fetch_sessions = &i->fetch_sessions;
  i->svc.requests = &i->requests;
  i->svc.groups = &i->groups->coordinator();
  i->svc.txn = i->txns.get();
  if (i->control) i->txns->set_remote_markers(send_markers_to(*i->metadata));
  i->txns->start();
  if (i->control) i->shares->set_remote(std::make_unique<remote_share_brokers>(*i->metadata));
  // A share group's own configs (GROUP config resources) over the broker's
  // group.share.* defaults: only the keys the group sets change anything.
  i->shares->set_group_settings([pm = i->partitions.get()](const std::string& group,
                                                          const share::group_settings& defaults) {
    const auto set = pm->group_config(group);
    if (set.empty()) return defaults;
    const auto eff = config::effective_share_group_config(*pm->broker_config(), set);
    share::group_settings gs = defaults;
    if (set.find("share.record.lock.duration.ms")) gs.partition.record_lock_duration_ms = eff.record_lock_duration_ms;
    if (set.find("share.delivery.count.limit"))
      gs.partition.delivery_count_limit = static_cast<int16_t>(eff.delivery_count_limit);
    if (set.find("share.isolation.level")) gs.read_committed = eff.read_committed;
    if (set.find("share.session.timeout.ms")) gs.session_timeout_ms = eff.session_timeout_ms;
    if (set.find("share.heartbeat.interval.ms")) gs.heartbeat_interval_ms = eff.heartbeat_interval_ms;
    if (set.find("share.auto.offset.reset")) {
      using strategy = config::share_auto_offset_reset::strategy;
      const auto k = eff.auto_offset_reset.kind;
      gs.reset = k == strategy::latest     ? share::offset_reset::latest
                 : k == strategy::earliest ? share::offset_reset::earliest
                                           : share::offset_reset::by_duration;
      gs.reset_duration_ms = eff.auto_offset_reset.duration_ms;
    }
    if (!eff.dead_letter_topic.empty()) gs.dead_letter_topic = eff.dead_letter_topic;
    gs.dead_letter_copy_record = eff.dead_letter_copy_record;
    return gs;
  });
  i->svc.share = i->shares.get();
  i->svc.share_sessions = &i->share_sessions;
  i->shares->start();
  i->svc.fs = &i->fs;
  i->svc.node_id = cfg->node_id;
  i->svc.control = i->control.get();
  if (i->control) {
    i->forward = std::make_unique<kafka::forwarder>(
        cfg->etcd_session_timeout_ms, [](kafka::request r) { kafka::dispatcher::handle_here(std::move(r)); },
        [pm = i->partitions.get()](const std::string& topic) {
          // Automatic creation on the controller itself, on the forwarding thread.
          if (auto e = pm->create_topic(topic, -1, -1, {}, false,
                                        cluster::partition_manager::create_mode::background);
              e && e->code != errc::already_exists) {
            SLUICE_LOG_WARN("automatic creation of topic {}: {}", topic, e->message);
          }
        },
        [pm = i->partitions.get()](const std::string& group) {
          // A deleted group's configs, on the controller itself, on the forwarding thread.
          if (auto s = pm->delete_group_configs(group); !s.ok())
            SLUICE_LOG_WARN("the configs of deleted group {} stay: {}", group, s.err().message);
        });
    i->svc.forward = i->forward.get();
    i->verifier = std::make_unique<kafka::txn_verifier>(
        [md = i->metadata.get()](int32_t id) -> std::optional<kafka::txn_verifier::endpoint> {
          auto b = md->broker(id);
          if (!b) return std::nullopt;
          return kafka::txn_verifier::endpoint{b->host, b->port};
        },
        limits::txn_verify_timeout_ms);
    i->svc.verifier = i->verifier.get();
  }
  i->dispatch = std::make_unique<kafka::dispatcher>(i->svc);

  net::server_config scfg;
  scfg.host = cfg->listener.host;
  scfg.port = cfg->listener.port;
  scfg.io_threads = static_cast<uint32_t>(cfg->num_io_threads);
  scfg.socket_request_max_bytes = cfg->socket_request_max_bytes;
  scfg.connections_max_idle_ms = cfg->connections_max_idle_ms;
  scfg.max_connections = cfg->max_connections;
  scfg.max_inflight_requests_per_connection = cfg->max_inflight_requests_per_connection;
  scfg.queued_max_request_bytes = cfg->queued_max_request_bytes;
  scfg.request_read_timeout_ms = cfg->request_read_timeout_ms;
  scfg.clk = &i->clk;
  i->server = std::make_unique<net::server>(scfg, *i->dispatch);
  {
    // What a broker config change tells the parts that copied a setting at
    // start; everything else reads partitions->broker_config() at use.
    auto* raw = i.get();
    i->partitions->on_broker_config_change([raw](const config::broker_config& next) {
      raw->server->set_max_connections(next.max_connections);
      raw->groups->coordinator().update_config(group::coordinator_config::from(next));
    });
  }
  // One broker: it is the only live broker and the controller. When the
  // config asked for port 0 the port is known only once the listener is
  // bound; no client can have learnt it before then.
  cluster::broker_endpoint self{cfg->node_id, cfg->advertised_listener.host, cfg->advertised_listener.port,
                                std::nullopt};
  i->metadata->set_brokers({self}, cfg->node_id);
  SLUICE_TRY(i->server->start());
  if (self.port == 0) {
    self.port = i->server->port();
    i->metadata->set_brokers({self}, cfg->node_id);
  }
  if (i->control) SLUICE_TRY(join_cluster(*i, self));
  if (cfg->metrics_listener) {
    // Metrics are for the operator; a port that cannot be bound is logged
    // and the broker serves Kafka clients all the same.
    auto* raw = i.get();
    i->metrics_http = std::make_unique<metrics::http_endpoint>([raw, dir] {
      return render_metrics({raw->partitions.get(), &raw->server->metrics(), &raw->requests, raw->watch.get(),
                             raw->logs.get(), raw->control.get(), raw->etcd_metrics, raw->txns.get(),
                             raw->shares.get(), &raw->fs, dir});
    });
    if (auto s = i->metrics_http->start(cfg->metrics_listener->host, cfg->metrics_listener->port); !s.ok()) {
      SLUICE_LOG_ERROR("{}; serving without metrics", s.err().message);
      i->metrics_http.reset();
    }
  }
  SLUICE_LOG_INFO("sluice listening on {}:{} (advertised {}:{}), data in {}, cluster id {}, {} topics", scfg.host,
                  i->server->port(), self.host, self.port, dir, cluster_id,
                  i->partitions->topics().size());
  return std::unique_ptr<broker>(new broker(std::move(i)));
}

uint16_t broker::port() const { return impl_->server->port(); }

status broker::stop() {
  if (!impl_ || impl_->stopped) return {};
  impl_->stopped = true;
  // First, while still serving: leadership moves off this broker (when it
  // decides) and its registration goes, so the others elect at once.
  if (impl_->control) {
    // Whatever etcd does, the broker stops within seconds: etcd gets a
    // short grace for the controlled shutdown and the lease's revocation,
    // and every etcd call still waiting after it gives up.
    impl_->etcd->wind_down(limits::etcd_shutdown_grace_ms);
    impl_->partitions->stop_leading();
    // stop_leading tells no role listener, and the metadata watch ends
    // below: the coordinator must stop answering from what it holds now,
    // before the others elect new leaders and take commits.
    impl_->groups->resign();
    impl_->txns->resign();
    impl_->control->shutdown().ignore();  // a failure is logged there
    // Leadership has moved on: stop copying from the leaders.
    impl_->partitions->replicas().stop_replication();
  }
  SLUICE_LOG_INFO("shutting down: answering requests in flight");
  if (impl_->metrics_http) impl_->metrics_http->stop();
  if (impl_->forward) impl_->forward->stop();
  // Produces waiting on another broker's coordinator are answered
  // (NOT_ENOUGH_REPLICAS, retriable) while the server can still send.
  if (impl_->verifier) impl_->verifier->stop();
  impl_->delayed.drain();
  impl_->groups->coordinator().unload();
  impl_->server->stop();
  impl_->delayed.stop();
  impl_->txns->stop();
  impl_->shares->stop();
  impl_->groups->stop();
  impl_->watch->stop();
  impl_->maintenance->stop();
  impl_->partitions->shutdown();
  status s = impl_->logs->shutdown();
  if (s.ok()) {
    SLUICE_LOG_INFO("shut down cleanly");
  } else {
    SLUICE_LOG_ERROR("shutdown: {}", s.err().message);
  }
  return s;
}

}  // namespace sluice::broker
