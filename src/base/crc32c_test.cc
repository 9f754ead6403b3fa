#include "base/crc32c.h"

#include <gtest/gtest.h>

#include <string>

namespace sluice {
namespace {

TEST(Crc32c, CheckValue) {
  // The standard check value of CRC-32C.
  const std::string s = "123456789";
  EXPECT_EQ(crc32c(s.data(), s.size()), 0xE3069283u);
}

TEST(Crc32c, EmptyIsZero) { EXPECT_EQ(crc32c("", 0), 0u); }

TEST(Crc32c, ExtendEqualsWhole) {
  const std::string s = "The quick brown fox jumps over the lazy dog";
  for (size_t cut = 0; cut <= s.size(); ++cut) {
    uint32_t a = crc32c(s.data(), cut);
    EXPECT_EQ(crc32c_extend(a, s.data() + cut, s.size() - cut), crc32c(s.data(), s.size()))
        << "cut at " << cut;
  }
}

}  // namespace
}  // namespace sluice
