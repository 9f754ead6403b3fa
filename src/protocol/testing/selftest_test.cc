// Tests of the generator itself over testing/selftest.schema, which uses
// every type and option of the schema language.

#include <gtest/gtest.h>

#include "protocol/selftest_messages.h"
#include "protocol/selftest_messages_fill.h"

namespace sluice::protocol::selftest {
namespace {

using bytes = std::vector<uint8_t>;

bytes encode(const codec_selftest& m, int16_t v) {
  writer w;
  m.encode(w, v);
  auto r = std::move(w).finish().flatten();
  SLUICE_ASSERT(r.ok(), "flatten");
  return *r;
}

TEST(GeneratorSelfTest, RoundTripAllVersions) {
  for (int16_t v = codec_selftest::min_version; v <= codec_selftest::max_version; ++v) {
    for (uint64_t seed = 0; seed < 300; ++seed) {
      SCOPED_TRACE("v" + std::to_string(v) + " seed " + std::to_string(seed));
      sluice::protocol::testing::fill_context c(seed);
      codec_selftest a;
      testing::fill_random(a, c, v);
      const bytes wire = encode(a, v);
      codec_selftest b;
      reader r(wire);
      ASSERT_TRUE(b.decode(r, v).ok()) << r.to_status().err().message;
      EXPECT_EQ(r.remaining(), 0u);
      ASSERT_TRUE(a == b);
      for (size_t n = 0; n < wire.size(); ++n) {
        codec_selftest t;
        reader pr(std::span<const uint8_t>(wire.data(), n));
        ASSERT_FALSE(t.decode(pr, v).ok()) << n;
      }
    }
  }
}

TEST(GeneratorSelfTest, FlexibleBytesByHand) {
  codec_selftest m;
  m.flag = true;
  m.small = -1;
  m.ratio = 1.5;
  m.port = 65535;
  m.count = 4'000'000'000u;
  for (uint8_t i = 0; i < 16; ++i) m.id[i] = i;
  m.name = "n";
  m.maybe_name = std::nullopt;
  m.blob = {9};
  m.maybe_blob = std::nullopt;
  m.origin = {1, 2};
  m.maybe_point = std::nullopt;
  m.maybe_points = std::nullopt;
  m.legacy_name = "L";
  m.tagged_text = "t";
  m.tagged_count = 7;  // the default: not written
  const bytes expect = {
      0x01, 0xff,                                      // flag, small
      0x3f, 0xf8, 0, 0, 0, 0, 0, 0,                    // ratio 1.5
      0xff, 0xff,                                      // port
      0xee, 0x6b, 0x28, 0x00,                          // count
      0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,  // id
      0x02, 'n',                                       // name
      0x00,                                            // maybe_name: null
      0x02, 9,                                         // blob
      0x00,                                            // maybe_blob: null
      0, 0, 0, 1, 0, 0, 0, 2, 0x00,                    // origin, its tag section
      0xff,                                            // maybe_point: null marker
      0x01,                                            // points: empty
      0x00,                                            // maybe_points: null
      0x01,                                            // numbers: empty
      0x01,                                            // names: empty
      0x00,                                            // records: null
      0x00, 0x01, 'L',                                 // legacy_name: classic string
      0x01, 0x00, 0x02, 0x02, 't',                     // one tag: 0, 2 bytes, "t"
  };
  EXPECT_EQ(encode(m, 2), expect);

  // A present nullable struct carries marker 1; a non-default tagged struct
  // and count are written in ascending tag order.
  m.maybe_point = codec_selftest::point{5, 6};
  m.tagged_point = codec_selftest::point{0, 3};
  m.tagged_count = 8;
  const bytes wire = encode(m, 2);
  codec_selftest d;
  reader r(wire);
  ASSERT_TRUE(d.decode(r, 2).ok());
  EXPECT_EQ(d, m);
  const bytes tail = {0x03,                                     // three tags
                      0x00, 0x02, 0x02, 't',                    // tag 0
                      0x01, 0x09, 0, 0, 0, 0, 0, 0, 0, 3, 0,    // tag 1: point{0,3} + tags
                      0x05, 0x04, 0, 0, 0, 8};                  // tag 5: 8
  ASSERT_GE(wire.size(), tail.size());
  EXPECT_EQ(bytes(wire.end() - static_cast<ptrdiff_t>(tail.size()), wire.end()), tail);
}

TEST(GeneratorSelfTest, NullWhereNotNullableIsMalformed) {
  // v0: maybe_name is not nullable yet; a -1 length there is an error.
  codec_selftest m;
  bytes wire = encode(m, 0);
  // flag, small, ratio(8), port(2), name(2) -> maybe_name length at byte 14.
  ASSERT_EQ(wire[14], 0);
  wire[14] = 0xff;
  wire[15] = 0xff;
  codec_selftest d;
  reader r(wire);
  status s = d.decode(r, 0);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), errc::malformed);
  EXPECT_NE(s.err().message.find("not nullable"), std::string::npos);
}

}  // namespace
}  // namespace sluice::protocol::selftest
