#pragma once

// The broker process: opens the data directory (storage, topics), starts the
// Kafka server, and shuts everything down in order.
//
// Lifecycle: open() then run until the caller (sluice serve) receives
// SIGTERM/SIGINT and calls stop(): stop accepting, answer what is in flight
// (waiting fetches are answered at once), flush, write producer snapshots
// and index files of partitions that changed (on a few threads), then the
// one clean-shutdown record naming every log closed cleanly.
//
// One broker per data directory: open() takes an exclusive lock on
// <data_dir>/.lock (writing its pid into it) and fails with "in use by
// another sluice process (pid N)" only when another broker holds that lock.
// A data directory that cannot be created, is not a directory, or whose
// lock file cannot be opened for writing (read-only file system, no
// permission) fails with a message naming the step and the OS error.

#include <memory>

#include "base/result.h"
#include "config/broker_config.h"

namespace sluice::broker {

class broker {
 public:
  static result<std::unique_ptr<broker>> open(std::shared_ptr<const config::broker_config> cfg);
  ~broker();

  // The port the server listens on (useful when the config asked for 0).
  uint16_t port() const;
  // Graceful stop; returns the first error met while flushing. Idempotent.
  status stop();

  // The broker's parts, wired in broker.cc.
  struct impl;

 private:
  explicit broker(std::unique_ptr<impl> i);
  std::unique_ptr<impl> impl_;
};

}  // namespace sluice::broker
