// render_metrics on its own sources, without a broker: the sections that
// need nothing but their source.

#include "broker/metrics_view.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "io/fault_fs.h"

namespace sluice::broker {
namespace {

// The sample line `name value` (no labels), or nullopt.
std::optional<double> value_of(const std::string& text, const std::string& name) {
  const std::string at = "\n" + name + " ";
  const auto pos = text.find(at);
  if (pos == std::string::npos) return std::nullopt;
  return std::stod(text.substr(pos + at.size()));
}

TEST(MetricsViewTest, TheLogDirectorysFileSystemSizeAndUsableBytes) {
  io::fault_fs fs(io::filesystem::posix());
  fs.set_space_left(12345);
  metrics_sources src;
  src.fs = &fs;
  src.log_dir = std::filesystem::temp_directory_path().string();
  const std::string text = render_metrics(src);
  EXPECT_NE(text.find("# TYPE sluice_disk_total_bytes gauge"), std::string::npos) << text;
  EXPECT_EQ(value_of(text, "sluice_disk_usable_bytes"), 12345) << text;
  const auto total = value_of(text, "sluice_disk_total_bytes");
  ASSERT_TRUE(total) << text;
  EXPECT_EQ(*total, static_cast<double>(*io::filesystem::posix().total_bytes(src.log_dir)));
  EXPECT_GT(*total, 12345);
}

TEST(MetricsViewTest, AFileSystemThatCannotBeReadShowsNoSample) {
  metrics_sources src;
  src.fs = &io::filesystem::posix();
  src.log_dir = "/nonexistent/sluice-metrics-view-test";
  const std::string text = render_metrics(src);
  EXPECT_NE(text.find("# TYPE sluice_disk_usable_bytes gauge"), std::string::npos) << text;
  EXPECT_FALSE(value_of(text, "sluice_disk_total_bytes")) << text;
  EXPECT_FALSE(value_of(text, "sluice_disk_usable_bytes")) << text;
}

TEST(MetricsViewTest, NoFileSystemNoDiskSection) {
  const std::string text = render_metrics({});
  EXPECT_EQ(text.find("sluice_disk_total_bytes"), std::string::npos) << text;
}

}  // namespace
}  // namespace sluice::broker
