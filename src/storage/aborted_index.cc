#include "storage/aborted_index.h"

#include <array>

#include "base/crc32c.h"
#include "base/endian.h"

namespace sluice::storage {
namespace {

constexpr int16_t entry_version = 0;

std::array<std::byte, aborted_index::entry_bytes> encode(const aborted_txn& e) {
  std::array<std::byte, aborted_index::entry_bytes> b{};
  store_be(b.data(), entry_version);
  store_be(b.data() + 2, e.producer_id);
  store_be(b.data() + 10, e.first.value());
  store_be(b.data() + 18, e.last.value());
  store_be(b.data() + 26, e.last_stable.value());
  store_be(b.data() + 34, crc32c(b.data(), 34));
  return b;
}

result<aborted_txn> decode(const std::byte* b) {
  if (load_be<uint32_t>(b + 34) != crc32c(b, 34)) return error{errc::corrupt_data, "aborted index entry: checksum"};
  if (load_be<int16_t>(b) != entry_version) return error{errc::corrupt_data, "aborted index entry: version"};
  aborted_txn e;
  e.producer_id = load_be<int64_t>(b + 2);
  e.first = offset(load_be<int64_t>(b + 10));
  e.last = offset(load_be<int64_t>(b + 18));
  e.last_stable = offset(load_be<int64_t>(b + 26));
  return e;
}

}  // namespace

result<std::unique_ptr<aborted_index>> aborted_index::open(io::filesystem& fs, std::string path) {
  std::unique_ptr<aborted_index> x(new aborted_index(fs, std::move(path)));
  if (!fs.exists(x->path_)) return x;
  SLUICE_ASSIGN_OR_RETURN(x->file_, fs.open(x->path_, io::open_mode::read_write));
  SLUICE_ASSIGN_OR_RETURN(uint64_t size, x->file_->size());
  size_t n = static_cast<size_t>(size / entry_bytes);
  // Keep the longest prefix of intact entries with ascending markers.
  size_t good = 0;
  std::optional<offset> last;
  for (; good < n; ++good) {
    auto e = x->read_locked(good);
    if (!e.ok() || (last && e->last <= *last)) break;
    last = e->last;
  }
  if (good * entry_bytes != size) {
    x->cut_ = n - good + (size % entry_bytes ? 1 : 0);
    SLUICE_TRY(x->file_->truncate(good * entry_bytes));
    SLUICE_TRY(x->file_->sync());
  }
  x->count_ = good;
  x->last_ = last;
  return x;
}

result<aborted_txn> aborted_index::read_locked(size_t i) const {
  std::array<std::byte, entry_bytes> b{};
  SLUICE_ASSIGN_OR_RETURN(size_t got, file_->pread(b.data(), b.size(), i * entry_bytes));
  if (got != b.size()) return error{errc::corrupt_data, path_ + ": short aborted index entry"};
  auto e = decode(b.data());
  if (!e.ok()) return error{e.code(), path_ + ": " + e.err().message};
  return e;
}

result<size_t> aborted_index::lower_bound_locked(offset o) const {
  size_t lo = 0, hi = count_;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    SLUICE_ASSIGN_OR_RETURN(auto e, read_locked(mid));
    if (e.last < o) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

status aborted_index::append(const aborted_txn& e) {
  std::lock_guard g(mu_);
  if (last_ && e.last <= *last_) {
    return status(errc::invalid_argument, "aborted index: marker " + std::to_string(e.last.value()) +
                                              " is not above the last one, " + std::to_string(last_->value()));
  }
  if (!file_) {
    SLUICE_ASSIGN_OR_RETURN(file_, fs_.open(path_, io::open_mode::create));
    SLUICE_TRY(file_->truncate(0));
  }
  auto b = encode(e);
  SLUICE_TRY(file_->pwrite(b, count_ * entry_bytes));
  dirty_ = true;
  ++count_;
  last_ = e.last;
  return {};
}

result<std::vector<aborted_txn>> aborted_index::collect(offset from, offset upper, size_t max) const {
  std::lock_guard g(mu_);
  std::vector<aborted_txn> out;
  if (!last_ || *last_ < from) return out;  // the common case: nothing aborted at or after `from`
  SLUICE_ASSIGN_OR_RETURN(size_t i, lower_bound_locked(from));
  for (; i < count_ && out.size() < max; ++i) {
    SLUICE_ASSIGN_OR_RETURN(auto e, read_locked(i));
    if (e.first < upper) out.push_back(e);
    if (e.last_stable >= upper) break;
  }
  return out;
}

status aborted_index::truncate_from(offset o) {
  std::lock_guard g(mu_);
  if (!last_ || *last_ < o) return {};
  SLUICE_ASSIGN_OR_RETURN(size_t keep, lower_bound_locked(o));
  SLUICE_TRY(file_->truncate(keep * entry_bytes));
  dirty_ = true;
  count_ = keep;
  last_.reset();
  if (keep > 0) {
    SLUICE_ASSIGN_OR_RETURN(auto e, read_locked(keep - 1));
    last_ = e.last;
  }
  return {};
}

status aborted_index::drop_below(offset start) {
  std::lock_guard g(mu_);
  SLUICE_ASSIGN_OR_RETURN(size_t dead, lower_bound_locked(start));
  if (dead == 0 || dead * 2 < count_) return {};
  std::vector<std::byte> rest((count_ - dead) * entry_bytes);
  if (!rest.empty()) {
    SLUICE_ASSIGN_OR_RETURN(size_t got, file_->pread(rest.data(), rest.size(), dead * entry_bytes));
    if (got != rest.size()) return status(errc::corrupt_data, path_ + ": short read while dropping entries");
  }
  SLUICE_TRY(fs_.write_atomic(path_, rest));
  SLUICE_ASSIGN_OR_RETURN(file_, fs_.open(path_, io::open_mode::read_write));
  dirty_ = false;  // write_atomic synced the whole file
  count_ -= dead;
  if (count_ == 0) last_.reset();
  return {};
}

status aborted_index::sync() {
  std::lock_guard g(mu_);
  if (!dirty_ || !file_) return {};
  SLUICE_TRY(file_->sync_data());
  dirty_ = false;
  return {};
}

size_t aborted_index::size() const {
  std::lock_guard g(mu_);
  return count_;
}

std::optional<offset> aborted_index::last_marker() const {
  std::lock_guard g(mu_);
  return last_;
}

}  // namespace sluice::storage
