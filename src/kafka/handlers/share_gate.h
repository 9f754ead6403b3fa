#pragma once

// The check every share-group request to a group coordinator passes first
// (ShareGroupHeartbeat, ShareGroupDescribe, the admin offset APIs 90-92).

#include <string>

#include "kafka/request.h"
#include "protocol/error_code.h"

namespace sluice::kafka {

// NONE when this broker serves share groups, coordinates `group_id` now,
// and no classic group holds the id; otherwise the error to answer
// (COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
// GROUP_ID_NOT_FOUND), with `message` saying why.
error_code share_group_gate(services& svc, const std::string& group_id, std::string& message);

}  // namespace sluice::kafka
