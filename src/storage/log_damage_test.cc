// Damaged batches in the middle of a log (docs/log_format.md, "Damaged
// batches"): recovery after a crash and the scrubber after a clean shutdown
// find a batch whose CRC or header is wrong, keep every intact batch before
// and after it at its offsets, never serve the damaged bytes, and remove
// them with a crash-safe rewrite; their offsets become a gap. A torn tail of
// the last segment is still cut.

#include <chrono>
#include <filesystem>
#include <map>
#include <thread>

#include <gtest/gtest.h>

#include "base/clock.h"
#include "io/fault_fs.h"
#include "storage/log.h"
#include "storage/log_manager.h"
#include "storage/segment.h"
#include "storage/test_util.h"

namespace sluice::storage {

namespace batch = model::batch;
namespace {

using testing::log_env;
using testing::make_batch;
using testing::small_config;
using testing::temp_dir;

struct written {
  offset base, last;
  std::vector<std::byte> bytes;
  offset segment;  // base offset of the segment holding it
  uint64_t pos;    // byte position in that segment
};

std::shared_ptr<log> open_log(log_env& env, const std::string& dir, log_config cfg) {
  auto r = log::open(env.ctx(), dir, "d-0", cfg);
  EXPECT_TRUE(r.ok()) << r.err().message;
  return r.ok() ? *r : nullptr;
}

// Appends `n` batches of 1-3 records and records where each landed.
std::vector<written> append_n(log& l, int n, uint32_t seed, size_t value_bytes = 40) {
  std::vector<written> out;
  for (int i = 0; i < n; ++i) {
    auto b = make_batch(1 + i % 3, value_bytes, seed + static_cast<uint32_t>(i));
    auto r = l.append(b, leader_epoch(1));
    EXPECT_TRUE(r.ok()) << r.err().message;
    out.push_back({r->base, r->last, b, offset(0), 0});
  }
  // Positions from the segment list: batches fill segments in order.
  const auto segs = l.segments();
  size_t s = 0;
  uint64_t pos = 0;
  for (auto& w : out) {
    while (s + 1 < segs.size() && w.base >= segs[s + 1].base) {
      ++s;
      pos = 0;
    }
    w.segment = segs[s].base;
    w.pos = pos;
    pos += w.bytes.size();
  }
  return out;
}

// Writes `n` batches of 100-byte values into a log at `dir` with small
// segments, and closes it cleanly.
std::vector<written> write_closed_log(const std::string& dir, int n, uint32_t seed) {
  log_env env;
  auto l = open_log(env, dir, small_config());
  auto ws = append_n(*l, n, seed, 100);
  EXPECT_TRUE(l->close().ok());
  return ws;
}

// The first batch from `from` on whose neighbours share its segment: damage
// there lies in the middle of a segment.
size_t middle_batch(const std::vector<written>& ws, size_t from) {
  size_t v = from;
  while (ws[v - 1].segment != ws[v].segment || ws[v + 1].segment != ws[v].segment) ++v;
  return v;
}

void patch(const std::string& dir, const written& w, size_t at, std::span<const std::byte> bytes) {
  auto f = io::filesystem::posix().open(segment_path(dir, w.segment, "log"), io::open_mode::read_write);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE((*f)->pwrite(bytes, w.pos + at).ok());
}

void flip(const std::string& dir, const written& w, size_t at) {
  auto f = io::filesystem::posix().open(segment_path(dir, w.segment, "log"), io::open_mode::read_write);
  ASSERT_TRUE(f.ok());
  std::byte b;
  ASSERT_TRUE((*f)->pread(&b, 1, w.pos + at).ok());
  b ^= std::byte{0x10};
  ASSERT_TRUE((*f)->pwrite(std::span(&b, 1), w.pos + at).ok());
}

// Every batch readable from the log start, by base offset, each checked
// (header and CRC) and ascending.
std::map<int64_t, std::vector<std::byte>> read_content(log& l) {
  std::map<int64_t, std::vector<std::byte>> out;
  offset o = l.log_start_offset();
  int64_t last = -1;
  while (o < l.log_end_offset()) {
    auto r = l.read_bytes(o, 1 << 20);
    EXPECT_TRUE(r.ok()) << r.err().message;
    if (!r.ok() || r->empty()) break;
    std::vector<batch::header> hs;
    auto st = batch::check_all(*r, batch::strictness::stored, hs);
    EXPECT_TRUE(st.ok()) << "damaged bytes served at offset " << o.value() << ": " << st.err().message;
    if (!st.ok()) break;
    size_t pos = 0;
    for (const auto& h : hs) {
      EXPECT_GT(h.base_offset.value(), last);
      last = h.last_offset().value();
      out[h.base_offset.value()] = std::vector<std::byte>(r->begin() + static_cast<ptrdiff_t>(pos),
                                                   r->begin() + static_cast<ptrdiff_t>(pos + h.size_bytes()));
      pos += h.size_bytes();
    }
    o = offset(last + 1);
  }
  return out;
}

std::map<int64_t, std::vector<std::byte>> model(const std::vector<written>& ws, size_t skip) {
  std::map<int64_t, std::vector<std::byte>> out;
  for (size_t i = 0; i < ws.size(); ++i)
    if (i != skip) out[ws[i].base.value()] = ws[i].bytes;
  return out;
}

// The damaged batch's offsets are not served: a read there answers with
// the next intact batch (a gap, as compaction leaves).
void expect_gap_at(log& l, const written& victim, const written& after) {
  for (offset o = victim.base; o <= victim.last; o = o + 1) {
    auto r = l.read(o, 1 << 20);
    ASSERT_TRUE(r.ok()) << r.err().message;
    EXPECT_EQ(r->first_offset, after.base) << o.value();
  }
}

// A crash (no clean-shutdown marker), then a flipped bit anywhere in a
// middle batch of the only segment: recovery keeps every batch after it.
TEST(LogDamage, CrashRecoveryKeepsIntactBatchesAfterAFlippedBit) {
  temp_dir tmp;
  const std::string seed_dir = tmp.sub("seed");
  std::vector<written> ws;
  {
    log_env env;
    auto l = open_log(env, seed_dir, {});
    ws = append_n(*l, 10, 7);
    // Dropped without close(): a crash.
  }
  const written& victim = ws[5];
  // The length, magic, CRC, CRC-covered header fields and records.
  for (size_t at : {batch::length_pos + 1, batch::length_pos + 3, batch::magic_pos, batch::crc_pos + 1,
                    batch::attributes_pos + 1, batch::max_timestamp_pos + 5, batch::records_count_pos + 1,
                    batch::header_bytes, victim.bytes.size() / 2, victim.bytes.size() - 1}) {
    SCOPED_TRACE("byte " + std::to_string(at));
    const std::string dir = tmp.sub("flip-" + std::to_string(at));
    std::filesystem::copy(seed_dir, dir);
    flip(dir, victim, at);
    {
      log_env env;
      auto l = open_log(env, dir, {});
      EXPECT_EQ(l->log_end_offset(), ws.back().last + 1);
      EXPECT_FALSE(l->recovery().truncated);
      EXPECT_EQ(l->recovery().damaged_ranges, 1u);
      EXPECT_EQ(l->damage().ranges_found, 1u);
      EXPECT_EQ(l->damage().bytes_removed, victim.bytes.size());
      EXPECT_EQ(read_content(*l), model(ws, 5));
      expect_gap_at(*l, victim, ws[6]);
      // The log takes appends at its end as before.
      auto b = make_batch(1, 10, 3);
      auto r = l->append(b, leader_epoch(1));
      ASSERT_TRUE(r.ok());
      EXPECT_EQ(r->base, ws.back().last + 1);
    }
    // The damage was removed from disk: another crash recovery finds none.
    log_env env;
    auto l = open_log(env, dir, {});
    EXPECT_EQ(l->recovery().damaged_ranges, 0u);
    EXPECT_EQ(l->log_end_offset(), ws.back().last + 2);
    auto got = read_content(*l);
    got.erase(ws.back().last.value() + 1);
    EXPECT_EQ(got, model(ws, 5));
  }
}

// A length field overwritten with garbage (too large for the file, or
// plausible but wrong) is resynchronised by scanning for the next batch.
TEST(LogDamage, GarbageLengthResyncs) {
  temp_dir tmp;
  const std::string seed_dir = tmp.sub("seed");
  std::vector<written> ws;
  {
    log_env env;
    auto l = open_log(env, seed_dir, {});
    ws = append_n(*l, 8, 11, 200);
  }
  const written& victim = ws[3];
  for (uint32_t len : {0x7fffffffu, 0x00000100u, 0x00000031u, 0u, 0xffffffffu}) {
    SCOPED_TRACE("length " + std::to_string(len));
    const std::string dir = tmp.sub("len-" + std::to_string(len));
    std::filesystem::copy(seed_dir, dir);
    const std::byte be[4] = {std::byte(len >> 24), std::byte(len >> 16), std::byte(len >> 8), std::byte(len)};
    patch(dir, victim, batch::length_pos, be);
    log_env env;
    auto l = open_log(env, dir, {});
    EXPECT_EQ(l->log_end_offset(), ws.back().last + 1);
    EXPECT_FALSE(l->recovery().truncated);
    EXPECT_EQ(l->recovery().damaged_ranges, 1u);
    EXPECT_EQ(read_content(*l), model(ws, 3));
    expect_gap_at(*l, victim, ws[4]);
  }
}

// A crash leaves a partial last batch: that is a torn tail, cut as before,
// not a damaged range (nothing intact follows it).
TEST(LogDamage, TornTailIsStillCut) {
  temp_dir tmp;
  const std::string dir = tmp.sub("p");
  std::vector<written> ws;
  {
    log_env env;
    auto l = open_log(env, dir, {});
    ws = append_n(*l, 5, 1);
  }
  auto extra = make_batch(3, 40, 99);
  // Where the segment ends: the file may go on with its prepared tail.
  const uint64_t end = ws.back().pos + ws.back().bytes.size();
  size_t written = extra.size() / 2;  // the bytes dropped: up to the last non-zero one
  while (extra[written - 1] == std::byte{0}) --written;
  {
    auto f = io::filesystem::posix().open(segment_path(dir, offset(0), "log"), io::open_mode::read_write);
    ASSERT_TRUE(f.ok());
    ASSERT_TRUE((*f)->pwrite(std::span(extra.data(), extra.size() / 2), end).ok());
  }
  log_env env;
  auto l = open_log(env, dir, {});
  EXPECT_TRUE(l->recovery().truncated);
  EXPECT_EQ(l->recovery().damaged_ranges, 0u);
  EXPECT_EQ(l->recovery().bytes_dropped, written);
  EXPECT_EQ(l->log_end_offset(), ws.back().last + 1);
  EXPECT_EQ(read_content(*l), model(ws, ws.size()));
}

// A damaged last batch of the last segment cannot be told from a torn
// write: it is cut too (docs/log_format.md says so).
TEST(LogDamage, DamagedLastBatchIsCutLikeATornTail) {
  temp_dir tmp;
  const std::string dir = tmp.sub("p");
  std::vector<written> ws;
  {
    log_env env;
    auto l = open_log(env, dir, {});
    ws = append_n(*l, 5, 1);
  }
  flip(dir, ws.back(), 70);
  log_env env;
  auto l = open_log(env, dir, {});
  EXPECT_TRUE(l->recovery().truncated);
  EXPECT_EQ(l->log_end_offset(), ws.back().base);
}

// Several segments; the damage is in the active one, or at the very end of
// a closed one (nothing intact follows it in that segment, but later
// segments hold acknowledged data that must stay).
TEST(LogDamage, DamageInTheActiveSegmentAndAtTheEndOfAClosedOne) {
  temp_dir tmp;
  const std::string seed_dir = tmp.sub("seed");
  std::vector<written> ws;
  {
    log_env env;
    auto l = open_log(env, seed_dir, small_config());
    ws = append_n(*l, 60, 5, 100);
  }
  ASSERT_GT(ws.back().segment, ws.front().segment);
  // In the active segment, not its last batch.
  size_t in_active = ws.size() - 3;
  ASSERT_EQ(ws[in_active].segment, ws.back().segment);
  // The last batch of the first segment.
  size_t closed_end = 0;
  while (ws[closed_end + 1].segment == ws[0].segment) ++closed_end;
  for (size_t victim : {in_active, closed_end}) {
    SCOPED_TRACE("victim " + std::to_string(victim));
    const std::string dir = tmp.sub("v-" + std::to_string(victim));
    std::filesystem::copy(seed_dir, dir);
    flip(dir, ws[victim], ws[victim].bytes.size() / 2);
    // Without a recovery point every segment is scanned; the first
    // segment's last batch lies after its last index entry, so even a
    // trusted load would look at it.
    std::filesystem::remove(dir + "/recovery-point-checkpoint");
    {
      log_env env;
      auto l = open_log(env, dir, small_config());
      EXPECT_FALSE(l->recovery().truncated);
      EXPECT_EQ(l->recovery().damaged_ranges, 1u);
      EXPECT_EQ(l->log_end_offset(), ws.back().last + 1);
      EXPECT_EQ(read_content(*l), model(ws, victim));
      expect_gap_at(*l, ws[victim], ws[victim + 1]);
    }
    log_env env;
    auto l = open_log(env, dir, small_config());
    EXPECT_EQ(l->recovery().damaged_ranges, 0u);
    EXPECT_EQ(read_content(*l), model(ws, victim));
  }
}

// After a clean shutdown segments are trusted without a scan; the scrubber
// finds the damage, the log stops serving it at once and removes it.
TEST(LogDamage, ScrubAfterCleanShutdownFindsAndRemovesDamage) {
  temp_dir tmp;
  const std::string dir = tmp.sub("p");
  const std::vector<written> ws = write_closed_log(dir, 60, 9);
  // A batch in the middle of a closed segment in the middle of the log.
  size_t victim = middle_batch(ws, ws.size() / 2);
  ASSERT_LT(ws[victim].segment, ws.back().segment);
  flip(dir, ws[victim], 64);
  {
    log_env env;
    auto l = open_log(env, dir, small_config());
    EXPECT_TRUE(l->recovery().clean_shutdown);
    auto found = l->scrub({});
    ASSERT_TRUE(found.ok()) << found.err().message;
    EXPECT_EQ(*found, 1u);
    EXPECT_EQ(l->damage().ranges_found, 1u);
    EXPECT_EQ(l->damage().bytes_removed, ws[victim].bytes.size());
    EXPECT_GT(l->damage().bytes_scrubbed, 0u);
    EXPECT_EQ(l->log_end_offset(), ws.back().last + 1);
    EXPECT_EQ(read_content(*l), model(ws, victim));
    expect_gap_at(*l, ws[victim], ws[victim + 1]);
    // A second pass finds nothing more.
    auto again = l->scrub({});
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(*again, 0u);
    ASSERT_TRUE(l->close().ok());
  }
  log_env env;
  auto l = open_log(env, dir, small_config());
  EXPECT_EQ(read_content(*l), model(ws, victim));
  auto found = l->scrub({});
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(*found, 0u);
}

// The scrubber also checks the active segment (after a clean shutdown it
// was trusted too): damage there rolls it and removes the range.
TEST(LogDamage, ScrubFindsDamageInTheActiveSegment) {
  temp_dir tmp;
  const std::string dir = tmp.sub("p");
  log_config cfg;
  cfg.index_interval_bytes = 256;  // the damage lies before the last index entry: not walked at open
  std::vector<written> ws;
  {
    log_env env;
    auto l = open_log(env, dir, cfg);
    ws = append_n(*l, 10, 21, 100);
    ASSERT_TRUE(l->close().ok());
  }
  flip(dir, ws[4], 30);
  log_env env;
  auto l = open_log(env, dir, cfg);
  EXPECT_EQ(l->recovery().damaged_ranges, 0u);
  EXPECT_EQ(l->segments().size(), 1u);
  auto found = l->scrub({});
  ASSERT_TRUE(found.ok()) << found.err().message;
  EXPECT_EQ(*found, 1u);
  EXPECT_EQ(l->segments().size(), 2u);  // rolled, then rewritten
  EXPECT_EQ(read_content(*l), model(ws, 4));
  auto b = make_batch(2, 10, 3);
  auto r = l->append(b, leader_epoch(1));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->base, ws.back().last + 1);
}

// A crash at every step of a damage removal (the files through fault_fs,
// then power loss): whatever step it hits, the next open serves every
// intact batch at its offset and never the damaged one, the log end offset
// stays, and no copy is left behind. First the removal recovery starts
// after a crash (damage in the active segment: roll, copy, swap), then the
// one the scrubber starts after a clean shutdown (a closed segment).
TEST(LogDamage, CrashAtEveryStepOfARemoval) {
  for (bool scrub : {false, true}) {
    SCOPED_TRACE(scrub ? "scrubber" : "recovery");
    temp_dir tmp;
    const std::string seed_dir = tmp.sub("seed");
    std::vector<written> ws;
    {
      log_env env;
      auto l = open_log(env, seed_dir, small_config());
      ws = append_n(*l, 40, 31, 100);
      if (scrub) {
        ASSERT_TRUE(l->close().ok());
      }
    }
    size_t victim = scrub ? ws.size() / 2 : ws.size() - 3;
    while (ws[victim - 1].segment != ws[victim].segment || ws[victim + 1].segment != ws[victim].segment)
      scrub ? ++victim : --victim;
    ASSERT_EQ(ws[victim].segment == ws.back().segment, !scrub);
    flip(seed_dir, ws[victim], 75);
    int finished = 0, crashed = 0;
    for (uint64_t n = 0;; ++n) {
      SCOPED_TRACE("crash after " + std::to_string(n) + " ops");
      const std::string dir = tmp.sub("run-" + std::to_string(n));
      std::filesystem::copy(seed_dir, dir);
      bool done = false;
      {
        io::fault_fs ffs(io::filesystem::posix());
        ffs.simulate_syncs(true);
        log_env env(ffs);
        if (!scrub) ffs.crash_after_ops(n);
        auto r = log::open(env.ctx(), dir, "d-0", small_config());
        if (scrub && r.ok()) {
          ffs.crash_after_ops(n);
          auto found = (*r)->scrub({});
          EXPECT_TRUE(!found.ok() || *found == 1u);
        }
        done = !ffs.crashed();
        if (r.ok()) r->reset();  // the crash: no close
        env.flush.wait_idle();   // and nothing of it runs after
        ffs.crash_after_ops(std::nullopt);
        ASSERT_TRUE(ffs.drop_unsynced().ok());
      }
      (done ? finished : crashed) += 1;
      log_env env;
      auto l = open_log(env, dir, small_config());
      ASSERT_TRUE(l);
      EXPECT_EQ(l->log_end_offset(), ws.back().last + 1);
      EXPECT_EQ(read_content(*l), model(ws, victim));
      for (const auto& e : std::filesystem::directory_iterator(dir)) {
        const std::string name = e.path().filename().string();
        EXPECT_EQ(name.find(".repair"), std::string::npos) << name;
        EXPECT_EQ(name.find(".swap"), std::string::npos) << name;
      }
      // Whatever is still on disk goes with one more scrub, for good.
      ASSERT_TRUE(l->scrub({}).ok());
      EXPECT_EQ(read_content(*l), model(ws, victim));
      ASSERT_TRUE(l->close().ok());
      {
        log_env env2;
        auto again = open_log(env2, dir, small_config());
        auto found = again->scrub({});
        ASSERT_TRUE(found.ok());
        EXPECT_EQ(*found, 0u);
      }
      std::filesystem::remove_all(dir);
      if (done) break;
      ASSERT_LT(n, 1000u);
    }
    EXPECT_EQ(finished, 1);
    EXPECT_GT(crashed, 5);
  }
}

// Before the scrubber gets to a segment trusted after a clean shutdown, a
// read checks the bytes it is about to serve: the damaged batch is never
// served, the intact ones around it are, and the scrubber's next pass
// removes the range the read found.
TEST(LogDamage, ReadChecksBytesNoScanHasChecked) {
  temp_dir tmp;
  const std::string dir = tmp.sub("p");
  const std::vector<written> ws = write_closed_log(dir, 60, 13);
  size_t victim = middle_batch(ws, ws.size() / 3);
  flip(dir, ws[victim], 70);
  {
    log_env env;
    auto l = open_log(env, dir, small_config());
    EXPECT_EQ(l->damage().ranges_found, 0u);
    // A read starting before the damaged batch stops before it...
    auto r = l->read(ws[victim - 1].base, 1 << 20);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->first_offset, ws[victim - 1].base);
    EXPECT_EQ(r->len, ws[victim - 1].bytes.size());
    EXPECT_EQ(r->next_offset, ws[victim + 1].base);
    EXPECT_EQ(l->damage().ranges_found, 1u);
    // ...and every other read skips it.
    EXPECT_EQ(read_content(*l), model(ws, victim));
    expect_gap_at(*l, ws[victim], ws[victim + 1]);
    EXPECT_EQ(l->damage().ranges_found, 1u);
    EXPECT_EQ(l->damage().bytes_removed, 0u);
    auto found = l->scrub({});
    ASSERT_TRUE(found.ok());
    EXPECT_EQ(*found, 0u);  // known already
    EXPECT_EQ(l->damage().bytes_removed, ws[victim].bytes.size());
    EXPECT_EQ(read_content(*l), model(ws, victim));
    ASSERT_TRUE(l->close().ok());
  }
  log_env env;
  auto l = open_log(env, dir, small_config());
  EXPECT_EQ(read_content(*l), model(ws, victim));
  EXPECT_EQ(l->damage().ranges_found, 0u);
}

// Compaction reads closed segments with read_segment and may rebuild what
// it reads with a fresh CRC: it must never be handed damaged bytes either.
TEST(LogDamage, ReadSegmentChecksAndSkipsDamageToo) {
  temp_dir tmp;
  const std::string dir = tmp.sub("p");
  const std::vector<written> ws = write_closed_log(dir, 60, 23);
  size_t victim = middle_batch(ws, ws.size() / 2);
  flip(dir, ws[victim], 66);
  log_env env;
  auto l = open_log(env, dir, small_config());
  std::map<int64_t, std::vector<std::byte>> got, want;
  for (size_t i = 0; i < ws.size(); ++i)
    if (ws[i].segment == ws[victim].segment && i != victim) want[ws[i].base.value()] = ws[i].bytes;
  uint64_t pos = 0;
  for (;;) {
    auto r = l->read_segment(ws[victim].segment, pos, 300);
    ASSERT_TRUE(r.ok()) << r.err().message;
    if (r->len == 0) break;
    std::vector<std::byte> bytes(r->len);
    ASSERT_TRUE(r->file->pread(bytes.data(), r->len, r->pos).ok());
    std::vector<batch::header> hs;
    ASSERT_TRUE(batch::check_all(bytes, batch::strictness::stored, hs).ok());
    size_t at = 0;
    for (const auto& h : hs) {
      got[h.base_offset.value()] = std::vector<std::byte>(bytes.begin() + static_cast<ptrdiff_t>(at),
                                                   bytes.begin() + static_cast<ptrdiff_t>(at + h.size_bytes()));
      at += h.size_bytes();
    }
    pos = r->pos + r->len;
  }
  EXPECT_EQ(got, want);
  EXPECT_EQ(l->damage().ranges_found, 1u);
}

// Two damaged batches in one read region are both found by one check.
TEST(LogDamage, ReadFindsEveryDamagedRangeOfItsRegion) {
  temp_dir tmp;
  const std::string dir = tmp.sub("p");
  log_config cfg;
  cfg.index_interval_bytes = 256;
  std::vector<written> ws;
  {
    log_env env;
    auto l = open_log(env, dir, cfg);
    ws = append_n(*l, 12, 17, 100);
    ASSERT_TRUE(l->close().ok());
  }
  flip(dir, ws[3], 90);
  const std::byte garbage[4] = {std::byte{0x7f}, std::byte{0}, std::byte{0}, std::byte{0}};
  patch(dir, ws[6], batch::length_pos, garbage);
  log_env env;
  auto l = open_log(env, dir, cfg);
  auto r = l->read(ws[0].base, 1 << 20);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->next_offset, ws[4].base);
  EXPECT_EQ(l->damage().ranges_found, 2u);
  auto want = model(ws, 3);
  want.erase(ws[6].base.value());
  EXPECT_EQ(read_content(*l), want);
}

// The cost of that check on a catch-up read: every byte of a log written
// before a clean restart read once in 1 MiB regions (as fetches would, the
// bytes copied out as sendfile would), first unchecked (each region checked
// on the way) and then again (all checked). Run by hand:
//   storage_damage_test --gtest_also_run_disabled_tests --gtest_filter='*CatchUpReadCost'
TEST(LogDamage, DISABLED_CatchUpReadCost) {
  temp_dir tmp;
  const std::string dir = tmp.sub("p");
  log_config cfg;
  cfg.fsync = false;
  cfg.segment_bytes = 64 << 20;
  const int batches = 16 * 1024;  // 16 KiB each: 256 MiB
  {
    log_env env;
    auto l = open_log(env, dir, cfg);
    auto b = make_batch(16, 1000, 1);
    for (int i = 0; i < batches; ++i) {
      auto copy = b;
      ASSERT_TRUE(l->append(copy, leader_epoch(1)).ok());
    }
    ASSERT_TRUE(l->close().ok());
  }
  auto cpu_ms = [] {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
  };
  std::vector<std::byte> out(2 << 20);
  auto pass = [&](log& l) {
    const int64_t t0_ns = clock::system().monotonic_ns();
    const double c0 = cpu_ms();
    uint64_t bytes = 0;
    for (offset o = l.log_start_offset(); o < l.log_end_offset();) {
      auto r = l.read(o, 1 << 20);
      EXPECT_TRUE(r.ok());
      if (!r.ok() || r->len == 0) break;
      EXPECT_TRUE(r->file->pread(out.data(), r->len, r->pos).ok());
      bytes += r->len;
      o = r->next_offset;
    }
    const double wall = (clock::system().monotonic_ns() - t0_ns) / 1e6;
    return std::tuple(bytes, wall, cpu_ms() - c0);
  };
  for (int run = 0; run < 5; ++run) {
    log_env env;
    auto l = open_log(env, dir, cfg);
    auto [b1, w1, c1] = pass(*l);  // checks every region
    auto [b2, w2, c2] = pass(*l);  // all checked already
    std::printf("run %d: %.0f MiB  first read %.1f ms wall %.1f ms cpu  second read %.1f ms wall %.1f ms cpu\n", run,
                b1 / 1048576.0, w1, c1, w2, c2);
    EXPECT_EQ(b1, b2);
    ASSERT_TRUE(l->close().ok());
  }
}

// A pace callback that says stop ends the pass early with shutting_down.
TEST(LogDamage, ScrubStopsWhenPaceSaysSo) {
  temp_dir tmp;
  log_env env;
  auto l = open_log(env, tmp.sub("p"), small_config());
  append_n(*l, 40, 1, 100);
  auto r = l->scrub([](uint64_t) { return false; });
  EXPECT_EQ(r.code(), errc::shutting_down);
}

std::unique_ptr<log_manager> open_manager(const std::string& dir, int64_t scrub_rate) {
  log_manager_config cfg;
  cfg.data_dir = dir;
  cfg.default_log = small_config();
  cfg.scrub_bytes_per_second = scrub_rate;
  auto m = log_manager::open(io::filesystem::posix(), clock::system(), cfg);
  EXPECT_TRUE(m.ok()) << m.err().message;
  return m.ok() ? std::move(m).value() : nullptr;
}

// The log manager's scrubber thread finds damage left by a clean shutdown
// on its own, in its first pass.
TEST(LogDamage, ScrubberThreadFindsDamageAfterCleanShutdown) {
  temp_dir tmp;
  std::vector<written> ws;
  std::string dir;
  {
    auto m = open_manager(tmp.path(), 0);
    auto l = m->get_or_create({"t", 0});
    ASSERT_TRUE(l.ok());
    ws = append_n(**l, 60, 3, 100);
    dir = (*l)->dir();
    ASSERT_TRUE(m->shutdown().ok());
  }
  const size_t victim = 20;
  flip(dir, ws[victim], 80);
  auto m = open_manager(tmp.path(), 1ll << 30);
  const deadline until(20'000, sluice::clock::system());
  while (m->scrubbing().passes == 0 && !until.passed())
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_GE(m->scrubbing().passes, 1u);
  EXPECT_EQ(m->scrubbing().damaged_ranges, 1u);
  EXPECT_GT(m->scrubbing().bytes, 0u);
  auto l = m->get({"t", 0});
  EXPECT_EQ(l->damage().ranges_found, 1u);
  EXPECT_EQ(read_content(*l), model(ws, victim));
}

// Damage a read finds is removed by the scrubber's thread soon, without
// waiting for its pass (here stuck at one byte per second).
TEST(LogDamage, ScrubberRemovesWhatAReadFound) {
  temp_dir tmp;
  std::vector<written> ws;
  std::string dir;
  {
    auto m = open_manager(tmp.path(), 0);
    auto l = m->get_or_create({"t", 0});
    ASSERT_TRUE(l.ok());
    ws = append_n(**l, 60, 3, 100);
    dir = (*l)->dir();
    ASSERT_TRUE(m->shutdown().ok());
  }
  size_t victim = middle_batch(ws, 40);
  flip(dir, ws[victim], 80);
  auto m = open_manager(tmp.path(), 1);
  auto l = m->get({"t", 0});
  EXPECT_EQ(read_content(*l), model(ws, victim));
  EXPECT_EQ(l->damage().ranges_found, 1u);
  const deadline until(20'000, sluice::clock::system());
  while (l->damage().bytes_removed == 0 && !until.passed())
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(l->damage().bytes_removed, ws[victim].bytes.size());
  EXPECT_EQ(read_content(*l), model(ws, victim));
  EXPECT_EQ(m->scrubbing().passes, 0u);
}

// At one byte per second the scrubber sleeps for ages after its first
// segment; shutdown wakes it at once.
TEST(LogDamage, ScrubberStopsPromptly) {
  temp_dir tmp;
  {
    auto m = open_manager(tmp.path(), 0);
    auto l = m->get_or_create({"t", 0});
    ASSERT_TRUE(l.ok());
    append_n(**l, 20, 3, 100);
  }
  auto m = open_manager(tmp.path(), 1);
  const deadline until(20'000, sluice::clock::system());
  while (m->scrubbing().bytes == 0 && !until.passed())
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // asleep by now
  const int64_t t0_ms = clock::system().monotonic_ms();
  ASSERT_TRUE(m->shutdown().ok());
  EXPECT_LT(clock::system().monotonic_ms() - t0_ms, 2'000);
  EXPECT_GT(m->scrubbing().bytes, 0u);
  EXPECT_EQ(m->scrubbing().passes, 0u);
}

}  // namespace
}  // namespace sluice::storage
