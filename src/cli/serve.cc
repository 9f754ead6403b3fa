// `sluice serve`: load the configuration, open the broker, run until
// SIGTERM or SIGINT, then shut down cleanly and exit 0.

#include "cli/serve.h"

#include <signal.h>

#include <cstdio>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "broker/broker.h"
#include "config/broker_config.h"

namespace sluice::cli {

namespace {

void setup_logging() {
  auto logger = spdlog::stderr_logger_mt("sluice");
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
  logger->set_level(spdlog::level::info);
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
}

}  // namespace

int serve_main(int argc, char** argv) {
  auto parsed = config::parse_serve_args(argc, argv);
  if (!parsed) {
    std::fprintf(stderr, "sluice serve: %s\n", parsed.err().message.c_str());
    return 2;
  }
  if (parsed->help) {
    std::fputs(config::render_help().c_str(), stdout);
    return 0;
  }
  auto cfg = config::load_broker_config(*parsed);
  if (!cfg) {
    std::fprintf(stderr, "sluice serve: %s\n", cfg.err().message.c_str());
    return 2;
  }
  setup_logging();

  // Block the stop signals in every thread (threads inherit the mask), and
  // wait for them here.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  auto b = broker::broker::open(std::make_shared<const config::broker_config>(std::move(*cfg)));
  if (!b) {
    // A plain line for the operator at the terminal, not a log record: the
    // broker never started, and the message says what to fix.
    spdlog::default_logger()->flush();
    std::fprintf(stderr, "sluice serve: cannot start: %s\n", b.err().message.c_str());
    return 1;
  }
  int sig = 0;
  sigwait(&stop_signals, &sig);
  SPDLOG_INFO("received {}", sig == SIGTERM ? "SIGTERM" : "SIGINT");
  status s = (*b)->stop();
  return s.ok() ? 0 : 1;
}

}  // namespace sluice::cli
