#include "metadata/topic_table.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "base/crc32c.h"
#include "base/limits.h"
#include "config/overrides_file.h"

namespace sluice::cluster {
namespace {

constexpr std::string_view header_line = "sluice-topics v1";

std::span<const std::byte> as_bytes(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

}  // namespace

result<std::unique_ptr<topic_table>> topic_table::open(io::filesystem& fs, std::string meta_dir,
                                                       int32_t node_id) {
  SLUICE_TRY(fs.create_dirs(io::join(meta_dir, "configs")));
  std::unique_ptr<topic_table> t(new topic_table(fs, std::move(meta_dir), node_id));
  SLUICE_TRY(t->load());
  t->remove_orphan_configs();
  return t;
}

std::string topic_table::configs_path(const std::string& topic) const {
  return io::join(io::join(meta_dir_, "configs"), topic);
}

status topic_table::load() {
  const std::string path = io::join(meta_dir_, "topics");
  if (!fs_.exists(path)) return {};
  SLUICE_ASSIGN_OR_RETURN(auto bytes, fs_.read_all(path, limits::max_checkpoint_file_bytes));
  std::string text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  auto corrupt = [&](const std::string& why) {
    return status(errc::corrupt_data, path + ": " + why);
  };
  // The last line is "crc32c <hex>" over every byte before it.
  auto crc_at = text.rfind("crc32c ");
  if (crc_at == std::string::npos || (crc_at > 0 && text[crc_at - 1] != '\n')) return corrupt("no checksum line");
  unsigned stored = 0;
  if (std::sscanf(text.c_str() + crc_at, "crc32c %8x", &stored) != 1) return corrupt("bad checksum line");
  if (crc32c(text.data(), crc_at) != stored) return corrupt("checksum mismatch");
  std::istringstream in(text.substr(0, crc_at));
  std::string line;
  if (!std::getline(in, line) || line != header_line) return corrupt("unknown header '" + line + "'");
  int line_no = 1;
  while (std::getline(in, line)) {
    ++line_no;
    std::istringstream fields(line);
    topic_info t;
    std::string id_hex;
    if (!(fields >> t.name >> t.partitions >> id_hex) || t.partitions <= 0 || !validate_topic_name(t.name).ok()) {
      return corrupt("line " + std::to_string(line_no) + " is not '<topic> <partitions> <id>'");
    }
    auto id = topic_id_from_hex(id_hex);
    if (!id) return corrupt("line " + std::to_string(line_no) + ": bad topic id");
    t.id = *id;
    auto ov = config::read_overrides_file(fs_, configs_path(t.name), config::overrides_kind::topic);
    if (ov.ok()) {
      t.overrides = std::move(ov).value();
    } else if (ov.code() != errc::not_found) {
      return ov.err();
    }
    if (names_by_id_.count(t.id)) return corrupt("line " + std::to_string(line_no) + ": topic id used twice");
    names_by_id_[t.id] = t.name;
    topics_[t.name] = std::move(t);
  }
  return {};
}

void topic_table::remove_orphan_configs() {
  const std::string configs_dir = io::join(meta_dir_, "configs");
  auto names = fs_.list(configs_dir);
  if (!names.ok()) return;
  for (const auto& n : *names) {
    if (!topics_.count(n)) fs_.remove(io::join(configs_dir, n)).ignore();
  }
}

status topic_table::persist_locked() {
  std::string text(header_line);
  text += '\n';
  for (const auto& [name, t] : topics_) {
    text += name + ' ' + std::to_string(t.partitions) + ' ' + to_hex(t.id) + '\n';
  }
  char crc[32];
  std::snprintf(crc, sizeof crc, "crc32c %08x\n", crc32c(text.data(), text.size()));
  text += crc;
  return fs_.write_atomic(io::join(meta_dir_, "topics"), as_bytes(text));
}

topic_info topic_table::with_assignment(topic_info t) const {
  t.assignment.assign(static_cast<size_t>(t.partitions), replica_list{node_id_});
  return t;
}

status topic_table::check_request(const partition_request& req) const {
  if (req.assignment.empty() && req.replication_factor != 1) {
    // Kafka's text for the same refusal.
    return status(errc::invalid_replication_factor, "Replication factor: " + std::to_string(req.replication_factor) +
                                                        " larger than available brokers: 1.");
  }
  if (!req.assignment.empty() && req.assignment.size() != static_cast<size_t>(req.count))
    return status(errc::invalid_replica_assignment, "the assignment does not name every new partition");
  for (const auto& replicas : req.assignment) {
    if (replicas != replica_list{node_id_}) {
      return status(errc::invalid_replica_assignment,
                    "replicas must be exactly this broker (" + std::to_string(node_id_) + ")");
    }
  }
  return {};
}

std::optional<topic_info> topic_table::get(const std::string& name) const {
  std::lock_guard g(mu_);
  auto it = topics_.find(name);
  if (it == topics_.end()) return std::nullopt;
  return with_assignment(it->second);
}

std::optional<topic_info> topic_table::get_by_id(const topic_id& id) const {
  std::lock_guard g(mu_);
  auto n = names_by_id_.find(id);
  if (n == names_by_id_.end()) return std::nullopt;
  return with_assignment(topics_.at(n->second));
}

std::vector<topic_info> topic_table::list() const {
  std::lock_guard g(mu_);
  std::vector<topic_info> out;
  out.reserve(topics_.size());
  for (const auto& [_, t] : topics_) out.push_back(with_assignment(t));
  return out;
}

std::optional<partition_state> topic_table::state(const std::string& topic, int32_t partition) const {
  std::lock_guard g(mu_);
  auto it = topics_.find(topic);
  if (it == topics_.end() || partition < 0 || partition >= it->second.partitions) return std::nullopt;
  return partition_state{node_id_, 0, {node_id_}, 0};
}

size_t topic_table::size() const {
  std::lock_guard g(mu_);
  return topics_.size();
}

result<topic_info> topic_table::create(const std::string& name, const partition_request& req,
                                       const config::config_map& overrides) {
  SLUICE_TRY(validate_topic_name(name));
  const int32_t partitions = req.count;
  if (partitions <= 0 || partitions > limits::max_partitions_per_topic) {
    return error{errc::invalid_argument, "partition count " + std::to_string(partitions) + " is not in 1.." +
                                             std::to_string(limits::max_partitions_per_topic)};
  }
  SLUICE_TRY(check_request(req));
  std::lock_guard g(mu_);
  if (topics_.count(name)) return error{errc::already_exists, "topic '" + name + "' already exists"};
  topic_info t{name, new_topic_id(), partitions, overrides, {}};
  while (names_by_id_.count(t.id)) t.id = new_topic_id();
  // Overrides first: a topic line never points at a missing overrides file,
  // nor at one left by an earlier topic of the same name.
  if (!overrides.empty()) {
    SLUICE_TRY(config::write_overrides_file(fs_, configs_path(name), config::overrides_kind::topic, overrides));
  } else if (fs_.exists(configs_path(name))) {
    SLUICE_TRY(fs_.remove(configs_path(name)));
  }
  topics_[name] = t;
  if (auto s = persist_locked(); !s.ok()) {
    topics_.erase(name);
    return s.err();
  }
  names_by_id_[t.id] = name;
  return with_assignment(std::move(t));
}

status topic_table::remove(const std::string& name) {
  std::lock_guard g(mu_);
  auto it = topics_.find(name);
  if (it == topics_.end()) return status(errc::not_found, "topic '" + name + "' does not exist");
  topic_info saved = it->second;
  topics_.erase(it);
  if (auto s = persist_locked(); !s.ok()) {
    topics_[name] = std::move(saved);
    return s;
  }
  names_by_id_.erase(saved.id);
  if (fs_.exists(configs_path(name))) fs_.remove(configs_path(name)).ignore();
  return {};
}

status topic_table::add_partitions(const std::string& name, const partition_request& req) {
  SLUICE_TRY(check_request(req));
  std::lock_guard g(mu_);
  auto it = topics_.find(name);
  if (it == topics_.end()) return status(errc::not_found, "topic '" + name + "' does not exist");
  const int64_t partitions = int64_t{it->second.partitions} + req.count;
  if (req.count <= 0) return status(errc::invalid_argument, "no partition to add");
  if (partitions > limits::max_partitions_per_topic) {
    return status(errc::invalid_argument, "partition count above " + std::to_string(limits::max_partitions_per_topic));
  }
  int32_t old = it->second.partitions;
  it->second.partitions = static_cast<int32_t>(partitions);
  if (auto s = persist_locked(); !s.ok()) {
    it->second.partitions = old;
    return s;
  }
  return {};
}

status topic_table::set_overrides(const std::string& name, const config::config_map& overrides) {
  std::lock_guard g(mu_);
  auto it = topics_.find(name);
  if (it == topics_.end()) return status(errc::not_found, "topic '" + name + "' does not exist");
  SLUICE_TRY(config::write_overrides_file(fs_, configs_path(name), config::overrides_kind::topic, overrides));
  it->second.overrides = overrides;
  return {};
}

}  // namespace sluice::cluster
