#pragma once

// The share-group half of `sluice group describe|reset-offsets` (KIP-932,
// docs/share_groups.md): raw requests (protocol/raw_client.h) at the
// group's coordinator, since Debian's librdkafka 2.0.2 has no share-group
// API: ApiVersions (does it serve share groups?), ShareGroupDescribe v1,
// DescribeShareGroupOffsets v1 (v0 where only that is served) and
// AlterShareGroupOffsets v0.
//
// A group is a share group when its coordinator describes it as one
// (ShareGroupDescribe answers it without error), or, when it does not, has
// state for share partitions of it (DescribeShareGroupOffsets answers
// topics): share-group membership is memory only, so a coordinator that
// restarted knows an idle share group by that state alone, and describes
// it here as Empty with its epochs and assignor not known (-1, ""). Either
// answering GROUP_ID_NOT_FOUND means a classic group holds the id or
// nothing does, and a broker that does not serve ShareGroupDescribe has no
// share groups: "not a share group", and the caller goes on with the
// classic group APIs.

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "protocol/raw_client.h"

namespace sluice::cli {

using share_group_description = protocol::share_group_describe_response::described_share_group;

// A share group as its coordinator describes it, and a connection to that
// coordinator with the versions it serves of the offset APIs.
struct share_group_view {
  share_group_description group;
  protocol::raw_connection coordinator;
  int16_t describe_offsets_version = -1;  // DescribeShareGroupOffsets: 1, 0, or -1 not served
  bool alters_offsets = false;            // AlterShareGroupOffsets v0 served
};

// The share group `group`, or nullopt when it is none (see above). Asks
// again while the coordinator is loading or moving, until `timeout` has
// passed; each request is bounded by `timeout` too.
result<std::optional<share_group_view>> find_share_group(const std::string& bootstrap, const std::string& group,
                                                         std::chrono::milliseconds timeout);

// Prints the group, its members and the start offset and lag of each of
// its share partitions (formats in group_command.cc's header comment).
// Returns the exit status: 1 when the offsets could not be described
// (said on stderr, after the members are printed).
int print_share_group(share_group_view& view);

// Every share group of the cluster with its state (Empty, Stable), by
// group id: ListGroups v5 (types "share") to each broker Metadata names,
// as each answers for the groups it coordinates. Brokers that do not serve
// v5 have no share groups. Errors: a broker that cannot be reached or
// refuses (errc::unavailable, naming it).
result<std::map<std::string, std::string>> list_share_groups(const std::string& bootstrap,
                                                             std::chrono::milliseconds timeout);

// One share partition's new start offset.
struct share_start_offset {
  std::string topic;
  int32_t partition = 0;
  int64_t start_offset = 0;
};

// AlterShareGroupOffsets: sets the start offsets of the (empty) group's
// share partitions. NON_EMPTY_GROUP and per-partition refusals are errors
// naming Kafka's code; a broker that does not serve the call is
// errc::unsupported_version.
status alter_share_group_offsets(share_group_view& view, const std::vector<share_start_offset>& offsets);

}  // namespace sluice::cli
