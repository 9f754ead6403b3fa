#include "controller/records.h"

#include <charconv>

#include "base/percent_encoding.h"

namespace sluice::controller {
namespace {

// ---- Writing ---------------------------------------------------------------

std::string join_ids(const std::vector<int32_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(ids[i]);
  }
  return s;
}

void field(std::string& out, std::string_view name, std::string_view value) {
  out.append(name).append(" ").append(value).append("\n");
}

void configs(std::string& out, const config_text& c) {
  for (const auto& [k, v] : c) out.append("config ").append(k).append(" ").append(v).append("\n");
}

// ---- Reading ---------------------------------------------------------------

// The lines of a value after its header, each split at its first space.
class lines {
 public:
  lines(std::string_view value, std::string_view kind) : rest_(value), kind_(kind) {}

  // Reads the header "sluice-<kind> v1".
  status header() {
    std::string_view line;
    if (!next_line(line) || line != "sluice-" + std::string(kind_) + " v1")
      return bad("the first line is not 'sluice-" + std::string(kind_) + " v1'");
    return {};
  }
  bool done() const { return rest_.empty(); }
  // The next line's field name and value; false at the end.
  bool next(std::string_view& name, std::string_view& value) {
    std::string_view line;
    if (!next_line(line)) return false;
    auto sp = line.find(' ');
    name = line.substr(0, sp);
    value = sp == std::string_view::npos ? std::string_view{} : line.substr(sp + 1);
    return true;
  }
  // The next line must be `name <value>`.
  result<std::string_view> expect(std::string_view name) {
    std::string_view n, v;
    if (!next(n, v) || n != name) return bad("expected a '" + std::string(name) + "' line");
    return v;
  }
  status bad(const std::string& why) const {
    return status(errc::corrupt_data,
                  "sluice-" + std::string(kind_) + " record, line " + std::to_string(line_no_) + ": " + why);
  }
  int line_no() const { return line_no_; }

 private:
  bool next_line(std::string_view& line) {
    if (rest_.empty()) return false;
    auto nl = rest_.find('\n');
    if (nl == std::string_view::npos) {
      // Every line ends with "\n": a value cut short is corrupt.
      line_no_++;
      rest_ = {};
      line = "\x01";  // matches no field name
      return true;
    }
    line = rest_.substr(0, nl);
    rest_.remove_prefix(nl + 1);
    ++line_no_;
    return true;
  }

  std::string_view rest_;
  std::string_view kind_;
  int line_no_ = 0;
};

template <class Int>
std::optional<Int> parse_int(std::string_view s) {
  Int v{};
  // One spelling per number: no sign but '-', no leading zeros, no "-0".
  if (s.empty() || s[0] == '+' || (s.size() > 1 && s[0] == '0') || (s.size() > 1 && s.substr(0, 2) == "-0"))
    return std::nullopt;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

result<int32_t> int_field(lines& in, std::string_view name, int32_t min) {
  SLUICE_ASSIGN_OR_RETURN(auto v, in.expect(name));
  auto n = parse_int<int32_t>(v);
  if (!n || *n < min) return in.bad("'" + std::string(name) + "' is not an integer >= " + std::to_string(min));
  return *n;
}

// "1,2,3": distinct non-negative ids, at least `min_items`.
std::optional<std::vector<int32_t>> parse_ids(std::string_view s, size_t min_items) {
  std::vector<int32_t> ids;
  while (!s.empty()) {
    auto comma = s.find(',');
    auto n = parse_int<int32_t>(s.substr(0, comma));
    if (!n || *n < 0) return std::nullopt;
    for (int32_t id : ids)
      if (id == *n) return std::nullopt;
    ids.push_back(*n);
    if (comma == std::string_view::npos) break;
    s.remove_prefix(comma + 1);
    if (s.empty()) return std::nullopt;  // a trailing comma
  }
  if (ids.size() < min_items) return std::nullopt;
  return ids;
}

result<topic_id> id_field(lines& in, std::string_view name) {
  SLUICE_ASSIGN_OR_RETURN(auto v, in.expect(name));
  auto id = topic_id_from_hex(v);
  if (!id || *id == topic_id{}) return in.bad("'" + std::string(name) + "' is not 32 hex digits, not all zero");
  return *id;
}

// A printable token without spaces (incarnations, hosts, racks, config keys).
bool token(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c <= ' ' || c > '~') return false;
  return true;
}

// "config <key> <value>" lines until the end, keys ascending.
status config_lines(lines& in, config_text& out) {
  std::string_view name, value;
  while (in.next(name, value)) {
    if (name != "config") return in.bad("expected a 'config' line");
    auto sp = value.find(' ');
    if (sp == std::string_view::npos || !token(value.substr(0, sp)))
      return in.bad("'config' is not '<key> <value>'");
    std::string key(value.substr(0, sp));
    if (!out.empty() && out.rbegin()->first >= key) return in.bad("config keys are not in ascending order");
    out.emplace(std::move(key), std::string(value.substr(sp + 1)));
  }
  return {};
}

status at_end(lines& in) {
  if (!in.done()) return in.bad("unexpected line after the last field");
  return {};
}

}  // namespace

std::string encode(const broker_record& r) {
  std::string s = "sluice-broker v1\n";
  field(s, "id", std::to_string(r.id));
  field(s, "incarnation", r.incarnation);
  field(s, "endpoint", r.host + " " + std::to_string(r.port));
  if (r.rack) field(s, "rack", *r.rack);
  return s;
}

std::string encode(const controller_record& r) {
  std::string s = "sluice-controller v1\n";
  field(s, "id", std::to_string(r.id));
  field(s, "incarnation", r.incarnation);
  return s;
}

std::string encode(const topic_record& r) {
  std::string s = "sluice-topic v1\n";
  field(s, "id", to_hex(r.id));
  field(s, "partitions", std::to_string(r.assignment.size()));
  for (size_t p = 0; p < r.assignment.size(); ++p)
    field(s, "replicas", std::to_string(p) + " " + join_ids(r.assignment[p]));
  configs(s, r.configs);
  return s;
}

std::string encode(const partition_record& r) {
  std::string s = "sluice-partition v1\n";
  field(s, "topic-id", to_hex(r.topic));
  field(s, "leader", std::to_string(r.state.leader));
  field(s, "leader-epoch", std::to_string(r.state.leader_epoch));
  field(s, "isr", join_ids(r.state.isr));
  field(s, "partition-epoch", std::to_string(r.state.partition_epoch));
  return s;
}

std::string encode(const broker_configs_record& r) {
  std::string s = "sluice-broker-configs v1\n";
  configs(s, r.configs);
  return s;
}

std::string encode(const group_configs_record& r) {
  std::string s = "sluice-group-configs v1\n";
  configs(s, r.configs);
  return s;
}

result<broker_record> decode_broker(std::string_view value) {
  lines in(value, "broker");
  SLUICE_TRY(in.header());
  broker_record r;
  SLUICE_ASSIGN_OR_RETURN(r.id, int_field(in, "id", 0));
  SLUICE_ASSIGN_OR_RETURN(auto inc, in.expect("incarnation"));
  if (!token(inc)) return in.bad("'incarnation' is empty or has spaces");
  r.incarnation = inc;
  SLUICE_ASSIGN_OR_RETURN(auto ep, in.expect("endpoint"));
  auto sp = ep.find(' ');
  auto port = sp == std::string_view::npos ? std::nullopt : parse_int<int32_t>(ep.substr(sp + 1));
  if (!port || *port < 1 || *port > 65535 || !token(ep.substr(0, sp)))
    return in.bad("'endpoint' is not '<host> <port>'");
  r.host = ep.substr(0, sp);
  r.port = *port;
  std::string_view name, v;
  if (in.next(name, v)) {
    if (name != "rack" || !token(v)) return in.bad("expected a 'rack' line");
    r.rack = std::string(v);
  }
  SLUICE_TRY(at_end(in));
  return r;
}

result<controller_record> decode_controller(std::string_view value) {
  lines in(value, "controller");
  SLUICE_TRY(in.header());
  controller_record r;
  SLUICE_ASSIGN_OR_RETURN(r.id, int_field(in, "id", 0));
  SLUICE_ASSIGN_OR_RETURN(auto inc, in.expect("incarnation"));
  if (!token(inc)) return in.bad("'incarnation' is empty or has spaces");
  r.incarnation = inc;
  SLUICE_TRY(at_end(in));
  return r;
}

result<topic_record> decode_topic(std::string_view value) {
  lines in(value, "topic");
  SLUICE_TRY(in.header());
  topic_record r;
  SLUICE_ASSIGN_OR_RETURN(r.id, id_field(in, "id"));
  SLUICE_ASSIGN_OR_RETURN(int32_t n, int_field(in, "partitions", 1));
  for (int32_t p = 0; p < n; ++p) {
    SLUICE_ASSIGN_OR_RETURN(auto v, in.expect("replicas"));
    auto sp = v.find(' ');
    auto index = sp == std::string_view::npos ? std::nullopt : parse_int<int32_t>(v.substr(0, sp));
    auto ids = sp == std::string_view::npos ? std::nullopt : parse_ids(v.substr(sp + 1), 1);
    if (!index || *index != p || !ids)
      return in.bad("expected 'replicas " + std::to_string(p) + " <distinct broker ids>'");
    r.assignment.push_back(std::move(*ids));
  }
  SLUICE_TRY(config_lines(in, r.configs));
  return r;
}

result<partition_record> decode_partition(std::string_view value) {
  lines in(value, "partition");
  SLUICE_TRY(in.header());
  partition_record r;
  SLUICE_ASSIGN_OR_RETURN(r.topic, id_field(in, "topic-id"));
  SLUICE_ASSIGN_OR_RETURN(r.state.leader, int_field(in, "leader", -1));
  SLUICE_ASSIGN_OR_RETURN(r.state.leader_epoch, int_field(in, "leader-epoch", 0));
  SLUICE_ASSIGN_OR_RETURN(auto isr, in.expect("isr"));
  auto ids = parse_ids(isr, 1);
  if (!ids) return in.bad("'isr' is not a list of distinct broker ids");
  r.state.isr = std::move(*ids);
  SLUICE_ASSIGN_OR_RETURN(r.state.partition_epoch, int_field(in, "partition-epoch", 0));
  SLUICE_TRY(at_end(in));
  return r;
}

result<broker_configs_record> decode_broker_configs(std::string_view value) {
  lines in(value, "broker-configs");
  SLUICE_TRY(in.header());
  broker_configs_record r;
  SLUICE_TRY(config_lines(in, r.configs));
  return r;
}

result<group_configs_record> decode_group_configs(std::string_view value) {
  lines in(value, "group-configs");
  SLUICE_TRY(in.header());
  group_configs_record r;
  SLUICE_TRY(config_lines(in, r.configs));
  if (r.configs.empty()) return in.bad("a group's record holds at least one config");
  return r;
}

std::string key_layout::group_configs(std::string_view group) const {
  return group_configs() + percent_encode(group);
}

key_layout::parsed key_layout::parse(std::string_view key) const {
  using kind = parsed::kind;
  parsed out;
  if (key.substr(0, prefix_.size()) != prefix_) return out;
  key.remove_prefix(prefix_.size());
  auto under = [&](std::string_view dir) {
    if (key.substr(0, dir.size()) != dir) return false;
    key.remove_prefix(dir.size());
    return true;
  };
  if (key == "cluster_id") {
    out.type = kind::cluster_id;
  } else if (key == "controller") {
    out.type = kind::controller;
  } else if (key == "configs/brokers") {
    out.type = kind::broker_configs;
  } else if (under("configs/groups/")) {
    // Only the one encoding of a non-empty id; anything else is a key of
    // no known kind.
    if (auto group = percent_decode(key); group && !group->empty()) {
      out.type = kind::group_configs;
      out.group = std::move(*group);
    }
  } else if (under("brokers/")) {
    if (auto id = parse_int<int32_t>(key); id && *id >= 0) {
      out.type = kind::broker;
      out.id = *id;
    }
  } else if (under("topics/")) {
    if (!key.empty() && key.find('/') == std::string_view::npos) {
      out.type = kind::topic;
      out.topic = key;
    }
  } else if (under("partitions/")) {
    auto slash = key.find('/');
    if (slash != std::string_view::npos && slash > 0) {
      if (auto p = parse_int<int32_t>(key.substr(slash + 1)); p && *p >= 0) {
        out.type = kind::partition;
        out.topic = key.substr(0, slash);
        out.id = *p;
      }
    }
  }
  return out;
}

}  // namespace sluice::controller
