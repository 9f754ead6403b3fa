// A partition's produce path on what it writes into a batch header: the
// max timestamp is the largest record timestamp whatever the client put
// there, and the CRC is computed again only for a batch whose header
// changed.

#include "partition/partition.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "config/dynamic.h"
#include "metadata/test_managers.h"
#include "model/record_batch.h"
#include "storage/batch_builder.h"
#include "storage/test_util.h"

namespace sluice::cluster {
namespace {

namespace batch = model::batch;

constexpr int64_t kBaseTs = 1'700'000'000'000;

class PartitionAppend : public ::testing::Test {
 protected:
  void SetUp() override {
    config::config_map m;
    m.set("log.dirs", std::vector<std::string>{tmp_.path()});
    auto cfg = config::make_broker_config(std::move(m));
    ASSERT_TRUE(cfg.ok()) << cfg.err().message;
    m_ = testing::open_managers(io::filesystem::posix(), tmp_.sub("logs"), *cfg);
    ASSERT_NE(m_.partitions, nullptr);
    ASSERT_FALSE(m_.partitions->create_topic("t", 1, 1, {}, false));
    part_ = m_.partitions->get("t", 0);
    ASSERT_NE(part_, nullptr);
  }
  void TearDown() override {
    if (m_.partitions) m_.partitions->shutdown();
    m_.partitions.reset();
    if (m_.logs) m_.logs->shutdown().ignore();
  }

  // Three records at kBaseTs, +10, +20, with `client_max_ts` in the header
  // and a CRC that matches it, as a client sends them.
  static std::vector<std::byte> sent(int64_t client_max_ts) {
    storage::batch_spec spec;
    spec.records = 3;
    spec.base_timestamp = kBaseTs;
    spec.timestamp_step = 10;
    auto b = storage::build_batch(spec);
    batch::header h = batch::parse(b.data());
    h.max_timestamp = client_max_ts;
    batch::write(b.data(), h);
    batch::update_crc(b);
    return b;
  }

  // Appends a copy of `b` and returns what the log stored.
  std::vector<std::byte> append_and_read(const std::vector<std::byte>& b) {
    auto copy = b;
    auto out = part_->append(copy, kBaseTs + 1000);
    EXPECT_EQ(out.error, errc::ok) << out.message;
    auto stored = part_->read_bytes(out.base, 1 << 20);
    EXPECT_TRUE(stored.ok());
    if (!stored.ok()) return {};
    EXPECT_EQ(stored->size(), b.size());
    return std::move(stored).value();
  }

  storage::testing::temp_dir tmp_;
  testing::managers m_;
  std::shared_ptr<partition> part_;
};

TEST_F(PartitionAppend, AnUnsetOrWrongMaxTimestampIsTheLargestRecordTimestamp) {
  // -1 is what clients that leave the field unset write.
  for (int64_t client_max : {int64_t{-1}, int64_t{0}, kBaseTs + 5, kBaseTs + 99'999}) {
    SCOPED_TRACE(client_max);
    const auto stored = append_and_read(sent(client_max));
    ASSERT_GE(stored.size(), batch::header_bytes);
    const batch::header h = batch::parse(stored.data());
    EXPECT_EQ(h.max_timestamp, kBaseTs + 20);
    EXPECT_EQ(h.ts_type(), model::timestamp_type::create_time);
    // The rewritten field is inside the CRC'd range: the CRC was redone.
    EXPECT_TRUE(batch::check_crc(h, stored).ok());
  }
}

TEST_F(PartitionAppend, ABatchWithTheRightMaxTimestampKeepsItsBytesAndCrc) {
  const auto b = sent(kBaseTs + 20);
  const auto stored = append_and_read(b);
  ASSERT_EQ(stored.size(), b.size());
  // Only the broker-stamped fields before the CRC differ.
  EXPECT_TRUE(std::equal(stored.begin() + batch::crc_pos, stored.end(), b.begin() + batch::crc_pos));
}

}  // namespace
}  // namespace sluice::cluster
