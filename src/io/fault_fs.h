#pragma once

// A filesystem that wraps another and injects faults, for tests (after
// LevelDB's fault_injection_test): failing syncs, a full disk, a crash in the
// middle of a write (a torn write), and power loss (unsynced bytes vanish).
//
// Thread-safe: faults may be armed from the test thread while the code under
// test writes from others. Files opened through it stay fault-injected for
// their whole life.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "io/file.h"

namespace sluice::io {

class fault_fs final : public filesystem {
 public:
  explicit fault_fs(filesystem& base) : base_(base) {}

  // The next `n` syncs (file or directory) fail with io_error; n < 0 means
  // every sync from now on. 0 disarms.
  void fail_syncs(int n);
  // After `bytes` more bytes are written (append/pwrite, all files), writes
  // fail with no_space; the write that crosses the limit stores only the
  // bytes that fit. Other operations keep working, as on a full disk.
  // nullopt disarms.
  void set_space_left(std::optional<uint64_t> bytes);
  // After `bytes` more bytes are written, the machine "crashes": the write
  // that crosses the limit stores only the bytes that fit (a torn write) and
  // every later mutating call fails with io_error. nullopt disarms.
  void crash_after_bytes(std::optional<uint64_t> bytes);
  // After `ops` more mutating calls succeed (open for writing, append,
  // pwrite, truncate, sync, rename, remove, sync_dir, create_dirs,
  // remove_all), the machine "crashes": the next such call fails with
  // io_error without any effect, and so does every later one, as after
  // crash_after_bytes. Counting every step lets a test crash a multi-step
  // procedure (compaction's swap) at each step in turn. nullopt disarms.
  void crash_after_ops(std::optional<uint64_t> ops);
  // Mutating calls that succeeded so far (to size a crash_after_ops sweep).
  uint64_t ops() const;
  // Power loss: every write below a file's durable size that no sync or
  // sync_data covered since is undone (its old bytes come back), then the
  // file is cut back to its durable size: the size at its last successful
  // sync(). sync_data() makes writes below that size durable, never the
  // size (the model of a data-only sync).
  status drop_unsynced();
  // Simulated syncs: a sync succeeds (and counts for drop_unsynced) without
  // reaching the device, so tests of crash behaviour run at memory speed.
  void simulate_syncs(bool on);
  bool crashed() const;
  uint64_t syncs() const;
  // Successful sync_data calls (of files; the others count in syncs() too).
  uint64_t data_syncs() const;
  // Called on the syncing thread before each sync (file or directory), with
  // no lock held; may block (a test holding a flusher mid-sync). Set it
  // before the filesystem is shared.
  void on_sync(std::function<void(const std::string& path)> fn) { on_sync_ = std::move(fn); }

  result<std::unique_ptr<file>> open(const std::string& path, open_mode mode) override;
  status rename(const std::string& from, const std::string& to) override;
  status remove(const std::string& path) override;
  status create_dirs(const std::string& path) override;
  status remove_all(const std::string& path) override;
  result<std::vector<std::string>> list(const std::string& dir) override;
  bool exists(const std::string& path) override;
  status sync_dir(const std::string& dir) override;
  result<uint64_t> free_bytes(const std::string& path) override;
  result<uint64_t> total_bytes(const std::string& path) override;

 private:
  friend class fault_file;
  // How many of `n` bytes a write may store, and the error for the rest.
  std::pair<size_t, std::optional<error>> admit_write(const std::string& path, size_t n);
  status check_alive(const char* what, const std::string& path);
  // check_alive plus one step of the crash_after_ops budget.
  status count_op(const char* what, const std::string& path);
  // ok to go on with the real sync; nullopt-like `skip` when simulated.
  status check_sync(const std::string& path, bool& skip);
  void note_synced(const std::string& path, uint64_t size);
  void note_data_synced(const std::string& path);
  // Before a write of [pos, pos + n) or a cut to `size` of `base`: the file
  // is tracked from now on, and a write keeps the old bytes of its part
  // below the durable size, for drop_unsynced to put back.
  void note_write(const std::string& path, file& base, uint64_t pos, size_t n);
  void note_truncate(const std::string& path, file& base, uint64_t size);
  std::map<std::string, uint64_t>::iterator track_locked(const std::string& path, file& base);

  filesystem& base_;
  mutable std::mutex mu_;
  int failing_syncs_ = 0;
  std::optional<uint64_t> space_left_;
  std::optional<uint64_t> crash_budget_;
  std::optional<uint64_t> op_budget_;
  uint64_t ops_ = 0;
  bool crashed_ = false;
  bool simulate_syncs_ = false;
  uint64_t syncs_ = 0;
  uint64_t data_syncs_ = 0;
  std::map<std::string, uint64_t> synced_size_;  // files written through us
  // Per file, overwrites below the durable size not synced yet: (pos, old bytes), in write order.
  std::map<std::string, std::vector<std::pair<uint64_t, std::vector<std::byte>>>> undo_;
  std::function<void(const std::string&)> on_sync_;
};

}  // namespace sluice::io
