#include "config/overrides_file.h"

#include <cstdio>
#include <set>
#include <string>

#include "base/crc32c.h"
#include "base/limits.h"
#include "base/percent_encoding.h"

namespace sluice::config {
namespace {

// The grammar is in docs/configuration.md ("Persisted overrides").
constexpr std::string_view magic = "sluice-config-overrides 1 ";
constexpr std::string_view group_magic = "sluice-group-configs 1";
constexpr std::string_view crc_prefix = "crc32c=";

std::string_view kind_name(overrides_kind kind) {
  return kind == overrides_kind::topic ? "topic" : "broker";
}

std::string hex8(uint32_t v) {
  char buf[9];
  std::snprintf(buf, sizeof buf, "%08x", v);
  return std::string(buf, 8);
}

const setting* lookup(overrides_kind kind, std::string_view key) {
  return kind == overrides_kind::topic ? find_topic_setting(key) : find_broker_setting(key);
}

// The lines before the checksum line, once the checksum (the last line,
// of everything before it) matches: checked first so that a torn or
// damaged file is reported as such, not as a bad value.
result<std::string_view> checked_body(std::string_view text, std::string_view origin) {
  auto corrupt = [&](size_t line, const std::string& what) {
    return error{errc::corrupt_data, std::string(origin) + ":" + std::to_string(line) + ": " + what};
  };
  if (text.size() < 2 || text.back() != '\n') return corrupt(1, "empty or torn (no final newline)");
  const size_t last_start = text.rfind('\n', text.size() - 2);
  const size_t body_len = last_start == std::string_view::npos ? 0 : last_start + 1;
  const std::string_view body = text.substr(0, body_len);
  const std::string_view crc_line = text.substr(body_len, text.size() - body_len - 1);
  size_t line_count = 1;
  for (char c : body) line_count += c == '\n' ? 1 : 0;
  if (crc_line.substr(0, crc_prefix.size()) != crc_prefix ||
      crc_line.size() != crc_prefix.size() + 8) {
    return corrupt(line_count, "missing checksum line (crc32c=XXXXXXXX)");
  }
  const std::string expected = hex8(crc32c(body.data(), body.size()));
  if (crc_line.substr(crc_prefix.size()) != expected) {
    return corrupt(line_count, "checksum mismatch: file says " +
                                   std::string(crc_line.substr(crc_prefix.size())) +
                                   ", contents give " + expected);
  }
  return body;
}

void append_crc_line(std::string& out) {
  const uint32_t crc = crc32c(out.data(), out.size());
  out += crc_prefix;
  out += hex8(crc);
  out += '\n';
}

}  // namespace

std::string serialize_overrides(overrides_kind kind, const config_map& values) {
  std::string out(magic);
  out += kind_name(kind);
  out += '\n';
  for (const auto& [key, v] : values.entries()) {
    // Validated values hold no newline or control character (schema.cc), so
    // one line per entry is unambiguous.
    out += key;
    out += '=';
    out += format_value(v);
    out += '\n';
  }
  append_crc_line(out);
  return out;
}

result<config_map> parse_overrides(overrides_kind kind, std::string_view text,
                                   std::string_view origin) {
  auto corrupt = [&](size_t line, const std::string& what) {
    return error{errc::corrupt_data,
                 std::string(origin) + ":" + std::to_string(line) + ": " + what};
  };
  SLUICE_ASSIGN_OR_RETURN(const std::string_view body, checked_body(text, origin));
  // Header.
  const size_t header_end = body.find('\n');
  if (header_end == std::string_view::npos ||
      body.substr(0, header_end) != std::string(magic) + std::string(kind_name(kind))) {
    return corrupt(1, "not a " + std::string(kind_name(kind)) +
                          " overrides file (expected header \"" + std::string(magic) +
                          std::string(kind_name(kind)) + "\")");
  }
  config_map out;
  std::string_view rest = body.substr(header_end + 1);
  size_t line = 1;
  while (!rest.empty()) {
    ++line;
    const size_t nl = rest.find('\n');
    const std::string_view entry = rest.substr(0, nl);
    rest.remove_prefix(nl + 1);
    const size_t eq = entry.find('=');
    if (eq == std::string_view::npos || eq == 0) return corrupt(line, "expected key=value");
    const std::string key(entry.substr(0, eq));
    const setting* s = lookup(kind, key);
    if (s == nullptr)
      return corrupt(line, key + ": unknown " + std::string(kind_name(kind)) + " config");
    if (out.find(key) != nullptr) return corrupt(line, key + ": set twice");
    auto v = parse_value(*s, key, entry.substr(eq + 1));
    if (!v.ok()) return corrupt(line, v.err().message);
    out.set(key, std::move(v).value());
  }
  return out;
}

status write_overrides_file(io::filesystem& fs, const std::string& path, overrides_kind kind,
                            const config_map& values) {
  const std::string text = serialize_overrides(kind, values);
  return fs.write_atomic(path, std::as_bytes(std::span(text.data(), text.size())));
}

result<config_map> read_overrides_file(io::filesystem& fs, const std::string& path,
                                       overrides_kind kind) {
  SLUICE_ASSIGN_OR_RETURN(auto bytes, fs.read_all(path, limits::max_config_file_bytes));
  std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  return parse_overrides(kind, text, path);
}

std::string serialize_group_configs(const group_config_table& groups) {
  std::string out(group_magic);
  out += '\n';
  for (const auto& [group, values] : groups) {
    out += "group ";
    out += percent_encode(group);
    out += '\n';
    for (const auto& [key, v] : values.entries()) {
      out += key;
      out += '=';
      out += format_value(v);
      out += '\n';
    }
  }
  append_crc_line(out);
  return out;
}

result<group_config_table> parse_group_configs(std::string_view text, std::string_view origin) {
  auto corrupt = [&](size_t line, const std::string& what) {
    return error{errc::corrupt_data, std::string(origin) + ":" + std::to_string(line) + ": " + what};
  };
  SLUICE_ASSIGN_OR_RETURN(const std::string_view body, checked_body(text, origin));
  const size_t header_end = body.find('\n');
  if (header_end == std::string_view::npos || body.substr(0, header_end) != group_magic) {
    return corrupt(1, "not a group configs file (expected header \"" + std::string(group_magic) + "\")");
  }
  group_config_table out;
  std::string group;  // the group the key=value lines belong to
  config_map values;
  size_t group_line = 0;
  auto finish_group = [&]() -> status {
    if (group_line == 0) return {};
    if (values.empty()) return corrupt(group_line, "group without a config");
    out.emplace(std::move(group), std::move(values));
    values = config_map{};
    return {};
  };
  std::string_view rest = body.substr(header_end + 1);
  size_t line = 1;
  while (!rest.empty()) {
    ++line;
    const size_t nl = rest.find('\n');
    const std::string_view entry = rest.substr(0, nl);
    rest.remove_prefix(nl + 1);
    if (entry.substr(0, 6) == "group ") {
      SLUICE_TRY(finish_group());
      auto id = percent_decode(entry.substr(6));
      if (!id || id->empty()) return corrupt(line, "the group id is not percent-encoded or is empty");
      if (!out.empty() && out.rbegin()->first >= *id) return corrupt(line, "groups are not in ascending order");
      group = std::move(*id);
      group_line = line;
      continue;
    }
    if (group_line == 0) return corrupt(line, "expected a 'group <id>' line");
    const size_t eq = entry.find('=');
    if (eq == std::string_view::npos || eq == 0) return corrupt(line, "expected key=value");
    const std::string key(entry.substr(0, eq));
    const group_setting* g = find_group_setting(key);
    if (g == nullptr) return corrupt(line, key + ": unknown group config");
    if (!values.empty() && values.entries().rbegin()->first >= key) {
      return corrupt(line, key + ": keys are not in ascending order or set twice");
    }
    auto v = parse_group_value(*g, entry.substr(eq + 1));
    if (!v.ok()) return corrupt(line, v.err().message);
    values.set(key, std::move(v).value());
  }
  SLUICE_TRY(finish_group());
  return out;
}

status write_group_configs_file(io::filesystem& fs, const std::string& path, const group_config_table& groups) {
  const std::string text = serialize_group_configs(groups);
  if (text.size() > limits::max_group_configs_file_bytes) {
    return status(errc::invalid_config, "the group configs would take " + std::to_string(text.size()) +
                                            " bytes, more than the " +
                                            std::to_string(limits::max_group_configs_file_bytes) +
                                            " a broker keeps; delete other groups' configs first");
  }
  return fs.write_atomic(path, std::as_bytes(std::span(text.data(), text.size())));
}

result<group_config_table> read_group_configs_file(io::filesystem& fs, const std::string& path) {
  SLUICE_ASSIGN_OR_RETURN(auto bytes, fs.read_all(path, limits::max_group_configs_file_bytes));
  std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  return parse_group_configs(text, path);
}

}  // namespace sluice::config
