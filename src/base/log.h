#pragma once

// Logging: one line per event through spdlog, with levels. Subsystems log
// through these macros so the sink and format are decided in one place
// (broker start-up sets them).

#include <spdlog/spdlog.h>

#define SLUICE_LOG_DEBUG(...) SPDLOG_DEBUG(__VA_ARGS__)
#define SLUICE_LOG_INFO(...) SPDLOG_INFO(__VA_ARGS__)
#define SLUICE_LOG_WARN(...) SPDLOG_WARN(__VA_ARGS__)
#define SLUICE_LOG_ERROR(...) SPDLOG_ERROR(__VA_ARGS__)
