// The table of served API versions (handlers.cc, which ApiVersions
// advertises) and docs/protocol.md's table of supported versions must say
// the same thing, so neither can drift from the other again.

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "kafka/dispatcher.h"

namespace sluice::kafka {
namespace {

// Rows "| key | API | min-max | ..." (or "| key | API | v | ..." or "-") of
// the supported-versions table: key -> (min, max), or (-1, -1) for "-".
std::vector<std::string> cells(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream in(line);
  std::string cell;
  while (std::getline(in, cell, '|')) {
    const auto first = cell.find_first_not_of(' ');
    const auto last = cell.find_last_not_of(' ');
    out.push_back(first == std::string::npos ? "" : cell.substr(first, last - first + 1));
  }
  return out;
}

bool all_digits(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
}

std::map<int, std::pair<int, int>> documented_versions() {
  std::ifstream in(SLUICE_SOURCE_DIR "/docs/protocol.md");
  EXPECT_TRUE(in.good()) << "cannot read docs/protocol.md";
  std::map<int, std::pair<int, int>> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("| ", 0) != 0) continue;
    const auto c = cells(line);  // c[0] is the empty text before the first '|'
    if (c.size() < 4 || !all_digits(c[1])) continue;
    const int key = std::stoi(c[1]);
    const std::string& range = c[3];
    if (range == "-") {
      out[key] = {-1, -1};
      continue;
    }
    const auto dash = range.find('-');
    const std::string lo = range.substr(0, dash);
    const std::string hi = dash == std::string::npos ? lo : range.substr(dash + 1);
    EXPECT_TRUE(all_digits(lo) && all_digits(hi)) << "api key " << key << ": versions '" << range << "'";
    if (all_digits(lo) && all_digits(hi)) out[key] = {std::stoi(lo), std::stoi(hi)};
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
