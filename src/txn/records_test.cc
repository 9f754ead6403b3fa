#include "txn/records.h"

#include <gtest/gtest.h>

#include "base/java_hash.h"
#include "protocol/codec.h"

namespace sluice::txn {
namespace {

txn_log_value full_value() {
  txn_log_value v;
  v.producer_id = 4001;
  v.previous_producer_id = 3999;
  v.next_producer_id = 4002;
  v.producer_epoch = 17;
  v.last_producer_epoch = 16;
  v.timeout_ms = 60'000;
  v.state = txn_state::prepare_commit;
  v.partitions = {{"orders", 0}, {"orders", 3}, {"payments", 1}, {"__consumer_offsets", 12}};
  v.last_update_ms = 1'700'000'123'456;
  v.start_ms = 1'700'000'120'000;
  v.client_version = txn_version::tv2;
  return v;
}

std::vector<uint8_t> bytes_of(const protocol::writer& w) {
  const auto b = w.owned_bytes();
  return {b.begin(), b.end()};
}

TEST(TxnRecords, PartitionIsTheGroupsRule) {
  EXPECT_EQ(partition_for("polygenelubricants", 50), 0);  // hash INT32_MIN: abs is 0
  for (const char* id : {"a", "my-app-0_1", "\xC3\xA9t\xC3\xA9"}) {
    EXPECT_EQ(partition_for(id, 50), java_hash_partition(id, 50));
    EXPECT_GE(partition_for(id, 50), 0);
    EXPECT_LT(partition_for(id, 50), 50);
  }
  EXPECT_EQ(partition_for("abc", 50), 96354 % 50);
}

TEST(TxnRecords, StateNamesAreKafkas) {
  EXPECT_EQ(state_name(txn_state::prepare_epoch_fence), "PrepareEpochFence");
  EXPECT_EQ(state_name(txn_state::complete_commit), "CompleteCommit");
  for (int8_t i = 0; i <= 7; ++i) {
    const auto s = static_cast<txn_state>(i);
    EXPECT_EQ(state_from_name(state_name(s)), s);
  }
  EXPECT_FALSE(state_from_name("ongoing").has_value());  // names are case-sensitive, as Kafka's
}

TEST(TxnRecords, KeyIsVersionZeroAndAString) {
  const auto k = encode_key("tx-1");
  const std::vector<uint8_t> want = {0, 0, 0, 4, 't', 'x', '-', '1'};
  EXPECT_EQ(k, want);
  auto d = decode_key(k);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(*d, "tx-1");
}

TEST(TxnRecords, ValueRoundTrips) {
  const txn_log_value v = full_value();
  auto d = decode_value(encode_value(v));
  ASSERT_TRUE(d.ok()) << d.err().message;
  EXPECT_EQ(*d, v);

  // Defaults are left out of the tags and come back as defaults.
  txn_log_value plain;
  plain.producer_id = 7;
  plain.producer_epoch = 0;
  plain.timeout_ms = 1000;
  plain.state = txn_state::ongoing;
  plain.partitions = {{"t", 0}};
  auto p = decode_value(encode_value(plain));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, plain);
}

// The exact bytes of version 1, field by field, as Kafka's
// TransactionLogValue lays them out: a tool that reads Kafka's records reads
// these.
TEST(TxnRecords, ValueLayoutIsKafkas) {
  txn_log_value v;
  v.producer_id = 5;
  v.previous_producer_id = 4;
  v.producer_epoch = 2;
  v.timeout_ms = 3000;
  v.state = txn_state::ongoing;
  v.partitions = {{"ab", 1}, {"ab", 2}};
  v.last_update_ms = 9;
  v.start_ms = 8;
  v.client_version = txn_version::tv2;
  protocol::writer w;
  w.write_int16(1);
  w.write_int64(5);
  w.write_int16(2);
  w.write_int32(3000);
  w.write_int8(1);
  w.write_uvarint(2);  // one topic, compact array
  w.write_uvarint(3);  // "ab", compact string
  w.write_raw(std::vector<uint8_t>{'a', 'b'});
  w.write_uvarint(3);  // two partition ids
  w.write_int32(1);
  w.write_int32(2);
  w.write_uvarint(0);  // the topic entry's tagged fields
  w.write_int64(9);
  w.write_int64(8);
  w.write_uvarint(2);  // tagged fields: previous producer id, client version
  w.write_uvarint(0);
  w.write_uvarint(8);
  w.write_int64(4);
  w.write_uvarint(2);
  w.write_uvarint(2);
  w.write_int16(2);
  EXPECT_EQ(encode_value(v), bytes_of(w));
}

TEST(TxnRecords, EmptyWritesANullPartitionArray) {
  txn_log_value v;
  v.producer_id = 1;
  v.producer_epoch = 0;
  v.state = txn_state::empty;
  const auto b = encode_value(v);
  // version, producer id, epoch, timeout, state, then the null compact array.
  ASSERT_GT(b.size(), 17u);
  EXPECT_EQ(b[17], 0);
  auto d = decode_value(b);
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->partitions.empty());
}

TEST(TxnRecords, ReadsVersionZero) {
  // Kafka's version 0: classic strings and int32 array lengths, no tags.
  protocol::writer w;
  w.write_int16(0);
  w.write_int64(42);
  w.write_int16(3);
  w.write_int32(60'000);
  w.write_int8(4);     // CompleteCommit
  w.write_int32(1);    // one topic
  w.write_int16(1);
  w.write_raw(std::vector<uint8_t>{'t'});
  w.write_int32(1);
  w.write_int32(5);
  w.write_int64(100);
  w.write_int64(90);
  auto d = decode_value(bytes_of(w));
  ASSERT_TRUE(d.ok()) << d.err().message;
  EXPECT_EQ(d->producer_id, 42);
  EXPECT_EQ(d->producer_epoch, 3);
  EXPECT_EQ(d->state, txn_state::complete_commit);
  EXPECT_EQ(d->partitions, (partition_set{{"t", 5}}));
  EXPECT_EQ(d->previous_producer_id, no_producer_id);
  EXPECT_EQ(d->client_version, txn_version::tv0);
  EXPECT_EQ(d->start_ms, 90);
}

TEST(TxnRecords, UnknownTagsAreSkipped) {
  txn_log_value v = full_value();
  auto b = encode_value(v);
  // Append a tag 7 of 3 bytes: bump the tag count (last section) and add it.
  // Rebuild from scratch to keep the tags in order.
  txn_log_value no_tags = v;
  no_tags.previous_producer_id = no_producer_id;
  no_tags.next_producer_id = no_producer_id;
  no_tags.client_version = txn_version::tv0;
  no_tags.last_producer_epoch = no_producer_epoch;
  auto base = encode_value(no_tags);
  ASSERT_EQ(base.back(), 0);  // no tags
  base.back() = 1;
  base.push_back(7);
  base.push_back(3);
  base.insert(base.end(), {1, 2, 3});
  auto d = decode_value(base);
  ASSERT_TRUE(d.ok()) << d.err().message;
  EXPECT_EQ(*d, no_tags);
}

TEST(TxnRecords, MalformedInputIsAnErrorValue) {
  const auto good = encode_value(full_value());
  // Every truncation of a good value fails cleanly.
  for (size_t n = 0; n < good.size(); ++n) {
    auto d = decode_value(std::span<const uint8_t>(good.data(), n));
    EXPECT_FALSE(d.ok()) << n;
  }
  // Trailing bytes.
  auto longer = good;
  longer.push_back(0);
  EXPECT_EQ(decode_value(longer).code(), errc::corrupt_data);
  // A newer version is not ours to read.
  auto newer = good;
  newer[1] = 2;
  EXPECT_EQ(decode_value(newer).code(), errc::unsupported_format);
  auto negative = good;
  negative[0] = 0xFF;
  EXPECT_EQ(decode_value(negative).code(), errc::unsupported_format);
  // A state byte Kafka does not define.
  auto bad_state = good;
  bad_state[16] = 9;
  EXPECT_EQ(decode_value(bad_state).code(), errc::corrupt_data);
  // A known tag of the wrong size.
  txn_log_value v;
  v.producer_id = 1;
  v.producer_epoch = 0;
  v.state = txn_state::empty;
  auto b = encode_value(v);
  b.back() = 1;
  b.insert(b.end(), {0, 2, 0, 1});  // previous producer id in 2 bytes
  EXPECT_EQ(decode_value(b).code(), errc::corrupt_data);
  // A client transaction version Kafka does not define.
  b = encode_value(v);
  b.back() = 1;
  b.insert(b.end(), {2, 2, 0, 9});
  EXPECT_EQ(decode_value(b).code(), errc::corrupt_data);
  // An array count far beyond the bytes left.
  protocol::writer w;
  w.write_int16(0);
  w.write_int64(1);
  w.write_int16(0);
  w.write_int32(1);
  w.write_int8(1);
  w.write_int32(1'000'000'000);
  EXPECT_EQ(decode_value(bytes_of(w)).code(), errc::corrupt_data);
  // Keys.
  EXPECT_EQ(decode_key(std::vector<uint8_t>{0}).code(), errc::corrupt_data);
  EXPECT_EQ(decode_key(std::vector<uint8_t>{0, 1, 0, 1, 'x'}).code(), errc::unsupported_format);
  EXPECT_EQ(decode_key(std::vector<uint8_t>{0, 0, 0, 5, 'x'}).code(), errc::corrupt_data);
  EXPECT_EQ(decode_key(std::vector<uint8_t>{0, 0, 0xFF, 0xFF}).code(), errc::corrupt_data);
}

TEST(TxnRecords, RandomBytesNeverCrash) {
  uint32_t x = 12345;
  auto next = [&] {
    x = x * 1664525u + 1013904223u;
    return static_cast<uint8_t>(x >> 24);
  };
  const auto good = encode_value(full_value());
  int decoded = 0;
  for (int i = 0; i < 20'000; ++i) {
    auto b = good;
    const int flips = 1 + next() % 4;
    for (int f = 0; f < flips; ++f) b[next() % b.size()] = next();
    auto d = decode_value(b);
    if (d.ok()) ++decoded;
  }
  // Some mutations land in values that still decode (timestamps, ids); the
  // point is that none crashed.
  EXPECT_GT(decoded, 0);
}

}  // namespace
}  // namespace sluice::txn
