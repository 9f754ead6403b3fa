// The POSIX implementation of io::file and io::filesystem.

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>

#include "io/file.h"

namespace sluice::io {

error os_error(const char* what, const std::string& path, int err) {
  errc code = (err == ENOSPC || err == EDQUOT) ? errc::no_space
              : (err == ENOENT)                ? errc::not_found
              : (err == EEXIST)                ? errc::already_exists
                                               : errc::io_error;
  const char* name = ::strerrorname_np(err);
  return error{code, std::string(what) + " " + path + ": " + std::strerror(err) +
                         (name ? std::string(" (") + name + ")" : std::string())};
}

namespace {

class posix_file final : public file {
 public:
  posix_file(int fd, std::string path, uint64_t size) : fd_(fd), path_(std::move(path)), size_(size) {}
  ~posix_file() override { ::close(fd_); }

  result<size_t> pread(void* buf, size_t n, uint64_t pos) override {
    size_t done = 0;
    while (done < n) {
      ssize_t r = ::pread(fd_, static_cast<char*>(buf) + done, n - done, static_cast<off_t>(pos + done));
      if (r < 0) {
        if (errno == EINTR) continue;
        return os_error("read", path_, errno);
      }
      if (r == 0) break;
      done += static_cast<size_t>(r);
    }
    return done;
  }

  status append(std::span<const std::byte> data) override {
    SLUICE_TRY(write_at(data, size_));
    size_ += data.size();
    return {};
  }

  status pwrite(std::span<const std::byte> data, uint64_t pos) override {
    SLUICE_TRY(write_at(data, pos));
    if (pos + data.size() > size_) size_ = pos + data.size();
    return {};
  }

  status sync() override {
    if (::fdatasync(fd_) != 0) return os_error("fdatasync", path_, errno);
    return {};
  }

  // Starts writeback of the dirty pages without waiting (a hint: sync()
  // reports any error).
  void start_writeback() { ::sync_file_range(fd_, 0, 0, SYNC_FILE_RANGE_WRITE); }
  // Writes every dirty page and waits for it, reporting this file's
  // writeback errors as writeback_error() does. Neither metadata nor a
  // device flush.
  status write_data() {
    if (::sync_file_range(fd_, 0, 0, SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER) != 0)
      return os_error("sync_file_range", path_, errno);
    return {};
  }
  // Waits for writeback in progress and reports a writeback error of this
  // file's pages not yet reported through this descriptor (the kernel's
  // per-file error sequence, since Linux 4.13), as fdatasync would.
  status writeback_error() {
    if (::sync_file_range(fd_, 0, 0, SYNC_FILE_RANGE_WAIT_BEFORE) != 0)
      return os_error("sync_file_range", path_, errno);
    return {};
  }
  // syncfs(2) of the file system holding this file.
  status sync_file_system() {
    if (::syncfs(fd_) != 0) return os_error("syncfs", path_, errno);
    return {};
  }

  status truncate(uint64_t size) override {
    if (::ftruncate(fd_, static_cast<off_t>(size)) != 0) return os_error("truncate", path_, errno);
    size_ = size;
    return {};
  }

  result<uint64_t> size() override { return size_; }
  result<int64_t> modified_ms() override {
    struct stat st {};
    if (::fstat(fd_, &st) != 0) return os_error("fstat", path_, errno);
    return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1'000'000;
  }
  int native_handle() const override { return fd_; }

  void write_behind(uint64_t pos, uint64_t len) override {
    ::sync_file_range(fd_, static_cast<off_t>(pos), static_cast<off_t>(len), SYNC_FILE_RANGE_WRITE);
  }

  void advise_dontneed(uint64_t pos, uint64_t len) override {
    ::posix_fadvise(fd_, static_cast<off_t>(pos), static_cast<off_t>(len), POSIX_FADV_DONTNEED);
  }

  status reserve(uint64_t pos, uint64_t len) override {
    if (::fallocate(fd_, FALLOC_FL_KEEP_SIZE, static_cast<off_t>(pos), static_cast<off_t>(len)) != 0)
      return os_error("fallocate", path_, errno);
    return {};
  }

 private:
  status write_at(std::span<const std::byte> data, uint64_t pos) {
    size_t done = 0;
    while (done < data.size()) {
      ssize_t r = ::pwrite(fd_, data.data() + done, data.size() - done, static_cast<off_t>(pos + done));
      if (r < 0) {
        if (errno == EINTR) continue;
        return os_error("write", path_, errno);
      }
      done += static_cast<size_t>(r);
    }
    return {};
  }

  int fd_;
  std::string path_;
  uint64_t size_;
};

std::atomic<filesystem::sync_scope> posix_scope{filesystem::sync_scope::file};

// The files as POSIX files, or nullopt when one is not (a test double,
// which the base class's per-file syncs serve).
std::optional<std::vector<posix_file*>> as_posix(std::span<file* const> files) {
  std::vector<posix_file*> pf;
  pf.reserve(files.size());
  for (file* f : files) {
    auto* p = dynamic_cast<posix_file*>(f);
    if (!p) return std::nullopt;
    pf.push_back(p);
  }
  return pf;
}

// Each file synced by its own call (`sync` or `sync_data`), after the
// writeback of all of them was started when there are several: the device
// works on every file at once. One status per file.
std::vector<status> sync_each(const std::vector<posix_file*>& pf, status (file::*sync)()) {
  std::vector<status> st(pf.size());
  if (pf.size() > 1)
    for (auto* p : pf) p->start_writeback();
  for (size_t i = 0; i < pf.size(); ++i) st[i] = (pf[i]->*sync)();
  return st;
}

class posix_filesystem final : public filesystem {
 public:
  std::vector<status> sync_together(std::span<file* const> files) override { return together(files, false); }
  std::vector<status> sync_data_together(std::span<file* const> files) override { return together(files, true); }

  result<std::unique_ptr<file>> open(const std::string& path, open_mode mode) override {
    int flags = O_CLOEXEC;
    switch (mode) {
      case open_mode::read_only: flags |= O_RDONLY; break;
      case open_mode::read_write: flags |= O_RDWR; break;
      case open_mode::create: flags |= O_RDWR | O_CREAT; break;
      case open_mode::create_new: flags |= O_RDWR | O_CREAT | O_EXCL; break;
      case open_mode::truncate: flags |= O_RDWR | O_CREAT | O_TRUNC; break;
    }
    int fd = ::open(path.c_str(), flags, 0644);
    if (fd < 0) return os_error("open", path, errno);
    struct stat st;
    if (::fstat(fd, &st) != 0) {
      int e = errno;
      ::close(fd);
      return os_error("stat", path, e);
    }
    return std::unique_ptr<file>(std::make_unique<posix_file>(fd, path, static_cast<uint64_t>(st.st_size)));
  }

  status rename(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) return os_error("rename", from + " -> " + to, errno);
    return {};
  }

  status remove(const std::string& path) override {
    if (::unlink(path.c_str()) != 0) return os_error("remove", path, errno);
    return {};
  }

  status create_dirs(const std::string& path) override {
    std::error_code ec;
    std::filesystem::create_directories(path, ec);
    if (ec) return os_error("mkdir", path, ec.value());
    return {};
  }

  status remove_all(const std::string& path) override {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
    if (ec) return os_error("remove_all", path, ec.value());
    return {};
  }

  result<std::vector<std::string>> list(const std::string& dir) override {
    DIR* d = ::opendir(dir.c_str());
    if (!d) return os_error("opendir", dir, errno);
    std::vector<std::string> names;
    while (struct dirent* e = ::readdir(d)) {
      if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
      names.emplace_back(e->d_name);
    }
    ::closedir(d);
    return names;
  }

  bool exists(const std::string& path) override {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0;
  }

  status sync_dir(const std::string& dir) override {
    int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return os_error("open dir", dir, errno);
    int r = ::fsync(fd);
    int e = errno;
    ::close(fd);
    if (r != 0) return os_error("fsync dir", dir, e);
    return {};
  }

  result<uint64_t> free_bytes(const std::string& path) override {
    struct statvfs s;
    if (::statvfs(path.c_str(), &s) != 0) return os_error("statvfs", path, errno);
    return static_cast<uint64_t>(s.f_bavail) * s.f_frsize;
  }

  result<uint64_t> total_bytes(const std::string& path) override {
    struct statvfs s;
    if (::statvfs(path.c_str(), &s) != 0) return os_error("statvfs", path, errno);
    return static_cast<uint64_t>(s.f_blocks) * s.f_frsize;
  }

 private:
  // sync_together (`data` false) or sync_data_together (true).
  std::vector<status> together(std::span<file* const> files, bool data) {
    auto posix = as_posix(files);
    if (!posix) return data ? filesystem::sync_data_together(files) : filesystem::sync_together(files);
    const std::vector<posix_file*>& pf = *posix;
    if (pf.size() <= 1 || posix_scope.load(std::memory_order_relaxed) == sync_scope::file)
      return sync_each(pf, data ? &file::sync_data : &file::sync);
    std::vector<status> st(pf.size());
    if (data) {
      // Every file's pages go to the device together, each file reports its
      // own writeback errors, and the first one's fdatasync (with its data
      // written, nothing left but the flush) flushes the device's cache for
      // all of them: the same one-flush premise as syncfs below.
      for (auto* p : pf) p->start_writeback();
      for (size_t i = 1; i < pf.size(); ++i) st[i] = pf[i]->write_data();
      st[0] = pf[0]->sync_data();
      for (size_t i = 1; i < pf.size(); ++i)
        if (st[i].ok() && !st[0].ok()) st[i] = st[0];
      return st;
    }
    // syncfs writes and waits for every dirty page and inode of the file
    // system. On ext4 without a journal its last metadata writes come after
    // its device flush, so one fdatasync follows for a flush that covers
    // them; then each file reports its own writeback errors, which syncfs
    // reports only once for the whole file system.
    status all = pf[0]->sync_file_system();
    if (all.ok()) all = pf[0]->sync();
    for (size_t i = 0; i < pf.size(); ++i) st[i] = !all.ok() ? all : i == 0 ? status() : pf[i]->writeback_error();
    return st;
  }

};

}  // namespace

std::vector<status> filesystem::sync_data_together(std::span<file* const> files) {
  std::vector<status> st;
  st.reserve(files.size());
  for (file* f : files) st.push_back(f->sync_data());
  return st;
}

std::vector<status> filesystem::sync_together(std::span<file* const> files) {
  std::vector<status> st;
  st.reserve(files.size());
  for (file* f : files) st.push_back(f->sync());
  return st;
}

void filesystem::set_posix_sync_scope(sync_scope scope) { posix_scope.store(scope); }

filesystem& filesystem::posix() {
  static posix_filesystem fs;
  return fs;
}

std::string dirname(const std::string& path) {
  auto p = path.find_last_of('/');
  if (p == std::string::npos) return ".";
  if (p == 0) return "/";
  return path.substr(0, p);
}

std::string join(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  if (dir.back() == '/') return dir + name;
  return dir + "/" + name;
}

status filesystem::write_atomic(const std::string& path, std::span<const std::byte> contents) {
  const std::string tmp = path + ".tmp";
  {
    SLUICE_ASSIGN_OR_RETURN(auto f, open(tmp, open_mode::truncate));
    SLUICE_TRY(f->append(contents));
    SLUICE_TRY(f->sync());
  }
  SLUICE_TRY(rename(tmp, path));
  return sync_dir(dirname(path));
}

result<std::vector<std::byte>> filesystem::read_all(const std::string& path, size_t max_bytes) {
  SLUICE_ASSIGN_OR_RETURN(auto f, open(path, open_mode::read_only));
  SLUICE_ASSIGN_OR_RETURN(uint64_t n, f->size());
  if (n > max_bytes) {
    return error{errc::corrupt_data, path + ": " + std::to_string(n) + " bytes, more than the " +
                                         std::to_string(max_bytes) + " allowed"};
  }
  std::vector<std::byte> buf(n);
  SLUICE_ASSIGN_OR_RETURN(size_t got, f->pread(buf.data(), n, 0));
  buf.resize(got);
  return buf;
}

}  // namespace sluice::io
