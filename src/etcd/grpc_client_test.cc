// grpc_client against real etcd members (Debian's etcd-server), started on
// free loopback ports by testing/etcd_cluster. One 3-member cluster serves
// the whole suite; the tests run in order and the destructive ones (killing
// members) come last, each restarting what it killed.

#include "etcd/grpc_client.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <future>
#include <iostream>
#include <mutex>
#include <set>
#include <thread>

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/clock.h"
#include "etcd/lease_keeper.h"
#include "etcd/testing/etcd_cluster.h"

namespace sluice::etcd {
namespace {

using testing::etcd_cluster;

void sleep_ms(int64_t ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

// Waits (bounded) for pred; true if it came true.
template <class Pred>
bool eventually(int64_t timeout_ms, Pred pred) {
  deadline d(timeout_ms, sluice::clock::system());
  while (!d.passed()) {
    if (pred()) return true;
    sleep_ms(20);
  }
  return pred();
}

// Sets `key` to `value` exactly once, the way callers are meant to write
// (client.h): read, then a compare-and-swap on the mod_revision read; after
// "outcome unknown" (usual while a leader is being elected) the next read
// tells whether the write landed. Gives up after timeout_ms.
status write_once(client& c, const std::string& key, const std::string& value,
                  int64_t timeout_ms = 15'000) {
  deadline d(timeout_ms, sluice::clock::system());
  error last{errc::unavailable, "no attempt"};
  while (!d.passed()) {
    auto r = c.range(key_range::one(key));
    if (!r.ok()) {
      last = r.err();
      continue;
    }
    if (!r->kvs.empty() && r->kvs[0].value == value) return {};
    const int64_t mod = r->kvs.empty() ? 0 : r->kvs[0].mod_revision;
    auto t = c.txn(txn_request{{compare::unchanged_since(key, mod)}, {put_op{key, value, {}}}, {}});
    if (t.ok() && t->succeeded) return {};
    if (!t.ok()) last = t.err();
  }
  return last;
}

// Deletes `key` (if present) the same way.
status delete_once(client& c, const std::string& key, int64_t timeout_ms = 15'000) {
  deadline d(timeout_ms, sluice::clock::system());
  error last{errc::unavailable, "no attempt"};
  while (!d.passed()) {
    auto r = c.range(key_range::one(key));
    if (!r.ok()) {
      last = r.err();
      continue;
    }
    if (r->kvs.empty()) return {};
    auto t = c.txn(txn_request{{compare::unchanged_since(key, r->kvs[0].mod_revision)},
                               {delete_op{key_range::one(key)}},
                               {}});
    if (t.ok() && t->succeeded) return {};
    if (!t.ok()) last = t.err();
  }
  return last;
}

class grpc_client_test : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto c = etcd_cluster::start(3);
    ASSERT_TRUE(c.ok()) << c.err().message;
    cluster_ = std::move(c).value().release();
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(cluster_, nullptr) << "the etcd cluster did not start"; }

  static std::unique_ptr<grpc_client> make_client(std::string endpoints,
                                                  int64_t budget_ms = 5'000) {
    grpc_client_options o;
    o.endpoints = std::move(endpoints);
    o.request_timeout_ms = 1'000;
    o.retry_budget_ms = budget_ms;
    auto c = grpc_client::create(o, clock::system());
    EXPECT_TRUE(c.ok()) << c.err().message;
    return std::move(c).value();
  }

  static etcd_cluster* cluster_;
};

etcd_cluster* grpc_client_test::cluster_ = nullptr;

TEST(grpc_client_options_test, endpoints_are_parsed_and_https_refused) {
  auto e = parse_endpoints(" http://127.0.0.1:2379, 10.0.0.2:22379/ ,");
  ASSERT_TRUE(e.ok()) << e.err().message;
  ASSERT_EQ(e->size(), 2u);
  EXPECT_EQ((*e)[0].target, "127.0.0.1:2379");
  EXPECT_EQ((*e)[1].url, "http://10.0.0.2:22379");
  auto tls = parse_endpoints("https://127.0.0.1:2379");
  ASSERT_FALSE(tls.ok());
  EXPECT_EQ(tls.code(), errc::invalid_config);
  EXPECT_NE(tls.err().message.find("https"), std::string::npos);
  EXPECT_EQ(parse_endpoints("").code(), errc::invalid_config);
  EXPECT_EQ(parse_endpoints("127.0.0.1").code(), errc::invalid_config);
  EXPECT_EQ(parse_endpoints("127.0.0.1:99999").code(), errc::invalid_config);
  EXPECT_EQ(parse_endpoints("unix:///tmp/x").code(), errc::invalid_config);
  grpc_client_options o;
  o.endpoints = "127.0.0.1:1";
  o.backoff_jitter_percent = 101;
  EXPECT_EQ(grpc_client::create(o, clock::system()).code(), errc::invalid_config);
}

TEST(etcd_cluster_test, single_member_starts_serves_and_restarts) {
  auto c = etcd_cluster::start(1);
  ASSERT_TRUE(c.ok()) << c.err().message;
  auto& cl = **c;
  grpc_client_options o;
  o.endpoints = cl.endpoints();
  auto client = grpc_client::create(o, clock::system());
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE((*client)->put("/one", "1").ok());
  ASSERT_TRUE(cl.stop(0).ok());
  ASSERT_TRUE(cl.restart(0).ok());
  ASSERT_TRUE(cl.wait_healthy(0, 20'000).ok());
  auto r = (*client)->range(key_range::one("/one"));
  ASSERT_TRUE(r.ok()) << r.err().message;
  ASSERT_EQ(r->kvs.size(), 1u);  // data survived the restart
}

// A TCP listener on 127.0.0.1:port that never accepts: the kernel
// completes every connection into its backlog and nothing ever answers,
// as a member behind a network cut that holds connections does. Closed
// with the object.
class silent_listener {
 public:
  explicit silent_listener(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ok_ = ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && ::listen(fd_, 64) == 0;
  }
  ~silent_listener() { close(); }
  bool ok() const { return ok_; }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
  bool ok_ = false;
};

int port_of(const std::string& endpoint) {
  return std::stoi(endpoint.substr(endpoint.rfind(':') + 1));
}

// A member unreachable for a while (its port holding connections without
// answering, so every connection attempt of the client times out and its
// channel sits in TRANSIENT_FAILURE) and then back is used again within
// seconds. gRPC 1.51 cuts each connection attempt at max(its minimum
// connect timeout, the reconnect backoff); with 100 ms and 1 s every
// attempt was cut near a second, calls failed fast without waiting for a
// connection, and nothing waited for a handshake to finish: a broker cut
// off from etcd for 8 s was not back 90 s after the cut healed.
TEST(grpc_client_reconnect_test, a_member_back_from_a_cut_is_used_again) {
  auto started = etcd_cluster::start(1);
  ASSERT_TRUE(started.ok()) << started.err().message;
  auto& cl = **started;
  grpc_client_options o;
  o.endpoints = cl.endpoints();
  o.request_timeout_ms = 1'000;
  o.retry_budget_ms = 2'000;
  auto c = grpc_client::create(o, clock::system());
  ASSERT_TRUE(c.ok()) << c.err().message;
  auto& client = **c;
  ASSERT_TRUE(client.put("/cut/k", "before").ok());

  // The cut: the member goes, its port holds connections and never answers.
  ASSERT_TRUE(cl.stop(0).ok());
  silent_listener hole(port_of(cl.endpoint(0)));
  ASSERT_TRUE(hole.ok()) << "cannot listen on the member's port";
  const clock& clk = clock::system();
  for (deadline cut(8'000, sluice::clock::system()); !cut.passed();)
    EXPECT_FALSE(client.range(key_range::one("/cut/k")).ok());

  // The heal: the member answers on its port again.
  hole.close();
  ASSERT_TRUE(cl.restart(0).ok());
  ASSERT_TRUE(cl.wait_healthy(0, 20'000).ok());
  const int64_t healed_ms = clk.monotonic_ms();
  // Generous for a busy machine: a working client needs a second or two.
  bool back = false;
  std::string last;
  for (deadline d(45'000, sluice::clock::system()); !d.passed() && !back;) {
    auto r = client.range(key_range::one("/cut/k"));
    back = r.ok();
    if (!back) last = r.err().message;
  }
  ASSERT_TRUE(back) << "not back 45 s after the heal: " << last;
  std::cout << "back " << clk.monotonic_ms() - healed_ms << " ms after the heal\n";
  EXPECT_TRUE(client.put("/cut/k", "after").ok());
}

// wind_down(): a call that would retry for its whole budget against an
// unreachable etcd returns once the grace has passed (plus at most one
// attempt's deadline), so a broker stops within seconds of SIGTERM.
TEST(grpc_client_reconnect_test, wind_down_ends_calls_after_the_grace) {
  // A port that holds connections and never answers.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(fd, 64), 0);
  socklen_t len = sizeof a;
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  grpc_client_options o;
  o.endpoints = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  o.request_timeout_ms = 1'000;
  o.retry_budget_ms = 60'000;
  auto c = grpc_client::create(o, clock::system());
  ASSERT_TRUE(c.ok()) << c.err().message;
  auto& client = **c;
  const clock& clk = clock::system();
  const int64_t t0 = clk.monotonic_ms();
  auto read = std::async(std::launch::async, [&] { return client.range(key_range::one("/k")); });
  auto write = std::async(std::launch::async, [&] { return client.put("/k", "v"); });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  client.wind_down(500);
  // Generous: the budget is 60 s; the grace and one attempt are 1.5 s.
  ASSERT_EQ(read.wait_for(std::chrono::seconds(20)), std::future_status::ready);
  ASSERT_EQ(write.wait_for(std::chrono::seconds(20)), std::future_status::ready);
  EXPECT_FALSE(read.get().ok());
  EXPECT_FALSE(write.get().ok());
  std::cout << "calls ended " << clk.monotonic_ms() - t0 << " ms after they started\n";
  // Later calls fail at once.
  const int64_t t1 = clk.monotonic_ms();
  auto later = client.range(key_range::one("/k"));
  EXPECT_EQ(later.code(), errc::shutting_down) << later.err().message;
  EXPECT_LT(clk.monotonic_ms() - t1, 1'000);
  ::close(fd);
}

TEST_F(grpc_client_test, put_get_and_prefix_range) {
  auto c = make_client(cluster_->endpoints());
  auto p = c->put("/it/kv/a", "1");
  ASSERT_TRUE(p.ok()) << p.err().message;
  ASSERT_TRUE(c->put("/it/kv/b", "2").ok());
  ASSERT_TRUE(c->put("/it/kvz", "other").ok());
  auto p2 = c->put("/it/kv/a", "3", put_options{.prev_kv = true});
  ASSERT_TRUE(p2.ok());
  ASSERT_TRUE(p2->prev_kv.has_value());
  EXPECT_EQ(p2->prev_kv->value, "1");
  EXPECT_EQ(p2->header_revision, p->header_revision + 3);

  auto one = c->range(key_range::one("/it/kv/a"));
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->kvs.size(), 1u);
  EXPECT_EQ(one->kvs[0].value, "3");
  EXPECT_EQ(one->kvs[0].version, 2);
  EXPECT_EQ(one->kvs[0].create_revision, p->header_revision);
  EXPECT_EQ(one->kvs[0].mod_revision, p2->header_revision);

  auto all = c->range(key_range::prefix("/it/kv/"));
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->kvs.size(), 2u);
  EXPECT_EQ(all->kvs[1].key, "/it/kv/b");
  auto limited = c->range(key_range::prefix("/it/kv/"), range_options{.limit = 1});
  ASSERT_TRUE(limited.ok());
  EXPECT_TRUE(limited->more);
  EXPECT_EQ(limited->count, 2);
  auto old = c->range(key_range::one("/it/kv/a"), range_options{.revision = p->header_revision});
  ASSERT_TRUE(old.ok());
  EXPECT_EQ(old->kvs[0].value, "1");
  EXPECT_EQ(c->range(key_range::one("/x"), range_options{.revision = 1'000'000}).code(),
            errc::offset_out_of_range);

  auto d = c->delete_range(key_range::prefix("/it/kv/"), true);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->deleted, 2);
  EXPECT_EQ(d->prev_kvs.size(), 2u);
}

TEST_F(grpc_client_test, txn_create_if_absent_and_compare_and_swap) {
  auto c = make_client(cluster_->endpoints());
  txn_request create{{compare::absent("/it/txn/leader")},
                     {put_op{"/it/txn/leader", "a", {}}},
                     {range_op{key_range::one("/it/txn/leader"), {}}}};
  auto first = c->txn(create);
  ASSERT_TRUE(first.ok()) << first.err().message;
  EXPECT_TRUE(first->succeeded);
  ASSERT_EQ(first->results.size(), 1u);
  EXPECT_TRUE(std::holds_alternative<put_result>(first->results[0]));
  auto second = c->txn(create);
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(second->succeeded);
  const auto& seen = std::get<range_result>(second->results[0]);
  ASSERT_EQ(seen.kvs.size(), 1u);
  EXPECT_EQ(seen.kvs[0].value, "a");

  txn_request cas{{compare::unchanged_since("/it/txn/leader", first->header_revision),
                   compare::value_is("/it/txn/leader", compare_op::equal, "a")},
                  {put_op{"/it/txn/leader", "b", {}}},
                  {}};
  auto won = c->txn(cas);
  ASSERT_TRUE(won.ok());
  EXPECT_TRUE(won->succeeded);
  auto lost = c->txn(cas);
  ASSERT_TRUE(lost.ok());
  EXPECT_FALSE(lost->succeeded);
  // etcd refuses a branch writing one key twice.
  auto dup =
      c->txn(txn_request{{}, {put_op{"/it/txn/d", "1", {}}, put_op{"/it/txn/d", "2", {}}}, {}});
  EXPECT_EQ(dup.code(), errc::invalid_argument);
}

TEST_F(grpc_client_test, lease_key_expires_when_keepalives_stop) {
  auto c = make_client(cluster_->endpoints());
  auto lease = c->lease_grant(2);
  ASSERT_TRUE(lease.ok()) << lease.err().message;
  EXPECT_GE(lease->ttl_s, 2);
  ASSERT_TRUE(c->put("/it/lease/k", "v", put_options{.lease = lease->id}).ok());
  auto ttl = c->lease_time_to_live(lease->id);
  ASSERT_TRUE(ttl.ok());
  EXPECT_GT(*ttl, 0);
  auto ka = c->lease_keepalive_once(lease->id, 0);
  ASSERT_TRUE(ka.ok()) << ka.err().message;
  EXPECT_GE(*ka, 2);
  EXPECT_TRUE(eventually(6'000, [&] {
    auto r = c->range(key_range::one("/it/lease/k"));
    return r.ok() && r->kvs.empty();
  })) << "the key outlived its lease";
  auto gone = c->lease_keepalive_once(lease->id, 0);
  ASSERT_TRUE(gone.ok());
  EXPECT_EQ(*gone, 0);
  EXPECT_EQ(c->lease_revoke(lease->id).code(), errc::not_found);
  EXPECT_EQ(c->put("/it/lease/k2", "v", put_options{.lease = lease->id}).code(), errc::not_found);
}

TEST_F(grpc_client_test, lease_keeper_keeps_the_lease_past_three_ttls) {
  auto c = make_client(cluster_->endpoints());
  auto lease = c->lease_grant(2);
  ASSERT_TRUE(lease.ok());
  ASSERT_TRUE(c->put("/it/keeper/k", "v", put_options{.lease = lease->id}).ok());
  std::atomic<int> lost{0};
  {
    lease_keeper keeper(*c, lease->id, lease->ttl_s, [&](const error&) { lost++; }, clock::system());
    sleep_ms(lease->ttl_s * 1000 * 3 + 500);
    EXPECT_EQ(lost.load(), 0);
    EXPECT_GE(keeper.renewals(), 6);
    auto r = c->range(key_range::one("/it/keeper/k"));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->kvs.size(), 1u);
  }
  // Revoking it makes a new keeper report the loss at its first renewal.
  ASSERT_TRUE(c->lease_revoke(lease->id).ok());
  lease_keeper after(*c, lease->id, lease->ttl_s, [&](const error&) { lost++; }, clock::system());
  EXPECT_TRUE(eventually(3'000, [&] { return lost.load() == 1; }));
  EXPECT_TRUE(c->range(key_range::one("/it/keeper/k"))->kvs.empty());
}

TEST_F(grpc_client_test, endpoints_status_shows_members_and_leader) {
  auto c = make_client(cluster_->endpoints());
  auto st = c->endpoints_status();
  ASSERT_TRUE(st.ok());
  ASSERT_EQ(st->size(), 3u);
  uint64_t leader = 0;
  std::set<uint64_t> members;
  for (const auto& e : *st) {
    EXPECT_TRUE(e.reachable) << e.endpoint << ": " << e.error;
    EXPECT_NE(e.member_id, 0u);
    EXPECT_NE(e.leader_id, 0u);
    EXPECT_GT(e.raft_term, 0u);
    EXPECT_GT(e.db_size_bytes, 0);
    members.insert(e.member_id);
    if (leader == 0) leader = e.leader_id;
    EXPECT_EQ(e.leader_id, leader);
  }
  EXPECT_EQ(members.size(), 3u);
  EXPECT_TRUE(members.contains(leader));
}

// Collects watch updates from the watch thread.
struct watch_log {
  std::mutex mu;
  std::vector<watch_update> updates;
  watch_callback cb() {
    return [this](const watch_update& u) {
      std::lock_guard lk(mu);
      updates.push_back(u);
    };
  }
  std::vector<watch_event> events() {
    std::lock_guard lk(mu);
    std::vector<watch_event> out;
    for (const auto& u : updates) out.insert(out.end(), u.events.begin(), u.events.end());
    return out;
  }
  int count(watch_update::kind k) {
    std::lock_guard lk(mu);
    return static_cast<int>(
        std::count_if(updates.begin(), updates.end(), [&](auto& u) { return u.type == k; }));
  }
};

TEST_F(grpc_client_test, watch_delivers_in_order_and_resumes_after_its_member_is_killed) {
  // A fresh client starts at its first endpoint, member 0: the watch
  // stream goes there.
  auto watcher = make_client(cluster_->endpoints());
  auto writer = make_client(cluster_->endpoint(1) + "," + cluster_->endpoint(2));
  auto start = writer->put("/it/watch/start", "0");
  ASSERT_TRUE(start.ok());
  watch_log log;
  auto w = watcher->watch(key_range::prefix("/it/watch/"), start->header_revision + 1, log.cb());
  ASSERT_TRUE(w.ok());
  for (int i = 0; i < 10; ++i)
    ASSERT_TRUE(writer->put("/it/watch/k" + std::to_string(i), "a").ok());
  ASSERT_TRUE(eventually(5'000, [&] { return log.events().size() == 10; }));

  ASSERT_TRUE(cluster_->kill(0).ok());
  // Member 0 may have led: writes during the election may come back
  // "outcome unknown", so write the careful way.
  for (int i = 0; i < 10; ++i) {
    auto p = write_once(*writer, "/it/watch/k" + std::to_string(i), "b");
    ASSERT_TRUE(p.ok()) << p.err().message;
  }
  auto d = delete_once(*writer, "/it/watch/k0");
  ASSERT_TRUE(d.ok()) << d.err().message;
  ASSERT_TRUE(eventually(10'000, [&] { return log.events().size() == 21; }))
      << "got " << log.events().size() << " events";
  EXPECT_EQ(log.count(watch_update::kind::interrupted), 1);
  EXPECT_EQ(log.count(watch_update::kind::resumed), 1);
  EXPECT_EQ(log.count(watch_update::kind::compacted), 0);
  auto ev = log.events();
  for (size_t i = 1; i < ev.size(); ++i)
    EXPECT_EQ(ev[i].kv.mod_revision, ev[i - 1].kv.mod_revision + 1) << i;
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(ev[i].kv.value, "a");
    EXPECT_EQ(ev[10 + i].kv.value, "b");
    EXPECT_EQ(ev[10 + i].kv.version, 2);
  }
  EXPECT_EQ(ev[20].type, watch_event::kind::del);
  (*w)->cancel();

  ASSERT_TRUE(cluster_->restart(0).ok());
  ASSERT_TRUE(cluster_->wait_healthy(0, 20'000).ok());
}

TEST_F(grpc_client_test, watch_from_now_and_cancel_from_the_callback) {
  auto c = make_client(cluster_->endpoints());
  std::atomic<int> calls{0};
  std::unique_ptr<watch_handle> w;
  std::mutex mu;
  std::unique_lock lk(mu);  // the callback waits until `w` is set
  auto r = c->watch(key_range::prefix("/it/now/"), 0, [&](const watch_update& u) {
    if (u.type != watch_update::kind::events) return;
    std::lock_guard cb_lk(mu);
    calls++;
    w->cancel();
  });
  ASSERT_TRUE(r.ok());
  w = std::move(r).value();
  lk.unlock();
  // "From now" starts when etcd creates the watch: keep writing until the
  // first event arrives.
  ASSERT_TRUE(eventually(5'000, [&] {
    EXPECT_TRUE(c->put("/it/now/k", "v").ok());
    return calls.load() > 0;
  }));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(c->put("/it/now/k", "after").ok());
  sleep_ms(200);
  EXPECT_EQ(calls.load(), 1);
  w.reset();
}

TEST_F(grpc_client_test, watch_from_a_compacted_revision_gets_the_notice) {
  // etcd's Compact RPC is not in our proto (the controller never compacts;
  // etcd's own auto-compaction does), so compact with etcdctl.
  auto c = make_client(cluster_->endpoints());
  auto first = c->put("/it/compact/k", "1");
  ASSERT_TRUE(first.ok());
  auto last = c->put("/it/compact/k", "2");
  ASSERT_TRUE(last.ok());
  const std::string cmd = "ETCDCTL_API=3 /usr/bin/etcdctl --endpoints=" + cluster_->endpoints() +
                          " compact " + std::to_string(last->header_revision) + " >/dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  watch_log log;
  auto w = c->watch(key_range::one("/it/compact/k"), first->header_revision, log.cb());
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE(eventually(5'000, [&] { return log.count(watch_update::kind::compacted) == 1; }));
  std::lock_guard lk(log.mu);
  EXPECT_EQ(log.updates.back().revision, last->header_revision);
  EXPECT_EQ(c->range(key_range::one("/it/compact/k"), {.revision = first->header_revision}).code(),
            errc::offset_out_of_range);
}

TEST_F(grpc_client_test, requests_fail_over_when_a_member_is_killed) {
  auto c = make_client(cluster_->endpoints());
  ASSERT_TRUE(write_once(*c, "/it/failover/k", "start").ok());
  ASSERT_TRUE(cluster_->kill(1).ok());
  int unknown = 0;
  for (int i = 0; i < 20; ++i) {
    // Reads fail over by themselves.
    auto r = c->range(key_range::one("/it/failover/k"));
    ASSERT_TRUE(r.ok()) << r.err().message;
    // A plain put fails over too, or (cut off mid-flight, or during an
    // election) says its outcome is unknown; then the careful write.
    auto p = c->put("/it/failover/k", std::to_string(i));
    if (!p.ok()) {
      ASSERT_EQ(p.code(), errc::unavailable) << p.err().message;
      EXPECT_NE(p.err().message.find("outcome unknown"), std::string::npos) << p.err().message;
      ++unknown;
      auto w = write_once(*c, "/it/failover/k", std::to_string(i));
      ASSERT_TRUE(w.ok()) << w.err().message;
    }
  }
  EXPECT_LE(unknown, 3) << "writes should fail over, not keep failing";
  // A fresh client whose first endpoint is the dead member moves on.
  auto fresh = make_client(cluster_->endpoints());
  auto r = fresh->range(key_range::one("/it/failover/k"));
  ASSERT_TRUE(r.ok()) << r.err().message;
  EXPECT_EQ(r->kvs[0].value, "19");
  auto st = c->endpoints_status();
  ASSERT_TRUE(st.ok());
  EXPECT_FALSE((*st)[1].reachable);
  EXPECT_FALSE((*st)[1].error.empty());
  EXPECT_TRUE((*st)[0].reachable);
  ASSERT_TRUE(cluster_->restart(1).ok());
  ASSERT_TRUE(cluster_->wait_healthy(1, 20'000).ok());
}

TEST_F(grpc_client_test, without_quorum_calls_fail_within_the_budget_then_recover) {
  const int64_t budget_ms = 3'000;
  auto c = make_client(cluster_->endpoints(), budget_ms);
  auto before = write_once(*c, "/it/quorum/k", "before");
  ASSERT_TRUE(before.ok()) << before.err().message;
  ASSERT_TRUE(cluster_->kill(1).ok());
  ASSERT_TRUE(cluster_->kill(2).ok());

  const clock& clk = clock::system();
  for (int i = 0; i < 2; ++i) {
    const int64_t t0 = clk.monotonic_ms();
    auto r = c->range(key_range::one("/it/quorum/k"));
    const int64_t took = clk.monotonic_ms() - t0;
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.code(), errc::unavailable) << r.err().message;
    EXPECT_NE(r.err().message.find(cluster_->endpoint(0)), std::string::npos) << r.err().message;
    EXPECT_LE(took, budget_ms + 1'500) << r.err().message;
    std::cout << "range without quorum, after " << took << " ms: " << r.err().message << "\n";
  }
  const int64_t t0 = clk.monotonic_ms();
  auto p = c->put("/it/quorum/k", "during");
  EXPECT_EQ(p.code(), errc::unavailable);
  EXPECT_LE(clk.monotonic_ms() - t0, budget_ms + 1'500) << p.err().message;

  ASSERT_TRUE(cluster_->restart(1).ok());
  ASSERT_TRUE(cluster_->restart(2).ok());
  ASSERT_TRUE(cluster_->wait_all_healthy(20'000).ok());
  auto after = write_once(*c, "/it/quorum/k", "after");
  ASSERT_TRUE(after.ok()) << after.err().message;
  auto r = c->range(key_range::one("/it/quorum/k"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->kvs[0].value, "after");
}

}  // namespace
}  // namespace sluice::etcd
