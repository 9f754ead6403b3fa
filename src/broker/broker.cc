#include "broker/broker.h"

#include <cerrno>
#include <cstring>
#include <random>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "broker/metrics_view.h"
#include "cluster/broker_configs.h"
#include "cluster/log_maintenance.h"
#include "cluster/metadata_cache.h"
#include "cluster/partition_manager.h"
#include "group/service.h"
#include "kafka/delayed_ops.h"
#include "kafka/dispatcher.h"
#include "kafka/fetch_sessions.h"
#include "metrics/http_endpoint.h"
#include "net/server.h"
#include "storage/log_manager.h"

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
  std::unique_ptr<cluster::partition_manager> partitions;
  // Declared before groups so it outlives the coordinator that calls it.
  std::unique_ptr<retention_watch> watch;
  std::unique_ptr<group::service> groups;
  kafka::delayed_ops delayed{clk};
  kafka::fetch_session_cache fetch_sessions;
  metrics::request_metrics requests;
  std::unique_ptr<metrics::http_endpoint> metrics_http;
  std::unique_ptr<cluster::metadata_cache> metadata;
  std::unique_ptr<cluster::log_maintenance> maintenance;  // walks partitions: after them, so it goes first
  kafka::services svc;
  std::unique_ptr<kafka::dispatcher> dispatch;
  std::unique_ptr<net::server> server;
  bool stopped = false;

  ~impl() {
    if (lock_fd >= 0) ::close(lock_fd);
  }
};

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
  SLUICE_ASSIGN_OR_RETURN(std::string cluster_id, load_cluster_id(i->fs, io::join(io::join(dir, "meta"), "cluster_id")));
  // Values changed at runtime by AlterConfigs on the broker win over the
  // file and command line (cluster/broker_configs.h).
  SLUICE_ASSIGN_OR_RETURN(auto with_dynamic, cluster::load_dynamic_broker_config(i->fs, *cfg));
  if (!with_dynamic.dynamic_default_values.empty() || !with_dynamic.dynamic_broker_values.empty()) {
    SLUICE_LOG_INFO("applying {} dynamic default and {} dynamic node broker settings from {}",
                    with_dynamic.dynamic_default_values.size(),
                    with_dynamic.dynamic_broker_values.size(), cluster::broker_configs_dir(dir));
  }
  cfg = std::make_shared<const config::broker_config>(std::move(with_dynamic));
  i->cfg = cfg;

  storage::log_manager_config lcfg;
  lcfg.data_dir = io::join(dir, "logs");
  lcfg.max_open_segment_files = static_cast<size_t>(cfg->max_open_segment_files);
  lcfg.scrub_bytes_per_second = cfg->log_scrub_bytes_per_second;
  lcfg.default_log = cluster::to_log_config(cfg->topic_defaults);
  SLUICE_ASSIGN_OR_RETURN(i->logs, storage::log_manager::open(i->fs, i->clk, lcfg));
  SLUICE_ASSIGN_OR_RETURN(i->partitions, cluster::partition_manager::open(i->fs, i->clk, cfg, *i->logs));
  i->maintenance = std::make_unique<cluster::log_maintenance>(*i->partitions, i->clk);
  i->maintenance->start();
  // The coordinator replays __consumer_offsets on its own thread; until
  // then group requests get COORDINATOR_LOAD_IN_PROGRESS.
  SLUICE_ASSIGN_OR_RETURN(i->groups, group::service::open(*i->partitions, i->clk, *cfg));
  // The watch observes committed offsets from the first live commit on, so
  // it is wired before the coordinator's thread starts.
  i->watch = std::make_unique<retention_watch>(*i->partitions, &i->groups->coordinator(), i->clk,
                                               cfg->write_rate_window_ms);
  i->groups->coordinator().set_offset_observer(
      [w = i->watch.get()](const std::string& g, const std::string& t, int32_t p, int64_t prev) {
        w->on_offset_replaced(g, t, p, prev);
      });
  // A deleted topic's committed offsets go with it (Kafka's
  // onPartitionsDeleted).
  i->partitions->on_topic_deleted(
      [c = &i->groups->coordinator()](const std::string& topic) { c->delete_topic_offsets(topic); });
  i->watch->start();
  i->groups->start();

  i->metadata = std::make_unique<cluster::metadata_cache>(*i->partitions, cfg->node_id, cluster_id);
  i->svc.partitions = i->partitions.get();
  i->svc.metadata = i->metadata.get();
  i->svc.clk = &i->clk;
  i->svc.delayed = &i->delayed;
  i->svc.fetch_sessions = &i->fetch_sessions;
  i->svc.requests = &i->requests;
  i->svc.groups = &i->groups->coordinator();
  i->svc.fs = &i->fs;
  i->svc.node_id = cfg->node_id;
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
  if (cfg->metrics_listener) {
    // Metrics are for the operator; a port that cannot be bound is logged
    // and the broker serves Kafka clients all the same.
    auto* raw = i.get();
    i->metrics_http = std::make_unique<metrics::http_endpoint>([raw] {
      return render_metrics(
          {raw->partitions.get(), &raw->server->metrics(), &raw->requests, raw->watch.get(), raw->logs.get()});
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
  SLUICE_LOG_INFO("shutting down: answering requests in flight");
  if (impl_->metrics_http) impl_->metrics_http->stop();
  impl_->delayed.drain();
  impl_->groups->coordinator().unload();
  impl_->server->stop();
  impl_->delayed.stop();
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
