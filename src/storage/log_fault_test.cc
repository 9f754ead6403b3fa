// Fault tests through io::fault_fs: torn writes at every byte of the last
// batch, a flipped bit in a middle batch (removed, later batches kept),
// failing fsync, a full disk and power loss; flush.messages and flush.ms.

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>

#include "io/fault_fs.h"
#include "model/record_batch.h"
#include "storage/log.h"
#include "storage/segment.h"
#include "storage/test_util.h"

namespace sluice::storage {

namespace batch = model::batch;
namespace {

using testing::log_env;
using testing::make_batch;
using testing::temp_dir;

struct written {
  offset base, last;
  std::vector<std::byte> bytes;
  uint64_t pos;  // in its segment file
};

std::shared_ptr<log> open_log(log_env& env, const std::string& dir, log_config cfg = {}) {
  auto r = log::open(env.ctx(), dir, "p-0", cfg);
  EXPECT_TRUE(r.ok()) << r.err().message;
  return r.ok() ? *r : nullptr;
}

std::vector<written> append_n(log& l, int n, uint32_t seed, uint64_t pos = 0) {
  std::vector<written> out;
  for (int i = 0; i < n; ++i) {
    auto b = make_batch(1 + i % 3, 40, seed + static_cast<uint32_t>(i));
    auto r = l.append(b, leader_epoch(1));
    EXPECT_TRUE(r.ok()) << r.err().message;
    out.push_back({r->base, r->last, b, pos});
    pos += b.size();
  }
  return out;
}

std::vector<std::byte> concat(const std::vector<written>& ws) {
  std::vector<std::byte> out;
  for (const auto& w : ws) out.insert(out.end(), w.bytes.begin(), w.bytes.end());
  return out;
}

std::vector<std::byte> read_everything(log& l) {
  std::vector<std::byte> out;
  offset o = l.log_start_offset();
  while (o < l.log_end_offset()) {
    auto r = l.read_bytes(o, 1 << 20);
    EXPECT_TRUE(r.ok());
    if (!r.ok() || r->empty()) break;
    out.insert(out.end(), r->begin(), r->end());
    o = l.read(o, 1 << 20)->next_offset;
  }
  return out;
}

TEST(LogFault, TornWriteAtEveryByteOfTheLastBatch) {
  temp_dir tmp;
  const std::string seed_dir = tmp.sub("seed");
  std::vector<written> before;
  {
    log_env env;
    auto l = open_log(env, seed_dir);
    before = append_n(*l, 6, 100);
    // Left without close(): the copies below start from an unclean state.
  }
  const auto last = make_batch(3, 40, 999);
  int runs = 0;
  for (size_t k = 0; k <= last.size(); ++k, ++runs) {
    const std::string dir = tmp.sub("run-" + std::to_string(k));
    std::filesystem::copy(seed_dir, dir);
    auto b = last;  // stamped in place by the append: the bytes written
    {
      io::fault_fs ffs(io::filesystem::posix());
      log_env env(ffs);
      auto l = open_log(env, dir);
      ffs.crash_after_bytes(k);
      auto r = l->append(b, leader_epoch(1));
      ASSERT_EQ(r.ok(), k == last.size()) << k;
    }
    log_env env;
    auto l = open_log(env, dir);
    if (k == last.size()) {
      EXPECT_EQ(l->log_end_offset(), before.back().last + 4);
      EXPECT_FALSE(l->recovery().truncated);
      continue;
    }
    // Exactly the whole batches before the torn one, bit for bit.
    EXPECT_EQ(l->log_end_offset(), before.back().last + 1) << k;
    EXPECT_EQ(read_everything(*l), concat(before)) << k;
    // A torn write whose bytes are all zeros (the first bytes of a base
    // offset) cannot be told from a prepared tail: it is cut as one,
    // silently.
    const bool seen = std::any_of(b.begin(), b.begin() + static_cast<ptrdiff_t>(k),
                                  [](std::byte b) { return b != std::byte{0}; });
    EXPECT_EQ(l->recovery().truncated, seen) << k;
    if (seen) {
      // Counted up to the last non-zero byte (the same reason).
      size_t written = k;
      while (b[written - 1] == std::byte{0}) --written;
      EXPECT_EQ(l->recovery().bytes_dropped, written);
      EXPECT_EQ(l->recovery().position, before.back().pos + before.back().bytes.size());
    }
    // And the log takes appends again where it was cut.
    auto again = make_batch(1, 10, 5);
    auto r = l->append(again, leader_epoch(1));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->base, before.back().last + 1);
    std::filesystem::remove_all(dir);
  }
  EXPECT_EQ(runs, static_cast<int>(last.size()) + 1);
}

TEST(LogFault, FlippedBitInMiddleBatchIsRemovedAndLaterBatchesKept) {
  temp_dir tmp;
  const std::string seed_dir = tmp.sub("seed");
  std::vector<written> ws;
  {
    log_env env;
    auto l = open_log(env, seed_dir);
    ws = append_n(*l, 10, 7);
  }
  const written& victim = ws[5];
  // Bytes in the length, magic, CRC, CRC-covered header fields and records.
  for (size_t at : {batch::length_pos + 1, batch::magic_pos, batch::crc_pos + 1, batch::attributes_pos + 1,
                    batch::max_timestamp_pos + 5, batch::records_count_pos + 1, batch::header_bytes,
                    victim.bytes.size() / 2, victim.bytes.size() - 1}) {
    const std::string dir = tmp.sub("flip-" + std::to_string(at));
    std::filesystem::copy(seed_dir, dir);
    {
      auto f = io::filesystem::posix().open(segment_path(dir, offset(0), "log"), io::open_mode::read_write);
      ASSERT_TRUE(f.ok());
      std::byte b;
      ASSERT_TRUE((*f)->pread(&b, 1, victim.pos + at).ok());
      b ^= std::byte{0x10};
      ASSERT_TRUE((*f)->pwrite(std::span(&b, 1), victim.pos + at).ok());
    }
    log_env env;
    auto l = open_log(env, dir);
    // docs/log_format.md, "Damaged batches": the batch is removed, its
    // offsets become a gap, and the batches after it stay (more cases in
    // log_damage_test.cc).
    EXPECT_EQ(l->log_end_offset(), ws.back().last + 1) << at;
    EXPECT_FALSE(l->recovery().truncated) << at;
    EXPECT_EQ(l->recovery().damaged_ranges, 1u) << at;
    std::vector<written> kept(ws.begin(), ws.begin() + 5);
    kept.insert(kept.end(), ws.begin() + 6, ws.end());
    EXPECT_EQ(read_everything(*l), concat(kept)) << at;
  }
}

TEST(LogFault, FailingFsyncIsAnErrorAndNeverDurable) {
  temp_dir tmp;
  io::fault_fs ffs(io::filesystem::posix());
  std::vector<written> durable;
  {
    log_env env(ffs);
    auto l = open_log(env, tmp.sub("p-0"));
    durable = append_n(*l, 3, 1);
    ASSERT_TRUE(l->wait_durable(durable.back().last).ok());
    const offset durable_before = l->durable_offset();
    ffs.fail_syncs(-1);
    auto more = append_n(*l, 2, 50, durable.back().pos + durable.back().bytes.size());
    std::promise<errc> first;
    l->on_durable(more[0].last, [&](const status& st) { first.set_value(st.code()); });
    // The waiter pending when the sync fails learns the cause...
    EXPECT_EQ(first.get_future().get(), errc::io_error);
    // ...and any later one that the log is offline.
    status st = l->wait_durable(more.back().last);
    EXPECT_EQ(st.code(), errc::log_offline);
    EXPECT_EQ(l->durable_offset(), durable_before);  // never reported durable
    EXPECT_TRUE(l->offline());
    auto b = make_batch(1, 10, 1);
    EXPECT_EQ(l->append(b, leader_epoch(1)).code(), errc::log_offline);
    EXPECT_EQ(l->wait_durable(more[0].last).code(), errc::log_offline);
    // Reads of what was written keep working.
    EXPECT_EQ(l->read_bytes(offset(0), 1)->size(), durable[0].bytes.size());
    EXPECT_EQ(l->close().code(), errc::log_offline);
  }
  ffs.fail_syncs(0);
  ASSERT_TRUE(ffs.drop_unsynced().ok());  // and then the power goes
  log_env env;
  auto l = open_log(env, tmp.sub("p-0"));
  EXPECT_GE(l->log_end_offset(), durable.back().last + 1);
  auto all = read_everything(*l);
  auto want = concat(durable);
  ASSERT_GE(all.size(), want.size());
  EXPECT_TRUE(std::equal(want.begin(), want.end(), all.begin()));
}

TEST(LogFault, FullDiskRefusesWritesUntilSpaceReturns) {
  temp_dir tmp;
  io::fault_fs ffs(io::filesystem::posix());
  std::vector<written> durable;
  {
    log_env env(ffs);
    auto l = open_log(env, tmp.sub("p-0"));
    durable = append_n(*l, 4, 3);
    ASSERT_TRUE(l->wait_durable(durable.back().last).ok());
    ffs.set_space_left(100);
    // The write that crosses the limit stores part of the batch; the log
    // cuts it off and refuses the batch, and stays writable.
    auto big = make_batch(5, 100, 77);
    EXPECT_EQ(l->append(big, leader_epoch(1)).code(), errc::no_space);
    EXPECT_FALSE(l->offline());
    EXPECT_TRUE(l->out_of_space());
    EXPECT_EQ(l->log_end_offset(), durable.back().last + 1);
    auto again = make_batch(5, 100, 79);
    EXPECT_EQ(l->append(again, leader_epoch(1)).code(), errc::no_space);
    EXPECT_EQ(l->out_of_space_errors(), 2u);
    EXPECT_EQ(read_everything(*l), concat(durable));
    // Space returns: the next append goes through, at the next offset,
    // right after the last good batch, and is made durable.
    ffs.set_space_left(std::nullopt);
    auto small = make_batch(1, 1, 78);
    auto r = l->append(small, leader_epoch(1));
    ASSERT_TRUE(r.ok()) << r.err().message;
    EXPECT_EQ(r->base, durable.back().last + 1);
    EXPECT_FALSE(l->out_of_space());
    ASSERT_TRUE(l->wait_durable(r->last).ok());
    durable.push_back({r->base, r->last, small, 0});
    EXPECT_EQ(read_everything(*l), concat(durable));
    // And a clean close works (a full disk used to fail the shutdown).
    EXPECT_TRUE(l->close().ok());
  }
  log_env env;
  auto l = open_log(env, tmp.sub("p-0"));
  EXPECT_EQ(l->log_end_offset(), durable.back().last + 1);
  EXPECT_EQ(read_everything(*l), concat(durable));
  EXPECT_FALSE(l->offline());
  EXPECT_TRUE(l->recovery().clean_shutdown);
}

TEST(LogFault, FullDiskDuringARollIsRetriedByTheNextAppend) {
  temp_dir tmp;
  io::fault_fs ffs(io::filesystem::posix());
  log_config cfg = testing::small_config();
  std::vector<written> all;
  {
    log_env env(ffs);
    auto l = open_log(env, tmp.sub("p-0"), cfg);
    all = append_n(*l, 3, 1);
    // Fill the disk until an append fails, whatever step of it (segment
    // write, index files, the new segment, the checkpoint) meets the limit.
    for (uint64_t space = 0; space < 4096; space += 97) {
      ffs.set_space_left(space);
      auto b = make_batch(3, 200, static_cast<uint32_t>(space));
      auto r = l->append(b, leader_epoch(1));
      if (r.ok()) {
        all.push_back({r->base, r->last, b, 0});
        continue;
      }
      EXPECT_EQ(r.code(), errc::no_space);
      EXPECT_FALSE(l->offline());
    }
    ffs.set_space_left(std::nullopt);
    auto more = append_n(*l, 20, 900);  // rolls several times
    all.insert(all.end(), more.begin(), more.end());
    ASSERT_TRUE(l->wait_durable(all.back().last).ok());
    EXPECT_EQ(read_everything(*l), concat(all));
    EXPECT_TRUE(l->close().ok());
  }
  log_env env;
  auto l = open_log(env, tmp.sub("p-0"), cfg);
  EXPECT_EQ(read_everything(*l), concat(all));
}

TEST(LogFault, PowerLossKeepsEverythingReportedDurable) {
  temp_dir tmp;
  log_config cfg = testing::small_config();  // many rolls and checkpoints
  for (int round = 0; round < 5; ++round) {
    io::fault_fs ffs(io::filesystem::posix());
    offset durable_end;
    std::vector<std::byte> durable_bytes;
    {
      log_env env(ffs);
      auto l = open_log(env, tmp.sub("p-0"), cfg);
      const offset start = l->log_end_offset();
      auto ws = append_n(*l, 20 + round * 5, static_cast<uint32_t>(round * 1000));
      ASSERT_TRUE(l->wait_durable(ws[ws.size() / 2].last).ok());
      durable_end = l->durable_offset();
      append_n(*l, 7, 555);  // never waited for
      // What is durable is whatever was in [start, durable_end).
      for (offset o = start; o < durable_end;) {
        auto r = l->read(o, 1 << 20, durable_end);
        ASSERT_TRUE(r.ok());
        std::vector<std::byte> buf(r->len);
        ASSERT_TRUE(r->file->pread(buf.data(), r->len, r->pos).ok());
        durable_bytes.insert(durable_bytes.end(), buf.begin(), buf.end());
        o = r->next_offset;
      }
      ASSERT_TRUE(ffs.drop_unsynced().ok());
    }
    log_env env;
    auto l = open_log(env, tmp.sub("p-0"), cfg);
    ASSERT_GE(l->log_end_offset(), durable_end) << round;
    // Compare the durable part of this round bit for bit.
    std::vector<std::byte> all = read_everything(*l);
    ASSERT_GE(all.size(), durable_bytes.size());
    // The durable bytes of this round are a contiguous run inside `all`.
    EXPECT_NE(std::search(all.begin(), all.end(), durable_bytes.begin(), durable_bytes.end()), all.end());
    ASSERT_TRUE(l->truncate_to(durable_end).ok());  // next round starts from the durable end
    ASSERT_TRUE(l->close().ok());
  }
}

// Issue 31: the first append of a new leader epoch syncs nothing on the
// appending thread (it wrote the epoch checkpoint with two fsyncs there).
// The history still survives power loss at any point: recovery rebuilds it
// from the batches past the recovery point, and the seal that moves the
// recovery point past an epoch's start writes the checkpoint first.
TEST(LogFault, ANewLeaderEpochSyncsNothingOnTheAppendAndSurvivesPowerLoss) {
  temp_dir tmp;
  log_config cfg = testing::small_config();
  std::vector<epoch_entry> want;
  {
    io::fault_fs ffs(io::filesystem::posix());
    // Syncs made on this (the appending) thread; the flusher's run beside.
    const auto me = std::this_thread::get_id();
    std::atomic<int> mine{0};
    ffs.on_sync([&](const std::string&) {
      if (std::this_thread::get_id() == me) ++mine;
    });
    log_env env(ffs);
    auto l = open_log(env, tmp.sub("p-0"), cfg);
    for (int32_t e = 1; e <= 6; ++e) {
      const int before = mine.load();
      auto b = make_batch(2, 40, static_cast<uint32_t>(e));
      auto r = l->append(b, leader_epoch(e));
      ASSERT_TRUE(r.ok()) << r.err().message;
      EXPECT_EQ(mine.load(), before) << "epoch " << e << " synced on the append";
      // More batches in the epoch: some epochs run across rolls and seals.
      for (int i = 0; i < (e % 2 == 0 ? 40 : 3); ++i) {
        auto more = make_batch(1 + i % 3, 40, static_cast<uint32_t>(e * 100 + i));
        ASSERT_TRUE(l->append(more, leader_epoch(e)).ok());
      }
      if (e == 3) {
        ASSERT_TRUE(l->wait_durable(l->log_end_offset() - 1).ok());  // a seal between epochs
      }
    }
    want = l->leader_epochs();
    ASSERT_EQ(want.size(), 6u);
    ASSERT_TRUE(l->wait_durable(l->log_end_offset() - 1).ok());
    // Power loss, the log not closed. The machine stops first: the
    // flusher may be sealing meanwhile, and a write that went on after the
    // loss (a checkpoint's file cut to its synced size, then synced and
    // renamed over the old one) is one no real power loss can leave.
    ffs.crash_after_ops(0);
    ASSERT_TRUE(ffs.drop_unsynced().ok());
  }
  log_env env;
  auto l = open_log(env, tmp.sub("p-0"), cfg);
  EXPECT_EQ(l->leader_epochs(), want);
  ASSERT_TRUE(l->close().ok());
  // And after a clean close, which writes it and scans nothing.
  auto again = open_log(env, tmp.sub("p-0"), cfg);
  EXPECT_EQ(again->leader_epochs(), want);
  ASSERT_TRUE(again->close().ok());
}

bool append_one(log& l, int32_t records, uint32_t seed) {
  auto b = make_batch(records, 40, seed);
  return l.append(b, leader_epoch(1)).ok();
}

// Polls until the log's durable offset reaches `o` (10 s at most).
bool durable_soon(const log& l, offset o) {
  for (int i = 0; i < 1000 && l.durable_offset() < o; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return l.durable_offset() >= o;
}

TEST(LogFault, FlushMessagesSyncsWithoutWaitersAndSurvivesPowerLoss) {
  temp_dir tmp;
  io::fault_fs ffs(io::filesystem::posix());
  log_config cfg;
  cfg.flush_messages = 8;
  offset end;
  {
    log_env env(ffs);
    auto l = open_log(env, tmp.sub("p-0"), cfg);
    // Three batches of 2 records: 6 messages, under flush.messages; nobody
    // waits, so nothing asks for a sync.
    for (uint32_t i = 0; i < 3; ++i) ASSERT_TRUE(append_one(*l, 2, i));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EXPECT_EQ(l->durable_offset(), offset(0));
    // One more: 8 messages since the last sync, so one starts by itself.
    ASSERT_TRUE(append_one(*l, 2, 3));
    end = l->log_end_offset();
    ASSERT_EQ(end, offset(8));
    ASSERT_TRUE(durable_soon(*l, end)) << l->durable_offset().value();
    // The count restarts with that sync: two more messages stay unsynced.
    ASSERT_TRUE(append_one(*l, 2, 9));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EXPECT_EQ(l->durable_offset(), end);
    ASSERT_TRUE(ffs.drop_unsynced().ok());
  }
  log_env env;
  auto l = open_log(env, tmp.sub("p-0"), cfg);
  EXPECT_EQ(l->log_end_offset(), end);  // the synced 8 survive, the last 2 were never synced
}

// The flush.ms timer runs on the log's clock, a manual one here: it fires
// when the clock passes flush.ms, however long that takes in real time.
TEST(LogFault, FlushMsSyncsDataNobodyWaitsFor) {
  temp_dir tmp;
  io::fault_fs ffs(io::filesystem::posix());
  log_config cfg;
  cfg.flush_ms = 60'000;
  log_env env(ffs);
  auto l = open_log(env, tmp.sub("p-0"), cfg);
  const uint64_t syncs0 = ffs.syncs();
  ASSERT_TRUE(append_one(*l, 3, 1));
  env.clk.advance_ms(59'999);
  EXPECT_EQ(l->durable_offset(), offset(0));  // not yet due
  env.clk.advance_ms(1);
  ASSERT_TRUE(durable_soon(*l, offset(3))) << l->durable_offset().value();
  EXPECT_GT(ffs.syncs(), syncs0);
  // The timer re-arms with the next append after it fired.
  ASSERT_TRUE(append_one(*l, 2, 2));
  env.clk.advance_ms(60'000);
  ASSERT_TRUE(durable_soon(*l, offset(5))) << l->durable_offset().value();
  // Idle: no more syncs once everything is durable, however far the clock
  // moves. (The pause lets a wrongly armed timer show; it cannot fail a
  // correct flusher.) The prepared tail the appends asked for is synced by
  // then (wait_idle: a timer not yet due does not count as work).
  env.flush.wait_idle();
  const uint64_t idle = ffs.syncs();
  env.clk.advance_ms(3'600'000);
  std::this_thread::sleep_for(std::chrono::milliseconds(10 * limits::manual_clock_poll_ms));
  EXPECT_EQ(ffs.syncs(), idle);
  ASSERT_TRUE(l->close().ok());
}

TEST(LogFault, APendingFlushMsTimerDoesNotKeepALogAlive) {
  temp_dir tmp;
  log_env env;
  log_config cfg;
  cfg.flush_ms = 3'600'000;
  auto l = open_log(env, tmp.sub("p-0"), cfg);
  ASSERT_TRUE(append_one(*l, 2, 1));  // arms an hour-long timer
  std::weak_ptr<log> w = l;
  ASSERT_TRUE(l->close().ok());
  l.reset();
  env.flush.wait_idle();  // a prepare_tail the append asked for holds it while it runs; timers do not count
  EXPECT_TRUE(w.expired());
}

TEST(LogFault, WithoutFlushSettingsOnlyWaitersAskForSyncs) {
  temp_dir tmp;
  io::fault_fs ffs(io::filesystem::posix());
  log_env env(ffs);
  auto l = open_log(env, tmp.sub("p-0"));
  for (uint32_t i = 0; i < 20; ++i) ASSERT_TRUE(append_one(*l, 3, i));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(l->durable_offset(), offset(0));
  ASSERT_TRUE(l->wait_durable(offset(59)).ok());
  EXPECT_EQ(l->durable_offset(), offset(60));
}

// A truncation (a follower's, say) runs beside a sync, which holds only the
// flush lock. When it cuts into a closed segment the sync is writing out,
// that segment becomes the active one, is written again and closed by the
// next roll: what the sync planned no longer covers it, so it must be
// synced again before anything past it counts as durable.
TEST(LogFault, ASegmentCutAndRewrittenDuringItsSyncIsSyncedAgain) {
  temp_dir tmp;
  io::fault_fs ffs(io::filesystem::posix());
  ffs.simulate_syncs(true);
  const std::string first = tmp.sub("p-0") + "/00000000000000000000.log";
  std::mutex m;
  std::condition_variable cv;
  bool armed = false, blocked = false, released = false;
  std::vector<std::string> synced_after;
  ffs.on_sync([&](const std::string& path) {
    std::unique_lock g(m);
    if (armed && path == first) {
      armed = false;
      blocked = true;
      cv.notify_all();
      cv.wait(g, [&] { return released; });
      return;
    }
    if (released) synced_after.push_back(path);
  });
  log_env env(ffs);
  auto l = open_log(env, tmp.sub("p-0"), testing::small_config());
  {
    std::lock_guard g(m);
    armed = true;  // not before: opening a new log syncs its first file
  }
  // Fill the first segment until a roll closes it: the roll asks for a
  // round, whose sync of the first segment stops in the hook.
  std::vector<written> ws;
  while (l->segments().size() < 2) {
    auto more = append_n(*l, 1, static_cast<uint32_t>(ws.size()));
    ws.insert(ws.end(), more.begin(), more.end());
  }
  {
    std::unique_lock g(m);
    ASSERT_TRUE(cv.wait_for(g, std::chrono::seconds(10), [&] { return blocked; }));
  }
  // Cut into the first segment and write it full again, to the next roll.
  ASSERT_TRUE(l->truncate_to(ws[1].base).ok());
  ASSERT_EQ(l->segments().size(), 1u);
  for (uint32_t i = 0; l->segments().size() < 2; ++i) ASSERT_TRUE(append_one(*l, 2, 5000 + i));
  {
    std::lock_guard g(m);
    released = true;
    cv.notify_all();
  }
  ASSERT_TRUE(l->wait_durable(l->log_end_offset() - 1).ok());
  std::lock_guard g(m);
  EXPECT_NE(std::find(synced_after.begin(), synced_after.end(), first), synced_after.end())
      << "the rewritten first segment was counted durable without a sync";
}

// One flusher round (log::flush_together) over several logs: every log's
// files go to the file system in one sync_together; a failed sync takes only
// the log it belongs to offline, the others become durable and keep their
// data through a power loss.
TEST(LogFault, OneRoundSyncsManyLogsAndAFailureTakesOnlyItsLogOffline) {
  temp_dir tmp;
  io::fault_fs ffs(io::filesystem::posix());
  std::vector<std::vector<written>> ws(3);
  {
    log_env env(ffs);
    std::vector<std::shared_ptr<log>> logs;
    for (int i = 0; i < 3; ++i) {
      // Default settings: no roll asks the flusher for a round of its own.
      logs.push_back(open_log(env, tmp.sub("p-" + std::to_string(i))));
      ws[static_cast<size_t>(i)] = append_n(*logs.back(), 10, static_cast<uint32_t>(100 * i));
    }
    std::vector<errc> answers(3, errc::ok);
    std::vector<int> answered(3, 0);
    std::mutex m;
    for (size_t i = 0; i < 3; ++i)
      logs[i]->on_durable(ws[i].back().last, [&, i](const status& st) {
        std::lock_guard g(m);
        answers[i] = st.code();
        ++answered[i];
      });
    env.flush.wait_idle();  // the waiters' rounds are done: nothing races the round below
    for (size_t i = 0; i < 3; ++i)
      ws[i] = append_n(*logs[i], 5, static_cast<uint32_t>(900 + i), ws[i].back().pos + ws[i].back().bytes.size());
    ffs.fail_syncs(1);
    log::flush_together({logs[2], logs[0], logs[1], logs[0]});  // any order, duplicates allowed
    ffs.fail_syncs(0);
    int offline = 0;
    for (size_t i = 0; i < 3; ++i) {
      if (logs[i]->offline()) {
        ++offline;
        EXPECT_LT(logs[i]->durable_offset(), ws[i].back().last + 1);
        EXPECT_EQ(logs[i]->wait_durable(ws[i].back().last).code(), errc::log_offline);
      } else {
        EXPECT_EQ(logs[i]->durable_offset(), ws[i].back().last + 1) << i;
      }
    }
    EXPECT_EQ(offline, 1);
    std::lock_guard g(m);
    for (size_t i = 0; i < 3; ++i) EXPECT_EQ(answered[i], 1) << i;
  }
  ASSERT_TRUE(ffs.drop_unsynced().ok());
  log_env env;
  int kept = 0;
  for (int i = 0; i < 3; ++i) {
    auto l = open_log(env, tmp.sub("p-" + std::to_string(i)));
    if (l->log_end_offset() >= ws[static_cast<size_t>(i)].back().last + 1) ++kept;
  }
  EXPECT_GE(kept, 2);
}

// Many logs, appenders waiting on them, direct flushes beside the flusher's
// rounds: rounds that hold several logs' flush locks never deadlock, and
// every waiter is answered ok.
TEST(LogFault, RoundsOverSharedLogsFinishUnderConcurrentAppendsAndFlushes) {
  temp_dir tmp;
  log_env env;
  std::vector<std::shared_ptr<log>> logs;
  for (int i = 0; i < 12; ++i) logs.push_back(open_log(env, tmp.sub("p-" + std::to_string(i))));
  std::atomic<int> failures{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&, t] {
      for (int k = 0; k < 150; ++k) {
        log& l = *logs[static_cast<size_t>((t * 7 + k * 5) % 12)];
        auto b = make_batch(1, 20, static_cast<uint32_t>(t * 1000 + k));
        auto r = l.append(b, leader_epoch(1));
        if (!r.ok() || (k % 3 == 0 ? !l.flush().ok() : !l.wait_durable(r->last).ok())) ++failures;
      }
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(failures.load(), 0);
  for (auto& l : logs) EXPECT_EQ(l->durable_offset(), l->log_end_offset());
}

TEST(LogFault, FlushSettingsOutOfRangeAreRefused) {
  log_config cfg;
  cfg.flush_messages = 0;
  EXPECT_EQ(cfg.validate().code(), errc::invalid_config);
  cfg.flush_messages = 1;
  cfg.flush_ms = -1;
  EXPECT_EQ(cfg.validate().code(), errc::invalid_config);
  cfg.flush_ms = 0;
  EXPECT_TRUE(cfg.validate().ok());
}

}  // namespace
}  // namespace sluice::storage

namespace sluice::storage {
namespace {

using testing::log_env;
using testing::make_batch;
using testing::temp_dir;

uint64_t file_bytes(const std::string& path) { return std::filesystem::file_size(path); }

// The prepared tail (storage/README.md, "Prepared tails"): zeros written and
// synced past the active segment's end let a group commit sync only data.
// Against fault_fs's model of a data-only sync (the size it did not make
// durable is lost): what was flushed inside the tail survives the power
// going, what was not comes back as zeros and is cut silently, and an
// append past the tail gets a full sync.
TEST(LogFault, PreparedTailSyncsDataOnlyAndLosesNothingFlushed) {
  temp_dir tmp;
  const std::string dir = tmp.sub("p-0");
  const std::string path = segment_path(dir, offset(0), "log");
  io::fault_fs ffs(io::filesystem::posix());
  std::vector<written> kept;
  uint64_t durable_end = 0;
  {
    log_env env(ffs);
    auto l = open_log(env, dir);
    kept = append_n(*l, 3, 1);
    // A new log's first sync is a full one: it makes the segment's name
    // durable in the log's directory too (creation synced neither).
    ASSERT_TRUE(l->flush().ok());
    env.flush.wait_idle();  // the tail is written and synced
    const uint64_t logical = l->segments().back().size_bytes;
    EXPECT_EQ(file_bytes(path), logical + limits::segment_prepare_bytes);
    // Inside the tail: data only.
    auto more = append_n(*l, 2, 10, logical);
    const uint64_t data_before = ffs.data_syncs(), all_before = ffs.syncs();
    ASSERT_TRUE(l->flush().ok());
    EXPECT_EQ(ffs.data_syncs(), data_before + 1);
    EXPECT_EQ(ffs.syncs(), all_before + 1);
    kept.insert(kept.end(), more.begin(), more.end());
    // Past the tail (one batch larger than it): a full sync, which the
    // model keeps with the file's new size.
    env.flush.wait_idle();
    const uint64_t at = l->segments().back().size_bytes;
    auto big = make_batch(1, limits::segment_prepare_bytes + 1000, 77);
    auto r = l->append(big, leader_epoch(1));
    ASSERT_TRUE(r.ok());
    const uint64_t data_mid = ffs.data_syncs();
    ASSERT_TRUE(l->flush().ok());
    EXPECT_EQ(ffs.data_syncs(), data_mid);
    kept.push_back({r->base, r->last, big, at});
    durable_end = static_cast<uint64_t>(r->last.value()) + 1;
    env.flush.wait_idle();
    // Not flushed: lost with the power, in the tail or not.
    append_n(*l, 2, 20, l->segments().back().size_bytes);
    ffs.crash_after_bytes(0);  // nothing more reaches the files
  }
  ffs.crash_after_bytes(std::nullopt);
  ASSERT_TRUE(ffs.drop_unsynced().ok());
  log_env env;
  auto l = open_log(env, dir);
  EXPECT_FALSE(l->recovery().clean_shutdown);
  EXPECT_EQ(static_cast<uint64_t>(l->log_end_offset().value()), durable_end);
  EXPECT_EQ(read_everything(*l), concat(kept));
  EXPECT_FALSE(l->recovery().truncated);  // zeros are no torn tail
  EXPECT_EQ(file_bytes(path), l->segments().back().size_bytes);
}

// A clean close cuts the tail, so the next open trusts the indexes as
// written; a truncation cuts it too, and its next sync is a full one.
TEST(LogFault, CloseAndTruncationCutThePreparedTail) {
  temp_dir tmp;
  const std::string dir = tmp.sub("p-0");
  const std::string path = segment_path(dir, offset(0), "log");
  io::fault_fs ffs(io::filesystem::posix());
  {
    log_env env(ffs);
    auto l = open_log(env, dir);
    auto ws = append_n(*l, 6, 1);
    env.flush.wait_idle();
    ASSERT_GT(file_bytes(path), l->segments().back().size_bytes);
    ASSERT_TRUE(l->truncate_to(ws[3].base).ok());
    EXPECT_EQ(file_bytes(path), ws[3].pos);
    append_n(*l, 1, 30, ws[3].pos);
    const uint64_t data_before = ffs.data_syncs();
    ASSERT_TRUE(l->flush().ok());
    EXPECT_EQ(ffs.data_syncs(), data_before);  // the cut size needed a full sync
    env.flush.wait_idle();
    ASSERT_TRUE(l->close().ok());
    EXPECT_EQ(file_bytes(path), l->segments().back().size_bytes);
  }
  log_env env(ffs);
  auto l = open_log(env, dir);
  EXPECT_TRUE(l->recovery().clean_shutdown);
  EXPECT_FALSE(l->recovery().truncated);
}

// A crash after a roll, before its seal: the closed segment may still end
// in its prepared tail (the roll's cut of it not yet durable) and has no
// index files. Its zeros are no lost data: the later segment stays.
TEST(LogFault, AnUnsealedSegmentsPreparedTailCostsNoLaterSegment) {
  temp_dir tmp;
  const std::string dir = tmp.sub("p-0");
  log_config cfg;
  cfg.segment_bytes = 64 << 10;
  std::vector<written> ws;
  {
    log_env env;
    auto l = open_log(env, dir, cfg);
    uint64_t pos = 0;
    while (l->segments().size() < 2) {
      auto w = append_n(*l, 1, static_cast<uint32_t>(ws.size()), pos);
      if (l->segments().size() == 2) w[0].pos = 0;
      pos = w[0].pos + w[0].bytes.size();
      ws.push_back(w[0]);
    }
    ASSERT_TRUE(l->close().ok());
  }
  // The first segment as the crash left it: zeros after its last batch, no
  // index files; and no clean-shutdown marker.
  const std::string first = segment_path(dir, offset(0), "log");
  {
    auto f = io::filesystem::posix().open(first, io::open_mode::read_write);
    ASSERT_TRUE(f.ok());
    std::vector<std::byte> zeros(3000);
    ASSERT_TRUE((*f)->append(zeros).ok());
  }
  std::filesystem::remove(segment_path(dir, offset(0), "index"));
  std::filesystem::remove(segment_path(dir, offset(0), "timeindex"));
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().filename().string().find("clean") != std::string::npos) std::filesystem::remove(e.path());
  log_env env;
  auto l = open_log(env, dir, cfg);
  EXPECT_FALSE(l->recovery().clean_shutdown);
  EXPECT_FALSE(l->recovery().truncated);
  EXPECT_EQ(l->segments().size(), 2u);
  EXPECT_EQ(l->log_end_offset(), ws.back().last + 1);
  EXPECT_EQ(read_everything(*l), concat(ws));
}

}  // namespace
}  // namespace sluice::storage
