#pragma once

// The network server: Kafka's framing over TCP, nothing of the messages.
//
// A frame is an int32 big-endian length followed by that many bytes. The
// server reads request frames, hands each to a `request_handler` (the broker
// implements it) and writes the responses back in request order, whatever
// order the handler completes them in.
//
// Threads. `server_config::io_threads` I/O threads, each running its own
// asio::io_context. Every connection belongs to one I/O thread for its whole
// life (connections are spread round-robin at accept); all of its reads,
// writes, timers and handler callbacks happen on that thread. The acceptor
// lives on I/O thread 0.
//
// Flow of a request:
//   1. The connection's thread reads a whole frame and calls
//      handler.on_request(ctx, frame, responder).
//   2. The handler decodes the frame and, then or later, from any thread,
//      completes the `responder` exactly once: respond(response),
//      respond_and_close(response), no_response() (acks=0 produce) or
//      close_connection().
//   3. The server puts the completion in its slot of the connection's
//      reorder window and writes responses strictly in request order.
//
// Backpressure and memory bounds, per connection: the server stops reading
// from a socket while max_inflight_requests_per_connection requests are
// in flight (read but not yet fully written or dropped as no_response),
// while the request frames handed to the handler and not yet completed
// add up to max_inflight_request_bytes_per_connection, or while more than
// max_queued_response_bytes_per_connection bytes of owned response
// buffers wait to be written; it resumes when they drain. The read buffer
// of a frame grows with the bytes that actually arrived, never to the
// declared length up front. So memory per connection is bounded by those
// limits plus one socket_request_max_bytes frame and a 64 KiB read buffer.
// These per-connection bounds are checked between frames: a frame whose
// first byte has arrived is read to its end (once the server-wide bound
// below admits it), so a frame's read deadline never runs while the
// connection waits on its own earlier requests. A connection paused at a bound notices its
// client leaving only when it next reads or writes.
//
// Server-wide memory bound (Kafka's queued.max.request.bytes,
// server_config::queued_max_request_bytes): once a frame's length has
// arrived, the frame is admitted only if its declared length fits in what
// the bound has left; its bytes then count from admission until the frame's
// responder is completed (or destroyed), on whatever connection and thread,
// or until its connection closes before the frame was read whole. A frame
// that does not fit waits, holding nothing, with reading stopped (its
// connection's unparsed bytes wait in the 64 KiB read buffer, the client's
// in TCP); waiting frames are admitted as bytes are freed, larger frames
// strictly in the order they asked. An admitted frame can always be read to
// its end, so the waits are only for frames to be answered. Frames
// declaring more than limits::request_budget_small_frame_bytes may use the
// bound less request_budget_reserve_bytes; small frames may use all of it
// and skip the large frames' queue, so clients' small requests keep being
// served while large frames hold the rest. An admitted frame must arrive
// whole within request_read_timeout_ms, or its connection is closed and its
// share freed: no client holds budget it does not use for longer, whether
// it stalls or trickles. So request frames in memory stay under
// queued_max_request_bytes, and the server's memory under that plus, per
// connection, the read buffer and the queued responses.
//
// Errors. Nothing a client sends crashes the server: a frame length above
// socket_request_max_bytes or negative, a reset, a handler reporting
// close_connection() all close that one connection only (one log line).
//
// Signals. The server does not handle SIGTERM/SIGINT itself: the caller
// (sluice serve) waits for them, for example with an asio::signal_set or
// sigwait, and calls stop(). Starting the server sets SIGPIPE to ignored
// for the process, since sendfile(2) has no MSG_NOSIGNAL.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/limits.h"
#include "base/result.h"
#include "net/response.h"

namespace sluice::net {

namespace detail {
class completion_link;
class connection;
class server_impl;
}  // namespace detail

// What the handler knows about the connection a request came on.
//
// Thread safety: only the connection's I/O thread touches it, that is,
// inside on_connection_open, on_request and on_connection_close for this
// connection. Those calls never overlap for one connection. The reference a
// callback receives is valid only during that call: copy out what you need
// (for example the `state` shared_ptr) to use it from another thread.
struct connection_context {
  uint64_t id = 0;   // unique per server, never reused
  std::string peer;  // "address:port" of the client
  // Opaque per-connection state for the broker (fetch sessions, SASL, the
  // client id...). Starts empty; destroyed after on_connection_close, or
  // later if the broker kept a copy of the shared_ptr.
  std::shared_ptr<void> state;
  // The connection's socket, set by the server (-1 in a context made by
  // hand, as in tests). Handlers ask min_rtt() rather than use it.
  int socket_fd = -1;

  // The smallest round-trip time the kernel has seen on this connection
  // (tcp_min_rtt, net/tcp_info.h), read at the call; nullopt when the
  // kernel cannot tell or there is no socket.
  std::optional<std::chrono::microseconds> min_rtt() const;

  // The state as a T, created (value-initialized) on first use. The broker
  // must always use the same T for a given server.
  template <class T>
  T& state_as() {
    if (!state) state = std::make_shared<T>();
    return *static_cast<T*>(state.get());
  }
};

// The completion of one request. Move-only; complete it exactly once, from
// any thread, with one of the three methods. Completing after the
// connection has closed, or after the server has stopped, is allowed and
// does nothing. Destroying a responder that was not completed closes the
// connection (a request can never be left unanswered while later responses
// wait behind it), with a warning log line.
class responder {
 public:
  responder() = default;
  responder(responder&&) noexcept = default;
  responder& operator=(responder&& other) noexcept;
  responder(const responder&) = delete;
  responder& operator=(const responder&) = delete;
  ~responder();

  // Sends `r` as this request's response frame (the server adds the length
  // prefix). Thread-safe.
  void respond(response r);
  // Sends `r` in its turn like respond(), then closes the connection once
  // it is written; later requests go unanswered and no more are read (for
  // example after a failed SASL authentication). Thread-safe.
  void respond_and_close(response r);
  // This request gets no response (Kafka's acks=0 produce); later responses
  // are not held up by it. Thread-safe.
  void no_response();
  // Closes the connection at once, without waiting for its turn: this
  // request and all later ones go unanswered, and responses of earlier
  // requests not yet written are dropped. Use for requests that cannot be
  // decoded. Thread-safe.
  void close_connection();

  // True until completed (or moved from).
  bool pending() const { return link_ != nullptr; }

  // What became of a request answered in-process (to_function).
  enum class outcome { responded, responded_then_close, no_response, closed, dropped };
  // A responder tied to no connection: its completion goes to `done`, on
  // the thread that completes it, with the response (empty unless
  // responded). For running handlers in one process: tests, and the
  // links of a cluster simulated in one process.
  static responder to_function(std::function<void(outcome, response)> done);
  // The request's position on its connection, counting from 0.
  uint64_t sequence() const { return seq_; }

 private:
  friend class detail::connection;
  responder(std::shared_ptr<detail::completion_link> link, uint64_t seq, uint64_t frame_bytes)
      : link_(std::move(link)), seq_(seq), frame_bytes_(frame_bytes) {}

  std::shared_ptr<detail::completion_link> link_;
  uint64_t seq_ = 0;
  // The request frame's bytes, counted against queued_max_request_bytes
  // until this responder is completed or destroyed.
  uint64_t frame_bytes_ = 0;
};

// The broker's side. Callbacks run on the connection's I/O thread and must
// not block (no fsync, no waiting for other threads): hand slow work to
// another thread and complete the responder from there. A callback that
// throws closes that connection with an error log line.
class request_handler {
 public:
  virtual ~request_handler() = default;

  // A connection was accepted. `ctx.state` may be set here.
  virtual void on_connection_open(connection_context& /*ctx*/) {}
  // One request frame (the bytes after the length prefix: request header
  // and body). The handler owns `frame`.
  virtual void on_request(connection_context& ctx, std::vector<std::byte> frame, responder r) = 0;
  // The connection is closed (client gone, error, idle timeout or server
  // stop). Called once per on_connection_open. Responders of this
  // connection still held by the broker may be completed or dropped later;
  // either is a no-op.
  virtual void on_connection_close(connection_context& /*ctx*/) {}
};

struct server_config {
  std::string host = "127.0.0.1";
  uint16_t port = 9092;  // 0: the OS picks a free port; see server::port()
  // 0 means one per core (std::thread::hardware_concurrency()).
  uint32_t io_threads = 0;
  // socket.request.max.bytes: a frame declaring more closes the connection.
  int64_t socket_request_max_bytes = limits::default_socket_request_max_bytes;
  // connections.max.idle.ms: a connection with nothing read or written for
  // this long, and no request awaiting the handler, is closed (a client
  // that stops reading its responses is idle too). 0 or less: never.
  int64_t connections_max_idle_ms = limits::default_connections_max_idle_ms;
  // Connections beyond this are accepted and closed at once.
  int64_t max_connections = limits::default_max_connections;
  int64_t max_inflight_requests_per_connection =
      limits::default_max_inflight_requests_per_connection;
  // Reading pauses while the request frames handed to the handler and not
  // yet completed add up to this (one frame is always allowed).
  int64_t max_inflight_request_bytes_per_connection =
      limits::default_max_inflight_request_bytes_per_connection;
  int64_t max_queued_response_bytes_per_connection =
      limits::default_max_queued_response_bytes_per_connection;
  // queued.max.request.bytes: the server-wide bound on request bytes held
  // (see the top of this file). At least socket_request_max_bytes plus
  // request_budget_reserve_bytes, else start() fails.
  int64_t queued_max_request_bytes = limits::default_queued_max_request_bytes;
  // The part of that bound only frames of at most
  // limits::request_budget_small_frame_bytes may use. Not an operator
  // setting; tests shrink it with the bound.
  int64_t request_budget_reserve_bytes = limits::request_budget_reserve_bytes;
  // sluice.request.read.timeout.ms: a frame must arrive whole within this
  // of its admission, or the connection is closed. At least 1.
  int64_t request_read_timeout_ms = limits::default_request_read_timeout_ms;
  // How long stop() waits for in-flight requests to be answered.
  int64_t shutdown_drain_timeout_ms = limits::default_shutdown_drain_timeout_ms;
  int listen_backlog = limits::default_listen_backlog;
  // The clock the idle and read timeouts run on (base/clock.h); outlives
  // the server.
  sluice::clock* clk = &sluice::clock::system();
};

// Counters; plain relaxed atomics, read from any thread.
struct server_metrics {
  std::atomic<uint64_t> connections_accepted{0};
  std::atomic<uint64_t> connections_rejected{0};  // over max_connections
  std::atomic<uint64_t> connections_active{0};
  std::atomic<uint64_t> connections_closed_idle{0};
  std::atomic<uint64_t> connections_closed_bad_frame{0};  // oversize or negative length
  std::atomic<uint64_t> bytes_in{0};
  std::atomic<uint64_t> bytes_out{0};
  std::atomic<uint64_t> requests{0};     // frames handed to the handler
  std::atomic<uint64_t> responses{0};    // response frames fully written
  std::atomic<uint64_t> read_pauses{0};  // times a connection stopped reading (backpressure)
  // The server-wide bound (queued_max_request_bytes). Gauges first.
  // Declared bytes of the frames admitted and not yet answered.
  std::atomic<uint64_t> request_bytes_held{0};
  std::atomic<uint64_t> connections_waiting_on_budget{0};  // frames waiting for admission now
  std::atomic<uint64_t> budget_waits{0};                   // frames that had to wait for admission
  // Closed because a frame did not arrive whole within request_read_timeout_ms.
  std::atomic<uint64_t> connections_closed_read_timeout{0};
};

// Lifecycle: construct, start(), ..., stop() (or destroy, which stops).
// start() and stop() are called from one controlling thread, never from an
// I/O thread or a handler callback. `handler` must outlive the server.
class server {
 public:
  server(server_config config, request_handler& handler);
  ~server();
  server(const server&) = delete;
  server& operator=(const server&) = delete;

  // Binds and listens on config.host:config.port and starts the I/O threads.
  // Fails (errc::io_error or invalid_argument) if the address cannot be
  // bound; then nothing is running. Call at most once.
  status start();

  // The bound port (useful with port 0). Valid after a successful start().
  uint16_t port() const;

  // Graceful stop: stops accepting, stops reading new requests, waits up to
  // shutdown_drain_timeout_ms for in-flight requests to be completed and
  // their responses written, then closes every connection, calls
  // on_connection_close for each and joins the I/O threads. Blocks until
  // done. Idempotent. After it returns no handler callback runs any more.
  void stop();

  const server_metrics& metrics() const;

  // max.connections changed at runtime: later accepts use the new bound;
  // connections already open stay open. Any thread.
  void set_max_connections(int64_t max_connections);

 private:
  std::unique_ptr<detail::server_impl> impl_;
};

}  // namespace sluice::net
