#pragma once

// The network server's insides (net/server.cc), shared by the files it is
// cut into along its seams: request_budget.cc (the server-wide bound on
// request bytes, and the link a responder completes through),
// connection.cc (one connection: framing, admission, dispatch, the write
// path, timers and closing) and server.cc (accepting, the I/O threads,
// stopping, and the public server and responder). Not for use outside
// src/net: asio stays out of every other header.

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
  // A link to no connection: every completion goes to `sink`
  // (responder::to_function).
  explicit completion_link(std::function<void(completion)> sink) : sink_(std::move(sink)) {}
  // Frees the request's `frame_bytes` from the budget, whatever becomes of
  // the connection, then hands `c` to the connection if it is still there.
  void deliver(uint64_t seq, completion c, uint64_t frame_bytes);

 private:
  std::shared_ptr<gate> gate_;
  std::shared_ptr<request_budget> budget_;
  std::weak_ptr<connection> conn_;
  std::function<void(completion)> sink_;
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

}  // namespace detail
}  // namespace sluice::net
