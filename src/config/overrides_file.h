#pragma once

// Persisted configuration overrides: a topic's overrides (keyed by topic key)
// or the broker's dynamic values (keyed by broker key), one small text file
// each. The format is a grammar in docs/configuration.md: a header line, one
// `key=value` line per override in Kafka's textual form, and a CRC-32C line.
// Files are replaced atomically (temp file, fsync, rename, fsync the dir).

#include <string>
#include <string_view>

#include "base/result.h"
#include "config/group_config.h"
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

// Every group's configs (GROUP resources, group_config.h) in one file of
// the same family: the header "sluice-group-configs 1", then per group, by
// ascending id, a line "group <id>" (the id percent-encoded,
// base/percent_encoding.h) followed by its `key=value` lines by ascending
// key, then the CRC-32C line. Grammar in docs/configuration.md.
std::string serialize_group_configs(const group_config_table& groups);
// Parses a file's contents: every key and value is checked as
// parse_group_value() checks a client's (not against the broker's bounds,
// which may have changed since: the effective values are clamped, as Kafka
// evaluates them). A torn, damaged or hand-broken file, a group without a
// key, groups or keys out of order, an id that is not the one encoding of
// a name, or an unknown key is errc::corrupt_data naming `origin` and the
// line.
result<group_config_table> parse_group_configs(std::string_view text, std::string_view origin);
// Replaces the file atomically. errc::invalid_config when the file would
// be larger than limits::max_group_configs_file_bytes (nothing written).
status write_group_configs_file(io::filesystem& fs, const std::string& path, const group_config_table& groups);
// errc::not_found when the file does not exist (no group has configs).
result<group_config_table> read_group_configs_file(io::filesystem& fs, const std::string& path);

}  // namespace sluice::config
