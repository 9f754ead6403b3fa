#include "cli/raw_requests.h"

#include <thread>

namespace sluice::cli {

using protocol::raw_connection;

namespace {

constexpr int16_t find_coordinator_version = 3;  // every Kafka since 2.4
constexpr int16_t describe_configs_version = 4;  // Kafka 2.8 on; GROUP resources from 4.0
constexpr int8_t resource_group = 32;            // Kafka's ConfigResource.Type GROUP

}  // namespace

std::string kafka_failure(int16_t code, const std::optional<std::string>& message) {
  return protocol::kafka_error_name(code) + (message && !message->empty() ? " (" + *message + ")" : "");
}

bool coordinator_retriable(int16_t code) {
  using kafka::error_code;
  return code == kafka::to_wire(error_code::coordinator_not_available) ||
         code == kafka::to_wire(error_code::coordinator_load_in_progress) ||
         code == kafka::to_wire(error_code::not_coordinator);
}

result<std::pair<int32_t, raw_connection>> connect_coordinator(const std::string& bootstrap, const std::string& key,
                                                               int8_t key_type, std::chrono::milliseconds timeout,
                                                               const sluice::deadline& until) {
  for (;;) {
    SLUICE_ASSIGN_OR_RETURN(auto conn, raw_connection::connect_any(bootstrap, timeout));
    protocol::find_coordinator_request req;
    req.key = key;
    req.key_type = key_type;
    SLUICE_ASSIGN_OR_RETURN(auto r, conn.call<protocol::find_coordinator_response>(req, find_coordinator_version));
    if (r.error_code == 0) {
      SLUICE_ASSIGN_OR_RETURN(auto c, raw_connection::connect(protocol::endpoint_of(r.host, r.port), timeout));
      return std::make_pair(r.node_id, std::move(c));
    }
    if (!coordinator_retriable(r.error_code) || until.passed())
      return error{errc::unavailable, "finding the coordinator of " + key + ": " + kafka_failure(r.error_code, r.error_message)};
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

result<group_configs> describe_group_configs(raw_connection& conn, const std::string& group, bool synonyms) {
  protocol::describe_configs_request req;
  auto& r = req.resources.emplace_back();
  r.resource_type = resource_group;
  r.resource_name = group;
  req.include_synonyms = synonyms;
  SLUICE_ASSIGN_OR_RETURN(auto resp, conn.call<protocol::describe_configs_response>(req, describe_configs_version));
  if (resp.results.size() != 1)
    return error{errc::malformed, "the configs of group " + group + ": " + std::to_string(resp.results.size()) + " results"};
  auto& res = resp.results[0];
  if (res.error_code != 0)
    return error{errc::invalid_argument, "the configs of group " + group + ": " + kafka_failure(res.error_code, res.error_message)};
  return std::move(res);
}

}  // namespace sluice::cli
