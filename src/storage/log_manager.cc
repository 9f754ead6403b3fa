#include "storage/log_manager.h"

#include <random>
#include <string_view>

#include "base/log.h"
#include "storage/file_cache.h"
#include "storage/flusher.h"

namespace sluice::storage {
namespace {

constexpr std::string_view kDeleteSuffix = "-delete";

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// FNV-1a, 64 bits: small, stable across versions and platforms, and written
// down in docs/log_format.md so tools can compute the same names.
uint64_t fnv1a64(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

std::string hex(uint64_t v, int digits) {
  static const char* d = "0123456789abcdef";
  std::string out(static_cast<size_t>(digits), '0');
  for (int i = digits - 1; i >= 0; --i, v >>= 4) out[static_cast<size_t>(i)] = d[v & 0xf];
  return out;
}

// Where "-<partition>" starts in a partition directory name, or npos.
size_t partition_suffix_at(const std::string& name) {
  const auto dash = name.rfind('-');
  if (dash == std::string::npos || dash == 0 || dash + 1 == name.size() || name.size() - dash > 11)
    return std::string::npos;
  int64_t p = 0;
  for (size_t i = dash + 1; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return std::string::npos;
    p = p * 10 + (name[i] - '0');
  }
  return p > INT32_MAX ? std::string::npos : dash;
}

// "<dir name, cut to fit>.<32 random hex digits>-delete": unique without a
// counter (a leftover of an earlier run can never be in the way) and within
// the file system's name limit whatever the directory's name (Kafka's
// scheme). open() recognises it by the suffix alone.
std::string delete_name(const std::string& dir_name) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  const std::string tail = "." + hex(rng(), 16) + hex(rng(), 16) + std::string(kDeleteSuffix);
  return dir_name.substr(0, limits::max_file_name_bytes - tail.size()) + tail;
}

}  // namespace

std::string hashed_dir_stem(const std::string& topic) {
  return topic.substr(0, hashed_dir_topic_prefix_bytes) + "~" + hex(fnv1a64(topic), 16);
}

std::string topic_partition::dir_name(size_t max_bytes) const {
  std::string plain = topic + "-" + std::to_string(partition);
  if (plain.size() <= max_bytes) return plain;
  return hashed_dir_stem(topic) + "-" + std::to_string(partition);
}

bool topic_partition::is_dir_name(const std::string& name) {
  return partition_suffix_at(name) != std::string::npos;
}

std::optional<topic_partition> topic_partition::parse(const std::string& name) {
  const size_t dash = partition_suffix_at(name);
  if (dash == std::string::npos || name.find('~') < dash) return std::nullopt;
  return topic_partition{name.substr(0, dash), static_cast<int32_t>(std::stoll(name.substr(dash + 1)))};
}

log_manager::log_manager(io::filesystem& fs, sluice::clock& clk, log_manager_config cfg)
    : fs_(fs),
      clk_(clk),
      cfg_(std::move(cfg)),
      files_(std::make_unique<file_cache>(fs, cfg_.max_open_segment_files)),
      flusher_(std::make_unique<flusher>()),
      deleter_(std::make_unique<file_deleter>(fs, clk)) {}

log_manager::~log_manager() { shutdown().ignore(); }

log_context log_manager::context() { return log_context{&fs_, &clk_, files_.get(), flusher_.get(), deleter_.get()}; }

result<std::unique_ptr<log_manager>> log_manager::open(io::filesystem& fs, sluice::clock& clk,
                                                       log_manager_config cfg) {
  SLUICE_TRY(cfg.default_log.validate());
  SLUICE_TRY(fs.create_dirs(cfg.data_dir));
  std::unique_ptr<log_manager> m(new log_manager(fs, clk, std::move(cfg)));
  SLUICE_TRY(m->load_all());
  return m;
}

status log_manager::load_all() {
  SLUICE_ASSIGN_OR_RETURN(auto names, fs_.list(cfg_.data_dir));
  for (const auto& n : names) {
    const std::string path = io::join(cfg_.data_dir, n);
    if (ends_with(n, kDeleteSuffix)) {
      // A deletion interrupted by a crash (or whose removal failed): its
      // topic is gone from the table, so only the bytes are left to free.
      // Failing to free them is no reason to keep the broker down.
      if (auto s = fs_.remove_all(path); !s.ok())
        SLUICE_LOG_WARN("{} left over from a topic deletion could not be removed: {}", path, s.err().message);
      continue;
    }
    if (!topic_partition::is_dir_name(n)) continue;
    auto l = log::open(context(), path, n, cfg_.default_log);
    if (!l.ok()) {
      // One broken partition must not keep the others offline.
      SLUICE_LOG_ERROR("partition {} could not be opened and stays offline: {}", n, l.err().message);
      continue;
    }
    std::lock_guard g(mu_);
    logs_.emplace(n, std::move(l).value());
  }
  return {};
}

std::shared_ptr<log> log_manager::get(const topic_partition& tp) const {
  const std::string name = tp.dir_name();
  std::lock_guard g(mu_);
  auto it = logs_.find(name);
  return it == logs_.end() ? nullptr : it->second;
}

result<std::shared_ptr<log>> log_manager::get_or_create(const topic_partition& tp,
                                                        std::optional<log_config> cfg) {
  if (tp.topic.empty() || tp.topic.find('/') != std::string::npos || tp.topic == "." || tp.topic == ".." ||
      tp.partition < 0)
    return error{errc::invalid_argument, "bad topic partition " + tp.dir_name()};
  // Creation holds the lock so two callers cannot create one log twice;
  // opening an empty log is a few small file operations.
  const std::string name = tp.dir_name();
  std::lock_guard g(mu_);
  if (shut_down_) return error{errc::shutting_down, "log manager is shut down"};
  auto it = logs_.find(name);
  if (it != logs_.end()) return it->second;
  SLUICE_ASSIGN_OR_RETURN(auto l, log::open(context(), io::join(cfg_.data_dir, name), name,
                                            cfg.value_or(cfg_.default_log)));
  if (l->config().fsync) SLUICE_TRY(fs_.sync_dir(cfg_.data_dir));  // the new directory's name
  logs_.emplace(name, l);
  return l;
}

status log_manager::remove(const topic_partition& tp) { return remove_dir(tp.dir_name()); }

status log_manager::remove_dir(const std::string& dir_name) {
  std::string doomed;
  {
    // The directory is renamed away under the lock, so a concurrent
    // get_or_create of the same partition starts from an empty directory.
    std::lock_guard g(mu_);
    auto it = logs_.find(dir_name);
    if (it == logs_.end()) return status(errc::not_found, dir_name + " does not exist");
    std::shared_ptr<log> l = std::move(it->second);
    logs_.erase(it);
    l->close().ignore();  // its data is about to go; a failed sync does not matter
    doomed = io::join(cfg_.data_dir, delete_name(dir_name));
    SLUICE_TRY(fs_.rename(l->dir(), doomed));
    SLUICE_TRY(fs_.sync_dir(cfg_.data_dir));
  }
  return fs_.remove_all(doomed);  // a crash before this finishes is cleaned up at open
}

std::vector<std::string> log_manager::dir_names() const {
  std::lock_guard g(mu_);
  std::vector<std::string> out;
  out.reserve(logs_.size());
  for (const auto& [name, l] : logs_) out.push_back(name);
  return out;
}

status log_manager::shutdown() {
  std::map<std::string, std::shared_ptr<log>> logs;
  {
    std::lock_guard g(mu_);
    if (shut_down_) return {};
    shut_down_ = true;
    logs.swap(logs_);
  }
  status first;
  for (auto& [name, l] : logs) {
    status st = l->close();
    if (!st.ok() && first.ok()) first = st;
  }
  flusher_->stop();
  deleter_->stop();  // no reader is left: pending retired files go now
  return first;
}

}  // namespace sluice::storage
