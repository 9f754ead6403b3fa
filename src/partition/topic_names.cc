#include "partition/topic_names.h"

#include "base/limits.h"

namespace sluice::cluster {

bool is_internal_topic(const std::string& name) {
  return name == "__consumer_offsets" || name == "__transaction_state" || name == "__share_group_state";
}

status validate_topic_name(const std::string& name) {
  if (name.empty()) return status(errc::invalid_argument, "topic name is empty");
  if (name == "." || name == "..") return status(errc::invalid_argument, "topic name cannot be '.' or '..'");
  if (name.size() > limits::max_topic_name_bytes) {
    return status(errc::invalid_argument, "topic name is longer than " +
                                              std::to_string(limits::max_topic_name_bytes) + " characters");
  }
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
              c == '_' || c == '-';
    if (!ok) {
      return status(errc::invalid_argument,
                    "topic name '" + name + "' has characters other than ASCII letters, digits, '.', '_' and '-'");
    }
  }
  return {};
}

}  // namespace sluice::cluster
