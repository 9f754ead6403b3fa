#include "base/result.h"

#include <gtest/gtest.h>

#include "base/endian.h"
#include "base/types.h"

namespace sluice {
namespace {

result<int> half(int x) {
  if (x % 2) return error{errc::invalid_argument, "odd"};
  return x / 2;
}

result<int> quarter(int x) {
  SLUICE_ASSIGN_OR_RETURN(int h, half(x));
  return half(h);
}

status check_even(int x) {
  SLUICE_TRY(half(x));
  return {};
}

TEST(Result, ValueAndError) {
  EXPECT_EQ(*half(4), 2);
  EXPECT_EQ(half(3).code(), errc::invalid_argument);
  EXPECT_EQ(half(3).err().message, "odd");
}

TEST(Result, Propagation) {
  EXPECT_EQ(*quarter(8), 2);
  EXPECT_EQ(quarter(6).code(), errc::invalid_argument);
  EXPECT_TRUE(check_even(2).ok());
  EXPECT_EQ(check_even(1).code(), errc::invalid_argument);
}

TEST(Endian, RoundTrip) {
  unsigned char b[8];
  store_be<int32_t>(b, -2);
  EXPECT_EQ(b[0], 0xff);
  EXPECT_EQ(b[3], 0xfe);
  EXPECT_EQ(load_be<int32_t>(b), -2);
  store_be<uint64_t>(b, 0x0102030405060708ull);
  EXPECT_EQ(b[0], 1);
  EXPECT_EQ(b[7], 8);
  EXPECT_EQ(load_be<uint64_t>(b), 0x0102030405060708ull);
}

TEST(Types, OffsetArithmetic) {
  offset a(10);
  offset b = a + 5;
  EXPECT_EQ(b - a, 5);
  EXPECT_LT(a, b);
  ++a;
  EXPECT_EQ(a.value(), 11);
}

}  // namespace
}  // namespace sluice
