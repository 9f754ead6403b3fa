#include "metrics/metrics.h"

#include <gtest/gtest.h>

namespace sluice::metrics {
namespace {

std::string_view name_of(int16_t k) { return k == 0 ? "produce" : "other"; }

TEST(Histogram, CumulativeBucketsSumAndCount) {
  histogram h;
  h.record_us(50);      // 0.05 ms -> first bucket
  h.record_us(3000);    // 3 ms -> le 5 ms
  h.record_us(20'000'000);  // 20 s -> +Inf
  std::string out;
  h.render(out, "lat", "api=\"x\"");
  EXPECT_NE(out.find("lat_bucket{api=\"x\",le=\"0.0001\"} 1\n"), std::string::npos) << out;
  EXPECT_NE(out.find("lat_bucket{api=\"x\",le=\"0.005\"} 2\n"), std::string::npos) << out;
  EXPECT_NE(out.find("lat_bucket{api=\"x\",le=\"+Inf\"} 3\n"), std::string::npos) << out;
  EXPECT_NE(out.find("lat_count{api=\"x\"} 3\n"), std::string::npos) << out;
  EXPECT_NE(out.find("lat_sum{api=\"x\"} 20.00305\n"), std::string::npos) << out;
  EXPECT_DOUBLE_EQ(h.quantile_upper_ms(0.5), 5);
}

TEST(RequestMetrics, OnlyApisWithTrafficAreRendered) {
  request_metrics m;
  m.on_request(0, 100);
  m.on_response(0, 40, 1500);
  m.on_request(-3, 1);   // ignored, never crashes
  m.on_request(5000, 1);  // ignored
  std::string out;
  m.render(out, name_of);
  EXPECT_NE(out.find("sluice_requests_total{api=\"produce\"} 1\n"), std::string::npos) << out;
  EXPECT_NE(out.find("sluice_request_bytes_total{api=\"produce\"} 100\n"), std::string::npos);
  EXPECT_NE(out.find("sluice_response_bytes_total{api=\"produce\"} 40\n"), std::string::npos);
  EXPECT_EQ(out.find("other"), std::string::npos);
}

TEST(Text, LabelEscaping) { EXPECT_EQ(label_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd"); }

}  // namespace
}  // namespace sluice::metrics

#include <httplib.h>

#include "metrics/http_endpoint.h"

namespace sluice::metrics {
namespace {

TEST(HttpEndpoint, ServesMetricsAndHealth) {
  int scrapes = 0;
  http_endpoint ep([&] {
    ++scrapes;
    return std::string("sluice_up 1\n");
  });
  ASSERT_TRUE(ep.start("127.0.0.1", 0).ok());
  ASSERT_NE(ep.port(), 0);
  httplib::Client c("127.0.0.1", ep.port());
  auto m = c.Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->status, 200);
  EXPECT_EQ(m->body, "sluice_up 1\n");
  auto h = c.Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  auto missing = c.Get("/nope");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  ep.stop();
  EXPECT_EQ(scrapes, 1);
}

}  // namespace
}  // namespace sluice::metrics
