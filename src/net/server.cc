#include "net/server.h"

#include <array>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstring>
#include <deque>
#include <future>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <system_error>
#include <thread>
#include <unordered_map>

#include <asio.hpp>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "base/assert.h"
#include "base/endian.h"
#include "base/limits.h"
#include "base/log.h"
#include "base/thread_name.h"
#include "net/tcp_info.h"

namespace sluice::net {
namespace detail {

using asio::ip::tcp;

class connection;
struct io_thread;

using limits::frame_reserve_bytes;
using limits::max_gather_bytes;
using limits::max_iovecs;
using limits::max_sendfile_bytes;
using limits::read_buffer_bytes;

// Responders may be completed from any thread at any time, even after the
// server is gone. The gate is the one place that knows whether posting to
// an io_context is still allowed: the server closes it (exclusive lock)
// before destroying the io_contexts; deliveries hold it shared while posting.
struct gate {
  std::shared_mutex mu;
  bool open = true;
};

enum class completion_kind { respond, respond_then_close, none, close, dropped };

struct completion {
  completion_kind kind = completion_kind::none;
  response resp;
};

// The server-wide bound on request frame bytes (queued.max.request.bytes;
// the contract is at the top of server.h). Shared by every I/O thread and by
// responders, which may outlive the server: hence shared_ptr, and the
// metrics it updates are shared too.
//
// A frame is admitted whole: once its length has arrived, its declared size
// is taken from the budget before any byte of its body is read, and given
// back when its responder completes (or its connection closes before it was
// dispatched). Why whole frames, not bytes as they arrive: counting arrived
// bytes lets every large frame in progress take a part of the budget, and
// when their remaining parts add up to more than is free, none of them can
// ever finish (three 100 MiB produce requests under a 256 MiB bound would
// each hold 80 MiB and wait until their read deadlines close them all, and
// again after the clients retry). An admitted frame can always be read to
// its end, so the only waits are for frames to be answered, which handlers
// promise. The cost: four bytes declaring 100 MiB take 100 MiB of the
// budget (not of memory: a frame's buffer grows with the bytes that
// arrive) until request_read_timeout_ms closes a client that sends no more.
// Kafka's memory pool does the same (NetworkReceive allocates the declared
// size from it before reading the body).
//
// Fairness: frames above limits::request_budget_small_frame_bytes are
// admitted strictly in the order they asked, so a 100 MiB frame is not
// starved by a stream of 1 MiB ones; small frames skip that queue and may
// use the reserve, so they are never stuck behind large ones.
//
// Locking: the count changes under mu_ (an admission or a release per
// request costs nothing next to reading the frame), which makes "does not
// fit, so wait" and "freed, so admit the waiters" exclusive: no wake-up is
// lost. A waiter is admitted by release() itself (its bytes are taken
// there, then its connection is told on its thread), so nothing can take
// the room between the wake-up and the waiter's turn. Lock order: the
// gate's shared lock, then mu_; nothing takes them the other way round.
class request_budget {
 public:
  request_budget(uint64_t limit_bytes, uint64_t reserve_bytes,
                 std::shared_ptr<server_metrics> metrics, std::shared_ptr<gate> g)
      : limit_bytes_(limit_bytes),
        reserve_bytes_(reserve_bytes),
        metrics_(std::move(metrics)),
        gate_(std::move(g)) {}

  // Takes n bytes for a frame (small: it declared at most
  // request_budget_small_frame_bytes) and returns true, or queues `waiter`
  // and returns false; later waiter->on_budget_granted(n) runs on its
  // thread with the n bytes already taken. The waiter's thread only.
  bool acquire_or_wait(uint64_t n, bool small, const std::shared_ptr<connection>& waiter);
  // Gives back n bytes and admits the waiters that now fit. Any thread.
  void release(uint64_t n);
  // Forgets `c` if it waits (it is closing). Its thread only.
  void cancel_wait(const connection* c);

 private:
  struct waiter {
    std::weak_ptr<connection> conn;
    const connection* key = nullptr;
    uint64_t need = 0;
    bool small = false;
  };
  uint64_t limit_for(bool small) const {
    return small ? limit_bytes_ : limit_bytes_ - reserve_bytes_;
  }
  // Admits waiters in order while they fit; a large one that does not fit
  // holds back the large ones behind it. Needs mu_ and the gate open.
  void admit_waiters_locked();
  void publish_locked() {
    metrics_->request_bytes_held.store(used_, std::memory_order_relaxed);
    metrics_->connections_waiting_on_budget.store(waiters_.size(), std::memory_order_relaxed);
  }

  const uint64_t limit_bytes_;
  const uint64_t reserve_bytes_;  // <= limit_bytes_, checked by server_impl::start
  std::shared_ptr<server_metrics> metrics_;
  std::shared_ptr<gate> gate_;
  std::mutex mu_;
  uint64_t used_ = 0;
  std::deque<waiter> waiters_;
  size_t large_waiters_ = 0;
};

// Shared by all responders of one connection. Holds the connection weakly:
// outstanding responders never keep a closed connection (its socket, its
// buffers) alive.
class completion_link {
 public:
  completion_link(std::shared_ptr<gate> g, std::shared_ptr<request_budget> budget,
                  std::weak_ptr<connection> c)
      : gate_(std::move(g)), budget_(std::move(budget)), conn_(std::move(c)) {}
  // Frees the request's `frame_bytes` from the budget, whatever becomes of
  // the connection, then hands `c` to the connection if it is still there.
  void deliver(uint64_t seq, completion c, uint64_t frame_bytes);

 private:
  std::shared_ptr<gate> gate_;
  std::shared_ptr<request_budget> budget_;
  std::weak_ptr<connection> conn_;
};

class server_impl;

// One I/O thread: its io_context and the connections it owns. `conns` is
// touched only on this thread. Member order matters: conns is destroyed
// before the io_context its sockets belong to.
struct io_thread {
  asio::io_context ctx{1};
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  std::unordered_map<uint64_t, std::shared_ptr<connection>> conns;
  std::thread thread;
};

// One client connection. Every method runs on the owning I/O thread
// (`thr_`); the object is kept alive by the async operations and posted
// completions that capture it, and by its entry in thr_.conns until closed.
class connection : public std::enable_shared_from_this<connection> {
 public:
  connection(server_impl& srv, io_thread& thr, tcp::socket sock, uint64_t id, std::string peer);

  void start();
  void begin_drain();
  void close(const char* why);
  void on_completion(uint64_t seq, completion c);
  // The budget admitted the frame this connection waits on: its `n` bytes
  // are taken.
  void on_budget_granted(uint64_t n);
  asio::io_context::executor_type executor() { return thr_.ctx.get_executor(); }

 private:
  struct outgoing {
    std::array<std::byte, 4> prefix{};
    std::vector<chunk> chunks;
    uint64_t memory_bytes = 0;
    bool close_after = false;  // respond_and_close: close once written
    size_t part = 0;           // 0: the length prefix; i > 0: chunks[i - 1]
    uint64_t off = 0;          // bytes of `part` already sent

    size_t parts() const { return chunks.size() + 1; }
    uint64_t part_len(size_t i) const { return i == 0 ? 4 : chunk_bytes(chunks[i - 1]); }
    void skip_finished_parts() {
      while (part < parts() && off == part_len(part)) {
        ++part;
        off = 0;
      }
    }
    bool done() const { return part == parts(); }
    const file_region* file_at(size_t i) const {
      return i == 0 ? nullptr : std::get_if<file_region>(&chunks[i - 1]);
    }
    const std::byte* bytes_at(size_t i) const {
      return i == 0 ? prefix.data() : std::get<std::vector<std::byte>>(chunks[i - 1]).data();
    }
  };

  bool can_accept_request() const;
  void process_input();
  void start_read();
  void on_read(const asio::error_code& ec, size_t n);
  void dispatch();
  void release_completed();
  void start_write();
  void do_write();
  void wait_writable();
  void consume_written(uint64_t n);
  void after_progress();
  void arm_idle_timer(int64_t at_ms);
  void on_idle_timer();
  bool admit_frame();
  void begin_frame(uint64_t charge);
  void arm_read_timer();
  void on_read_timer();

  server_impl& srv_;
  io_thread& thr_;
  tcp::socket sock_;
  asio::steady_timer idle_timer_;
  // Enforces request_read_timeout_ms on the frame being read. Armed when a
  // frame begins and no earlier arming is pending; when it fires it checks
  // the frame in progress and re-arms for it, so a frame costs no timer
  // operation, only a flag test.
  asio::steady_timer read_timer_;
  bool read_timer_armed_ = false;
  connection_context ctx_;
  std::shared_ptr<completion_link> link_;
  int64_t last_activity_ms_ = 0;  // times are on cfg_.clk's monotonic_ms()
  bool opened_ = false;  // on_connection_open was called
  bool closed_ = false;
  bool draining_ = false;
  bool closing_ = false;  // a respond_and_close response is queued; no more requests
  bool paused_ = false;   // reading stopped by backpressure
  bool reading_ = false;  // an async read is outstanding
  bool writing_ = false;  // waiting for the socket to become writable

  // Reading: rbuf_[rbeg_, rend_) holds received bytes not yet parsed.
  std::vector<std::byte> rbuf_;
  size_t rbeg_ = 0;
  size_t rend_ = 0;
  // A frame is in progress from its first length byte (len_have_ > 0)
  // until it is dispatched; once its length is known it waits to be
  // admitted by the server's budget, then its body is read.
  std::array<std::byte, 4> len_buf_{};
  size_t len_have_ = 0;
  size_t frame_need_ = 0;
  std::vector<std::byte> frame_;
  bool frame_admitted_ = false;
  int64_t frame_started_ms_ = 0;  // when the frame in progress was admitted
  // Bytes taken from the server's budget for the frame being read (its
  // declared length once admitted); they pass to its responder at dispatch.
  uint64_t frame_charge_ = 0;
  // Waiting for the budget to admit the frame; it calls on_budget_granted.
  bool budget_waiting_ = false;

  // Ordering: requests get sequence numbers next_seq_++; window_[i] is the
  // slot of request head_seq_ + i, filled when the handler completes it.
  // The head is released to the write queue as soon as it is filled.
  struct slot {
    uint64_t request_bytes = 0;  // frame size, counted until completion
    std::optional<completion> done;
  };
  uint64_t next_seq_ = 0;
  uint64_t head_seq_ = 0;
  std::deque<slot> window_;
  // Bytes of request frames handed to the handler and not yet completed
  // (the handler presumably still holds them).
  uint64_t inflight_request_bytes_ = 0;
  // Requests handed to the handler and not yet completed. While there are
  // any, the connection is not idle (a fetch may long-poll); responses
  // merely waiting for a client that does not read do not count.
  uint64_t awaiting_handler_ = 0;
  // Requests dispatched and not yet fully written (or released as
  // no_response); bounded by max_inflight_requests_per_connection.
  uint64_t in_flight_ = 0;
  // Owned response bytes completed but not yet written.
  uint64_t queued_bytes_ = 0;
  std::deque<outgoing> wq_;
};

class server_impl {
 public:
  server_impl(server_config cfg, request_handler& handler)
      : cfg_(std::move(cfg)),
        handler_(handler),
        metrics_ptr_(std::make_shared<server_metrics>()),
        metrics_(*metrics_ptr_),
        gate_(std::make_shared<gate>()),
        budget_(std::make_shared<request_budget>(
            static_cast<uint64_t>(std::max<int64_t>(0, cfg_.queued_max_request_bytes)),
            static_cast<uint64_t>(std::max<int64_t>(0, cfg_.request_budget_reserve_bytes)),
            metrics_ptr_, gate_)),
        max_connections_(cfg_.max_connections) {}
  ~server_impl() { stop(); }

  status start();
  void stop();
  uint16_t port() const { return port_; }

  const server_config cfg_;
  request_handler& handler_;
  // Shared with the budget, which responders may keep past the server.
  std::shared_ptr<server_metrics> metrics_ptr_;
  server_metrics& metrics_;
  std::shared_ptr<gate> gate_;
  std::shared_ptr<request_budget> budget_;
  std::atomic<bool> stopping_{false};
  // max.connections as it is now: cfg_'s value until set_max_connections.
  std::atomic<int64_t> max_connections_;

  // Called by a connection when it has closed (on its thread).
  void connection_closed();

 private:
  void start_accept();
  void on_accept(const asio::error_code& ec, tcp::socket sock, size_t thread_index);
  void log_rejected(const std::string& peer);
  // Runs fn on every I/O thread and waits until all have run it.
  template <class Fn>
  void run_on_all_threads(Fn fn);

  std::vector<std::unique_ptr<io_thread>> threads_;
  std::optional<tcp::acceptor> acceptor_;  // on threads_[0]
  std::optional<asio::steady_timer> accept_retry_;
  uint16_t port_ = 0;
  bool started_ = false;
  bool stopped_ = false;
  std::atomic<uint64_t> next_conn_id_{1};
  size_t next_thread_ = 0;  // touched only on thread 0 (accept handler)

  // Rate limit for "connection rejected" log lines (thread 0 only).
  std::optional<int64_t> last_reject_log_ms_;
  uint64_t rejects_unlogged_ = 0;

  std::mutex drain_mu_;
  std::condition_variable drain_cv_;
};

// ---- completion_link ----------------------------------------------------------

bool request_budget::acquire_or_wait(uint64_t n, bool small,
                                     const std::shared_ptr<connection>& waiter) {
  std::lock_guard lock(mu_);
  const bool queue_ahead = !small && large_waiters_ > 0;
  if (!queue_ahead && used_ + n <= limit_for(small)) {
    used_ += n;
    publish_locked();
    return true;
  }
  waiters_.push_back({waiter, waiter.get(), n, small});
  if (!small) ++large_waiters_;
  publish_locked();
  return false;
}

void request_budget::admit_waiters_locked() {
  bool large_blocked = false;
  for (auto it = waiters_.begin(); it != waiters_.end() && used_ < limit_bytes_;) {
    const bool behind_large = !it->small && large_blocked;
    if (behind_large || used_ + it->need > limit_for(it->small)) {
      if (!it->small) large_blocked = true;
      ++it;
      continue;
    }
    if (auto c = it->conn.lock()) {
      used_ += it->need;
      auto ex = c->executor();
      asio::post(ex, [c = std::move(c), n = it->need] { c->on_budget_granted(n); });
    }
    if (!it->small) --large_waiters_;
    it = waiters_.erase(it);
  }
}

void request_budget::release(uint64_t n) {
  if (n == 0) return;
  std::shared_lock gate_lock(gate_->mu);
  std::lock_guard lock(mu_);
  SLUICE_ASSERT(n <= used_, "request budget released more than it holds");
  used_ -= n;
  // Once the gate is closed no connection waits any more (stop closed
  // them all first), and none could be told.
  if (gate_->open) admit_waiters_locked();
  publish_locked();
}

void request_budget::cancel_wait(const connection* c) {
  std::shared_lock gate_lock(gate_->mu);
  std::lock_guard lock(mu_);
  for (auto it = waiters_.begin(); it != waiters_.end(); ++it) {
    if (it->key == c) {
      if (!it->small) --large_waiters_;
      waiters_.erase(it);
      break;
    }
  }
  // A large waiter at the head may have held back others that fit.
  if (gate_->open) admit_waiters_locked();
  publish_locked();
}

void completion_link::deliver(uint64_t seq, completion c, uint64_t frame_bytes) {
  // Before the gate: release() takes the gate itself to wake waiters.
  budget_->release(frame_bytes);
  std::shared_lock lock(gate_->mu);
  if (!gate_->open) return;
  std::shared_ptr<connection> conn = conn_.lock();
  if (!conn) return;
  auto ex = conn->executor();
  asio::post(ex, [conn = std::move(conn), seq, c = std::move(c)]() mutable {
    conn->on_completion(seq, std::move(c));
  });
}

// ---- connection -----------------------------------------------------------------

connection::connection(server_impl& srv, io_thread& thr, tcp::socket sock, uint64_t id,
                       std::string peer)
    : srv_(srv), thr_(thr), sock_(std::move(sock)), idle_timer_(thr.ctx), read_timer_(thr.ctx) {
  ctx_.id = id;
  ctx_.peer = std::move(peer);
  ctx_.socket_fd = sock_.native_handle();
}

void connection::start() {
  link_ = std::make_shared<completion_link>(srv_.gate_, srv_.budget_, weak_from_this());
  if (srv_.stopping_.load()) {
    close("server stopping");
    return;
  }
  asio::error_code ec;
  sock_.set_option(tcp::no_delay(true), ec);
  // Our own writes (writev, sendfile) need a non-blocking descriptor; asio's
  // reads keep working on it.
  if (!ec) sock_.native_non_blocking(true, ec);
  if (ec) {
    SLUICE_LOG_WARN("connection {} from {}: socket setup failed: {}", ctx_.id, ctx_.peer,
                    ec.message());
    close("socket setup failed");
    return;
  }
  opened_ = true;
  try {
    srv_.handler_.on_connection_open(ctx_);
  } catch (const std::exception& e) {
    SLUICE_LOG_ERROR("connection {} from {}: on_connection_open threw: {}", ctx_.id, ctx_.peer,
                     e.what());
    close("handler threw");
    return;
  }
  rbuf_.resize(read_buffer_bytes);
  last_activity_ms_ = srv_.cfg_.clk->monotonic_ms();
  if (srv_.cfg_.connections_max_idle_ms > 0) arm_idle_timer(last_activity_ms_ + srv_.cfg_.connections_max_idle_ms);
  process_input();
}

bool connection::can_accept_request() const {
  const server_config& c = srv_.cfg_;
  return in_flight_ < static_cast<uint64_t>(c.max_inflight_requests_per_connection) &&
         inflight_request_bytes_ <
             static_cast<uint64_t>(c.max_inflight_request_bytes_per_connection) &&
         queued_bytes_ < static_cast<uint64_t>(c.max_queued_response_bytes_per_connection);
}

void connection::process_input() {
  while (!closed_ && !draining_ && !closing_ && !budget_waiting_) {
    // The per-connection bounds are checked between frames only: a frame
    // that has begun is read to its end, so its read deadline never runs
    // while the connection waits on its own earlier requests, and the
    // bounds grow by one frame at most (the contract in server.h always
    // allowed that).
    if (len_have_ == 0 && !can_accept_request()) {
      if (!paused_) {
        paused_ = true;
        srv_.metrics_.read_pauses.fetch_add(1, std::memory_order_relaxed);
      }
      return;
    }
    if (len_have_ == 4 && !frame_admitted_) {
      if (!admit_frame()) return;
      if (frame_need_ == 0) dispatch();
      continue;
    }
    if (rbeg_ == rend_) {
      start_read();
      return;
    }
    size_t avail = rend_ - rbeg_;
    if (len_have_ < 4) {
      size_t k = std::min(4 - len_have_, avail);
      std::memcpy(len_buf_.data() + len_have_, rbuf_.data() + rbeg_, k);
      len_have_ += k;
      rbeg_ += k;
      if (len_have_ < 4) continue;
      int32_t len = load_be<int32_t>(len_buf_.data());
      if (len < 0 || len > srv_.cfg_.socket_request_max_bytes) {
        SLUICE_LOG_WARN(
            "closing connection {} from {}: frame length {} is outside [0, {}] "
            "(socket.request.max.bytes)",
            ctx_.id, ctx_.peer, len, srv_.cfg_.socket_request_max_bytes);
        srv_.metrics_.connections_closed_bad_frame.fetch_add(1, std::memory_order_relaxed);
        close("bad frame length");
        return;
      }
      frame_need_ = static_cast<size_t>(len);
      continue;  // to admission
    }
    size_t k = std::min(frame_need_ - frame_.size(), avail);
    if (frame_.capacity() < frame_.size() + k) {
      // Double, as insert would, but never past the declared length: the
      // buffer's address space stays within what the budget admitted.
      frame_.reserve(std::min(frame_need_, std::max(frame_.size() + k, 2 * frame_.capacity())));
    }
    frame_.insert(frame_.end(), rbuf_.begin() + static_cast<ptrdiff_t>(rbeg_),
                  rbuf_.begin() + static_cast<ptrdiff_t>(rbeg_ + k));
    rbeg_ += k;
    if (frame_.size() == frame_need_) dispatch();
  }
}

// Takes the frame's declared length from the server's budget, or queues for
// it; true when the frame may be read. While it waits, the bytes after the
// length stay in rbuf_ and no read is outstanding: the client's sends stall
// in TCP, and the connection holds nothing of the budget.
bool connection::admit_frame() {
  const bool small = frame_need_ <= static_cast<size_t>(limits::request_budget_small_frame_bytes);
  if (!srv_.budget_->acquire_or_wait(frame_need_, small, shared_from_this())) {
    budget_waiting_ = true;
    srv_.metrics_.budget_waits.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  begin_frame(frame_need_);
  return true;
}

void connection::on_budget_granted(uint64_t n) {
  if (closed_ || !budget_waiting_) {
    // Closed after release() admitted us: nobody else will give it back.
    srv_.budget_->release(n);
    return;
  }
  SLUICE_ASSERT(n == frame_need_ && !frame_admitted_, "budget granted for another frame");
  budget_waiting_ = false;
  begin_frame(n);
  process_input();
}

// The frame is admitted with `charge` bytes of the budget: its body may be
// read, and its read deadline starts now. Now, not the time of the read that
// brought its length: those bytes may have waited in rbuf_ while the
// connection was paused at its own bounds, which must not count.
void connection::begin_frame(uint64_t charge) {
  frame_admitted_ = true;
  frame_charge_ = charge;
  frame_.clear();
  // Grow with the bytes that arrive, never to the declared length up front:
  // the budget counts the declared length, but memory is what arrived.
  frame_.reserve(std::min(frame_need_, frame_reserve_bytes));
  frame_started_ms_ = srv_.cfg_.clk->monotonic_ms();
  // If armed, it is for an earlier frame and fires sooner; on_read_timer
  // then re-arms for this one.
  if (!read_timer_armed_) arm_read_timer();
}

void connection::arm_read_timer() {
  read_timer_armed_ = true;
  // The timer sleeps; the clock decides (base/clock.h, "Waiting on a clock").
  read_timer_.expires_after(std::chrono::milliseconds(
      srv_.cfg_.clk->sleep_ms_until(frame_started_ms_ + srv_.cfg_.request_read_timeout_ms)));
  read_timer_.async_wait([self = shared_from_this()](const asio::error_code& ec) {
    if (!ec) self->on_read_timer();
  });
}

void connection::on_read_timer() {
  read_timer_armed_ = false;
  if (closed_ || !frame_admitted_) return;  // no frame holds budget; the next one arms
  if (srv_.cfg_.clk->monotonic_ms() - frame_started_ms_ < srv_.cfg_.request_read_timeout_ms) {
    arm_read_timer();  // a later frame than the one this was armed for, or the clock is not there yet
    return;
  }
  SLUICE_LOG_WARN(
      "closing connection {} from {}: request frame not complete {} ms after it was admitted "
      "({} of {} bytes arrived; sluice.request.read.timeout.ms)",
      ctx_.id, ctx_.peer, srv_.cfg_.request_read_timeout_ms, frame_.size(), frame_need_);
  srv_.metrics_.connections_closed_read_timeout.fetch_add(1, std::memory_order_relaxed);
  close("request read timeout");
}

void connection::start_read() {
  if (reading_ || closed_) return;
  reading_ = true;
  rbeg_ = rend_ = 0;
  sock_.async_read_some(
      asio::buffer(rbuf_),
      [self = shared_from_this()](const asio::error_code& ec, size_t n) { self->on_read(ec, n); });
}

void connection::on_read(const asio::error_code& ec, size_t n) {
  reading_ = false;
  if (closed_) return;
  if (ec) {
    // A client that goes away gets no more answers, as in Kafka: close now,
    // whatever is in flight (its responders become no-ops).
    if (ec != asio::error::eof)
      SLUICE_LOG_DEBUG("connection {} from {}: read failed: {}", ctx_.id, ctx_.peer, ec.message());
    close("read ended");
    return;
  }
  srv_.metrics_.bytes_in.fetch_add(n, std::memory_order_relaxed);
  last_activity_ms_ = srv_.cfg_.clk->monotonic_ms();
  if (draining_ || closing_) return;  // no new requests; the bytes are dropped
  rbeg_ = 0;
  rend_ = n;
  process_input();
}

void connection::dispatch() {
  SLUICE_ASSERT(frame_admitted_ && frame_charge_ == frame_.size(),
                "dispatching a frame the budget did not admit");
  len_have_ = 0;
  frame_admitted_ = false;
  const uint64_t charge = std::exchange(frame_charge_, 0);
  uint64_t seq = next_seq_++;
  window_.push_back(slot{frame_.size(), std::nullopt});
  inflight_request_bytes_ += frame_.size();
  ++awaiting_handler_;
  ++in_flight_;
  srv_.metrics_.requests.fetch_add(1, std::memory_order_relaxed);
  std::vector<std::byte> frame = std::move(frame_);
  frame_ = {};
  try {
    srv_.handler_.on_request(ctx_, std::move(frame), responder(link_, seq, charge));
  } catch (const std::exception& e) {
    SLUICE_LOG_ERROR("connection {} from {}: on_request threw: {}", ctx_.id, ctx_.peer, e.what());
    close("handler threw");
  } catch (...) {
    SLUICE_LOG_ERROR("connection {} from {}: on_request threw", ctx_.id, ctx_.peer);
    close("handler threw");
  }
}

void connection::on_completion(uint64_t seq, completion c) {
  if (closed_) return;
  switch (c.kind) {
    case completion_kind::close:
      SLUICE_LOG_DEBUG("connection {} from {}: closed by the request handler", ctx_.id, ctx_.peer);
      close("handler asked");
      return;
    case completion_kind::dropped:
      SLUICE_LOG_WARN("connection {} from {}: request {} was dropped without a response; closing",
                      ctx_.id, ctx_.peer, seq);
      close("responder dropped");
      return;
    case completion_kind::respond:
    case completion_kind::respond_then_close:
    case completion_kind::none:
      break;
  }
  SLUICE_ASSERT(seq >= head_seq_ && seq - head_seq_ < window_.size(), "completion out of window");
  slot& s = window_[seq - head_seq_];
  SLUICE_ASSERT(!s.done.has_value(), "request completed twice");
  inflight_request_bytes_ -= s.request_bytes;
  s.request_bytes = 0;
  --awaiting_handler_;
  queued_bytes_ += c.resp.memory_bytes();
  s.done = std::move(c);
  release_completed();
}

void connection::release_completed() {
  bool any = false;
  // After a respond_and_close response nothing more is released: the
  // connection closes once that response is written.
  while (!closing_ && !window_.empty() && window_.front().done.has_value()) {
    completion c = std::move(*window_.front().done);
    window_.pop_front();
    ++head_seq_;
    if (c.kind == completion_kind::none) {
      --in_flight_;
      continue;
    }
    uint64_t size = c.resp.size_bytes();
    if (size > static_cast<uint64_t>(INT32_MAX)) {
      // A bug in the caller, not client input; the stream cannot go on.
      SLUICE_LOG_ERROR("connection {} from {}: response of {} bytes does not fit a frame; closing",
                       ctx_.id, ctx_.peer, size);
      close("response too large");
      return;
    }
    outgoing o;
    store_be<int32_t>(o.prefix.data(), static_cast<int32_t>(size));
    o.memory_bytes = c.resp.memory_bytes();
    o.chunks = std::move(c.resp.chunks);
    o.close_after = c.kind == completion_kind::respond_then_close;
    closing_ = o.close_after;
    wq_.push_back(std::move(o));
    any = true;
  }
  if (any) start_write();
  after_progress();
}

void connection::start_write() {
  if (writing_ || closed_) return;
  do_write();
}

void connection::do_write() {
  const int fd = sock_.native_handle();
  while (!closed_) {
    while (!wq_.empty()) {
      wq_.front().skip_finished_parts();
      if (!wq_.front().done()) break;
      consume_written(0);
    }
    if (wq_.empty()) break;
    outgoing& front = wq_.front();
    if (const file_region* fr = front.file_at(front.part)) {
      off_t pos = static_cast<off_t>(fr->pos + front.off);
      size_t count = static_cast<size_t>(std::min(fr->len - front.off, max_sendfile_bytes));
      ssize_t n = ::sendfile(fd, fr->fd, &pos, count);
      if (n > 0) {
        consume_written(static_cast<uint64_t>(n));
        continue;
      }
      if (n == 0) {
        SLUICE_LOG_ERROR(
            "connection {} from {}: file region (fd {}, pos {}, len {}) ends early at {}; closing",
            ctx_.id, ctx_.peer, fr->fd, fr->pos, fr->len, static_cast<uint64_t>(pos));
        close("file region short");
        return;
      }
    } else {
      // Gather the owned buffers up to the next file region.
      std::array<iovec, max_iovecs> iov;
      int cnt = 0;
      uint64_t total = 0;
      bool more_follows = false;
      for (size_t i = 0; i < wq_.size() && !more_follows; ++i) {
        const outgoing& o = wq_[i];
        size_t part = i == 0 ? o.part : 0;
        uint64_t off = i == 0 ? o.off : 0;
        for (; part < o.parts(); ++part, off = 0) {
          if (o.file_at(part) || cnt == max_iovecs || total >= max_gather_bytes) {
            more_follows = true;
            break;
          }
          uint64_t len = o.part_len(part) - off;
          if (len == 0) continue;
          iov[static_cast<size_t>(cnt)].iov_base = const_cast<std::byte*>(o.bytes_at(part) + off);
          iov[static_cast<size_t>(cnt)].iov_len = len;
          ++cnt;
          total += len;
        }
      }
      msghdr msg{};
      msg.msg_iov = iov.data();
      msg.msg_iovlen = static_cast<size_t>(cnt);
      // MSG_MORE: a file region or more buffers follow at once; let the
      // kernel fill segments instead of pushing a small one.
      ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL | (more_follows ? MSG_MORE : 0));
      if (n > 0) {
        consume_written(static_cast<uint64_t>(n));
        continue;
      }
      // cnt >= 1 here (the front part has bytes left), so 0 cannot happen
      // on a stream socket; treat it like a failed write.
      if (n == 0) errno = EPIPE;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      wait_writable();
      break;
    }
    // A client that went away (EPIPE, ECONNRESET) is routine; anything else
    // (EBADF or EINVAL from sendfile on a bad region) is worth a line.
    if (errno == EPIPE || errno == ECONNRESET || errno == ETIMEDOUT)
      SLUICE_LOG_DEBUG("connection {} from {}: write failed: {}", ctx_.id, ctx_.peer,
                       std::strerror(errno));
    else
      SLUICE_LOG_WARN("connection {} from {}: write failed: {}; closing", ctx_.id, ctx_.peer,
                      std::strerror(errno));
    close("write failed");
    return;
  }
  after_progress();
}

void connection::wait_writable() {
  writing_ = true;
  sock_.async_wait(tcp::socket::wait_write, [self = shared_from_this()](const asio::error_code&) {
    self->writing_ = false;
    if (self->closed_) return;
    // On an error the next write reports it.
    self->do_write();
  });
}

// Accounts `n` bytes written from the front of the write queue and retires
// responses that are complete.
void connection::consume_written(uint64_t n) {
  if (n > 0) {
    srv_.metrics_.bytes_out.fetch_add(n, std::memory_order_relaxed);
    last_activity_ms_ = srv_.cfg_.clk->monotonic_ms();
  }
  while (!wq_.empty()) {
    outgoing& o = wq_.front();
    o.skip_finished_parts();
    if (o.done()) {
      queued_bytes_ -= o.memory_bytes;
      --in_flight_;
      srv_.metrics_.responses.fetch_add(1, std::memory_order_relaxed);
      bool close_after = o.close_after;
      wq_.pop_front();
      if (close_after) {
        // Nothing is queued behind it (release stops at closing_).
        close("closed by the handler after its response");
        return;
      }
      continue;
    }
    if (n == 0) break;
    uint64_t k = std::min(o.part_len(o.part) - o.off, n);
    o.off += k;
    n -= k;
  }
  SLUICE_ASSERT(n == 0, "wrote more than was queued");
}

// After responses were written or released: resume reading if paused by
// backpressure, and finish a graceful stop once nothing is in flight.
void connection::after_progress() {
  if (closed_) return;
  if (draining_) {
    if (in_flight_ == 0) close("drained");
    return;
  }
  if (paused_ && can_accept_request()) {
    paused_ = false;
    process_input();
  }
}

void connection::begin_drain() {
  if (closed_ || draining_) return;
  draining_ = true;
  if (in_flight_ == 0) close("server stopping");
}

void connection::arm_idle_timer(int64_t at_ms) {
  idle_timer_.expires_after(std::chrono::milliseconds(srv_.cfg_.clk->sleep_ms_until(at_ms)));
  idle_timer_.async_wait([self = shared_from_this()](const asio::error_code& ec) {
    if (!ec) self->on_idle_timer();
  });
}

// The timer is not reset on every read or write; when it fires it checks
// the last activity and re-arms, so activity costs one clock read.
void connection::on_idle_timer() {
  if (closed_) return;
  const int64_t idle_ms = srv_.cfg_.connections_max_idle_ms;
  const int64_t now_ms = srv_.cfg_.clk->monotonic_ms();
  if (awaiting_handler_ > 0) {
    arm_idle_timer(now_ms + idle_ms);
    return;
  }
  if (now_ms - last_activity_ms_ < idle_ms) {
    arm_idle_timer(last_activity_ms_ + idle_ms);
    return;
  }
  SLUICE_LOG_DEBUG("closing connection {} from {}: idle for {} ms (connections.max.idle.ms)",
                   ctx_.id, ctx_.peer, srv_.cfg_.connections_max_idle_ms);
  srv_.metrics_.connections_closed_idle.fetch_add(1, std::memory_order_relaxed);
  close("idle");
}

void connection::close(const char* why) {
  if (closed_) return;
  closed_ = true;
  (void)why;  // only the debug log (compiled out by default) reads it
  SLUICE_LOG_DEBUG("connection {} from {} closed: {}", ctx_.id, ctx_.peer, why);
  asio::error_code ec;
  sock_.close(ec);
  idle_timer_.cancel();
  read_timer_.cancel();
  // Free what the connection holds now (file keepalives, buffers), even if
  // async operations still reference this object for a moment.
  window_.clear();
  wq_.clear();
  std::vector<std::byte>().swap(rbuf_);
  std::vector<std::byte>().swap(frame_);
  // The partial frame's share goes back to the budget; frames already
  // handed to the handler stay counted until their responders complete.
  if (budget_waiting_) srv_.budget_->cancel_wait(this);
  budget_waiting_ = false;
  srv_.budget_->release(std::exchange(frame_charge_, 0));
  if (opened_) {
    try {
      srv_.handler_.on_connection_close(ctx_);
    } catch (const std::exception& e) {
      SLUICE_LOG_ERROR("connection {} from {}: on_connection_close threw: {}", ctx_.id, ctx_.peer,
                       e.what());
    }
  }
  ctx_.state.reset();
  auto self = shared_from_this();  // erase may drop the registry's reference
  thr_.conns.erase(ctx_.id);
  srv_.connection_closed();
}

// ---- server_impl ----------------------------------------------------------------

status server_impl::start() {
  SLUICE_ASSERT(!started_, "server started twice");
  started_ = true;
  // sendfile(2) cannot be told MSG_NOSIGNAL; a peer that resets must give
  // EPIPE, not kill the process.
  std::signal(SIGPIPE, SIG_IGN);

  if (cfg_.socket_request_max_bytes < 0 || cfg_.max_connections < 0 ||
      cfg_.max_inflight_requests_per_connection < 1 ||
      cfg_.max_inflight_request_bytes_per_connection < 1 ||
      cfg_.max_queued_response_bytes_per_connection < 1 || cfg_.request_read_timeout_ms < 1 ||
      cfg_.request_budget_reserve_bytes < 0)
    return status(errc::invalid_argument, "server_config: limits must be positive");
  // One frame of the largest size must always fit beside the small frames'
  // reserve, or it could never be read whole.
  if (cfg_.queued_max_request_bytes <
      limits::min_queued_max_request_bytes(cfg_.socket_request_max_bytes, cfg_.request_budget_reserve_bytes))
    return status(errc::invalid_argument,
                  fmt::format("queued.max.request.bytes {} is below socket.request.max.bytes {} "
                              "plus the {} bytes reserved for small requests",
                              cfg_.queued_max_request_bytes, cfg_.socket_request_max_bytes,
                              cfg_.request_budget_reserve_bytes));

  uint32_t n = cfg_.io_threads;
  if (n == 0) n = std::max(1u, std::thread::hardware_concurrency());
  for (uint32_t i = 0; i < n; ++i) threads_.push_back(std::make_unique<io_thread>());

  auto& ctx0 = threads_[0]->ctx;
  asio::error_code ec;
  tcp::resolver resolver(ctx0);
  auto endpoints = resolver.resolve(cfg_.host, std::to_string(cfg_.port),
                                    tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec || endpoints.empty()) {
    threads_.clear();
    return status(errc::invalid_argument,
                  fmt::format("cannot resolve listen host '{}': {}", cfg_.host, ec.message()));
  }
  tcp::endpoint ep = endpoints.begin()->endpoint();
  acceptor_.emplace(ctx0);
  auto fail = [&](const char* what) {
    std::string msg = fmt::format("cannot listen on {}:{}: {} failed: {}", cfg_.host, cfg_.port,
                                  what, ec.message());
    acceptor_.reset();
    threads_.clear();
    return status(errc::io_error, std::move(msg));
  };
  acceptor_->open(ep.protocol(), ec);
  if (ec) return fail("open");
  acceptor_->set_option(tcp::acceptor::reuse_address(true), ec);
  if (ec) return fail("setsockopt");
  acceptor_->bind(ep, ec);
  if (ec) return fail("bind");
  acceptor_->listen(cfg_.listen_backlog, ec);
  if (ec) return fail("listen");
  port_ = acceptor_->local_endpoint(ec).port();
  if (ec) return fail("getsockname");
  accept_retry_.emplace(ctx0);

  for (auto& t : threads_) t->work.emplace(t->ctx.get_executor());
  size_t running = 0;
  try {
    for (; running < threads_.size(); ++running) {
      auto* ctx = &threads_[running]->ctx;
      threads_[running]->thread = std::thread([ctx, running] {
        set_thread_name("sluice-io-" + std::to_string(running));
        ctx->run();
      });
    }
  } catch (const std::system_error& e) {
    // Out of threads: undo what started. Nothing has been accepted: the
    // first accept is posted only once every thread runs.
    for (size_t i = 0; i < running; ++i) threads_[i]->ctx.stop();
    for (size_t i = 0; i < running; ++i) threads_[i]->thread.join();
    accept_retry_.reset();
    acceptor_.reset();
    for (auto& t : threads_) t.reset();
    threads_.clear();
    return status(errc::io_error, fmt::format("cannot start I/O threads: {}", e.what()));
  }
  asio::post(ctx0, [this] { start_accept(); });
  SLUICE_LOG_INFO("listening on {}:{} with {} I/O threads", ep.address().to_string(), port_, n);
  return {};
}

void server_impl::start_accept() {
  size_t index = next_thread_;
  next_thread_ = (next_thread_ + 1) % threads_.size();
  acceptor_->async_accept(threads_[index]->ctx,
                          [this, index](const asio::error_code& ec, tcp::socket sock) {
                            on_accept(ec, std::move(sock), index);
                          });
}

void server_impl::on_accept(const asio::error_code& ec, tcp::socket sock, size_t index) {
  if (ec == asio::error::operation_aborted || stopping_.load()) return;
  if (ec) {
    // Out of descriptors and the like: wait a little rather than spin.
    SLUICE_LOG_WARN("accept failed: {}; retrying in {} ms", ec.message(), limits::accept_retry_delay_ms);
    accept_retry_->expires_after(std::chrono::milliseconds(limits::accept_retry_delay_ms));
    accept_retry_->async_wait([this](const asio::error_code& e) {
      if (!e && !stopping_.load()) start_accept();
    });
    return;
  }
  asio::error_code pec;
  tcp::endpoint remote = sock.remote_endpoint(pec);
  std::string peer =
      pec ? std::string("?") : fmt::format("{}:{}", remote.address().to_string(), remote.port());
  const int64_t max_connections = max_connections_.load(std::memory_order_relaxed);
  if (metrics_.connections_active.load() >= static_cast<uint64_t>(max_connections)) {
    metrics_.connections_rejected.fetch_add(1, std::memory_order_relaxed);
    asio::error_code cec;
    sock.close(cec);
    log_rejected(peer);
  } else {
    metrics_.connections_active.fetch_add(1);
    metrics_.connections_accepted.fetch_add(1, std::memory_order_relaxed);
    uint64_t id = next_conn_id_.fetch_add(1);
    io_thread& thr = *threads_[index];
    asio::post(thr.ctx, [this, &thr, id, peer = std::move(peer), s = std::move(sock)]() mutable {
      auto conn = std::make_shared<connection>(*this, thr, std::move(s), id, std::move(peer));
      thr.conns.emplace(id, conn);
      conn->start();
    });
  }
  start_accept();
}

// At most one line per limits::rate_limited_log_interval_ms, counting the
// ones it stands for.
void server_impl::log_rejected(const std::string& peer) {
  const int64_t now_ms = cfg_.clk->monotonic_ms();
  ++rejects_unlogged_;
  if (last_reject_log_ms_ && now_ms - *last_reject_log_ms_ < limits::rate_limited_log_interval_ms) return;
  SLUICE_LOG_WARN(
      "rejected connection from {}: {} connections open (max {}); {} rejected since the last "
      "such line",
      peer, metrics_.connections_active.load(), max_connections_.load(), rejects_unlogged_);
  rejects_unlogged_ = 0;
  last_reject_log_ms_ = now_ms;
}

void server_impl::connection_closed() {
  if (metrics_.connections_active.fetch_sub(1) == 1 && stopping_.load()) {
    std::lock_guard lock(drain_mu_);
    drain_cv_.notify_all();
  }
}

template <class Fn>
void server_impl::run_on_all_threads(Fn fn) {
  std::vector<std::future<void>> done;
  for (auto& t : threads_) {
    auto p = std::make_shared<std::promise<void>>();
    done.push_back(p->get_future());
    asio::post(t->ctx, [p, fn, thr = t.get()] {
      fn(*thr);
      p->set_value();
    });
  }
  for (auto& f : done) f.wait();
}

void server_impl::stop() {
  if (!started_ || stopped_ || threads_.empty()) return;
  stopped_ = true;
  stopping_.store(true);

  // 1. Stop accepting. Running this on thread 0 also waits out an accept
  //    handler that is in progress.
  std::promise<void> accept_closed;
  asio::post(threads_[0]->ctx, [this, &accept_closed] {
    asio::error_code ec;
    acceptor_->close(ec);
    accept_retry_->cancel();
    accept_closed.set_value();
  });
  accept_closed.get_future().wait();

  // 2. Drain: no new requests; connections close once their in-flight
  //    requests are answered, or at the deadline.
  auto close_all = [](const char* why) {
    return [why](io_thread& t) {
      std::vector<std::shared_ptr<connection>> conns;
      for (auto& [id, c] : t.conns) conns.push_back(c);
      for (auto& c : conns) {
        if (why)
          c->close(why);
        else
          c->begin_drain();
      }
    };
  };
  run_on_all_threads(close_all(nullptr));
  {
    std::unique_lock lock(drain_mu_);
    auto timeout = std::chrono::milliseconds(std::max<int64_t>(0, cfg_.shutdown_drain_timeout_ms));
    drain_cv_.wait_for(lock, timeout, [this] { return metrics_.connections_active.load() == 0; });
  }
  uint64_t left = metrics_.connections_active.load();
  if (left > 0)
    SLUICE_LOG_WARN("stop: {} connections still had requests in flight after {} ms; closing them",
                    left, cfg_.shutdown_drain_timeout_ms);
  run_on_all_threads(close_all("server stopping, drain timeout"));

  // 3. No completion may reach an io_context from now on.
  {
    std::unique_lock lock(gate_->mu);
    gate_->open = false;
  }
  for (auto& t : threads_) {
    t->work.reset();
    t->ctx.stop();
  }
  for (auto& t : threads_) t->thread.join();
  accept_retry_.reset();
  acceptor_.reset();
  // Destroy in index order: a handler still queued on thread 0 may own a
  // socket that belongs to another thread's io_context, which must outlive it.
  for (auto& t : threads_) t.reset();
  threads_.clear();
  SLUICE_LOG_INFO("server on port {} stopped", port_);
}

}  // namespace detail

std::optional<std::chrono::microseconds> connection_context::min_rtt() const {
  if (socket_fd < 0) return std::nullopt;
  return tcp_min_rtt(socket_fd);
}

// ---- responder ------------------------------------------------------------------

responder& responder::operator=(responder&& other) noexcept {
  if (this != &other) {
    if (link_)
      std::exchange(link_, nullptr)
          ->deliver(seq_, {detail::completion_kind::dropped, {}}, frame_bytes_);
    link_ = std::move(other.link_);
    seq_ = other.seq_;
    frame_bytes_ = other.frame_bytes_;
  }
  return *this;
}

responder::~responder() {
  if (link_) link_->deliver(seq_, {detail::completion_kind::dropped, {}}, frame_bytes_);
}

void responder::respond(response r) {
  SLUICE_ASSERT(link_, "responder completed twice");
  std::exchange(link_, nullptr)
      ->deliver(seq_, {detail::completion_kind::respond, std::move(r)}, frame_bytes_);
}

void responder::no_response() {
  SLUICE_ASSERT(link_, "responder completed twice");
  std::exchange(link_, nullptr)->deliver(seq_, {detail::completion_kind::none, {}}, frame_bytes_);
}

void responder::respond_and_close(response r) {
  SLUICE_ASSERT(link_, "responder completed twice");
  std::exchange(link_, nullptr)
      ->deliver(seq_, {detail::completion_kind::respond_then_close, std::move(r)}, frame_bytes_);
}

void responder::close_connection() {
  SLUICE_ASSERT(link_, "responder completed twice");
  std::exchange(link_, nullptr)->deliver(seq_, {detail::completion_kind::close, {}}, frame_bytes_);
}

// ---- server -----------------------------------------------------------------------

server::server(server_config config, request_handler& handler)
    : impl_(std::make_unique<detail::server_impl>(std::move(config), handler)) {}

server::~server() = default;

status server::start() {
  return impl_->start();
}
uint16_t server::port() const {
  return impl_->port();
}
void server::stop() {
  impl_->stop();
}
const server_metrics& server::metrics() const {
  return impl_->metrics_;
}

void server::set_max_connections(int64_t max_connections) {
  SLUICE_ASSERT(max_connections >= 0, "max_connections must not be negative");
  impl_->max_connections_.store(max_connections, std::memory_order_relaxed);
}

}  // namespace sluice::net
