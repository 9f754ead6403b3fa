#pragma once

// Checkpoint files (docs/log_format.md, "Checkpoint files"): Kafka's text
// layout of a version line, a count line and `count` lines of integers,
// replaced atomically.

#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "io/file.h"

namespace sluice::storage::checkpoint {

using line = std::vector<int64_t>;

// Replaces `path` atomically with the given lines (each of the same width).
// Syncs the file and its directory.
status write(io::filesystem& fs, const std::string& path, const std::vector<line>& lines);

// Reads a checkpoint whose lines have `fields` integers each. nullopt when
// the file does not exist; errc::corrupt_data when it does not parse.
result<std::optional<std::vector<line>>> read(io::filesystem& fs, const std::string& path,
                                              size_t fields);

}  // namespace sluice::storage::checkpoint
