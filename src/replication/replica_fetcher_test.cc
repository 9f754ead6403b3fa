// A follower's fetcher against a fake leader: a loopback socket that speaks
// the Kafka protocol through the project's codec and answers each request
// as the test says. The fencing of issue 31: an answer to a fetch that left
// before a leader change is never appended, and a leader's diverging_epoch
// makes the follower truncate before it fetches again. Beside them, the
// partition's own checks (append_replicated at the epoch and log end the
// fetch was sent with; the leader's divergence check).

#include "replication/replica_fetcher.h"
#include "replication/replica_manager.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "config/broker_config.h"
#include "config/topic_config.h"
#include "io/fault_fs.h"
#include "metadata/test_managers.h"
#include "model/record_batch.h"
#include "partition/partition.h"
#include "protocol/error_code.h"
#include "protocol/frame.h"
#include "protocol/records/control.h"
#include "storage/batch_builder.h"
#include "storage/log.h"
#include "storage/test_util.h"

namespace sluice::cluster {
namespace {

using storage::testing::log_env;
using storage::testing::temp_dir;

// A request as the fake leader saw it.
struct seen_request {
  int16_t api_key = -1;
  protocol::fetch_request fetch;
  protocol::offset_for_leader_epoch_request epochs;
};

// One connection at a time on 127.0.0.1; each request is handed to
// `answer`, which returns the encoded response (or nullopt to close the
// connection). Requests are recorded in order.
class fake_leader {
 public:
  using answer_fn = std::function<std::optional<protocol::response_chunks>(const seen_request&, int32_t corr,
                                                                          int16_t version)>;
  explicit fake_leader(answer_fn answer) : answer_(std::move(answer)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    EXPECT_EQ(::listen(fd_, 4), 0);
    thread_ = std::thread([this] { serve(); });
  }
  ~fake_leader() {
    stopping_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    {
      std::lock_guard g(mu_);
      if (conn_ >= 0) ::shutdown(conn_, SHUT_RDWR);
    }
    thread_.join();
    ::close(fd_);
  }
  int32_t port() const { return port_; }

  std::vector<seen_request> requests() {
    std::lock_guard g(mu_);
    return seen_;
  }
  // Waits until `n` requests arrived (bounded by a generous limit, never a
  // timing the test depends on).
  bool wait_for_requests(size_t n) {
    std::unique_lock g(mu_);
    return cv_.wait_for(g, std::chrono::seconds(60), [&] { return seen_.size() >= n; });
  }

 private:
  static bool read_all(int fd, uint8_t* p, size_t n) {
    while (n > 0) {
      const ssize_t r = ::read(fd, p, n);
      if (r <= 0) return false;
      p += r;
      n -= static_cast<size_t>(r);
    }
    return true;
  }
  void serve() {
    while (!stopping_) {
      const int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      {
        std::lock_guard g(mu_);
        conn_ = c;
      }
      while (!stopping_) {
        uint8_t size_bytes[4];
        if (!read_all(c, size_bytes, 4)) break;
        const uint32_t size = (uint32_t{size_bytes[0]} << 24) | (uint32_t{size_bytes[1]} << 16) |
                              (uint32_t{size_bytes[2]} << 8) | uint32_t{size_bytes[3]};
        std::vector<uint8_t> frame(size);
        if (!read_all(c, frame.data(), size)) break;
        protocol::reader r(frame);
        auto h = protocol::decode_request_header(r);
        if (!h.ok()) break;
        auto body = protocol::decode_request_body(h->header.request_api_key, h->header.request_api_version, r);
        if (!body.ok()) break;
        seen_request s;
        s.api_key = h->header.request_api_key;
        if (auto* f = std::get_if<protocol::fetch_request>(&*body)) s.fetch = *f;
        if (auto* e = std::get_if<protocol::offset_for_leader_epoch_request>(&*body)) s.epochs = *e;
        {
          std::lock_guard g(mu_);
          seen_.push_back(s);
        }
        cv_.notify_all();
        auto out = answer_(s, h->header.correlation_id, h->header.request_api_version);
        if (!out) break;
        auto bytes = out->flatten();
        if (!bytes.ok() || ::write(c, bytes->data(), bytes->size()) != static_cast<ssize_t>(bytes->size())) break;
      }
      std::lock_guard g(mu_);
      ::close(c);
      conn_ = -1;
    }
  }

  answer_fn answer_;
  int fd_ = -1;
  int32_t port_ = 0;
  std::atomic<bool> stopping_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  int conn_ = -1;                  // mu_
  std::vector<seen_request> seen_;  // mu_
  std::thread thread_;
};

constexpr int32_t kMe = 2;
constexpr int32_t kLeader = 1;

// A batch of `n` records at `base`, written by a leader at `epoch`, as a
// fetch answer carries it.
std::vector<std::byte> leader_batch(int64_t base, int32_t n, int32_t epoch) {
  auto b = storage::testing::make_batch(n, 10, static_cast<uint32_t>(base + 1));
  auto h = model::batch::parse(b.data());
  h.base_offset = offset(base);
  h.partition_leader_epoch = epoch;
  model::batch::write(b.data(), h);
  model::batch::update_crc(b);
  return b;
}

class ReplicaFetcherTest : public ::testing::Test {
 protected:
  std::shared_ptr<partition> open_partition(const std::string& topic, storage::log_config lcfg = {},
                                            int32_t node = kMe) {
    const std::string dir = node == kMe ? topic + "-0" : "broker-" + std::to_string(node) + "/" + topic + "-0";
    auto lg = storage::log::open(env_.ctx(), tmp_.sub(dir), topic + "-0", lcfg);
    EXPECT_TRUE(lg.ok());
    sluice::topic_id id{};
    id[0] = static_cast<uint8_t>(topic.size());
    id[1] = static_cast<uint8_t>(topic[0]);
    // The broker's topic defaults.
    config::config_map m;
    m.set("log.dirs", std::vector<std::string>{tmp_.path()});
    auto bc = config::make_broker_config(std::move(m));
    EXPECT_TRUE(bc.ok());
    const config::topic_config cfg = bc->topic_defaults;
    auto p = partition::open({topic, 0}, *lg, cfg, env_.fs, tmp_.path() + "/" + dir + ".snap", id, node, env_.clk,
                             /*sole_replica=*/false);
    EXPECT_TRUE(p.ok());
    logs_.push_back(*lg);
    return *p;
  }
  static void follow(partition& p, int32_t leader, int32_t epoch) {
    partition_state st;
    st.leader = leader;
    st.leader_epoch = epoch;
    st.isr = {kLeader, kMe};
    st.partition_epoch = epoch;
    ASSERT_TRUE(p.apply_state({kLeader, kMe, 3}, st));
  }
  // Gives a follower the history epoch 1 at 0-9, epoch 3 at 10-14, as
  // copied from leaders at those epochs.
  static void epochs_1_and_3(partition& p) {
    follow(p, kLeader, 1);
    auto b1 = leader_batch(0, 10, 1);
    ASSERT_TRUE(p.append_replicated(b1, leader_epoch(1), offset(0)).ok());
    follow(p, kLeader, 3);
    auto b3 = leader_batch(10, 5, 3);
    ASSERT_TRUE(p.append_replicated(b3, leader_epoch(3), offset(10)).ok());
  }
  std::unique_ptr<replica_fetcher> fetcher_for(const fake_leader& l,
                                                std::function<int64_t()> broker_epoch = [] { return int64_t{7}; },
                                                int32_t backoff_ms = 10) {
    fetcher_options o;
    o.node_id = kMe;
    o.source = kLeader;
    o.broker_epoch = std::move(broker_epoch);
    o.backoff_ms = backoff_ms;
    o.wait_max_ms = 10;
    o.partition_max_bytes = 1 << 20;
    o.response_max_bytes = 10 << 20;
    o.socket_timeout_ms = 30'000;
    const int32_t port = l.port();
    return std::make_unique<replica_fetcher>(
        o,
        tcp_links([port](int32_t) { return std::optional<std::pair<std::string, int32_t>>({"127.0.0.1", port}); },
                  kMe, o.socket_timeout_ms),
        sluice::clock::system());
  }
  void TearDown() override {
    for (auto& l : logs_) l->close().ignore();
  }

  temp_dir tmp_;
  log_env env_;
  std::vector<std::shared_ptr<storage::log>> logs_;
};

// An OffsetForLeaderEpoch answer: each partition asked, no error, the
// epoch and end offset `ends` gives for its topic.
protocol::response_chunks epochs_answer(const seen_request& s, int32_t corr, int16_t version,
                                        const std::function<std::pair<int32_t, int64_t>(const std::string&)>& ends) {
  protocol::offset_for_leader_epoch_response resp;
  for (const auto& t : s.epochs.topics) {
    auto& rt = resp.topics.emplace_back();
    rt.topic = t.topic;
    for (const auto& p : t.partitions) {
      auto& rp = rt.partitions.emplace_back();
      rp.partition = p.partition;
      const auto [e, end] = ends(t.topic);
      rp.leader_epoch = e;
      rp.end_offset = end;
    }
  }
  return protocol::encode_response(corr, version, resp);
}

TEST_F(ReplicaFetcherTest, AFetchSentBeforeALeaderChangeNeverAppendsAfterIt) {
  auto moved = open_partition("moved");  // its leadership moves while the fetch is out
  auto stays = open_partition("stays");  // still followed: shows the answer was processed
  follow(*moved, kLeader, 1);
  follow(*stays, kLeader, 1);
  const auto moved_batch = leader_batch(0, 3, 1), stays_batch = leader_batch(0, 2, 1);
  std::mutex gate_mu;
  std::condition_variable gate_cv;
  bool gate_open = false;
  fake_leader leader([&](const seen_request& s, int32_t corr, int16_t v) -> std::optional<protocol::response_chunks> {
    if (s.api_key == 23) return epochs_answer(s, corr, v, [](const std::string&) { return std::pair{1, int64_t{0}}; });
    // The fetch: held until the test has moved the partition on, then
    // answered with the old leader's batches for both.
    {
      std::unique_lock g(gate_mu);
      gate_cv.wait(g, [&] { return gate_open; });
    }
    protocol::fetch_response resp;
    for (const auto& t : s.fetch.topics) {
      auto& rt = resp.responses.emplace_back();
      rt.topic_id = t.topic_id;
      for (const auto& p : t.partitions) {
        auto& rp = rt.partitions.emplace_back();
        rp.partition_index = p.partition;
        rp.high_watermark = 0;
        rp.log_start_offset = 0;
        const auto& b = t.topic_id == moved->topic_id() ? moved_batch : stays_batch;
        // Only the first fetch carries records; later ones are empty.
        if (p.fetch_offset == 0)
          rp.records = protocol::records_field::of({reinterpret_cast<const uint8_t*>(b.data()), b.size()});
        else
          rp.records = protocol::records_field::empty();
      }
    }
    return protocol::encode_response(corr, v, resp);
  });
  auto f = fetcher_for(leader);
  f->add(moved);
  f->add(stays);
  // Two OffsetForLeaderEpoch exchanges at most, then the fetch arrives.
  for (size_t n = 1;; ++n) {
    ASSERT_TRUE(leader.wait_for_requests(n));
    if (leader.requests().back().api_key == 1) break;
  }
  // The controller moves `moved` to another leader at epoch 2: the replica
  // manager takes it out of this fetcher and applies the new state.
  f->remove(moved);
  follow(*moved, 3, 2);
  {
    std::lock_guard g(gate_mu);
    gate_open = true;
  }
  gate_cv.notify_all();
  // The answer is processed once `stays` has its batch.
  for (int i = 0; i < 60'000 && stays->log_end_offset() < offset(2); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_EQ(stays->log_end_offset(), offset(2));
  EXPECT_EQ(moved->log_end_offset(), offset(0)) << "the deposed leader's batch was appended after the change";
  f.reset();
}

TEST_F(ReplicaFetcherTest, ADivergingEpochTruncatesBeforeTheNextFetch) {
  auto p = open_partition("div");
  // This replica holds epoch 1 at 0-9 and epoch 3 at 10-14; the leader
  // (now at epoch 4) never had epoch 3.
  ASSERT_NO_FATAL_FAILURE(epochs_1_and_3(*p));
  follow(*p, kLeader, 4);
  ASSERT_EQ(p->last_written_epoch(), 3);
  fake_leader leader([&](const seen_request& s, int32_t corr, int16_t v) -> std::optional<protocol::response_chunks> {
    // A leader whose OffsetForLeaderEpoch answer shows no divergence (its
    // history was read before the change) but whose fetch does.
    if (s.api_key == 23) return epochs_answer(s, corr, v, [](const std::string&) { return std::pair{3, int64_t{15}}; });
    protocol::fetch_response resp;
    for (const auto& t : s.fetch.topics) {
      auto& rt = resp.responses.emplace_back();
      rt.topic_id = t.topic_id;
      for (const auto& fp : t.partitions) {
        auto& rp = rt.partitions.emplace_back();
        rp.partition_index = fp.partition;
        rp.high_watermark = 10;
        rp.log_start_offset = 0;
        rp.records = protocol::records_field::empty();
        if (fp.last_fetched_epoch == 3) {
          rp.diverging_epoch.epoch = 1;
          rp.diverging_epoch.end_offset = 10;
        }
      }
    }
    return protocol::encode_response(corr, v, resp);
  });
  auto f = fetcher_for(leader);
  f->add(p);
  // Wait for a fetch from 10 naming epoch 1: the truncation happened.
  bool truncated = false;
  for (size_t n = 1; n < 200 && !truncated; ++n) {
    ASSERT_TRUE(leader.wait_for_requests(n));
    const auto r = leader.requests()[n - 1];
    if (r.api_key != 1) continue;
    const auto& fp = r.fetch.topics.at(0).partitions.at(0);
    if (fp.fetch_offset == 10) {
      EXPECT_EQ(fp.last_fetched_epoch, 1);
      EXPECT_EQ(fp.current_leader_epoch, 4);
      truncated = true;
    } else {
      EXPECT_EQ(fp.fetch_offset, 15);
      EXPECT_EQ(fp.last_fetched_epoch, 3);
    }
  }
  EXPECT_TRUE(truncated);
  f.reset();
  EXPECT_EQ(p->log_end_offset(), offset(10));
  EXPECT_EQ(p->last_written_epoch(), 1);
}

// A restarted broker's fetchers started before its registration showed in
// its image: the first fetches carried broker epoch -1, the leader refused
// them (STALE_BROKER_EPOCH), and each fetcher waited replica.fetch.backoff.ms
// before the next. Now no fetch leaves without the epoch: the fetcher waits
// for it, without the backoff (an hour here, so a fetch that waited it
// would never arrive within the test).
TEST_F(ReplicaFetcherTest, TheFirstFetchCarriesTheBrokerEpoch) {
  auto p = open_partition("epoch");
  follow(*p, kLeader, 1);
  std::atomic<int> asked{0};
  std::atomic<int64_t> epoch{-1};
  fake_leader leader([&](const seen_request& s, int32_t corr, int16_t v) -> std::optional<protocol::response_chunks> {
    if (s.api_key == 23) return epochs_answer(s, corr, v, [](const std::string&) { return std::pair{1, int64_t{0}}; });
    protocol::fetch_response resp;
    if (s.fetch.replica_state.replica_epoch != 7) {
      resp.error_code = static_cast<int16_t>(kafka::error_code::stale_broker_epoch);
      return protocol::encode_response(corr, v, resp);
    }
    for (const auto& t : s.fetch.topics) {
      auto& rt = resp.responses.emplace_back();
      rt.topic_id = t.topic_id;
      for (const auto& fp : t.partitions) {
        auto& rp = rt.partitions.emplace_back();
        rp.partition_index = fp.partition;
        rp.high_watermark = 0;
        rp.log_start_offset = 0;
        rp.records = protocol::records_field::empty();
      }
    }
    return protocol::encode_response(corr, v, resp);
  });
  auto f = fetcher_for(
      leader,
      [&] {
        ++asked;
        return epoch.load();
      },
      /*backoff_ms=*/3'600'000);
  f->add(p);
  // The fetcher looks for its epoch a few times (the registration is on
  // its way), then it is known.
  for (int i = 0; i < 600'000 && asked.load() < 3; ++i) std::this_thread::sleep_for(std::chrono::microseconds(100));
  ASSERT_GE(asked.load(), 3);
  epoch = 7;
  bool fetched = false;
  for (size_t n = 1; n < 100 && !fetched; ++n) {
    ASSERT_TRUE(leader.wait_for_requests(n));
    fetched = leader.requests()[n - 1].api_key == 1;
  }
  ASSERT_TRUE(fetched);
  for (const auto& r : leader.requests()) {
    if (r.api_key == 1) {
      EXPECT_EQ(r.fetch.replica_state.replica_epoch, 7);
    }
  }
  f.reset();
}

// The leader's side of a follower's long poll: an ISR change (the same
// leader and epoch) wakes waiting consumers but no follower's fetch, which
// would attempt its whole request again on the metadata thread for every
// one of thousands of ISR changes; a leadership change wakes both.
TEST_F(ReplicaFetcherTest, AnIsrChangeWakesNoFollowersFetch) {
  auto p = open_partition("wake");
  partition_state st;
  st.leader = kMe;
  st.leader_epoch = 1;
  st.partition_epoch = 1;
  st.isr = {kMe, kLeader};
  ASSERT_TRUE(p->apply_state({kMe, kLeader, 3}, st));
  int follower_woken = 0, consumer_woken = 0;
  p->add_listener([&] { ++follower_woken; }, partition::wake_on::append);
  p->add_listener([&] { ++consumer_woken; }, partition::wake_on::high_watermark);
  st.partition_epoch = 2;
  st.isr = {kMe, kLeader, 3};
  ASSERT_TRUE(p->apply_state({kMe, kLeader, 3}, st));
  EXPECT_EQ(follower_woken, 0);
  EXPECT_EQ(consumer_woken, 1);
  p->add_listener([&] { ++consumer_woken; }, partition::wake_on::high_watermark);
  st.leader = kLeader;
  st.leader_epoch = 2;
  st.partition_epoch = 3;
  ASSERT_TRUE(p->apply_state({kMe, kLeader, 3}, st));
  EXPECT_EQ(follower_woken, 1);
  EXPECT_EQ(consumer_woken, 2);
}

TEST_F(ReplicaFetcherTest, AFollowerBehindALogStartInsideABatchRestartsThereAndCatchesUp) {
  // This replica holds 0-4; the leader's log starts at 103, inside its
  // batch 100-109 (DeleteRecords), and ends at 112. The follower's fetch
  // from 5 is out of range: it starts over at 103, and the leader answers
  // its fetch from 103 with the whole batch 100-109.
  auto p = open_partition("inside");
  follow(*p, kLeader, 1);
  auto first = leader_batch(0, 5, 1);
  ASSERT_TRUE(p->append_replicated(first, leader_epoch(1), offset(0)).ok());
  const auto straddling = leader_batch(100, 10, 1), next = leader_batch(110, 2, 1);
  fake_leader leader([&](const seen_request& s, int32_t corr, int16_t v) -> std::optional<protocol::response_chunks> {
    if (s.api_key == 23) return epochs_answer(s, corr, v, [](const std::string&) { return std::pair{1, int64_t{112}}; });
    protocol::fetch_response resp;
    for (const auto& t : s.fetch.topics) {
      auto& rt = resp.responses.emplace_back();
      rt.topic_id = t.topic_id;
      for (const auto& fp : t.partitions) {
        auto& rp = rt.partitions.emplace_back();
        rp.partition_index = fp.partition;
        rp.high_watermark = 112;
        rp.log_start_offset = 103;
        rp.records = protocol::records_field::empty();
        const std::vector<std::byte>* b = nullptr;
        if (fp.fetch_offset < 103)
          rp.error_code = 1;  // OFFSET_OUT_OF_RANGE
        else if (fp.fetch_offset < 110)
          b = &straddling;
        else if (fp.fetch_offset == 110)
          b = &next;
        if (b) rp.records = protocol::records_field::of({reinterpret_cast<const uint8_t*>(b->data()), b->size()});
      }
    }
    return protocol::encode_response(corr, v, resp);
  });
  auto f = fetcher_for(leader);
  f->add(p);
  for (int i = 0; i < 60'000 && p->log_end_offset() < offset(112); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  f.reset();
  EXPECT_EQ(p->log_end_offset(), offset(112)) << "the follower never took the batch holding the leader's log start";
  EXPECT_EQ(p->log_start_offset(), offset(103));
}

TEST_F(ReplicaFetcherTest, AReplicatedAppendNeedsTheEpochAndLogEndItWasFetchedAt) {
  auto p = open_partition("fenced");
  follow(*p, kLeader, 2);
  auto b = leader_batch(0, 3, 2);
  EXPECT_EQ(p->append_replicated(b, leader_epoch(1), offset(0)).code(), errc::fenced_leader_epoch);
  EXPECT_EQ(p->append_replicated(b, leader_epoch(2), offset(5)).code(), errc::offset_out_of_range);
  ASSERT_TRUE(p->append_replicated(b, leader_epoch(2), offset(0)).ok());
  // The same answer again (a retried fetch): the log end moved on.
  EXPECT_EQ(p->append_replicated(b, leader_epoch(2), offset(0)).code(), errc::offset_out_of_range);
  // A gap compaction left on the leader is kept.
  auto later = leader_batch(10, 2, 2);
  ASSERT_TRUE(p->append_replicated(later, leader_epoch(2), offset(3)).ok());
  EXPECT_EQ(p->log_end_offset(), offset(12));
  EXPECT_EQ(p->log_start_offset(), offset(0));
  // A cut decided at an earlier epoch (a leader's answer that arrived after
  // the leadership moved on) is refused; one at the current epoch holds.
  EXPECT_EQ(p->truncate_to(offset(3), leader_epoch(1)).code(), errc::fenced_leader_epoch);
  EXPECT_EQ(p->reset_to(offset(50), leader_epoch(1)).code(), errc::fenced_leader_epoch);
  EXPECT_EQ(p->log_end_offset(), offset(12));
  ASSERT_TRUE(p->truncate_to(offset(3), leader_epoch(2)).ok());
  EXPECT_EQ(p->log_end_offset(), offset(3));
}

TEST_F(ReplicaFetcherTest, ALeaderNamesWhereAFollowersLastEpochDiverges) {
  auto p = open_partition("lead");
  // History as a follower: epoch 1 at 0-9, epoch 3 at 10-14; then it
  // leads at epoch 5.
  ASSERT_NO_FATAL_FAILURE(epochs_1_and_3(*p));
  follow(*p, kMe, 5);
  ASSERT_TRUE(p->is_leader());
  // A follower at this leader's epoch, or with a prefix of its log: none.
  EXPECT_FALSE(p->diverging_epoch(5, offset(15)).has_value());
  EXPECT_FALSE(p->diverging_epoch(3, offset(15)).has_value());
  EXPECT_FALSE(p->diverging_epoch(1, offset(10)).has_value());
  EXPECT_FALSE(p->diverging_epoch(-1, offset(3)).has_value());
  // Epoch 1 past where it ended here: cut at 10.
  EXPECT_EQ(p->diverging_epoch(1, offset(12)), (std::pair<int32_t, int64_t>{1, 10}));
  // An epoch this leader never had (2): the largest below it, 1, ended at 10.
  EXPECT_EQ(p->diverging_epoch(2, offset(11)), (std::pair<int32_t, int64_t>{1, 10}));
  // Epoch 4 (never written here; 3 ended at the log end, 15, where 5 began).
  EXPECT_EQ(p->diverging_epoch(4, offset(15)), (std::pair<int32_t, int64_t>{3, 15}));
}

// Issue 31 (power loss on followers): a follower's fetch offset tells the
// leader what is on its disk (the high watermark and acks=all count it), so
// after a power loss that drops everything unsynced, the follower still
// holds every offset below the largest fetch offset it ever sent.
TEST_F(ReplicaFetcherTest, AFollowerNeverClaimsWhatAPowerLossTakes) {
  io::fault_fs ffs(io::filesystem::posix());
  ffs.simulate_syncs(true);
  offset claimed(0);
  {
    log_env env(ffs);
    // Default segments: no roll or seal syncs anything behind the test's back.
    auto lg = storage::log::open(env.ctx(), tmp_.sub("power-0"), "power-0", {});
    ASSERT_TRUE(lg.ok());
    config::config_map m;
    m.set("log.dirs", std::vector<std::string>{tmp_.path()});
    auto bc = config::make_broker_config(std::move(m));
    ASSERT_TRUE(bc.ok());
    auto p = partition::open({"power", 0}, *lg, bc->topic_defaults, ffs, tmp_.path() + "/power.snap", {}, kMe,
                             env.clk, /*sole_replica=*/false);
    ASSERT_TRUE(p.ok());
    auto part = *p;
    follow(*part, kLeader, 1);
    std::mutex mu;
    std::vector<int64_t> offsets;  // every fetch offset the leader was sent
    std::vector<std::vector<std::byte>> batches;  // kept alive while answers point into them
    fake_leader leader([&](const seen_request& s, int32_t corr, int16_t v) -> std::optional<protocol::response_chunks> {
      if (s.api_key == 23) return epochs_answer(s, corr, v, [](const std::string&) { return std::pair{1, int64_t{0}}; });
      protocol::fetch_response resp;
      std::lock_guard g(mu);
      for (const auto& t : s.fetch.topics) {
        auto& rt = resp.responses.emplace_back();
        rt.topic_id = t.topic_id;
        for (const auto& fp : t.partitions) {
          offsets.push_back(fp.fetch_offset);
          auto& rp = rt.partitions.emplace_back();
          rp.partition_index = fp.partition;
          rp.high_watermark = fp.fetch_offset;
          rp.log_start_offset = 0;
          // Three batches of two records from the fetch offset on, up to 300.
          std::vector<std::byte> bytes;
          for (int64_t b = 0; b < 3 && fp.fetch_offset + 2 * b < 300; ++b) {
            auto one = leader_batch(fp.fetch_offset + 2 * b, 2, 1);
            bytes.insert(bytes.end(), one.begin(), one.end());
          }
          batches.push_back(std::move(bytes));
          rp.records = protocol::records_field::of(
              {reinterpret_cast<const uint8_t*>(batches.back().data()), batches.back().size()});
        }
      }
      return protocol::encode_response(corr, v, resp);
    });
    auto f = fetcher_for(leader);
    f->add(part);
    // Until the follower has fetched past some 150 offsets, then power off
    // in the middle of whatever it is doing.
    for (int i = 0; i < 60'000; ++i) {
      {
        std::lock_guard g(mu);
        if (!offsets.empty() && offsets.back() >= 150) break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ffs.crash_after_ops(0);  // the machine stops: nothing more reaches the disk
    f.reset();
    {
      std::lock_guard g(mu);
      ASSERT_FALSE(offsets.empty());
      claimed = offset(*std::max_element(offsets.begin(), offsets.end()));
    }
    part->close();
    env.flush.wait_idle();
    (*lg)->close_without_marker().ignore();
    ASSERT_TRUE(ffs.drop_unsynced().ok());  // and what was not synced is gone
  }
  ASSERT_GE(claimed, offset(150));
  log_env env;
  auto again = storage::log::open(env.ctx(), tmp_.sub("power-0"), "power-0", {});
  ASSERT_TRUE(again.ok());
  EXPECT_GE((*again)->log_end_offset(), claimed) << "the follower told its leader it had offsets a power loss took";
  (*again)->close().ignore();
}

// Issue 31, item 4: a DeleteRecords is answered once every in-sync
// replica's log start reached the target, or NOT_LEADER when the
// leadership moves first.
TEST_F(ReplicaFetcherTest, ADeleteWaitsForEveryInSyncReplicasLogStart) {
  auto p = open_partition("del");
  follow(*p, kMe, 1);  // leads, ISR {1, 2}
  ASSERT_TRUE(p->is_leader());
  for (int i = 0; i < 10; ++i) {
    auto b = storage::testing::make_batch(1, 10, static_cast<uint32_t>(i));
    auto out = p->append(b, 1'700'000'000'000);
    ASSERT_EQ(out.error, errc::ok) << out.message;
  }
  p->on_follower_fetch(kLeader, offset(10), -1, offset(0));
  ASSERT_EQ(p->high_watermark(), offset(10));
  ASSERT_TRUE(p->delete_records_before(offset(6)).ok());
  EXPECT_EQ(p->low_watermark(), offset(0));
  std::vector<errc> got;
  p->on_low_watermark(offset(6), [&](const status& s) { got.push_back(s.code()); });
  EXPECT_TRUE(got.empty());
  p->on_follower_fetch(kLeader, offset(10), -1, offset(4));
  EXPECT_TRUE(got.empty());
  p->on_follower_fetch(kLeader, offset(10), -1, offset(6));
  ASSERT_EQ(got, std::vector<errc>{errc::ok});
  EXPECT_EQ(p->low_watermark(), offset(6));
  // Already there: at once.
  p->on_low_watermark(offset(5), [&](const status& s) { got.push_back(s.code()); });
  ASSERT_EQ(got.size(), 2u);
  // Leadership lost while waiting.
  p->on_low_watermark(offset(8), [&](const status& s) { got.push_back(s.code()); });
  EXPECT_EQ(got.size(), 2u);
  follow(*p, kLeader, 2);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[2], errc::not_leader);
}

// Issue 31, item 5: one producer-state snapshot per roll in the log
// directory; a truncation removes those past its cut and rebuilds from the
// newest one left, not from the log start, and the state it gives is the
// state of the log that is left.
TEST_F(ReplicaFetcherTest, ATruncationRebuildsProducersFromTheNearestSnapshot) {
  auto p = open_partition("snap", storage::testing::small_config());
  follow(*p, kLeader, 1);
  auto idem = [](int64_t base, int32_t seq) {
    storage::batch_spec spec;
    spec.records = 1;
    spec.value_bytes = 300;
    spec.producer_id = 42;
    spec.producer_epoch = 0;
    spec.base_sequence = seq;
    auto b = storage::build_batch(spec);
    auto h = model::batch::parse(b.data());
    h.base_offset = offset(base);
    h.partition_leader_epoch = 1;
    model::batch::write(b.data(), h);
    model::batch::update_crc(b);
    return b;
  };
  for (int32_t i = 0; i < 20; ++i) {
    auto b = idem(i, i);
    ASSERT_TRUE(p->append_replicated(b, leader_epoch(1), offset(i)).ok());
    if (i % 5 == 4) {
      ASSERT_TRUE(p->snapshot_producers().ok());  // as the seal of a roll does
    }
  }
  // Snapshot offsets in the log directory (a roll's seal on the flusher
  // may add its own beside the test's).
  auto snapshots = [&] {
    env_.flush.wait_idle();
    std::vector<int64_t> out;
    auto names = io::filesystem::posix().list(tmp_.path() + "/snap-0");
    EXPECT_TRUE(names.ok());
    if (!names.ok()) return out;
    for (const auto& n : names.value())
      if (n.size() == 29 && n.substr(20) == ".snapshot") out.push_back(std::stoll(n.substr(0, 20)));
    std::sort(out.begin(), out.end());
    return out;
  };
  auto has = [](const std::vector<int64_t>& v, int64_t o) { return std::find(v.begin(), v.end(), o) != v.end(); };
  auto before = snapshots();
  for (int64_t o : {5, 10, 15, 20}) EXPECT_TRUE(has(before, o)) << o;
  ASSERT_TRUE(p->truncate_to(offset(12), leader_epoch(1)).ok());
  auto after = snapshots();
  ASSERT_FALSE(after.empty());
  EXPECT_LE(after.back(), 12);
  EXPECT_TRUE(has(after, 5) && has(after, 10));
  // Rebuilt from the newest snapshot left, not from the log start.
  EXPECT_EQ(partition_test_access::producers_loaded_from(*p), offset(after.back()));
  auto ps = p->producers();
  ASSERT_EQ(ps.size(), 1u);
  EXPECT_EQ(ps[0].last_sequence, 11);
  // Reopened, it loads the newest one and replays past it.
  p->close();
  logs_.back()->close().ignore();
  auto again = open_partition("snap", storage::testing::small_config());
  EXPECT_GE(partition_test_access::producers_loaded_from(*again), offset(10));
  ASSERT_EQ(again->producers().size(), 1u);
  EXPECT_EQ(again->producers()[0].last_sequence, 11);
}

// Issue 31, item 10: a broker shutting down stops leading, and a state the
// control plane applies afterwards (its watch still running) does not make
// it lead again.
TEST_F(ReplicaFetcherTest, APartitionLeftAtShutdownNeverLeadsAgain) {
  auto p = open_partition("left");
  follow(*p, kMe, 1);
  ASSERT_TRUE(p->is_leader());
  p->leave();
  EXPECT_FALSE(p->is_leader());
  follow(*p, kMe, 2);  // the store still names this broker, at a newer epoch
  EXPECT_FALSE(p->is_leader());
  EXPECT_EQ(p->check_leader(), errc::not_leader);
  auto b = storage::testing::make_batch(1, 10, 1);
  EXPECT_EQ(p->append(b, 0).error, errc::not_leader);
}


// A link of the test's own (replication/leader_link.h): answers fetches with
// `answer`, or breaks when `broken` is set.
class scripted_link final : public leader_link {
 public:
  using fetch_fn = std::function<protocol::fetch_response(const protocol::fetch_request&)>;
  scripted_link(fetch_fn answer, const bool& broken) : answer_(std::move(answer)), broken_(broken) {}
  result<protocol::fetch_response> fetch(const protocol::fetch_request& req, int16_t) override {
    if (broken_) return error{errc::unavailable, "the test broke the link"};
    return answer_(req);
  }
  result<protocol::offset_for_leader_epoch_response> offset_for_leader_epoch(
      const protocol::offset_for_leader_epoch_request&, int16_t) override {
    return error{errc::unavailable, "not asked in this test"};
  }

 private:
  fetch_fn answer_;
  const bool& broken_;
};

// The seam a simulation drives: a fetcher built without its own thread
// does nothing until its owner runs a round, and reaches its leader only
// through the links its factory hands out. A link that breaks is dropped
// and the factory asked again at a later round; a factory that cannot give
// one leaves the round with the link down and nothing changed.
TEST_F(ReplicaFetcherTest, WithoutItsOwnThreadAFetcherRunsRoundsWhenToldThroughItsLinks) {
  auto p = open_partition("stepped");
  follow(*p, kLeader, 1);
  const auto first = leader_batch(0, 3, 1);
  const auto second = leader_batch(3, 2, 1);
  std::vector<int64_t> fetched_from;
  bool broken = false, refuse = false;
  int opened = 0;
  auto answer = [&](const protocol::fetch_request& req) {
    protocol::fetch_response resp;
    for (const auto& t : req.topics) {
      auto& rt = resp.responses.emplace_back();
      rt.topic_id = t.topic_id;
      for (const auto& q : t.partitions) {
        fetched_from.push_back(q.fetch_offset);
        auto& rp = rt.partitions.emplace_back();
        rp.partition_index = q.partition;
        rp.log_start_offset = 0;
        const std::vector<std::byte>* b = q.fetch_offset == 0 ? &first : q.fetch_offset == 3 ? &second : nullptr;
        rp.high_watermark = b ? q.fetch_offset : 5;
        rp.records = b ? protocol::records_field::of({reinterpret_cast<const uint8_t*>(b->data()), b->size()})
                       : protocol::records_field::empty();
      }
    }
    return resp;
  };
  link_factory links = [&](int32_t source) -> result<std::unique_ptr<leader_link>> {
    EXPECT_EQ(source, kLeader);
    if (refuse) return error{errc::unavailable, "the test refuses links"};
    ++opened;
    return std::unique_ptr<leader_link>(std::make_unique<scripted_link>(answer, broken));
  };
  fetcher_options o;
  o.node_id = kMe;
  o.source = kLeader;
  o.broker_epoch = [] { return int64_t{7}; };
  o.backoff_ms = 10;
  o.wait_max_ms = 10;
  o.partition_max_bytes = 1 << 20;
  o.response_max_bytes = 10 << 20;
  o.socket_timeout_ms = 30'000;
  replica_fetcher f(o, links, env_.clk, /*own_thread=*/false);
  f.add(p);
  EXPECT_EQ(opened, 0);  // no thread: nothing ran

  // Round 1: no epoch history to compare, so it goes straight to
  // fetching; round 2 fetches from 0 and appends the first batch.
  EXPECT_TRUE(f.run_round().worked);
  EXPECT_TRUE(f.run_round().worked);
  EXPECT_EQ(opened, 1);
  EXPECT_EQ(p->log_end_offset(), offset(3));
  // The link breaks: dropped, and the round says so.
  broken = true;
  auto r = f.run_round();
  EXPECT_FALSE(r.worked);
  EXPECT_TRUE(r.link_down);
  broken = false;
  // No link to be had: nothing changes.
  refuse = true;
  r = f.run_round();
  EXPECT_TRUE(r.link_down);
  EXPECT_EQ(opened, 1);
  EXPECT_EQ(p->log_end_offset(), offset(3));
  // A new link: the fetch goes on from the log end.
  refuse = false;
  EXPECT_TRUE(f.run_round().worked);
  EXPECT_EQ(opened, 2);
  EXPECT_EQ(p->log_end_offset(), offset(5));
  EXPECT_EQ(p->high_watermark(), offset(3));  // the leader's, as its answer said
  EXPECT_EQ(fetched_from, (std::vector<int64_t>{0, 3}));  // the broken link delivered nothing
  f.remove(p);
}

// A link whose OffsetForLeaderEpoch runs `meanwhile` before it answers (the
// broker's metadata thread acting while the fetcher waits for the answer),
// and which records the partitions each Fetch names.
class waiting_link final : public leader_link {
 public:
  waiting_link(std::function<void()> meanwhile, std::vector<std::pair<int32_t, int64_t>>& fetched)
      : meanwhile_(std::move(meanwhile)), fetched_(fetched) {}
  result<protocol::fetch_response> fetch(const protocol::fetch_request& req, int16_t) override {
    protocol::fetch_response resp;
    for (const auto& t : req.topics) {
      auto& rt = resp.responses.emplace_back();
      rt.topic_id = t.topic_id;
      for (const auto& q : t.partitions) {
        fetched_.push_back({t.topic_id[0], q.fetch_offset});
        auto& rp = rt.partitions.emplace_back();
        rp.partition_index = q.partition;
        rp.log_start_offset = 0;
        rp.high_watermark = 0;
        rp.records = protocol::records_field::empty();
      }
    }
    return resp;
  }
  result<protocol::offset_for_leader_epoch_response> offset_for_leader_epoch(
      const protocol::offset_for_leader_epoch_request& req, int16_t) override {
    if (meanwhile_) std::exchange(meanwhile_, nullptr)();
    protocol::offset_for_leader_epoch_response resp;
    for (const auto& t : req.topics) {
      auto& rt = resp.topics.emplace_back();
      rt.topic = t.topic;
      for (const auto& q : t.partitions) {
        auto& rp = rt.partitions.emplace_back();
        rp.partition = q.partition;
        rp.leader_epoch = 3;
        rp.end_offset = 15;
      }
    }
    return resp;
  }

 private:
  std::function<void()> meanwhile_;
  std::vector<std::pair<int32_t, int64_t>>& fetched_;
};

// One round truncates some partitions, then fetches the others: a
// partition that started leading while the truncation's answer was awaited
// is not in that fetch. Sent, it named this broker's log end as a leader's
// (its own new batches) at the old leader epoch, and a deposed leader whose
// metadata lagged counted it: its high watermark passed batches this broker
// never had (the cluster simulation found it: seed 115 with lagging
// metadata, an acknowledged batch lost).
TEST_F(ReplicaFetcherTest, APartitionThatStartedLeadingDuringTheRoundIsNotFetched) {
  auto leads = open_partition("lead");  // topic id byte 0: 4
  follow(*leads, kLeader, 1);
  auto trunc = open_partition("trunc");  // topic id byte 0: 5
  epochs_1_and_3(*trunc);
  std::vector<std::pair<int32_t, int64_t>> fetched;
  replica_fetcher* fp = nullptr;
  auto meanwhile = [&] {
    // The controller makes this broker lead "lead" at epoch 2; the broker
    // applies it, takes it off the fetcher and appends a producer's batch.
    partition_state st;
    st.leader = kMe;
    st.leader_epoch = 2;
    st.isr = {kMe, kLeader};
    st.partition_epoch = 2;
    ASSERT_TRUE(leads->apply_state({kLeader, kMe, 3}, st));
    fp->remove(leads);
    auto b = storage::testing::make_batch(2, 10, 1);
    ASSERT_EQ(leads->append(b, 1'700'000'000'000).error, errc::ok);
  };
  link_factory links = [&](int32_t) -> result<std::unique_ptr<leader_link>> {
    return std::unique_ptr<leader_link>(std::make_unique<waiting_link>(meanwhile, fetched));
  };
  fetcher_options o;
  o.node_id = kMe;
  o.source = kLeader;
  o.broker_epoch = [] { return int64_t{7}; };
  o.backoff_ms = 10;
  o.partition_max_bytes = 1 << 20;
  o.response_max_bytes = 10 << 20;
  o.socket_timeout_ms = 30'000;
  replica_fetcher f(o, links, env_.clk, /*own_thread=*/false);
  fp = &f;
  // Round 1: "lead" has no epoch history: it goes to fetching at once.
  f.add(leads);
  f.run_round();
  // Round 2: "trunc" asks where epoch 3 ends; meanwhile "lead" leads.
  f.add(trunc);
  f.run_round();
  ASSERT_TRUE(leads->is_leader());
  for (const auto& [topic, from] : fetched)
    EXPECT_NE(topic, 4) << "a fetch named the partition this broker leads, from its log end " << from;
  f.remove(trunc);
}

// A leader served in-process: what the Fetch handler does for a follower,
// reduced to the partition's own calls (the simulated cluster runs the
// real handler instead). `up` false breaks every exchange.
class in_process_leader final : public leader_link {
 public:
  in_process_leader(std::shared_ptr<partition> leader, int32_t follower, const bool& up)
      : leader_(std::move(leader)), follower_(follower), up_(up) {}
  result<protocol::fetch_response> fetch(const protocol::fetch_request& req, int16_t) override {
    if (!up_) return error{errc::unavailable, "cut"};
    protocol::fetch_response resp;
    held_.clear();
    held_.reserve(8);
    for (const auto& t : req.topics) {
      auto& rt = resp.responses.emplace_back();
      rt.topic_id = t.topic_id;
      for (const auto& q : t.partitions) {
        auto& rp = rt.partitions.emplace_back();
        rp.partition_index = q.partition;
        leader_->on_follower_fetch(follower_, offset(q.fetch_offset), req.replica_state.replica_epoch);
        auto bytes = leader_->read_bytes(offset(q.fetch_offset), 1 << 20, leader_->log_end_offset());
        rp.high_watermark = leader_->high_watermark().value();
        rp.log_start_offset = leader_->log_start_offset().value();
        held_.push_back(bytes.ok() ? std::move(bytes).value() : std::vector<std::byte>{});
        const auto& b = held_.back();
        rp.records = b.empty() ? protocol::records_field::empty()
                               : protocol::records_field::of({reinterpret_cast<const uint8_t*>(b.data()), b.size()});
      }
    }
    return resp;
  }
  result<protocol::offset_for_leader_epoch_response> offset_for_leader_epoch(
      const protocol::offset_for_leader_epoch_request&, int16_t) override {
    return error{errc::unavailable, "not asked in this test"};
  }

 private:
  std::shared_ptr<partition> leader_;
  int32_t follower_;
  const bool& up_;
  std::vector<std::vector<std::byte>> held_;  // the answer's bytes, until the next call
};

// Two brokers' replica managers without threads of their own, as the
// simulated cluster runs them: the follower fetches only when its rounds
// are run, the leader proposes ISR changes only in its upkeep rounds, and
// what they do follows from the rounds run and the clock alone.
TEST_F(ReplicaFetcherTest, ReplicaManagersWithoutThreadsReplicateWhenTheirRoundsRun) {
  auto lead = open_partition("stepped", {}, kLeader);
  auto follower = open_partition("stepped");
  const replica_list replicas{kLeader, kMe};
  const partition_state st{kLeader, 1, {kLeader, kMe}, 1};
  replica_manager on_leader(kLeader), on_follower(kMe);
  on_leader.add_slots("stepped", 1);
  on_leader.install("stepped", 0, lead, replicas, st);
  on_follower.add_slots("stepped", 1);
  on_follower.install("stepped", 0, follower, replicas, st);
  ASSERT_TRUE(lead->is_leader());

  bool up = true;
  std::vector<isr_request> asked;
  auto options = [&] {
    replica_manager::replication_options o;
    o.fetch.broker_epoch = [] { return int64_t{7}; };
    o.fetch.backoff_ms = 100;
    o.fetch.partition_max_bytes = 1 << 20;
    o.fetch.response_max_bytes = 10 << 20;
    o.fetch.socket_timeout_ms = 30'000;
    o.lag_max_ms = 10'000;
    o.own_threads = false;
    o.links = [&](int32_t) -> result<std::unique_ptr<leader_link>> {
      return std::unique_ptr<leader_link>(std::make_unique<in_process_leader>(lead, kMe, up));
    };
    o.write_isr = [&](const isr_request& r) { asked.push_back(r); };
    return o;
  };
  on_leader.start_replication(options(), env_.clk);
  on_follower.start_replication(options(), env_.clk);

  for (int i = 0; i < 3; ++i) {
    auto b = storage::testing::make_batch(4, 10, static_cast<uint32_t>(i + 1));
    ASSERT_EQ(lead->append(b, 0).error, errc::ok);
  }
  EXPECT_EQ(lead->high_watermark(), offset(0));  // nobody fetched yet: no thread ran
  // Round 1 starts following (no history to compare), round 2 copies the
  // batches, round 3 tells the leader they are there, round 4 brings the
  // leader's high watermark back.
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(on_follower.run_fetch_rounds());
  EXPECT_EQ(follower->log_end_offset(), offset(12));
  EXPECT_EQ(lead->high_watermark(), offset(12));
  EXPECT_EQ(follower->high_watermark(), offset(12));
  on_leader.run_upkeep_round();
  EXPECT_TRUE(asked.empty());  // the follower is in sync

  // Cut: the follower's rounds exchange nothing, and once it lagged past
  // replica.lag.time.max.ms by the clock the leader asks to drop it.
  up = false;
  auto late = storage::testing::make_batch(1, 10, 9);
  ASSERT_EQ(lead->append(late, 0).error, errc::ok);
  EXPECT_FALSE(on_follower.run_fetch_rounds());
  env_.clk.advance_ms(10'001);
  on_leader.run_upkeep_round();
  ASSERT_EQ(asked.size(), 1u);
  EXPECT_EQ(asked[0].isr, (std::vector<int32_t>{kLeader}));
  on_follower.stop_replication();
  on_leader.stop_replication();
}

}  // namespace
}  // namespace sluice::cluster

namespace sluice::cluster {
namespace {

// A follower applies the leader's transactions as it appends them: a
// transactional batch opens one, the replicated marker ends it (an abort
// goes to its own aborted index), its last stable offset follows its high
// watermark, and a truncation below a marker opens the transaction again
// and takes the abort out of the index.
TEST_F(ReplicaFetcherTest, AFollowerKeepsTheLeadersTransactions) {
  auto p = open_partition("txnf");
  follow(*p, kLeader, 1);
  auto stamped = [](std::vector<std::byte> b, int64_t base) {
    auto h = model::batch::parse(b.data());
    h.base_offset = offset(base);
    h.partition_leader_epoch = 1;
    model::batch::write(b.data(), h);
    return b;  // base offset and epoch are outside the CRC
  };
  storage::batch_spec spec;
  spec.producer_id = 8;
  spec.producer_epoch = 0;
  spec.base_sequence = 0;
  spec.transactional = true;
  auto data = stamped(storage::build_batch(spec), 0);
  auto m = protocol::records::build_marker_batch(8, 0, {false, 1}, 1'700'000'000'000);
  auto marker = stamped(std::vector<std::byte>(reinterpret_cast<const std::byte*>(m.data()),
                                               reinterpret_cast<const std::byte*>(m.data()) + m.size()),
                        1);
  ASSERT_TRUE(p->append_replicated(data, leader_epoch(1), offset(0)).ok());
  p->set_leader_high_watermark(offset(1));
  EXPECT_EQ(p->last_stable_offset(), offset(0)) << "the transaction is open";
  ASSERT_TRUE(p->append_replicated(marker, leader_epoch(1), offset(1)).ok());
  EXPECT_EQ(p->last_stable_offset(), offset(0)) << "ended, but its marker is not committed yet";
  p->set_leader_high_watermark(offset(2));
  EXPECT_EQ(p->last_stable_offset(), offset(2));
  auto a = p->aborted_transactions(offset(0), offset(2));
  ASSERT_TRUE(a.ok());
  ASSERT_EQ(a->txns.size(), 1u);
  EXPECT_EQ(a->txns[0].producer_id, 8);
  EXPECT_EQ(a->txns[0].first, offset(0));
  EXPECT_EQ(a->txns[0].last, offset(1));

  // A control batch that holds no marker is refused whole.
  auto bogus = stamped(storage::build_batch(spec), 2);
  auto h = model::batch::parse(bogus.data());
  h.attributes = static_cast<int16_t>(h.attributes | model::attr::control);
  model::batch::write(bogus.data(), h);
  model::batch::update_crc(bogus);
  EXPECT_EQ(p->append_replicated(bogus, leader_epoch(1), offset(2)).code(), errc::invalid_txn_marker);
  EXPECT_EQ(p->log_end_offset(), offset(2));

  // The marker cut away (an unclean election's truncation): open again.
  ASSERT_TRUE(p->truncate_to(offset(1), leader_epoch(1)).ok());
  EXPECT_EQ(p->open_transactions(), 1u);
  EXPECT_EQ(p->last_stable_offset(), offset(0));
  EXPECT_TRUE(p->aborted_transactions(offset(0), offset(10))->txns.empty());
}

}  // namespace
}  // namespace sluice::cluster
