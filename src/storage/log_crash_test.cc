// Kill -9 test: a child process appends with group commit from several
// threads and reports every offset the log called durable through a pipe;
// the parent SIGKILLs it at random moments, reopens the log, and checks
// that every batch reported durable is there bit for bit and that nothing
// torn remains. Repeats for a bounded time.
//
// The seed is printed; set SLUICE_TEST_SEED to replay a run's timing.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <random>
#include <thread>

#include "base/clock.h"
#include "base/endian.h"
#include "storage/log_manager.h"
#include "storage/test_util.h"

namespace sluice::storage {

namespace batch = model::batch;
namespace {

using testing::temp_dir;

// What the child reports per durable batch: its base offset and the tag it
// was built from (thread, sequence), from which the parent rebuilds it.
struct report {
  int64_t base;
  uint32_t tag;
};

std::vector<std::byte> batch_for_tag(uint32_t tag) {
  batch_spec s;
  s.records = 1 + static_cast<int32_t>(tag % 5);
  s.value_bytes = 50 + tag % 700;
  s.seed = tag;
  return build_batch(s);
}

log_config crash_config() {
  log_config c;
  c.segment_bytes = 64 * 1024;  // rolls (and checkpoint writes) while being killed
  c.index_interval_bytes = 1024;
  return c;
}

// The child: never returns. Appends from 3 threads until killed.
[[noreturn]] void run_child(const std::string& data_dir, int fd, uint32_t first_tag) {
  auto m = log_manager::open(io::filesystem::posix(), clock::system(),
                             log_manager_config{data_dir, crash_config(), 64});
  if (!m.ok()) _exit(3);
  auto l = (*m)->get_or_create({"crash", 0});
  if (!l.ok()) _exit(4);
  std::shared_ptr<log> lg = *l;
  std::mutex pipe_mu;
  std::vector<std::thread> ts;
  for (uint32_t t = 0; t < 3; ++t) {
    ts.emplace_back([&, t] {
      for (uint32_t i = 0;; ++i) {
        const uint32_t tag = first_tag + t * 1'000'000 + i;
        auto b = batch_for_tag(tag);
        auto r = lg->append(b, leader_epoch(1));
        if (!r.ok()) _exit(5);
        lg->on_durable(r->last, [&pipe_mu, fd, base = r->base, tag](const status& st) {
          if (!st.ok()) _exit(6);
          report rep{base.value(), tag};
          std::lock_guard g(pipe_mu);
          if (::write(fd, &rep, sizeof rep) != sizeof rep) _exit(7);
        });
      }
    });
  }
  for (auto& t : ts) t.join();
  _exit(0);
}

uint64_t seed_from_env() {
  if (const char* s = std::getenv("SLUICE_TEST_SEED")) return std::strtoull(s, nullptr, 10);
  return std::random_device{}();
}

TEST(LogCrash, KilledAppenderLosesNothingReportedDurable) {
  const uint64_t seed = seed_from_env();
  std::printf("SLUICE_TEST_SEED=%llu\n", static_cast<unsigned long long>(seed));
  SCOPED_TRACE("SLUICE_TEST_SEED=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  temp_dir tmp;
  const std::string data_dir = tmp.sub("data");
  std::map<int64_t, uint32_t> durable;  // base offset -> tag, over all runs
  const deadline until(4'000, sluice::clock::system());
  int kills = 0;
  for (uint32_t run = 0; !until.passed() || kills < 5; ++run) {
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(fds[0]);
      run_child(data_dir, fds[1], (run + 1) * 10'000'000u);
    }
    ::close(fds[1]);
    std::this_thread::sleep_for(std::chrono::milliseconds(20 + rng() % 200));
    ::kill(pid, SIGKILL);
    int wst = 0;
    ::waitpid(pid, &wst, 0);
    ASSERT_TRUE(WIFSIGNALED(wst)) << "child exited by itself with " << WEXITSTATUS(wst);
    ++kills;
    // Every whole report the child managed to write.
    report rep;
    while (::read(fds[0], &rep, sizeof rep) == static_cast<ssize_t>(sizeof rep)) durable[rep.base] = rep.tag;
    ::close(fds[0]);

    // Reopen and check: everything reported durable is there, bit for bit,
    // and every batch in the log is whole and one the child wrote.
    auto m = log_manager::open(io::filesystem::posix(), clock::system(),
                               log_manager_config{data_dir, crash_config(), 64});
    ASSERT_TRUE(m.ok()) << m.err().message;
    auto l = (*m)->get({"crash", 0});
    ASSERT_NE(l, nullptr);
    for (const auto& [base, tag] : durable) {
      auto got = l->read_bytes(offset(base), 1);
      ASSERT_TRUE(got.ok()) << "durable batch at " << base << " missing: " << got.err().message;
      auto want = batch_for_tag(tag);
      batch::stamp(want.data(), offset(base), leader_epoch(1));
      ASSERT_EQ(*got, want) << "durable batch at " << base << " differs (run " << run << ")";
    }
    // Whole batches only: walk the log; the batches must tile the offsets.
    offset o = l->log_start_offset();
    while (o < l->log_end_offset()) {
      auto r = l->read_bytes(o, 1 << 20);
      ASSERT_TRUE(r.ok());
      std::vector<batch::header> hs;
      ASSERT_TRUE(batch::check_all(*r, batch::strictness::leader, hs).ok()) << "torn or corrupt batch at " << o.value();
      ASSERT_EQ(hs.front().base_offset, o);
      o = hs.back().last_offset() + 1;
    }
    ASSERT_TRUE((*m)->shutdown().ok());
  }
  std::printf("%d kills, %zu batches reported durable\n", kills, durable.size());
  EXPECT_GT(durable.size(), 0u);
}

}  // namespace
}  // namespace sluice::storage
