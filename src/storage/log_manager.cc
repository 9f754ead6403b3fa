#include "storage/log_manager.h"

#include "base/log.h"
#include "storage/file_cache.h"
#include "storage/flusher.h"

namespace sluice::storage {
namespace {

constexpr const char* kDeleteSuffix = "-delete";

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::string topic_partition::dir_name() const { return topic + "-" + std::to_string(partition); }

std::optional<topic_partition> topic_partition::parse(const std::string& name) {
  const auto dash = name.rfind('-');
  if (dash == std::string::npos || dash == 0 || dash + 1 == name.size() || name.size() - dash > 11)
    return std::nullopt;
  int64_t p = 0;
  for (size_t i = dash + 1; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return std::nullopt;
    p = p * 10 + (name[i] - '0');
  }
  if (p > INT32_MAX) return std::nullopt;
  return topic_partition{name.substr(0, dash), static_cast<int32_t>(p)};
}

log_manager::log_manager(io::filesystem& fs, sluice::clock& clk, log_manager_config cfg)
    : fs_(fs),
      clk_(clk),
      cfg_(std::move(cfg)),
      files_(std::make_unique<file_cache>(fs, cfg_.max_open_segment_files)),
      flusher_(std::make_unique<flusher>()),
      deleter_(std::make_unique<file_deleter>(fs, clk)),
      scrubber_(std::make_unique<scrubber>(clk, cfg_.scrub_bytes_per_second, [this] {
        std::vector<std::shared_ptr<log>> out;
        std::lock_guard g(mu_);
        for (const auto& [tp, l] : logs_) out.push_back(l);
        return out;
      })) {}

log_manager::~log_manager() { shutdown().ignore(); }

log_context log_manager::context() {
  return log_context{&fs_, &clk_, files_.get(), flusher_.get(), deleter_.get(), scrubber_.get()};
}

result<std::unique_ptr<log_manager>> log_manager::open(io::filesystem& fs, sluice::clock& clk,
                                                       log_manager_config cfg) {
  SLUICE_TRY(cfg.default_log.validate());
  if (cfg.scrub_bytes_per_second < 0 || cfg.scrub_bytes_per_second > limits::max_scrub_bytes_per_second)
    return error{errc::invalid_config, "sluice.log.scrub.bytes.per.second out of range"};
  SLUICE_TRY(fs.create_dirs(cfg.data_dir));
  std::unique_ptr<log_manager> m(new log_manager(fs, clk, std::move(cfg)));
  SLUICE_TRY(m->load_all());
  m->scrubber_->start();
  return m;
}

status log_manager::load_all() {
  SLUICE_ASSIGN_OR_RETURN(auto names, fs_.list(cfg_.data_dir));
  for (const auto& n : names) {
    const std::string path = io::join(cfg_.data_dir, n);
    if (ends_with(n, kDeleteSuffix)) {
      fs_.remove_all(path).ignore();  // a deletion interrupted by a crash
      continue;
    }
    auto tp = topic_partition::parse(n);
    if (!tp) continue;
    auto l = log::open(context(), path, n, cfg_.default_log);
    if (!l.ok()) {
      // One broken partition must not keep the others offline.
      SLUICE_LOG_ERROR("partition {} could not be opened and stays offline: {}", n, l.err().message);
      continue;
    }
    std::lock_guard g(mu_);
    logs_.emplace(*tp, std::move(l).value());
  }
  return {};
}

std::shared_ptr<log> log_manager::get(const topic_partition& tp) const {
  std::lock_guard g(mu_);
  auto it = logs_.find(tp);
  return it == logs_.end() ? nullptr : it->second;
}

result<std::shared_ptr<log>> log_manager::get_or_create(const topic_partition& tp,
                                                        std::optional<log_config> cfg) {
  if (tp.topic.empty() || tp.topic.find('/') != std::string::npos || tp.topic == "." || tp.topic == ".." ||
      tp.partition < 0)
    return error{errc::invalid_argument, "bad topic partition " + tp.dir_name()};
  // Creation holds the lock so two callers cannot create one log twice;
  // opening an empty log is a few small file operations.
  std::lock_guard g(mu_);
  if (shut_down_) return error{errc::shutting_down, "log manager is shut down"};
  auto it = logs_.find(tp);
  if (it != logs_.end()) return it->second;
  const std::string name = tp.dir_name();
  SLUICE_ASSIGN_OR_RETURN(auto l, log::open(context(), io::join(cfg_.data_dir, name), name,
                                            cfg.value_or(cfg_.default_log)));
  if (l->config().fsync) SLUICE_TRY(fs_.sync_dir(cfg_.data_dir));  // the new directory's name
  logs_.emplace(tp, l);
  return l;
}

status log_manager::remove(const topic_partition& tp) {
  std::string doomed;
  {
    // The directory is renamed away under the lock, so a concurrent
    // get_or_create of the same partition starts from an empty directory.
    std::lock_guard g(mu_);
    auto it = logs_.find(tp);
    if (it == logs_.end()) return status(errc::not_found, tp.dir_name() + " does not exist");
    std::shared_ptr<log> l = std::move(it->second);
    logs_.erase(it);
    l->close().ignore();  // its data is about to go; a failed sync does not matter
    doomed = l->dir() + "." + std::to_string(++removals_) + kDeleteSuffix;
    SLUICE_TRY(fs_.rename(l->dir(), doomed));
    SLUICE_TRY(fs_.sync_dir(cfg_.data_dir));
  }
  return fs_.remove_all(doomed);  // a crash before this finishes is cleaned up at open
}

std::vector<topic_partition> log_manager::partitions() const {
  std::lock_guard g(mu_);
  std::vector<topic_partition> out;
  for (const auto& [tp, l] : logs_) out.push_back(tp);
  return out;
}

status log_manager::shutdown() {
  scrubber_->stop();  // before the logs close: it would only be told shutting_down
  std::map<topic_partition, std::shared_ptr<log>> logs;
  {
    std::lock_guard g(mu_);
    if (shut_down_) return {};
    shut_down_ = true;
    logs.swap(logs_);
  }
  status first;
  for (auto& [tp, l] : logs) {
    status st = l->close();
    if (!st.ok() && first.ok()) first = st;
  }
  flusher_->stop();
  deleter_->stop();  // no reader is left: pending retired files go now
  return first;
}

}  // namespace sluice::storage
