#pragma once

// The subcommands of `sluice`. Each adds itself to the CLI11 application and,
// when chosen, runs and stores its exit status in `*exit_code`:
// 0 success, 1 the operation failed (a message says why), 2 bad usage.

#include <CLI/CLI.hpp>

namespace sluice::cli {

inline constexpr const char* default_bootstrap = "127.0.0.1:9092";
// How long a command waits for the broker to answer (--timeout-ms).
inline constexpr int default_timeout_ms = 30'000;

void add_topic_command(CLI::App& app, int* exit_code);
void add_produce_command(CLI::App& app, int* exit_code);
void add_consume_command(CLI::App& app, int* exit_code);
void add_group_command(CLI::App& app, int* exit_code);
void add_config_command(CLI::App& app, int* exit_code);
void add_cluster_command(CLI::App& app, int* exit_code);
void add_txn_command(CLI::App& app, int* exit_code);
void add_dlq_command(CLI::App& app, int* exit_code);

}  // namespace sluice::cli
