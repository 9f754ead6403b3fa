#pragma once

// Names of the per-partition files besides segments (docs/log_format.md).

namespace sluice::storage::files {

inline constexpr const char* kLeaderEpochs = "leader-epoch-checkpoint";
inline constexpr const char* kRecoveryPoint = "recovery-point-checkpoint";
inline constexpr const char* kLogStart = "log-start-offset-checkpoint";
inline constexpr const char* kCleanShutdown = "clean-shutdown";
inline constexpr const char* kCleanerOffset = "cleaner-offset-checkpoint";

}  // namespace sluice::storage::files
