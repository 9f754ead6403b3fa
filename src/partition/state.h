#pragma once

// The words a partition's replica state is given in. The controller decides
// them (controller/types.h); the metadata stores keep them; a partition and
// the replica manager apply them. One definition, taken from the controller,
// so nothing in partition/ or replication/ needs the metadata store.

#include "controller/types.h"

namespace sluice::cluster {

// The brokers that hold a partition's replicas, the preferred leader first.
using replica_list = controller::partition_assignment;

// Who leads a partition, as the controller decided (leader, leader epoch,
// ISR, partition epoch).
using partition_state = controller::partition_state;

}  // namespace sluice::cluster
