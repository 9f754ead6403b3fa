// The librdkafka plumbing and the broker child process the broker and group
// benchmarks share (see kafka_util.h).

#include "kafka_util.h"

#include <filesystem>
#include <thread>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "report.h"

namespace sluice::bench {

namespace fs = std::filesystem;

void set(rd_kafka_conf_t* c, const std::string& k, const std::string& v) {
  char err[512];
  if (rd_kafka_conf_set(c, k.c_str(), v.c_str(), err, sizeof err) != RD_KAFKA_CONF_OK) {
    rd_kafka_conf_destroy(c);
    throw bench_error{"librdkafka property " + k + "=" + v + ": " + err};
  }
}

void set_all(rd_kafka_conf_t* c, const std::vector<std::string>& kvs) {
  for (const auto& kv : kvs) {
    auto eq = kv.find('=');
    if (eq == std::string::npos) {
      rd_kafka_conf_destroy(c);
      throw bench_error{"property " + kv + " is not KEY=VALUE"};
    }
    set(c, kv.substr(0, eq), kv.substr(eq + 1));
  }
}

client_ptr make_client(rd_kafka_type_t type, rd_kafka_conf_t* c) {
  char err[512];
  rd_kafka_t* rk = rd_kafka_new(type, c, err, sizeof err);
  if (!rk) {
    rd_kafka_conf_destroy(c);
    throw bench_error{std::string("rd_kafka_new: ") + err};
  }
  return client_ptr(rk);
}

rd_kafka_conf_t* base_conf(const std::string& bootstrap) {
  rd_kafka_conf_t* c = rd_kafka_conf_new();
  set(c, "bootstrap.servers", bootstrap);
  set(c, "log_level", "3");
  return c;
}

// ---- The broker process (with --start) ------------------------------------

uint16_t free_port() {
  int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (s < 0 || ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    if (s >= 0) ::close(s);
    throw bench_error{"no free loopback port"};
  }
  ::close(s);
  return ntohs(a.sin_port);
}

bool port_open(uint16_t port) {
  int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  bool ok = ::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(s);
  return ok;
}

broker_process::broker_process(const std::string& binary, const std::string& parent_dir,
                               const std::vector<std::string>& args) {
  std::string bin = binary;
  if (bin.empty()) {
    std::error_code ec;
    bin = (fs::read_symlink("/proc/self/exe", ec).parent_path() / "sluice").string();
  }
  root_ = parent_dir + "/sluice-bench-broker-" + std::to_string(::getpid());
  data_ = root_ + "/data";
  fs::create_directories(data_);
  port_ = free_port();
  std::vector<std::string> argv = {bin, "serve", "--listeners",
                                   "127.0.0.1:" + std::to_string(port_), "--log.dirs", data_,
                                   // No metrics endpoint on its fixed default port (the bench reads
                                   // /proc); a --broker-arg given below still wins.
                                   "--sluice.metrics.listener", ""};
  for (const auto& kv : args) {
    auto eq = kv.find('=');
    if (eq == std::string::npos) throw bench_error{"--broker-arg " + kv + " is not KEY=VALUE"};
    argv.push_back("--" + kv.substr(0, eq));
    argv.push_back(kv.substr(eq + 1));
  }
  const std::string log_path = root_ + "/broker.log";
  pid_ = ::fork();
  if (pid_ < 0) throw bench_error{"fork failed"};
  if (pid_ == 0) {
    int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    std::vector<char*> cargv;
    for (auto& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    ::execv(cargv[0], cargv.data());
    std::_Exit(127);
  }
  const int64_t deadline = now_ns() + 20'000'000'000;
  while (!port_open(port_)) {
    int st = 0;
    if (::waitpid(pid_, &st, WNOHANG) == pid_) {
      pid_ = 0;
      throw bench_error{"the broker exited at start; see " + log_path};
    }
    if (now_ns() > deadline)
      throw bench_error{"the broker did not listen within 20 s; see " + log_path};
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

broker_process::~broker_process() {
  if (pid_ > 0) {
    ::kill(pid_, SIGTERM);
    const int64_t deadline = now_ns() + 30'000'000'000;
    int st = 0;
    while (::waitpid(pid_, &st, WNOHANG) == 0) {
      if (now_ns() > deadline) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &st, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  std::error_code ec;
  fs::remove_all(root_, ec);
}

broker_handle open_broker(const broker_target& t) {
  if (t.start == !t.bootstrap.empty())
    throw bench_error{"give exactly one of --bootstrap and --start"};
  broker_handle h;
  if (!t.start) {
    h.bootstrap = t.bootstrap;
    h.pid = t.broker_pid;
    h.data_dir = t.dir;
    return h;
  }
  h.process = std::make_unique<broker_process>(t.sluice_path, t.dir, t.broker_args);
  h.bootstrap = h.process->bootstrap();
  h.pid = h.process->pid();
  h.data_dir = h.process->data_dir();
  return h;
}

// ---- Topic administration ---------------------------------------------------

event_ptr admin_wait(rd_kafka_queue_t* q, rd_kafka_event_type_t type) {
  const int64_t deadline = now_ns() + 60'000'000'000;
  while (now_ns() < deadline) {
    event_ptr ev(rd_kafka_queue_poll(q, 1000));
    if (ev && rd_kafka_event_type(ev.get()) == type) return ev;
  }
  throw bench_error{"admin request timed out"};
}

void check_create_topics(rd_kafka_event_t* ev) {
  if (rd_kafka_event_error(ev)) throw bench_error{std::string("CreateTopics: ") + rd_kafka_event_error_string(ev)};
  size_t n = 0;
  const rd_kafka_topic_result_t** res = rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev), &n);
  for (size_t i = 0; i < n; ++i)
    if (rd_kafka_topic_result_error(res[i]))
      throw bench_error{std::string("CreateTopics ") + rd_kafka_topic_result_name(res[i]) + ": " +
                        (rd_kafka_topic_result_error_string(res[i]) ? rd_kafka_topic_result_error_string(res[i])
                                                                    : "error")};
}

void create_topic(const std::string& bootstrap, const std::string& topic, int partitions,
                  const config_list& configs, int replication_factor) {
  client_ptr rk = make_client(RD_KAFKA_PRODUCER, base_conf(bootstrap));
  char err[512];
  rd_kafka_NewTopic_t* nt =
      rd_kafka_NewTopic_new(topic.c_str(), partitions, replication_factor, err, sizeof err);
  if (!nt) throw bench_error{std::string("NewTopic: ") + err};
  for (const auto& [k, v] : configs) {
    if (auto e = rd_kafka_NewTopic_set_config(nt, k.c_str(), v.c_str())) {
      rd_kafka_NewTopic_destroy(nt);
      throw bench_error{"NewTopic config " + k + ": " + rd_kafka_err2str(e)};
    }
  }
  queue_ptr q(rd_kafka_queue_new(rk.get()));
  // librdkafka answers "Failed while waiting for controller" (_TIMED_OUT)
  // when no broker named the controller within its request timeout: on a
  // busy machine a cluster that just started may take that long. Asked
  // again (a topic an earlier attempt created is then TOPIC_ALREADY_EXISTS,
  // which is success here), for at most three minutes.
  const int64_t give_up = now_ns() + 180'000'000'000;
  for (int attempt = 1;; ++attempt) {
    rd_kafka_CreateTopics(rk.get(), &nt, 1, nullptr, q.get());
    event_ptr ev = admin_wait(q.get(), RD_KAFKA_EVENT_CREATETOPICS_RESULT);
    if (rd_kafka_event_error(ev.get()) == RD_KAFKA_RESP_ERR__TIMED_OUT && now_ns() < give_up) {
      std::fprintf(stderr, "CreateTopics %s: %s (attempt %d); asking again\n", topic.c_str(),
                   rd_kafka_event_error_string(ev.get()), attempt);
      continue;
    }
    size_t n = 0;
    const rd_kafka_topic_result_t** res =
        rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev.get()), &n);
    if (attempt > 1 && !rd_kafka_event_error(ev.get()) && n == 1 &&
        rd_kafka_topic_result_error(res[0]) == RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS)
      break;
    check_create_topics(ev.get());
    break;
  }
  rd_kafka_NewTopic_destroy(nt);
  // Wait until every partition has a leader in the metadata.
  const int64_t deadline = now_ns() + 30'000'000'000;
  for (;;) {
    rd_kafka_topic_t* t = rd_kafka_topic_new(rk.get(), topic.c_str(), nullptr);
    const rd_kafka_metadata_t* md = nullptr;
    bool ready = false;
    if (rd_kafka_metadata(rk.get(), 0, t, &md, 5000) == RD_KAFKA_RESP_ERR_NO_ERROR &&
        md->topic_cnt == 1 && !md->topics[0].err && md->topics[0].partition_cnt == partitions) {
      ready = true;
      for (int i = 0; i < partitions; ++i) ready = ready && md->topics[0].partitions[i].leader >= 0;
    }
    if (md) rd_kafka_metadata_destroy(md);
    rd_kafka_topic_destroy(t);
    if (ready) return;
    if (now_ns() > deadline) throw bench_error{"topic " + topic + " has no leaders after 30 s"};
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

void alter_topic_configs(const std::string& bootstrap, const std::string& topic,
                         const config_list& configs) {
  client_ptr rk = make_client(RD_KAFKA_PRODUCER, base_conf(bootstrap));
  rd_kafka_ConfigResource_t* res =
      rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_TOPIC, topic.c_str());
  for (const auto& [k, v] : configs) {
    if (auto e = rd_kafka_ConfigResource_set_config(res, k.c_str(), v.c_str())) {
      rd_kafka_ConfigResource_destroy(res);
      throw bench_error{"AlterConfigs " + k + ": " + rd_kafka_err2str(e)};
    }
  }
  queue_ptr q(rd_kafka_queue_new(rk.get()));
  rd_kafka_AlterConfigs(rk.get(), &res, 1, nullptr, q.get());
  rd_kafka_ConfigResource_destroy(res);
  event_ptr ev = admin_wait(q.get(), RD_KAFKA_EVENT_ALTERCONFIGS_RESULT);
  if (rd_kafka_event_error(ev.get()))
    throw bench_error{std::string("AlterConfigs: ") + rd_kafka_event_error_string(ev.get())};
  size_t n = 0;
  const rd_kafka_ConfigResource_t** rs =
      rd_kafka_AlterConfigs_result_resources(rd_kafka_event_AlterConfigs_result(ev.get()), &n);
  for (size_t i = 0; i < n; ++i)
    if (rd_kafka_ConfigResource_error(rs[i]))
      throw bench_error{"AlterConfigs " + topic + ": " +
                        (rd_kafka_ConfigResource_error_string(rs[i])
                             ? rd_kafka_ConfigResource_error_string(rs[i])
                             : "error")};
}

void delete_topic(const std::string& bootstrap, const std::string& topic) {
  try {
    client_ptr rk = make_client(RD_KAFKA_PRODUCER, base_conf(bootstrap));
    rd_kafka_DeleteTopic_t* dt = rd_kafka_DeleteTopic_new(topic.c_str());
    queue_ptr q(rd_kafka_queue_new(rk.get()));
    rd_kafka_DeleteTopics(rk.get(), &dt, 1, nullptr, q.get());
    rd_kafka_DeleteTopic_destroy(dt);
    admin_wait(q.get(), RD_KAFKA_EVENT_DELETETOPICS_RESULT);
  } catch (const bench_error&) {
    // Best effort: a leftover topic only costs disk space.
  }
}

std::string broker_config_value(const std::string& bootstrap, const std::string& key) {
  try {
    client_ptr rk = make_client(RD_KAFKA_PRODUCER, base_conf(bootstrap));
    const rd_kafka_metadata_t* md = nullptr;
    if (rd_kafka_metadata(rk.get(), 0, nullptr, &md, 10000) != RD_KAFKA_RESP_ERR_NO_ERROR)
      return {};
    const int32_t id = md->broker_cnt > 0 ? md->brokers[0].id : -1;
    rd_kafka_metadata_destroy(md);
    if (id < 0) return {};
    rd_kafka_ConfigResource_t* res =
        rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_BROKER, std::to_string(id).c_str());
    queue_ptr q(rd_kafka_queue_new(rk.get()));
    rd_kafka_DescribeConfigs(rk.get(), &res, 1, nullptr, q.get());
    rd_kafka_ConfigResource_destroy(res);
    event_ptr ev = admin_wait(q.get(), RD_KAFKA_EVENT_DESCRIBECONFIGS_RESULT);
    if (rd_kafka_event_error(ev.get())) return {};
    size_t n = 0;
    const rd_kafka_ConfigResource_t** rs = rd_kafka_DescribeConfigs_result_resources(
        rd_kafka_event_DescribeConfigs_result(ev.get()), &n);
    for (size_t i = 0; i < n; ++i) {
      size_t m = 0;
      const rd_kafka_ConfigEntry_t** entries = rd_kafka_ConfigResource_configs(rs[i], &m);
      for (size_t j = 0; j < m; ++j) {
        if (key == rd_kafka_ConfigEntry_name(entries[j])) {
          const char* v = rd_kafka_ConfigEntry_value(entries[j]);
          return v ? v : "";
        }
      }
    }
  } catch (const bench_error&) {
  }
  return {};
}

}  // namespace sluice::bench
