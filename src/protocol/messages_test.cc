// Schema-wide tests: every message type at every version the codec
// supports, filled with random values by the generated fillers, must
// survive encode -> decode -> encode unchanged, must reject every strict
// prefix of its encoding, and must not crash on garbage. A failure prints
// the message, version and seed.

#include <gtest/gtest.h>

#include <random>

#include "protocol/frame.h"
#include "protocol/messages.h"
#include "protocol/messages_fill.h"

namespace sluice::protocol {
namespace {

std::vector<uint8_t> flat(writer&& w) {
  auto r = std::move(w).finish().flatten();
  SLUICE_ASSERT(r.ok(), "flatten failed");
  return std::move(r).value();
}

template <class T>
std::vector<uint8_t> encode_body(const T& m, int16_t v) {
  writer w;
  m.encode(w, v);
  return flat(std::move(w));
}

constexpr int iterations_per_version = 40;

template <class T>
void check_type(uint64_t seed_base, int* versions_checked) {
  for (int16_t v = T::min_version; v <= T::max_version; ++v) {
    ++*versions_checked;
    for (int it = 0; it < iterations_per_version; ++it) {
      const uint64_t seed = seed_base * 1000003 + static_cast<uint64_t>(v) * 1009 + static_cast<uint64_t>(it);
      SCOPED_TRACE(std::string(T::message_name) + " v" + std::to_string(v) + " seed " + std::to_string(seed));
      testing::fill_context c(seed);
      T a;
      testing::fill_random(a, c, v);
      const auto bytes = encode_body(a, v);

      T b;
      reader r(bytes);
      status s = b.decode(r, v);
      ASSERT_TRUE(s.ok()) << s.err().message;
      EXPECT_EQ(r.remaining(), 0u);
      ASSERT_TRUE(a == b);
      EXPECT_EQ(encode_body(b, v), bytes);

      // Every strict prefix must fail cleanly.
      if (it < 4) {
        for (size_t n = 0; n < bytes.size(); ++n) {
          T t;
          reader pr(std::span<const uint8_t>(bytes.data(), n));
          ASSERT_FALSE(t.decode(pr, v).ok()) << "prefix of " << n << " of " << bytes.size() << " bytes decoded";
        }
      }

      // An unknown tagged field in the top-level struct is skipped.
      if (v >= T::flexible_from) {
        T plain = a;
        testing::reset_tagged_fields(plain);
        auto tagged = encode_body(plain, v);
        ASSERT_EQ(tagged.back(), 0);  // the top-level tag section is empty
        tagged.back() = 1;            // now it holds one unknown tag
        for (uint8_t x : {uint8_t{0x63}, uint8_t{3}, uint8_t{0xaa}, uint8_t{0xbb}, uint8_t{0xcc}}) tagged.push_back(x);
        T u;
        reader ur(tagged);
        ASSERT_TRUE(u.decode(ur, v).ok());
        EXPECT_EQ(ur.remaining(), 0u);
        EXPECT_TRUE(u == plain);
      }
    }
  }
}

TEST(MessagesTest, RoundTripEveryTypeAndVersion) {
  int types = 0;
  int versions = 0;
  uint64_t seed = 1;
  for_each_message_type([&](auto tag) {
    using T = typename decltype(tag)::type;
    ++types;
    check_type<T>(seed++, &versions);
  });
  // Guards against the generator silently dropping messages.
  EXPECT_EQ(types, 106);
  std::printf("checked %d message types, %d type-versions\n", types, versions);
}

TEST(MessagesTest, GarbageNeverCrashes) {
  std::mt19937_64 rng(12345);
  for_each_message_type([&](auto tag) {
    using T = typename decltype(tag)::type;
    for (int16_t v = T::min_version; v <= T::max_version; ++v) {
      for (int it = 0; it < 200; ++it) {
        std::vector<uint8_t> junk(rng() % 64);
        for (auto& b : junk) b = static_cast<uint8_t>(rng() % 4 == 0 ? 0xff : rng() % 3);
        T t;
        reader r(junk);
        t.decode(r, v).ignore();
      }
    }
  });
}

TEST(MessagesTest, RequestFramesDecodeThroughTheDispatcher) {
  int checked = 0;
  for_each_message_type([&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (requires { T::api_key; } && std::string_view(T::message_name).ends_with("_request")) {
      for (int16_t v = T::min_version; v <= T::max_version; ++v) {
        testing::fill_context c(static_cast<uint64_t>(v) * 77 + T::api_key);
        T a;
        testing::fill_random(a, c, v);
        auto frame = encode_request(42, v, a, std::string("client-1")).flatten();
        ASSERT_TRUE(frame.ok());
        auto bytes = std::span<const uint8_t>(*frame).subspan(4);
        reader r(bytes);
        auto hdr = decode_request_header(r);
        ASSERT_TRUE(hdr.ok()) << hdr.err().message;
        EXPECT_TRUE(hdr->supported);
        EXPECT_EQ(hdr->header.request_api_key, T::api_key);
        EXPECT_EQ(hdr->header.request_api_version, v);
        EXPECT_EQ(hdr->header.correlation_id, 42);
        EXPECT_EQ(hdr->header.client_id, std::optional<std::string>("client-1"));
        EXPECT_EQ(hdr->header_version, v >= T::flexible_from ? 2 : 1);
        auto body = decode_request_body(T::api_key, v, r);
        ASSERT_TRUE(body.ok()) << T::message_name << " v" << v << ": " << body.err().message;
        ASSERT_TRUE(std::holds_alternative<T>(*body));
        EXPECT_TRUE(std::get<T>(*body) == a);
        ++checked;
      }
      // One past the top version is refused as unsupported, not malformed.
      reader empty(std::span<const uint8_t>{});
      auto too_high = decode_request_body(T::api_key, T::max_version + 1, empty);
      ASSERT_FALSE(too_high.ok());
      EXPECT_EQ(too_high.code(), errc::unsupported_version);
    }
  });
  EXPECT_GT(checked, 90);
}

TEST(MessagesTest, SupportedTableMatchesTypes) {
  // Every row names a request and a response type with the same range.
  for (const api_support& a : supported_api_table) {
    int found = 0;
    for_each_message_type([&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (requires { T::api_key; }) {
        if (T::api_key == a.api_key) {
          ++found;
          EXPECT_EQ(T::min_version, a.min_version);
          EXPECT_EQ(T::max_version, a.max_version);
          EXPECT_EQ(T::flexible_from, a.flexible_from);
        }
      }
    });
    EXPECT_EQ(found, 2) << a.name;
  }
}

}  // namespace
}  // namespace sluice::protocol
