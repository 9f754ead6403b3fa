#include "io/fault_fs.h"

#include <algorithm>
#include <vector>

namespace sluice::io {

class fault_file final : public file {
 public:
  fault_file(fault_fs& fs, std::unique_ptr<file> base, std::string path)
      : fs_(fs), base_(std::move(base)), path_(std::move(path)) {}

  result<size_t> pread(void* buf, size_t n, uint64_t pos) override { return base_->pread(buf, n, pos); }

  status append(std::span<const std::byte> data) override {
    SLUICE_TRY(fs_.count_op("append", path_));
    auto [ok_bytes, err] = fs_.admit_write(path_, data.size());
    SLUICE_ASSIGN_OR_RETURN(uint64_t at, base_->size());
    fs_.note_write(path_, *base_, at, ok_bytes);
    if (ok_bytes > 0) SLUICE_TRY(base_->append(data.first(ok_bytes)));
    if (err) return status(*err);
    return {};
  }

  status pwrite(std::span<const std::byte> data, uint64_t pos) override {
    SLUICE_TRY(fs_.count_op("pwrite", path_));
    auto [ok_bytes, err] = fs_.admit_write(path_, data.size());
    fs_.note_write(path_, *base_, pos, ok_bytes);
    if (ok_bytes > 0) SLUICE_TRY(base_->pwrite(data.first(ok_bytes), pos));
    if (err) return status(*err);
    return {};
  }

  status sync() override {
    SLUICE_TRY(fs_.count_op("sync", path_));
    bool skip = false;
    SLUICE_TRY(fs_.check_sync(path_, skip));
    if (!skip) SLUICE_TRY(base_->sync());
    SLUICE_ASSIGN_OR_RETURN(uint64_t size, base_->size());
    fs_.note_synced(path_, size);
    return {};
  }

  status sync_data() override {
    SLUICE_TRY(fs_.count_op("sync", path_));
    bool skip = false;
    SLUICE_TRY(fs_.check_sync(path_, skip));
    if (!skip) SLUICE_TRY(base_->sync_data());
    fs_.note_data_synced(path_);
    return {};
  }

  status truncate(uint64_t size) override {
    SLUICE_TRY(fs_.count_op("truncate", path_));
    fs_.note_truncate(path_, *base_, size);
    return base_->truncate(size);
  }

  result<uint64_t> size() override { return base_->size(); }
  result<int64_t> modified_ms() override { return base_->modified_ms(); }
  int native_handle() const override { return base_->native_handle(); }
  void write_behind(uint64_t pos, uint64_t len) override { base_->write_behind(pos, len); }
  // Reserving changes no byte and no size: not a mutating call to count.
  status reserve(uint64_t pos, uint64_t len) override { return base_->reserve(pos, len); }

 private:
  fault_fs& fs_;
  std::unique_ptr<file> base_;
  std::string path_;
};

void fault_fs::fail_syncs(int n) {
  std::lock_guard g(mu_);
  failing_syncs_ = n;
}

void fault_fs::set_space_left(std::optional<uint64_t> bytes) {
  std::lock_guard g(mu_);
  space_left_ = bytes;
}

void fault_fs::crash_after_bytes(std::optional<uint64_t> bytes) {
  std::lock_guard g(mu_);
  crash_budget_ = bytes;
  crashed_ = false;
}

void fault_fs::crash_after_ops(std::optional<uint64_t> ops) {
  std::lock_guard g(mu_);
  op_budget_ = ops;
  crashed_ = false;
}

uint64_t fault_fs::ops() const {
  std::lock_guard g(mu_);
  return ops_;
}

status fault_fs::count_op(const char* what, const std::string& path) {
  std::lock_guard g(mu_);
  if (!crashed_ && op_budget_) {
    if (*op_budget_ == 0) crashed_ = true;
    else --*op_budget_;
  }
  if (crashed_) return status(errc::io_error, std::string(what) + " " + path + ": crashed (injected)");
  ++ops_;
  return {};
}

bool fault_fs::crashed() const {
  std::lock_guard g(mu_);
  return crashed_;
}

uint64_t fault_fs::syncs() const {
  std::lock_guard g(mu_);
  return syncs_;
}

std::pair<size_t, std::optional<error>> fault_fs::admit_write(const std::string& path, size_t n) {
  std::lock_guard g(mu_);
  if (crashed_) return {0, error{errc::io_error, "write " + path + ": crashed (injected)"}};
  size_t ok = n;
  std::optional<error> err;
  if (crash_budget_) {
    if (n > *crash_budget_) {
      ok = static_cast<size_t>(*crash_budget_);
      crashed_ = true;
      err = error{errc::io_error, "write " + path + ": crashed mid-write (injected)"};
    }
    *crash_budget_ -= ok;
  }
  if (space_left_) {
    if (ok > *space_left_) {
      ok = static_cast<size_t>(*space_left_);
      err = error{errc::no_space, "write " + path + ": No space left on device (injected)"};
    }
    *space_left_ -= ok;
  }
  return {ok, err};
}

status fault_fs::check_alive(const char* what, const std::string& path) {
  std::lock_guard g(mu_);
  if (crashed_) return status(errc::io_error, std::string(what) + " " + path + ": crashed (injected)");
  return {};
}

void fault_fs::simulate_syncs(bool on) {
  std::lock_guard g(mu_);
  simulate_syncs_ = on;
}

status fault_fs::check_sync(const std::string& path, bool& skip) {
  if (on_sync_) on_sync_(path);
  std::lock_guard g(mu_);
  skip = simulate_syncs_;
  if (crashed_) return status(errc::io_error, "sync " + path + ": crashed (injected)");
  if (failing_syncs_ != 0) {
    if (failing_syncs_ > 0) --failing_syncs_;
    return status(errc::io_error, "fdatasync " + path + ": Input/output error (injected)");
  }
  ++syncs_;
  return {};
}

void fault_fs::note_synced(const std::string& path, uint64_t size) {
  std::lock_guard g(mu_);
  synced_size_[path] = size;
  undo_.erase(path);
}

void fault_fs::note_data_synced(const std::string& path) {
  std::lock_guard g(mu_);
  undo_.erase(path);
  ++data_syncs_;
}

uint64_t fault_fs::data_syncs() const {
  std::lock_guard g(mu_);
  return data_syncs_;
}

// With mu_ held: a file this filesystem has not written yet was as durable
// as it is now.
std::map<std::string, uint64_t>::iterator fault_fs::track_locked(const std::string& path, file& base) {
  auto it = synced_size_.find(path);
  if (it != synced_size_.end()) return it;
  auto size = base.size();
  return synced_size_.emplace(path, size.ok() ? *size : 0).first;
}

void fault_fs::note_write(const std::string& path, file& base, uint64_t pos, size_t n) {
  std::lock_guard g(mu_);
  auto it = track_locked(path, base);
  if (n == 0 || pos >= it->second) return;
  std::vector<std::byte> old(static_cast<size_t>(std::min<uint64_t>(n, it->second - pos)));
  auto got = base.pread(old.data(), old.size(), pos);
  if (!got.ok()) return;
  old.resize(*got);
  if (!old.empty()) undo_[path].emplace_back(pos, std::move(old));
}

void fault_fs::note_truncate(const std::string& path, file& base, uint64_t size) {
  // The model keeps a cut (it is not undone): what it removed has nothing
  // to come back to.
  std::lock_guard g(mu_);
  track_locked(path, base);
  auto it = undo_.find(path);
  if (it == undo_.end()) return;
  for (auto& [pos, old] : it->second)
    if (pos + old.size() > size) old.resize(pos >= size ? 0 : static_cast<size_t>(size - pos));
  std::erase_if(it->second, [](const auto& u) { return u.second.empty(); });
}

status fault_fs::drop_unsynced() {
  std::map<std::string, uint64_t> files;
  std::map<std::string, std::vector<std::pair<uint64_t, std::vector<std::byte>>>> undo;
  {
    std::lock_guard g(mu_);
    files = synced_size_;
    undo.swap(undo_);
  }
  for (const auto& [path, synced] : files) {
    // A file removed meanwhile (the file deleter runs on its own thread) has
    // nothing left to lose; checking exists() first would race with it.
    auto opened = base_.open(path, open_mode::read_write);
    if (!opened.ok() && opened.code() == errc::not_found) continue;
    SLUICE_ASSIGN_OR_RETURN(auto f, std::move(opened));
    if (auto u = undo.find(path); u != undo.end())
      for (auto it = u->second.rbegin(); it != u->second.rend(); ++it) SLUICE_TRY(f->pwrite(it->second, it->first));
    SLUICE_ASSIGN_OR_RETURN(uint64_t size, f->size());
    if (size > synced) SLUICE_TRY(f->truncate(synced));
  }
  return {};
}

result<std::unique_ptr<file>> fault_fs::open(const std::string& path, open_mode mode) {
  if (mode != open_mode::read_only && mode != open_mode::read_write) SLUICE_TRY(count_op("open", path));
  SLUICE_ASSIGN_OR_RETURN(auto f, base_.open(path, mode));
  if (mode == open_mode::truncate || mode == open_mode::create_new) {
    std::lock_guard g(mu_);
    synced_size_.try_emplace(path, 0);
  }
  return std::unique_ptr<file>(std::make_unique<fault_file>(*this, std::move(f), path));
}

status fault_fs::rename(const std::string& from, const std::string& to) {
  SLUICE_TRY(count_op("rename", from));
  SLUICE_TRY(base_.rename(from, to));
  std::lock_guard g(mu_);
  auto it = synced_size_.find(from);
  if (it != synced_size_.end()) {
    synced_size_[to] = it->second;
    synced_size_.erase(it);
  }
  undo_.erase(to);
  if (auto u = undo_.find(from); u != undo_.end()) {
    undo_[to] = std::move(u->second);
    undo_.erase(from);
  }
  return {};
}

status fault_fs::remove(const std::string& path) {
  SLUICE_TRY(count_op("remove", path));
  return base_.remove(path);
}

status fault_fs::create_dirs(const std::string& path) {
  SLUICE_TRY(count_op("mkdir", path));
  return base_.create_dirs(path);
}

status fault_fs::remove_all(const std::string& path) {
  SLUICE_TRY(count_op("remove_all", path));
  return base_.remove_all(path);
}

result<std::vector<std::string>> fault_fs::list(const std::string& dir) { return base_.list(dir); }

bool fault_fs::exists(const std::string& path) { return base_.exists(path); }

status fault_fs::sync_dir(const std::string& dir) {
  SLUICE_TRY(count_op("sync_dir", dir));
  bool skip = false;
  SLUICE_TRY(check_sync(dir, skip));
  return skip ? status() : base_.sync_dir(dir);
}

result<uint64_t> fault_fs::free_bytes(const std::string& path) {
  {
    std::lock_guard g(mu_);
    if (space_left_) return *space_left_;
  }
  return base_.free_bytes(path);
}

result<uint64_t> fault_fs::total_bytes(const std::string& path) {
  return base_.total_bytes(path);
}

}  // namespace sluice::io
