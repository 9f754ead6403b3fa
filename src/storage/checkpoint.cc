#include "storage/checkpoint.h"

#include <charconv>
#include <string_view>

#include "base/limits.h"

namespace sluice::storage::checkpoint {
namespace {

constexpr std::string_view kVersion = "0";

// Splits `text` into lines of space-separated integers.
bool parse_ints(std::string_view text, std::vector<line>& out) {
  while (!text.empty()) {
    auto nl = text.find('\n');
    if (nl == std::string_view::npos) return false;  // every line ends in a newline
    std::string_view l = text.substr(0, nl);
    text.remove_prefix(nl + 1);
    line fields;
    while (!l.empty()) {
      auto sp = l.find(' ');
      std::string_view tok = l.substr(0, sp);
      int64_t v = 0;
      auto [p, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), v);
      if (ec != std::errc() || p != tok.data() + tok.size() || tok.empty()) return false;
      fields.push_back(v);
      l = sp == std::string_view::npos ? std::string_view() : l.substr(sp + 1);
    }
    out.push_back(std::move(fields));
  }
  return true;
}

}  // namespace

status write(io::filesystem& fs, const std::string& path, const std::vector<line>& lines) {
  std::string text = std::string(kVersion) + "\n" + std::to_string(lines.size()) + "\n";
  for (const auto& l : lines) {
    for (size_t i = 0; i < l.size(); ++i) text += (i ? " " : "") + std::to_string(l[i]);
    text += "\n";
  }
  return fs.write_atomic(path, std::as_bytes(std::span(text.data(), text.size())));
}

result<std::optional<std::vector<line>>> read(io::filesystem& fs, const std::string& path,
                                              size_t fields) {
  if (!fs.exists(path)) return std::optional<std::vector<line>>();
  SLUICE_ASSIGN_OR_RETURN(auto bytes, fs.read_all(path, limits::max_checkpoint_file_bytes));
  std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  std::vector<line> all;
  auto bad = [&] { return error{errc::corrupt_data, "checkpoint " + path + " does not parse"}; };
  if (!parse_ints(text, all) || all.size() < 2 || all[0] != line{0} || all[1].size() != 1) return bad();
  if (all[1][0] != static_cast<int64_t>(all.size() - 2)) return bad();
  std::vector<line> body(all.begin() + 2, all.end());
  for (const auto& l : body)
    if (l.size() != fields) return bad();
  return std::optional<std::vector<line>>(std::move(body));
}

}  // namespace sluice::storage::checkpoint
