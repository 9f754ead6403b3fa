#pragma once

// Raw Kafka requests (protocol/raw_client.h) that more than one command
// sends: finding a coordinator, and describing a group's configs. They are
// for what Debian's librdkafka 2.0.2 cannot ask (transaction, share-group
// and GROUP-config APIs).
//
// Every call blocks; each request is bounded by `timeout` and the retries
// of retriable answers by `until`.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "base/clock.h"
#include "base/result.h"
#include "protocol/error_code.h"
#include "protocol/raw_client.h"

namespace sluice::cli {

// FindCoordinator's key types.
inline constexpr int8_t coordinator_key_group = 0;
inline constexpr int8_t coordinator_key_transaction = 1;

// Kafka's name of `code`, with the broker's message in parentheses when it
// sent one: "NON_EMPTY_GROUP (group g has 2 members)".
std::string kafka_failure(int16_t code, const std::optional<std::string>& message);

// Whether a coordinator's answer `code` means "ask again, maybe elsewhere":
// COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR.
bool coordinator_retriable(int16_t code);

// The node id of the coordinator of `key` (a group id or a transactional
// id, by `key_type`) and a connection to it, through the first reachable
// broker of `bootstrap`; asks again while the brokers name none, until
// `until` has passed (errc::unavailable then).
result<std::pair<int32_t, protocol::raw_connection>> connect_coordinator(const std::string& bootstrap,
                                                                         const std::string& key, int8_t key_type,
                                                                         std::chrono::milliseconds timeout,
                                                                         const sluice::deadline& until);

// DescribeConfigs v4 of the GROUP resource `group` (type 32) at the broker
// `conn` reaches: every config key with its value and source, synonyms too
// when asked. A Kafka error for the resource is errc::invalid_argument
// naming it.
using group_configs = protocol::describe_configs_response::describe_configs_result;
result<group_configs> describe_group_configs(protocol::raw_connection& conn, const std::string& group,
                                             bool synonyms);

}  // namespace sluice::cli
