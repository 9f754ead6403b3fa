// The broker in-process, driven with the project's own codec over a real
// loopback socket: behaviour that real clients rarely exercise (incremental
// fetch sessions, duplicate idempotent batches, long polls, error codes).

#include "broker/broker.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/endian.h"
#include "base/java_hash.h"
#include "kafka/dispatcher.h"
#include "protocol/frame.h"
#include "protocol/records/control.h"
#include "protocol/records/record_batch.h"

namespace sluice::broker {
namespace {

namespace pr = protocol::records;

class client {
 public:
  explicit client(uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  }
  ~client() { ::close(fd_); }

  template <class Req>
  void send(const Req& req, int16_t version) {
    auto rc = protocol::encode_request(++corr_, version, req);
    auto bytes = rc.flatten();
    ASSERT_TRUE(bytes.ok());
    ASSERT_EQ(::write(fd_, bytes->data(), bytes->size()), static_cast<ssize_t>(bytes->size()));
  }

  // Reads one response frame and decodes it as Resp (header version by the
  // codec's rule).
  template <class Resp>
  Resp receive(int16_t version) {
    uint8_t len[4];
    read_exact(len, 4);
    std::vector<uint8_t> frame(load_be<int32_t>(len));
    read_exact(frame.data(), frame.size());
    protocol::reader r(frame);
    protocol::response_header h;
    h.read(r, protocol::response_header_version(Resp::api_key, version));
    EXPECT_EQ(h.correlation_id, corr_);
    Resp resp;
    resp.read(r, version);
    EXPECT_TRUE(r.ok()) << r.to_status().err().message;
    last_frame_ = std::move(frame);  // record views point into it
    return resp;
  }

  template <class Resp, class Req>
  Resp call(const Req& req, int16_t version) {
    send(req, version);
    return receive<Resp>(version);
  }

  // True when the peer closed the connection.
  bool closed() {
    uint8_t b;
    timeval tv{5, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return ::read(fd_, &b, 1) == 0;
  }

  int fd() const { return fd_; }

 private:
  void read_exact(uint8_t* p, size_t n) {
    size_t got = 0;
    while (got < n) {
      ssize_t r = ::read(fd_, p + got, n - got);
      ASSERT_GT(r, 0) << "connection closed";
      got += static_cast<size_t>(r);
    }
  }
  int fd_;
  int32_t corr_ = 0;
  std::vector<uint8_t> last_frame_;
};

// One batch whose records carry exactly these timestamps.
std::vector<uint8_t> batch_with_timestamps(const std::vector<int64_t>& ts, int64_t pid = -1,
                                           int16_t epoch = -1, int32_t seq = -1) {
  std::vector<pr::record_input> recs;
  for (int64_t t : ts) {
    pr::record_input r;
    r.value = std::vector<uint8_t>(100, 'v');
    r.timestamp_ms = t;
    recs.push_back(std::move(r));
  }
  pr::batch_options o;
  o.producer_id = pid;
  o.producer_epoch = epoch;
  o.base_sequence = seq;
  auto b = pr::build_batch(o, recs);
  EXPECT_TRUE(b.ok());
  return std::move(b).value();
}

// `n` records stamped 1,700,000,000,000 + 0, 1, 2, ... (2023).
std::vector<uint8_t> make_batch(int n, int64_t pid = -1, int16_t epoch = -1, int32_t seq = -1) {
  std::vector<int64_t> ts;
  for (int i = 0; i < n; ++i) ts.push_back(1'700'000'000'000 + i);
  return batch_with_timestamps(ts, pid, epoch, seq);
}

class BrokerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("broker_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    start();
  }
  void TearDown() override {
    if (b_) {
      ASSERT_TRUE(b_->stop().ok());
    }
    b_.reset();
    std::filesystem::remove_all(dir_);
  }
  void start() {
    // No metrics endpoint: its default port is fixed, and tests bind only
    // free ones.
    std::vector<std::string> argv{"--listeners",
                                  "127.0.0.1:0",
                                  "--log.dirs",
                                  dir_.string(),
                                  "--num.io.threads",
                                  "2",
                                  "--sluice.metrics.listener",
                                  ""};
    argv.insert(argv.end(), extra_args_.begin(), extra_args_.end());
    auto args = config::parse_serve_args(argv);
    ASSERT_TRUE(args.ok()) << args.err().message;
    auto cfg = config::load_broker_config(*args);
    ASSERT_TRUE(cfg.ok()) << cfg.err().message;
    auto b = broker::open(std::make_shared<const config::broker_config>(std::move(*cfg)));
    ASSERT_TRUE(b.ok()) << b.err().message;
    b_ = std::move(b).value();
  }
  void restart() {
    ASSERT_TRUE(b_->stop().ok());
    b_.reset();
    start();
  }
  void create(client& c, const std::string& topic, int partitions,
              std::vector<std::pair<std::string, std::string>> configs = {}) {
    protocol::create_topics_request req;
    auto& t = req.topics.emplace_back();
    t.name = topic;
    t.num_partitions = partitions;
    t.replication_factor = 1;
    for (auto& [k, v] : configs) {
      auto& c = t.configs.emplace_back();
      c.name = k;
      c.value = v;
    }
    auto resp = c.call<protocol::create_topics_response>(req, 4);
    ASSERT_EQ(resp.topics.size(), 1u);
    ASSERT_EQ(resp.topics[0].error_code, 0) << resp.topics[0].error_message.value_or("");
  }
  protocol::produce_response produce(client& c, const std::string& topic, int32_t p, std::vector<uint8_t>& batch,
                                     int16_t acks = -1) {
    protocol::produce_request req;
    req.acks = acks;
    req.timeout_ms = 30000;
    auto& t = req.topic_data.emplace_back();
    t.name = topic;
    auto& pd = t.partition_data.emplace_back();
    pd.index = p;
    pd.records = protocol::records_field::of(batch);
    return c.call<protocol::produce_response>(req, 7);
  }
  std::filesystem::path dir_;
  std::vector<std::string> extra_args_;
  std::unique_ptr<broker> b_;
};

TEST_F(BrokerTest, ApiVersionsListsWhatIsImplemented) {
  client c(b_->port());
  auto resp = c.call<protocol::api_versions_response>(protocol::api_versions_request{}, 3);
  EXPECT_EQ(resp.error_code, 0);
  bool produce = false;
  for (const auto& k : resp.api_keys) {
    if (k.api_key == 0) {
      // Advertised from v0 for librdkafka's codec detection (see
      // advertised_min_version, kafka/handlers/handlers.cc); v0-v2 requests
      // are answered UNSUPPORTED_VERSION.
      produce = true;
      EXPECT_EQ(k.min_version, 0);
      EXPECT_EQ(k.max_version, 12);
    }
    if (k.api_key == 1) {
      EXPECT_EQ(k.min_version, 4);
    }
  }
  EXPECT_TRUE(produce);
  // Exactly the dispatcher's table (which handlers_doc_test holds to
  // docs/protocol.md), each at its advertised range.
  std::map<int16_t, std::pair<int16_t, int16_t>> advertised, served;
  for (const auto& k : resp.api_keys) {
    EXPECT_TRUE(advertised.emplace(k.api_key, std::make_pair(k.min_version, k.max_version)).second) << k.api_key;
  }
  for (const auto& h : kafka::api_handlers()) {
    served[h.api_key] = {kafka::advertised_min_version(h), kafka::advertised_max_version(h)};
  }
  EXPECT_EQ(advertised, served);
}

TEST_F(BrokerTest, UnsupportedApiVersionsAnsweredInV0Layout) {
  client c(b_->port());
  // ApiVersions v99: the header is v2 (flexible) by the codec's rule, the
  // answer v0 with UNSUPPORTED_VERSION.
  c.send(protocol::api_versions_request{}, 99);
  auto resp = c.receive<protocol::api_versions_response>(0);
  EXPECT_EQ(resp.error_code, 35);
  ASSERT_EQ(resp.api_keys.size(), 1u);
  EXPECT_EQ(resp.api_keys[0].api_key, 18);
}

TEST_F(BrokerTest, CorruptBatchFailsOnlyItsPartition) {
  client c(b_->port());
  create(c, "t", 2);
  auto good = make_batch(3);
  auto bad = make_batch(3);
  bad.back() ^= 1;  // breaks the CRC
  protocol::produce_request req;
  req.acks = 1;
  auto& t = req.topic_data.emplace_back();
  t.name = "t";
  auto& p0 = t.partition_data.emplace_back();
  p0.index = 0;
  p0.records = protocol::records_field::of(bad);
  auto& p1 = t.partition_data.emplace_back();
  p1.index = 1;
  p1.records = protocol::records_field::of(good);
  auto resp = c.call<protocol::produce_response>(req, 7);
  ASSERT_EQ(resp.responses[0].partition_responses.size(), 2u);
  EXPECT_EQ(resp.responses[0].partition_responses[0].error_code, 2);  // CORRUPT_MESSAGE
  EXPECT_EQ(resp.responses[0].partition_responses[1].error_code, 0);
  EXPECT_EQ(resp.responses[0].partition_responses[1].base_offset, 0);
}

TEST_F(BrokerTest, IdempotentRetryAnsweredWithOriginalOffsets) {
  client c(b_->port());
  create(c, "idem", 1);
  protocol::init_producer_id_request ip;
  ip.transaction_timeout_ms = 60000;
  auto pid = c.call<protocol::init_producer_id_response>(ip, 1);
  ASSERT_EQ(pid.error_code, 0);
  auto b0 = make_batch(5, pid.producer_id, 0, 0);
  auto b0_retry = b0;
  auto b1 = make_batch(5, pid.producer_id, 0, 5);
  auto gap = make_batch(5, pid.producer_id, 0, 20);
  EXPECT_EQ(produce(c, "idem", 0, b0).responses[0].partition_responses[0].base_offset, 0);
  EXPECT_EQ(produce(c, "idem", 0, b1).responses[0].partition_responses[0].base_offset, 5);
  auto dup = produce(c, "idem", 0, b0_retry);
  EXPECT_EQ(dup.responses[0].partition_responses[0].error_code, 0);
  EXPECT_EQ(dup.responses[0].partition_responses[0].base_offset, 0);
  auto g = produce(c, "idem", 0, gap);
  EXPECT_EQ(g.responses[0].partition_responses[0].error_code, 45);  // OUT_OF_ORDER_SEQUENCE_NUMBER

  // The state survives a restart: the retry is still a duplicate.
  restart();
  client d(b_->port());
  auto b1_retry = make_batch(5, pid.producer_id, 0, 5);
  auto dup2 = produce(d, "idem", 0, b1_retry);
  EXPECT_EQ(dup2.responses[0].partition_responses[0].base_offset, 5);
  // And the next producer id is new (asked at v5, the latest: same fields).
  auto pid2 = d.call<protocol::init_producer_id_response>(ip, 5);
  EXPECT_EQ(pid2.error_code, 0);
  EXPECT_GT(pid2.producer_id, pid.producer_id);
}

protocol::fetch_request fetch_req(int32_t session_id, int32_t epoch, int max_wait_ms = 0) {
  protocol::fetch_request f;
  f.max_wait_ms = max_wait_ms;
  f.min_bytes = 1;
  f.max_bytes = 1 << 20;
  f.session_id = session_id;
  f.session_epoch = epoch;
  return f;
}

void add_partition(protocol::fetch_request& f, const std::string& topic, int32_t p, int64_t offset) {
  if (f.topics.empty() || f.topics.back().topic != topic) f.topics.emplace_back().topic = topic;
  auto& fp = f.topics.back().partitions.emplace_back();
  fp.partition = p;
  fp.fetch_offset = offset;
  fp.partition_max_bytes = 1 << 20;
}

size_t partitions_in(const protocol::fetch_response& r) {
  size_t n = 0;
  for (const auto& t : r.responses) n += t.partitions.size();
  return n;
}

// Produce v0-v2 are advertised (librdkafka's codec detection) but answered
// UNSUPPORTED_VERSION per partition, as Kafka 4.0 does; nothing is written.
TEST_F(BrokerTest, AdvertisedOldProduceVersionIsAnsweredUnsupported) {
  client c(b_->port());
  create(c, "old", 1);
  auto batch = make_batch(1);
  protocol::produce_request req;
  req.acks = 1;
  req.timeout_ms = 1000;
  auto& t = req.topic_data.emplace_back();
  t.name = "old";
  auto& pd = t.partition_data.emplace_back();
  pd.records = protocol::records_field::of(batch);
  auto resp = c.call<protocol::produce_response>(req, 1);
  ASSERT_EQ(resp.responses.size(), 1u);
  EXPECT_EQ(resp.responses[0].partition_responses[0].error_code, 35);  // UNSUPPORTED_VERSION
  // The connection still serves, and nothing was written.
  auto f = fetch_req(0, -1);
  add_partition(f, "old", 0, 0);
  auto r = c.call<protocol::fetch_response>(f, 11);
  EXPECT_EQ(r.responses.at(0).partitions.at(0).high_watermark, 0);
}

TEST_F(BrokerTest, IncrementalFetchSessionSendsOnlyChanges) {
  client c(b_->port());
  create(c, "s", 3);
  for (int p = 0; p < 3; ++p) {
    auto b = make_batch(2);
    ASSERT_EQ(produce(c, "s", p, b).responses[0].partition_responses[0].error_code, 0);
  }
  // Open a session with all three partitions: a full answer.
  auto f = fetch_req(0, 0);
  for (int p = 0; p < 3; ++p) add_partition(f, "s", p, 0);
  auto full = c.call<protocol::fetch_response>(f, 11);
  ASSERT_EQ(full.error_code, 0);
  ASSERT_NE(full.session_id, 0);
  EXPECT_EQ(partitions_in(full), 3u);
  const int32_t sid = full.session_id;

  // Incremental, epoch 1: move partition 1 to its end; nothing new anywhere.
  auto inc = fetch_req(sid, 1);
  add_partition(inc, "s", 1, 2);
  auto r1 = c.call<protocol::fetch_response>(inc, 11);
  EXPECT_EQ(r1.error_code, 0);
  EXPECT_EQ(r1.session_id, sid);
  // Partitions 0 and 2 still have their records from offset 0; 1 has none.
  EXPECT_EQ(partitions_in(r1), 2u);

  // New data on partition 1 shows up in the next incremental answer.
  auto b = make_batch(1);
  ASSERT_EQ(produce(c, "s", 1, b).responses[0].partition_responses[0].error_code, 0);
  auto inc2 = fetch_req(sid, 2);
  add_partition(inc2, "s", 0, 2);
  add_partition(inc2, "s", 2, 2);
  auto r2 = c.call<protocol::fetch_response>(inc2, 11);
  ASSERT_EQ(partitions_in(r2), 1u);
  EXPECT_EQ(r2.responses[0].partitions[0].partition_index, 1);
  EXPECT_GT(r2.responses[0].partitions[0].records.size_bytes(), 0u);

  // A wrong epoch and an unknown session are refused.
  auto stale = c.call<protocol::fetch_response>(fetch_req(sid, 1), 11);
  EXPECT_EQ(stale.error_code, 71);  // INVALID_FETCH_SESSION_EPOCH
  auto unknown = c.call<protocol::fetch_response>(fetch_req(sid + 1000, 1), 11);
  EXPECT_EQ(unknown.error_code, 70);  // FETCH_SESSION_ID_NOT_FOUND
}

TEST_F(BrokerTest, LongPollWakesOnAppend) {
  client c(b_->port());
  create(c, "lp", 1);
  auto f = fetch_req(0, -1, 20000);
  add_partition(f, "lp", 0, 0);
  c.send(f, 11);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const int64_t start_ms = clock::system().monotonic_ms();
  client d(b_->port());
  auto b = make_batch(1);
  ASSERT_EQ(produce(d, "lp", 0, b).responses[0].partition_responses[0].error_code, 0);
  auto resp = c.receive<protocol::fetch_response>(11);
  const int64_t waited_ms = clock::system().monotonic_ms() - start_ms;
  ASSERT_EQ(partitions_in(resp), 1u);
  EXPECT_GT(resp.responses[0].partitions[0].records.size_bytes(), 0u);
  // Woken by the append, long before max_wait_ms (20 s).
  EXPECT_LT(waited_ms, 10'000);
}

// A follower's fetch parked on several partitions is answered once every
// partition of a produce request is appended, so one answer carries them
// all rather than the first alone (partition::wake_after_append).
// The produce handler wakes parked fetches once every partition of the
// request is appended, so one answer carries them all. A single node
// refuses replica fetches (no broker epoch to check them by), so this
// parks a consumer's fetch, which a lone leader's appends wake too (its
// high watermark moves with them); the cluster's replica fetches take the
// same path (it_test_replication).
TEST_F(BrokerTest, ParkedFetchGetsEveryPartitionOfOneProduce) {
  client c(b_->port());
  create(c, "rf", 3);
  auto f = fetch_req(0, -1, 20000);
  for (int p = 0; p < 3; ++p) add_partition(f, "rf", p, 0);
  c.send(f, 12);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  client d(b_->port());
  std::vector<std::vector<uint8_t>> batches;
  for (int p = 0; p < 3; ++p) batches.push_back(make_batch(1));
  protocol::produce_request req;
  req.acks = 1;
  req.timeout_ms = 30000;
  auto& t = req.topic_data.emplace_back();
  t.name = "rf";
  for (int p = 0; p < 3; ++p) {
    auto& pd = t.partition_data.emplace_back();
    pd.index = p;
    pd.records = protocol::records_field::of(batches[static_cast<size_t>(p)]);
  }
  auto pr = d.call<protocol::produce_response>(req, 7);
  for (const auto& r : pr.responses[0].partition_responses) ASSERT_EQ(r.error_code, 0);
  auto resp = c.receive<protocol::fetch_response>(12);
  ASSERT_EQ(partitions_in(resp), 3u);
  for (const auto& p : resp.responses[0].partitions) {
    EXPECT_EQ(p.error_code, 0) << p.partition_index;
    EXPECT_GT(p.records.size_bytes(), 0u) << p.partition_index;
  }
}

TEST_F(BrokerTest, FetchOutOfRangeAndUnknownPartition) {
  client c(b_->port());
  create(c, "r", 1);
  auto f = fetch_req(0, -1);
  add_partition(f, "r", 0, 5);
  add_partition(f, "nope", 0, 0);
  auto resp = c.call<protocol::fetch_response>(f, 11);
  ASSERT_EQ(resp.responses.size(), 2u);
  EXPECT_EQ(resp.responses[0].partitions[0].error_code, 1);  // OFFSET_OUT_OF_RANGE
  EXPECT_EQ(resp.responses[1].partitions[0].error_code, 3);  // UNKNOWN_TOPIC_OR_PARTITION
}

// Topic ids (KIP-516): Metadata v10+ tells them, v12 and Fetch v13+ ask by
// them.
class TopicIdTest : public BrokerTest {
 protected:
  protocol::uuid id_of(client& c, const std::string& topic) {
    protocol::metadata_request m;
    m.topics.emplace().emplace_back().name = topic;
    auto r = c.call<protocol::metadata_response>(m, 12);
    EXPECT_EQ(r.topics.size(), 1u);
    EXPECT_EQ(r.topics[0].error_code, 0);
    return r.topics[0].topic_id;
  }
  void remove(client& c, const std::string& topic) {
    protocol::delete_topics_request d;
    d.topic_names = {topic};
    d.timeout_ms = 30000;
    auto r = c.call<protocol::delete_topics_response>(d, 5);
    ASSERT_EQ(r.responses.size(), 1u);
    ASSERT_EQ(r.responses[0].error_code, 0);
  }
  static void add_by_id(protocol::fetch_request& f, const protocol::uuid& id, int32_t p, int64_t offset) {
    if (f.topics.empty() || f.topics.back().topic_id != id) f.topics.emplace_back().topic_id = id;
    auto& fp = f.topics.back().partitions.emplace_back();
    fp.partition = p;
    fp.fetch_offset = offset;
    fp.partition_max_bytes = 1 << 20;
  }
  static const protocol::fetch_response::fetchable_topic_response::partition_data& only(
      const protocol::fetch_response& r) {
    EXPECT_EQ(partitions_in(r), 1u);
    return r.responses.at(0).partitions.at(0);
  }
};

// A fetch claiming a replica id reads and counts only with that broker's
// registered epoch (KIP-903); a single node registers none, so it refuses
// every such fetch, whatever the version, with STALE_BROKER_EPOCH, and
// serves the same fetch from a consumer.
TEST_F(TopicIdTest, AFetchClaimingAReplicaIdNeedsItsRegisteredBrokerEpoch) {
  client c(b_->port());
  create(c, "claimed", 1);
  auto b = make_batch(3);
  ASSERT_EQ(produce(c, "claimed", 0, b).responses[0].partition_responses[0].error_code, 0);
  const protocol::uuid id = id_of(c, "claimed");
  for (int16_t v : {7, 12, 15}) {
    SCOPED_TRACE("version " + std::to_string(v));
    auto f = fetch_req(0, -1);
    if (v >= 13) {
      add_by_id(f, id, 0, 0);
    } else {
      add_partition(f, "claimed", 0, 0);
    }
    f.replica_id = 1;  // before v15
    f.replica_state.replica_id = 1;
    f.replica_state.replica_epoch = v >= 15 ? 1 : -1;
    auto refused = c.call<protocol::fetch_response>(f, v);
    EXPECT_EQ(refused.error_code, 77);  // STALE_BROKER_EPOCH
    EXPECT_EQ(partitions_in(refused), 0u);
    f.replica_id = -1;
    f.replica_state = {};
    auto served = c.call<protocol::fetch_response>(f, v);
    EXPECT_EQ(served.error_code, 0);
    ASSERT_EQ(partitions_in(served), 1u);
    EXPECT_EQ(served.responses[0].partitions[0].high_watermark, 3);
  }
}

TEST_F(TopicIdTest, MetadataTellsIdsAndAnswersByThem) {
  client c(b_->port());
  create(c, "ids", 2);
  const auto id = id_of(c, "ids");
  EXPECT_NE(id, protocol::uuid{});
  // v10 tells the id when asked for all topics too.
  auto all = c.call<protocol::metadata_response>(protocol::metadata_request{}, 10);
  const size_t topics = all.topics.size();
  auto listed = std::find_if(all.topics.begin(), all.topics.end(), [](const auto& t) { return t.name == "ids"; });
  ASSERT_NE(listed, all.topics.end());
  EXPECT_EQ(listed->topic_id, id);

  protocol::metadata_request by_id;
  auto& rt = by_id.topics.emplace().emplace_back();
  rt.topic_id = id;
  rt.name = std::nullopt;
  auto r = c.call<protocol::metadata_response>(by_id, 12);
  ASSERT_EQ(r.topics.size(), 1u);
  EXPECT_EQ(r.topics[0].error_code, 0);
  EXPECT_EQ(r.topics[0].name, "ids");
  EXPECT_EQ(r.topics[0].partitions.size(), 2u);

  // An id that names no topic; and ids in a version that must not use them.
  protocol::uuid unknown = id;
  unknown[15] ^= 0xff;
  by_id.topics->at(0).topic_id = unknown;
  by_id.allow_auto_topic_creation = true;
  r = c.call<protocol::metadata_response>(by_id, 12);
  ASSERT_EQ(r.topics.size(), 1u);
  EXPECT_EQ(r.topics[0].error_code, 100);  // UNKNOWN_TOPIC_ID
  EXPECT_EQ(r.topics[0].topic_id, unknown);
  EXPECT_FALSE(r.topics[0].name.has_value());
  r = c.call<protocol::metadata_response>(by_id, 11);
  ASSERT_EQ(r.topics.size(), 1u);
  EXPECT_EQ(r.topics[0].error_code, 42);  // INVALID_REQUEST
  all = c.call<protocol::metadata_response>(protocol::metadata_request{}, 12);
  EXPECT_EQ(all.topics.size(), topics) << "asking by id never creates a topic";
}

TEST_F(TopicIdTest, FetchByIdReadsTheTopicAndAnUnknownIdIsTold) {
  client c(b_->port());
  create(c, "f", 1);
  auto b = make_batch(3);
  ASSERT_EQ(produce(c, "f", 0, b).responses[0].partition_responses[0].error_code, 0);
  const auto id = id_of(c, "f");
  auto f = fetch_req(0, -1);
  add_by_id(f, id, 0, 0);
  auto r = c.call<protocol::fetch_response>(f, 13);
  ASSERT_EQ(r.responses.size(), 1u);
  EXPECT_EQ(r.responses[0].topic_id, id);
  EXPECT_EQ(only(r).error_code, 0);
  EXPECT_EQ(only(r).high_watermark, 3);
  EXPECT_GT(only(r).records.size_bytes(), 0u);

  // Deleted and created again: the old id is unknown, the new one reads the
  // new topic (empty), never the old records.
  remove(c, "f");
  create(c, "f", 1);
  const auto id2 = id_of(c, "f");
  ASSERT_NE(id2, id);
  for (int16_t v : {13, 17}) {
    r = c.call<protocol::fetch_response>(f, v);
    EXPECT_EQ(only(r).error_code, 100) << "v" << v;  // UNKNOWN_TOPIC_ID
    EXPECT_EQ(r.responses[0].topic_id, id);
    EXPECT_EQ(only(r).records.size_bytes(), 0u);
  }
  auto f2 = fetch_req(0, -1);
  add_by_id(f2, id2, 0, 0);
  r = c.call<protocol::fetch_response>(f2, 17);
  EXPECT_EQ(only(r).error_code, 0);
  EXPECT_EQ(only(r).high_watermark, 0);
}

TEST_F(TopicIdTest, SessionOfARecreatedTopicIsToldItsIdIsInconsistent) {
  client c(b_->port());
  create(c, "s", 1);
  auto b = make_batch(2);
  ASSERT_EQ(produce(c, "s", 0, b).responses[0].partition_responses[0].error_code, 0);
  const auto id = id_of(c, "s");
  auto f = fetch_req(0, 0);
  add_by_id(f, id, 0, 2);
  auto full = c.call<protocol::fetch_response>(f, 13);
  ASSERT_EQ(full.error_code, 0);
  const int32_t sid = full.session_id;
  ASSERT_NE(sid, 0);
  EXPECT_EQ(only(full).error_code, 0);

  // The session remembers the partition as topic "s" with the old id.
  remove(c, "s");
  create(c, "s", 1);
  auto more = make_batch(5);
  ASSERT_EQ(produce(c, "s", 0, more).responses[0].partition_responses[0].error_code, 0);
  auto inc = c.call<protocol::fetch_response>(fetch_req(sid, 1), 13);
  ASSERT_EQ(inc.error_code, 0);
  EXPECT_EQ(only(inc).error_code, 103);  // INCONSISTENT_TOPIC_ID
  EXPECT_EQ(inc.responses[0].topic_id, id);
  EXPECT_EQ(only(inc).records.size_bytes(), 0u);

  // The client forgets the old id and adds the new one, in the same session.
  const auto id2 = id_of(c, "s");
  auto swap = fetch_req(sid, 2);
  auto& gone = swap.forgotten_topics_data.emplace_back();
  gone.topic_id = id;
  gone.partitions = {0};
  add_by_id(swap, id2, 0, 0);
  auto r = c.call<protocol::fetch_response>(swap, 13);
  ASSERT_EQ(r.error_code, 0);
  EXPECT_EQ(only(r).error_code, 0);
  EXPECT_EQ(r.responses[0].topic_id, id2);
  EXPECT_EQ(only(r).high_watermark, 5);
  EXPECT_GT(only(r).records.size_bytes(), 0u);

  // A request naming topics otherwise than its session is refused.
  auto by_name = c.call<protocol::fetch_response>(fetch_req(sid, 3), 12);
  EXPECT_EQ(by_name.error_code, 106);  // FETCH_SESSION_TOPIC_ID_ERROR
}

uint64_t record_bytes_in(const protocol::fetch_response& r) {
  uint64_t n = 0;
  for (const auto& t : r.responses)
    for (const auto& p : t.partitions) n += p.records.size_bytes();
  return n;
}

class FetchMaxBytesTest : public BrokerTest {
 protected:
  void SetUp() override {
    extra_args_ = {"--fetch.max.bytes", "2048"};
    BrokerTest::SetUp();
  }
};

TEST_F(FetchMaxBytesTest, BrokerLimitCapsWhatTheRequestAllows) {
  client c(b_->port());
  create(c, "cap", 3);
  auto one = make_batch(8);
  const uint64_t batch_bytes = one.size();
  ASSERT_GT(batch_bytes, 2048u / 3);
  ASSERT_LT(batch_bytes, 2048u / 2);
  for (int p = 0; p < 3; ++p)
    for (int i = 0; i < 4; ++i) {
      auto b = make_batch(8);
      ASSERT_EQ(produce(c, "cap", p, b).responses[0].partition_responses[0].error_code, 0);
    }
  // The request allows 1 MiB (and 1 MiB per partition); the broker's 2048
  // bytes win: two whole batches of the first partition, nothing more. (A
  // new connection each time: on one connection the next answer would start
  // after the partition this one ended at.)
  for (int16_t version : {int16_t{4}, int16_t{11}}) {
    client fresh(b_->port());
    auto f = fetch_req(0, -1);
    for (int p = 0; p < 3; ++p) add_partition(f, "cap", p, 0);
    auto r = fresh.call<protocol::fetch_response>(f, version);
    EXPECT_EQ(partitions_in(r), 3u) << version;
    EXPECT_EQ(record_bytes_in(r), 2 * batch_bytes) << version;
    EXPECT_EQ(r.responses[0].partitions[0].records.size_bytes(), 2 * batch_bytes) << version;
  }
  // A request asking for less than the broker's limit gets what it asked.
  auto small = fetch_req(0, -1);
  small.max_bytes = static_cast<int32_t>(batch_bytes);
  add_partition(small, "cap", 1, 0);
  EXPECT_EQ(record_bytes_in(c.call<protocol::fetch_response>(small, 11)), batch_bytes);
}

TEST_F(FetchMaxBytesTest, SessionServesPartitionsInTurn) {
  client c(b_->port());
  create(c, "turn", 3);
  for (int p = 0; p < 3; ++p)
    for (int i = 0; i < 6; ++i) {
      auto b = make_batch(8);  // about 950 bytes: two fit in the 2048-byte limit
      ASSERT_EQ(produce(c, "turn", p, b).responses[0].partition_responses[0].error_code, 0);
    }
  // Each answer is full after one partition. The session's next scan
  // starts after the partition that returned records, so the three take
  // turns even though each always has more to give.
  auto open = fetch_req(0, 0);
  for (int p = 0; p < 3; ++p) add_partition(open, "turn", p, 0);
  auto r = c.call<protocol::fetch_response>(open, 11);
  ASSERT_NE(r.session_id, 0);
  const int32_t sid = r.session_id;
  std::vector<int64_t> next(3, 0);
  std::vector<int32_t> served;
  for (int32_t epoch = 1; epoch <= 6; ++epoch) {
    int32_t with_records = -1;
    for (const auto& t : r.responses)
      for (const auto& p : t.partitions) {
        if (p.records.size_bytes() == 0) continue;
        EXPECT_EQ(with_records, -1) << "one partition per answer";
        with_records = p.partition_index;
      }
    ASSERT_GE(with_records, 0);
    served.push_back(with_records);
    next[static_cast<size_t>(with_records)] += 16;  // two batches of 8 records
    auto inc = fetch_req(sid, epoch);
    add_partition(inc, "turn", with_records, next[static_cast<size_t>(with_records)]);
    r = c.call<protocol::fetch_response>(inc, 11);
    ASSERT_EQ(r.error_code, 0);
  }
  EXPECT_EQ(served, (std::vector<int32_t>{0, 1, 2, 0, 1, 2}));
}

TEST_F(FetchMaxBytesTest, FirstBatchLargerThanTheLimitStillComes) {
  client c(b_->port());
  create(c, "big", 1);
  auto b = make_batch(40);  // about 4.5 KB, over the 2048-byte limit
  const uint64_t batch_bytes = b.size();
  ASSERT_GT(batch_bytes, 2048u);
  ASSERT_EQ(produce(c, "big", 0, b).responses[0].partition_responses[0].error_code, 0);
  auto f = fetch_req(0, -1);
  add_partition(f, "big", 0, 0);
  auto r = c.call<protocol::fetch_response>(f, 11);
  ASSERT_EQ(partitions_in(r), 1u);
  EXPECT_EQ(r.responses[0].partitions[0].error_code, 0);
  EXPECT_EQ(record_bytes_in(r), batch_bytes);  // whole, so the consumer can progress
}

// sluice.fetch.bytes.per.rtt.ms: answers sized by the connection's minimum
// round trip. With 1 byte per ms any real path sizes to the 1 MiB floor, so
// these tests do not depend on how fast this machine's loopback is; the
// arithmetic itself is fetch_sizing_test's.
class FetchRttSizingTest : public BrokerTest {
 protected:
  void SetUp() override {
    extra_args_ = {"--sluice.fetch.bytes.per.rtt.ms", per_ms_};
    BrokerTest::SetUp();
  }
  // Three partitions of one ~440 KB batch each: two fit in 1 MiB, three do not.
  uint64_t fill(client& c) {
    create(c, "rtt", 3);
    uint64_t batch_bytes = 0;
    for (int p = 0; p < 3; ++p) {
      auto b = make_batch(4000);
      batch_bytes = b.size();
      EXPECT_EQ(produce(c, "rtt", p, b).responses[0].partition_responses[0].error_code, 0);
    }
    EXPECT_LT(2 * batch_bytes, uint64_t{1} << 20);
    EXPECT_GT(3 * batch_bytes, uint64_t{1} << 20);
    return batch_bytes;
  }
  // librdkafka's shape: 50 MiB per answer, 1 MiB per partition.
  protocol::fetch_response fetch_all(client& c, int32_t min_bytes = 1, int max_wait_ms = 0) {
    auto f = fetch_req(0, -1, max_wait_ms);
    f.max_bytes = 50 << 20;
    f.min_bytes = min_bytes;
    for (int p = 0; p < 3; ++p) add_partition(f, "rtt", p, 0);
    return c.call<protocol::fetch_response>(f, 11);
  }
  const char* per_ms_ = "1";
};

TEST_F(FetchRttSizingTest, ShortPathGetsOneMebibyteAnswers) {
  client c(b_->port());
  const uint64_t batch_bytes = fill(c);
  auto r = fetch_all(c);
  EXPECT_EQ(partitions_in(r), 3u);
  EXPECT_EQ(record_bytes_in(r), 2 * batch_bytes);
  // The partition left out comes in the next answer.
  auto f = fetch_req(0, -1);
  add_partition(f, "rtt", 2, 0);
  EXPECT_EQ(record_bytes_in(c.call<protocol::fetch_response>(f, 11)), batch_bytes);
}

TEST_F(FetchRttSizingTest, MinBytesAboveTheSizeIsStillServed) {
  client c(b_->port());
  const uint64_t batch_bytes = fill(c);
  // min_bytes of 1.2 MiB lifts the limit: all three batches, at once
  // rather than after max_wait_ms (20 s, which the deadline below catches).
  const int64_t start_ms = clock::system().monotonic_ms();
  auto r = fetch_all(c, static_cast<int32_t>(3 * batch_bytes), 20000);
  EXPECT_EQ(record_bytes_in(r), 3 * batch_bytes);
  EXPECT_LT(clock::system().monotonic_ms() - start_ms, 10'000);
}

TEST_F(FetchRttSizingTest, SessionlessFetchesServePartitionsInTurn) {
  client c(b_->port());
  create(c, "turns", 3);
  uint64_t batch_bytes = 0;
  for (int p = 0; p < 3; ++p)
    for (int i = 0; i < 4; ++i) {
      auto b = make_batch(4000);
      batch_bytes = b.size();
      ASSERT_EQ(produce(c, "turns", p, b).responses[0].partition_responses[0].error_code, 0);
    }
  // Two batches fill a 1 MiB answer, so each answer serves one partition.
  // The client names the partitions in the same order every time, and each
  // always has more to give; without a session the connection's cursor
  // still makes them take turns.
  std::vector<int64_t> next(3, 0);
  std::vector<int32_t> served;
  for (int round = 0; round < 6; ++round) {
    auto f = fetch_req(0, -1);
    f.max_bytes = 50 << 20;
    for (int p = 0; p < 3; ++p) add_partition(f, "turns", p, next[static_cast<size_t>(p)]);
    auto r = c.call<protocol::fetch_response>(f, 11);
    ASSERT_EQ(r.responses.size(), 1u);
    ASSERT_EQ(r.responses[0].partitions.size(), 3u);
    int32_t with_records = -1;
    for (size_t i = 0; i < 3; ++i) {
      const auto& pd = r.responses[0].partitions[i];
      EXPECT_EQ(pd.partition_index, static_cast<int32_t>(i)) << "listed in the request's order";
      if (pd.records.size_bytes() == 0) continue;
      EXPECT_EQ(with_records, -1) << "one partition per answer";
      EXPECT_EQ(pd.records.size_bytes(), 2 * batch_bytes);
      with_records = pd.partition_index;
    }
    ASSERT_GE(with_records, 0);
    served.push_back(with_records);
    next[static_cast<size_t>(with_records)] += 2 * 4000;
  }
  EXPECT_EQ(served, (std::vector<int32_t>{0, 1, 2, 0, 1, 2}));
  // Another connection has its own cursor: it starts at the first partition.
  client d(b_->port());
  auto f = fetch_req(0, -1);
  f.max_bytes = 50 << 20;
  for (int p = 0; p < 3; ++p) add_partition(f, "turns", p, 0);
  auto r = d.call<protocol::fetch_response>(f, 11);
  EXPECT_GT(r.responses[0].partitions[0].records.size_bytes(), 0u);
}

class FetchRttSizingOffTest : public FetchRttSizingTest {
 protected:
  void SetUp() override {
    per_ms_ = "0";
    FetchRttSizingTest::SetUp();
  }
};

TEST_F(FetchRttSizingOffTest, AnswersFillWhatTheRequestAllows) {
  client c(b_->port());
  const uint64_t batch_bytes = fill(c);
  EXPECT_EQ(record_bytes_in(fetch_all(c)), 3 * batch_bytes);
}

// A broker on `dir` as `sluice serve --log.dirs dir` would open it.
result<std::unique_ptr<broker>> open_on(const std::filesystem::path& dir) {
  std::vector<std::string> argv{
      "--listeners", "127.0.0.1:0", "--log.dirs", dir.string(), "--sluice.metrics.listener", ""};
  auto args = config::parse_serve_args(argv);
  EXPECT_TRUE(args.ok());
  auto cfg = config::load_broker_config(*args);
  EXPECT_TRUE(cfg.ok());
  return broker::open(std::make_shared<const config::broker_config>(std::move(*cfg)));
}

// Issue 16 item 11: only a lock held by another broker is reported as one;
// a data directory that cannot be used says what failed, with the OS error.
TEST_F(BrokerTest, SecondBrokerOnTheDirectoryIsRefusedWithTheHoldersPid) {
  auto second = open_on(dir_);
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.err().message.find("in use by another sluice process (pid " +
                                      std::to_string(::getpid()) + ")"),
            std::string::npos)
      << second.err().message;
}

TEST_F(BrokerTest, UnusableDataDirectoryNamesTheOsError) {
  ASSERT_TRUE(b_->stop().ok());
  b_.reset();
  // The lock file cannot be opened for writing: EISDIR, which a root test
  // can produce where a read-only directory would still be writable.
  std::filesystem::remove(dir_ / ".lock");
  std::filesystem::create_directory(dir_ / ".lock");
  auto r = open_on(dir_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.err().message.find("in use"), std::string::npos) << r.err().message;
  EXPECT_NE(r.err().message.find("Is a directory (EISDIR)"), std::string::npos) << r.err().message;
  EXPECT_NE(r.err().message.find(".lock"), std::string::npos) << r.err().message;

  // A file where the data directory should be.
  const auto file = dir_ / "not-a-dir";
  std::ofstream(file) << "x";
  r = open_on(file);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.err().message.find("in use"), std::string::npos) << r.err().message;
  EXPECT_NE(r.err().message.find("not-a-dir exists and is not a directory"), std::string::npos)
      << r.err().message;

  // A data directory below a file: ENOTDIR from mkdir.
  r = open_on(file / "data");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.err().message.find("in use"), std::string::npos) << r.err().message;
  EXPECT_NE(r.err().message.find("Not a directory"), std::string::npos) << r.err().message;
  std::filesystem::remove_all(dir_);
}

// One I/O thread, so that every client shares the thread a CreateTopics
// handler runs on.
class OneIoThreadTest : public BrokerTest {
 protected:
  void SetUp() override {
    extra_args_ = {"--num.io.threads", "1"};
    BrokerTest::SetUp();
  }
  protocol::metadata_response metadata(client& c, const std::string& topic) {
    protocol::metadata_request req;
    req.topics.emplace().emplace_back().name = topic;
    req.allow_auto_topic_creation = false;
    return c.call<protocol::metadata_response>(req, 4);
  }
};

// Issue 16 item 8: a CreateTopics of 5,000 partitions is answered within
// its timeout_ms (the topic is recorded; the logs follow), and another
// client on the same I/O thread keeps getting produce and metadata answers
// while the logs are created; a partition not yet created answers with
// retriable errors, and every one of them exists in the end.
TEST_F(OneIoThreadTest, LargeCreateTopicsDoesNotHoldUpOtherClients) {
  // Seconds since `t0_ms` on the real clock.
  auto seconds_since = [](int64_t t0_ms) { return (clock::system().monotonic_ms() - t0_ms) / 1000.0; };
  const int32_t n = 5000;
  client a(b_->port()), other(b_->port());
  create(other, "other", 1);

  protocol::create_topics_request req;
  auto& t = req.topics.emplace_back();
  t.name = "big";
  t.num_partitions = n;
  t.replication_factor = 1;
  req.timeout_ms = 1'000;  // wait at most a second for the logs, then answer
  const int64_t sent_ms = clock::system().monotonic_ms();
  a.send(req, 4);
  double create_answered_s = -1;
  std::thread answer([&] {
    auto resp = a.receive<protocol::create_topics_response>(4);
    create_answered_s = seconds_since(sent_ms);
    ASSERT_EQ(resp.topics.size(), 1u);
    EXPECT_EQ(resp.topics[0].error_code, 0) << resp.topics[0].error_message.value_or("");
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the create is under way
  double slowest_s = 0;
  for (int i = 0; i < 20; ++i) {
    const int64_t s_ms = clock::system().monotonic_ms();
    auto batch = make_batch(1);
    auto pr = produce(other, "other", 0, batch, 1);
    EXPECT_EQ(pr.responses[0].partition_responses[0].error_code, 0);
    auto md = metadata(other, "other");
    ASSERT_EQ(md.topics.size(), 1u);
    EXPECT_EQ(md.topics[0].error_code, 0);
    slowest_s = std::max(slowest_s, seconds_since(s_ms));
  }
  answer.join();
  std::printf(
      "create of %d partitions answered in %.3f s; other client's slowest produce+metadata %.3f "
      "s\n",
      n, create_answered_s, slowest_s);
  // Generous: a round trip takes milliseconds, the answer waits at most
  // timeout_ms; creating the logs takes seconds.
  EXPECT_LT(slowest_s, 3.0);
  EXPECT_LT(create_answered_s, 4.0);

  // While logs are still being created: retriable answers only.
  auto last = make_batch(1);
  const int16_t early =
      produce(other, "big", n - 1, last, 1).responses[0].partition_responses[0].error_code;
  EXPECT_TRUE(early == 0 || early == 6) << early;  // NOT_LEADER_OR_FOLLOWER
  // Until every partition has a leader.
  const deadline until(5 * 60'000, sluice::clock::system());
  int32_t led = 0;
  while (!until.passed()) {
    // DescribeTopicPartitions tells a partition without a leader by its
    // leader -1 alone, as Kafka does; Metadata by LEADER_NOT_AVAILABLE.
    protocol::describe_topic_partitions_request dreq;
    dreq.topics.emplace_back().name = "big";
    auto dtp = other.call<protocol::describe_topic_partitions_response>(dreq, 0);
    ASSERT_EQ(dtp.topics.size(), 1u);
    for (const auto& p : dtp.topics[0].partitions) {
      EXPECT_EQ(p.error_code, 0) << p.partition_index;
      EXPECT_TRUE(p.leader_id == 0 || p.leader_id == -1) << p.leader_id;
    }
    auto md = metadata(other, "big");
    ASSERT_EQ(md.topics.size(), 1u);
    ASSERT_EQ(md.topics[0].error_code, 0);
    ASSERT_EQ(md.topics[0].partitions.size(), static_cast<size_t>(n));
    led = 0;
    for (const auto& p : md.topics[0].partitions) {
      if (p.error_code == 0) {
        EXPECT_EQ(p.leader_id, 0);
        ++led;
      } else {
        EXPECT_EQ(p.error_code, 5);  // LEADER_NOT_AVAILABLE
        EXPECT_EQ(p.leader_id, -1);
      }
    }
    if (led == n) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(led, n);
  std::printf("every partition led %.1f s after the request\n",
              seconds_since(sent_ms));
  auto b = make_batch(1);
  EXPECT_EQ(produce(other, "big", n - 1, b, 1).responses[0].partition_responses[0].error_code, 0);
}

TEST_F(BrokerTest, ClientsCannotWriteOrDeleteInternalTopics) {
  client c(b_->port());
  auto b = make_batch(1);
  auto r = produce(c, "__consumer_offsets", 0, b);
  EXPECT_EQ(r.responses[0].partition_responses[0].error_code, 17);  // INVALID_TOPIC_EXCEPTION
  protocol::delete_topics_request d;
  d.topic_names = {"__consumer_offsets"};
  d.timeout_ms = 10000;
  auto dr = c.call<protocol::delete_topics_response>(d, 1);
  EXPECT_EQ(dr.responses[0].error_code, 17);
}

// Issue 17: topic ids in CreateTopics v7, DeleteTopics v6 and
// DescribeTopicPartitions.
protocol::uuid topic_id_of(client& c, const std::string& topic) {
  protocol::describe_topic_partitions_request req;
  req.topics.emplace_back().name = topic;
  auto resp = c.call<protocol::describe_topic_partitions_response>(req, 0);
  EXPECT_EQ(resp.topics.size(), 1u);
  if (resp.topics.size() != 1) return {};
  EXPECT_EQ(resp.topics[0].error_code, 0);
  return resp.topics[0].topic_id;
}

protocol::delete_topics_response delete_by(client& c, std::vector<std::pair<std::optional<std::string>, protocol::uuid>> entries) {
  protocol::delete_topics_request req;
  req.timeout_ms = 10000;
  for (auto& [name, id] : entries) {
    auto& e = req.topics.emplace_back();
    e.name = name;
    e.topic_id = id;
  }
  return c.call<protocol::delete_topics_response>(req, 6);
}

TEST_F(BrokerTest, CreateTopicsV7AnswersTheTopicId) {
  client c(b_->port());
  protocol::create_topics_request req;
  auto& t = req.topics.emplace_back();
  t.name = "ids";
  t.num_partitions = 2;
  t.replication_factor = 1;
  auto resp = c.call<protocol::create_topics_response>(req, 7);
  ASSERT_EQ(resp.topics.size(), 1u);
  ASSERT_EQ(resp.topics[0].error_code, 0);
  const protocol::uuid id = resp.topics[0].topic_id;
  EXPECT_NE(id, protocol::uuid{});
  EXPECT_EQ(resp.topics[0].num_partitions, 2);
  // The id the topic table keeps: DescribeTopicPartitions tells it, and
  // DeleteTopics v6 finds the topic by it.
  EXPECT_EQ(topic_id_of(c, "ids"), id);

  // validate_only makes no topic, hence no id.
  req.validate_only = true;
  req.topics[0].name = "only_checked";
  auto checked = c.call<protocol::create_topics_response>(req, 7);
  ASSERT_EQ(checked.topics.size(), 1u);
  EXPECT_EQ(checked.topics[0].error_code, 0);
  EXPECT_EQ(checked.topics[0].topic_id, protocol::uuid{});

  auto del = delete_by(c, {{std::nullopt, id}});
  ASSERT_EQ(del.responses.size(), 1u);
  EXPECT_EQ(del.responses[0].error_code, 0);
  EXPECT_EQ(del.responses[0].name, "ids");  // found by id, answered with its name
  EXPECT_EQ(del.responses[0].topic_id, id);
  protocol::metadata_request m;
  m.topics.emplace().emplace_back().name = "ids";
  m.allow_auto_topic_creation = false;
  auto md = c.call<protocol::metadata_response>(m, 9);
  ASSERT_EQ(md.topics.size(), 1u);
  EXPECT_EQ(md.topics[0].error_code, 3);  // UNKNOWN_TOPIC_OR_PARTITION
}

TEST_F(BrokerTest, DeleteTopicsV6ByNameOrById) {
  client c(b_->port());
  create(c, "a", 1);
  create(c, "b", 1);
  create(c, "c", 1);
  const protocol::uuid a = topic_id_of(c, "a");
  const protocol::uuid b = topic_id_of(c, "b");
  protocol::uuid unknown{};
  unknown[15] = 1;
  auto resp = delete_by(c, {{std::nullopt, a},
                            {"b", {}},
                            {std::nullopt, unknown},
                            {"nope", {}},
                            {"c", a},             // both: refused
                            {std::nullopt, {}},   // neither: refused
                            {"c", {}},            // named twice: refused once
                            {"c", {}}});
  ASSERT_EQ(resp.responses.size(), 7u);
  EXPECT_EQ(resp.responses[0].error_code, 0);
  EXPECT_EQ(resp.responses[0].name, "a");
  EXPECT_EQ(resp.responses[1].error_code, 0);
  EXPECT_EQ(resp.responses[1].topic_id, b);  // found by name, answered with its id
  EXPECT_EQ(resp.responses[2].error_code, 100);  // UNKNOWN_TOPIC_ID
  EXPECT_EQ(resp.responses[2].name, std::nullopt);
  EXPECT_EQ(resp.responses[2].topic_id, unknown);
  EXPECT_EQ(resp.responses[3].error_code, 3);  // UNKNOWN_TOPIC_OR_PARTITION
  EXPECT_EQ(resp.responses[4].error_code, 42);  // INVALID_REQUEST
  EXPECT_EQ(resp.responses[5].error_code, 42);
  EXPECT_EQ(resp.responses[6].error_code, 42);
  EXPECT_EQ(resp.responses[6].name, "c");
  EXPECT_NE(topic_id_of(c, "c"), protocol::uuid{});  // not deleted

  // One topic named by its name and by its id: both entries refused.
  const protocol::uuid cid = topic_id_of(c, "c");
  auto pair = delete_by(c, {{std::nullopt, cid}, {"c", {}}});
  ASSERT_EQ(pair.responses.size(), 2u);
  EXPECT_EQ(pair.responses[0].error_code, 42);
  EXPECT_EQ(pair.responses[1].error_code, 42);
  EXPECT_EQ(pair.responses[1].topic_id, cid);
  EXPECT_EQ(topic_id_of(c, "c"), cid);

  // A topic created again under a name has a new id; the old id finds
  // nothing, and deleting by it leaves the new topic alone.
  create(c, "a", 1);
  const protocol::uuid a2 = topic_id_of(c, "a");
  EXPECT_NE(a2, a);
  auto old = delete_by(c, {{std::nullopt, a}});
  ASSERT_EQ(old.responses.size(), 1u);
  EXPECT_EQ(old.responses[0].error_code, 100);
  EXPECT_EQ(topic_id_of(c, "a"), a2);
  auto now = delete_by(c, {{std::nullopt, a2}});
  EXPECT_EQ(now.responses[0].error_code, 0);
  EXPECT_EQ(now.responses[0].name, "a");
}

TEST_F(BrokerTest, ClientsCannotDeleteInternalTopicsById) {
  client c(b_->port());
  // The group coordinator makes its topic when the broker starts.
  protocol::describe_topic_partitions_request req;
  req.topics.emplace_back().name = "__consumer_offsets";
  auto d = c.call<protocol::describe_topic_partitions_response>(req, 0);
  ASSERT_EQ(d.topics.size(), 1u);
  ASSERT_EQ(d.topics[0].error_code, 0);
  EXPECT_TRUE(d.topics[0].is_internal);
  auto resp = delete_by(c, {{std::nullopt, d.topics[0].topic_id}});
  EXPECT_EQ(resp.responses[0].error_code, 17);  // INVALID_TOPIC_EXCEPTION
  EXPECT_EQ(resp.responses[0].name, "__consumer_offsets");

  // A client's own topic named with "__" is not internal (Kafka names
  // exactly its internal topics so), in Metadata as in this API.
  create(c, "__mine", 1);
  req.topics[0].name = "__mine";
  d = c.call<protocol::describe_topic_partitions_response>(req, 0);
  ASSERT_EQ(d.topics.size(), 1u);
  EXPECT_FALSE(d.topics[0].is_internal);
  protocol::metadata_request m;
  m.topics.emplace().emplace_back().name = "__mine";
  auto md = c.call<protocol::metadata_response>(m, 12);
  ASSERT_EQ(md.topics.size(), 1u);
  EXPECT_FALSE(md.topics[0].is_internal);
}

// DescribeTopicPartitions with a limit of 3 partitions a page: following
// next_cursor visits every partition once, topics in name order, and the
// last page has no cursor.
TEST_F(BrokerTest, DescribeTopicPartitionsPagesWithItsCursor) {
  client c(b_->port());
  create(c, "p1", 4);
  create(c, "p2", 1);
  create(c, "p3", 5);
  protocol::describe_topic_partitions_request req;
  for (const char* n : {"p3", "p1", "p2"}) req.topics.emplace_back().name = n;
  req.response_partition_limit = 3;
  std::vector<std::pair<std::string, int32_t>> seen;
  int pages = 0;
  for (; pages < 20; ++pages) {
    auto resp = c.call<protocol::describe_topic_partitions_response>(req, 0);
    size_t n = 0;
    for (const auto& t : resp.topics) {
      EXPECT_EQ(t.error_code, 0);
      EXPECT_NE(t.topic_id, protocol::uuid{});
      EXPECT_FALSE(t.is_internal);
      for (const auto& p : t.partitions) {
        ++n;
        seen.emplace_back(t.name.value_or(""), p.partition_index);
        EXPECT_EQ(p.error_code, 0);
        EXPECT_EQ(p.leader_id, 0);
        EXPECT_EQ(p.leader_epoch, 0);
        EXPECT_EQ(p.replica_nodes, std::vector<int32_t>{0});
        EXPECT_EQ(p.isr_nodes, std::vector<int32_t>{0});
        EXPECT_EQ(p.eligible_leader_replicas, std::vector<int32_t>{});  // empty, not null, as Kafka
        EXPECT_EQ(p.last_known_elr, std::vector<int32_t>{});
      }
    }
    EXPECT_LE(n, 3u);
    if (!resp.next_cursor) break;
    req.cursor.emplace();
    req.cursor->topic_name = resp.next_cursor->topic_name;
    req.cursor->partition_index = resp.next_cursor->partition_index;
  }
  EXPECT_EQ(pages, 3);  // 10 partitions, 3 a page: the last page has 1
  std::vector<std::pair<std::string, int32_t>> expect;
  for (int p = 0; p < 4; ++p) expect.emplace_back("p1", p);
  expect.emplace_back("p2", 0);
  for (int p = 0; p < 5; ++p) expect.emplace_back("p3", p);
  EXPECT_EQ(seen, expect);
}

TEST_F(BrokerTest, DescribeTopicPartitionsErrors) {
  client c(b_->port());
  create(c, "e", 2);
  protocol::describe_topic_partitions_request req;
  for (const char* n : {"e", "missing", "bad name"}) req.topics.emplace_back().name = n;
  auto resp = c.call<protocol::describe_topic_partitions_response>(req, 0);
  ASSERT_EQ(resp.topics.size(), 3u);  // sorted: "bad name", "e", "missing"
  EXPECT_EQ(resp.topics[0].error_code, 17);  // INVALID_TOPIC_EXCEPTION
  EXPECT_EQ(resp.topics[1].error_code, 0);
  EXPECT_EQ(resp.topics[1].partitions.size(), 2u);
  EXPECT_EQ(resp.topics[2].error_code, 3);  // UNKNOWN_TOPIC_OR_PARTITION
  EXPECT_EQ(resp.topics[2].topic_id, protocol::uuid{});
  EXPECT_FALSE(resp.next_cursor.has_value());

  // A cursor on a topic the list does not name, or at a negative
  // partition, refuses the whole request.
  req.cursor.emplace().topic_name = "other";
  resp = c.call<protocol::describe_topic_partitions_response>(req, 0);
  ASSERT_EQ(resp.topics.size(), 3u);
  for (const auto& t : resp.topics) {
    EXPECT_EQ(t.error_code, 42);
    EXPECT_TRUE(t.partitions.empty());
  }
  req.cursor->topic_name = "e";
  req.cursor->partition_index = -1;
  resp = c.call<protocol::describe_topic_partitions_response>(req, 0);
  ASSERT_EQ(resp.topics.size(), 3u);
  EXPECT_EQ(resp.topics[1].error_code, 42);

  // An empty list is every topic; the cursor skips the topics before it
  // and starts its own at its partition.
  protocol::describe_topic_partitions_request all;
  all.cursor.emplace().topic_name = "e";
  all.cursor->partition_index = 1;
  resp = c.call<protocol::describe_topic_partitions_response>(all, 0);
  ASSERT_GE(resp.topics.size(), 1u);
  EXPECT_EQ(resp.topics[0].name, "e");
  ASSERT_EQ(resp.topics[0].partitions.size(), 1u);
  EXPECT_EQ(resp.topics[0].partitions[0].partition_index, 1);
}

TEST_F(BrokerTest, DeleteRecordsMovesLogStart) {
  client c(b_->port());
  create(c, "d", 1);
  for (int i = 0; i < 3; ++i) {
    auto b = make_batch(2);
    produce(c, "d", 0, b);
  }
  protocol::delete_records_request req;
  auto& t = req.topics.emplace_back();
  t.name = "d";
  auto& p = t.partitions.emplace_back();
  p.partition_index = 0;
  p.offset = 4;
  auto resp = c.call<protocol::delete_records_response>(req, 1);
  EXPECT_EQ(resp.topics[0].partitions[0].error_code, 0);
  EXPECT_EQ(resp.topics[0].partitions[0].low_watermark, 4);
  p.offset = 100;
  auto bad = c.call<protocol::delete_records_response>(req, 1);
  EXPECT_EQ(bad.topics[0].partitions[0].error_code, 1);

  protocol::list_offsets_request lo;
  auto& lt = lo.topics.emplace_back();
  lt.name = "d";
  auto& lp = lt.partitions.emplace_back();
  lp.partition_index = 0;
  lp.timestamp = -2;
  auto earliest = c.call<protocol::list_offsets_response>(lo, 2);
  EXPECT_EQ(earliest.topics[0].partitions[0].offset, 4);
}

TEST_F(BrokerTest, ListOffsetsByTimestampFindsTheRecord) {
  client c(b_->port());
  create(c, "ts", 1);
  auto b = make_batch(10);  // timestamps base + 0..9
  produce(c, "ts", 0, b);
  protocol::list_offsets_request lo;
  auto& lt = lo.topics.emplace_back();
  lt.name = "ts";
  auto& lp = lt.partitions.emplace_back();
  lp.partition_index = 0;
  lp.timestamp = 1'700'000'000'000 + 7;
  auto r = c.call<protocol::list_offsets_response>(lo, 2);
  EXPECT_EQ(r.topics[0].partitions[0].offset, 7);
  EXPECT_EQ(r.topics[0].partitions[0].timestamp, 1'700'000'000'000 + 7);
  lp.timestamp = 1'800'000'000'000;
  auto none = c.call<protocol::list_offsets_response>(lo, 2);
  EXPECT_EQ(none.topics[0].partitions[0].offset, -1);

  // DeleteRecords moves the log start into the batch: the records below it
  // are gone, and a time before them finds the first one left (Kafka
  // searches from the log start).
  protocol::delete_records_request dr;
  auto& dt = dr.topics.emplace_back();
  dt.name = "ts";
  auto& dp = dt.partitions.emplace_back();
  dp.offset = 3;
  ASSERT_EQ(c.call<protocol::delete_records_response>(dr, 1).topics[0].partitions[0].error_code, 0);
  lp.timestamp = 1'700'000'000'000;
  auto after = c.call<protocol::list_offsets_response>(lo, 2);
  EXPECT_EQ(after.topics[0].partitions[0].offset, 3);
  EXPECT_EQ(after.topics[0].partitions[0].timestamp, 1'700'000'000'000 + 3);
}

int64_t list_offset(client& c, const std::string& topic, int64_t ts) {
  protocol::list_offsets_request lo;
  auto& lt = lo.topics.emplace_back();
  lt.name = topic;
  auto& lp = lt.partitions.emplace_back();
  lp.partition_index = 0;
  lp.timestamp = ts;
  return c.call<protocol::list_offsets_response>(lo, 2).topics[0].partitions[0].offset;
}

class RetentionTest : public BrokerTest {
 protected:
  void SetUp() override {
    extra_args_ = {"--log.retention.check.interval.ms", "50"};
    BrokerTest::SetUp();
  }
};

TEST_F(RetentionTest, OldSegmentsGoAndTheLogStartMoves) {
  client c(b_->port());
  // Small segments, one day of retention; batches stamped two days ago are
  // past it at once (retention goes by record timestamps, as Kafka's does).
  create(c, "ret", 1, {{"segment.bytes", "4096"}, {"retention.ms", "86400000"}});
  for (int i = 0; i < 20; ++i) {
    auto b = make_batch(10);  // timestamps from 2023: long past retention
    ASSERT_EQ(produce(c, "ret", 0, b).responses[0].partition_responses[0].error_code, 0);
  }
  // Wait for a retention pass (every 50 ms) to move the log start.
  int64_t earliest = 0;
  for (int i = 0; i < 200 && earliest == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    earliest = list_offset(c, "ret", -2);
  }
  EXPECT_GT(earliest, 0);
  // The active segment stays, so the newest batch is still readable.
  EXPECT_EQ(list_offset(c, "ret", -1), 200);
  EXPECT_LT(earliest, 200);
  // A fetch below the new start is out of range; from the start it reads.
  auto f = fetch_req(0, -1);
  add_partition(f, "ret", 0, 0);
  EXPECT_EQ(c.call<protocol::fetch_response>(f, 11).responses[0].partitions[0].error_code, 1);
  // A pass that started while the batches were still arriving may be
  // followed by one more, which moves the start again between our reads; so
  // read the start afresh until a fetch from it lands.
  protocol::fetch_response ok;
  for (int i = 0; i < 20; ++i) {
    auto g = fetch_req(0, -1);
    add_partition(g, "ret", 0, list_offset(c, "ret", -2));
    ok = c.call<protocol::fetch_response>(g, 11);
    if (ok.responses[0].partitions[0].error_code != 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(ok.responses[0].partitions[0].error_code, 0);
  EXPECT_GT(ok.responses[0].partitions[0].records.size_bytes(), 0u);
}

TEST_F(RetentionTest, SizeRetentionKeepsTheLimit) {
  client c(b_->port());
  create(c, "size", 1, {{"segment.bytes", "4096"}, {"retention.bytes", "8192"}, {"retention.ms", "-1"}});
  for (int i = 0; i < 30; ++i) {
    std::vector<pr::record_input> recs(5);
    for (auto& r : recs) {
      r.value = std::vector<uint8_t>(100, 'x');
      r.timestamp_ms = 4'000'000'000'000;  // far future: time retention would never fire
    }
    auto b = pr::build_batch(pr::batch_options{}, recs);
    ASSERT_TRUE(b.ok());
    ASSERT_EQ(produce(c, "size", 0, *b).responses[0].partition_responses[0].error_code, 0);
  }
  int64_t earliest = 0;
  for (int i = 0; i < 200 && earliest == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    earliest = list_offset(c, "size", -2);
  }
  EXPECT_GT(earliest, 0);
  EXPECT_EQ(list_offset(c, "size", -1), 150);
}

// ---- Issue 17: the versions current clients speak ------------------------------------------

int64_t now_ms() { return clock::system().now_ms(); }


protocol::list_offsets_response::list_offsets_topic_response::list_offsets_partition_response
list_offsets_at(client& c, const std::string& topic, int64_t ts, int16_t version) {
  protocol::list_offsets_request lo;
  lo.replica_id = -1;
  auto& lt = lo.topics.emplace_back();
  lt.name = topic;
  auto& lp = lt.partitions.emplace_back();
  lp.partition_index = 0;
  lp.timestamp = ts;
  auto r = c.call<protocol::list_offsets_response>(lo, version);
  EXPECT_EQ(r.topics.size(), 1u);
  EXPECT_EQ(r.topics[0].partitions.size(), 1u);
  return r.topics[0].partitions[0];
}

// MAX_TIMESTAMP (v7, KIP-734): the first record carrying the largest
// timestamp, here in the middle of a batch in an early segment with many
// later records (and later segments) behind it.
TEST_F(BrokerTest, ListOffsetsMaxTimestampFindsTheLargestRecordNotTheLast) {
  client c(b_->port());
  create(c, "mx", 1, {{"segment.bytes", "4096"}});
  const int64_t t0 = now_ms() - 60'000;
  {
    auto empty = list_offsets_at(c, "mx", -3, 7);
    EXPECT_EQ(empty.error_code, 0);
    EXPECT_EQ(empty.offset, -1);
    EXPECT_EQ(empty.timestamp, -1);
  }
  auto a = batch_with_timestamps({t0, t0 + 1, t0 + 2, t0 + 3, t0 + 4});  // offsets 0-4
  auto b = batch_with_timestamps(
      {t0 + 10, t0 + 500, t0 + 20, t0 + 500, t0 + 5});  // 5-9: peak at 6 and 8
  ASSERT_EQ(produce(c, "mx", 0, a).responses[0].partition_responses[0].error_code, 0);
  ASSERT_EQ(produce(c, "mx", 0, b).responses[0].partition_responses[0].error_code, 0);
  for (int i = 0; i < 20; ++i) {
    auto later =
        batch_with_timestamps({t0 + 30 + i, t0 + 40 + i, t0 + 35 + i, t0 + 31 + i, t0 + 32 + i});
    ASSERT_EQ(produce(c, "mx", 0, later).responses[0].partition_responses[0].error_code, 0);
  }
  auto r = list_offsets_at(c, "mx", -3, 7);
  EXPECT_EQ(r.error_code, 0);
  EXPECT_EQ(r.offset, 6);
  EXPECT_EQ(r.timestamp, t0 + 500);
  EXPECT_EQ(r.leader_epoch, 0);
  // The same at v8 and v10; v6 does not know -3.
  EXPECT_EQ(list_offsets_at(c, "mx", -3, 8).offset, 6);
  EXPECT_EQ(list_offsets_at(c, "mx", -3, 10).offset, 6);
  EXPECT_EQ(list_offsets_at(c, "mx", -3, 6).error_code, 42);  // INVALID_REQUEST
  // EARLIEST_LOCAL (v8) is the log start; LATEST_TIERED (v9) is none.
  EXPECT_EQ(list_offsets_at(c, "mx", -4, 8).offset, 0);
  EXPECT_EQ(list_offsets_at(c, "mx", -4, 7).error_code, 42);
  auto tiered = list_offsets_at(c, "mx", -5, 9);
  EXPECT_EQ(tiered.error_code, 0);
  EXPECT_EQ(tiered.offset, -1);
  EXPECT_EQ(tiered.leader_epoch, -1);
  // Still found after a restart (from the index files).
  restart();
  client d(b_->port());
  EXPECT_EQ(list_offsets_at(d, "mx", -3, 7).offset, 6);
}

TEST_F(BrokerTest, DescribeClusterNamesThisBrokerAsMetadataDoes) {
  client c(b_->port());
  protocol::metadata_request mr;
  auto md = c.call<protocol::metadata_response>(mr, 9);
  ASSERT_TRUE(md.cluster_id.has_value());
  for (int16_t v : {0, 1}) {
    auto r = c.call<protocol::describe_cluster_response>(protocol::describe_cluster_request{}, v);
    EXPECT_EQ(r.error_code, 0);
    EXPECT_EQ(r.cluster_id, *md.cluster_id);
    EXPECT_EQ(r.controller_id, md.controller_id);
    ASSERT_EQ(r.brokers.size(), 1u);
    EXPECT_EQ(r.brokers[0].broker_id, md.brokers[0].node_id);
    EXPECT_EQ(r.brokers[0].host, md.brokers[0].host);
    EXPECT_EQ(r.brokers[0].port, b_->port());
    EXPECT_FALSE(r.brokers[0].rack.has_value());
  }
  protocol::describe_cluster_request controllers;
  controllers.endpoint_type = 2;
  auto mismatched = c.call<protocol::describe_cluster_response>(controllers, 1);
  EXPECT_EQ(mismatched.error_code, 114);  // MISMATCHED_ENDPOINT_TYPE
  EXPECT_TRUE(mismatched.brokers.empty());
}

// A single broker leads every partition it has: an election is never
// needed, and a partition it does not have is unknown.
TEST_F(BrokerTest, ElectLeadersOnOneBrokerIsNeverNeeded) {
  client c(b_->port());
  create(c, "el", 2);
  protocol::elect_leaders_request req;
  auto& t = req.topic_partitions.emplace().emplace_back();
  t.topic = "el";
  t.partitions = {0, 1, 2};
  for (int16_t v : {0, 1, 2}) {
    auto r = c.call<protocol::elect_leaders_response>(req, v);
    EXPECT_EQ(r.error_code, 0);
    ASSERT_EQ(r.replica_election_results.size(), 1u);
    const auto& parts = r.replica_election_results[0].partition_result;
    ASSERT_EQ(parts.size(), 3u);
    EXPECT_EQ(parts[0].error_code, 84);  // ELECTION_NOT_NEEDED
    EXPECT_EQ(parts[1].error_code, 84);
    EXPECT_EQ(parts[2].error_code, 3);  // UNKNOWN_TOPIC_OR_PARTITION
  }
  // Every partition (a null list): only those that needed an election.
  protocol::elect_leaders_request all;
  all.election_type = 1;
  auto r = c.call<protocol::elect_leaders_response>(all, 2);
  EXPECT_EQ(r.error_code, 0);
  EXPECT_TRUE(r.replica_election_results.empty());
  // An election type Kafka does not define.
  all.election_type = 5;
  EXPECT_EQ(c.call<protocol::elect_leaders_response>(all, 1).error_code, 42);  // INVALID_REQUEST
}

TEST_F(BrokerTest, DescribeLogDirsSizesMatchTheFiles) {
  client c(b_->port());
  create(c, "ld", 2);
  for (int i = 0; i < 3; ++i) {
    auto b = make_batch(10);
    ASSERT_EQ(produce(c, "ld", 0, b).responses[0].partition_responses[0].error_code, 0);
  }
  // The bytes of the batches in the .log files, found by their length
  // fields: a file may go on past its last batch with its prepared tail of
  // zeros, which Kafka's sizes (and ours) do not count.
  auto on_disk = [&](int p) {
    int64_t total = 0;
    for (const auto& e :
         std::filesystem::directory_iterator(dir_ / "logs" / ("ld-" + std::to_string(p)))) {
      if (e.path().extension() != ".log") continue;
      std::ifstream in(e.path(), std::ios::binary);
      std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      size_t pos = 0;
      while (pos + 12 <= bytes.size()) {
        uint32_t len = 0;
        for (int i = 8; i < 12; ++i) len = len << 8 | static_cast<uint8_t>(bytes[pos + static_cast<size_t>(i)]);
        if (len == 0) break;
        pos += 12 + len;
      }
      total += static_cast<int64_t>(pos);
    }
    return total;
  };
  protocol::describe_log_dirs_request all;
  all.topics.reset();  // every partition
  auto r = c.call<protocol::describe_log_dirs_response>(all, 4);
  EXPECT_EQ(r.error_code, 0);
  ASSERT_EQ(r.results.size(), 1u);
  const auto& d = r.results[0];
  EXPECT_EQ(d.error_code, 0);
  EXPECT_EQ(d.log_dir, dir_.string());
  EXPECT_GT(d.total_bytes, 0);
  EXPECT_GT(d.usable_bytes, 0);
  EXPECT_LE(d.usable_bytes, d.total_bytes);
  bool seen = false;
  for (const auto& t : d.topics) {
    if (t.name != "ld") continue;
    seen = true;
    ASSERT_EQ(t.partitions.size(), 2u);
    for (const auto& p : t.partitions) {
      EXPECT_EQ(p.partition_size, on_disk(p.partition_index)) << p.partition_index;
      EXPECT_EQ(p.offset_lag, 0);
      EXPECT_FALSE(p.is_future_key);
    }
    EXPECT_GT(t.partitions[0].partition_index == 0 ? t.partitions[0].partition_size
                                                   : t.partitions[1].partition_size,
              3000);
  }
  EXPECT_TRUE(seen);

  // Named partitions only; one this broker does not hold is left out. v0
  // has no disk totals.
  protocol::describe_log_dirs_request some;
  some.topics.emplace();
  auto& st = some.topics->emplace_back();
  st.topic = "ld";
  st.partitions = {0, 7};
  auto s = c.call<protocol::describe_log_dirs_response>(some, 0);
  ASSERT_EQ(s.results.size(), 1u);
  ASSERT_EQ(s.results[0].topics.size(), 1u);
  ASSERT_EQ(s.results[0].topics[0].partitions.size(), 1u);
  EXPECT_EQ(s.results[0].topics[0].partitions[0].partition_index, 0);
  EXPECT_EQ(s.results[0].topics[0].partitions[0].partition_size, on_disk(0));
  EXPECT_EQ(s.results[0].total_bytes, -1);
}

TEST_F(BrokerTest, DescribeProducersShowsTheIdempotentProducer) {
  client c(b_->port());
  create(c, "dp", 1);
  protocol::init_producer_id_request ip;
  ip.transaction_timeout_ms = 60000;
  auto pid = c.call<protocol::init_producer_id_response>(ip, 1);
  ASSERT_EQ(pid.error_code, 0);
  const int64_t t0 = now_ms();
  auto b0 = batch_with_timestamps({t0, t0 + 1, t0 + 2, t0 + 3, t0 + 4}, pid.producer_id,
                                  pid.producer_epoch, 0);
  auto b1 = batch_with_timestamps({t0 + 9, t0 + 7, t0 + 8}, pid.producer_id, pid.producer_epoch, 5);
  auto plain = make_batch(2);
  ASSERT_EQ(produce(c, "dp", 0, b0).responses[0].partition_responses[0].error_code, 0);
  ASSERT_EQ(produce(c, "dp", 0, b1).responses[0].partition_responses[0].error_code, 0);
  ASSERT_EQ(produce(c, "dp", 0, plain).responses[0].partition_responses[0].error_code, 0);

  protocol::describe_producers_request req;
  auto& t = req.topics.emplace_back();
  t.name = "dp";
  t.partition_indexes = {0, 3};
  auto r = c.call<protocol::describe_producers_response>(req, 0);
  ASSERT_EQ(r.topics.size(), 1u);
  ASSERT_EQ(r.topics[0].partitions.size(), 2u);
  const auto& p0 = r.topics[0].partitions[0];
  EXPECT_EQ(p0.partition_index, 0);
  EXPECT_EQ(p0.error_code, 0);
  ASSERT_EQ(p0.active_producers.size(), 1u);  // the plain producer is not one
  const auto& s = p0.active_producers[0];
  EXPECT_EQ(s.producer_id, pid.producer_id);
  EXPECT_EQ(s.producer_epoch, pid.producer_epoch);
  EXPECT_EQ(s.last_sequence, 7);
  EXPECT_EQ(s.last_timestamp, t0 + 9);
  EXPECT_EQ(s.coordinator_epoch, -1);
  EXPECT_EQ(s.current_txn_start_offset, -1);
  EXPECT_EQ(r.topics[0].partitions[1].error_code, 3);  // UNKNOWN_TOPIC_OR_PARTITION
}

class GroupApisTest : public BrokerTest {
 protected:
  void SetUp() override {
    extra_args_ = {"--group.initial.rebalance.delay.ms", "0"};
    BrokerTest::SetUp();
  }
  // Joins `group` as its only member at JoinGroup v9 (the MEMBER_ID_REQUIRED
  // round first) and syncs at SyncGroup v5; returns member id and generation.
  std::pair<std::string, int32_t> join_and_sync(client& c, const std::string& group) {
    protocol::join_group_request j;
    j.group_id = group;
    j.session_timeout_ms = 30000;
    j.rebalance_timeout_ms = 30000;
    j.protocol_type = "consumer";
    j.protocols.push_back({"range", {}});
    j.reason = "test";
    auto first = c.call<protocol::join_group_response>(j, 9);
    EXPECT_EQ(first.error_code, 79);  // MEMBER_ID_REQUIRED
    j.member_id = first.member_id;
    auto joined = c.call<protocol::join_group_response>(j, 9);
    EXPECT_EQ(joined.error_code, 0);
    EXPECT_EQ(joined.protocol_type, std::optional<std::string>("consumer"));
    EXPECT_EQ(joined.protocol_name, std::optional<std::string>("range"));
    EXPECT_EQ(joined.leader, joined.member_id);
    EXPECT_FALSE(joined.skip_assignment);

    protocol::sync_group_request s;
    s.group_id = group;
    s.generation_id = joined.generation_id;
    s.member_id = joined.member_id;
    s.protocol_type = "consumer";
    s.protocol_name = "roundrobin";  // not the group's
    s.assignments.push_back({joined.member_id, {1, 2, 3}});
    EXPECT_EQ(c.call<protocol::sync_group_response>(s, 5).error_code,
              23);  // INCONSISTENT_GROUP_PROTOCOL
    s.protocol_name = "range";
    auto synced = c.call<protocol::sync_group_response>(s, 5);
    EXPECT_EQ(synced.error_code, 0);
    EXPECT_EQ(synced.protocol_type, std::optional<std::string>("consumer"));
    EXPECT_EQ(synced.protocol_name, std::optional<std::string>("range"));
    EXPECT_EQ(synced.assignment, (std::vector<uint8_t>{1, 2, 3}));
    return {joined.member_id, joined.generation_id};
  }
};

protocol::offset_commit_request commit_req(const std::string& group, const std::string& member,
                                           int32_t epoch, const std::string& topic,
                                           int64_t offset) {
  protocol::offset_commit_request oc;
  oc.group_id = group;
  oc.member_id = member;
  oc.generation_id_or_member_epoch = epoch;
  auto& t = oc.topics.emplace_back();
  t.name = topic;
  auto& p = t.partitions.emplace_back();
  p.partition_index = 0;
  p.committed_offset = offset;
  p.committed_metadata = "meta";
  return oc;
}

int16_t commit_error(const protocol::offset_commit_response& r) {
  return r.topics.at(0).partitions.at(0).error_code;
}

// A deleted topic takes its committed offsets with it (Kafka's
// onPartitionsDeleted): a topic created again under the name is not read
// from the old topic's offsets. Other topics' offsets stay.
TEST_F(GroupApisTest, DeletedTopicTakesItsCommittedOffsets) {
  client c(b_->port());
  create(c, "gone", 1);
  create(c, "kept", 1);
  for (const char* t : {"gone", "kept"})
    ASSERT_EQ(commit_error(c.call<protocol::offset_commit_response>(commit_req("simple", "", -1, t, 42), 8)), 0);
  protocol::delete_topics_request d;
  d.topic_names = {"gone"};
  d.timeout_ms = 10000;
  ASSERT_EQ(c.call<protocol::delete_topics_response>(d, 5).responses.at(0).error_code, 0);
  create(c, "gone", 1);

  auto committed = [&](const std::string& topic) {
    protocol::offset_fetch_request of;
    auto& g = of.groups.emplace_back();
    g.group_id = "simple";
    g.topics.emplace();
    g.topics->push_back({topic, {0}});
    auto r = c.call<protocol::offset_fetch_response>(of, 9);
    return r.groups.at(0).topics.at(0).partitions.at(0).committed_offset;
  };
  // The tombstones are written when the deletion returns; applied once durable.
  const deadline until(10'000, sluice::clock::system());
  while (committed("gone") != -1 && !until.passed())
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(committed("gone"), -1);
  EXPECT_EQ(committed("kept"), 42);
  // And after a restart (the tombstones are in __consumer_offsets).
  restart();
  client again(b_->port());
  protocol::offset_fetch_request of;
  auto& g = of.groups.emplace_back();
  g.group_id = "simple";
  g.topics.emplace();
  g.topics->push_back({"gone", {0}});
  g.topics->push_back({"kept", {0}});
  for (int i = 0; i < 500; ++i) {
    auto r = again.call<protocol::offset_fetch_response>(of, 9);
    if (r.groups.at(0).error_code == 14) {  // COORDINATOR_LOAD_IN_PROGRESS
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    ASSERT_EQ(r.groups.at(0).error_code, 0);
    EXPECT_EQ(r.groups[0].topics.at(0).partitions.at(0).committed_offset, -1);
    EXPECT_EQ(r.groups[0].topics.at(1).partitions.at(0).committed_offset, 42);
    return;
  }
  FAIL() << "the coordinator did not load";
}

// OffsetCommit and OffsetFetch v9 on a classic group: the "member epoch" is
// the generation, as KIP-848 keeps it for classic groups; OffsetFetch's
// member id and epoch are not checked for them.
TEST_F(GroupApisTest, OffsetCommitAndFetchV9InAClassicGroup) {
  client c(b_->port());
  create(c, "oc", 1);
  auto [member, generation] = join_and_sync(c, "g9");

  auto ok =
      c.call<protocol::offset_commit_response>(commit_req("g9", member, generation, "oc", 42), 9);
  EXPECT_EQ(commit_error(ok), 0);
  EXPECT_EQ(commit_error(c.call<protocol::offset_commit_response>(
                commit_req("g9", member, generation + 5, "oc", 43), 9)),
            22);  // ILLEGAL_GENERATION
  EXPECT_EQ(commit_error(c.call<protocol::offset_commit_response>(
                commit_req("g9", "stranger", generation, "oc", 43), 9)),
            25);  // UNKNOWN_MEMBER_ID
  // A group that does not exist: GROUP_ID_NOT_FOUND from v9, ILLEGAL_GENERATION before.
  EXPECT_EQ(commit_error(
                c.call<protocol::offset_commit_response>(commit_req("none", "m", 3, "oc", 1), 9)),
            69);
  EXPECT_EQ(commit_error(
                c.call<protocol::offset_commit_response>(commit_req("none", "m", 3, "oc", 1), 8)),
            22);

  protocol::offset_fetch_request of;
  auto& g = of.groups.emplace_back();
  g.group_id = "g9";
  g.member_id = member;
  g.member_epoch = generation;
  g.topics.emplace();
  g.topics->push_back({"oc", {0}});
  for (int32_t epoch : {generation, -1, 99}) {
    of.groups[0].member_epoch = epoch;
    auto r = c.call<protocol::offset_fetch_response>(of, 9);
    ASSERT_EQ(r.groups.size(), 1u);
    EXPECT_EQ(r.groups[0].error_code, 0);
    ASSERT_EQ(r.groups[0].topics.size(), 1u);
    const auto& p = r.groups[0].topics[0].partitions.at(0);
    EXPECT_EQ(p.error_code, 0);
    EXPECT_EQ(p.committed_offset, 42) << epoch;
    EXPECT_EQ(p.metadata, std::optional<std::string>("meta"));
  }

  // ListGroups v5: every group is a classic one.
  protocol::list_groups_request lg;
  auto listed = c.call<protocol::list_groups_response>(lg, 5);
  bool found = false;
  for (const auto& l : listed.groups)
    if (l.group_id == "g9") {
      found = true;
      EXPECT_EQ(l.group_type, "classic");
      EXPECT_EQ(l.group_state, "Stable");
    }
  EXPECT_TRUE(found);
  lg.types_filter = {"Consumer"};
  EXPECT_TRUE(c.call<protocol::list_groups_response>(lg, 5).groups.empty());
  lg.types_filter = {"CLASSIC"};
  EXPECT_FALSE(c.call<protocol::list_groups_response>(lg, 5).groups.empty());

  // LeaveGroup v5 with a reason.
  protocol::leave_group_request leave;
  leave.group_id = "g9";
  leave.members.push_back({member, std::nullopt, "done"});
  auto left = c.call<protocol::leave_group_response>(leave, 5);
  EXPECT_EQ(left.error_code, 0);
  ASSERT_EQ(left.members.size(), 1u);
  EXPECT_EQ(left.members[0].error_code, 0);
}

}  // namespace
}  // namespace sluice::broker

namespace sluice::broker {
namespace {

TEST_F(BrokerTest, FindCoordinatorV4AnswersEveryKeyOnItsOwn) {
  client c(b_->port());
  protocol::find_coordinator_request req;
  req.coordinator_keys = {"orders-group", "", "billing"};
  auto resp = c.call<protocol::find_coordinator_response>(req, 4);
  ASSERT_EQ(resp.coordinators.size(), 3u);
  for (int i : {0, 2}) {
    EXPECT_EQ(resp.coordinators[i].error_code, 0);
    EXPECT_EQ(resp.coordinators[i].port, b_->port());
    EXPECT_EQ(resp.coordinators[i].host, "127.0.0.1");
  }
  EXPECT_EQ(resp.coordinators[0].key, "orders-group");
  EXPECT_EQ(resp.coordinators[1].error_code, 24);  // INVALID_GROUP_ID
  EXPECT_EQ(resp.coordinators[1].node_id, -1);
  // Transaction coordinators, per key as well: this broker leads every
  // partition of __transaction_state; an empty id is refused.
  req.key_type = 1;
  req.coordinator_keys = {"txn-1", ""};
  auto txn = c.call<protocol::find_coordinator_response>(req, 5);
  ASSERT_EQ(txn.coordinators.size(), 2u);
  EXPECT_EQ(txn.coordinators[0].error_code, 0);
  EXPECT_EQ(txn.coordinators[0].port, b_->port());
  EXPECT_EQ(txn.coordinators[1].error_code, 42);  // INVALID_REQUEST
  // One key, as v3 and older ask.
  protocol::find_coordinator_request one;
  one.key = "orders-group";
  auto v3 = c.call<protocol::find_coordinator_response>(one, 3);
  EXPECT_EQ(v3.error_code, 0);
  EXPECT_EQ(v3.port, b_->port());
}

}  // namespace
}  // namespace sluice::broker

namespace sluice::broker {
namespace {

TEST_F(BrokerTest, ZstdNeedsProduceV7) {
  client c(b_->port());
  create(c, "z", 1);
  std::vector<pr::record_input> recs(3);
  for (auto& r : recs) r.value = std::vector<uint8_t>(50, 'z');
  pr::batch_options o;
  o.codec = pr::compression::zstd;
  auto batch = pr::build_batch(o, recs);
  ASSERT_TRUE(batch.ok());
  auto at = [&](int16_t version) {
    auto copy = *batch;
    protocol::produce_request req;
    req.acks = 1;
    auto& t = req.topic_data.emplace_back();
    t.name = "z";
    auto& pd = t.partition_data.emplace_back();
    pd.index = 0;
    pd.records = protocol::records_field::of(copy);
    return c.call<protocol::produce_response>(req, version).responses[0].partition_responses[0].error_code;
  };
  EXPECT_EQ(at(6), 76);  // UNSUPPORTED_COMPRESSION_TYPE
  EXPECT_EQ(at(3), 76);
  EXPECT_EQ(at(7), 0);
}

// OffsetForLeaderEpoch on a single broker, which leads every partition at
// epoch 0: the end of epoch 0 is the log end, later epochs are unknown, and
// the fences and errors are Kafka's. The epoch arithmetic over longer
// histories is partition/truncation_test.cc's.
TEST_F(BrokerTest, OffsetForLeaderEpochAnswersTheEndOfAnEpoch) {
  client c(b_->port());
  create(c, "ofle", 2);
  for (int i = 0; i < 2; ++i) {
    auto b = make_batch(3);
    ASSERT_EQ(produce(c, "ofle", 0, b).responses[0].partition_responses[0].error_code, 0);
  }
  struct ask {
    std::string topic;
    int32_t partition;
    int32_t current_leader_epoch;
    int32_t leader_epoch;
  };
  auto call = [&](const std::vector<ask>& asks, int16_t version, int32_t replica_id = -1) {
    protocol::offset_for_leader_epoch_request req;
    req.replica_id = replica_id;
    for (const auto& a : asks) {
      if (req.topics.empty() || req.topics.back().topic != a.topic) req.topics.emplace_back().topic = a.topic;
      auto& p = req.topics.back().partitions.emplace_back();
      p.partition = a.partition;
      p.current_leader_epoch = a.current_leader_epoch;
      p.leader_epoch = a.leader_epoch;
    }
    return c.call<protocol::offset_for_leader_epoch_response>(req, version);
  };
  for (int16_t v = 0; v <= 4; ++v) {
    SCOPED_TRACE("version " + std::to_string(v));
    auto r = call({{"ofle", 0, -1, 0}, {"ofle", 0, -1, 3}, {"ofle", 1, -1, 0}, {"nope", 0, -1, 0}}, v);
    ASSERT_EQ(r.topics.size(), 2u);
    ASSERT_EQ(r.topics[0].partitions.size(), 3u);
    const auto& latest = r.topics[0].partitions[0];
    EXPECT_EQ(latest.error_code, 0);
    EXPECT_EQ(latest.partition, 0);
    EXPECT_EQ(latest.end_offset, 6);
    EXPECT_EQ(latest.leader_epoch, v >= 1 ? 0 : -1);  // v0 carries no epoch
    const auto& above = r.topics[0].partitions[1];   // an epoch this leader never had
    EXPECT_EQ(above.error_code, 0);
    EXPECT_EQ(above.end_offset, -1);
    EXPECT_EQ(above.leader_epoch, -1);
    const auto& empty = r.topics[0].partitions[2];   // leads at 0, nothing written yet
    EXPECT_EQ(empty.error_code, 0);
    EXPECT_EQ(empty.partition, 1);
    EXPECT_EQ(empty.end_offset, 0);
    EXPECT_EQ(r.topics[1].topic, "nope");
    EXPECT_EQ(r.topics[1].partitions[0].error_code, 3);  // UNKNOWN_TOPIC_OR_PARTITION
  }
  // The current leader epoch fences from v2 on: this broker's is 0.
  auto fence = call({{"ofle", 0, 0, 0}, {"ofle", 0, 1, 0}}, 4);
  EXPECT_EQ(fence.topics[0].partitions[0].error_code, 0);
  EXPECT_EQ(fence.topics[0].partitions[0].end_offset, 6);
  EXPECT_EQ(fence.topics[0].partitions[1].error_code, 75);  // UNKNOWN_LEADER_EPOCH: newer than this broker's
  // A debugging client (replica -2) is answered the same by the leader.
  auto debug = call({{"ofle", 0, -1, 0}}, 3, -2);
  EXPECT_EQ(debug.topics[0].partitions[0].end_offset, 6);
  EXPECT_EQ(debug.topics[0].partitions[0].leader_epoch, 0);
}

}  // namespace
}  // namespace sluice::broker

namespace sluice::broker {
namespace {

namespace pr = protocol::records;

protocol::write_txn_markers_response write_marker(client& c, const std::string& topic, int64_t pid, int16_t epoch,
                                                  bool commit, int32_t coordinator_epoch) {
  protocol::write_txn_markers_request req;
  auto& m = req.markers.emplace_back();
  m.producer_id = pid;
  m.producer_epoch = epoch;
  m.transaction_result = commit;
  m.coordinator_epoch = coordinator_epoch;
  auto& t = m.topics.emplace_back();
  t.name = topic;
  t.partition_indexes = {0};
  return c.call<protocol::write_txn_markers_response>(req, 1);
}

int16_t marker_error(const protocol::write_txn_markers_response& r) {
  return r.markers.at(0).topics.at(0).partitions.at(0).error_code;
}

// The log side of transactions over the wire: a transactional batch is not
// taken without its coordinator's word, a coordinator's marker is appended
// and committed (WriteTxnMarkers), an older coordinator is fenced, and a
// read_committed consumer is told the stable offset and the aborts its
// records overlap, a read_uncommitted one no aborted list at all.
TEST_F(BrokerTest, TransactionMarkersAndReadCommittedFetches) {
  client c(b_->port());
  create(c, "tx", 1);
  protocol::init_producer_id_request ip;
  ip.transaction_timeout_ms = 60000;
  auto pid = c.call<protocol::init_producer_id_response>(ip, 1);
  ASSERT_EQ(pid.error_code, 0);

  // A transactional batch without a transactional id: refused, not stored.
  {
    std::vector<pr::record_input> recs(1);
    recs[0].value = std::vector<uint8_t>{1};
    pr::batch_options o;
    o.transactional = true;
    o.producer_id = pid.producer_id;
    o.producer_epoch = 0;
    o.base_sequence = 0;
    auto txn = pr::build_batch(o, recs);
    ASSERT_TRUE(txn.ok());
    auto r = produce(c, "tx", 0, *txn);
    EXPECT_EQ(r.responses[0].partition_responses[0].error_code, 48);  // INVALID_TXN_STATE
  }
  auto b = make_batch(3, pid.producer_id, 0, 0);
  ASSERT_EQ(produce(c, "tx", 0, b).responses[0].partition_responses[0].error_code, 0);  // offsets 0-2

  // An abort from the coordinator at coordinator epoch 2: appended at 3,
  // ending an empty transaction there.
  EXPECT_EQ(marker_error(write_marker(c, "tx", pid.producer_id, 0, false, 2)), 0);
  EXPECT_EQ(marker_error(write_marker(c, "tx", pid.producer_id, 0, true, 1)), 52);  // TRANSACTION_COORDINATOR_FENCED
  {
    protocol::write_txn_markers_request req;
    auto& m = req.markers.emplace_back();
    m.producer_id = pid.producer_id;
    m.producer_epoch = 0;
    m.transaction_result = true;
    m.coordinator_epoch = 2;
    auto& t = m.topics.emplace_back();
    t.name = "nope";
    t.partition_indexes = {0};
    auto r = c.call<protocol::write_txn_markers_response>(req, 0);
    EXPECT_EQ(r.markers.at(0).topics.at(0).partitions.at(0).error_code, 3);  // UNKNOWN_TOPIC_OR_PARTITION
  }

  auto f = fetch_req(0, -1);
  add_partition(f, "tx", 0, 0);
  f.isolation_level = 1;
  auto committed = c.call<protocol::fetch_response>(f, 11);
  const auto& pc = committed.responses.at(0).partitions.at(0);
  EXPECT_EQ(pc.error_code, 0);
  EXPECT_EQ(pc.high_watermark, 4);
  EXPECT_EQ(pc.last_stable_offset, 4);
  ASSERT_TRUE(pc.aborted_transactions.has_value());
  ASSERT_EQ(pc.aborted_transactions->size(), 1u);
  EXPECT_EQ((*pc.aborted_transactions)[0].producer_id, pid.producer_id);
  EXPECT_EQ((*pc.aborted_transactions)[0].first_offset, 3);
  // The marker is in the records: the data batch and the control batch.
  auto batches = pr::split_batches(pc.records.view());
  ASSERT_TRUE(batches.ok());
  ASSERT_EQ(batches->size(), 2u);
  auto marker = pr::parse_marker((*batches)[1]);
  ASSERT_TRUE(marker.ok()) << marker.err().message;
  EXPECT_FALSE(marker->commit);
  EXPECT_EQ(marker->coordinator_epoch, 2);

  f.isolation_level = 0;
  auto uncommitted = c.call<protocol::fetch_response>(f, 11);
  EXPECT_FALSE(uncommitted.responses.at(0).partitions.at(0).aborted_transactions.has_value());

  protocol::list_offsets_request lo;
  lo.isolation_level = 1;
  auto& lt = lo.topics.emplace_back();
  lt.name = "tx";
  auto& lp = lt.partitions.emplace_back();
  lp.partition_index = 0;
  lp.timestamp = -1;
  EXPECT_EQ(c.call<protocol::list_offsets_response>(lo, 2).topics[0].partitions[0].offset, 4);
}

// Offsets in a transaction over the wire, as a transactional producer
// drives them: InitProducerId and AddOffsetsToTxn with the transaction
// coordinator, then TxnOffsetCommit writes the offsets as the producer's
// transactional batch to the group's partition of __consumer_offsets once
// the coordinator confirms that partition is in the transaction (KIP-890);
// EndTxn has the coordinator write the marker there: COMMIT makes them the
// group's committed offsets, ABORT drops them, and meanwhile OffsetFetch
// with require_stable answers UNSTABLE_OFFSET_COMMIT. A producer fenced by
// a newer one with its id cannot commit offsets; a restart replays the same
// state. A TxnOffsetCommit outside any transaction the coordinator knows is
// refused.
// AddPartitionsToTxn v4-5 (KIP-890, broker to broker): a partition leader
// asks whether partitions are in a producer's ongoing transaction; each
// transactional id answered apart, per partition. Clients are shown 0-3.
TEST_F(BrokerTest, AddPartitionsToTxnVerifyOnlyAnswersPerTransaction) {
  client c(b_->port());
  create(c, "vt", 2);
  auto versions = c.call<protocol::api_versions_response>(protocol::api_versions_request{}, 3);
  for (const auto& k : versions.api_keys) {
    if (k.api_key == protocol::add_partitions_to_txn_request::api_key) {
      EXPECT_EQ(k.max_version, 3);
    }
  }

  auto retrying = [](auto call) {
    const deadline until(10'000, sluice::clock::system());
    for (;;) {
      auto r = call();
      if ((r.error_code != 14 && r.error_code != 51) || until.passed()) return r;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  };
  protocol::init_producer_id_request ip;
  ip.transactional_id = "tid-verify";
  ip.transaction_timeout_ms = 60000;
  auto pid = retrying([&] { return c.call<protocol::init_producer_id_response>(ip, 1); });
  ASSERT_EQ(pid.error_code, 0);
  {
    protocol::add_partitions_to_txn_request add;
    add.v3_and_below_transactional_id = "tid-verify";
    add.v3_and_below_producer_id = pid.producer_id;
    add.v3_and_below_producer_epoch = pid.producer_epoch;
    add.v3_and_below_topics.push_back({"vt", {0}});
    auto r = c.call<protocol::add_partitions_to_txn_response>(add, 3);
    ASSERT_EQ(r.results_by_topic_v3_and_below.at(0).results_by_partition.at(0).partition_error_code, 0);
  }
  auto verify = [&](int16_t version, const std::string& tid, int64_t producer_id, int16_t epoch) {
    protocol::add_partitions_to_txn_request req;
    auto& t = req.transactions.emplace_back();
    t.transactional_id = tid;
    t.producer_id = producer_id;
    t.producer_epoch = epoch;
    t.verify_only = true;
    t.topics.push_back({"vt", {0, 1}});
    auto& other = req.transactions.emplace_back();
    other.transactional_id = "tid-unknown";
    other.producer_id = 999999;
    other.producer_epoch = 0;
    other.verify_only = true;
    other.topics.push_back({"vt", {0}});
    auto r = c.call<protocol::add_partitions_to_txn_response>(req, version);
    EXPECT_EQ(r.error_code, 0);
    std::map<std::pair<std::string, int32_t>, int16_t> out;
    for (const auto& tr : r.results_by_transaction)
      for (const auto& topic : tr.topic_results)
        for (const auto& pr : topic.results_by_partition)
          out[{tr.transactional_id, pr.partition_index}] = pr.partition_error_code;
    return out;
  };
  using key = std::pair<std::string, int32_t>;
  auto v5 = verify(5, "tid-verify", pid.producer_id, pid.producer_epoch);
  EXPECT_EQ(v5[key("tid-verify", 0)], 0);
  EXPECT_EQ(v5[key("tid-verify", 1)], 120);    // TRANSACTION_ABORTABLE: not in the transaction
  EXPECT_EQ(v5[key("tid-unknown", 0)], 49);    // INVALID_PRODUCER_ID_MAPPING
  auto v4 = verify(4, "tid-verify", pid.producer_id, pid.producer_epoch);
  EXPECT_EQ(v4[key("tid-verify", 0)], 0);
  EXPECT_EQ(v4[key("tid-verify", 1)], 48);     // INVALID_TXN_STATE before v5
  auto fenced = verify(5, "tid-verify", pid.producer_id, static_cast<int16_t>(pid.producer_epoch + 1));
  EXPECT_EQ(fenced[key("tid-verify", 0)], 90);  // PRODUCER_FENCED

  // Without verify_only (a leader adding for a producer of transaction
  // version 2): vt-1 joins the transaction, answered once durable.
  {
    protocol::add_partitions_to_txn_request req;
    auto& t = req.transactions.emplace_back();
    t.transactional_id = "tid-verify";
    t.producer_id = pid.producer_id;
    t.producer_epoch = pid.producer_epoch;
    t.verify_only = false;
    t.topics.push_back({"vt", {1}});
    auto r = c.call<protocol::add_partitions_to_txn_response>(req, 5);
    ASSERT_EQ(r.results_by_transaction.size(), 1u);
    EXPECT_EQ(r.results_by_transaction[0].topic_results.at(0).results_by_partition.at(0).partition_error_code, 0);
  }
  auto after = verify(5, "tid-verify", pid.producer_id, pid.producer_epoch);
  EXPECT_EQ(after[key("tid-verify", 1)], 0);
}

// Transaction version 2 (KIP-890 part 2) beside version 1: ApiVersions
// finalizes the feature at 2; a producer of version 2 sends no
// AddPartitionsToTxn or AddOffsetsToTxn (Produce v12 and TxnOffsetCommit v5
// have them added), and EndTxn v5 bumps its epoch and answers it.
TEST_F(BrokerTest, TransactionVersionTwoAddsImplicitlyAndBumpsTheEpochAtTheEnd) {
  client c(b_->port());
  create(c, "tv2", 2);
  auto versions = c.call<protocol::api_versions_response>(protocol::api_versions_request{}, 3);
  // transaction.version, then share.version (share groups, level 1).
  ASSERT_EQ(versions.supported_features.size(), 2u);
  EXPECT_EQ(versions.supported_features[0].name, "transaction.version");
  EXPECT_EQ(versions.supported_features[0].max_version, 2);
  EXPECT_EQ(versions.supported_features[1].name, "share.version");
  EXPECT_EQ(versions.supported_features[1].max_version, 1);
  ASSERT_EQ(versions.finalized_features.size(), 2u);
  EXPECT_EQ(versions.finalized_features[0].max_version_level, 2);
  EXPECT_EQ(versions.finalized_features[1].max_version_level, 1);

  auto retrying = [](auto call, auto code_of) {
    const deadline until(10'000, sluice::clock::system());
    for (;;) {
      auto r = call();
      const int16_t e = code_of(r);
      // COORDINATOR_LOAD_IN_PROGRESS (loads at start), CONCURRENT_TRANSACTIONS
      // and NOT_ENOUGH_REPLICAS (the last transaction's markers in flight).
      if ((e != 14 && e != 51 && e != 19) || until.passed()) return r;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  };
  const std::string tid = "tid-tv2";
  protocol::init_producer_id_request ip;
  ip.transactional_id = tid;
  ip.transaction_timeout_ms = 60000;
  auto pid = retrying([&] { return c.call<protocol::init_producer_id_response>(ip, 5); },
                      [](const auto& r) { return r.error_code; });
  ASSERT_EQ(pid.error_code, 0);
  int16_t epoch = pid.producer_epoch;
  int32_t seq = 0;
  auto produce_v12 = [&](int32_t p, int16_t at_epoch) {
    std::vector<pr::record_input> recs(2);
    recs[0].value = std::vector<uint8_t>{1};
    recs[1].value = std::vector<uint8_t>{2};
    pr::batch_options o;
    o.transactional = true;
    o.producer_id = pid.producer_id;
    o.producer_epoch = at_epoch;
    o.base_sequence = seq;
    auto b = pr::build_batch(o, recs);
    EXPECT_TRUE(b.ok());
    protocol::produce_request req;
    req.transactional_id = tid;
    req.acks = -1;
    req.timeout_ms = 30000;
    auto& t = req.topic_data.emplace_back();
    t.name = "tv2";
    auto& pd = t.partition_data.emplace_back();
    pd.index = p;
    pd.records = protocol::records_field::of(*b);
    return retrying([&] { return c.call<protocol::produce_response>(req, 12); },
                    [](const auto& r) { return r.responses.at(0).partition_responses.at(0).error_code; })
        .responses.at(0)
        .partition_responses.at(0)
        .error_code;
  };
  auto end_v5 = [&](int16_t at_epoch, bool commit) {
    protocol::end_txn_request r;
    r.transactional_id = tid;
    r.producer_id = pid.producer_id;
    r.producer_epoch = at_epoch;
    r.committed = commit;
    return retrying([&] { return c.call<protocol::end_txn_response>(r, 5); },
                    [](const auto& r) { return r.error_code; });
  };
  auto describe = [&] {
    protocol::describe_transactions_request d;
    d.transactional_ids = {tid};
    return c.call<protocol::describe_transactions_response>(d, 0).transaction_states.at(0);
  };

  // Produce v12 to two partitions: both added without AddPartitionsToTxn.
  ASSERT_EQ(produce_v12(0, epoch), 0);
  ASSERT_EQ(produce_v12(1, epoch), 0);
  seq += 2;
  {
    auto d = describe();
    EXPECT_EQ(d.transaction_state, "Ongoing");
    ASSERT_EQ(d.topics.size(), 1u);
    EXPECT_EQ(d.topics[0].partitions.size(), 2u);
  }
  // TxnOffsetCommit v5 without AddOffsetsToTxn.
  {
    protocol::txn_offset_commit_request r;
    r.transactional_id = tid;
    r.group_id = "tv2-group";
    r.producer_id = pid.producer_id;
    r.producer_epoch = epoch;
    auto& t = r.topics.emplace_back();
    t.name = "tv2";
    auto& p = t.partitions.emplace_back();
    p.partition_index = 0;
    p.committed_offset = 7;
    auto resp = retrying([&] { return c.call<protocol::txn_offset_commit_response>(r, 5); },
                         [](const auto& r) { return r.topics.at(0).partitions.at(0).error_code; });
    EXPECT_EQ(resp.topics.at(0).partitions.at(0).error_code, 0);
  }
  // EndTxn v5: committed, the epoch bumped and answered.
  auto ended = end_v5(epoch, true);
  ASSERT_EQ(ended.error_code, 0);
  EXPECT_EQ(ended.producer_id, pid.producer_id);
  EXPECT_EQ(ended.producer_epoch, epoch + 1);
  // Its retry (the epoch before the bump) is answered the same.
  auto retried = end_v5(epoch, true);
  EXPECT_EQ(retried.error_code, 0);
  EXPECT_EQ(retried.producer_epoch, epoch + 1);
  // A late write of the ended transaction, at its old epoch, is fenced by
  // the markers' bumped epoch (KAFKA-17754's hazard closed).
  EXPECT_NE(produce_v12(0, epoch), 0);
  // The next transaction at the new epoch, aborted.
  epoch = ended.producer_epoch;
  seq = 0;
  ASSERT_EQ(produce_v12(1, epoch), 0);
  auto aborted = end_v5(epoch, false);
  ASSERT_EQ(aborted.error_code, 0);
  EXPECT_EQ(aborted.producer_epoch, epoch + 1);
  {
    // EndTxn answers once PrepareAbort is durable; the markers follow.
    const deadline until(10'000, sluice::clock::system());
    std::string state;
    while ((state = describe().transaction_state) == "PrepareAbort" && !until.passed())
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_EQ(state, "CompleteAbort");
  }

  // read_committed: the first transaction's four records, none of the
  // aborted one.
  const deadline until(10'000, sluice::clock::system());
  int64_t committed_records = 0;
  for (;;) {
    committed_records = 0;
    for (int32_t p = 0; p < 2; ++p) {
      auto f = fetch_req(0, -1);
      add_partition(f, "tv2", p, 0);
      f.isolation_level = 1;
      auto r = c.call<protocol::fetch_response>(f, 11);
      const auto& part = r.responses.at(0).partitions.at(0);
      if (part.last_stable_offset != part.high_watermark) committed_records = -100;
      auto batches = pr::split_batches(part.records.view());
      ASSERT_TRUE(batches.ok());
      for (const auto& b : *batches) {
        auto d = pr::decode_batch(b);
        ASSERT_TRUE(d.ok());
        if (d->header.is_control()) continue;
        const bool in_aborted = part.aborted_transactions && !part.aborted_transactions->empty() &&
                                d->header.base_offset.value() >= (*part.aborted_transactions)[0].first_offset;
        if (!in_aborted) committed_records += static_cast<int64_t>(d->records.size());
      }
    }
    if (committed_records == 4 || until.passed()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(committed_records, 4);
}

TEST_F(BrokerTest, TransactionalOffsetsCommitWithTheirMarker) {
  client c(b_->port());
  create(c, "src", 1);
  struct producer {
    std::string tid;
    int64_t id = -1;
    int16_t epoch = -1;
  };
  // Retries COORDINATOR_LOAD_IN_PROGRESS (the loads run at start) and
  // CONCURRENT_TRANSACTIONS (the last transaction's markers being written).
  auto retrying = [](auto call) {
    const deadline until(10'000, sluice::clock::system());
    for (;;) {
      auto r = call();
      if ((r.error_code != 14 && r.error_code != 51) || until.passed()) return r;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  };
  auto init = [&](const std::string& tid) {
    protocol::init_producer_id_request ip;
    ip.transactional_id = tid;
    ip.transaction_timeout_ms = 60000;
    auto r = retrying([&] { return c.call<protocol::init_producer_id_response>(ip, 1); });
    EXPECT_EQ(r.error_code, 0);
    return producer{tid, r.producer_id, r.producer_epoch};
  };
  auto add_offsets = [&](const producer& p, const std::string& group) {
    protocol::add_offsets_to_txn_request r;
    r.transactional_id = p.tid;
    r.producer_id = p.id;
    r.producer_epoch = p.epoch;
    r.group_id = group;
    return retrying([&] { return c.call<protocol::add_offsets_to_txn_response>(r, 1); }).error_code;
  };
  auto end = [&](const producer& p, bool commit) {
    protocol::end_txn_request r;
    r.transactional_id = p.tid;
    r.producer_id = p.id;
    r.producer_epoch = p.epoch;
    r.committed = commit;
    return retrying([&] { return c.call<protocol::end_txn_response>(r, 1); }).error_code;
  };
  auto txn_commit = [&](const producer& pr, const std::string& group, int64_t offset) -> int16_t {
    protocol::txn_offset_commit_request r;
    r.transactional_id = pr.tid;
    r.group_id = group;
    r.producer_id = pr.id;
    r.producer_epoch = pr.epoch;
    auto& t = r.topics.emplace_back();
    t.name = "src";
    auto& p = t.partitions.emplace_back();
    p.partition_index = 0;
    p.committed_offset = offset;
    p.committed_metadata = "m";
    const deadline until(10'000, sluice::clock::system());
    for (;;) {
      const auto resp = c.call<protocol::txn_offset_commit_response>(r, 3);
      const int16_t e = resp.topics.at(0).partitions.at(0).error_code;
      if (e != 14 || until.passed()) return e;  // COORDINATOR_LOAD_IN_PROGRESS: the load runs at start
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  };
  // OffsetFetch v8 of one group's src/0: (error, offset).
  auto fetch = [&](client& cl, const std::string& group, bool require_stable) {
    protocol::offset_fetch_request of;
    auto& g = of.groups.emplace_back();
    g.group_id = group;
    g.topics.emplace();
    g.topics->push_back({"src", {0}});
    of.require_stable = require_stable;
    const deadline until(10'000, sluice::clock::system());
    for (;;) {
      const auto r = cl.call<protocol::offset_fetch_response>(of, 8);
      if (r.groups.at(0).error_code == 14 && !until.passed()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        continue;
      }
      EXPECT_EQ(r.groups.at(0).error_code, 0);
      const auto& p = r.groups.at(0).topics.at(0).partitions.at(0);
      return std::make_pair(p.error_code, p.committed_offset);
    }
  };
  using answer = std::pair<int16_t, int64_t>;
  // EndTxn answers once the decision is durable; the markers land just
  // after: wait until the group's offsets are stable again.
  auto settled = [&](client& cl, const std::string& group) {
    const deadline until(10'000, sluice::clock::system());
    for (;;) {
      auto a = fetch(cl, group, true);
      if (a.first != 88 || until.passed()) return a;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  };

  // Outside a transaction the coordinator knows: refused, nothing written.
  EXPECT_NE(txn_commit(producer{"nobody", 12345, 0}, "eos-none", 5), 0);
  EXPECT_EQ(fetch(c, "eos-none", true), (answer{0, -1}));

  auto p1 = init("tid-commit");
  ASSERT_EQ(add_offsets(p1, "eos-commit"), 0);
  ASSERT_EQ(txn_commit(p1, "eos-commit", 10), 0);
  EXPECT_EQ(fetch(c, "eos-commit", false), (answer{0, -1})) << "pending until the marker";
  EXPECT_EQ(fetch(c, "eos-commit", true), (answer{88, -1}));  // UNSTABLE_OFFSET_COMMIT
  ASSERT_EQ(end(p1, true), 0);
  EXPECT_EQ(settled(c, "eos-commit"), (answer{0, 10})) << "committed with the transaction";

  auto p2 = init("tid-abort");
  ASSERT_EQ(add_offsets(p2, "eos-abort"), 0);
  ASSERT_EQ(txn_commit(p2, "eos-abort", 20), 0);
  EXPECT_EQ(fetch(c, "eos-abort", true), (answer{88, -1}));
  ASSERT_EQ(end(p2, false), 0);
  EXPECT_EQ(settled(c, "eos-abort"), (answer{0, -1})) << "an abort drops them";

  // A newer producer with the same id fences the old one (its open
  // transaction aborted at the bumped epoch): the old one's commits are refused.
  auto p3 = init("tid-fenced");
  ASSERT_EQ(add_offsets(p3, "eos-fenced"), 0);
  ASSERT_EQ(txn_commit(p3, "eos-fenced", 30), 0);
  auto p3b = init("tid-fenced");
  EXPECT_GT(p3b.epoch, p3.epoch);
  const int16_t fenced = txn_commit(p3, "eos-fenced", 31);
  EXPECT_TRUE(fenced == 47 || fenced == 90) << fenced;  // INVALID_PRODUCER_EPOCH / PRODUCER_FENCED
  EXPECT_EQ(settled(c, "eos-fenced"), (answer{0, -1}));

  // One more pending at the restart: the replay finds it pending.
  auto p4 = init("tid-open");
  ASSERT_EQ(add_offsets(p4, "eos-open"), 0);
  ASSERT_EQ(txn_commit(p4, "eos-open", 40), 0);
  restart();
  client again(b_->port());
  EXPECT_EQ(fetch(again, "eos-commit", true), (answer{0, 10}));
  EXPECT_EQ(fetch(again, "eos-abort", true), (answer{0, -1}));
  EXPECT_EQ(fetch(again, "eos-fenced", true), (answer{0, -1}));
  EXPECT_EQ(fetch(again, "eos-open", true), (answer{88, -1}));
}

}  // namespace
}  // namespace sluice::broker

namespace sluice::broker {
namespace {

// The transaction.* settings reach the coordinator and the topic it makes.
class TransactionSettingsTest : public BrokerTest {
 protected:
  void SetUp() override {
    extra_args_ = {"--transaction.state.log.num.partitions", "3",    "--transaction.max.timeout.ms", "5000",
                   "--transaction.state.log.min.isr",        "2",    "--transaction.state.log.segment.bytes",
                   "1048576"};
    BrokerTest::SetUp();
  }
};

TEST_F(TransactionSettingsTest, TheTopicsLayoutAndTheLongestTimeoutComeFromTheConfig) {
  client c(b_->port());
  protocol::metadata_request m;
  m.topics.emplace().emplace_back().name = "__transaction_state";
  m.allow_auto_topic_creation = false;
  auto md = c.call<protocol::metadata_response>(m, 9);
  ASSERT_EQ(md.topics.size(), 1u);
  ASSERT_EQ(md.topics[0].error_code, 0);
  EXPECT_EQ(md.topics[0].partitions.size(), 3u);  // transaction.state.log.num.partitions

  protocol::describe_configs_request dc;
  auto& res = dc.resources.emplace_back();
  res.resource_type = 2;  // TOPIC
  res.resource_name = "__transaction_state";
  auto configs = c.call<protocol::describe_configs_response>(dc, 1);
  ASSERT_EQ(configs.results.size(), 1u);
  ASSERT_EQ(configs.results[0].error_code, 0);
  std::map<std::string, std::string> got;
  for (const auto& e : configs.results[0].configs) got[e.name] = e.value.value_or("");
  EXPECT_EQ(got["segment.bytes"], "1048576");
  EXPECT_EQ(got["cleanup.policy"], "compact");
  // min.isr 2 asked, but one broker holds the only replica: at most 1, or
  // no record of a transaction could be written.
  EXPECT_EQ(got["min.insync.replicas"], "1");

  protocol::init_producer_id_request ip;
  ip.transactional_id = "tid-timeouts";
  auto init = [&](int32_t timeout_ms) {
    ip.transaction_timeout_ms = timeout_ms;
    const deadline until(10'000, sluice::clock::system());
    for (;;) {
      auto r = c.call<protocol::init_producer_id_response>(ip, 4);
      // At start the coordinator's partitions are loading (14) or not yet
      // taken up (NOT_COORDINATOR 16, COORDINATOR_NOT_AVAILABLE 15): a
      // client retries all three.
      const bool retriable = r.error_code == 14 || r.error_code == 15 || r.error_code == 16;
      if (!retriable || until.passed()) return r;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  };
  EXPECT_EQ(init(5001).error_code, 50);  // INVALID_TRANSACTION_TIMEOUT: above transaction.max.timeout.ms
  EXPECT_EQ(init(0).error_code, 50);
  auto ok = init(5000);
  EXPECT_EQ(ok.error_code, 0);
  EXPECT_GE(ok.producer_id, 0);
}

}  // namespace
}  // namespace sluice::broker
