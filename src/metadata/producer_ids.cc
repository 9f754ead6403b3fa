#include "metadata/producer_ids.h"

#include <cstdio>
#include <string>

#include "base/limits.h"

namespace sluice::cluster {

result<std::unique_ptr<producer_id_allocator>> producer_id_allocator::open(io::filesystem& fs, std::string path) {
  std::unique_ptr<producer_id_allocator> a(new producer_id_allocator(fs, std::move(path)));
  if (fs.exists(a->path_)) {
    SLUICE_ASSIGN_OR_RETURN(auto bytes, fs.read_all(a->path_, 64));
    std::string text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    long long v = -1;
    char tail = 0;
    if (std::sscanf(text.c_str(), "next-block %lld%c", &v, &tail) != 2 || tail != '\n' || v < 0) {
      return error{errc::corrupt_data, a->path_ + ": not a producer id checkpoint"};
    }
    a->next_ = a->reserved_ = v;
  }
  return a;
}

result<int64_t> producer_id_allocator::next() {
  std::lock_guard g(mu_);
  if (next_ >= reserved_ && source_) {
    SLUICE_ASSIGN_OR_RETURN(const int64_t first, source_(block_size));
    next_ = first;
    reserved_ = first + block_size;
  } else if (next_ >= reserved_) {
    int64_t end = next_ + block_size;
    std::string text = "next-block " + std::to_string(end) + "\n";
    SLUICE_TRY(fs_.write_atomic(path_, {reinterpret_cast<const std::byte*>(text.data()), text.size()}));
    reserved_ = end;
  }
  return next_++;
}

std::optional<int64_t> producer_id_allocator::try_next() {
  std::lock_guard g(mu_);
  if (next_ >= reserved_) return std::nullopt;
  return next_++;
}

void producer_id_allocator::set_block_source(block_source source) {
  std::lock_guard g(mu_);
  source_ = std::move(source);
  next_ = reserved_ = 0;  // the local file's block is not the cluster's
}

}  // namespace sluice::cluster
