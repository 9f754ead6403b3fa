// The primitive layer and a few messages checked against byte strings
// worked out by hand from the protocol description (docs/protocol.md).

#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>

#include "base/endian.h"
#include "protocol/codec.h"
#include "protocol/frame.h"
#include "protocol/messages.h"

namespace sluice::protocol {
namespace {

using bytes = std::vector<uint8_t>;

bytes flat(const response_chunks& c) {
  auto r = c.flatten();
  SLUICE_ASSERT(r.ok(), "flatten failed");
  return *r;
}

size_t load_size(const bytes& b) { return static_cast<size_t>(load_be<int32_t>(b.data())); }

bytes str(std::string_view s) { return bytes(s.begin(), s.end()); }

bytes cat(std::initializer_list<bytes> parts) {
  bytes out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

TEST(CodecTest, UnsignedVarints) {
  writer w;
  w.write_uvarint(0);
  w.write_uvarint(127);
  w.write_uvarint(128);
  w.write_uvarint(300);
  w.write_uvarint(0xffffffffu);
  const bytes expect = {0x00, 0x7f, 0x80, 0x01, 0xac, 0x02, 0xff, 0xff, 0xff, 0xff, 0x0f};
  ASSERT_EQ(bytes(w.owned_bytes().begin(), w.owned_bytes().end()), expect);
  reader r(expect);
  EXPECT_EQ(r.read_uvarint(), 0u);
  EXPECT_EQ(r.read_uvarint(), 127u);
  EXPECT_EQ(r.read_uvarint(), 128u);
  EXPECT_EQ(r.read_uvarint(), 300u);
  EXPECT_EQ(r.read_uvarint(), 0xffffffffu);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.remaining(), 0u);
}

TEST(CodecTest, VarintOverflowAndTruncationAreErrors) {
  const bytes too_big = {0xff, 0xff, 0xff, 0xff, 0x1f};
  reader r(too_big);
  (void)r.read_uvarint();
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.to_status().code(), errc::malformed);
  const bytes unterminated = {0x80, 0x80};
  reader r2(unterminated);
  (void)r2.read_uvarint();
  EXPECT_FALSE(r2.ok());
}

TEST(CodecTest, HostileArrayCountIsRefusedBeforeAllocating) {
  // int32 count 0x7fffffff followed by 3 bytes.
  const bytes b = {0x7f, 0xff, 0xff, 0xff, 1, 2, 3};
  reader r(b);
  EXPECT_EQ(r.read_array_length(false, 4), 0);
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.to_status().err().message.find("cannot fit"), std::string::npos);
  // The per-message element budget also holds.
  bytes many(4 + 100, 0);
  many[3] = 100;  // count 100, 100 bytes follow
  reader small_budget(many, 10);
  EXPECT_EQ(small_budget.read_array_length(false, 1), 0);
  EXPECT_FALSE(small_budget.ok());
}

TEST(CodecTest, NullsInNonNullablePlacesAreErrors) {
  const bytes classic_null = {0xff, 0xff};
  reader r(classic_null);
  (void)r.read_string(false);
  EXPECT_FALSE(r.ok());
  const bytes compact_null = {0x00};
  reader r2(compact_null);
  EXPECT_EQ(r2.read_nullable_string(true), std::nullopt);
  EXPECT_TRUE(r2.ok());
}

// ApiVersions v0 request frame: header v1 (key 18, version 0, correlation
// id 1, client id "ab"), empty body.
TEST(CodecTest, ApiVersionsV0RequestByHand) {
  const bytes expect = {0, 0, 0, 12,  // size
                        0, 18, 0, 0,  // api key, version
                        0, 0, 0, 1,   // correlation id
                        0, 2, 'a', 'b'};
  EXPECT_EQ(flat(encode_request(1, 0, api_versions_request{}, std::string("ab"))), expect);

  reader r(std::span<const uint8_t>(expect).subspan(4));
  auto h = decode_request_header(r);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->header_version, 1);
  auto body = decode_request_body(18, 0, r);
  ASSERT_TRUE(body.ok());
  EXPECT_EQ(r.remaining(), 0u);
}

// ApiVersions v3 request: header v2 (classic client id, then an empty tag
// section), flexible body with two compact strings and an empty tag section.
TEST(CodecTest, ApiVersionsV3RequestByHand) {
  api_versions_request req;
  req.client_software_name = "sluice";
  req.client_software_version = "1.0";
  const bytes body = cat({{7}, str("sluice"), {4}, str("1.0"), {0}});
  const bytes header = cat({{0, 18, 0, 3, 0, 0, 0, 7, 0, 2, 'a', 'b', 0}});
  const bytes frame = cat({{0, 0, 0, static_cast<uint8_t>(header.size() + body.size())}, header, body});
  EXPECT_EQ(flat(encode_request(7, 3, req, std::string("ab"))), frame);

  reader r(std::span<const uint8_t>(frame).subspan(4));
  auto h = decode_request_header(r);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->header_version, 2);
  EXPECT_EQ(h->header.correlation_id, 7);
  auto decoded = decode_request_body(18, 3, r);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(std::get<api_versions_request>(*decoded), req);
}

// DescribeCluster v0 request: flexible from v0, so header v2 (classic
// client id, then an empty tag section); body one bool and an empty tag
// section.
TEST(CodecTest, DescribeClusterV0RequestByHand) {
  describe_cluster_request req;
  req.include_cluster_authorized_operations = true;
  const bytes frame = {0, 0,  0,   15,   // size
                       0, 60, 0,   0,    // api key 60, version 0
                       0, 0,  0,   5,    // correlation id
                       0, 2,  'a', 'b',  // client id
                       0,                // header tags
                       1,                // include cluster authorized operations
                       0};               // body tags
  EXPECT_EQ(flat(encode_request(5, 0, req, std::string("ab"))), frame);
  reader r(std::span<const uint8_t>(frame).subspan(4));
  auto h = decode_request_header(r);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->header_version, 2);
  auto decoded = decode_request_body(60, 0, r);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(r.remaining(), 0u);
  EXPECT_EQ(std::get<describe_cluster_request>(*decoded), req);
  EXPECT_EQ(std::get<describe_cluster_request>(*decoded).endpoint_type, 1);  // v1+ only: default
}

// DescribeCluster v0 response: header v1 (correlation id, empty tags);
// null error message and rack as compact nullable strings (0).
TEST(CodecTest, DescribeClusterV0ResponseByHand) {
  describe_cluster_response m;
  m.cluster_id = "c1";
  m.controller_id = 1;
  auto& b = m.brokers.emplace_back();
  b.broker_id = 1;
  b.host = "h";
  b.port = 9092;
  const bytes body = {0,    0,   0,    0,     // throttle time
                      0,    0,                // error code
                      0,                      // error message: null
                      3,    'c', '1',         // cluster id
                      0,    0,   0,    1,     // controller id
                      2,                      // brokers: 1
                      0,    0,   0,    1,     //   broker id
                      2,    'h',              //   host
                      0,    0,   0x23, 0x84,  //   port 9092
                      0,                      //   rack: null
                      0,                      //   broker tags
                      0x80, 0,   0,    0,     // cluster authorized operations: INT32_MIN
                      0};                     // body tags
  const bytes frame =
      cat({{0, 0, 0, static_cast<uint8_t>(5 + body.size())}, {0, 0, 0, 9, 0}, body});
  EXPECT_EQ(flat(encode_response(9, 0, m)), frame);
  describe_cluster_response back;
  reader r{std::span<const uint8_t>(body)};
  ASSERT_TRUE(back.decode(r, 0).ok());
  EXPECT_EQ(back, m);
}

// ListOffsets v7 request: header v2; replica -1, isolation 0, one topic
// "t" with partition 0 at MAX_TIMESTAMP (-3), leader epoch -1.
TEST(CodecTest, ListOffsetsV7RequestByHand) {
  list_offsets_request req;
  req.replica_id = -1;
  auto& t = req.topics.emplace_back();
  t.name = "t";
  auto& p = t.partitions.emplace_back();
  p.partition_index = 0;
  p.timestamp = -3;
  const bytes body = {0xff, 0xff, 0xff, 0xff,  // replica id -1
                      0,                       // isolation level
                      2,                       // topics: 1
                      2,    't',               //   name
                      2,                       //   partitions: 1
                      0,    0,    0,    0,     //     partition index
                      0xff, 0xff, 0xff, 0xff,  //     current leader epoch -1
                      0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfd,  //     timestamp -3
                      0,                                               //     partition tags
                      0,                                               //   topic tags
                      0};                                              // body tags
  const bytes header = {0, 2, 0, 7, 0, 0, 0, 3, 0, 2, 'a', 'b', 0};
  const bytes frame =
      cat({{0, 0, 0, static_cast<uint8_t>(header.size() + body.size())}, header, body});
  EXPECT_EQ(flat(encode_request(3, 7, req, std::string("ab"))), frame);
  reader r(std::span<const uint8_t>(frame).subspan(4));
  auto h = decode_request_header(r);
  ASSERT_TRUE(h.ok());
  auto decoded = decode_request_body(2, 7, r);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(r.remaining(), 0u);
  EXPECT_EQ(std::get<list_offsets_request>(*decoded), req);
}

// Fetch v15 request: the topic by id (v13+), no replica id in the body
// (v15 moved it into the tagged replica state, tag 1).
TEST(CodecTest, FetchV15RequestByIdByHand) {
  fetch_request req;
  req.replica_state.replica_id = 2;
  req.replica_state.replica_epoch = 7;
  req.max_wait_ms = 500;
  req.min_bytes = 1;
  req.session_epoch = -1;
  auto& t = req.topics.emplace_back();
  for (uint8_t i = 0; i < 16; ++i) t.topic_id[i] = static_cast<uint8_t>(i + 1);
  auto& p = t.partitions.emplace_back();
  p.fetch_offset = 5;
  p.partition_max_bytes = 1 << 20;
  const bytes body = {0,    0,    0x01, 0xf4,  // max wait 500 ms
                      0,    0,    0,    1,     // min bytes
                      0x7f, 0xff, 0xff, 0xff,  // max bytes (default)
                      0,                       // isolation level
                      0,    0,    0,    0,     // session id
                      0xff, 0xff, 0xff, 0xff,  // session epoch -1
                      2,                       // topics: 1
                      1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,  //   topic id
                      2,                       //   partitions: 1
                      0,    0,    0,    0,     //     partition
                      0xff, 0xff, 0xff, 0xff,  //     current leader epoch -1
                      0, 0, 0, 0, 0, 0, 0, 5,  //     fetch offset
                      0xff, 0xff, 0xff, 0xff,  //     last fetched epoch -1
                      0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,  //     log start offset -1
                      0,    0x10, 0,    0,     //     partition max bytes 1 MiB
                      0,                       //     partition tags
                      0,                       //   topic tags
                      1,                       // forgotten topics: 0
                      1,                       // rack id: ""
                      1,                       // tags: 1
                      1,    13,                //   tag 1 (replica state), 13 bytes
                      0,    0,    0,    2,     //     replica id
                      0, 0, 0, 0, 0, 0, 0, 7,  //     replica epoch
                      0};                      //     struct tags
  const bytes header = {0, 1, 0, 15, 0, 0, 0, 3, 0, 2, 'a', 'b', 0};
  const bytes frame =
      cat({{0, 0, 0, static_cast<uint8_t>(header.size() + body.size())}, header, body});
  EXPECT_EQ(flat(encode_request(3, 15, req, std::string("ab"))), frame);
  reader r(std::span<const uint8_t>(frame).subspan(4));
  ASSERT_TRUE(decode_request_header(r).ok());
  auto decoded = decode_request_body(1, 15, r);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(r.remaining(), 0u);
  EXPECT_EQ(std::get<fetch_request>(*decoded), req);
}

// Metadata v12 request by topic id: the name is a null compact string.
TEST(CodecTest, MetadataV12RequestByIdByHand) {
  metadata_request req;
  auto& t = req.topics.emplace().emplace_back();
  t.topic_id.fill(0xab);
  t.name = std::nullopt;
  req.allow_auto_topic_creation = false;
  const bytes body = {2,                            // topics: 1
                      0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab,
                      0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab,  //   topic id
                      0,                            //   name: null
                      0,                            //   topic tags
                      0,                            // allow auto topic creation
                      0,                            // include topic authorized operations
                      0};                           // body tags
  metadata_request back;
  reader r{std::span<const uint8_t>(body)};
  ASSERT_TRUE(back.decode(r, 12).ok());
  EXPECT_EQ(r.remaining(), 0u);
  EXPECT_EQ(back, req);
  writer w;
  req.encode(w, 12);
  EXPECT_EQ(bytes(w.owned_bytes().begin(), w.owned_bytes().end()), body);
}

// Checks a flexible request worked out by hand: `req` encodes (client id
// "ab") to the frame of `header` (v2) and `body`, and the frame decodes
// back to `req` with nothing left over.
template <class Req>
void expect_flexible_request_frame(const Req& req, int16_t version, int32_t correlation_id,
                                   const bytes& header, const bytes& body) {
  const bytes frame = cat({{0, 0, 0, static_cast<uint8_t>(header.size() + body.size())}, header, body});
  EXPECT_EQ(flat(encode_request(correlation_id, version, req, std::string("ab"))), frame);
  reader r(std::span<const uint8_t>(frame).subspan(4));
  auto h = decode_request_header(r);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->header_version, 2);
  auto decoded = decode_request_body(Req::api_key, version, r);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(r.remaining(), 0u);
  EXPECT_EQ(std::get<Req>(*decoded), req);
}

// DeleteTopics v6 request: header v2 (flexible from v4); one entry by name
// (zero id) and one by id (null name, compact 0), then the timeout.
TEST(CodecTest, DeleteTopicsV6RequestByHand) {
  delete_topics_request req;
  auto& by_name = req.topics.emplace_back();
  by_name.name = "a";
  auto& by_id = req.topics.emplace_back();
  for (uint8_t i = 0; i < 16; ++i) by_id.topic_id[i] = static_cast<uint8_t>(i + 1);
  req.timeout_ms = 1000;
  const bytes body = cat({{3},                // topics: 2
                          {2, 'a'},           //   name "a"
                          bytes(16, 0),       //   topic id: zero
                          {0},                //   entry tags
                          {0},                //   name: null
                          {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},  // topic id
                          {0},                //   entry tags
                          {0, 0, 0x03, 0xe8}, // timeout 1000 ms
                          {0}});              // body tags
  const bytes header = {0, 20, 0, 6, 0, 0, 0, 3, 0, 2, 'a', 'b', 0};
  expect_flexible_request_frame(req, 6, 3, header, body);
}

// DescribeTopicPartitions v0 request: header v2; one topic, a partition
// limit and a cursor, a nullable struct written as an int8 marker (1) and
// then its fields; without a cursor the marker is -1.
TEST(CodecTest, DescribeTopicPartitionsV0RequestByHand) {
  describe_topic_partitions_request req;
  req.topics.emplace_back().name = "t";
  req.response_partition_limit = 3;
  auto& c = req.cursor.emplace();
  c.topic_name = "t";
  c.partition_index = 2;
  const bytes body = {2,    2, 't', 0,  // topics: 1, name "t", tags
                      0,    0, 0,   3,  // response partition limit 3
                      1,                // cursor present
                      2,    't',        //   topic name
                      0,    0, 0,   2,  //   partition index 2
                      0,                //   cursor tags
                      0};               // body tags
  const bytes header = {0, 75, 0, 0, 0, 0, 0, 4, 0, 2, 'a', 'b', 0};
  expect_flexible_request_frame(req, 0, 4, header, body);

  describe_topic_partitions_request no_cursor;
  const bytes empty = {1, 0, 0, 0x07, 0xd0, 0xff, 0};  // no topics, limit 2000, null cursor, tags
  writer w;
  no_cursor.encode(w, 0);
  EXPECT_EQ(bytes(w.owned_bytes().begin(), w.owned_bytes().end()), empty);
}

// DescribeTopicPartitions v0 response: header v1; one topic with one
// partition led by broker 1, both ELR lists null (compact 0), and a next
// cursor.
TEST(CodecTest, DescribeTopicPartitionsV0ResponseByHand) {
  describe_topic_partitions_response m;
  auto& t = m.topics.emplace_back();
  t.name = "t";
  t.topic_id.fill(0xaa);
  auto& p = t.partitions.emplace_back();
  p.leader_id = 1;
  p.leader_epoch = 0;
  p.replica_nodes = {1};
  p.isr_nodes = {1};
  auto& next = m.next_cursor.emplace();
  next.topic_name = "t";
  next.partition_index = 1;
  const bytes body = cat({{0, 0, 0, 0},     // throttle time
                          {2},              // topics: 1
                          {0, 0},           //   error code
                          {2, 't'},         //   name
                          bytes(16, 0xaa),  //   topic id
                          {0},              //   is internal
                          {2},              //   partitions: 1
                          {0, 0},           //     error code
                          {0, 0, 0, 0},     //     partition index
                          {0, 0, 0, 1},     //     leader id
                          {0, 0, 0, 0},     //     leader epoch
                          {2, 0, 0, 0, 1},  //     replica nodes [1]
                          {2, 0, 0, 0, 1},  //     isr nodes [1]
                          {0},              //     eligible leader replicas: null
                          {0},              //     last known elr: null
                          {1},              //     offline replicas: empty
                          {0},              //     partition tags
                          {0x80, 0, 0, 0},  //   topic authorized operations: INT32_MIN
                          {0},              //   topic tags
                          {1, 2, 't'},      // next cursor present, topic name
                          {0, 0, 0, 1},     //   partition index 1
                          {0},              //   cursor tags
                          {0}});            // body tags
  const bytes frame =
      cat({{0, 0, 0, static_cast<uint8_t>(5 + body.size())}, {0, 0, 0, 9, 0}, body});
  EXPECT_EQ(flat(encode_response(9, 0, m)), frame);
  describe_topic_partitions_response back;
  reader r{std::span<const uint8_t>(body)};
  ASSERT_TRUE(back.decode(r, 0).ok());
  EXPECT_EQ(r.remaining(), 0u);
  EXPECT_EQ(back, m);
}

// Metadata v1 response: header v0, one broker (1, "h", 9092, rack null),
// controller 1, one topic "t" with one partition led by broker 1.
TEST(CodecTest, MetadataV1ResponseByHand) {
  metadata_response m;
  auto& b = m.brokers.emplace_back();
  b.node_id = 1;
  b.host = "h";
  b.port = 9092;
  m.controller_id = 1;
  auto& t = m.topics.emplace_back();
  t.name = "t";
  auto& p = t.partitions.emplace_back();
  p.partition_index = 0;
  p.leader_id = 1;
  p.replica_nodes = {1};
  p.isr_nodes = {1};
  const bytes body = {
      0, 0, 0, 1,                    // brokers: 1
      0, 0, 0, 1,                    //   node id
      0, 1, 'h',                     //   host
      0, 0, 0x23, 0x84,              //   port 9092
      0xff, 0xff,                    //   rack: null
      0, 0, 0, 1,                    // controller id
      0, 0, 0, 1,                    // topics: 1
      0, 0,                          //   error code
      0, 1, 't',                     //   name
      0,                             //   is internal
      0, 0, 0, 1,                    //   partitions: 1
      0, 0,                          //     error code
      0, 0, 0, 0,                    //     partition index
      0, 0, 0, 1,                    //     leader
      0, 0, 0, 1, 0, 0, 0, 1,        //     replicas [1]
      0, 0, 0, 1, 0, 0, 0, 1,        //     isr [1]
  };
  const bytes frame = cat({{0, 0, 0, static_cast<uint8_t>(4 + body.size()), 0, 0, 0, 9}, body});
  EXPECT_EQ(flat(encode_response(9, 1, m)), frame);
  metadata_response d;
  reader r(body);
  ASSERT_TRUE(d.decode(r, 1).ok());
  EXPECT_EQ(d, m);
}

// ApiVersions v3 response: response header v0 (no tag section, KIP-511),
// flexible body, and one known tagged field (finalized_features_epoch, tag 1).
TEST(CodecTest, FlexibleResponseWithTaggedFieldByHand) {
  api_versions_response m;
  auto& k = m.api_keys.emplace_back();
  k.api_key = 18;
  k.max_version = 3;
  m.finalized_features_epoch = 5;
  const bytes body = {
      0, 0,                    // error code
      2,                       // compact array of 1
      0, 18, 0, 0, 0, 3, 0,    //   key, min, max, no tags
      0, 0, 0, 0,              // throttle time
      1,                       // one tagged field
      1, 8, 0, 0, 0, 0, 0, 0, 0, 5,  // tag 1, 8 bytes, epoch 5
  };
  const bytes frame = cat({{0, 0, 0, static_cast<uint8_t>(4 + body.size()), 0, 0, 0, 3}, body});
  EXPECT_EQ(flat(encode_response(3, 3, m)), frame);

  // Decoding also skips an unknown tag (7, two bytes) in front of the known one.
  const bytes with_unknown = {0, 0, 2, 0, 18, 0, 0, 0, 3, 0, 0, 0, 0, 0,
                              2, 7, 2, 'x', 'y', 1, 8, 0, 0, 0, 0, 0, 0, 0, 5};
  api_versions_response d;
  reader r(with_unknown);
  ASSERT_TRUE(d.decode(r, 3).ok());
  EXPECT_EQ(d, m);
  EXPECT_EQ(r.remaining(), 0u);
  // The default value of a tagged field is not written.
  m.finalized_features_epoch = -1;
  writer w;
  m.encode(w, 3);
  EXPECT_EQ(w.owned_bytes().back(), 0);
}

TEST(CodecTest, HeaderVersionRules) {
  EXPECT_EQ(request_header_version(18, 3), 2);
  EXPECT_EQ(request_header_version(18, 2), 1);
  EXPECT_EQ(response_header_version(18, 3), 0);  // ApiVersions: always v0
  EXPECT_EQ(request_header_version(0, 8), 1);
  EXPECT_EQ(request_header_version(0, 9), 2);    // above our range, but flexible
  EXPECT_EQ(response_header_version(0, 9), 1);
  EXPECT_EQ(response_header_version(0, 8), 0);
  EXPECT_EQ(request_header_version(999, 0), 1);  // unknown API
}

TEST(CodecTest, UnsupportedApiVersionsAnsweredInV0) {
  // An ApiVersions v9 request (flexible header) decodes its header, is
  // reported unsupported, and the answer lists ApiVersions' range.
  const bytes frame = {0, 18, 0, 9, 0, 0, 0, 5, 0, 0, 0, /* some body */ 3, 'x', 'y', 0};
  reader r(frame);
  auto h = decode_request_header(r);
  ASSERT_TRUE(h.ok());
  EXPECT_FALSE(h->supported);
  EXPECT_EQ(h->header.correlation_id, 5);
  auto resp = unsupported_api_versions_response(supported_api_table);
  EXPECT_EQ(resp.error_code, 35);
  ASSERT_EQ(resp.api_keys.size(), 1u);
  EXPECT_EQ(resp.api_keys[0].max_version, api_versions_request::max_version);
  const bytes expect = {0, 0, 0, 16, 0, 0, 0, 5, 0, 35, 0, 0, 0, 1, 0, 18, 0, 0, 0, 4};
  EXPECT_EQ(flat(encode_response(5, 0, resp)), expect);
}

TEST(CodecTest, ApiVersionsFromTableListsEveryApi) {
  auto resp = api_versions_from_table(supported_api_table);
  EXPECT_EQ(resp.error_code, 0);
  ASSERT_EQ(resp.api_keys.size(), std::size(supported_api_table));
  bool saw_fetch = false;
  for (const auto& k : resp.api_keys) {
    if (k.api_key == 1) {
      saw_fetch = true;
      EXPECT_EQ(k.min_version, 0);
      EXPECT_EQ(k.max_version, fetch_request::max_version);
    }
  }
  EXPECT_TRUE(saw_fetch);
}

TEST(CodecTest, RecordsAreViewsOnDecodeAndChunksOnEncode) {
  // Decode: the records field points into the request buffer.
  produce_request req;
  req.acks = -1;
  req.timeout_ms = 1000;
  bytes batch(3000, 0xab);
  req.topic_data.emplace_back().name = "t";
  req.topic_data[0].partition_data.emplace_back().records = records_field::of(batch);
  writer w;
  req.encode(w, 7);
  auto chunks = std::move(w).finish();
  // The 3000-byte view is referenced, not copied.
  ASSERT_EQ(chunks.chunks().size(), 2u);
  EXPECT_EQ(chunks.chunks()[1].type, chunk::kind::memory);
  EXPECT_EQ(chunks.chunks()[1].memory.data(), batch.data());
  const bytes wire = flat(chunks);
  produce_request d;
  reader r(wire);
  ASSERT_TRUE(d.decode(r, 7).ok());
  auto view = d.topic_data[0].partition_data[0].records.view();
  EXPECT_EQ(view.size(), 3000u);
  EXPECT_GE(view.data(), wire.data());
  EXPECT_LE(view.data() + view.size(), wire.data() + wire.size());

  // Encode: a fetch response whose records are a region of a file.
  char path[] = "/tmp/sluice_protocol_testXXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ::unlink(path);
  const std::string content = "0123456789abcdefghij";
  ASSERT_EQ(::write(fd, content.data(), content.size()), static_cast<ssize_t>(content.size()));
  fetch_response f;
  auto& part = f.responses.emplace_back();
  part.topic = "t";
  auto& pd = part.partitions.emplace_back();
  pd.high_watermark = 10;
  file_region region;
  region.fd = fd;
  region.pos = 5;
  region.length = 10;
  pd.records.append(region);
  auto out = encode_response(77, 4, f);
  bool saw_file = false;
  for (const chunk& c : out.chunks()) {
    if (c.type == chunk::kind::file) {
      saw_file = true;
      EXPECT_EQ(c.file.pos, 5u);
      EXPECT_EQ(c.length, 10u);
    }
  }
  EXPECT_TRUE(saw_file);
  const bytes fetched = flat(out);
  EXPECT_EQ(fetched.size(), out.size_bytes());
  EXPECT_EQ(load_size(fetched), fetched.size() - 4);
  // The records length prefix (int32 10) sits right before the file bytes.
  const bytes tail(fetched.end() - 14, fetched.end());
  EXPECT_EQ(tail, cat({{0, 0, 0, 10}, str("56789abcde")}));
  ::close(fd);
}

// OffsetForLeaderEpoch v4 request: flexible (header v2, compact arrays and
// strings, tags); replica id 1 (v3+), current leader epoch 5 (v2+), asking
// about epoch 3 of "t"/0.
TEST(CodecTest, OffsetForLeaderEpochV4RequestByHand) {
  offset_for_leader_epoch_request req;
  req.replica_id = 1;
  auto& t = req.topics.emplace_back();
  t.topic = "t";
  auto& p = t.partitions.emplace_back();
  p.partition = 0;
  p.current_leader_epoch = 5;
  p.leader_epoch = 3;
  const bytes body = {0, 0, 0, 1,  // replica id
                      2,           // topics: 1
                      2, 't',      //   topic
                      2,           //   partitions: 1
                      0, 0, 0, 0,  //     partition
                      0, 0, 0, 5,  //     current leader epoch
                      0, 0, 0, 3,  //     leader epoch
                      0,           //     partition tags
                      0,           //   topic tags
                      0};          // body tags
  const bytes header = {0, 23, 0, 4, 0, 0, 0, 3, 0, 2, 'a', 'b', 0};
  const bytes frame =
      cat({{0, 0, 0, static_cast<uint8_t>(header.size() + body.size())}, header, body});
  EXPECT_EQ(flat(encode_request(3, 4, req, std::string("ab"))), frame);
  reader r(std::span<const uint8_t>(frame).subspan(4));
  ASSERT_TRUE(decode_request_header(r).ok());
  auto decoded = decode_request_body(23, 4, r);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(r.remaining(), 0u);
  EXPECT_EQ(std::get<offset_for_leader_epoch_request>(*decoded), req);
}

// v2 carries no replica id: it decodes as -2 (the field's default, a
// debugging client); v0-1 carry no current leader epoch either (-1).
TEST(CodecTest, OffsetForLeaderEpochV0AndV2RequestsByHand) {
  const bytes v2 = {0, 0, 0, 1,       // topics: 1
                    0, 1, 't',        //   topic
                    0, 0, 0, 1,       //   partitions: 1
                    0, 0, 0, 2,       //     partition
                    0, 0, 0, 7,       //     current leader epoch
                    0, 0, 0, 6};      //     leader epoch
  reader r2{std::span<const uint8_t>(v2)};
  auto d2 = decode_request_body(23, 2, r2);
  ASSERT_TRUE(d2.ok());
  EXPECT_EQ(r2.remaining(), 0u);
  const auto& m2 = std::get<offset_for_leader_epoch_request>(*d2);
  EXPECT_EQ(m2.replica_id, -2);
  ASSERT_EQ(m2.topics.size(), 1u);
  EXPECT_EQ(m2.topics[0].partitions[0].partition, 2);
  EXPECT_EQ(m2.topics[0].partitions[0].current_leader_epoch, 7);
  EXPECT_EQ(m2.topics[0].partitions[0].leader_epoch, 6);

  const bytes v0 = {0, 0, 0, 1, 0, 1, 't', 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 6};
  reader r0{std::span<const uint8_t>(v0)};
  auto d0 = decode_request_body(23, 0, r0);
  ASSERT_TRUE(d0.ok());
  EXPECT_EQ(r0.remaining(), 0u);
  const auto& m0 = std::get<offset_for_leader_epoch_request>(*d0);
  EXPECT_EQ(m0.topics[0].partitions[0].current_leader_epoch, -1);
  EXPECT_EQ(m0.topics[0].partitions[0].leader_epoch, 6);
}

// The response in v0 (no throttle time, no leader epoch) and v4 (flexible,
// header v1).
TEST(CodecTest, OffsetForLeaderEpochResponsesByHand) {
  offset_for_leader_epoch_response m;
  auto& t = m.topics.emplace_back();
  t.topic = "t";
  auto& p = t.partitions.emplace_back();
  p.error_code = 0;
  p.partition = 0;
  p.leader_epoch = 3;
  p.end_offset = 10;
  const bytes v0 = {0, 0, 0, 1,               // topics: 1
                    0, 1, 't',                //   topic
                    0, 0, 0, 1,               //   partitions: 1
                    0, 0,                     //     error code
                    0, 0, 0, 0,               //     partition
                    0, 0, 0, 0, 0, 0, 0, 10}; //     end offset
  EXPECT_EQ(flat(encode_response(9, 0, m)),
            cat({{0, 0, 0, static_cast<uint8_t>(4 + v0.size())}, {0, 0, 0, 9}, v0}));
  const bytes v4 = {0, 0, 0, 0,               // throttle time
                    2,                        // topics: 1
                    2, 't',                   //   topic
                    2,                        //   partitions: 1
                    0, 0,                     //     error code
                    0, 0, 0, 0,               //     partition
                    0, 0, 0, 3,               //     leader epoch
                    0, 0, 0, 0, 0, 0, 0, 10,  //     end offset
                    0,                        //     partition tags
                    0,                        //   topic tags
                    0};                       // body tags
  EXPECT_EQ(flat(encode_response(9, 4, m)),
            cat({{0, 0, 0, static_cast<uint8_t>(5 + v4.size())}, {0, 0, 0, 9, 0}, v4}));
  offset_for_leader_epoch_response back;
  reader r{std::span<const uint8_t>(v4)};
  ASSERT_TRUE(back.decode(r, 4).ok());
  EXPECT_EQ(back, m);
}

// TxnOffsetCommit v0-4 through the request path (header and body): each
// version carries what Kafka's schema gives it, and fields a version does
// not carry decode as their defaults (generation -1, member id "",
// instance id null, leader epoch -1).
TEST(CodecTest, TxnOffsetCommitRoundTripsInEveryVersion) {
  txn_offset_commit_request full;
  full.transactional_id = "txn-1";
  full.group_id = "g";
  full.producer_id = 4000;
  full.producer_epoch = 3;
  full.generation_id = 7;
  full.member_id = "m-1";
  full.group_instance_id = "instance";
  auto& t = full.topics.emplace_back();
  t.name = "t";
  auto& p0 = t.partitions.emplace_back();
  p0.partition_index = 2;
  p0.committed_offset = 99;
  p0.committed_leader_epoch = 5;
  p0.committed_metadata = "meta";
  auto& p1 = t.partitions.emplace_back();
  p1.partition_index = 3;
  p1.committed_offset = 100;
  p1.committed_leader_epoch = 5;
  p1.committed_metadata = std::nullopt;
  for (int16_t v = 0; v <= 4; ++v) {
    SCOPED_TRACE(v);
    txn_offset_commit_request expect = full;
    if (v < 3) {
      expect.generation_id = -1;
      expect.member_id = "";
      expect.group_instance_id = std::nullopt;
    }
    if (v < 2)
      for (auto& p : expect.topics[0].partitions) p.committed_leader_epoch = -1;
    const bytes frame = flat(encode_request(11, v, full, std::string("client")));
    reader r(std::span<const uint8_t>(frame).subspan(4));
    auto h = decode_request_header(r);
    ASSERT_TRUE(h.ok());
    EXPECT_EQ(h->header.request_api_key, 28);
    EXPECT_EQ(h->header.request_api_version, v);
    EXPECT_TRUE(h->supported);
    auto decoded = decode_request_body(28, v, r);
    ASSERT_TRUE(decoded.ok()) << decoded.err().message;
    EXPECT_EQ(r.remaining(), 0u);
    EXPECT_EQ(std::get<txn_offset_commit_request>(*decoded), expect);
  }
  // v0 by hand, as Kafka lays it out (no flexible fields, int16 strings).
  txn_offset_commit_request small;
  small.transactional_id = "x";
  small.group_id = "g";
  small.producer_id = 1;
  small.producer_epoch = 2;
  auto& st = small.topics.emplace_back();
  st.name = "t";
  auto& sp = st.partitions.emplace_back();
  sp.partition_index = 0;
  sp.committed_offset = 5;
  sp.committed_metadata = std::nullopt;
  const bytes v0 = {0, 1, 'x',                  // transactional id
                    0, 1, 'g',                  // group id
                    0, 0, 0, 0, 0, 0, 0, 1,     // producer id
                    0, 2,                       // producer epoch
                    0, 0, 0, 1,                 // topics: 1
                    0, 1, 't',                  //   name
                    0, 0, 0, 1,                 //   partitions: 1
                    0, 0, 0, 0,                 //     partition
                    0, 0, 0, 0, 0, 0, 0, 5,     //     committed offset
                    0xff, 0xff};                //     metadata: null
  reader r0{std::span<const uint8_t>(v0)};
  auto d0 = decode_request_body(28, 0, r0);
  ASSERT_TRUE(d0.ok());
  EXPECT_EQ(r0.remaining(), 0u);
  EXPECT_EQ(std::get<txn_offset_commit_request>(*d0), small);

  // The response: v0 and v4 both decode to what was encoded.
  txn_offset_commit_response resp;
  resp.throttle_time_ms = 0;
  auto& rt = resp.topics.emplace_back();
  rt.name = "t";
  rt.partitions.push_back({2, 88});
  for (int16_t v : {int16_t{0}, int16_t{4}}) {
    const bytes f = flat(encode_response(11, v, resp));
    reader rr(std::span<const uint8_t>(f).subspan(v >= 3 ? 9 : 8));  // size, correlation id, v3+: header tags
    txn_offset_commit_response back;
    ASSERT_TRUE(back.decode(rr, v).ok());
    EXPECT_EQ(rr.remaining(), 0u);
    EXPECT_EQ(back, resp);
  }
}

}  // namespace
}  // namespace sluice::protocol
