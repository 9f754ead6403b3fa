#include "maintenance/log_maintenance.h"

#include "metadata/partition_manager.h"

namespace sluice::cluster {

log_maintenance::log_maintenance(partition_manager& pm, sluice::clock& clk) : pm_(pm), clk_(clk) {}

log_maintenance::~log_maintenance() { stop(); }

void log_maintenance::start() {
  const auto cfg = pm_.broker_config();
  retention_ = std::make_unique<retention_task>(pm_, clk_, cfg->log_retention_check_interval_ms);
  pm_.on_broker_config_change([r = retention_.get()](const config::broker_config& next) {
    r->set_interval_ms(next.log_retention_check_interval_ms);
  });
  retention_->start();
  if (cfg->log_cleaner_enable && cfg->log_cleaner_threads > 0) {
    cleaner_ = std::make_unique<log_cleaner>(pm_, clk_, cfg->log_cleaner_threads, cfg->log_cleaner_dedupe_buffer_bytes,
                                             cfg->log_cleaner_backoff_ms);
    cleaner_->start();
  }
}

void log_maintenance::stop() {
  if (cleaner_) cleaner_->stop();
  if (retention_) retention_->stop();
}

}  // namespace sluice::cluster
