#pragma once

// Persisted configuration overrides: a topic's overrides (keyed by topic key)
// or the broker's dynamic values (keyed by broker key), one small text file
// each. The format is a grammar in docs/configuration.md: a header line, one
// `key=value` line per override in Kafka's textual form, and a CRC-32C line.
// Files are replaced atomically (temp file, fsync, rename, fsync the dir).

#include <string>
#include <string_view>

#include "base/result.h"
#include "config/schema.h"
#include "io/file.h"

namespace sluice::config {

enum class overrides_kind : uint8_t {
  topic,   // keys are topic keys (retention.ms)
  broker,  // keys are broker keys (log.retention.ms)
};

std::string serialize_overrides(overrides_kind kind, const config_map& values);

// Parses a file's contents; every key and value is validated as if it came
// from a client. A file that is torn, edited badly or from another version is
// errc::corrupt_data with a message naming `origin` and the line.
result<config_map> parse_overrides(overrides_kind kind, std::string_view text,
                                   std::string_view origin);

status write_overrides_file(io::filesystem& fs, const std::string& path, overrides_kind kind,
                            const config_map& values);
// errc::not_found when the file does not exist (no overrides).
result<config_map> read_overrides_file(io::filesystem& fs, const std::string& path,
                                       overrides_kind kind);

}  // namespace sluice::config
