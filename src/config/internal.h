#pragma once

// Helpers shared by the .cc files of config/; not part of the interface.

#include <string>
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

// Checks between settings that each are valid alone (min <= max).
status check_topic_consistency(const topic_config& t, bool topic_level);

// " (did you mean X?)" for a mistyped key, or "" when nothing is close.
// `topic` picks which names to compare against.
std::string suggestion(std::string_view key, bool topic);

}  // namespace sluice::config::detail
