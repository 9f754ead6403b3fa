// Record batches, record varints, compression codecs and the consumer
// protocol structs.

#include <gtest/gtest.h>

#include <snappy-c.h>

#include <random>

#include "base/crc32c.h"
#include "base/endian.h"
#include "model/record_batch.h"
#include "protocol/codec.h"
#include "protocol/consumer_protocol.h"
#include "protocol/records/compression.h"
#include "protocol/records/control.h"
#include "protocol/records/record_batch.h"

namespace sluice::protocol::records {
namespace {

using bytes = std::vector<uint8_t>;

bytes text(std::string_view s) { return bytes(s.begin(), s.end()); }

bytes sample_data(size_t n, uint64_t seed, bool compressible) {
  std::mt19937_64 rng(seed);
  bytes b(n);
  for (size_t i = 0; i < n; ++i) b[i] = compressible ? static_cast<uint8_t>("abcabcabd"[i % 9] + (rng() % 16 == 0)) : static_cast<uint8_t>(rng());
  return b;
}

constexpr compression all_codecs[] = {compression::none, compression::gzip, compression::snappy, compression::lz4,
                                      compression::zstd};

TEST(VarintTest, ZigZagKnownValues) {
  struct kv {
    int64_t v;
    bytes wire;
  };
  const kv cases[] = {{0, {0x00}},        {-1, {0x01}},       {1, {0x02}},
                      {-2, {0x03}},       {63, {0x7e}},       {-64, {0x7f}},
                      {64, {0x80, 0x01}}, {300, {0xd8, 0x04}}};
  for (const auto& c : cases) {
    writer w;
    w.write_varint(static_cast<int32_t>(c.v));
    EXPECT_EQ(bytes(w.owned_bytes().begin(), w.owned_bytes().end()), c.wire) << c.v;
    reader r(c.wire);
    EXPECT_EQ(r.read_varint(), c.v);
    reader r2(c.wire);
    EXPECT_EQ(r2.read_varlong(), c.v);
  }
  for (int64_t v : {INT64_MIN, INT64_MAX, int64_t{INT32_MIN}, int64_t{INT32_MAX}, int64_t{-123456789012}}) {
    writer w;
    w.write_varlong(v);
    reader r(w.owned_bytes());
    EXPECT_EQ(r.read_varlong(), v);
    EXPECT_EQ(r.remaining(), 0u);
  }
  for (int32_t v : {INT32_MIN, INT32_MAX}) {
    writer w;
    w.write_varint(v);
    EXPECT_EQ(w.owned_bytes().size(), 5u);
    reader r(w.owned_bytes());
    EXPECT_EQ(r.read_varint(), v);
  }
}

TEST(CompressionTest, RoundTripEveryCodec) {
  for (compression c : all_codecs) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{100}, size_t{70000}, size_t{300000}}) {
      for (bool compressible : {true, false}) {
        SCOPED_TRACE(std::string(compression_name(c)) + " " + std::to_string(n));
        const bytes in = sample_data(n, n + 7, compressible);
        auto packed = compress(c, in);
        ASSERT_TRUE(packed.ok());
        if (compressible && n >= 70000 && c != compression::none) {
          EXPECT_LT(packed->size(), n / 2);
        }
        auto back = decompress(c, *packed);
        ASSERT_TRUE(back.ok()) << back.err().message;
        EXPECT_EQ(*back, in);
      }
    }
  }
}

TEST(CompressionTest, SnappyReadsRawAndXerialFraming) {
  const bytes in = sample_data(100000, 3, true);
  // Raw snappy, as librdkafka may send it.
  size_t clen = snappy_max_compressed_length(in.size());
  bytes raw(clen);
  ASSERT_EQ(snappy_compress(reinterpret_cast<const char*>(in.data()), in.size(), reinterpret_cast<char*>(raw.data()),
                            &clen),
            SNAPPY_OK);
  raw.resize(clen);
  auto a = decompress(compression::snappy, raw);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(*a, in);
  // Our own output carries the xerial magic and several 32 KiB blocks.
  auto framed = compress(compression::snappy, in);
  ASSERT_TRUE(framed.ok());
  const bytes magic = {0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1};
  EXPECT_TRUE(std::equal(magic.begin(), magic.end(), framed->begin()));
}

TEST(CompressionTest, Lz4UsesIndependent64KiBBlocks) {
  auto framed = compress(compression::lz4, sample_data(1000, 1, true));
  ASSERT_TRUE(framed.ok());
  ASSERT_GE(framed->size(), 7u);
  EXPECT_EQ(load_be<uint32_t>(framed->data()), 0x04224d18u);  // little-endian magic 0x184D2204
  const uint8_t flg = (*framed)[4];
  const uint8_t bd = (*framed)[5];
  EXPECT_EQ(flg >> 6, 1);         // version 01
  EXPECT_TRUE(flg & 0x20);        // block independence
  EXPECT_EQ((bd >> 4) & 0x7, 4);  // 64 KiB max block
}

TEST(CompressionTest, BombsAndGarbageAreErrors) {
  const bytes zeros(4 << 20, 0);
  for (compression c : all_codecs) {
    SCOPED_TRACE(std::string(compression_name(c)));
    auto packed = compress(c, zeros);
    ASSERT_TRUE(packed.ok());
    auto capped = decompress(c, *packed, 1 << 20);
    ASSERT_FALSE(capped.ok());
    EXPECT_EQ(capped.code(), errc::message_too_large);
    if (c == compression::none) continue;
    // Every prefix of a valid stream, and random junk, fail cleanly.
    // (xerial snappy framing cut at a block boundary is a valid, shorter
    // stream, so there a prefix may decode, but only to less data.)
    const bytes original = sample_data(70000, 9, true);
    auto small = compress(c, original);
    ASSERT_TRUE(small.ok());
    for (size_t n = 0; n < small->size(); n += (n < 64 ? 1 : 97)) {
      auto r = decompress(c, std::span<const uint8_t>(small->data(), n));
      if (c == compression::snappy && r.ok()) {
        EXPECT_LT(r->size(), original.size()) << "prefix " << n;
      } else {
        EXPECT_FALSE(r.ok()) << "prefix " << n;
      }
    }
    std::mt19937_64 rng(5);
    for (int i = 0; i < 200; ++i) {
      bytes junk(rng() % 200);
      for (auto& b : junk) b = static_cast<uint8_t>(rng());
      decompress(c, junk, 1 << 16).to_status().ignore();
    }
  }
}

std::vector<record_input> sample_records() {
  std::vector<record_input> in(4);
  in[0].key = text("k0");
  in[0].value = text("hello");
  in[0].timestamp_ms = 1'700'000'000'000;
  in[1].key = std::nullopt;  // null key
  in[1].value = sample_data(3000, 1, true);
  in[1].timestamp_ms = 1'700'000'000'005;
  in[1].headers = {{"trace", text("abc")}, {"empty", std::nullopt}};
  in[2].key = text("k2");
  in[2].value = std::nullopt;  // tombstone
  in[2].timestamp_ms = 1'699'999'999'990;  // earlier than the first: negative delta
  in[3].key = bytes{};
  in[3].value = bytes{};
  in[3].timestamp_ms = 1'700'000'000'001;
  in[3].offset_delta = 9;  // a gap, as compaction leaves
  return in;
}

void expect_same(const std::vector<record_input>& in, const decoded_batch& d) {
  ASSERT_EQ(d.records.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    const record& r = d.records[i];
    EXPECT_EQ(r.timestamp_delta, in[i].timestamp_ms - in[0].timestamp_ms);
    EXPECT_EQ(r.offset_delta, in[i].offset_delta.value_or(static_cast<int32_t>(i)));
    ASSERT_EQ(r.key.has_value(), in[i].key.has_value());
    if (r.key) {
      EXPECT_EQ(bytes(r.key->begin(), r.key->end()), *in[i].key);
    }
    ASSERT_EQ(r.value.has_value(), in[i].value.has_value());
    if (r.value) {
      EXPECT_EQ(bytes(r.value->begin(), r.value->end()), *in[i].value);
    }
    ASSERT_EQ(r.headers.size(), in[i].headers.size());
    for (size_t j = 0; j < r.headers.size(); ++j) {
      EXPECT_EQ(std::string(r.headers[j].key.begin(), r.headers[j].key.end()), in[i].headers[j].first);
      ASSERT_EQ(r.headers[j].value.has_value(), in[i].headers[j].second.has_value());
    }
  }
}

TEST(RecordBatchTest, BuildAndDecodeWithEveryCodec) {
  const auto in = sample_records();
  for (compression c : all_codecs) {
    SCOPED_TRACE(std::string(compression_name(c)));
    batch_options o;
    o.base_offset = 1000;
    o.codec = c;
    o.producer_id = 7;
    o.producer_epoch = 1;
    o.base_sequence = 42;
    auto built = build_batch(o, in);
    ASSERT_TRUE(built.ok());
    auto h = model::batch::read_header(*built);
    ASSERT_TRUE(h.ok());
    EXPECT_EQ(h->size_bytes(), built->size());
    EXPECT_EQ(h->base_offset, offset(1000));
    EXPECT_EQ(h->last_offset(), offset(1009));
    EXPECT_EQ(h->codec(), c);
    EXPECT_EQ(h->records_count, 4);
    EXPECT_EQ(h->base_timestamp, in[0].timestamp_ms);
    EXPECT_EQ(h->max_timestamp, in[1].timestamp_ms);
    EXPECT_EQ(h->producer_id, 7);
    EXPECT_EQ(h->base_sequence, 42);
    // The CRC is CRC-32C of attributes..end, computed independently here.
    const size_t covered = model::batch::attributes_pos;
    EXPECT_EQ(h->crc, crc32c(built->data() + covered, built->size() - covered));
    auto d = decode_batch(*built);
    ASSERT_TRUE(d.ok()) << d.err().message;
    expect_same(in, *d);
  }
}

TEST(RecordBatchTest, DamageIsDetected) {
  auto built = build_batch(batch_options{}, sample_records());
  ASSERT_TRUE(built.ok());
  // A flipped payload bit fails the CRC.
  bytes bad = *built;
  bad[bad.size() - 3] ^= 0x10;
  auto r = decode_batch(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), errc::corrupt_data);
  // Old magic is a format error, not corruption.
  bytes old = *built;
  old[model::batch::magic_pos] = 1;
  EXPECT_EQ(decode_batch(old).code(), errc::unsupported_format);
  // Every strict prefix fails.
  for (size_t n = 0; n < built->size(); ++n) {
    EXPECT_FALSE(decode_batch(std::span<const uint8_t>(built->data(), n)).ok()) << n;
  }
  // A record count larger than the records, with a fixed-up CRC.
  bytes lying = *built;
  store_be<int32_t>(lying.data() + model::batch::records_count_pos, 1'000'000);
  model::batch::update_crc(lying);
  EXPECT_FALSE(decode_batch(lying).ok());
  // Random record bytes behind a valid header never crash.
  std::mt19937_64 rng(11);
  for (int i = 0; i < 2000; ++i) {
    bytes junk(rng() % 64);
    for (auto& b : junk) b = static_cast<uint8_t>(rng() % 4 == 0 ? rng() : rng() % 3);
    decode_records(junk, static_cast<int32_t>(rng() % 5)).to_status().ignore();
  }
}

TEST(RecordBatchTest, SplitBatchesKeepsWholeBatchesOnly) {
  auto a = build_batch(batch_options{}, sample_records());
  batch_options o2;
  o2.base_offset = 10;
  o2.codec = compression::zstd;
  auto b = build_batch(o2, sample_records());
  ASSERT_TRUE(a.ok() && b.ok());
  bytes all = *a;
  all.insert(all.end(), b->begin(), b->end());
  all.insert(all.end(), b->begin(), b->begin() + 30);  // a partial batch, as a fetch may end
  size_t trailing = 0;
  auto parts = split_batches(all, &trailing);
  ASSERT_TRUE(parts.ok());
  ASSERT_EQ(parts->size(), 2u);
  EXPECT_EQ(trailing, 30u);
  EXPECT_TRUE(model::batch::crc_matches((*parts)[0]));
  EXPECT_TRUE(model::batch::crc_matches((*parts)[1]));
}

TEST(RecordBatchTest, LogAppendTimeAndControlFlags) {
  batch_options o;
  o.ts_type = model::timestamp_type::log_append_time;
  o.log_append_time_ms = 1'800'000'000'000;
  o.transactional = true;
  o.control = true;
  auto built = build_batch(o, sample_records());
  ASSERT_TRUE(built.ok());
  auto h = model::batch::read_header(*built);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->ts_type(), model::timestamp_type::log_append_time);
  EXPECT_EQ(h->max_timestamp, 1'800'000'000'000);
  EXPECT_TRUE(h->is_transactional());
  EXPECT_TRUE(h->is_control());
}

TEST(ConsumerProtocolTest, SubscriptionAndAssignmentRoundTrip) {
  consumer_protocol_subscription s;
  s.topics = {"orders", "payments"};
  s.user_data = bytes{1, 2, 3};
  auto& owned = s.owned_partitions.emplace_back();
  owned.topic = "orders";
  owned.partitions = {0, 3};
  s.generation_id = 5;
  s.rack_id = "r1";
  for (int16_t v = 0; v <= 3; ++v) {
    auto wire = encode_subscription(s, v);
    int16_t got_version = -1;
    auto d = decode_subscription(wire, &got_version);
    ASSERT_TRUE(d.ok()) << d.err().message;
    EXPECT_EQ(got_version, v);
    EXPECT_EQ(d->topics, s.topics);
    if (v >= 1) {
      EXPECT_EQ(d->owned_partitions, s.owned_partitions);
    }
    if (v >= 3) {
      EXPECT_EQ(*d, s);
    }
  }
  // Version 0 subscription by hand: version, 1 topic "t", null user data.
  const bytes v0 = {0, 0, 0, 0, 0, 1, 0, 1, 't', 0xff, 0xff, 0xff, 0xff};
  auto d0 = decode_subscription(v0);
  ASSERT_TRUE(d0.ok());
  EXPECT_EQ(d0->topics, std::vector<std::string>{"t"});
  EXPECT_FALSE(d0->user_data.has_value());
  // A future version is read as v3 with its extra bytes ignored.
  auto future = encode_subscription(s, 3);
  future[1] = 9;
  future.push_back(0x55);
  auto df = decode_subscription(future);
  ASSERT_TRUE(df.ok());
  EXPECT_EQ(*df, s);

  consumer_protocol_assignment a;
  auto& ap = a.assigned_partitions.emplace_back();
  ap.topic = "orders";
  ap.partitions = {1, 2};
  auto aw = encode_assignment(a, 0);
  auto ad = decode_assignment(aw);
  ASSERT_TRUE(ad.ok());
  EXPECT_EQ(*ad, a);
  auto empty = decode_assignment({});
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->assigned_partitions.empty());
  EXPECT_FALSE(decode_assignment(bytes{0}).ok());
}

}  // namespace
}  // namespace sluice::protocol::records

namespace sluice::protocol::records {
namespace {

// A marker batch round-trips; its header says control, transactional, the
// producer's id and epoch, no sequence; anything else is refused as a marker.
TEST(TxnMarkerTest, RoundTripAndHeader) {
  for (bool commit : {false, true}) {
    auto b = build_marker_batch(42, 7, txn_marker{commit, 3}, 1'700'000'000'000);
    auto h = model::batch::read_header(std::span<const uint8_t>(b));
    ASSERT_TRUE(h.ok());
    EXPECT_TRUE(h->is_control());
    EXPECT_TRUE(h->is_transactional());
    EXPECT_EQ(h->producer_id, 42);
    EXPECT_EQ(h->producer_epoch, 7);
    EXPECT_EQ(h->base_sequence, -1);
    EXPECT_EQ(h->records_count, 1);
    auto m = parse_marker(std::span<const uint8_t>(b));
    ASSERT_TRUE(m.ok()) << m.err().message;
    EXPECT_EQ(*m, (txn_marker{commit, 3}));
  }
}

TEST(TxnMarkerTest, RefusesWhatIsNotAMarker) {
  // A data batch.
  record_input r;
  r.value = std::vector<uint8_t>{1, 2, 3};
  batch_options o;
  auto data = build_batch(o, std::span<const record_input>(&r, 1));
  ASSERT_TRUE(data.ok());
  EXPECT_EQ(parse_marker(std::span<const uint8_t>(*data)).code(), errc::invalid_txn_marker);
  // A control batch of an unknown type (LEADER_CHANGE, 2).
  o.control = o.transactional = true;
  r.key = std::vector<uint8_t>{0, 0, 0, 2};
  r.value = std::vector<uint8_t>{0, 0, 0, 0, 0, 1};
  auto leader_change = build_batch(o, std::span<const record_input>(&r, 1));
  ASSERT_TRUE(leader_change.ok());
  EXPECT_EQ(parse_marker(std::span<const uint8_t>(*leader_change)).code(), errc::invalid_txn_marker);
  // A short key.
  r.key = std::vector<uint8_t>{0, 0};
  auto short_key = build_batch(o, std::span<const record_input>(&r, 1));
  ASSERT_TRUE(short_key.ok());
  EXPECT_EQ(parse_marker(std::span<const uint8_t>(*short_key)).code(), errc::invalid_txn_marker);
  // Truncated bytes.
  auto b = build_marker_batch(1, 0, txn_marker{true, 0}, 0);
  b.resize(b.size() - 3);
  EXPECT_FALSE(parse_marker(std::span<const uint8_t>(b)).ok());
}

}  // namespace
}  // namespace sluice::protocol::records
