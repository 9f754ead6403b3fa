// A seeded randomized test: appends, rolls, truncations, log-start moves,
// clean and unclean restarts and power losses, checked after every step
// against a simple in-memory model of the log.
//
// The seed is printed; set SLUICE_TEST_SEED to replay a failing run.

#include <gtest/gtest.h>

#include <cstdlib>
#include <random>

#include "base/endian.h"
#include "io/fault_fs.h"
#include "storage/log.h"
#include "storage/test_util.h"

namespace sluice::storage {

namespace batch = model::batch;
namespace {

using testing::log_env;
using testing::temp_dir;

struct model_batch {
  offset base, last;
  int32_t epoch;
  int64_t max_ts;
  std::vector<std::byte> bytes;
};

// The log as it should be: the readable batches and the two ends.
struct model {
  std::vector<model_batch> batches;  // every batch with last >= start
  offset start{0}, end{0};

  const model_batch* holding(offset o) const {
    for (const auto& b : batches)
      if (b.last >= o) return &b;
    return nullptr;
  }
  void truncate(offset o) {
    if (o >= end) return;
    size_t i = 0;
    while (i < batches.size() && batches[i].last < o) ++i;
    // o is in [start, end), so batch i holds it; it goes whole.
    if (batches[i].base < start) {  // the log would end below its start
      batches.clear();
      start = end = o;
      return;
    }
    end = batches[i].base;
    batches.resize(i);
  }
  void advance_start(offset o) {
    if (o <= start) return;
    start = o;
    std::erase_if(batches, [&](const model_batch& b) { return b.last < o; });
  }
  std::vector<epoch_entry> epochs() const {
    std::vector<epoch_entry> out;
    for (const auto& b : batches)
      if (out.empty() || b.epoch > out.back().epoch.value()) out.push_back({leader_epoch(b.epoch), std::max(b.base, start)});
    return out;
  }
};

class random_run {
 public:
  random_run(uint64_t seed, const std::string& dir) : rng_(seed), dir_(dir), ffs_(io::filesystem::posix()) {
    ffs_.simulate_syncs(true);  // power loss is simulated from the recorded sync points
    cfg_.segment_bytes = 2048 + static_cast<int64_t>(rng_() % 4096);
    cfg_.index_interval_bytes = 64 + static_cast<int64_t>(rng_() % 512);
    cfg_.segment_index_bytes = 120 + static_cast<int64_t>(rng_() % 400);
    cfg_.segment_ms = 60'000;
    reopen();
  }

  void step(int i) {
    const int op = static_cast<int>(rng_() % 100);
    SCOPED_TRACE("step " + std::to_string(i) + " op " + std::to_string(op));
    if (op < 55) append();
    else if (op < 62) truncate();
    else if (op < 69) advance_start();
    else if (op < 74) { ASSERT_TRUE(log_->close().ok()); reopen(); }
    else if (op < 79) { log_.reset(); reopen(); }  // crash, page cache kept
    else if (op < 83) power_loss();
    else if (op < 86) env_->clk.advance_ms(61'000);  // the next append rolls by time
    else if (op < 90) { ASSERT_TRUE(log_->wait_durable(m_.end - 1).ok() || m_.end == m_.start); }
    else check_lookups();
    check_contents();
  }

 private:
  void reopen() {
    log_.reset();
    env_ = std::make_unique<log_env>(ffs_, 4);
    auto r = log::open(env_->ctx(), dir_, "rand-0", cfg_);
    ASSERT_TRUE(r.ok()) << r.err().message;
    log_ = *r;
  }

  void append() {
    if (rng_() % 10 == 0) ++epoch_;
    ts_ += static_cast<int64_t>(rng_() % 100) - 20;
    batch_spec s;
    s.records = 1 + static_cast<int32_t>(rng_() % 6);
    s.value_bytes = rng_() % 400;
    s.seed = static_cast<uint32_t>(rng_());
    s.base_timestamp = ts_;
    auto b = build_batch(s);
    auto r = log_->append(b, leader_epoch(epoch_));
    ASSERT_TRUE(r.ok()) << r.err().message;
    ASSERT_EQ(r->base, m_.end);
    m_.batches.push_back({r->base, r->last, epoch_, load_be<int64_t>(b.data() + batch::max_timestamp_pos), b});
    m_.end = r->last + 1;
  }

  offset pick(offset lo, offset hi) {  // inclusive
    return lo + static_cast<int64_t>(rng_() % static_cast<uint64_t>(hi - lo + 1));
  }

  void truncate() {
    const offset o = pick(m_.start, m_.end);
    ASSERT_TRUE(log_->truncate_to(o).ok());
    m_.truncate(o);
  }

  void advance_start() {
    const offset o = pick(m_.start, m_.end);
    ASSERT_TRUE(log_->advance_log_start(o).ok());
    m_.advance_start(o);
  }

  void power_loss() {
    env_->flush.wait_idle();  // the power goes at an instant: no sync or seal runs after it
    const offset durable = log_->durable_offset();
    ASSERT_TRUE(ffs_.drop_unsynced().ok());
    log_.reset();
    reopen();
    const offset end = log_->log_end_offset();
    ASSERT_GE(end, durable);
    ASSERT_LE(end, m_.end);
    m_.truncate(end);
    ASSERT_EQ(m_.end, end) << "power loss left a log end inside a batch";
  }

  void check_contents() {
    ASSERT_EQ(log_->log_start_offset(), m_.start);
    ASSERT_EQ(log_->log_end_offset(), m_.end);
    offset o = m_.start;
    size_t i = 0;
    while (o < m_.end) {
      auto r = log_->read(o, 1 + rng_() % 3000);
      ASSERT_TRUE(r.ok()) << r.err().message;
      ASSERT_GT(r->len, 0u);
      std::vector<std::byte> got(r->len);
      ASSERT_EQ(*r->file->pread(got.data(), r->len, r->pos), r->len);
      size_t at = 0;
      while (at < got.size()) {
        ASSERT_LT(i, m_.batches.size());
        const auto& want = m_.batches[i++].bytes;
        ASSERT_LE(at + want.size(), got.size());
        ASSERT_TRUE(std::equal(want.begin(), want.end(), got.begin() + static_cast<ptrdiff_t>(at)));
        at += want.size();
      }
      o = r->next_offset;
    }
    ASSERT_EQ(i, m_.batches.size());
    auto epochs = log_->leader_epochs();
    std::erase_if(epochs, [&](const epoch_entry& e) { return e.start >= m_.end; });
    ASSERT_EQ(epochs, m_.epochs());
  }

  void check_lookups() {
    if (m_.end == m_.start) return;
    for (int k = 0; k < 20; ++k) {
      const offset o = pick(m_.start, m_.end - 1);
      auto r = log_->read(o, 1);
      ASSERT_TRUE(r.ok());
      ASSERT_EQ(r->first_offset, m_.holding(o)->base);
      const int64_t t = ts_ - 600 + static_cast<int64_t>(rng_() % 800);
      auto lt = log_->offset_for_timestamp(t);
      ASSERT_TRUE(lt.ok());
      const model_batch* want = nullptr;
      for (const auto& b : m_.batches)
        if (b.max_ts >= t) {
          want = &b;
          break;
        }
      ASSERT_EQ(lt->has_value(), want != nullptr) << t;
      if (want) {
        ASSERT_EQ((*lt)->base, std::max(want->base, m_.start)) << t;
      }
    }
  }

  std::mt19937_64 rng_;
  std::string dir_;
  io::fault_fs ffs_;
  log_config cfg_;
  std::unique_ptr<log_env> env_;
  std::shared_ptr<log> log_;
  model m_;
  int32_t epoch_ = 0;
  int64_t ts_ = 1'000'000;
};

TEST(LogRandom, MatchesModel) {
  uint64_t seed = std::random_device{}();
  if (const char* s = std::getenv("SLUICE_TEST_SEED")) seed = std::strtoull(s, nullptr, 10);
  for (int run = 0; run < 4; ++run, ++seed) {
    std::printf("SLUICE_TEST_SEED=%llu\n", static_cast<unsigned long long>(seed));
    SCOPED_TRACE("SLUICE_TEST_SEED=" + std::to_string(seed));
    temp_dir tmp;
    random_run r(seed, tmp.sub("rand-0"));
    for (int i = 0; i < 400 && !::testing::Test::HasFatalFailure(); ++i) r.step(i);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace sluice::storage
