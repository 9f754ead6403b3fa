// Producer ids: unique across restarts from the local file, blocks from a
// cluster's source, and try_next, which never reserves (an I/O thread's
// path: a block from etcd is reserved on the forwarding thread instead).

#include "metadata/producer_ids.h"

#include <gtest/gtest.h>

#include <set>

#include "storage/test_util.h"

namespace sluice::cluster {
namespace {

using storage::testing::temp_dir;

TEST(ProducerIds, LocalBlocksSurviveARestartWithoutHandingOutAnIdTwice) {
  temp_dir dir;
  const std::string path = dir.sub("producer_ids");
  std::set<int64_t> seen;
  {
    auto a = producer_id_allocator::open(io::filesystem::posix(), path);
    ASSERT_TRUE(a.ok()) << a.err().message;
    for (int i = 0; i < 1500; ++i) {
      auto id = (*a)->next();
      ASSERT_TRUE(id.ok());
      EXPECT_TRUE(seen.insert(*id).second) << *id;
    }
  }
  // A restart (or a crash: the block's end was durable before its first id)
  // starts after everything reserved.
  auto b = producer_id_allocator::open(io::filesystem::posix(), path);
  ASSERT_TRUE(b.ok());
  auto id = (*b)->next();
  ASSERT_TRUE(id.ok());
  EXPECT_GT(*id, *seen.rbegin());
}

TEST(ProducerIds, TryNextServesTheCurrentBlockAndNeverAsksForAnother) {
  temp_dir dir;
  auto a = producer_id_allocator::open(io::filesystem::posix(), dir.sub("producer_ids"));
  ASSERT_TRUE(a.ok());
  int asked = 0;
  int64_t next_block = 5000;
  (*a)->set_block_source([&](int64_t count) -> result<int64_t> {
    ++asked;
    EXPECT_EQ(count, producer_id_allocator::block_size);
    const int64_t first = next_block;
    next_block += count;
    return first;
  });
  // No block yet: try_next has nothing and asks nobody.
  EXPECT_FALSE((*a)->try_next().has_value());
  EXPECT_EQ(asked, 0);
  auto first = (*a)->next();
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(*first, 5000);
  EXPECT_EQ(asked, 1);
  for (int64_t i = 1; i < producer_id_allocator::block_size; ++i) {
    auto id = (*a)->try_next();
    ASSERT_TRUE(id.has_value());
    EXPECT_EQ(*id, 5000 + i);
  }
  EXPECT_FALSE((*a)->try_next().has_value());  // the block is used up
  EXPECT_EQ(asked, 1);
  auto more = (*a)->next();
  ASSERT_TRUE(more.ok());
  EXPECT_EQ(*more, 6000);
  EXPECT_EQ(asked, 2);
}

TEST(ProducerIds, AFailedBlockReservationIsAnErrorAndTheNextCallTriesAgain) {
  temp_dir dir;
  auto a = producer_id_allocator::open(io::filesystem::posix(), dir.sub("producer_ids"));
  ASSERT_TRUE(a.ok());
  bool up = false;
  (*a)->set_block_source([&](int64_t) -> result<int64_t> {
    if (!up) return error{errc::unavailable, "etcd has no quorum"};
    return int64_t{0};
  });
  auto id = (*a)->next();
  EXPECT_EQ(id.code(), errc::unavailable);
  EXPECT_FALSE((*a)->try_next().has_value());
  up = true;
  id = (*a)->next();
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(*id, 0);
}

}  // namespace
}  // namespace sluice::cluster
