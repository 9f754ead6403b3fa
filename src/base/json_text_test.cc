#include "base/json_text.h"

#include <gtest/gtest.h>

namespace sluice {
namespace {

std::string escaped(std::string_view s) {
  std::string out;
  append_json_escaped(out, s);
  return out;
}

TEST(JsonText, EscapesQuotesBackslashesAndControlCharacters) {
  EXPECT_EQ(escaped("plain text"), "plain text");
  EXPECT_EQ(escaped("a\"b\\c"), "a\\\"b\\\\c");
  EXPECT_EQ(escaped("\n\r\t"), "\\n\\r\\t");
  EXPECT_EQ(escaped(std::string("\0\x1f", 2)), "\\u0000\\u001f");
  EXPECT_EQ(escaped(""), "");
}

TEST(JsonText, CopiesWellFormedUtf8AndReplacesEveryOtherByte) {
  EXPECT_EQ(escaped("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"), "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
  const std::string fffd = "\xef\xbf\xbd";
  EXPECT_EQ(escaped("\xff"), fffd);
  EXPECT_EQ(escaped("\xc0\xaf"), fffd + fffd);  // an overlong '/'
  EXPECT_EQ(escaped("\xed\xa0\x80"), fffd + fffd + fffd);  // a surrogate
  EXPECT_EQ(escaped("a\xc3"), "a" + fffd);  // cut short
}

}  // namespace
}  // namespace sluice
