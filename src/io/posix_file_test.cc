// The POSIX file system's group sync (sync_together) in both scopes, the
// per-file fallback for files that are not its own, and block reservation.

#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "io/file.h"

namespace sluice::io {
namespace {

class temp_dir {
 public:
  temp_dir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "sluice-io-test-XXXXXX").string();
    EXPECT_NE(::mkdtemp(tmpl.data()), nullptr);
    path_ = tmpl;
  }
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string sub(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// A file whose sync fails: it is not the POSIX file system's own.
class failing_file final : public file {
 public:
  result<size_t> pread(void*, size_t, uint64_t) override { return size_t{0}; }
  status append(std::span<const std::byte>) override { return {}; }
  status pwrite(std::span<const std::byte>, uint64_t) override { return {}; }
  status sync() override { return error{errc::io_error, "injected"}; }
  status truncate(uint64_t) override { return {}; }
  result<uint64_t> size() override { return uint64_t{0}; }
  result<int64_t> modified_ms() override { return int64_t{0}; }
  int native_handle() const override { return -1; }
};

struct scope_reset {
  ~scope_reset() { filesystem::set_posix_sync_scope(filesystem::sync_scope::file); }  // the default
};

void sync_many_in(filesystem::sync_scope scope) {
  scope_reset reset;
  filesystem::set_posix_sync_scope(scope);
  temp_dir tmp;
  filesystem& fs = filesystem::posix();
  std::vector<std::unique_ptr<file>> files;
  std::vector<file*> raw;
  for (int i = 0; i < 5; ++i) {
    auto f = fs.open(tmp.sub("f" + std::to_string(i)), open_mode::truncate);
    ASSERT_TRUE(f.ok()) << f.err().message;
    std::vector<std::byte> data(1000 + static_cast<size_t>(i), std::byte{static_cast<unsigned char>('a' + i)});
    ASSERT_TRUE((*f)->append(data).ok());
    raw.push_back(f->get());
    files.push_back(std::move(f).value());
  }
  EXPECT_TRUE(fs.sync_together({}).empty());
  std::vector<status> st = fs.sync_together(raw);
  ASSERT_EQ(st.size(), raw.size());
  for (const auto& s : st) EXPECT_TRUE(s.ok()) << s.err().message;
  // One file alone, and a second round with nothing new written.
  st = fs.sync_together(std::span<file* const>(raw.data(), 1));
  ASSERT_EQ(st.size(), 1u);
  EXPECT_TRUE(st[0].ok());
  st = fs.sync_together(raw);
  for (const auto& s : st) EXPECT_TRUE(s.ok()) << s.err().message;
  for (int i = 0; i < 5; ++i) EXPECT_EQ(*files[static_cast<size_t>(i)]->size(), 1000u + static_cast<uint64_t>(i));
  // Overwrites inside the synced sizes (a prepared tail's case): a
  // data-only round, then the bytes read back.
  for (size_t i = 0; i < raw.size(); ++i)
    ASSERT_TRUE(raw[i]->pwrite(std::vector<std::byte>(100, std::byte{'z'}), 500).ok());
  EXPECT_TRUE(fs.sync_data_together({}).empty());
  st = fs.sync_data_together(raw);
  ASSERT_EQ(st.size(), raw.size());
  for (const auto& s : st) EXPECT_TRUE(s.ok()) << s.err().message;
  st = fs.sync_data_together(std::span<file* const>(raw.data(), 1));
  ASSERT_EQ(st.size(), 1u);
  EXPECT_TRUE(st[0].ok());
  for (size_t i = 0; i < raw.size(); ++i) {
    std::vector<std::byte> back(1000);
    ASSERT_EQ(*raw[i]->pread(back.data(), back.size(), 0), back.size());
    EXPECT_EQ(back[499], std::byte{static_cast<unsigned char>('a' + i)});
    EXPECT_EQ(back[500], std::byte{'z'});
    EXPECT_EQ(back[599], std::byte{'z'});
    EXPECT_EQ(back[600], std::byte{static_cast<unsigned char>('a' + i)});
  }
}

TEST(PosixSyncTogether, SyncsEveryFileWithOneSyncfs) { sync_many_in(filesystem::sync_scope::filesystem); }

TEST(PosixSyncTogether, SyncsEveryFileWithItsOwnFdatasync) { sync_many_in(filesystem::sync_scope::file); }

TEST(PosixSyncTogether, FilesNotItsOwnAreSyncedOneByOneWithTheirOwnOutcome) {
  temp_dir tmp;
  filesystem& fs = filesystem::posix();
  auto good = fs.open(tmp.sub("good"), open_mode::truncate);
  ASSERT_TRUE(good.ok());
  std::vector<std::byte> data(10, std::byte{1});
  ASSERT_TRUE((*good)->append(data).ok());
  failing_file bad;
  std::vector<file*> files{good->get(), &bad, good->get()};
  std::vector<status> st = fs.sync_together(files);
  ASSERT_EQ(st.size(), 3u);
  EXPECT_TRUE(st[0].ok());
  EXPECT_EQ(st[1].code(), errc::io_error);
  EXPECT_TRUE(st[2].ok());
  st = fs.sync_data_together(files);
  ASSERT_EQ(st.size(), 3u);
  EXPECT_TRUE(st[0].ok());
  EXPECT_EQ(st[1].code(), errc::io_error);
  EXPECT_TRUE(st[2].ok());
}

// Bytes of disk the file at `path` holds (its allocated blocks).
uint64_t allocated_bytes(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0);
  return static_cast<uint64_t>(st.st_blocks) * 512;
}

TEST(PosixFile, ReserveHoldsBlocksWithoutChangingTheSizeAndTruncateReleasesThem) {
  temp_dir tmp;
  const std::string path = tmp.sub("seg");
  auto f = filesystem::posix().open(path, open_mode::truncate);
  ASSERT_TRUE(f.ok()) << f.err().message;
  std::vector<std::byte> data(4096, std::byte{7});
  ASSERT_TRUE((*f)->append(data).ok());
  ASSERT_TRUE((*f)->reserve(4096, 1 << 20).ok());
  EXPECT_EQ(*(*f)->size(), 4096u);
  EXPECT_EQ(std::filesystem::file_size(path), 4096u);
  EXPECT_GE(allocated_bytes(path), (1u << 20) + 4096u);
  // Appends go into the reserved blocks; the size follows the data only.
  ASSERT_TRUE((*f)->append(data).ok());
  ASSERT_TRUE((*f)->sync().ok());
  EXPECT_EQ(std::filesystem::file_size(path), 8192u);
  EXPECT_GE(allocated_bytes(path), (1u << 20) + 4096u);
  // Cutting the file at its own size gives back what lies past it.
  ASSERT_TRUE((*f)->truncate(8192).ok());
  EXPECT_EQ(std::filesystem::file_size(path), 8192u);
  EXPECT_LE(allocated_bytes(path), 8192u);
}

}  // namespace
}  // namespace sluice::io
