// The aborted-transaction index: lookups over the file (binary search, the
// last-stable-offset stop), truncation, dropping below the log start, and
// a torn last entry cut at open.

#include "storage/aborted_index.h"

#include <gtest/gtest.h>

#include "storage/test_util.h"

namespace sluice::storage {
namespace {

aborted_txn txn(int64_t pid, int64_t first, int64_t last, int64_t lso) {
  return {pid, offset(first), offset(last), offset(lso)};
}

class AbortedIndexTest : public ::testing::Test {
 protected:
  std::unique_ptr<aborted_index> open() {
    auto x = aborted_index::open(io::filesystem::posix(), path());
    EXPECT_TRUE(x.ok()) << x.err().message;
    return x.ok() ? std::move(x).value() : nullptr;
  }
  std::string path() const { return tmp_.sub(aborted_index::file_name); }
  testing::temp_dir tmp_;
};

TEST_F(AbortedIndexTest, CollectsWhatOverlapsTheRange) {
  auto x = open();
  ASSERT_NE(x, nullptr);
  // Producer 1 aborted [10, 20], producer 2 [15, 30] (LSO 31 after it),
  // producer 3 [40, 50].
  ASSERT_TRUE(x->append(txn(1, 10, 20, 15)).ok());
  ASSERT_TRUE(x->append(txn(2, 15, 30, 31)).ok());
  ASSERT_TRUE(x->append(txn(3, 40, 50, 51)).ok());
  EXPECT_EQ(x->append(txn(4, 1, 50, 51)).code(), errc::invalid_argument) << "markers only go up";

  auto all = x->collect(offset(0), offset(100), 100);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 3u);
  // A fetch of [21, 35): producer 1's marker is below it; producer 2
  // overlaps; producer 2's last stable offset (31) is below 35, so the scan
  // goes on, and producer 3 began at 40, past the range.
  auto mid = x->collect(offset(21), offset(35), 100);
  ASSERT_TRUE(mid.ok());
  ASSERT_EQ(mid->size(), 1u);
  EXPECT_EQ((*mid)[0].producer_id, 2);
  // A fetch of [0, 12): only producer 1 began below 12, and its last stable
  // offset (15) stops the scan.
  auto early = x->collect(offset(0), offset(12), 100);
  ASSERT_TRUE(early.ok());
  ASSERT_EQ(early->size(), 1u);
  EXPECT_EQ((*early)[0].producer_id, 1);
  // Past every marker: nothing, without reading the file.
  EXPECT_TRUE(x->collect(offset(51), offset(100), 100)->empty());
  // At most `max`.
  EXPECT_EQ(x->collect(offset(0), offset(100), 2)->size(), 2u);
}

TEST_F(AbortedIndexTest, TruncationAndTheLogStart) {
  auto x = open();
  ASSERT_NE(x, nullptr);
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(x->append(txn(i, i * 10, i * 10 + 5, i * 10 + 6)).ok());
  ASSERT_TRUE(x->truncate_from(offset(75)).ok());
  EXPECT_EQ(x->size(), 7u);  // markers 5 .. 65 stay; 75, 85 and 95 go
  EXPECT_EQ(x->last_marker(), offset(65));
  ASSERT_TRUE(x->append(txn(99, 70, 72, 73)).ok()) << "appends continue after the cut";
  // Three of eight below 30: fewer than half, kept on disk but never collected.
  ASSERT_TRUE(x->drop_below(offset(30)).ok());
  EXPECT_EQ(x->size(), 8u);
  auto from30 = x->collect(offset(30), offset(1000), 100);
  ASSERT_TRUE(from30.ok());
  EXPECT_EQ(from30->front().producer_id, 3);
  // Six of eight below 60: the file is rewritten without them.
  ASSERT_TRUE(x->drop_below(offset(60)).ok());
  EXPECT_EQ(x->size(), 2u);
  x.reset();
  auto y = open();
  ASSERT_NE(y, nullptr);
  EXPECT_EQ(y->size(), 2u);
  EXPECT_EQ(y->last_marker(), offset(72));
  EXPECT_EQ(y->collect(offset(0), offset(1000), 100)->front().producer_id, 6);
}

TEST_F(AbortedIndexTest, ATornLastEntryIsCutAtOpen) {
  {
    auto x = open();
    ASSERT_NE(x, nullptr);
    ASSERT_TRUE(x->append(txn(1, 0, 5, 6)).ok());
    ASSERT_TRUE(x->append(txn(2, 7, 9, 10)).ok());
    ASSERT_TRUE(x->sync().ok());
  }
  {
    // Half of a third entry, as a crash mid-write leaves it.
    auto f = io::filesystem::posix().open(path(), io::open_mode::read_write);
    ASSERT_TRUE(f.ok());
    std::vector<std::byte> half(aborted_index::entry_bytes / 2, std::byte{0x5a});
    ASSERT_TRUE((*f)->pwrite(half, 2 * aborted_index::entry_bytes).ok());
  }
  auto x = open();
  ASSERT_NE(x, nullptr);
  EXPECT_EQ(x->size(), 2u);
  EXPECT_EQ(x->cut_entries(), 1u);
  EXPECT_EQ(x->last_marker(), offset(9));
  {
    // A whole entry with a bad checksum is cut too.
    auto f = io::filesystem::posix().open(path(), io::open_mode::read_write);
    ASSERT_TRUE(f.ok());
    std::vector<std::byte> junk(aborted_index::entry_bytes, std::byte{0x11});
    ASSERT_TRUE((*f)->pwrite(junk, aborted_index::entry_bytes).ok());
  }
  x.reset();
  x = open();
  ASSERT_NE(x, nullptr);
  EXPECT_EQ(x->size(), 1u);
}

}  // namespace
}  // namespace sluice::storage
