#pragma once

// The operator's HTTP endpoint (cpp-httplib): GET /metrics serves the
// Prometheus text that `render` returns, GET /health answers 200 "ok" while
// the broker serves. One worker thread: a scrape is cheap (it reads
// atomics and small per-partition figures) and never touches the data path.
//
// Lifecycle: start() binds and starts the thread; stop() joins it. Both
// from one controlling thread.

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "base/result.h"

namespace httplib {
class Server;
}

namespace sluice::metrics {

class http_endpoint {
 public:
  using render_fn = std::function<std::string()>;
  explicit http_endpoint(render_fn render);
  ~http_endpoint();

  // Binds host:port (0: any free port); errc::io_error if it cannot.
  status start(const std::string& host, uint16_t port);
  uint16_t port() const { return port_; }
  void stop();

 private:
  render_fn render_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  uint16_t port_ = 0;
};

}  // namespace sluice::metrics
