// Compaction's rewrite path in storage (docs/log_format.md, "Replacing
// segments"): a cleaned copy of a run of closed segments replaces them,
// keeping offsets (gaps allowed); a crash at every single step of the swap,
// then recovery, leaves either the old segments or the whole copy; reads
// racing swaps see whole valid batches; a run that changed meanwhile is not
// swapped; the cleaner checkpoint.

#include <atomic>
#include <filesystem>
#include <map>
#include <thread>

#include <gtest/gtest.h>

#include "io/fault_fs.h"
#include "storage/log.h"
#include "storage/log_files.h"
#include "storage/segment.h"
#include "storage/test_util.h"

namespace sluice::storage {

namespace batch = model::batch;
namespace {

using testing::log_env;
using testing::make_batch;
using testing::small_config;
using testing::temp_dir;

// The log's content as a model: base offset -> whole batch bytes.
using content = std::map<int64_t, std::vector<std::byte>>;

// Every batch readable from the log start, each checked (header and CRC)
// and ascending.
content read_content(log& l) {
  content out;
  offset o = l.log_start_offset();
  int64_t last = -1;
  while (o < l.log_end_offset()) {
    auto r = l.read_bytes(o, 1 << 20);
    EXPECT_TRUE(r.ok()) << r.err().message;
    if (!r.ok() || r->empty()) break;
    std::vector<batch::header> hs;
    EXPECT_TRUE(batch::check_all(*r, batch::strictness::stored, hs).ok());
    size_t pos = 0;
    for (const auto& h : hs) {
      EXPECT_GT(h.base_offset.value(), last);
      last = h.last_offset().value();
      out[h.base_offset.value()] =
          std::vector<std::byte>(r->begin() + static_cast<ptrdiff_t>(pos),
                                 r->begin() + static_cast<ptrdiff_t>(pos + h.size_bytes()));
      pos += h.size_bytes();
    }
    o = offset(last + 1);
  }
  return out;
}

std::vector<std::string> dir_names(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    out.push_back(e.path().filename().string());
  return out;
}

bool has_suffix(const std::vector<std::string>& names, const std::string& suffix) {
  for (const auto& n : names)
    if (n.size() >= suffix.size() &&
        n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0)
      return true;
  return false;
}

// Builds a log of `n` one-record batches (rolling every few) and returns it.
std::shared_ptr<log> build_log(log_env& env, const std::string& dir, int n,
                               log_config cfg = small_config()) {
  auto r = log::open(env.ctx(), dir, "c-0", cfg);
  EXPECT_TRUE(r.ok()) << r.err().message;
  for (int i = 0; i < n; ++i) {
    auto b = make_batch(1 + i % 2, 300, static_cast<uint32_t>(i), 1'700'000'000'000 + i);
    EXPECT_TRUE((*r)->append(b, leader_epoch(0)).ok());
  }
  return *r;
}

// Writes a cleaned copy of the closed segments [first, first + count) that
// keeps the batches `keep` says yes to; returns it with the model of what
// the log holds once it is swapped in.
struct prepared {
  std::unique_ptr<segment_rewrite> rw;
  content after;
};

prepared clean_copy(log& l, size_t first, size_t count,
                    const std::function<bool(const batch::header&)>& keep) {
  auto segs = l.segments();
  EXPECT_LT(first + count, segs.size());
  prepared p;
  p.after = read_content(l);
  auto rw = l.begin_rewrite(segs[first].base, segs[first + count].base);
  EXPECT_TRUE(rw.ok()) << rw.err().message;
  if (!rw.ok()) return p;
  for (size_t i = first; i < first + count; ++i) {
    uint64_t pos = 0;
    for (;;) {
      auto r = l.read_segment(segs[i].base, pos, 1000);
      EXPECT_TRUE(r.ok());
      if (!r.ok() || r->len == 0) break;
      std::vector<std::byte> buf(r->len);
      EXPECT_EQ(*r->file->pread(buf.data(), r->len, r->pos), r->len);
      std::vector<batch::header> hs;
      EXPECT_TRUE(batch::check_all(buf, batch::strictness::stored, hs).ok());
      size_t at = 0;
      for (const auto& h : hs) {
        if (keep(h)) {
          EXPECT_TRUE((*rw)->append(std::span(buf).subspan(at, h.size_bytes())).ok());
        } else {
          p.after.erase(h.base_offset.value());
        }
        at += h.size_bytes();
      }
      pos = r->pos + r->len;
    }
  }
  p.rw = std::move(rw).value();
  return p;
}

bool drop_thirds(const batch::header& h) {
  return h.base_offset.value() % 3 != 0;
}

TEST(LogRewrite, SwapKeepsOffsetsLeavesGapsAndSurvivesRestart) {
  temp_dir tmp;
  auto env = std::make_unique<log_env>();
  auto l = build_log(*env, tmp.sub("c-0"), 80);
  const auto before = l->segments();
  ASSERT_GT(before.size(), 6u);
  const content old = read_content(*l);
  // Drop every batch of the run's last segment too, so the copy ends well
  // before the next segment starts.
  const offset tail_from = before[4].base;
  auto p = clean_copy(*l, 1, 4,
                      [&](const batch::header& h) { return drop_thirds(h) && h.base_offset < tail_from; });
  EXPECT_LT(p.rw->next(), before[5].base);
  EXPECT_TRUE(std::filesystem::exists(p.rw->path()));
  EXPECT_NE(p.rw->path().find(".cleaned"), std::string::npos);
  ASSERT_TRUE(l->replace_segments(std::move(p.rw)).ok());
  EXPECT_NE(read_content(*l), old);
  EXPECT_EQ(read_content(*l), p.after);
  auto after = l->segments();
  ASSERT_EQ(after.size(), before.size() - 3);
  EXPECT_EQ(after[1].base, before[1].base);
  EXPECT_LT(after[1].next, before[5].base);  // a gap between segments
  EXPECT_EQ(after[2].base, before[5].base);
  auto names = dir_names(l->dir());
  EXPECT_FALSE(has_suffix(names, ".cleaned"));
  EXPECT_FALSE(has_suffix(names, ".swap"));
  EXPECT_TRUE(has_suffix(names, ".log.deleted"));
  EXPECT_TRUE(std::filesystem::exists(segment_path(l->dir(), before[1].base, "index")));
  // Every offset reads as the batch holding it, or the next one after a gap.
  for (int64_t o = l->log_start_offset().value(); o < l->log_end_offset().value(); ++o) {
    auto r = l->read(offset(o), 1);
    ASSERT_TRUE(r.ok());
    auto it = p.after.upper_bound(o);
    ASSERT_NE(it, p.after.begin());
    --it;
    const auto h = batch::parse(it->second.data());
    const int64_t want = h.last_offset().value() >= o ? it->first : std::next(it)->first;
    EXPECT_EQ(r->first_offset.value(), want) << "offset " << o;
  }
  for (bool clean : {true, false}) {
    if (clean) {
      ASSERT_TRUE(l->close().ok());
    }
    l.reset();
    env = std::make_unique<log_env>();
    auto r = log::open(env->ctx(), tmp.sub("c-0"), "c-0", small_config());
    ASSERT_TRUE(r.ok());
    l = *r;
    EXPECT_FALSE(l->recovery().truncated) << l->recovery().reason;
    EXPECT_EQ(read_content(*l), p.after);
    EXPECT_EQ(l->segments().size(), after.size());
    EXPECT_FALSE(has_suffix(dir_names(l->dir()), ".deleted"));
  }
  // The cleaned segment can be cleaned again, and appends go on.
  auto again = clean_copy(*l, 0, 2, [](const batch::header& h) { return h.base_offset.value() % 2 == 0; });
  ASSERT_TRUE(l->replace_segments(std::move(again.rw)).ok());
  EXPECT_EQ(read_content(*l), again.after);
  auto extra = make_batch(1, 10, 999);
  EXPECT_TRUE(l->append(extra, leader_epoch(0)).ok());
}

TEST(LogRewrite, RunThatChangedMeanwhileIsNotSwapped) {
  temp_dir tmp;
  log_env env;
  auto l = build_log(env, tmp.sub("c-0"), 60);
  const auto segs = l->segments();
  auto p = clean_copy(*l, 0, 3, drop_thirds);
  const std::string path = p.rw->path();
  ASSERT_TRUE(l->advance_log_start(segs[1].base).ok());  // retention got there first
  const content now = read_content(*l);
  EXPECT_EQ(l->replace_segments(std::move(p.rw)).code(), errc::not_found);
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_EQ(read_content(*l), now);
  EXPECT_FALSE(l->offline());
  // A truncation into the run also voids it.
  auto q = clean_copy(*l, 1, 2, drop_thirds);
  ASSERT_TRUE(l->truncate_to(l->segments()[2].base + 1).ok());
  EXPECT_EQ(l->replace_segments(std::move(q.rw)).code(), errc::not_found);
  // A run must end at a segment boundary and before the active segment.
  const auto s2 = l->segments();
  EXPECT_EQ(l->begin_rewrite(s2[0].base, s2[0].base + 1).code(), errc::not_found);
  EXPECT_EQ(l->begin_rewrite(s2.back().base, l->log_end_offset()).code(), errc::not_found);
  EXPECT_EQ(l->read_segment(s2.back().base, 0, 100).code(), errc::not_found);
}

TEST(LogRewrite, CopyRefusesBatchesOutsideItsRun) {
  temp_dir tmp;
  log_env env;
  auto l = build_log(env, tmp.sub("c-0"), 40);
  const auto segs = l->segments();
  auto rw = l->begin_rewrite(segs[1].base, segs[2].base);
  ASSERT_TRUE(rw.ok());
  auto first = l->read_bytes(segs[1].base, 1);
  auto below = l->read_bytes(segs[0].base, 1);
  auto above = l->read_bytes(segs[2].base, 1);
  ASSERT_TRUE(first.ok() && below.ok() && above.ok());
  EXPECT_EQ((*rw)->append(*below).code(), errc::invalid_record);
  EXPECT_EQ((*rw)->append(*above).code(), errc::invalid_record);
  ASSERT_TRUE((*rw)->append(*first).ok());
  EXPECT_EQ((*rw)->append(*first).code(), errc::invalid_record);  // not ascending
  auto bad = *first;
  bad.back() ^= std::byte{1};
  EXPECT_EQ((*rw)->append(bad).code(), errc::corrupt_data);
}

// A crash at every mutating step (file writes, syncs, renames, removes,
// directory syncs) from the start of the copy to the end of the swap, with
// power loss on top: after recovery the log holds exactly the old batches
// or exactly the cleaned ones, and no swap leftovers.
TEST(LogRewrite, CrashAtEveryStepOfTheSwapRecoversOldOrNew) {
  bool finished = false;
  int saw_old = 0, saw_new = 0;
  for (uint64_t n = 0; !finished; ++n) {
    ASSERT_LT(n, 200u) << "the swap never finished";
    temp_dir tmp;
    io::fault_fs ffs(io::filesystem::posix());
    ffs.simulate_syncs(true);
    content old, cleaned;
    {
      log_env env(ffs);
      auto l = build_log(env, tmp.sub("c-0"), 50);
      ASSERT_TRUE(l->flush().ok());
      old = read_content(*l);
      ffs.crash_after_ops(n);
      const auto segs = l->segments();
      auto rw = l->begin_rewrite(segs[1].base, segs[4].base);
      status st = rw.ok() ? status() : rw.to_status();
      if (st.ok()) {
        // The copy as the cleaner would write it, while the disk may die.
        cleaned = old;
        for (const auto& [base, bytes] : old) {
          if (base < segs[1].base.value() || base >= segs[4].base.value()) continue;
          if (base % 3 == 0) {
            cleaned.erase(base);
            continue;
          }
          if (st = (*rw)->append(bytes); !st.ok()) break;
        }
      }
      if (st.ok()) st = l->replace_segments(std::move(rw).value());
      finished = !ffs.crashed();
      if (finished) {
        ASSERT_TRUE(st.ok()) << st.err().message;
      }
      l.reset();  // the crash: no close
    }
    ffs.crash_after_ops(std::nullopt);
    ASSERT_TRUE(ffs.drop_unsynced().ok());
    log_env env2;
    auto r = log::open(env2.ctx(), tmp.sub("c-0"), "c-0", small_config());
    ASSERT_TRUE(r.ok()) << "crash after " << n << " ops: " << r.err().message;
    const content now = read_content(**r);
    if (now == old) {
      ++saw_old;
      EXPECT_FALSE(finished) << "a finished swap came back old";
    } else {
      ++saw_new;
      EXPECT_EQ(now, cleaned) << "crash after " << n
                              << " ops left neither the old nor the cleaned log";
    }
    EXPECT_FALSE((*r)->recovery().truncated)
        << "crash after " << n << ": " << (*r)->recovery().reason;
    auto names = dir_names(tmp.sub("c-0"));
    EXPECT_FALSE(has_suffix(names, ".swap")) << n;
    EXPECT_FALSE(has_suffix(names, ".cleaned")) << n;
    // Indexes were rebuilt where needed: lookups agree with a scan.
    for (const auto& [base, bytes] : now) {
      auto rr = (*r)->read(offset(base), 1);
      ASSERT_TRUE(rr.ok());
      EXPECT_EQ(rr->first_offset.value(), base);
    }
    ASSERT_TRUE((*r)->close().ok());
  }
  EXPECT_GT(saw_old, 3);
  EXPECT_GT(saw_new, 3);
}

// Readers running through the log while swaps replace segments under them
// see whole, valid batches, ascending, each either an old or a cleaned one
// at its own offset; never garbage, never an error other than
// offset_out_of_range.
TEST(LogRewrite, ReadsRacingSwapsSeeWholeValidBatches) {
  temp_dir tmp;
  log_env env;
  auto cfg = small_config();
  cfg.file_delete_delay_ms = 0;  // the deleter unlinks under the readers too
  auto l = build_log(env, tmp.sub("c-0"), 200, cfg);
  const content original = read_content(*l);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> batches_read{0};
  std::atomic<int> bad{0};
  auto reader = [&] {
    while (!stop) {
      offset o = l->log_start_offset();
      int64_t last = -1;
      while (o < l->log_end_offset()) {
        auto r = l->read(o, 700);
        if (!r.ok()) {
          if (r.code() != errc::offset_out_of_range) ++bad;
          break;
        }
        if (r->len == 0) break;
        std::vector<std::byte> buf(r->len);
        if (*r->file->pread(buf.data(), r->len, r->pos) != r->len) {
          ++bad;
          break;
        }
        std::vector<batch::header> hs;
        if (!batch::check_all(buf, batch::strictness::stored, hs).ok()) {
          ++bad;
          break;
        }
        size_t at = 0;
        for (const auto& h : hs) {
          auto it = original.find(h.base_offset.value());
          if (h.base_offset.value() <= last || it == original.end() ||
              !std::equal(it->second.begin(), it->second.end(),
                          buf.begin() + static_cast<ptrdiff_t>(at)))
            ++bad;
          last = h.last_offset().value();
          at += h.size_bytes();
          ++batches_read;
        }
        o = offset(last + 1);
      }
    }
  };
  std::thread t1(reader), t2(reader);
  for (int round = 0; round < 12; ++round) {
    const auto segs = l->segments();
    if (segs.size() < 4) break;
    const size_t first = static_cast<size_t>(round) % (segs.size() - 3);
    auto p = clean_copy(*l, first, 2,
                        [&](const batch::header& h) { return (h.base_offset.value() + round) % 4 != 0; });
    ASSERT_TRUE(l->replace_segments(std::move(p.rw)).ok());
    if (round == 6) {
      ASSERT_TRUE(l->advance_log_start(l->segments()[1].base).ok());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  stop = true;
  t1.join();
  t2.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GT(batches_read.load(), 0u);
}

TEST(LogRewrite, CleanerCheckpointPersistsAndFollowsTruncation) {
  temp_dir tmp;
  auto env = std::make_unique<log_env>();
  auto l = build_log(*env, tmp.sub("c-0"), 60);
  EXPECT_EQ(l->cleaner_checkpoint(), offset(0));
  ASSERT_TRUE(l->set_cleaner_checkpoint(offset(40)).ok());
  EXPECT_EQ(l->cleaner_checkpoint(), offset(40));
  ASSERT_TRUE(l->set_cleaner_checkpoint(offset(1'000'000)).ok());  // clamped to the end
  EXPECT_EQ(l->cleaner_checkpoint(), l->log_end_offset());
  ASSERT_TRUE(l->set_cleaner_checkpoint(offset(40)).ok());
  l.reset();
  env = std::make_unique<log_env>();
  auto r = log::open(env->ctx(), tmp.sub("c-0"), "c-0", small_config());
  ASSERT_TRUE(r.ok());
  l = *r;
  EXPECT_EQ(l->cleaner_checkpoint(), offset(40));
  ASSERT_TRUE(l->truncate_to(offset(30)).ok());
  EXPECT_LE(l->cleaner_checkpoint(), offset(30));
  const offset start = l->segments()[1].base;
  ASSERT_TRUE(l->advance_log_start(start).ok());
  EXPECT_GE(l->cleaner_checkpoint(), start);
}

}  // namespace
}  // namespace sluice::storage
