#include "metrics/http_endpoint.h"

#include <httplib.h>

#include <chrono>

#include "base/limits.h"
#include "base/log.h"

namespace sluice::metrics {

http_endpoint::http_endpoint(render_fn render) : render_(std::move(render)) {}

http_endpoint::~http_endpoint() { stop(); }

status http_endpoint::start(const std::string& host, uint16_t port) {
  server_ = std::make_unique<httplib::Server>();
  // One worker: scrapes are rare and cheap; a flood of them waits instead
  // of taking threads from the broker.
  server_->new_task_queue = [] { return new httplib::ThreadPool(1); };
  server_->set_payload_max_length(limits::max_metrics_http_request_bytes);
  server_->set_read_timeout(5, 0);
  server_->set_write_timeout(5, 0);
  server_->set_keep_alive_max_count(10);
  server_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(render_(), "text/plain; version=0.0.4");
  });
  server_->Get("/health", [](const httplib::Request&, httplib::Response& res) { res.set_content("ok\n", "text/plain"); });
  int bound = port == 0 ? server_->bind_to_any_port(host) : (server_->bind_to_port(host, port) ? port : -1);
  if (bound <= 0) {
    server_.reset();
    return status(errc::io_error, "cannot listen for metrics on " + host + ":" + std::to_string(port));
  }
  port_ = static_cast<uint16_t>(bound);
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  // httplib's stop() does nothing until the listening thread has marked the
  // server running; wait for that, so a stop() right after start() cannot
  // leave the thread blocked in accept() forever.
  for (int i = 0; i < 10'000 && !server_->is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  SLUICE_LOG_INFO("metrics on http://{}:{}/metrics", host, port_);
  return {};
}

void http_endpoint::stop() {
  if (!server_) return;
  server_->stop();
  if (thread_.joinable()) thread_.join();
  server_.reset();
}

}  // namespace sluice::metrics
