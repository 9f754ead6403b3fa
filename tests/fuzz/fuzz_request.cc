// libFuzzer target: the bytes after a request's int32 size prefix, exactly
// as the network layer hands them to the codec. The input picks the API key
// and version itself (the first four bytes), so every request type and
// version is reachable. Besides "never crash, never over-allocate" (ASan,
// the RSS limit), it checks one property: whatever decodes, re-encodes and
// decodes again to the same value. Records inside Produce requests are also
// split into batches and decoded, and JoinGroup metadata is read as a
// consumer subscription, as the broker and the group coordinator will.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <variant>

#include "fuzz_util.h"
#include "protocol/consumer_protocol.h"
#include "protocol/frame.h"
#include "protocol/records/record_batch.h"

using namespace sluice;
using namespace sluice::protocol;

namespace {

using fuzz::check;

template <class T>
void round_trip(const T& body, int16_t version) {
  writer w;
  body.encode(w, version);
  auto bytes = std::move(w).finish().flatten();
  check(bytes.ok(), "flatten");
  reader r(*bytes);
  T again;
  check(again.decode(r, version).ok(), "re-encoded body decodes");
  check(again == body, "re-encoded body decodes to the same value");
  check(r.remaining() == 0, "re-encoded body is consumed exactly");
}

void exercise_records(const records_field& f) {
  if (f.is_null()) return;
  auto batches = records::split_batches(f.view());
  if (!batches.ok()) return;
  for (auto b : *batches) records::decode_batch(b, fuzz::decompress_cap).to_status().ignore();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  reader r(std::span<const uint8_t>(data, size));
  auto hdr = decode_request_header(r);
  if (!hdr.ok() || !hdr->supported) return 0;
  const int16_t key = hdr->header.request_api_key;
  const int16_t version = hdr->header.request_api_version;
  auto body = decode_request_body(key, version, r);
  if (!body.ok()) return 0;
  std::visit([&](const auto& b) { round_trip(b, version); }, *body);
  if (const auto* p = std::get_if<produce_request>(&*body)) {
    for (const auto& t : p->topic_data)
      for (const auto& part : t.partition_data) exercise_records(part.records);
  }
  if (const auto* j = std::get_if<join_group_request>(&*body)) {
    for (const auto& proto : j->protocols) decode_subscription(proto.metadata).to_status().ignore();
  }
  if (const auto* s = std::get_if<sync_group_request>(&*body)) {
    for (const auto& a : s->assignments) decode_assignment(a.assignment).to_status().ignore();
  }
  return 0;
}
