#include "base/java_hash.h"

#include <string>

#include <gtest/gtest.h>

namespace sluice {
namespace {

TEST(JavaHash, MatchesJavaStringHashCode) {
  EXPECT_EQ(java_string_hash(""), 0);
  EXPECT_EQ(java_string_hash("abc"), 96354);
  EXPECT_EQ(java_string_hash("hello"), 99162322);
  // Known to hash to Integer.MIN_VALUE in Java; Kafka's Utils.abs maps it to 0.
  EXPECT_EQ(java_string_hash("polygenelubricants"), INT32_MIN);
  EXPECT_EQ(java_hash_partition("polygenelubricants", 50), 0);
  // Non-ASCII counts UTF-16 code units: U+00E9 is one, U+1F600 a surrogate pair.
  EXPECT_EQ(java_string_hash("\xC3\xA9"), 0xE9);
  EXPECT_EQ(java_string_hash("\xF0\x9F\x98\x80"), 0xD83D * 31 + 0xDE00);
  // Invalid UTF-8 counts one unit per byte.
  EXPECT_EQ(java_string_hash("\xFF"), 0xFF);
}

TEST(JavaHash, PartitionIsAbsModulo) {
  // Negative hashes are made positive before the modulo.
  int negatives = 0;
  for (int i = 0; i < 1000; ++i) {
    const std::string id = "transactional-id-" + std::to_string(i);
    const int32_t h = java_string_hash(id);
    const int32_t p = java_hash_partition(id, 50);
    EXPECT_GE(p, 0);
    EXPECT_LT(p, 50);
    if (h < 0 && h != INT32_MIN) {
      ++negatives;
      EXPECT_EQ(java_hash_partition(id, 7), (-h) % 7);
    } else if (h >= 0) {
      EXPECT_EQ(java_hash_partition(id, 7), h % 7);
    }
  }
  // The negative branch is exercised (90 of these ids hash below zero).
  EXPECT_GT(negatives, 50);
}

}  // namespace
}  // namespace sluice
