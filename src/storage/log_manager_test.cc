// Tests of the log manager: create, find, delete and reopen partition logs,
// concurrent creation, clean shutdown, and the memory of idle partitions.

#include "storage/log_manager.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "io/fault_fs.h"
#include "storage/test_util.h"

namespace sluice::storage {
namespace {

using testing::make_batch;
using testing::temp_dir;

std::unique_ptr<log_manager> open_manager(const std::string& dir, size_t max_open = 64, bool fsync = true) {
  log_manager_config cfg;
  cfg.data_dir = dir;
  cfg.default_log = testing::small_config();
  cfg.default_log.fsync = fsync;
  cfg.max_open_segment_files = max_open;
  auto m = log_manager::open(io::filesystem::posix(), clock::system(), cfg);
  EXPECT_TRUE(m.ok()) << m.err().message;
  return m.ok() ? std::move(m).value() : nullptr;
}

TEST(TopicPartition, DirNames) {
  EXPECT_EQ((topic_partition{"a-b", 12}).dir_name(), "a-b-12");
  auto tp = topic_partition::parse("my-topic-3");
  ASSERT_TRUE(tp);
  EXPECT_EQ(tp->topic, "my-topic");
  EXPECT_EQ(tp->partition, 3);
  EXPECT_FALSE(topic_partition::parse("nodash"));
  EXPECT_FALSE(topic_partition::parse("t-x"));
  EXPECT_FALSE(topic_partition::parse("t-3.1-delete"));
  EXPECT_FALSE(topic_partition::parse("-3"));
}

// Kafka allows 249-character topic names and this broker partition numbers
// up to 2^31 - 1: every such partition has a directory name (and a
// "-delete" rename) within the file system's 255 bytes, names that fitted
// before keep their plain form, and two long topics never share one.
TEST(TopicPartition, EveryLegalNameFitsAFileName) {
  const std::string longest(limits::max_topic_name_bytes, 'x');
  for (int32_t p : {0, 9, 10, 99'999, 100'000, INT32_MAX}) {
    const topic_partition tp{longest, p};
    EXPECT_LE(tp.dir_name().size(), limits::max_file_name_bytes) << p;
    EXPECT_LE(tp.dir_name(251).size(), 251u) << p;
    EXPECT_TRUE(topic_partition::is_dir_name(tp.dir_name())) << p;
  }
  EXPECT_EQ((topic_partition{longest, 99'999}).dir_name(), longest + "-99999");  // 255 bytes: plain
  const std::string hashed = topic_partition{longest, 100'000}.dir_name();
  EXPECT_EQ(hashed.substr(0, 201), longest.substr(0, 200) + "~");
  EXPECT_FALSE(topic_partition::parse(hashed));  // the topic cannot be read back from it
  std::string other = longest;
  other.back() = 'y';
  EXPECT_NE(hashed, (topic_partition{other, 100'000}).dir_name());
}

TEST(LogManager, LongestNamesCreateRemoveAndReopen) {
  temp_dir tmp;
  const std::string longest(limits::max_topic_name_bytes, 'q');
  for (int32_t p : {0, 1234, INT32_MAX}) {
    auto m = open_manager(tmp.path());
    auto l = m->get_or_create({longest, p});
    ASSERT_TRUE(l.ok()) << l.err().message;
    auto b = make_batch(2, 10, 1);
    ASSERT_TRUE((*l)->append(b, leader_epoch(0)).ok());
    ASSERT_TRUE(m->shutdown().ok());
    m = open_manager(tmp.path());
    ASSERT_NE(m->get({longest, p}), nullptr) << p;
    EXPECT_EQ(m->get({longest, p})->log_end_offset(), offset(2));
    ASSERT_TRUE(m->remove({longest, p}).ok()) << p;
    EXPECT_TRUE(std::filesystem::is_empty(tmp.path())) << p;
  }
}

TEST(LogManager, CreateFindRemoveReopen) {
  temp_dir tmp;
  {
    auto m = open_manager(tmp.path());
    EXPECT_EQ(m->get({"t", 0}), nullptr);
    auto l = m->get_or_create({"t", 0});
    ASSERT_TRUE(l.ok());
    EXPECT_EQ(m->get({"t", 0}), *l);
    EXPECT_EQ(*m->get_or_create({"t", 0}), *l);
    auto b = make_batch(3, 10, 1);
    ASSERT_TRUE((*l)->append(b, leader_epoch(0)).ok());
    ASSERT_TRUE(m->get_or_create({"with-dash", 7}).ok());
    ASSERT_TRUE(m->get_or_create({"gone", 1}).ok());
    ASSERT_TRUE(m->remove({"gone", 1}).ok());
    EXPECT_FALSE(std::filesystem::exists(tmp.sub("gone-1")));
    EXPECT_EQ(m->remove({"gone", 1}).code(), errc::not_found);
    EXPECT_EQ(m->get_or_create({"bad/name", 0}).code(), errc::invalid_argument);
    ASSERT_TRUE(m->shutdown().ok());
    EXPECT_EQ(m->get_or_create({"t", 1}).code(), errc::shutting_down);
    EXPECT_EQ((*l)->append(b, leader_epoch(0)).code(), errc::shutting_down);
  }
  // A deletion interrupted by a crash is finished at open.
  std::filesystem::create_directories(tmp.sub("old-0.9-delete"));
  auto m = open_manager(tmp.path());
  auto parts = m->dir_names();
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0], "t-0");
  EXPECT_EQ(parts[1], "with-dash-7");
  EXPECT_EQ(m->get({"t", 0})->log_end_offset(), offset(3));
  EXPECT_TRUE(m->get({"t", 0})->recovery().clean_shutdown);
  EXPECT_FALSE(std::filesystem::exists(tmp.sub("old-0.9-delete")));
}

// The clean-shutdown record (one per data directory) replaced the per-log
// markers at shutdown: it is read and removed at open, a damaged one trusts
// nothing, and a data directory with an earlier version's per-log markers
// still opens without scans.
TEST(LogManager, CleanShutdownRecordAndOldMarkers) {
  temp_dir tmp;
  const std::string record = tmp.sub(log_manager::kCleanShutdownRecord);
  {
    auto m = open_manager(tmp.path());
    for (int p = 0; p < 3; ++p) {
      auto b = make_batch(2, 10, 1);
      ASSERT_TRUE((*m->get_or_create({"r", p}))->append(b, leader_epoch(0)).ok());
    }
    ASSERT_TRUE(m->shutdown().ok());
  }
  EXPECT_TRUE(std::filesystem::exists(record));
  EXPECT_FALSE(std::filesystem::exists(tmp.sub("r-0/clean-shutdown")));
  {
    auto m = open_manager(tmp.path());
    EXPECT_FALSE(std::filesystem::exists(record));  // removed before any append could follow
    for (int p = 0; p < 3; ++p) EXPECT_TRUE(m->get({"r", p})->recovery().clean_shutdown) << p;
    ASSERT_TRUE(m->shutdown().ok());
  }
  // Damaged: nothing is trusted, everything is still there.
  {
    std::fstream f(record, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(30);
    f.put('#');
  }
  {
    auto m = open_manager(tmp.path());
    EXPECT_FALSE(std::filesystem::exists(record));
    for (int p = 0; p < 3; ++p) {
      EXPECT_FALSE(m->get({"r", p})->recovery().clean_shutdown) << p;
      EXPECT_EQ(m->get({"r", p})->log_end_offset(), offset(2));
    }
    ASSERT_TRUE(m->shutdown().ok());
  }
  // An earlier version's shutdown: per-log markers and no record.
  std::filesystem::remove(record);
  for (int p = 0; p < 3; ++p) std::ofstream(tmp.sub("r-" + std::to_string(p) + "/clean-shutdown"));
  auto m = open_manager(tmp.path());
  for (int p = 0; p < 3; ++p) {
    EXPECT_TRUE(m->get({"r", p})->recovery().clean_shutdown) << p;
    EXPECT_FALSE(std::filesystem::exists(tmp.sub("r-" + std::to_string(p) + "/clean-shutdown")));
  }
}

TEST(LogManager, ConcurrentGetOrCreateYieldsOneLog) {
  temp_dir tmp;
  auto m = open_manager(tmp.path());
  std::vector<std::shared_ptr<log>> got(8);
  std::vector<std::thread> ts;
  for (size_t i = 0; i < got.size(); ++i)
    ts.emplace_back([&, i] {
      for (int p = 0; p < 20; ++p) {
        auto l = m->get_or_create({"c", p});
        ASSERT_TRUE(l.ok());
        if (p == 5) got[i] = *l;
      }
    });
  for (auto& t : ts) t.join();
  for (const auto& l : got) EXPECT_EQ(l, got[0]);
  EXPECT_EQ(m->dir_names().size(), 20u);
}

// Records every sync through a fault_fs (syncs simulated: memory speed).
struct sync_log {
  io::fault_fs fs{io::filesystem::posix()};
  std::mutex mu;
  std::vector<std::string> paths;
  sync_log() {
    fs.simulate_syncs(true);
    fs.on_sync([this](const std::string& p) {
      std::lock_guard g(mu);
      paths.push_back(p);
    });
  }
  size_t count(const std::string& path) {
    std::lock_guard g(mu);
    return static_cast<size_t>(std::count(paths.begin(), paths.end(), path));
  }
  size_t total() {
    std::lock_guard g(mu);
    return paths.size();
  }
};

std::unique_ptr<log_manager> open_manager_on(io::filesystem& fs, const std::string& dir) {
  log_manager_config cfg;
  cfg.data_dir = dir;
  cfg.default_log = testing::small_config();
  cfg.default_log.fsync = true;
  auto m = log_manager::open(fs, clock::system(), cfg);
  EXPECT_TRUE(m.ok()) << m.err().message;
  return m.ok() ? std::move(m).value() : nullptr;
}

// Creating many partitions paid three syncs each (the empty segment, the
// log's directory, the data directory): 20,000 partitions took 16-48 s on
// three brokers. Logs created together now share one sync of the data
// directory per limits::logs_created_per_directory_sync, and a new log
// syncs nothing of its own until it has data to make durable.
TEST(LogManager, LogsCreatedTogetherShareOneDirectorySync) {
  temp_dir tmp;
  sync_log syncs;
  auto m = open_manager_on(syncs.fs, tmp.path());
  const size_t before = syncs.total();
  const size_t n = limits::logs_created_per_directory_sync + 88;
  std::vector<log_manager::log_spec> wanted;
  for (size_t p = 0; p < n; ++p) wanted.push_back({{"many", static_cast<int32_t>(p)}, std::nullopt});
  wanted.push_back({{"many", 3}, std::nullopt});  // named twice: the same log
  const auto got = m->get_or_create_all(wanted);
  ASSERT_EQ(got.size(), n + 1);
  for (const auto& l : got) ASSERT_TRUE(l.ok()) << l.err().message;
  EXPECT_EQ(*got[n], *got[3]);
  EXPECT_EQ(syncs.total() - before, 2u);  // two chunks, nothing else
  EXPECT_EQ(syncs.count(tmp.path()), 2u);
  for (size_t p = 0; p < n; ++p) EXPECT_EQ(m->get({"many", static_cast<int32_t>(p)}), *got[p]);

  // Existing logs cost no sync; the first data synced makes the segment's
  // name durable in the log's directory.
  ASSERT_TRUE(m->get_or_create_all(wanted).front().ok());
  EXPECT_EQ(syncs.count(tmp.path()), 2u);
  auto& l = *got[7];
  auto b = make_batch(2, 10, 1);
  ASSERT_TRUE(l->append(b, leader_epoch(0)).ok());
  ASSERT_TRUE(l->wait_durable(offset(1)).ok());
  EXPECT_EQ(syncs.count(l->dir()), 1u);
  EXPECT_EQ(syncs.count(tmp.path()), 2u);
}

// A log created and closed cleanly without data never synced its
// segment's name: after the next open its first synced data syncs the
// log's directory too, or a power loss could take the segment (and the
// acknowledged records in it) with that name.
TEST(LogManager, TheFirstSyncAfterAnOpenMakesTheSegmentsNameDurable) {
  temp_dir tmp;
  sync_log syncs;
  {
    auto first = open_manager_on(syncs.fs, tmp.path());
    ASSERT_TRUE(first->get_or_create({"idle", 0}).ok());
  }  // shut down cleanly
  auto m = open_manager_on(syncs.fs, tmp.path());
  auto l = m->get({"idle", 0});
  ASSERT_NE(l, nullptr);
  EXPECT_TRUE(l->recovery().clean_shutdown);
  EXPECT_EQ(syncs.count(l->dir()), 0u);
  auto b = make_batch(2, 10, 1);
  ASSERT_TRUE(l->append(b, leader_epoch(0)).ok());
  ASSERT_TRUE(l->wait_durable(offset(1)).ok());
  EXPECT_EQ(syncs.count(l->dir()), 1u);
  auto more = make_batch(2, 10, 2);
  ASSERT_TRUE(l->append(more, leader_epoch(0)).ok());
  ASSERT_TRUE(l->wait_durable(offset(3)).ok());
  EXPECT_EQ(syncs.count(l->dir()), 1u);  // once per open
}

// Opening empty logs after a crash syncs nothing: an empty segment has no
// bytes to make durable (its first synced data syncs the file and its name).
TEST(LogManager, EmptyLogsRecoverWithoutASync) {
  temp_dir tmp;
  sync_log syncs;
  {
    auto first = open_manager_on(syncs.fs, tmp.path());
    for (int32_t p = 0; p < 20; ++p) ASSERT_TRUE(first->get_or_create({"empty", p}).ok());
  }
  // As after a crash: no record of a clean shutdown.
  std::filesystem::remove(std::filesystem::path(tmp.path()) / log_manager::kCleanShutdownRecord);
  const size_t before = syncs.total();
  auto m = open_manager_on(syncs.fs, tmp.path());
  auto l = m->get({"empty", 7});
  ASSERT_NE(l, nullptr);
  EXPECT_FALSE(l->recovery().clean_shutdown);
  EXPECT_EQ(syncs.total(), before);
  auto b = make_batch(2, 10, 1);
  ASSERT_TRUE(l->append(b, leader_epoch(0)).ok());
  ASSERT_TRUE(l->wait_durable(offset(1)).ok());
  EXPECT_EQ(syncs.count(l->dir()), 1u);
}

// A log is handed out only once its directory's name is durable: when the
// data directory's sync fails, none of the logs it covered is, and a later
// call opens them again.
TEST(LogManager, NoLogHandedOutBeforeItsDirectorySyncSucceeded) {
  temp_dir tmp;
  sync_log syncs;
  auto m = open_manager_on(syncs.fs, tmp.path());
  ASSERT_TRUE(m->get_or_create({"old", 0}).ok());
  std::vector<log_manager::log_spec> wanted = {
      {{"old", 0}, std::nullopt}, {{"new", 0}, std::nullopt}, {{"new", 1}, std::nullopt}};
  syncs.fs.fail_syncs(1);
  auto got = m->get_or_create_all(wanted);
  EXPECT_TRUE(got[0].ok());  // it existed already
  EXPECT_FALSE(got[1].ok());
  EXPECT_FALSE(got[2].ok());
  EXPECT_EQ(m->get({"new", 0}), nullptr);
  EXPECT_EQ(m->get({"new", 1}), nullptr);
  got = m->get_or_create_all(wanted);
  for (const auto& l : got) EXPECT_TRUE(l.ok());
  EXPECT_NE(m->get({"new", 1}), nullptr);
}

TEST(LogManager, SharedFileHandleCap) {
  temp_dir tmp;
  auto m = open_manager(tmp.path(), 8);
  for (int p = 0; p < 30; ++p) {
    auto l = m->get_or_create({"cap", p});
    ASSERT_TRUE(l.ok());
    for (int i = 0; i < 5; ++i) {
      auto b = make_batch(1, 1000, static_cast<uint32_t>(i));
      ASSERT_TRUE((*l)->append(b, leader_epoch(0)).ok());
    }
  }
  EXPECT_LE(m->files().open_count(), 8u);
  for (int p = 0; p < 30; ++p) EXPECT_EQ(m->get({"cap", p})->read_bytes(offset(0), 1)->size(), make_batch(1, 1000, 0).size());
  EXPECT_LE(m->files().open_count(), 8u);
}

size_t rss_bytes() {
  std::ifstream f("/proc/self/statm");
  size_t pages = 0, rss = 0;
  f >> pages >> rss;
  return rss * static_cast<size_t>(::sysconf(_SC_PAGESIZE));
}

TEST(LogManager, ThousandIdlePartitionsStaySmall) {
  temp_dir tmp;
  const size_t before = rss_bytes();
  auto m = open_manager(tmp.path(), limits::default_max_open_segment_files, /*fsync=*/false);
  for (int p = 0; p < 1000; ++p) ASSERT_TRUE(m->get_or_create({"idle", p}).ok());
  const size_t after = rss_bytes();
  const double mib = static_cast<double>(after > before ? after - before : 0) / (1 << 20);
  std::printf("1000 idle partitions: +%.1f MiB resident (%.1f MiB total)\n", mib,
              static_cast<double>(after) / (1 << 20));
#if defined(__SANITIZE_ADDRESS__)
  EXPECT_LT(mib, 64.0);  // ASan's shadow memory and redzones inflate everything
#else
  EXPECT_LT(mib, 16.0);
#endif
  ASSERT_TRUE(m->shutdown().ok());
  // And they all come back.
  auto again = open_manager(tmp.path(), 64, false);
  EXPECT_EQ(again->dir_names().size(), 1000u);
}

}  // namespace
}  // namespace sluice::storage
