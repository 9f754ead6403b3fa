#include "storage/log_manager.h"
#include "storage/log.h"

#include <algorithm>
#include <cstdio>
#include <random>
#include <string_view>

#include "base/crc32c.h"
#include "base/log.h"
#include "base/parallel.h"
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

constexpr std::string_view kCleanRecordHeader = "sluice-clean-shutdown v1";

std::span<const std::byte> as_bytes(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
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
  return topic_partition{name.substr(0, dash),
                         static_cast<int32_t>(std::stoll(name.substr(dash + 1)))};
}

log_manager::log_manager(io::filesystem& fs, sluice::clock& clk, log_manager_config cfg)
    : fs_(fs),
      clk_(clk),
      cfg_(std::move(cfg)),
      files_(std::make_unique<file_cache>(fs, cfg_.max_open_segment_files)),
      flusher_(std::make_unique<flusher>(clk)),
      deleter_(std::make_unique<file_deleter>(fs, clk)),
      scrubber_(std::make_unique<scrubber>(clk, cfg_.scrub_bytes_per_second, [this] {
        std::vector<std::shared_ptr<log>> out;
        std::lock_guard g(mu_);
        for (const auto& [tp, l] : logs_) out.push_back(l);
        return out;
      })) {}

log_manager::~log_manager() { shutdown().ignore(); }

void log_manager::wait_idle() { flusher_->wait_idle(); }

log_context log_manager::context() {
  return log_context{&fs_, &clk_, files_.get(), flusher_.get(), deleter_.get(), scrubber_.get(),
                     cfg_.follower_cache_drop_behind_bytes};
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

result<std::set<std::string>> log_manager::take_clean_shutdown_record() {
  const std::string path = io::join(cfg_.data_dir, kCleanShutdownRecord);
  if (fs_.exists(path + ".tmp")) fs_.remove(path + ".tmp").ignore();  // a write cut short
  std::set<std::string> clean;
  if (!fs_.exists(path)) return clean;
  auto bytes = fs_.read_all(path, limits::max_clean_shutdown_record_bytes);
  const std::string text =
      bytes.ok() ? std::string(reinterpret_cast<const char*>(bytes->data()), bytes->size())
                 : std::string();
  // The last line is "crc32c <8 hex>" over every byte before it; anything
  // else means no log is known clean (each is then scanned, which is safe).
  const auto crc_at = text.rfind("crc32c ");
  unsigned stored = 0;
  const bool valid =
      bytes.ok() && crc_at != std::string::npos && (crc_at == 0 || text[crc_at - 1] == '\n') &&
      std::sscanf(text.c_str() + crc_at, "crc32c %8x", &stored) == 1 &&
      crc32c(text.data(), crc_at) == stored &&
      text.compare(0, kCleanRecordHeader.size() + 1, std::string(kCleanRecordHeader) + "\n") == 0;
  if (valid) {
    size_t pos = kCleanRecordHeader.size() + 1;
    while (pos < crc_at) {
      const size_t eol = text.find('\n', pos);
      clean.insert(text.substr(pos, eol - pos));
      pos = eol + 1;
    }
  } else {
    SLUICE_LOG_WARN("{} is damaged ({}); every partition will be recovered as after a crash", path,
                    bytes.ok() ? "checksum or format" : bytes.err().message);
  }
  // Gone, durably, before any log opens: appends may follow, and a crash
  // after them must not find the record still vouching for those logs.
  SLUICE_TRY(fs_.remove(path));
  SLUICE_TRY(fs_.sync_dir(cfg_.data_dir));
  return clean;
}

status log_manager::write_clean_shutdown_record(const std::vector<std::string>& clean) {
  std::string text(kCleanRecordHeader);
  text += '\n';
  for (const auto& n : clean) text += n + '\n';
  char crc[32];
  std::snprintf(crc, sizeof crc, "crc32c %08x\n", crc32c(text.data(), text.size()));
  text += crc;
  return fs_.write_atomic(io::join(cfg_.data_dir, kCleanShutdownRecord), as_bytes(text));
}

status log_manager::load_all() {
  SLUICE_ASSIGN_OR_RETURN(const auto clean, take_clean_shutdown_record());
  SLUICE_ASSIGN_OR_RETURN(auto names, fs_.list(cfg_.data_dir));
  bool created_any = false;
  for (const auto& n : names) {
    const std::string path = io::join(cfg_.data_dir, n);
    if (ends_with(n, kDeleteSuffix)) {
      // A deletion interrupted by a crash (or whose removal failed): its
      // topic is gone from the table, so only the bytes are left to free.
      // Failing to free them is no reason to keep the broker down.
      if (auto s = fs_.remove_all(path); !s.ok())
        SLUICE_LOG_WARN("{} left over from a topic deletion could not be removed: {}", path,
                        s.err().message);
      continue;
    }
    if (!topic_partition::is_dir_name(n)) continue;
    auto l = log::open(context(), path, n, cfg_.default_log, clean.count(n) > 0);
    if (!l.ok()) {
      // One broken partition must not keep the others offline.
      SLUICE_LOG_ERROR("partition {} could not be opened and stays offline: {}", n, l.err().message);
      continue;
    }
    // A directory without a segment was being created when the broker
    // stopped, and its name may not be durable yet (a process crash keeps
    // the page cache): synced below before any log is handed out.
    created_any = created_any || ((*l)->recovery().created && (*l)->config().fsync);
    std::lock_guard g(mu_);
    logs_.emplace(n, std::move(l).value());
  }
  if (created_any) SLUICE_TRY(fs_.sync_dir(cfg_.data_dir));
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
  const log_spec one{tp, std::move(cfg)};
  return std::move(get_or_create_all({&one, 1}).front());
}

std::vector<result<std::shared_ptr<log>>> log_manager::get_or_create_all(std::span<const log_spec> wanted) {
  std::vector<result<std::shared_ptr<log>>> out;
  out.reserve(wanted.size());
  for (size_t from = 0; from < wanted.size(); from += limits::logs_created_per_directory_sync) {
    const auto chunk = wanted.subspan(from, std::min(limits::logs_created_per_directory_sync, wanted.size() - from));
    // Creation holds the lock so two callers cannot create one log twice,
    // and until the directory sync below, so nobody sees a log whose name
    // is not durable yet. A chunk is a few small file operations per log
    // (no sync of its own: log::open) and one sync.
    std::lock_guard g(mu_);
    std::vector<std::string> made;  // names of the logs this chunk created
    std::vector<size_t> answered;   // the entries of `out` that hand one of them out
    bool sync = false;
    for (const auto& w : chunk) {
      const topic_partition& tp = w.tp;
      if (tp.topic.empty() || tp.topic.find('/') != std::string::npos || tp.topic == "." ||
          tp.topic == ".." || tp.partition < 0) {
        out.emplace_back(error{errc::invalid_argument, "bad topic partition " + tp.dir_name()});
        continue;
      }
      if (shut_down_) {
        out.emplace_back(error{errc::shutting_down, "log manager is shut down"});
        continue;
      }
      const std::string name = tp.dir_name();
      if (auto it = logs_.find(name); it != logs_.end()) {
        // Made by this chunk when named twice in one call: not durable yet either.
        if (std::find(made.begin(), made.end(), name) != made.end()) answered.push_back(out.size());
        out.emplace_back(it->second);
        continue;
      }
      auto l = log::open(context(), io::join(cfg_.data_dir, name), name, w.cfg.value_or(cfg_.default_log));
      if (!l.ok()) {
        out.emplace_back(l.err());
        continue;
      }
      sync = sync || (*l)->config().fsync;
      made.push_back(name);
      answered.push_back(out.size());
      // Nobody sees it before the sync below: every reader of logs_ takes mu_.
      logs_.emplace(name, *l);
      out.emplace_back(std::move(l).value());
    }
    if (made.empty() || !sync) continue;
    // The new directories' names, once for the chunk (the contract above).
    if (auto st = fs_.sync_dir(cfg_.data_dir); !st.ok()) {
      for (const auto& name : made) {
        logs_[name]->close().ignore();  // empty: nothing of it is lost
        logs_.erase(name);
      }
      for (size_t i : answered) out[i] = st.err();
    }
  }
  return out;
}

status log_manager::remove(const topic_partition& tp) {
  return remove_dir(tp.dir_name());
}

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
  scrubber_->stop();  // before the logs close: it would only be told shutting_down
  std::vector<std::pair<std::string, std::shared_ptr<log>>> logs;
  {
    std::lock_guard g(mu_);
    if (shut_down_) return {};
    shut_down_ = true;
    logs.assign(std::make_move_iterator(logs_.begin()), std::make_move_iterator(logs_.end()));
    logs_.clear();
  }
  // Closing is a few syncs per written partition and none per idle one;
  // run on a few threads the syncs overlap in the device and the journal.
  const int64_t started_ms = clk_.monotonic_ms();
  std::vector<status> closed(logs.size());
  parallel_for(logs.size(), limits::shutdown_threads,
               [&](size_t i) { closed[i] = logs[i].second->close_without_marker(); });
  status first;
  std::vector<std::string> clean;
  clean.reserve(logs.size());
  for (size_t i = 0; i < logs.size(); ++i) {
    if (closed[i].ok()) {
      clean.push_back(logs[i].first);
    } else if (first.ok()) {
      first = closed[i];
    }
  }
  // One record for every log, written once every one of them is durable: a
  // log it does not name (or every log, if a crash comes first) is scanned
  // at the next start, as its missing marker used to make it.
  if (auto st = write_clean_shutdown_record(clean); !st.ok()) {
    SLUICE_LOG_ERROR(
        "clean-shutdown record not written ({}); every partition will be recovered at start",
        st.err().message);
    if (first.ok()) first = st;
  }
  SLUICE_LOG_INFO("closed {} partition logs ({} cleanly) in {} ms", logs.size(), clean.size(),
                  clk_.monotonic_ms() - started_ms);
  flusher_->stop();
  deleter_->stop();  // no reader is left: pending retired files go now
  return first;
}

}  // namespace sluice::storage
