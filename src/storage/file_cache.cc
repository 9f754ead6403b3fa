#include "storage/file_cache.h"

namespace sluice::storage {

file_cache::file_cache(io::filesystem& fs, size_t max_open) : fs_(fs), max_open_(max_open ? max_open : 1) {}

result<std::shared_ptr<io::file>> file_cache::get(const std::string& path) {
  {
    std::lock_guard g(mu_);
    auto it = files_.find(path);
    if (it != files_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second.lru);
      return it->second.file;
    }
  }
  // Opening happens outside the lock; two racing opens of one path are
  // harmless (the second insert wins, both descriptors are valid).
  SLUICE_ASSIGN_OR_RETURN(auto f, fs_.open(path, io::open_mode::read_write));
  return put(path, std::move(f));
}

std::shared_ptr<io::file> file_cache::put(const std::string& path, std::unique_ptr<io::file> f) {
  std::shared_ptr<io::file> shared(std::move(f));
  std::lock_guard g(mu_);
  insert_locked(path, shared);
  return shared;
}

void file_cache::insert_locked(const std::string& path, std::shared_ptr<io::file> f) {
  ++opens_;
  auto it = files_.find(path);
  if (it != files_.end()) {
    it->second.file = std::move(f);
    lru_.splice(lru_.begin(), lru_, it->second.lru);
    return;
  }
  lru_.push_front(path);
  files_.emplace(path, slot{std::move(f), lru_.begin()});
  while (files_.size() > max_open_) {
    files_.erase(lru_.back());
    lru_.pop_back();
  }
}

void file_cache::forget(const std::string& path) {
  std::lock_guard g(mu_);
  auto it = files_.find(path);
  if (it == files_.end()) return;
  lru_.erase(it->second.lru);
  files_.erase(it);
}

size_t file_cache::open_count() const {
  std::lock_guard g(mu_);
  return files_.size();
}

uint64_t file_cache::opens() const {
  std::lock_guard g(mu_);
  return opens_;
}

}  // namespace sluice::storage
