#include "base/percent_encoding.h"

#include <gtest/gtest.h>

namespace sluice {
namespace {

TEST(PercentEncoding, KeepsPlainNamesAndEncodesTheRest) {
  EXPECT_EQ(percent_encode("share-orders_2.v1~x"), "share-orders_2.v1~x");
  EXPECT_EQ(percent_encode("a b/c=d%"), "a%20b%2Fc%3Dd%25");
  EXPECT_EQ(percent_encode(std::string("\n\0\xff", 3)), "%0A%00%FF");
  EXPECT_EQ(percent_encode(""), "");
}

TEST(PercentEncoding, RoundTripsEveryByte) {
  std::string all;
  for (int c = 0; c < 256; ++c) all += static_cast<char>(c);
  const std::string enc = percent_encode(all);
  for (char c : enc) EXPECT_TRUE(c > ' ' && c <= '~') << static_cast<int>(c);
  EXPECT_EQ(percent_decode(enc), all);
}

TEST(PercentEncoding, RefusesAnythingButTheOneEncoding) {
  EXPECT_EQ(percent_decode("a%2"), std::nullopt);    // cut short
  EXPECT_EQ(percent_decode("a%"), std::nullopt);
  EXPECT_EQ(percent_decode("a%2f"), std::nullopt);   // lower-case hex
  EXPECT_EQ(percent_decode("a%41"), std::nullopt);   // 'A' needs no encoding
  EXPECT_EQ(percent_decode("a b"), std::nullopt);    // a space must be encoded
  EXPECT_EQ(percent_decode("a/b"), std::nullopt);
  EXPECT_EQ(percent_decode("%zz"), std::nullopt);
  EXPECT_EQ(percent_decode("a%2Fb"), "a/b");
}

}  // namespace
}  // namespace sluice
