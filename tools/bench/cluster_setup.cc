// The cluster the `cluster`, `restart` and `txn` modes start (see
// cluster_setup.h): etcd members and brokers as child processes.

#include "cluster_setup.h"

#include <filesystem>
#include <thread>

#include <arpa/inet.h>
#include <librdkafka/rdkafka.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "kafka_util.h"
#include "report.h"

namespace sluice::bench {

namespace fs = std::filesystem;

namespace {

std::atomic<bool> g_interrupted{false};

void on_signal(int) {
  g_interrupted = true;
}

// True if etcd on 127.0.0.1:port answers GET /health with "true" (it has a
// leader) within a second.
bool etcd_healthy(uint16_t port) {
  int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return false;
  timeval tv{1, 0};
  ::setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  std::string answer;
  if (::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    const std::string req = "GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (::send(s, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size())) {
      char buf[4096];
      for (ssize_t n; (n = ::recv(s, buf, sizeof buf, 0)) > 0;)
        answer.append(buf, static_cast<size_t>(n));
    }
  }
  ::close(s);
  return answer.find("\"health\":\"true\"") != std::string::npos;
}

}  // namespace

void catch_interrupts() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
}

const std::atomic<bool>& interrupted() {
  return g_interrupted;
}

void check_interrupted() {
  if (g_interrupted.load()) throw bench_error{"interrupted"};
}

temp_root::temp_root(const std::string& parent)
    : path(parent + "/sluice-bench-cluster-" + std::to_string(::getpid())) {
  std::error_code ec;
  fs::remove_all(path, ec);
  fs::create_directories(path);
}

temp_root::~temp_root() {
  std::error_code ec;
  fs::remove_all(path, ec);
}

etcd_cluster::etcd_cluster(const std::string& binary, const std::string& root) {
  if (::access(binary.c_str(), X_OK) != 0)
    throw bench_error{binary +
                      " not found: install etcd-server (scripts/install-deps.sh) or "
                      "give --etcd PATH"};
  std::vector<uint16_t> client, peer;
  std::string initial;
  for (int i = 0; i < kClusterServers; ++i) {
    client.push_back(free_port());
    peer.push_back(free_port());
    initial += (i ? "," : "") + std::string("m") + std::to_string(i) +
               "=http://127.0.0.1:" + std::to_string(peer.back());
  }
  for (int i = 0; i < kClusterServers; ++i) {
    const auto c = "http://127.0.0.1:" + std::to_string(client[static_cast<size_t>(i)]);
    const auto p = "http://127.0.0.1:" + std::to_string(peer[static_cast<size_t>(i)]);
    const std::string name = "m" + std::to_string(i);
    members_.push_back(std::make_unique<child_process>(
        std::vector<std::string>{binary,
                                 "--name",
                                 name,
                                 "--data-dir",
                                 root + "/etcd-" + name,
                                 "--listen-client-urls",
                                 c,
                                 "--advertise-client-urls",
                                 c,
                                 "--listen-peer-urls",
                                 p,
                                 "--initial-advertise-peer-urls",
                                 p,
                                 "--initial-cluster",
                                 initial,
                                 "--initial-cluster-state",
                                 "new",
                                 "--initial-cluster-token",
                                 "sluice-bench-" + std::to_string(::getpid()),
                                 "--heartbeat-interval",
                                 "50",
                                 "--election-timeout",
                                 "500",
                                 "--log-level",
                                 "warn"},
        root + "/etcd-" + name + ".log"));
    members_.back()->start();
    endpoints_ += (i ? "," : "") + c;
  }
  const int64_t deadline = now_ns() + 30'000'000'000;
  for (int i = 0; i < kClusterServers; ++i) {
    auto& m = *members_[static_cast<size_t>(i)];
    m.wait_listening(client[static_cast<size_t>(i)], 30);
    while (!etcd_healthy(client[static_cast<size_t>(i)])) {
      check_interrupted();
      if (!m.running() || now_ns() > deadline)
        throw bench_error{"etcd member m" + std::to_string(i) +
                          " not healthy within 30 s; its log ends:\n" + m.log_tail()};
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
}

etcd_cluster::~etcd_cluster() {
  for (auto it = members_.rbegin(); it != members_.rend(); ++it) (*it)->stop(SIGTERM);
}

sluice_cluster::sluice_cluster(const sluice_cluster_options& o, const std::string& root,
                               const std::string& etcd) {
  std::string bin = o.sluice_path;
  if (bin.empty()) {
    std::error_code ec;
    bin = (fs::read_symlink("/proc/self/exe", ec).parent_path() / "sluice").string();
  }
  if (::access(bin.c_str(), X_OK) != 0)
    throw bench_error{bin + " not found: build the sluice target or give --sluice PATH"};
  for (int id = 1; id <= kClusterServers; ++id) {
    const uint16_t port = free_port();
    const std::string data = root + "/broker-" + std::to_string(id);
    fs::create_directories(data);
    std::vector<std::string> argv = {bin,
                                     "serve",
                                     "--node.id",
                                     std::to_string(id),
                                     "--listeners",
                                     "PLAINTEXT://127.0.0.1:" + std::to_string(port),
                                     "--log.dirs",
                                     data,
                                     "--sluice.metrics.listener",
                                     "",
                                     "--sluice.etcd.endpoints",
                                     etcd,
                                     "--sluice.etcd.session.timeout.ms",
                                     std::to_string(o.session_timeout_ms)};
    for (const auto& kv : o.broker_args) {
      auto eq = kv.find('=');
      if (eq == std::string::npos) throw bench_error{"--broker-arg " + kv + " is not KEY=VALUE"};
      argv.push_back("--" + kv.substr(0, eq));
      argv.push_back(kv.substr(eq + 1));
    }
    ports_.push_back(port);
    data_dirs_.push_back(data);
    brokers_.push_back(std::make_unique<child_process>(argv, data + ".log"));
    brokers_.back()->start();
  }
  for (int id = 1; id <= kClusterServers; ++id) wait_listening(id);
  wait_all_registered(60);
}

sluice_cluster::~sluice_cluster() {
  for (auto it = brokers_.rbegin(); it != brokers_.rend(); ++it) (*it)->stop(SIGTERM);
}

std::string sluice_cluster::bootstrap() const {
  std::string out;
  for (auto p : ports_)
    out += (out.empty() ? "" : ",") + std::string("127.0.0.1:") + std::to_string(p);
  return out;
}

std::vector<pid_t> sluice_cluster::pids() const {
  std::vector<pid_t> out;
  for (const auto& b : brokers_) out.push_back(b->pid());
  return out;
}

void sluice_cluster::wait_listening(int id) const {
  brokers_[static_cast<size_t>(id - 1)]->wait_listening(ports_[static_cast<size_t>(id - 1)], 90);
}

void sluice_cluster::wait_all_registered(double seconds) const {
  client_ptr rk = make_client(RD_KAFKA_PRODUCER, base_conf(bootstrap()));
  const int64_t deadline = now_ns() + static_cast<int64_t>(seconds * 1e9);
  for (;;) {
    check_interrupted();
    const rd_kafka_metadata_t* md = nullptr;
    int n = 0;
    if (rd_kafka_metadata(rk.get(), 0, nullptr, &md, 2000) == RD_KAFKA_RESP_ERR_NO_ERROR)
      n = md->broker_cnt;
    if (md) rd_kafka_metadata_destroy(md);
    if (n == kClusterServers) return;
    if (now_ns() > deadline)
      throw bench_error{"Metadata lists " + std::to_string(n) + " of " +
                        std::to_string(kClusterServers) + " brokers after " + fixed(seconds, 0) +
                        " s; see the logs in " +
                        fs::path(brokers_.front()->log_path()).parent_path().string()};
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

int sluice_cluster::leader_of(const std::string& topic, int partition) const {
  client_ptr rk = make_client(RD_KAFKA_PRODUCER, base_conf(bootstrap()));
  rd_kafka_topic_t* t = rd_kafka_topic_new(rk.get(), topic.c_str(), nullptr);
  const rd_kafka_metadata_t* md = nullptr;
  int leader = -1;
  if (rd_kafka_metadata(rk.get(), 0, t, &md, 5000) == RD_KAFKA_RESP_ERR_NO_ERROR &&
      md->topic_cnt == 1)
    for (int i = 0; i < md->topics[0].partition_cnt; ++i)
      if (md->topics[0].partitions[i].id == partition) leader = md->topics[0].partitions[i].leader;
  if (md) rd_kafka_metadata_destroy(md);
  rd_kafka_topic_destroy(t);
  return leader;
}

std::vector<uint64_t> sluice_cluster::topic_log_bytes(const std::string& topic) const {
  std::vector<uint64_t> out;
  for (const auto& dir : data_dirs_) {
    uint64_t sum = 0;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir + "/logs", ec)) {
      const std::string name = e.path().filename().string();
      if (!e.is_directory() || name.size() <= topic.size() + 1 ||
          name.compare(0, topic.size() + 1, topic + "-") != 0 ||
          name.find_first_not_of("0123456789", topic.size() + 1) != std::string::npos)
        continue;
      for (const auto& f : fs::directory_iterator(e.path(), ec))
        if (f.is_regular_file() && f.path().extension() == ".log") sum += f.file_size(ec);
    }
    out.push_back(sum);
  }
  return out;
}

}  // namespace sluice::bench
