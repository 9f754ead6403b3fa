#include "net/server.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/endian.h"

// Tests drive the server over 127.0.0.1 with plain blocking sockets. They
// never assert on speed: every wait is for a condition, with a generous
// deadline that only a broken server reaches.

namespace sluice::net {
namespace {

using namespace std::chrono_literals;
using bytes = std::vector<std::byte>;

constexpr auto wait_deadline = 60s;

template <class Pred>
bool wait_until(Pred pred, std::chrono::milliseconds limit = wait_deadline) {
  const sluice::deadline end(limit.count(), sluice::clock::system());
  while (!pred()) {
    if (end.passed()) return false;
    std::this_thread::sleep_for(2ms);
  }
  return true;
}

bytes to_bytes(std::string_view s) {
  bytes b(s.size());
  if (!s.empty()) std::memcpy(b.data(), s.data(), s.size());
  return b;
}

std::string to_string(const bytes& b) {
  if (b.empty()) return {};
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

// A blocking client socket that closes itself.
class client {
 public:
  explicit client(uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    EXPECT_GE(fd_, 0);
    timeval tv{60, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }
  ~client() { close(); }
  client(const client&) = delete;
  client& operator=(const client&) = delete;

  bool connected() const { return connected_; }
  int fd() const { return fd_; }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  // Closes with a TCP reset instead of a FIN.
  void reset() {
    linger l{1, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    close();
  }

  bool send_raw(const void* p, size_t n) {
    const char* c = static_cast<const char*>(p);
    while (n > 0) {
      ssize_t w = ::send(fd_, c, n, MSG_NOSIGNAL);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return false;
      c += w;
      n -= static_cast<size_t>(w);
    }
    return true;
  }
  bool send_frame(const bytes& payload) {
    bytes f(4 + payload.size());
    store_be<int32_t>(f.data(), static_cast<int32_t>(payload.size()));
    if (!payload.empty()) std::memcpy(f.data() + 4, payload.data(), payload.size());
    return send_raw(f.data(), f.size());
  }
  bool send_frame(std::string_view s) { return send_frame(to_bytes(s)); }

  bool recv_exact(void* p, size_t n) {
    char* c = static_cast<char*>(p);
    while (n > 0) {
      ssize_t r = ::recv(fd_, c, n, 0);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return false;
      c += r;
      n -= static_cast<size_t>(r);
    }
    return true;
  }
  std::optional<bytes> read_frame() {
    std::byte len[4];
    if (!recv_exact(len, 4)) return std::nullopt;
    int32_t n = load_be<int32_t>(len);
    if (n < 0) return std::nullopt;
    bytes b(static_cast<size_t>(n));
    if (n > 0 && !recv_exact(b.data(), b.size())) return std::nullopt;
    return b;
  }
  std::optional<std::string> read_string() {
    auto f = read_frame();
    if (!f) return std::nullopt;
    return to_string(*f);
  }
  // Sends what the socket takes without blocking, up to n bytes, and
  // stops once it has taken nothing for `stall`; returns the bytes sent.
  // For clients that send part of a frame to a server that stops reading.
  size_t send_until_stalled(const void* p, size_t n, std::chrono::milliseconds stall = 300ms) {
    const char* c = static_cast<const char*>(p);
    size_t sent = 0;
    while (sent < n) {
      ssize_t w = ::send(fd_, c + sent, n - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (w > 0) {
        sent += static_cast<size_t>(w);
        continue;
      }
      if (w < 0 && errno == EINTR) continue;
      if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        pollfd pfd{fd_, POLLOUT, 0};
        if (::poll(&pfd, 1, static_cast<int>(stall.count())) == 0) break;
        continue;
      }
      break;
    }
    return sent;
  }
  // Sends the length prefix of a frame of `declared` bytes and the first
  // `body` bytes of it (filled with 'z'), as far as the server reads them.
  size_t send_partial_frame(int32_t declared, size_t body) {
    bytes f(4 + body, std::byte{'z'});
    store_be<int32_t>(f.data(), declared);
    return send_until_stalled(f.data(), f.size());
  }

  // True once the server has closed the connection (EOF or reset); any
  // data still arriving is discarded.
  bool wait_closed(std::chrono::milliseconds limit = wait_deadline) {
    char buf[4096];
    const sluice::deadline end(limit.count(), sluice::clock::system());
    while (!end.passed()) {
      ssize_t r = ::recv(fd_, buf, sizeof buf, 0);
      if (r == 0) return true;
      if (r < 0 && errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) return true;
    }
    return false;
  }
  // Echo round trip.
  bool echo_ok(std::string_view s) {
    if (!send_frame(s)) return false;
    auto r = read_string();
    return r && *r == s;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

// The handler the tests drive. Frames are echoed back; a frame starting
// with "noresp" gets no response, "close" closes the connection, "drop"
// drops its responder. In `hold` mode responders are kept until the test
// completes them; in `async` mode worker threads complete them in random
// order.
class test_handler : public request_handler {
 public:
  enum class mode { immediate, hold, async };

  explicit test_handler(mode m = mode::immediate, uint32_t seed = 1) : mode_(m), rng_(seed) {}
  ~test_handler() override { stop_workers(); }

  void set_mode(mode m) {
    std::lock_guard l(mu_);
    mode_ = m;
  }

  void on_connection_open(connection_context& ctx) override {
    ++opened;
    ctx.state_as<std::string>() = "state of " + ctx.peer;
  }
  void on_connection_close(connection_context& ctx) override {
    // The state slot set at open is still there.
    if (ctx.state && ctx.state_as<std::string>() == "state of " + ctx.peer) ++closed;
  }

  void on_request(connection_context& ctx, bytes frame, responder r) override {
    ++requests;
    EXPECT_NE(ctx.id, 0u);
    if (ctx.min_rtt().has_value()) ++min_rtt_known;
    std::string s = to_string(frame);
    if (s.starts_with("close")) return r.close_connection();
    if (s.starts_with("drop")) return;  // r destroyed here
    if (custom) return custom(std::move(frame), std::move(r));
    std::unique_lock l(mu_);
    switch (mode_) {
      case mode::immediate:
        l.unlock();
        return complete(std::move(frame), std::move(r));
      case mode::hold:
      case mode::async:
        held_.emplace_back(std::move(frame), std::move(r));
        cv_.notify_all();
        return;
    }
  }

  size_t held() {
    std::lock_guard l(mu_);
    return held_.size();
  }
  // Completes every held request, from the calling thread.
  void complete_held() {
    std::deque<std::pair<bytes, responder>> items;
    {
      std::lock_guard l(mu_);
      items.swap(held_);
    }
    for (auto& [f, r] : items) complete(std::move(f), std::move(r));
  }
  void take_held(std::vector<std::pair<bytes, responder>>& out) {
    std::lock_guard l(mu_);
    for (auto& item : held_) out.push_back(std::move(item));
    held_.clear();
  }
  void drop_held() {
    std::lock_guard l(mu_);
    held_.clear();
  }

  // Worker threads take held requests in random order and complete them.
  void start_workers(int n) {
    for (int i = 0; i < n; ++i)
      workers_.emplace_back([this] {
        std::unique_lock l(mu_);
        while (true) {
          cv_.wait(l, [this] { return stop_ || !held_.empty(); });
          if (stop_) return;
          size_t i = std::uniform_int_distribution<size_t>(0, held_.size() - 1)(rng_);
          bool pause = std::uniform_int_distribution<int>(0, 9)(rng_) == 0;
          auto item = std::move(held_[i]);
          held_.erase(held_.begin() + static_cast<ptrdiff_t>(i));
          l.unlock();
          if (pause) std::this_thread::sleep_for(200us);
          complete(std::move(item.first), std::move(item.second));
          l.lock();
        }
      });
  }
  void stop_workers() {
    {
      std::lock_guard l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : workers_) t.join();
    workers_.clear();
  }

  static void complete(bytes frame, responder r) {
    if (to_string(frame).starts_with("noresp")) return r.no_response();
    response resp;
    resp.append(std::move(frame));
    r.respond(std::move(resp));
  }

  std::atomic<int> opened{0};
  std::atomic<int> closed{0};
  std::atomic<int> requests{0};
  std::atomic<int> min_rtt_known{0};  // requests whose connection told its minimum RTT
  // When set, handles every request not caught above.
  std::function<void(bytes, responder)> custom;

 private:
  mode mode_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::mt19937 rng_;
  std::deque<std::pair<bytes, responder>> held_;
  std::vector<std::thread> workers_;
  bool stop_ = false;
};

server_config test_config() {
  server_config c;
  c.host = "127.0.0.1";
  c.port = 0;
  c.io_threads = 2;
  return c;
}

TEST(NetServer, EchoSmallEmptyAndLargeFrames) {
  test_handler h;
  server srv(test_config(), h);
  ASSERT_TRUE(srv.start().ok());
  ASSERT_NE(srv.port(), 0);

  client c(srv.port());
  ASSERT_TRUE(c.connected());
  EXPECT_TRUE(c.echo_ok("hello"));
  EXPECT_TRUE(c.echo_ok(""));
  // Larger than the socket buffers both ways: partial reads and writes.
  std::string big(8 << 20, 'x');
  for (size_t i = 0; i < big.size(); i += 4093) big[i] = static_cast<char>('a' + i % 26);
  std::thread sender([&] { EXPECT_TRUE(c.send_frame(big)); });
  auto r = c.read_string();
  sender.join();
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(*r == big);
  EXPECT_TRUE(c.echo_ok("after"));

  EXPECT_TRUE(wait_until([&] { return h.opened.load() == 1; }));
  EXPECT_GE(srv.metrics().requests.load(), 4u);
  // A TCP connection on Linux always has a minimum RTT for its handler.
  EXPECT_EQ(h.min_rtt_known.load(), h.requests.load());
  EXPECT_GE(srv.metrics().bytes_in.load(), big.size());
  c.close();
  EXPECT_TRUE(wait_until([&] { return srv.metrics().connections_active.load() == 0; }));
  EXPECT_EQ(h.closed.load(), 1);
  srv.stop();
}

// Many requests in flight on several connections; worker threads complete
// them in random order; every connection must see its responses in request
// order, with no_response requests skipped.
TEST(NetServer, PipelinedResponsesInRequestOrder) {
  uint32_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  test_handler h(test_handler::mode::async, seed);
  h.start_workers(3);
  auto cfg = test_config();
  cfg.max_inflight_requests_per_connection = 16;
  server srv(cfg, h);
  ASSERT_TRUE(srv.start().ok());

  constexpr int clients = 4, per_client = 2000;
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int ci = 0; ci < clients; ++ci)
    threads.emplace_back([&, ci] {
      client c(srv.port());
      ASSERT_TRUE(c.connected());
      std::thread writer([&] {
        for (int i = 0; i < per_client; ++i) {
          std::string p =
              (i % 7 == 3 ? "noresp " : "req ") + std::to_string(ci) + " " + std::to_string(i);
          if (!c.send_frame(p)) return;
        }
      });
      bool good = true;
      for (int i = 0; i < per_client && good; ++i) {
        if (i % 7 == 3) continue;
        auto r = c.read_string();
        std::string want = "req " + std::to_string(ci) + " " + std::to_string(i);
        if (!r || *r != want) {
          ADD_FAILURE() << "client " << ci << " expected '" << want << "' got '"
                        << (r ? *r : std::string("<closed>")) << "'";
          good = false;
        }
      }
      writer.join();
      if (good) ++ok;
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), clients);
  EXPECT_EQ(srv.metrics().requests.load(), static_cast<uint64_t>(clients * per_client));
  h.stop_workers();
  srv.stop();
}

// A handler that never completes: the server reads max-in-flight requests,
// then stops reading, so the client's sends stall and the server's memory
// does not grow; completing the requests resumes reading.
TEST(NetServer, BackpressureStopsReadingAtInflightLimit) {
  test_handler h(test_handler::mode::hold);
  auto cfg = test_config();
  cfg.max_inflight_requests_per_connection = 8;
  server srv(cfg, h);
  ASSERT_TRUE(srv.start().ok());

  client c(srv.port());
  ASSERT_TRUE(c.connected());
  constexpr int total = 32 * 1024;
  const std::string pad(1000, 'p');
  auto payload = [&](int i) { return "req " + std::to_string(i) + " " + pad; };

  // Send without blocking until the socket stays full: 32 MiB is far more
  // than loopback socket buffers can absorb, so only a server that keeps
  // reading would take it all.
  ::fcntl(c.fd(), F_SETFL, ::fcntl(c.fd(), F_GETFL) | O_NONBLOCK);
  bytes pending;
  int next = 0;
  bool stalled = false;
  while (!stalled) {
    if (pending.empty()) {
      if (next == total) break;
      std::string p = payload(next++);
      pending.resize(4 + p.size());
      store_be<int32_t>(pending.data(), static_cast<int32_t>(p.size()));
      std::memcpy(pending.data() + 4, p.data(), p.size());
    }
    ssize_t w = ::send(c.fd(), pending.data(), pending.size(), MSG_NOSIGNAL);
    if (w > 0) {
      pending.erase(pending.begin(), pending.begin() + w);
      continue;
    }
    ASSERT_TRUE(w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) << std::strerror(errno);
    pollfd p{c.fd(), POLLOUT, 0};
    stalled = ::poll(&p, 1, 500) == 0;
  }
  ASSERT_TRUE(stalled) << "the server read all " << total << " requests without answering any";
  ASSERT_TRUE(wait_until([&] { return h.held() == 8; }));
  EXPECT_EQ(h.requests.load(), 8);
  // What the server read is bounded by its read buffer, not by what was sent.
  EXPECT_LT(srv.metrics().bytes_in.load(), 1u << 20);
  EXPECT_GE(srv.metrics().read_pauses.load(), 1u);

  // Complete the held ones and answer the rest at once; everything arrives,
  // in order.
  ::fcntl(c.fd(), F_SETFL, ::fcntl(c.fd(), F_GETFL) & ~O_NONBLOCK);
  h.set_mode(test_handler::mode::immediate);
  std::thread reader([&] {
    for (int i = 0; i < total; ++i) {
      auto r = c.read_string();
      if (!r || *r != payload(i)) {
        ADD_FAILURE() << "response " << i << " wrong or missing";
        return;
      }
    }
  });
  h.complete_held();
  EXPECT_TRUE(c.send_raw(pending.data(), pending.size()));
  for (int i = next; i < total; ++i) ASSERT_TRUE(c.send_frame(payload(i)));
  reader.join();
  EXPECT_EQ(h.requests.load(), total);
  srv.stop();
}

// A client that sends requests but does not read responses: the server
// stops reading once the queued response bytes pass the bound.
TEST(NetServer, BackpressureOnQueuedResponseBytes) {
  test_handler h;
  h.custom = [](bytes, responder r) {
    response resp;
    resp.append(bytes(1 << 20, std::byte{7}));
    r.respond(std::move(resp));
  };
  auto cfg = test_config();
  cfg.max_queued_response_bytes_per_connection = 2 << 20;
  server srv(cfg, h);
  ASSERT_TRUE(srv.start().ok());

  client c(srv.port());
  constexpr int total = 300;  // 300 MiB of responses if nothing held it back
  for (int i = 0; i < total; ++i) ASSERT_TRUE(c.send_frame("req"));
  // Wait until the server stops taking requests (the count holds still for
  // a while), then check it stopped well short of all of them.
  int last = -1;
  while (true) {
    int now = h.requests.load();
    if (now == last || now == total) break;
    last = now;
    std::this_thread::sleep_for(500ms);
  }
  EXPECT_LT(h.requests.load(), total);
  for (int i = 0; i < total; ++i) {
    auto r = c.read_frame();
    ASSERT_TRUE(r.has_value()) << i;
    ASSERT_EQ(r->size(), 1u << 20);
  }
  EXPECT_EQ(h.requests.load(), total);
  srv.stop();
}

// Requests the handler holds count against a byte bound as well as the
// request count bound.
TEST(NetServer, BackpressureOnInflightRequestBytes) {
  test_handler h(test_handler::mode::hold);
  auto cfg = test_config();
  cfg.max_inflight_requests_per_connection = 1000;
  cfg.max_inflight_request_bytes_per_connection = 1 << 20;
  server srv(cfg, h);
  ASSERT_TRUE(srv.start().ok());

  client c(srv.port());
  constexpr int total = 100;
  const std::string body(100 * 1024, 'b');
  std::thread writer([&] {
    for (int i = 0; i < total; ++i) ASSERT_TRUE(c.send_frame(std::to_string(i % 10) + body));
  });
  // 10 frames of 100 KiB stay under 1 MiB, the 11th reaches it: reading
  // stops there until something completes.
  ASSERT_TRUE(wait_until([&] { return h.held() == 11; }));
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(h.requests.load(), 11);
  h.set_mode(test_handler::mode::immediate);
  h.complete_held();
  for (int i = 0; i < total; ++i) {
    auto r = c.read_frame();
    ASSERT_TRUE(r.has_value());
    ASSERT_EQ(r->size(), body.size() + 1);
    EXPECT_EQ(static_cast<char>((*r)[0]), '0' + i % 10);
  }
  writer.join();
  srv.stop();
}

TEST(NetServer, RespondAndCloseWritesInTurnThenCloses) {
  test_handler h(test_handler::mode::hold);
  server srv(test_config(), h);
  ASSERT_TRUE(srv.start().ok());
  client c(srv.port());
  for (auto s : {"a", "last", "never answered"}) ASSERT_TRUE(c.send_frame(s));
  ASSERT_TRUE(wait_until([&] { return h.held() == 3; }));
  // Complete out of order from this thread: "last" closes after "a".
  std::vector<std::pair<bytes, responder>> held;
  h.take_held(held);
  ASSERT_EQ(held.size(), 3u);
  held[2].second.respond({});
  response last;
  last.append(to_bytes("bye"));
  held[1].second.respond_and_close(std::move(last));
  test_handler::complete(std::move(held[0].first), std::move(held[0].second));
  EXPECT_EQ(c.read_string().value_or("<closed>"), "a");
  EXPECT_EQ(c.read_string().value_or("<closed>"), "bye");
  // Then end of stream: the third response (an empty frame) is never sent.
  EXPECT_FALSE(c.read_frame().has_value());
  srv.stop();
}

TEST(NetServer, BadFrameLengthsCloseOnlyThatConnection) {
  test_handler h;
  auto cfg = test_config();
  cfg.socket_request_max_bytes = 1024;
  server srv(cfg, h);
  ASSERT_TRUE(srv.start().ok());

  client good(srv.port());
  ASSERT_TRUE(good.echo_ok("before"));

  client oversize(srv.port());
  std::byte len[4];
  store_be<int32_t>(len, 1025);
  ASSERT_TRUE(oversize.send_raw(len, 4));
  EXPECT_TRUE(oversize.wait_closed());

  client huge(srv.port());
  store_be<int32_t>(len, INT32_MAX);
  ASSERT_TRUE(huge.send_raw(len, 4));
  EXPECT_TRUE(huge.wait_closed());

  client negative(srv.port());
  store_be<int32_t>(len, -1);
  ASSERT_TRUE(negative.send_raw(len, 4));
  EXPECT_TRUE(negative.wait_closed());

  client at_limit(srv.port());
  EXPECT_TRUE(at_limit.echo_ok(std::string(1024, 'k')));

  EXPECT_TRUE(good.echo_ok("after"));
  EXPECT_EQ(srv.metrics().connections_closed_bad_frame.load(), 3u);
  srv.stop();
}

TEST(NetServer, HandlerCloseAndDroppedResponderCloseOnlyThatConnection) {
  test_handler h;
  server srv(test_config(), h);
  ASSERT_TRUE(srv.start().ok());
  client good(srv.port());
  ASSERT_TRUE(good.echo_ok("x"));
  client a(srv.port());
  ASSERT_TRUE(a.send_frame("close me"));
  EXPECT_TRUE(a.wait_closed());
  client b(srv.port());
  ASSERT_TRUE(b.send_frame("drop me"));
  EXPECT_TRUE(b.wait_closed());
  EXPECT_TRUE(good.echo_ok("y"));
  srv.stop();
}

TEST(NetServer, IdleConnectionsAreClosed) {
  test_handler h(test_handler::mode::hold);
  auto cfg = test_config();
  // Long enough that a client which connects and sends at once is never
  // idle in between, even on a loaded machine.
  cfg.connections_max_idle_ms = 500;
  server srv(cfg, h);
  ASSERT_TRUE(srv.start().ok());

  client idle(srv.port());
  ASSERT_TRUE(idle.connected());
  EXPECT_TRUE(idle.wait_closed());
  EXPECT_EQ(srv.metrics().connections_closed_idle.load(), 1u);

  // A request in flight is not idleness: the connection waits for it
  // however long it takes, then times out once nothing is pending.
  client busy(srv.port());
  ASSERT_TRUE(busy.send_frame("slow"));
  ASSERT_TRUE(wait_until([&] { return h.held() == 1; }));
  std::this_thread::sleep_for(1500ms);  // three idle periods with a request in flight
  h.complete_held();
  auto r = busy.read_string();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, "slow");
  EXPECT_TRUE(busy.wait_closed());
  EXPECT_EQ(srv.metrics().connections_closed_idle.load(), 2u);

  // A client that asks for a response larger than the socket buffers and
  // never reads it is idle once the writes stop making progress.
  h.custom = [](bytes, responder r) {
    response resp;
    resp.append(bytes(32 << 20, std::byte{1}));
    r.respond(std::move(resp));
  };
  client stuck(srv.port());
  ASSERT_TRUE(stuck.send_frame("big"));
  EXPECT_TRUE(wait_until([&] { return srv.metrics().connections_closed_idle.load() == 3; }));
  srv.stop();
}

// connections.max.idle.ms runs on the server's clock: with a manual one the
// connection closes when the clock passes the limit, whatever real time
// does.
TEST(NetServer, IdleTimeoutFollowsTheServersClock) {
  test_handler h;
  manual_clock clk;
  auto cfg = test_config();
  cfg.connections_max_idle_ms = 60'000;
  cfg.clk = &clk;
  server srv(cfg, h);
  ASSERT_TRUE(srv.start().ok());
  client c(srv.port());
  ASSERT_TRUE(c.echo_ok("hi"));
  // Last activity at 0 (or, if the server records its write a moment after
  // the client read the answer, at 59,999): not idle yet either way.
  clk.advance_ms(59'999);
  ASSERT_TRUE(c.echo_ok("still here"));
  EXPECT_EQ(srv.metrics().connections_closed_idle.load(), 0u);
  // Nothing more is sent: the connection closes once the clock passes the
  // limit after the last activity, in a small fraction of a real minute.
  // (The clock moves in idle-sized steps, as the last write may be recorded
  // just after a step.)
  for (int i = 0; i < 10 && srv.metrics().connections_closed_idle.load() == 0; ++i) {
    clk.advance_ms(60'000);
    wait_until([&] { return srv.metrics().connections_closed_idle.load() == 1; }, 200ms);
  }
  EXPECT_EQ(srv.metrics().connections_closed_idle.load(), 1u);
  EXPECT_TRUE(c.wait_closed());
  EXPECT_EQ(srv.metrics().connections_closed_idle.load(), 1u);
  srv.stop();
}

TEST(NetServer, ConnectionCap) {
  test_handler h;
  auto cfg = test_config();
  cfg.max_connections = 2;
  server srv(cfg, h);
  ASSERT_TRUE(srv.start().ok());

  auto c1 = std::make_unique<client>(srv.port());
  client c2(srv.port());
  ASSERT_TRUE(c1->echo_ok("1"));
  ASSERT_TRUE(c2.echo_ok("2"));
  client c3(srv.port());  // accepted by the kernel, then closed by the server
  EXPECT_TRUE(c3.wait_closed());
  EXPECT_EQ(srv.metrics().connections_rejected.load(), 1u);

  c1.reset();
  ASSERT_TRUE(wait_until([&] { return srv.metrics().connections_active.load() == 1; }));
  client c4(srv.port());
  EXPECT_TRUE(c4.echo_ok("4"));
  EXPECT_TRUE(c2.echo_ok("2 again"));
  srv.stop();
}

// A file that owns its descriptor; a file_region keeps it alive.
struct temp_file {
  std::string path;
  int fd = -1;
  explicit temp_file(const bytes& contents) {
    char tmpl[] = "/tmp/sluice_net_test_XXXXXX";
    fd = ::mkstemp(tmpl);
    path = tmpl;
    size_t off = 0;
    while (off < contents.size()) {
      ssize_t w = ::write(fd, contents.data() + off, contents.size() - off);
      if (w <= 0) break;
      off += static_cast<size_t>(w);
    }
  }
  ~temp_file() {
    ::close(fd);
    ::unlink(path.c_str());
  }
};

TEST(NetServer, SendfileRegionsByteForByte) {
  std::mt19937 rng(42);
  bytes contents(24 << 20);
  for (auto& b : contents) b = static_cast<std::byte>(rng());
  auto file = std::make_shared<temp_file>(contents);
  ASSERT_GE(file->fd, 0);
  std::weak_ptr<temp_file> watch = file;

  test_handler h;
  h.custom = [file](bytes frame, responder r) {
    response resp;
    std::string s = to_string(frame);
    if (s == "big") {
      // Buffer, a region far larger than the socket buffers, an empty
      // region, another buffer, a small region.
      resp.append(to_bytes("HEAD"));
      resp.append(file_region{file, file->fd, 1000, 20u << 20});
      resp.append(file_region{file, file->fd, 5, 0});
      resp.append(to_bytes("MID"));
      resp.append(file_region{file, file->fd, 7, 3});
    } else if (s == "past-eof") {
      resp.append(file_region{file, file->fd, (24u << 20) - 10, 100});
    } else {
      resp.append(std::move(frame));
    }
    r.respond(std::move(resp));
  };
  server srv(test_config(), h);
  ASSERT_TRUE(srv.start().ok());

  client c(srv.port());
  ASSERT_TRUE(c.send_frame("big"));
  ASSERT_TRUE(c.send_frame("after"));
  // Let the server fill the socket and wait for it to drain (EAGAIN path).
  std::this_thread::sleep_for(100ms);
  auto r = c.read_frame();
  ASSERT_TRUE(r.has_value());
  ASSERT_EQ(r->size(), 4u + (20u << 20) + 3 + 3);
  EXPECT_EQ(std::memcmp(r->data(), "HEAD", 4), 0);
  EXPECT_EQ(std::memcmp(r->data() + 4, contents.data() + 1000, 20u << 20), 0);
  EXPECT_EQ(std::memcmp(r->data() + 4 + (20u << 20), "MID", 3), 0);
  EXPECT_EQ(std::memcmp(r->data() + 7 + (20u << 20), contents.data() + 7, 3), 0);
  auto r2 = c.read_string();
  ASSERT_TRUE(r2.has_value());
  EXPECT_EQ(*r2, "after");

  // A region that runs past the end of the file cannot complete its frame:
  // that connection is closed, the server goes on.
  client bad(srv.port());
  ASSERT_TRUE(bad.send_frame("past-eof"));
  EXPECT_TRUE(bad.wait_closed());
  EXPECT_TRUE(c.echo_ok("still here"));

  // The server let go of every keepalive once the regions were sent.
  h.custom = nullptr;
  file.reset();
  EXPECT_TRUE(wait_until([&] { return watch.expired(); }));
  srv.stop();
}

// Hundreds of clients vanish at every point of a request; the server
// closes each connection, calls on_connection_close once per open, and
// keeps serving. Leaks are LeakSanitizer's to find in the sanitizer build.
TEST(NetServer, ManyConnectionsDroppedMidRequest) {
  test_handler h(test_handler::mode::hold);
  server srv(test_config(), h);
  ASSERT_TRUE(srv.start().ok());

  constexpr int n = 300;
  std::vector<std::unique_ptr<client>> clients;
  for (int i = 0; i < n; ++i) {
    auto c = std::make_unique<client>(srv.port());
    ASSERT_TRUE(c->connected());
    std::byte len[4];
    store_be<int32_t>(len, 1000);
    switch (i % 4) {
      case 0:  // half a length
        c->send_raw(len, 2);
        break;
      case 1:  // length and part of the body
        c->send_raw(len, 4);
        c->send_raw("abcdefgh", 8);
        break;
      case 2:  // a whole request the handler holds, then half of another
        c->send_frame("held");
        c->send_raw(len, 4);
        break;
      case 3:  // nothing at all
        break;
    }
    clients.push_back(std::move(c));
  }
  ASSERT_TRUE(wait_until([&] { return h.opened.load() == n; }));
  ASSERT_TRUE(wait_until([&] { return h.held() == n / 4; }));
  for (int i = 0; i < n; ++i) {
    if (i % 2)
      clients[static_cast<size_t>(i)]->reset();
    else
      clients[static_cast<size_t>(i)]->close();
  }
  EXPECT_TRUE(wait_until([&] { return srv.metrics().connections_active.load() == 0; }));
  EXPECT_EQ(h.closed.load(), n);
  // Completing requests of closed connections is allowed and does nothing.
  h.complete_held();
  client c(srv.port());
  EXPECT_TRUE(c.send_frame("x"));
  ASSERT_TRUE(wait_until([&] { return h.held() == 1; }));
  h.complete_held();
  auto r = c.read_string();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, "x");
  srv.stop();
}

// stop() waits for in-flight requests, completed from another thread while
// it waits, and their responses reach the client before the close.
TEST(NetServer, GracefulStopAnswersInflightRequests) {
  test_handler h(test_handler::mode::hold);
  auto cfg = test_config();
  cfg.shutdown_drain_timeout_ms = 60'000;
  server srv(cfg, h);
  ASSERT_TRUE(srv.start().ok());
  uint16_t port = srv.port();

  client c(port);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(c.send_frame("r" + std::to_string(i)));
  ASSERT_TRUE(wait_until([&] { return h.held() == 5; }));
  std::thread completer([&] {
    std::this_thread::sleep_for(200ms);
    h.complete_held();
  });
  srv.stop();
  completer.join();
  for (int i = 0; i < 5; ++i) {
    auto r = c.read_string();
    ASSERT_TRUE(r.has_value()) << i;
    EXPECT_EQ(*r, "r" + std::to_string(i));
  }
  EXPECT_TRUE(c.wait_closed());
  EXPECT_EQ(h.closed.load(), 1);
  client late(port);
  EXPECT_FALSE(late.connected());
}

// A request that is never answered does not hold stop() past the drain
// timeout; its responder outlives the server and completing it is a no-op.
TEST(NetServer, StopGivesUpAfterDrainTimeout) {
  test_handler h(test_handler::mode::hold);
  auto cfg = test_config();
  cfg.shutdown_drain_timeout_ms = 100;
  auto srv = std::make_unique<server>(cfg, h);
  ASSERT_TRUE(srv->start().ok());
  client c(srv->port());
  ASSERT_TRUE(c.send_frame("never"));
  ASSERT_TRUE(wait_until([&] { return h.held() == 1; }));
  srv->stop();
  EXPECT_TRUE(c.wait_closed());
  EXPECT_EQ(h.closed.load(), 1);
  srv.reset();
  h.complete_held();
}

TEST(NetServer, StartFailsOnPortInUse) {
  test_handler h;
  server a(test_config(), h);
  ASSERT_TRUE(a.start().ok());
  auto cfg = test_config();
  cfg.port = a.port();
  server b(cfg, h);
  auto st = b.start();
  EXPECT_EQ(st.code(), errc::io_error);
  b.stop();  // nothing running: a no-op
  a.stop();
  a.stop();  // idempotent
}

// ---- The server-wide bound on request bytes (queued_max_request_bytes) ----

// A bound of 1.5 MiB with 256 KiB reserved for small frames: frames above
// 64 KiB may hold 1.25 MiB between them, so one 1 MiB frame fits and a
// second does not while the first is held.
server_config budget_config() {
  auto c = test_config();
  c.socket_request_max_bytes = 1 << 20;
  c.request_budget_reserve_bytes = 256 << 10;
  c.queued_max_request_bytes = (1 << 20) + (512 << 10);
  return c;
}

constexpr uint64_t large_frame_room = (1 << 20) + (256 << 10);

TEST(NetServer, BudgetPausesReadingWhenExhaustedAndResumesWhenFreed) {
  test_handler h(test_handler::mode::hold);
  server srv(budget_config(), h);
  ASSERT_TRUE(srv.start().ok());
  const auto& m = srv.metrics();
  const std::string body(1 << 20, 'a');

  client a(srv.port());
  ASSERT_TRUE(a.send_frame(body));
  ASSERT_TRUE(wait_until([&] { return h.held() == 1; }));
  // A frame handed to the handler counts until its responder completes.
  EXPECT_EQ(m.request_bytes_held.load(), body.size());

  // A second 1 MiB frame does not fit: it waits, and nothing of it is read
  // beyond the read buffer.
  client b(srv.port());
  std::jthread sender([&] { EXPECT_TRUE(b.send_frame(body)); });
  ASSERT_TRUE(wait_until([&] { return m.connections_waiting_on_budget.load() == 1; }, 10s));
  const uint64_t in_before = m.bytes_in.load();
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(h.requests.load(), 1);
  EXPECT_EQ(m.connections_waiting_on_budget.load(), 1u);
  EXPECT_EQ(m.request_bytes_held.load(), body.size());
  EXPECT_EQ(m.bytes_in.load(), in_before);
  EXPECT_LT(m.bytes_in.load(), body.size() + (256 << 10));
  EXPECT_EQ(m.budget_waits.load(), 1u);
  // Small requests of other clients go on meanwhile.
  client c(srv.port());
  h.set_mode(test_handler::mode::immediate);
  EXPECT_TRUE(c.echo_ok("small"));
  h.set_mode(test_handler::mode::hold);

  // Answering the first frees its bytes; the second is admitted and read.
  h.complete_held();
  auto r = a.read_string();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->size(), body.size());
  ASSERT_TRUE(wait_until([&] { return h.held() == 1; }, 10s));
  sender.join();
  EXPECT_EQ(m.connections_waiting_on_budget.load(), 0u);
  EXPECT_EQ(m.request_bytes_held.load(), body.size());
  h.complete_held();
  r = b.read_string();
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(*r == body);
  EXPECT_TRUE(wait_until([&] { return m.request_bytes_held.load() == 0; }, 10s));
  srv.stop();
}

// Clients holding large partial frames take all the budget large frames
// may have; clients with small requests are served all the while. When
// the holders leave, the waiting large frames are admitted in turn.
TEST(NetServer, SmallRequestsServedWhileLargePartialFramesHoldTheBudget) {
  test_handler h;
  server srv(budget_config(), h);
  ASSERT_TRUE(srv.start().ok());
  const auto& m = srv.metrics();

  std::vector<std::unique_ptr<client>> attackers;
  for (int i = 0; i < 4; ++i) {
    attackers.push_back(std::make_unique<client>(srv.port()));
    attackers.back()->send_partial_frame(600 << 10, (600 << 10) - 1000);
  }
  // Two 600 KiB frames fit in the 1.25 MiB of large frames; two wait.
  ASSERT_TRUE(wait_until([&] { return m.connections_waiting_on_budget.load() == 2; }, 10s));
  EXPECT_EQ(m.request_bytes_held.load(), 2u * (600 << 10));
  EXPECT_LE(m.request_bytes_held.load(), large_frame_room);

  client good(srv.port());
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(good.echo_ok("small " + std::to_string(i)));
  // A small frame is one that declares at most 64 KiB, whatever arrives.
  std::string small_max(static_cast<size_t>(limits::request_budget_small_frame_bytes), 's');
  std::jthread sender([&] { EXPECT_TRUE(good.send_frame(small_max)); });
  auto r = good.read_string();
  sender.join();
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(*r == small_max);
  EXPECT_EQ(h.requests.load(), 51);
  // A large frame of a well-behaved client waits its turn.
  client patient(srv.port());
  const std::string large(200 << 10, 'L');
  std::jthread large_sender([&] { EXPECT_TRUE(patient.send_frame(large)); });
  ASSERT_TRUE(wait_until([&] { return m.connections_waiting_on_budget.load() == 3; }, 10s));

  // The attackers leave: the admitted ones see it at once, the waiting ones
  // once admitted; every byte is freed and the patient frame is served.
  attackers.clear();
  r = patient.read_string();
  large_sender.join();
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(*r == large);
  EXPECT_TRUE(wait_until([&] { return m.request_bytes_held.load() == 0; }, 10s));
  EXPECT_EQ(m.connections_waiting_on_budget.load(), 0u);
  EXPECT_EQ(m.connections_closed_read_timeout.load(), 0u);
  srv.stop();
}

TEST(NetServer, PartialFrameClosedAfterReadTimeout) {
  test_handler h;
  auto cfg = budget_config();
  cfg.request_read_timeout_ms = 300;
  server srv(cfg, h);
  ASSERT_TRUE(srv.start().ok());
  const auto& m = srv.metrics();

  // Stalls mid-frame.
  client stalled(srv.port());
  stalled.send_partial_frame(1000, 500);
  // Declares 1 MiB and sends nothing more: holds most of the budget.
  client big(srv.port());
  big.send_partial_frame(1 << 20, 0);
  ASSERT_TRUE(wait_until([&] { return m.request_bytes_held.load() == 1000 + (1 << 20); }, 10s));
  // Waits for admission behind `big` (its wait does not count), then stalls.
  client big2(srv.port());
  big2.send_partial_frame(1 << 20, 1000);
  // Trickles a byte every 50 ms (slowloris): progress, but never done in time.
  client trickle(srv.port());
  std::atomic<bool> trickling{true};
  std::jthread trickler([&] {
    bytes f(4);
    store_be<int32_t>(f.data(), 1000);
    if (!trickle.send_raw(f.data(), f.size())) return;
    for (int i = 0; i < 1000 && trickling.load(); ++i) {
      if (!trickle.send_raw("t", 1)) return;
      std::this_thread::sleep_for(50ms);
    }
  });
  // Stalls inside a length prefix: holds no budget, so is left alone.
  client half_length(srv.port());
  ASSERT_TRUE(half_length.send_raw("\0\0", 2));
  // Sends whole frames with pauses between them: never timed out.
  client polite(srv.port());
  ASSERT_TRUE(polite.echo_ok("before"));

  EXPECT_TRUE(stalled.wait_closed(10s));
  EXPECT_TRUE(big.wait_closed(10s));
  EXPECT_TRUE(big2.wait_closed(10s));
  EXPECT_TRUE(trickle.wait_closed(10s));
  trickling = false;
  trickler.join();
  EXPECT_EQ(m.connections_closed_read_timeout.load(), 4u);
  EXPECT_TRUE(wait_until([&] { return m.request_bytes_held.load() == 0; }, 10s));
  std::this_thread::sleep_for(400ms);  // longer than the timeout, between frames
  EXPECT_TRUE(polite.echo_ok("after"));
  ASSERT_TRUE(half_length.send_raw("\0\5hello", 7));
  auto r = half_length.read_string();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, "hello");
  EXPECT_EQ(m.connections_closed_read_timeout.load(), 4u);
  srv.stop();
}

// The deadline of a frame runs from its admission: bytes of it that waited
// in the read buffer while the connection was paused at its own in-flight
// bound do not count.
TEST(NetServer, ReadDeadlineStartsAtAdmission) {
  test_handler h(test_handler::mode::hold);
  auto cfg = test_config();
  cfg.request_read_timeout_ms = 300;
  cfg.max_inflight_requests_per_connection = 1;
  server srv(cfg, h);
  ASSERT_TRUE(srv.start().ok());

  client c(srv.port());
  const std::string large(200 << 10, 'L');
  bytes second(4 + large.size());
  store_be<int32_t>(second.data(), static_cast<int32_t>(large.size()));
  std::memcpy(second.data() + 4, large.data(), large.size());
  // One send, so that one read brings the first frame and the next length.
  const std::string first = "noresp first";
  bytes both(4 + first.size() + 1000);
  store_be<int32_t>(both.data(), static_cast<int32_t>(first.size()));
  std::memcpy(both.data() + 4, first.data(), first.size());
  std::memcpy(both.data() + 4 + first.size(), second.data(), 1000);
  ASSERT_TRUE(c.send_raw(both.data(), both.size()));
  ASSERT_TRUE(wait_until([&] { return h.held() == 1; }));
  std::this_thread::sleep_for(600ms);  // paused, with the next length in rbuf_
  h.set_mode(test_handler::mode::immediate);
  h.complete_held();  // no response, so no write marks the connection active
  std::this_thread::sleep_for(100ms);
  ASSERT_TRUE(c.send_raw(second.data() + 1000, second.size() - 1000));
  auto r = c.read_string();
  ASSERT_TRUE(r.has_value()) << "closed at the read deadline";
  EXPECT_TRUE(*r == large);
  EXPECT_EQ(srv.metrics().connections_closed_read_timeout.load(), 0u);
  srv.stop();
}

// Connections that go away mid-frame, while waiting for admission, or with
// requests still held by the handler give every byte back, the last ones
// when the handler lets go of the responders.
TEST(NetServer, BudgetAccountingReturnsToZeroWhenConnectionsCloseMidFrame) {
  test_handler h(test_handler::mode::hold);
  auto cfg = budget_config();
  server srv(cfg, h);
  ASSERT_TRUE(srv.start().ok());
  const auto& m = srv.metrics();

  std::vector<std::unique_ptr<client>> clients;
  for (int i = 0; i < 8; ++i) {
    clients.push_back(std::make_unique<client>(srv.port()));
    client& c = *clients.back();
    ASSERT_TRUE(c.send_frame(std::string(1000, 'h')));  // held by the handler
    // Four large frames of 400 KiB and four small ones of 10 KiB: in
    // whatever order they come, three large ones fit and one waits.
    if (i % 2 == 0)
      c.send_partial_frame(400 << 10, 30 << 10);
    else
      c.send_partial_frame(10 << 10, 5 << 10);
  }
  ASSERT_TRUE(wait_until([&] { return h.held() == 8; }, 10s));
  // Every small frame is admitted too (its length read), which on a busy
  // machine may come after the large one that waits.
  const uint64_t all_admitted = 8u * 1000 + 3 * (400 << 10) + 4 * (10 << 10);
  ASSERT_TRUE(wait_until([&] { return m.connections_waiting_on_budget.load() == 1 &&
                                      m.request_bytes_held.load() == all_admitted; }, 10s))
      << "waiting " << m.connections_waiting_on_budget.load() << ", held " << m.request_bytes_held.load();
  for (size_t i = 0; i < clients.size(); ++i) {
    if (i % 2 == 0)
      clients[i]->reset();
    else
      clients[i]->close();
  }
  clients.clear();
  ASSERT_TRUE(wait_until([&] { return m.connections_active.load() == 0; }, 10s));
  // The handler still holds the 8 whole frames.
  EXPECT_EQ(m.request_bytes_held.load(), 8u * 1000);
  EXPECT_EQ(m.connections_waiting_on_budget.load(), 0u);
  h.drop_held();
  EXPECT_EQ(m.request_bytes_held.load(), 0u);
  srv.stop();
}

TEST(NetServer, StartRefusesABudgetSmallerThanOneLargestFrame) {
  test_handler h;
  auto cfg = budget_config();
  cfg.queued_max_request_bytes =
      cfg.socket_request_max_bytes + cfg.request_budget_reserve_bytes - 1;
  server srv(cfg, h);
  EXPECT_EQ(srv.start().code(), errc::invalid_argument);
}

// A responder tied to no connection hands its completion to a function,
// on the completing thread: what runs handlers in one process (tests, the
// simulated cluster) sees each outcome, and a responder dropped unanswered
// says so too.
TEST(NetResponder, ToFunctionHandsOverEveryOutcome) {
  std::vector<std::pair<responder::outcome, uint64_t>> seen;
  auto record = [&](responder::outcome o, response r) { seen.emplace_back(o, r.size_bytes()); };
  {
    auto r = responder::to_function(record);
    EXPECT_TRUE(r.pending());
    response body;
    body.append(std::vector<std::byte>(7));
    r.respond(std::move(body));
    EXPECT_FALSE(r.pending());
  }
  responder::to_function(record).no_response();
  responder::to_function(record).close_connection();
  {
    response body;
    body.append(std::vector<std::byte>(3));
    responder::to_function(record).respond_and_close(std::move(body));
  }
  { auto dropped = responder::to_function(record); }
  using o = responder::outcome;
  EXPECT_EQ(seen, (std::vector<std::pair<o, uint64_t>>{
                      {o::responded, 7}, {o::no_response, 0}, {o::closed, 0}, {o::responded_then_close, 3},
                      {o::dropped, 0}}));
}

}  // namespace
}  // namespace sluice::net
