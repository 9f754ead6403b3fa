// Share-group messages (schema/share.schema) checked against bytes worked
// out by hand. messages_test.cc already round-trips every type at every
// version with random contents; this file pins down what random filling
// cannot show:
//   - the versions chosen for each API, and that v0 of APIs 76-79 (Kafka
//     4.0's early access) is refused as unsupported, not misread;
//   - null against empty for each nullable field, and the int8 marker in
//     front of ShareGroupHeartbeat's nullable assignment;
//   - the exact layout librdkafka 2.15 writes (ShareFetch v1 request) and
//     reads (ShareGroupHeartbeat v1 response). Those byte strings follow
//     librdkafka's writer and reader code field by field
//     (rd_kafka_ShareFetchRequest in rdkafka_fetcher.c,
//     rd_kafka_cgrp_handle_ShareGroupHeartbeat in rdkafka_cgrp.c), not our
//     encoder, so a wrong field order or width in the schema shows up here.

#include <string_view>

#include <gtest/gtest.h>

#include "protocol/frame.h"
#include "protocol/messages.h"
#include "protocol/messages_fill.h"

namespace sluice::protocol {
namespace {

using bytes = std::vector<uint8_t>;

bytes flat(const response_chunks& c) {
  auto r = c.flatten();
  SLUICE_ASSERT(r.ok(), "flatten failed");
  return *r;
}

template <class T>
bytes encode_body(const T& m, int16_t v) {
  writer w;
  m.encode(w, v);
  return flat(std::move(w).finish());
}

template <class T>
T decode_body(const bytes& b, int16_t v) {
  T m;
  reader r(b);
  status s = m.decode(r, v);
  EXPECT_TRUE(s.ok()) << T::message_name << " v" << v << ": " << (s.ok() ? "" : s.err().message);
  EXPECT_EQ(r.remaining(), 0u) << T::message_name << " v" << v;
  return m;
}

bytes cat(std::initializer_list<bytes> parts) {
  bytes out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

// Big-endian fixed-width integers, as Kafka (and librdkafka's
// rd_kafka_buf_write_i16/i32/i64) put them on the wire.
bytes be16(int16_t v) {
  const auto u = static_cast<uint16_t>(v);
  return {static_cast<uint8_t>(u >> 8), static_cast<uint8_t>(u)};
}
bytes be32(int32_t v) {
  const auto u = static_cast<uint32_t>(v);
  return {static_cast<uint8_t>(u >> 24), static_cast<uint8_t>(u >> 16),
          static_cast<uint8_t>(u >> 8), static_cast<uint8_t>(u)};
}
bytes be64(int64_t v) {
  const auto u = static_cast<uint64_t>(v);
  bytes out;
  for (int shift = 56; shift >= 0; shift -= 8) out.push_back(static_cast<uint8_t>(u >> shift));
  return out;
}

// Compact (flexible) string: uvarint length+1, then the bytes. Every string
// here is shorter than 127 bytes, so the varint is one byte. (Byte by byte
// because vector::insert here trips a GCC 12 -Warray-bounds false positive.)
bytes compact(std::string_view s) {
  bytes out;
  out.reserve(s.size() + 1);
  out.push_back(static_cast<uint8_t>(s.size() + 1));
  for (char ch : s) out.push_back(static_cast<uint8_t>(ch));
  return out;
}
// Compact array or string length of n elements (n + 1, one byte here).
bytes count(size_t n) {
  return {static_cast<uint8_t>(n + 1)};
}
const bytes null_compact = {0};  // null compact string or array
const bytes no_tags = {0};       // an empty tagged-field section

uuid make_uuid(uint8_t first) {
  uuid u;
  for (uint8_t i = 0; i < 16; ++i) u[i] = static_cast<uint8_t>(first + i);
  return u;
}
bytes uuid_bytes(const uuid& u) {
  return bytes(u.begin(), u.end());
}
// Raw bytes of a string (a classic string's body, after its int16 length).
bytes str(std::string_view s) {
  return bytes(s.begin(), s.end());
}

// ---- versions ---------------------------------------------------------

struct expected_range {
  int16_t api_key;
  int16_t min_version;
  int16_t max_version;
};

// The versions Sluice decodes, and why (share.schema says more):
// 76-79 at v1 only (v0 was 4.0's early access; v2 of 78/79 is 4.2's lock
// renewal, not served yet); 90, 85 and 87 up to v1 (KIP-1226, Kafka 4.2);
// the rest at v0, their only version in Kafka 4.2.
constexpr expected_range share_ranges[] = {
    {76, 1, 1}, {77, 1, 1}, {78, 1, 1}, {79, 1, 1}, {83, 0, 0}, {84, 0, 0},
    {85, 0, 1}, {86, 0, 0}, {87, 0, 1}, {90, 0, 1}, {91, 0, 0}, {92, 0, 0},
};

TEST(ShareMessagesTest, CodecTableHasTheChosenVersions) {
  for (const auto& want : share_ranges) {
    const api_support* a = find_api(want.api_key);
    ASSERT_NE(a, nullptr) << "api key " << want.api_key;
    EXPECT_EQ(a->min_version, want.min_version) << a->name;
    EXPECT_EQ(a->max_version, want.max_version) << a->name;
    EXPECT_EQ(a->flexible_from, 0) << a->name;
    // Every version is flexible, so requests carry header v2 and answers v1.
    EXPECT_EQ(request_header_version(want.api_key, want.max_version), 2);
    EXPECT_EQ(response_header_version(want.api_key, want.max_version), 1);
  }
}

TEST(ShareMessagesTest, EarlyAccessV0OfTheMemberApisIsUnsupported) {
  for (int16_t key : {76, 77, 78, 79}) {
    EXPECT_FALSE(is_supported(key, 0)) << key;
    EXPECT_TRUE(is_supported(key, 1)) << key;
    EXPECT_FALSE(is_supported(key, 2)) << key;
    const bytes junk = {0, 0, 0, 0};
    reader r(junk);
    auto body = decode_request_body(key, 0, r);
    ASSERT_FALSE(body.ok());
    EXPECT_EQ(body.code(), errc::unsupported_version);
  }
}

// Calls f(type_tag<T>) for each share-group message type.
template <class F>
void for_each_share_type(F&& f) {
  f(type_tag<share_group_heartbeat_request>{});
  f(type_tag<share_group_heartbeat_response>{});
  f(type_tag<share_group_describe_request>{});
  f(type_tag<share_group_describe_response>{});
  f(type_tag<share_fetch_request>{});
  f(type_tag<share_fetch_response>{});
  f(type_tag<share_acknowledge_request>{});
  f(type_tag<share_acknowledge_response>{});
  f(type_tag<initialize_share_group_state_request>{});
  f(type_tag<initialize_share_group_state_response>{});
  f(type_tag<read_share_group_state_request>{});
  f(type_tag<read_share_group_state_response>{});
  f(type_tag<write_share_group_state_request>{});
  f(type_tag<write_share_group_state_response>{});
  f(type_tag<delete_share_group_state_request>{});
  f(type_tag<delete_share_group_state_response>{});
  f(type_tag<read_share_group_state_summary_request>{});
  f(type_tag<read_share_group_state_summary_response>{});
  f(type_tag<describe_share_group_offsets_request>{});
  f(type_tag<describe_share_group_offsets_response>{});
  f(type_tag<alter_share_group_offsets_request>{});
  f(type_tag<alter_share_group_offsets_response>{});
  f(type_tag<delete_share_group_offsets_request>{});
  f(type_tag<delete_share_group_offsets_response>{});
}

// Round trips of every share message at every supported version, many
// seeds each (the fillers make nullable fields null one time in eight).
// Requests also go through a whole frame and decode_request_body, as the
// dispatcher will see them.
TEST(ShareMessagesTest, EveryMessageRoundTripsAtEveryVersion) {
  int checked = 0;
  for_each_share_type([&](auto tag) {
    using T = typename decltype(tag)::type;
    for (int16_t v = T::min_version; v <= T::max_version; ++v) {
      for (uint64_t seed = 0; seed < 200; ++seed) {
        SCOPED_TRACE(std::string(T::message_name) + " v" + std::to_string(v) + " seed " +
                     std::to_string(seed));
        testing::fill_context c(seed * 7919 + static_cast<uint64_t>(T::api_key) * 31 +
                                static_cast<uint64_t>(v));
        T a;
        testing::fill_random(a, c, v);
        const bytes b = encode_body(a, v);
        const T back = decode_body<T>(b, v);
        ASSERT_TRUE(back == a);
        EXPECT_EQ(encode_body(back, v), b);
        if constexpr (std::string_view(T::message_name).ends_with("_request")) {
          auto frame = encode_request(11, v, a, std::string("c")).flatten();
          ASSERT_TRUE(frame.ok());
          reader r(std::span<const uint8_t>(*frame).subspan(4));
          auto h = decode_request_header(r);
          ASSERT_TRUE(h.ok());
          EXPECT_TRUE(h->supported);
          EXPECT_EQ(h->header_version, 2);
          auto body = decode_request_body(T::api_key, v, r);
          ASSERT_TRUE(body.ok()) << body.err().message;
          EXPECT_TRUE(std::get<T>(*body) == a);
        }
        ++checked;
      }
    }
  });
  EXPECT_EQ(checked, (12 + 3) * 2 * 200);  // 12 APIs, three of them with two versions
}

// ---- null against empty ----------------------------------------------

TEST(ShareMessagesTest, HeartbeatRequestNullAndEmptyDiffer) {
  share_group_heartbeat_request m;
  m.group_id = "g";
  m.member_id = "m";
  m.member_epoch = 0;
  const bytes head = cat({compact("g"), compact("m"), be32(0)});

  // null rack, null subscription: "unchanged since the last heartbeat"
  m.rack_id = std::nullopt;
  m.subscribed_topic_names = std::nullopt;
  const bytes nulls = cat({head, null_compact, null_compact, no_tags});
  EXPECT_EQ(encode_body(m, 1), nulls);
  EXPECT_EQ(decode_body<share_group_heartbeat_request>(nulls, 1), m);

  // empty rack, empty subscription: "subscribed to nothing"
  m.rack_id = "";
  m.subscribed_topic_names.emplace();
  const bytes empties = cat({head, count(0), count(0), no_tags});
  EXPECT_EQ(encode_body(m, 1), empties);
  const auto back = decode_body<share_group_heartbeat_request>(empties, 1);
  ASSERT_TRUE(back.rack_id.has_value());
  EXPECT_EQ(*back.rack_id, "");
  ASSERT_TRUE(back.subscribed_topic_names.has_value());
  EXPECT_TRUE(back.subscribed_topic_names->empty());

  m.rack_id = "r1";
  m.subscribed_topic_names = std::vector<std::string>{"t"};
  const bytes values = cat({head, compact("r1"), count(1), compact("t"), no_tags});
  EXPECT_EQ(encode_body(m, 1), values);
  EXPECT_EQ(decode_body<share_group_heartbeat_request>(values, 1), m);
}

// The assignment is a nullable struct: an int8 -1 for null, or an int8 1
// and then the struct (its array and its own tag section).
TEST(ShareMessagesTest, HeartbeatResponseAssignmentNullEmptyAndPresent) {
  share_group_heartbeat_response m;
  m.member_epoch = 3;
  m.heartbeat_interval_ms = 5000;
  const bytes head = cat({be32(0), be16(0), null_compact, null_compact, be32(3), be32(5000)});

  m.assignment = std::nullopt;
  const bytes null_assignment = cat({head, {0xff}, no_tags});
  EXPECT_EQ(encode_body(m, 1), null_assignment);
  EXPECT_EQ(decode_body<share_group_heartbeat_response>(null_assignment, 1), m);

  m.assignment.emplace();  // present, assigned nothing
  const bytes empty_assignment = cat({head, {1}, count(0), no_tags, no_tags});
  EXPECT_EQ(encode_body(m, 1), empty_assignment);
  const auto back = decode_body<share_group_heartbeat_response>(empty_assignment, 1);
  ASSERT_TRUE(back.assignment.has_value());
  EXPECT_TRUE(back.assignment->topic_partitions.empty());

  // A truncated struct after a present marker is an error, not a null.
  const bytes cut = cat({head, {1}});
  share_group_heartbeat_response t;
  reader r(cut);
  EXPECT_FALSE(t.decode(r, 1).ok());
}

TEST(ShareMessagesTest, HeartbeatResponseNullAndEmptyStringsDiffer) {
  share_group_heartbeat_response m;
  m.error_message = "";
  m.member_id = "";
  const bytes b = cat({be32(0), be16(0), count(0), count(0), be32(0), be32(0), {0xff}, no_tags});
  EXPECT_EQ(encode_body(m, 1), b);
  const auto back = decode_body<share_group_heartbeat_response>(b, 1);
  EXPECT_EQ(back.error_message, std::optional<std::string>(""));
  EXPECT_EQ(back.member_id, std::optional<std::string>(""));
}

TEST(ShareMessagesTest, ShareFetchAndAcknowledgeNullIdentities) {
  // librdkafka always names its group and member, but the fields are
  // nullable; null and empty must stay apart.
  share_acknowledge_request ack;
  ack.share_session_epoch = 2;
  const bytes nulls = cat({null_compact, null_compact, be32(2), count(0), no_tags});
  EXPECT_EQ(encode_body(ack, 1), nulls);
  EXPECT_EQ(decode_body<share_acknowledge_request>(nulls, 1), ack);
  ack.group_id = "";
  ack.member_id = "";
  const bytes empties = cat({count(0), count(0), be32(2), count(0), no_tags});
  EXPECT_EQ(encode_body(ack, 1), empties);
  EXPECT_EQ(decode_body<share_acknowledge_request>(empties, 1), ack);
}

// Null records (a partition with nothing to send) and empty records are
// different values on the wire: compact bytes 0 against 1.
TEST(ShareMessagesTest, ShareFetchResponseNullAndEmptyRecords) {
  share_fetch_response m;
  m.acquisition_lock_timeout_ms = 30000;
  auto& t = m.responses.emplace_back();
  t.topic_id = make_uuid(0x40);
  auto& p = t.partitions.emplace_back();
  p.partition_index = 4;
  p.current_leader.leader_id = 1;
  p.current_leader.leader_epoch = 9;
  auto partition_bytes = [&](const bytes& records) {
    return cat({be32(4),                    // partition index
                be16(0), null_compact,      // fetch error
                be16(0), null_compact,      // acknowledge error
                be32(1), be32(9), no_tags,  // current leader
                records,                    // records
                count(0),                   // acquired records
                no_tags});
  };
  auto body = [&](const bytes& records) {
    return cat({be32(0),                             // throttle time
                be16(0), null_compact,               // error
                be32(30000),                         // acquisition lock timeout
                count(1), uuid_bytes(t.topic_id),    // responses: 1, topic id
                count(1), partition_bytes(records),  // partitions: 1
                no_tags,                             // topic tags
                count(0),                            // node endpoints
                no_tags});
  };
  p.records = records_field();
  EXPECT_EQ(encode_body(m, 1), body(null_compact));
  const auto null_back = decode_body<share_fetch_response>(body(null_compact), 1);
  EXPECT_TRUE(null_back.responses[0].partitions[0].records.is_null());
  p.records = records_field::empty();
  EXPECT_EQ(encode_body(m, 1), body(count(0)));
  const auto back = decode_body<share_fetch_response>(body(count(0)), 1);
  EXPECT_FALSE(back.responses[0].partitions[0].records.is_null());
  EXPECT_EQ(back.responses[0].partitions[0].records.size_bytes(), 0u);
}

// Null topics asks for every share-partition of the group; an empty list
// asks for none.
TEST(ShareMessagesTest, DescribeShareGroupOffsetsNullAndEmptyTopics) {
  describe_share_group_offsets_request m;
  auto& g = m.groups.emplace_back();
  g.group_id = "sg";
  g.topics = std::nullopt;
  const bytes all = cat({count(1), compact("sg"), null_compact, no_tags, no_tags});
  for (int16_t v : {0, 1}) {
    EXPECT_EQ(encode_body(m, v), all);
    EXPECT_EQ(decode_body<describe_share_group_offsets_request>(all, v), m);
  }
  g.topics.emplace();
  const bytes none = cat({count(1), compact("sg"), count(0), no_tags, no_tags});
  EXPECT_EQ(encode_body(m, 1), none);
  EXPECT_EQ(decode_body<describe_share_group_offsets_request>(none, 1), m);
}

// ---- fields that depend on the version --------------------------------

TEST(ShareMessagesTest, DescribeShareGroupOffsetsLagIsV1Only) {
  describe_share_group_offsets_response m;
  auto& g = m.groups.emplace_back();
  g.group_id = "sg";
  auto& t = g.topics.emplace_back();
  t.topic_name = "t";
  t.topic_id = make_uuid(1);
  auto& p = t.partitions.emplace_back();
  p.partition_index = 0;
  p.start_offset = 10;
  p.leader_epoch = 2;
  p.lag = 7;
  auto body = [&](const bytes& lag) {
    return cat({be32(0),                               // throttle time
                count(1), compact("sg"),               // groups: 1, group id
                count(1), compact("t"),                //   topics: 1, name
                uuid_bytes(t.topic_id),                //   topic id
                count(1), be32(0), be64(10), be32(2),  //     partition 0, start 10, epoch 2
                lag,                                   //     lag (v1 only)
                be16(0), null_compact, no_tags,        //     error, partition tags
                no_tags,                               //   topic tags
                be16(0), null_compact, no_tags,        // group error, group tags
                no_tags});
  };
  EXPECT_EQ(encode_body(m, 1), body(be64(7)));
  EXPECT_EQ(decode_body<describe_share_group_offsets_response>(body(be64(7)), 1), m);
  EXPECT_EQ(encode_body(m, 0), body({}));
  // v0 has no lag: it reads back as "not available".
  const auto v0 = decode_body<describe_share_group_offsets_response>(body({}), 0);
  EXPECT_EQ(v0.groups[0].topics[0].partitions[0].lag, -1);
}

TEST(ShareMessagesTest, WriteShareGroupStateDeliveryCompleteCountIsV1Only) {
  write_share_group_state_request m;
  m.group_id = "sg";
  auto& t = m.topics.emplace_back();
  t.topic_id = make_uuid(0x20);
  auto& p = t.partitions.emplace_back();
  p.partition = 1;
  p.state_epoch = 2;
  p.leader_epoch = 3;
  p.start_offset = 100;
  p.delivery_complete_count = 4;
  auto& b = p.state_batches.emplace_back();
  b.first_offset = 100;
  b.last_offset = 109;
  b.delivery_state = 2;  // acknowledged
  b.delivery_count = 1;
  auto body = [&](const bytes& complete) {
    return cat({compact("sg"),                             // group id
                count(1), uuid_bytes(t.topic_id),          // topics: 1, topic id
                count(1), be32(1),                         //   partitions: 1, partition 1
                be32(2), be32(3), be64(100),               //     state epoch, leader epoch, start
                complete,                                  //     delivery complete count (v1)
                count(1), be64(100), be64(109), bytes{2},  //     state batches: 1, range, state
                be16(1), no_tags,                          //       delivery count, batch tags
                no_tags,                                   //     partition tags
                no_tags,                                   //   topic tags
                no_tags});
  };
  EXPECT_EQ(encode_body(m, 1), body(be32(4)));
  EXPECT_EQ(decode_body<write_share_group_state_request>(body(be32(4)), 1), m);
  EXPECT_EQ(encode_body(m, 0), body({}));
  const auto v0 = decode_body<write_share_group_state_request>(body({}), 0);
  EXPECT_EQ(v0.topics[0].partitions[0].delivery_complete_count, -1);  // "not set"
}

// v0 is Kafka 4.x's layout, with the leader epoch between the state epoch
// and the start offset (3.9's early-access v0 had no leader epoch here).
TEST(ShareMessagesTest, ReadShareGroupStateSummaryLayout) {
  read_share_group_state_summary_response m;
  auto& r = m.results.emplace_back();
  r.topic_id = make_uuid(0x30);
  auto& p = r.partitions.emplace_back();
  p.partition = 5;
  p.state_epoch = 6;
  p.leader_epoch = 7;
  p.start_offset = 800;
  p.delivery_complete_count = 9;
  auto body = [&](const bytes& complete) {
    return cat({count(1), uuid_bytes(r.topic_id),  // results: 1, topic id
                count(1), be32(5),                 //   partitions: 1, partition 5
                be16(0), null_compact,             //     error
                be32(6), be32(7), be64(800),       //     state epoch, leader epoch, start
                complete,                          //     delivery complete count (v1)
                no_tags,                           //     partition tags
                no_tags,                           //   result tags
                no_tags});
  };
  EXPECT_EQ(encode_body(m, 1), body(be32(9)));
  EXPECT_EQ(decode_body<read_share_group_state_summary_response>(body(be32(9)), 1), m);
  EXPECT_EQ(encode_body(m, 0), body({}));
}

// ---- librdkafka 2.15 on the wire --------------------------------------

// Walks a ShareGroupHeartbeat v1 response body the way librdkafka's
// rd_kafka_cgrp_handle_ShareGroupHeartbeat reads it: throttle time, error
// code, error string, member id, member epoch, heartbeat interval, an int8
// that must be 1 for an assignment to be read, then the topic-partition
// list (uuid, compact int32 array, topic tags skipped). librdkafka reads no
// further: the assignment's and the body's tag sections are left unread.
// Returns the (topic id, partitions) pairs, or nullopt if the walk ran off
// the end; `unread` is set to the bytes left.
struct walked_heartbeat {
  int16_t error_code = 0;
  std::optional<std::string> member_id;
  int32_t member_epoch = 0;
  int32_t heartbeat_interval_ms = 0;
  bool has_assignment = false;
  std::vector<std::pair<uuid, std::vector<int32_t>>> topics;
};

std::optional<walked_heartbeat> walk_like_librdkafka(const bytes& b, size_t* unread) {
  size_t pos = 0;
  bool ok = true;
  auto take = [&](size_t n) -> const uint8_t* {
    if (pos + n > b.size()) {
      ok = false;
      return nullptr;
    }
    const uint8_t* p = b.data() + pos;
    pos += n;
    return p;
  };
  auto i8 = [&]() -> int8_t {
    auto p = take(1);
    return p ? static_cast<int8_t>(p[0]) : 0;
  };
  auto i16 = [&]() -> int16_t {
    auto p = take(2);
    return p ? static_cast<int16_t>((p[0] << 8) | p[1]) : 0;
  };
  auto i32 = [&]() -> int32_t {
    auto p = take(4);
    return p ? static_cast<int32_t>((uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) |
                                    (uint32_t{p[2]} << 8) | p[3])
             : 0;
  };
  auto uvarint = [&]() -> uint32_t {  // one or two bytes is all these tests need
    uint32_t v = 0;
    for (int shift = 0; shift < 28; shift += 7) {
      auto p = take(1);
      if (!p) return 0;
      v |= uint32_t{static_cast<uint8_t>(p[0] & 0x7f)} << shift;
      if (!(p[0] & 0x80)) break;
    }
    return v;
  };
  auto str = [&]() -> std::optional<std::string> {  // rd_kafka_buf_read_str, flexible
    const uint32_t n = uvarint();
    if (n == 0) return std::nullopt;
    auto p = take(n - 1);
    return p ? std::string(reinterpret_cast<const char*>(p), n - 1) : std::string();
  };
  auto skip_tags = [&]() {  // rd_kafka_buf_skip_tags
    const uint32_t tags = uvarint();
    for (uint32_t i = 0; i < tags && ok; ++i) {
      (void)uvarint();
      take(uvarint());
    }
  };

  walked_heartbeat w;
  (void)i32();  // throttle time
  w.error_code = i16();
  (void)str();  // error string
  w.member_id = str();
  w.member_epoch = i32();
  w.heartbeat_interval_ms = i32();
  w.has_assignment = i8() == 1;
  if (w.has_assignment) {
    const int32_t topics = static_cast<int32_t>(uvarint()) - 1;  // rd_kafka_buf_read_arraycnt
    for (int32_t t = 0; t < topics && ok; ++t) {
      auto& [id, parts] = w.topics.emplace_back();
      auto p = take(16);  // rd_kafka_buf_read_uuid: two big-endian int64s
      if (p) std::copy(p, p + 16, id.begin());
      const int32_t n = static_cast<int32_t>(uvarint()) - 1;
      for (int32_t i = 0; i < n && ok; ++i) parts.push_back(i32());
      // One field per partition (the partition itself): librdkafka skips
      // no per-partition tags, only the topic's.
      skip_tags();
    }
  }
  if (!ok) return std::nullopt;
  *unread = b.size() - pos;
  return w;
}

TEST(ShareMessagesTest, HeartbeatV1ResponseAsLibrdkafkaReadsIt) {
  const uuid t1 = make_uuid(0xa0);
  const uuid t2 = make_uuid(0xb0);
  // Written in the order librdkafka reads (see walk_like_librdkafka).
  // clang-format off
  const bytes body = cat({be32(0),                              // throttle time
                          be16(0),                              // error code
                          null_compact,                         // error message: null
                          compact("member-1"),                  // member id
                          be32(7),                              // member epoch
                          be32(5000),                           // heartbeat interval
                          bytes{1},                             // assignment present
                          count(2),                             //   topic partitions: 2
                          uuid_bytes(t1),                       //     topic id
                          count(3), be32(0), be32(1), be32(2),  //     partitions 0, 1, 2
                          no_tags,                              //     topic tags
                          uuid_bytes(t2),                       //     topic id
                          count(1), be32(5),                    //     partition 5
                          no_tags,                              //     topic tags
                          no_tags,                              //   assignment tags
                          no_tags});                            // body tags
  // clang-format on

  size_t unread = 0;
  auto walked = walk_like_librdkafka(body, &unread);
  ASSERT_TRUE(walked.has_value());
  EXPECT_EQ(unread, 2u);  // the assignment's and the body's tag sections
  ASSERT_TRUE(walked->has_assignment);
  ASSERT_EQ(walked->topics.size(), 2u);
  EXPECT_EQ(walked->topics[0].second, (std::vector<int32_t>{0, 1, 2}));

  share_group_heartbeat_response m;
  m.member_id = "member-1";
  m.member_epoch = 7;
  m.heartbeat_interval_ms = 5000;
  auto& a = m.assignment.emplace();
  auto& e1 = a.topic_partitions.emplace_back();
  e1.topic_id = t1;
  e1.partitions = {0, 1, 2};
  auto& e2 = a.topic_partitions.emplace_back();
  e2.topic_id = t2;
  e2.partitions = {5};

  EXPECT_EQ(encode_body(m, 1), body);
  EXPECT_EQ(decode_body<share_group_heartbeat_response>(body, 1), m);

  // The whole frame: response header v1 (correlation id, empty tags).
  const bytes frame = cat({be32(static_cast<int32_t>(5 + body.size())), be32(42), no_tags, body});
  EXPECT_EQ(flat(encode_response(42, 1, m)), frame);

  // And what our encoder writes for a null assignment, librdkafka reads as
  // "no assignment" (any marker other than 1), again leaving only the body
  // tags.
  m.assignment.reset();
  auto no_assignment = walk_like_librdkafka(encode_body(m, 1), &unread);
  ASSERT_TRUE(no_assignment.has_value());
  EXPECT_FALSE(no_assignment->has_assignment);
  EXPECT_EQ(unread, 1u);
}

// Whatever the filler puts in an answer, librdkafka's reader walks our
// encoding to the same member id, epochs and assignment.
TEST(ShareMessagesTest, LibrdkafkaReadsEveryHeartbeatWeWrite) {
  for (uint64_t seed = 0; seed < 300; ++seed) {
    testing::fill_context c(seed);
    share_group_heartbeat_response m;
    testing::fill_random(m, c, 1);
    m.error_code = 0;  // librdkafka stops at the error string otherwise
    size_t unread = 0;
    auto w = walk_like_librdkafka(encode_body(m, 1), &unread);
    ASSERT_TRUE(w.has_value()) << "seed " << seed;
    EXPECT_EQ(w->member_id, m.member_id);
    EXPECT_EQ(w->member_epoch, m.member_epoch);
    EXPECT_EQ(w->heartbeat_interval_ms, m.heartbeat_interval_ms);
    ASSERT_EQ(w->has_assignment, m.assignment.has_value()) << "seed " << seed;
    EXPECT_EQ(unread, m.assignment ? 2u : 1u);
    if (m.assignment) {
      ASSERT_EQ(w->topics.size(), m.assignment->topic_partitions.size());
      for (size_t i = 0; i < w->topics.size(); ++i) {
        EXPECT_EQ(w->topics[i].first, m.assignment->topic_partitions[i].topic_id);
        EXPECT_EQ(w->topics[i].second, m.assignment->topic_partitions[i].partitions);
      }
    }
  }
}

// A ShareFetch v1 request as rd_kafka_ShareFetchRequest builds it: request
// header with the classic client id and an empty tag section
// (rd_kafka_buf_new_flexver_request), then GroupId, MemberId,
// ShareSessionEpoch, MaxWaitMs, MinBytes, MaxBytes, MaxRecords, BatchSize;
// the topics (first the partitions being added to the session, each with no
// acknowledgements, then the partitions carrying acknowledgements, one
// acknowledge type per batch); the forgotten topics; and the body's empty
// tag section appended when the buffer is finalized.
TEST(ShareMessagesTest, ShareFetchV1RequestAsLibrdkafkaWritesIt) {
  const uuid added = make_uuid(0x10);
  const uuid acked = make_uuid(0x20);
  const uuid forgotten = make_uuid(0x30);
  // clang-format off
  const bytes header = cat({be16(78), be16(1),            // api key, version
                            be32(9),                      // correlation id
                            be16(7), str("rdkafka"),      // client id (classic string)
                            no_tags});                    // header tags
  const bytes body = cat({
      compact("sg"),                                      // GroupId
      compact("m-1"),                                     // MemberId
      be32(1),                                            // ShareSessionEpoch
      be32(500),                                          // MaxWaitMs
      be32(1),                                            // MinBytes
      be32(52428800),                                     // MaxBytes (fetch.max.bytes default)
      be32(400),                                          // MaxRecords
      be32(300),                                          // BatchSize
      count(2),                                           // Topics: 2
      uuid_bytes(added),                                  //   TopicId (partitions being added)
      count(2),                                           //   Partitions: 2
      be32(0), count(0), no_tags,                         //     0, no acknowledgements, tags
      be32(1), count(0), no_tags,                         //     1, no acknowledgements, tags
      no_tags,                                            //   topic tags
      uuid_bytes(acked),                                  //   TopicId (acknowledgements)
      count(1),                                           //   Partitions: 1
      be32(3),                                            //     PartitionIndex
      count(2),                                           //     AcknowledgementBatches: 2
      be64(100), be64(104), count(1), bytes{1}, no_tags,  //       100-104: accept, tags
      be64(105), be64(105), count(1), bytes{3}, no_tags,  //       105: reject, tags
      no_tags,                                            //     partition tags
      no_tags,                                            //   topic tags
      count(1),                                           // ForgottenTopicsData: 1
      uuid_bytes(forgotten),                              //   TopicId
      count(2), be32(7), be32(8),                         //   Partitions 7, 8
      no_tags,                                            //   topic tags
      no_tags,                                            // body tags (added at finalize)
  });
  // clang-format on
  const bytes frame = cat({be32(static_cast<int32_t>(header.size() + body.size())), header, body});

  share_fetch_request want;
  want.group_id = "sg";
  want.member_id = "m-1";
  want.share_session_epoch = 1;
  want.max_wait_ms = 500;
  want.min_bytes = 1;
  want.max_bytes = 52428800;
  want.max_records = 400;
  want.batch_size = 300;
  auto& ta = want.topics.emplace_back();
  ta.topic_id = added;
  ta.partitions.emplace_back().partition_index = 0;
  ta.partitions.emplace_back().partition_index = 1;
  auto& tk = want.topics.emplace_back();
  tk.topic_id = acked;
  auto& pk = tk.partitions.emplace_back();
  pk.partition_index = 3;
  auto& b1 = pk.acknowledgement_batches.emplace_back();
  b1.first_offset = 100;
  b1.last_offset = 104;
  b1.acknowledge_types = {1};
  auto& b2 = pk.acknowledgement_batches.emplace_back();
  b2.first_offset = 105;
  b2.last_offset = 105;
  b2.acknowledge_types = {3};
  auto& f = want.forgotten_topics_data.emplace_back();
  f.topic_id = forgotten;
  f.partitions = {7, 8};

  reader r(std::span<const uint8_t>(frame).subspan(4));
  auto h = decode_request_header(r);
  ASSERT_TRUE(h.ok()) << h.err().message;
  EXPECT_TRUE(h->supported);
  EXPECT_EQ(h->header_version, 2);
  EXPECT_EQ(h->header.request_api_key, 78);
  EXPECT_EQ(h->header.request_api_version, 1);
  EXPECT_EQ(h->header.correlation_id, 9);
  EXPECT_EQ(h->header.client_id, std::optional<std::string>("rdkafka"));
  auto decoded = decode_request_body(78, 1, r);
  ASSERT_TRUE(decoded.ok()) << decoded.err().message;
  EXPECT_EQ(r.remaining(), 0u);
  EXPECT_EQ(std::get<share_fetch_request>(*decoded), want);

  // Our encoder writes the same bytes (tools and tests use it as a client).
  EXPECT_EQ(flat(encode_request(9, 1, want, std::string("rdkafka"))), frame);
}

// The smallest ShareFetch librdkafka sends: no partitions to add, nothing
// to acknowledge, nothing to forget (both arrays written as count 0).
TEST(ShareMessagesTest, ShareFetchV1EmptyRequestAsLibrdkafkaWritesIt) {
  const bytes body = cat({compact("sg"), compact("m-1"), be32(-1), be32(0), be32(1), be32(1024),
                          be32(0), be32(0), count(0), count(0), no_tags});
  const auto m = decode_body<share_fetch_request>(body, 1);
  EXPECT_EQ(m.share_session_epoch, -1);
  EXPECT_EQ(m.max_records, 0);
  EXPECT_TRUE(m.topics.empty());
  EXPECT_TRUE(m.forgotten_topics_data.empty());
  EXPECT_EQ(encode_body(m, 1), body);
}

}  // namespace
}  // namespace sluice::protocol
