// librdkafka's C++ client against a real `sluice serve`: a producer with acks
// 0, 1 and all (the last with enable.idempotence=true) writes many keyed
// messages over 8 partitions; a consumer reads every partition to its end and
// checks that every acknowledged message arrived exactly once, at the offset
// its delivery report gave, and that each key's messages kept their order on
// one partition.
//
// The broker is started here by fork/exec of the binary named by the
// SLUICE_BIN environment variable (ctest sets it; the build's own path is the
// fallback) on a free loopback port with a temporary data directory, and is
// stopped by its pid with SIGTERM, which must end it with status 0.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <librdkafka/rdkafkacpp.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "base/clock.h"

namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

constexpr int partitions = 8;

int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    if (fd >= 0) ::close(fd);
    return -1;
  }
  ::close(fd);
  return ntohs(a.sin_port);
}

bool can_connect(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

std::string sluice_bin() {
  if (const char* e = std::getenv("SLUICE_BIN"); e && *e) return e;
  return SLUICE_BIN_DEFAULT;
}

// One broker process with its own port and data directory. Owns both: the
// destructor kills the process if it still runs and removes the directory.
class broker_process {
 public:
  broker_process() {
    char tmpl[] = "/tmp/sluice-rdkafka-XXXXXX";
    const char* d = ::mkdtemp(tmpl);
    if (d == nullptr) return;
    dir_ = d;
    port_ = free_port();
  }
  broker_process(const broker_process&) = delete;
  broker_process& operator=(const broker_process&) = delete;
  ~broker_process() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }

  // Starts `sluice serve` with `extra` settings; true once it accepts connections.
  bool start(const std::vector<std::string>& extra) {
    if (dir_.empty() || port_ <= 0) return false;
    // No metrics endpoint: its default port is fixed, and tests bind only
    // free ones.
    std::vector<std::string> args = {sluice_bin(),
                                     "serve",
                                     "--listeners",
                                     bootstrap(),
                                     "--log.dirs",
                                     (fs::path(dir_) / "data").string(),
                                     "--sluice.metrics.listener",
                                     ""};
    args.insert(args.end(), extra.begin(), extra.end());
    const std::string log = log_path();
    pid_ = ::fork();
    if (pid_ < 0) return false;
    if (pid_ == 0) {
      int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (fd >= 0) {
        ::dup2(fd, 1);
        ::dup2(fd, 2);
      }
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    const sluice::deadline until(30'000, sluice::clock::system());
    while (!until.passed()) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return false;
      }
      if (can_connect(port_)) return true;
      std::this_thread::sleep_for(50ms);
    }
    return false;
  }

  // SIGTERM, then waits up to 30 s; returns the exit status (-1 if it had to be killed).
  int stop() {
    if (pid_ <= 0) return -1;
    ::kill(pid_, SIGTERM);
    const sluice::deadline until(30'000, sluice::clock::system());
    int status = 0;
    while (!until.passed()) {
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(20ms);
    }
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
    return -1;
  }

  std::string bootstrap() const { return "127.0.0.1:" + std::to_string(port_); }
  std::string log_path() const { return (fs::path(dir_) / "sluice.log").string(); }
  std::string log_text() const {
    std::ifstream f(log_path());
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }

 private:
  std::string dir_;
  int port_ = -1;
  pid_t pid_ = -1;
};

struct delivered {
  std::string key;
  std::string value;
  int32_t partition;
  int64_t offset;
};

// Collects delivery reports; called from the producer's poll() on this thread.
class report_collector : public RdKafka::DeliveryReportCb {
 public:
  void dr_cb(RdKafka::Message& m) override {
    if (m.err() != RdKafka::ERR_NO_ERROR) {
      ++failed;
      last_error = m.errstr();
      return;
    }
    ok.push_back({m.key() ? *m.key() : std::string(),
                  std::string(static_cast<const char*>(m.payload()), m.len()), m.partition(), m.offset()});
  }
  std::vector<delivered> ok;
  int failed = 0;
  std::string last_error;
};

std::unique_ptr<RdKafka::Conf> make_conf(const std::map<std::string, std::string>& settings) {
  std::unique_ptr<RdKafka::Conf> conf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
  std::string err;
  for (const auto& [k, v] : settings) {
    EXPECT_EQ(conf->set(k, v, err), RdKafka::Conf::CONF_OK) << k << ": " << err;
  }
  return conf;
}

// Produces `count` messages over `keys` keys; value "key/seq" where seq counts
// per key. Returns the delivery reports.
report_collector produce(const std::string& bootstrap, const std::string& topic,
                         const std::map<std::string, std::string>& extra, int count, int keys) {
  report_collector reports;
  std::map<std::string, std::string> settings = {{"bootstrap.servers", bootstrap},
                                                 {"linger.ms", "5"},
                                                 {"message.timeout.ms", "30000"}};
  for (const auto& [k, v] : extra) settings[k] = v;
  auto conf = make_conf(settings);
  std::string err;
  EXPECT_EQ(conf->set("dr_cb", static_cast<RdKafka::DeliveryReportCb*>(&reports), err), RdKafka::Conf::CONF_OK);
  std::unique_ptr<RdKafka::Producer> p(RdKafka::Producer::create(conf.get(), err));
  EXPECT_TRUE(p) << err;
  if (!p) return reports;
  std::vector<int> seq(static_cast<size_t>(keys), 0);
  for (int i = 0; i < count; ++i) {
    const int k = (i * 7919) % keys;  // keys interleaved, not in runs
    const std::string key = "key-" + std::to_string(k);
    const std::string value = key + "/" + std::to_string(seq[static_cast<size_t>(k)]++);
    for (;;) {
      auto rc = p->produce(topic, RdKafka::Topic::PARTITION_UA, RdKafka::Producer::RK_MSG_COPY,
                           const_cast<char*>(value.data()), value.size(), key.data(), key.size(), 0, nullptr);
      if (rc == RdKafka::ERR_NO_ERROR) break;
      EXPECT_EQ(rc, RdKafka::ERR__QUEUE_FULL) << RdKafka::err2str(rc);
      if (rc != RdKafka::ERR__QUEUE_FULL) return reports;
      p->poll(10);
    }
    p->poll(0);
  }
  EXPECT_EQ(p->flush(60000), RdKafka::ERR_NO_ERROR) << "producer did not drain in 60 s";
  return reports;
}

struct consumed {
  std::string key;
  std::string value;
  int64_t offset;
};

// Reads every partition of `topic` from the beginning to its end with the
// simple (group-less) consumer; Sluice has no consumer groups yet.
std::map<int32_t, std::vector<consumed>> consume_all(const std::string& bootstrap, const std::string& topic,
                                                     size_t expected_total) {
  std::map<int32_t, std::vector<consumed>> out;
  auto conf = make_conf({{"bootstrap.servers", bootstrap}, {"enable.partition.eof", "true"}});
  std::string err;
  std::unique_ptr<RdKafka::Consumer> c(RdKafka::Consumer::create(conf.get(), err));
  EXPECT_TRUE(c) << err;
  if (!c) return out;
  std::unique_ptr<RdKafka::Topic> t(RdKafka::Topic::create(c.get(), topic, nullptr, err));
  EXPECT_TRUE(t) << err;
  std::unique_ptr<RdKafka::Queue> q(RdKafka::Queue::create(c.get()));
  for (int32_t p = 0; p < partitions; ++p) {
    EXPECT_EQ(c->start(t.get(), p, RdKafka::Topic::OFFSET_BEGINNING, q.get()), RdKafka::ERR_NO_ERROR);
  }
  std::set<int32_t> at_eof;
  size_t total = 0;
  const sluice::deadline until(60'000, sluice::clock::system());
  while (!until.passed()) {
    std::unique_ptr<RdKafka::Message> m(c->consume(q.get(), 200));
    if (!m) continue;
    if (m->err() == RdKafka::ERR__PARTITION_EOF) {
      at_eof.insert(m->partition());
      if (static_cast<int>(at_eof.size()) == partitions && total >= expected_total) break;
      continue;
    }
    if (m->err() == RdKafka::ERR__TIMED_OUT) continue;
    EXPECT_EQ(m->err(), RdKafka::ERR_NO_ERROR) << m->errstr();
    if (m->err() != RdKafka::ERR_NO_ERROR) continue;
    at_eof.erase(m->partition());
    out[m->partition()].push_back({m->key() ? *m->key() : std::string(),
                                   std::string(static_cast<const char*>(m->payload()), m->len()), m->offset()});
    ++total;
  }
  EXPECT_EQ(static_cast<int>(at_eof.size()), partitions) << "not every partition reached its end in 60 s";
  for (int32_t p = 0; p < partitions; ++p) c->stop(t.get(), p);
  return out;
}

class rdkafka_client : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(broker_.start({"--num.partitions", std::to_string(partitions)})) << broker_.log_text();
  }
  void TearDown() override {
    EXPECT_EQ(broker_.stop(), 0) << "broker did not exit 0 on SIGTERM:\n" << broker_.log_text();
  }
  broker_process broker_;
};

TEST_P(rdkafka_client, every_acknowledged_message_is_consumed_once_in_key_order) {
  const std::string acks = GetParam();
  const std::string topic = "rdkafka-acks-" + acks;
  constexpr int count = 20000;
  constexpr int keys = 300;
  std::map<std::string, std::string> extra = {{"acks", acks}};
  if (acks == "all") {
    extra["enable.idempotence"] = "true";
    extra["max.in.flight.requests.per.connection"] = "5";
  }
  report_collector reports = produce(broker_.bootstrap(), topic, extra, count, keys);
  ASSERT_EQ(reports.failed, 0) << "deliveries failed, last: " << reports.last_error;
  ASSERT_EQ(static_cast<int>(reports.ok.size()), count);

  auto by_partition = consume_all(broker_.bootstrap(), topic, reports.ok.size());

  // Every partition got data (300 keys over 8 partitions), offsets are dense
  // from 0, each key lives on one partition and its sequence numbers come back
  // 0, 1, 2, ... in order: nothing lost, duplicated or reordered.
  size_t total = 0;
  std::map<std::string, int32_t> key_partition;
  std::map<std::string, int> next_seq;
  std::map<std::pair<int32_t, int64_t>, std::string> at_offset;
  for (const auto& [p, msgs] : by_partition) {
    for (size_t i = 0; i < msgs.size(); ++i) {
      const consumed& m = msgs[i];
      ASSERT_EQ(m.offset, static_cast<int64_t>(i)) << "partition " << p << " has a gap or duplicate";
      auto [it, fresh] = key_partition.emplace(m.key, p);
      ASSERT_EQ(it->second, p) << "key " << m.key << " on partitions " << it->second << " and " << p;
      const std::string expect = m.key + "/" + std::to_string(next_seq[m.key]++);
      ASSERT_EQ(m.value, expect) << "partition " << p << " offset " << m.offset;
      at_offset[{p, m.offset}] = m.value;
    }
    total += msgs.size();
  }
  EXPECT_EQ(by_partition.size(), static_cast<size_t>(partitions));
  EXPECT_EQ(total, static_cast<size_t>(count));
  EXPECT_EQ(key_partition.size(), static_cast<size_t>(keys));

  // With acks 1 and all the delivery report's offset is where the message is.
  if (acks != "0") {
    for (const delivered& d : reports.ok) {
      auto it = at_offset.find({d.partition, d.offset});
      ASSERT_NE(it, at_offset.end()) << d.value << " acknowledged at " << d.partition << "/" << d.offset;
      ASSERT_EQ(it->second, d.value);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(acks, rdkafka_client, ::testing::Values("0", "1", "all"),
                         [](const auto& info) { return std::string("acks_") + info.param; });

}  // namespace
