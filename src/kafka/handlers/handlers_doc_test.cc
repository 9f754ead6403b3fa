// The table of served API versions (handlers.cc, which ApiVersions
// advertises) and docs/protocol.md's table of supported versions must say
// the same thing, so neither can drift from the other again.

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <utility>

#include "kafka/dispatcher.h"

namespace sluice::kafka {
namespace {

// Rows "| key | API | min-max | ..." (or "| key | API | v | ..." or "-") of
// the supported-versions table: key -> (min, max), or (-1, -1) for "-".
std::map<int, std::pair<int, int>> documented_versions() {
  std::ifstream in(SLUICE_SOURCE_DIR "/docs/protocol.md");
  EXPECT_TRUE(in.good()) << "cannot read docs/protocol.md";
  std::map<int, std::pair<int, int>> out;
  const std::regex row(R"(^\| (\d+) \| [A-Za-z]+ \| (-|(\d+)(-(\d+))?) \|)");
  std::string line;
  while (std::getline(in, line)) {
    std::smatch m;
    if (!std::regex_search(line, m, row)) continue;
    const int key = std::stoi(m[1]);
    if (m[2] == "-") {
      out[key] = {-1, -1};
    } else {
      const int lo = std::stoi(m[3]);
      out[key] = {lo, m[5].matched ? std::stoi(m[5]) : lo};
    }
  }
  return out;
}

TEST(HandlersTable, MatchesDocsProtocolMd) {
  auto doc = documented_versions();
  ASSERT_GE(doc.size(), api_handlers().size()) << "docs/protocol.md lists fewer APIs than are served";
  for (const api_handler& h : api_handlers()) {
    SCOPED_TRACE("api key " + std::to_string(h.api_key));
    auto it = doc.find(h.api_key);
    ASSERT_NE(it, doc.end()) << "served but not in docs/protocol.md";
    EXPECT_EQ(it->second, std::make_pair(int{h.min_version}, int{h.max_version}));
    doc.erase(it);
  }
  for (const auto& [key, range] : doc) {
    EXPECT_EQ(range, std::make_pair(-1, -1)) << "docs/protocol.md lists api key " << key << " as served, but it is not";
  }
}

}  // namespace
}  // namespace sluice::kafka
