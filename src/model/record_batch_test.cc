#include "model/record_batch.h"

#include <gtest/gtest.h>

#include <vector>

#include "base/crc32c.h"

namespace sluice::model {
namespace {

// A header with every field set apart from its neighbours, over a payload
// of `payload_bytes` zero bytes, with a correct CRC.
std::vector<std::byte> sample(size_t payload_bytes = 5) {
  batch::header h;
  h.base_offset = offset(0x0102030405060708);
  h.batch_length = static_cast<int32_t>(batch::header_bytes + payload_bytes - batch::length_field_end);
  h.partition_leader_epoch = 9;
  h.attributes = attr::make(compression::lz4, timestamp_type::log_append_time, true, false, true);
  h.last_offset_delta = 2;
  h.base_timestamp = 1'700'000'000'000;
  h.max_timestamp = 1'700'000'000'002;
  h.producer_id = 77;
  h.producer_epoch = 3;
  h.base_sequence = 11;
  h.records_count = 3;
  std::vector<std::byte> b(batch::header_bytes + payload_bytes);
  batch::write(b.data(), h);
  batch::update_crc(b);
  return b;
}

TEST(RecordBatchModel, WriteAndParseAgreeFieldByField) {
  const auto b = sample();
  const batch::header h = batch::parse(b.data());
  EXPECT_EQ(h.base_offset, offset(0x0102030405060708));
  EXPECT_EQ(h.size_bytes(), b.size());
  EXPECT_EQ(h.partition_leader_epoch, 9);
  EXPECT_EQ(h.magic, batch::current_magic);
  EXPECT_EQ(h.codec(), compression::lz4);
  EXPECT_EQ(h.ts_type(), timestamp_type::log_append_time);
  EXPECT_TRUE(h.is_transactional());
  EXPECT_FALSE(h.is_control());
  EXPECT_TRUE(h.has_delete_horizon());
  EXPECT_EQ(h.last_offset(), offset(0x0102030405060708 + 2));
  EXPECT_EQ(h.max_timestamp, 1'700'000'000'002);
  EXPECT_EQ(h.producer_id, 77);
  EXPECT_EQ(h.producer_epoch, 3);
  EXPECT_EQ(h.base_sequence, 11);
  EXPECT_EQ(h.records_count, 3);
  // CRC-32C of attributes..end, computed independently here.
  EXPECT_EQ(h.crc, crc32c(b.data() + batch::attributes_pos, b.size() - batch::attributes_pos));
  EXPECT_TRUE(batch::crc_matches(std::span<const std::byte>(b)));
  EXPECT_TRUE(batch::check_crc(h, b).ok());
  EXPECT_TRUE(batch::check(h, b.size(), batch::strictness::leader).ok());
}

TEST(RecordBatchModel, KafkasAttributeBits) {
  // Kafka's DefaultRecordBatch: codec in bits 0-2, then timestamp type,
  // transactional, control, delete horizon.
  EXPECT_EQ(attr::make(compression::zstd, timestamp_type::create_time, false, false, false), 4);
  EXPECT_EQ(attr::make(compression::none, timestamp_type::log_append_time, false, false, false), 8);
  EXPECT_EQ(attr::make(compression::none, timestamp_type::create_time, true, false, false), 16);
  EXPECT_EQ(attr::make(compression::none, timestamp_type::create_time, false, true, false), 32);
  EXPECT_EQ(attr::make(compression::none, timestamp_type::create_time, false, false, true), 64);
}

TEST(RecordBatchModel, ReadHeaderNeedsOnlyTheHeader) {
  const auto b = sample(100);
  auto h = batch::read_header(std::span<const std::byte>(b).first(batch::header_bytes));
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->size_bytes(), b.size());
  EXPECT_EQ(batch::read_header(std::span<const std::byte>(b).first(batch::header_bytes - 1)).code(),
            errc::corrupt_data);
  auto old = b;
  old[batch::magic_pos] = std::byte{1};
  EXPECT_EQ(batch::read_header(std::span<const std::byte>(old)).code(), errc::unsupported_format);
  auto lying = b;
  batch::header lh = batch::parse(lying.data());
  lh.records_count = 4;  // more records than offsets
  batch::write(lying.data(), lh);
  EXPECT_EQ(batch::read_header(std::span<const std::byte>(lying)).code(), errc::corrupt_data);
}

TEST(RecordBatchModel, ChangingACoveredFieldNeedsANewCrc) {
  auto b = sample();
  batch::header h = batch::parse(b.data());
  h.max_timestamp = -1;
  batch::write(b.data(), h);
  EXPECT_FALSE(batch::crc_matches(std::span<const std::byte>(b)));
  batch::update_crc(b);
  EXPECT_TRUE(batch::crc_matches(std::span<const std::byte>(b)));
  // The stamped fields lie outside the CRC.
  batch::stamp(b.data(), offset(5), leader_epoch(6));
  EXPECT_TRUE(batch::crc_matches(std::span<const std::byte>(b)));
}

// A Fetch answer may end inside a batch: the whole batches in front are
// checked (CRC included) and their headers handed out once; the cut one is
// left for the next fetch, but a whole batch that fails a check, or a cut
// one whose header is unsound, is an error rather than a silent stop.
TEST(RecordBatchModel, CheckWholePrefixChecksWholeBatchesAndLeavesACutOne) {
  auto one = sample(20);
  batch::header h = batch::parse(one.data());
  h.base_offset = offset(0);
  batch::write(one.data(), h);
  auto two = sample(30);
  batch::header h2 = batch::parse(two.data());
  h2.base_offset = offset(3);
  batch::write(two.data(), h2);
  std::vector<std::byte> bytes = one;
  bytes.insert(bytes.end(), two.begin(), two.end());
  const auto all = std::span<const std::byte>(bytes);

  std::vector<batch::header> hs;
  auto n = batch::check_whole_prefix(all, batch::strictness::stored, hs);
  ASSERT_TRUE(n.ok()) << n.err().message;
  EXPECT_EQ(*n, bytes.size());
  ASSERT_EQ(hs.size(), 2u);
  EXPECT_EQ(hs[1].base_offset, offset(3));
  // Cut inside the second batch, then inside the first one's header.
  hs.clear();
  n = batch::check_whole_prefix(all.first(one.size() + batch::header_bytes + 3), batch::strictness::stored, hs);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, one.size());
  EXPECT_EQ(hs.size(), 1u);
  hs.clear();
  n = batch::check_whole_prefix(all.first(batch::header_bytes - 1), batch::strictness::stored, hs);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 0u);
  EXPECT_TRUE(hs.empty());
  // A whole batch with a bad CRC.
  auto bad = bytes;
  bad[one.size() - 1] ^= std::byte{1};
  hs.clear();
  EXPECT_EQ(batch::check_whole_prefix(std::span<const std::byte>(bad), batch::strictness::stored, hs).code(),
            errc::corrupt_data);
  // A cut batch whose header is unsound (an old magic).
  auto old = bytes;
  old[one.size() + batch::magic_pos] = std::byte{1};
  hs.clear();
  EXPECT_EQ(batch::check_whole_prefix(std::span<const std::byte>(old).first(one.size() + batch::header_bytes),
                                      batch::strictness::stored, hs)
                .code(),
            errc::unsupported_format);
}

}  // namespace
}  // namespace sluice::model
