#pragma once

// Follows a cluster's metadata: the control plane hands it every change it
// applied to its image, with the image after the change
// (control_plane::on_change, on the metadata thread), and the listener
// applies what changed, from that image:
//   - a partition's assignment and state: to the replica this broker hosts
//     (partition_manager::apply_state), as the image holds them; nothing is
//     read again from the store;
//   - a topic created, changed or deleted: the partition manager brings the
//     topic's logs in line (on its own thread, later, from the store then);
//   - the cluster-wide broker defaults: the partition manager publishes them;
//   - a group's configs: to the partition manager's copy, at once;
//   - a broker or the controller: the metadata cache's live brokers.
// A partition whose topic the image no longer holds is left to the topic's
// change (its logs go with the topic).
//
// Thread safety: apply() runs on the one thread that delivers the control
// plane's changes; publish_brokers() may run on any thread.

#include <vector>

#include "controller/metadata_image.h"
#include "metadata/metadata_cache.h"
#include "metadata/partition_manager.h"

namespace sluice::cluster {

class metadata_listener {
 public:
  // Both outlive the listener.
  metadata_listener(partition_manager& partitions, metadata_cache& cache) : partitions_(partitions), cache_(cache) {}

  void apply(const controller::metadata_image& img, const std::vector<controller::image_change>& changes);

  // The image's live brokers and controller, to the metadata cache.
  void publish_brokers(const controller::metadata_image& img);

 private:
  partition_manager& partitions_;
  metadata_cache& cache_;
};

}  // namespace sluice::cluster
