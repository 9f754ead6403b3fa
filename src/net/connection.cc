#include "net/server_detail.h"

namespace sluice::net {
namespace detail {

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

}  // namespace detail
}  // namespace sluice::net
