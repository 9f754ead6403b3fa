#pragma once

// Helpers shared by the .cc files of config/; not part of the interface.

#include <span>
#include <string>
#include <vector>
#include <string_view>

#include "base/result.h"
#include "config/broker_config.h"
#include "config/dynamic.h"
#include "config/schema.h"

namespace sluice::config::detail {

// A broker setting's value and the level it comes from: this node's dynamic
// value, the cluster-wide dynamic default, the static (file and command
// line) value, else the schema default.
struct sourced_value {
  const config_value* value = nullptr;
  config_source source = config_source::unknown;
};
sourced_value broker_value(const broker_config& b, const setting& s);

// The broker levels of a setting, highest priority first: this node's
// dynamic value, the dynamic default, the static value, the default (always
// there).
std::vector<config_synonym> broker_chain(const broker_config& b, const setting& s);

// A DescribeConfigs entry named `name` whose value and source are the first
// of `chain` (not empty).
described_config describe_one(const setting& s, std::string name, std::vector<config_synonym> chain,
                              bool read_only);

// Refuses (errc::invalid_config) a key named twice in one request, as Kafka
// does.
status check_no_duplicates(std::span<const alter_request> ops);

// Checks between settings that each are valid alone (min <= max).
status check_topic_consistency(const topic_config& t, bool topic_level);

// One sluice.etcd.endpoints item in its normal form, "http://host:port":
// scheme and host name in lower case, an IPv4 or IPv6 address as inet_ntop
// writes it (IPv6 in brackets), the port without leading zeros, no trailing
// slash. Refuses (errc::invalid_config, a message without the key) https://
// and other schemes, a path, query or user, a missing or bad port, a bad
// host, and the unspecified addresses.
result<std::string> normalize_etcd_endpoint(std::string_view url);

// True for an address nobody can connect to: 0.0.0.0 or :: in any
// spelling, or an empty host (which the listeners read as 0.0.0.0).
bool is_unspecified_address(std::string_view host);

// Levenshtein distance (insertions, deletions, substitutions) between two
// keys, for suggestions.
size_t edit_distance(std::string_view a, std::string_view b);

// " (did you mean X?)" for a mistyped key, or "" when nothing is close.
// `topic` picks which names to compare against.
std::string suggestion(std::string_view key, bool topic);

}  // namespace sluice::config::detail
