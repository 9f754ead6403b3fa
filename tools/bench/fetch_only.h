#pragma once

// The broker's fetch path alone: Fetch requests shaped like a librdkafka
// consumer's, answered by the broker, received whole and walked batch by
// batch, with nothing done to the records. Beside the librdkafka catch-up
// consumer it separates what the broker and the connection deliver from what
// the client spends parsing (librdkafka reads an answer whole, then parses
// it, then asks again, on one thread per broker).

#include <cstdint>
#include <string>
#include <variant>

namespace sluice::bench {

struct fetch_shape {
  int32_t max_bytes = 52428800;           // librdkafka fetch.max.bytes
  int32_t partition_max_bytes = 1048576;  // librdkafka max.partition.fetch.bytes
  int8_t isolation_level = 1;             // librdkafka isolation.level=read_committed
  int16_t version = 11;                   // the newest Fetch librdkafka 2.0.2 sends
};

struct fetch_only_result {
  uint64_t records = 0;       // in whole batches received
  uint64_t answer_bytes = 0;  // response frames, headers included
  uint64_t answers = 0;
  double seconds = 0;  // from the first request to the last answer
};

// Reads partitions 0..partitions-1 of `topic` on the broker at `bootstrap`
// (its first HOST:PORT) from offset 0 until every partition's next offset
// reaches the high watermark its answer gave, one request in flight (as
// librdkafka has), every partition in every request, no fetch session.
// A partial batch at the end of a partition's records is left for the next
// request, as a client does. An error code in an answer, a malformed answer
// or a lost connection is returned as a message.
std::variant<fetch_only_result, std::string> fetch_only(const std::string& bootstrap,
                                                        const std::string& topic, int partitions,
                                                        const fetch_shape& shape = {});

}  // namespace sluice::bench
