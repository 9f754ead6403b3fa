#include "net/server_detail.h"

namespace sluice::net {
namespace detail {

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

responder responder::to_function(std::function<void(outcome, response)> done) {
  auto sink = [done = std::move(done)](detail::completion c) {
    using k = detail::completion_kind;
    switch (c.kind) {
      case k::respond: return done(outcome::responded, std::move(c.resp));
      case k::respond_then_close: return done(outcome::responded_then_close, std::move(c.resp));
      case k::none: return done(outcome::no_response, {});
      case k::close: return done(outcome::closed, {});
      case k::dropped: return done(outcome::dropped, {});
    }
  };
  return responder(std::make_shared<detail::completion_link>(std::move(sink)), 0, 0);
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
