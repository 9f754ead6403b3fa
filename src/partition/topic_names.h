#pragma once

// Kafka's rules for topic names, asked by whoever takes a name from a
// client: the stores that create topics and the replica manager that tells
// a malformed name (INVALID_TOPIC_EXCEPTION) from an unknown one.

#include <string>

#include "base/result.h"

namespace sluice::cluster {

// Kafka's internal topics: written only by the broker itself (the group
// coordinator's offsets and group records, the transaction coordinator's
// state, the share coordinator's share-partition states), never by
// clients, and never deleted by them.
bool is_internal_topic(const std::string& name);

// Checks a topic name by Kafka's rules: 1 to 249 characters of
// [a-zA-Z0-9._-], and not "." or "..". errc::invalid_argument naming why.
status validate_topic_name(const std::string& name);

}  // namespace sluice::cluster
