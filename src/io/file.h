#pragma once

// The operating system's files behind a small interface (after LevelDB's
// Env), so storage tests can inject torn writes, failed syncs and full disks.
//
// Thread safety: a `file` may be read (pread) from several threads at once;
// writes (append, truncate, sync) must come from one thread at a time, which
// the owner (a segment) guarantees. `filesystem` methods are thread-safe.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"

namespace sluice::io {

// An OS call's failure as a value: "<what> <path>: <strerror> (<ENAME>)",
// with errc::no_space for ENOSPC/EDQUOT, not_found for ENOENT,
// already_exists for EEXIST and io_error otherwise.
error os_error(const char* what, const std::string& path, int err);

class file {
 public:
  virtual ~file() = default;

  // Reads up to `n` bytes at byte position `pos`; returns how many were read
  // (fewer only at end of file).
  virtual result<size_t> pread(void* buf, size_t n, uint64_t pos) = 0;
  // Appends all of `data` at the end of the file (a short write is an error).
  virtual status append(std::span<const std::byte> data) = 0;
  // Writes all of `data` at `pos` (used for in-place header rewrites and
  // index files); does not change the append position if pos < size.
  virtual status pwrite(std::span<const std::byte> data, uint64_t pos) = 0;
  // Makes all written data durable (fdatasync). Until it returns ok, nothing
  // written may be reported durable.
  virtual status sync() = 0;
  // Makes the bytes written below the file's durable size (the size the
  // last sync() made durable) durable, and nothing else: past it, bytes and
  // size may be lost in a crash. For overwrites of a prepared region (zeros
  // written and synced ahead of the data: storage/README.md, "Prepared
  // tails") it writes the data and flushes the device, but no metadata.
  // This one syncs all (sync()).
  virtual status sync_data() { return sync(); }
  // Cuts the file to `size` bytes.
  virtual status truncate(uint64_t size) = 0;
  // Current size in bytes (the append position).
  virtual result<uint64_t> size() = 0;
  // When the file's data last changed, in ms since the Unix epoch (its
  // mtime): what retention goes by for a segment whose batches carry no
  // timestamp, as Kafka does.
  virtual result<int64_t> modified_ms() = 0;
  // The OS descriptor for zero-copy sends (sendfile), or -1 when the file is
  // not backed by one (test doubles).
  virtual int native_handle() const = 0;
  // Tells the kernel the range will not be needed soon (page cache hint).
  virtual void advise_dontneed(uint64_t /*pos*/, uint64_t /*len*/) {}
  // Starts writing the range's dirty pages to the device without waiting
  // (sync_file_range(2) with SYNC_FILE_RANGE_WRITE): a later sync then has
  // less to write. A hint; errors surface in that sync.
  virtual void write_behind(uint64_t /*pos*/, uint64_t /*len*/) {}
  // Reserves disk blocks for the bytes [pos, pos + len) without changing
  // the file's size (fallocate(2) with FALLOC_FL_KEEP_SIZE): appends into
  // them allocate nothing, so syncing them writes the data and the inode's
  // size but no block bitmaps. Cutting the file (truncate) releases what
  // lies past the cut. A hint: after an error appends allocate as usual.
  // This one reserves nothing.
  virtual status reserve(uint64_t /*pos*/, uint64_t /*len*/) { return {}; }
};

enum class open_mode {
  read_only,      // must exist
  read_write,     // must exist
  create,         // create if missing, keep contents
  create_new,     // must not exist
  truncate,       // create or empty
};

class filesystem {
 public:
  virtual ~filesystem() = default;

  virtual result<std::unique_ptr<file>> open(const std::string& path, open_mode mode) = 0;
  virtual status rename(const std::string& from, const std::string& to) = 0;
  virtual status remove(const std::string& path) = 0;
  // Creates the directory and its parents if missing.
  virtual status create_dirs(const std::string& path) = 0;
  // Removes a directory and everything under it.
  virtual status remove_all(const std::string& path) = 0;
  // Names (not paths) of the entries of a directory.
  virtual result<std::vector<std::string>> list(const std::string& dir) = 0;
  virtual bool exists(const std::string& path) = 0;
  // fsyncs a directory so renames and creations in it are durable.
  virtual status sync_dir(const std::string& dir) = 0;
  // Bytes free on the file system that holds `path`.
  virtual result<uint64_t> free_bytes(const std::string& path) = 0;
  // Size in bytes of the file system that holds `path` (DescribeLogDirs).
  virtual result<uint64_t> total_bytes(const std::string& path) = 0;
  // Makes every file of `files` durable, as sync() on each would: the
  // group commit of many logs at once. Returns one status per file, in
  // order; an ok one means that file is durable. This one syncs each file
  // in turn; the POSIX file system may do it with fewer device flushes
  // (posix_sync_scope).
  virtual std::vector<status> sync_together(std::span<file* const> files);
  // The same for sync_data(): every file's data below its durable size.
  // On the POSIX file system with posix_sync_scope `filesystem`, the
  // writeback of every file is started, then waited for (each file's own
  // errors), then one fdatasync flushes the device for all: no syncfs, no
  // metadata, no other program's files. This one calls sync_data on each.
  virtual std::vector<status> sync_data_together(std::span<file* const> files);

  // The real, POSIX file system. Lives for the whole process.
  static filesystem& posix();
  // How the POSIX file system's sync_together works. `file`: writeback of
  // every file is started first (sync_file_range), then each is
  // fdatasynced, so the device works on all of them at once. `filesystem`:
  // one syncfs(2) of the file system that holds them, then one fdatasync
  // for the device flush, then each file's own writeback errors are
  // collected (sync_file_range's wait): one flush for the whole round
  // instead of one per file, but everything dirty on that file system is
  // written too, other programs' files included. Set once at start-up,
  // before any sync.
  enum class sync_scope { file, filesystem };
  static void set_posix_sync_scope(sync_scope scope);

  // Writes `contents` to `path` atomically: a temporary file is written and
  // synced, renamed over `path`, and the directory is synced. After a crash
  // the file holds either the old or the new contents, never a mix.
  status write_atomic(const std::string& path, std::span<const std::byte> contents);
  // Reads a whole (small) file.
  result<std::vector<std::byte>> read_all(const std::string& path, size_t max_bytes);
};

std::string dirname(const std::string& path);
std::string join(const std::string& dir, const std::string& name);

}  // namespace sluice::io
