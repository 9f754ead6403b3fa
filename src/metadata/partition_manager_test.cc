// The partition manager on a real (or fault-injecting) file system: topic
// names at Kafka's length limit, deletions cut short at every step, and
// what a restart makes of what they leave behind.

#include "base/clock.h"
#include "metadata/broker_configs.h"
#include "metadata/memory_store.h"
#include "metadata/metadata_cache.h"
#include "metadata/partition_manager.h"
#include "metadata/test_managers.h"

#include <atomic>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "config/dynamic.h"
#include "io/fault_fs.h"
#include "model/record_batch.h"
#include "protocol/error_code.h"
#include "storage/test_util.h"

namespace sluice::cluster {
namespace {

namespace fs = std::filesystem;

const std::string kLongest(limits::max_topic_name_bytes, 'L');

class PartitionManagerTest : public ::testing::Test {
 protected:
  void TearDown() override { close(); }

  // A log manager and a partition manager on `fsys`; null (with the failure
  // recorded) when either cannot open.
  partition_manager* open(io::filesystem& fsys,
                          std::vector<std::pair<std::string, std::string>> settings = {},
                          std::unique_ptr<metadata_store> store = nullptr,
                          sluice::clock& clk = sluice::clock::system()) {
    auto m = testing::open_managers(fsys, logs_dir(), static_config(std::move(settings)), std::move(store), clk);
    logs_ = std::move(m.logs);
    pm_ = std::move(m.partitions);
    return pm_.get();
  }

  // The broker's stop: partitions (producer snapshots), then the logs.
  void close() {
    if (pm_) pm_->shutdown();
    pm_.reset();
    if (logs_) logs_->shutdown().ignore();
    logs_.reset();
  }

  config::broker_config static_config(std::vector<std::pair<std::string, std::string>> settings) {
    config::config_map m;
    m.set("log.dirs", std::vector<std::string>{tmp_.path()});
    for (auto& [k, v] : settings) {
      auto parsed = config::parse_value(*config::find_broker_setting(k), k, v);
      EXPECT_TRUE(parsed.ok()) << k;
      m.set(k, std::move(parsed).value());
    }
    auto b = config::make_broker_config(std::move(m));
    EXPECT_TRUE(b.ok()) << b.err().message;
    return std::move(b).value();
  }

  std::string logs_dir() const { return tmp_.sub("logs"); }
  std::string meta_dir(const std::string& sub) const { return tmp_.sub("meta/" + sub); }

  static std::set<std::string> names_in(const std::string& dir) {
    std::set<std::string> out;
    for (const auto& e : fs::directory_iterator(dir)) out.insert(e.path().filename().string());
    return out;
  }
  // Producer-state snapshot files in a partition's log directory.
  static size_t snapshots_in(const std::string& dir) {
    size_t k = 0;
    for (const auto& n : names_in(dir)) k += n.size() > 9 && n.substr(n.size() - 9) == ".snapshot";
    return k;
  }
  // Entries of `dir` whose name starts with the first 200 bytes of `topic`
  // (both directory name forms and every "-delete" rename of them).
  static std::set<std::string> names_of(const std::string& dir, const std::string& topic) {
    std::set<std::string> out;
    const std::string prefix = topic.substr(0, 200);
    for (const auto& n : names_in(dir))
      if (n.compare(0, prefix.size(), prefix) == 0) out.insert(n);
    return out;
  }

  void append(const std::string& topic, int32_t p, int32_t records) {
    auto part = pm_->get(topic, p);
    ASSERT_NE(part, nullptr) << topic << "-" << p;
    auto b = storage::testing::make_batch(records, 10, 1);
    auto out = part->append(b, 1'700'000'000'000);
    ASSERT_EQ(out.error, errc::ok) << out.message;
  }

  // Real files with simulated syncs, for tests about many partitions that
  // are not about durability: they run at memory speed.
  static io::fault_fs& fast_fs() {
    static io::fault_fs* f = [] {
      auto* ffs = new io::fault_fs(io::filesystem::posix());
      ffs->simulate_syncs(true);
      return ffs;
    }();
    return *f;
  }

  storage::testing::temp_dir tmp_;
  std::unique_ptr<storage::log_manager> logs_;
  std::unique_ptr<partition_manager> pm_;
};

// Issue 16 item 6: a topic with a 249-character name, legal in Kafka, is
// created, written, survives a restart, is deleted without a trace, and the
// broker starts again afterwards.
TEST_F(PartitionManagerTest, LongestTopicNameLivesAndDies) {
  const int32_t n = 12;  // two-digit partitions: "<249>-10.tmp" is 256 bytes
  ASSERT_NE(open(io::filesystem::posix()), nullptr);
  ASSERT_FALSE(pm_->create_topic(kLongest, n, 1, {}, false));
  for (int32_t p = 0; p < n; ++p) append(kLongest, p, 3);
  close();
  // Every partition's producer snapshot was written at shutdown, in its
  // log directory.
  size_t with_snapshot = 0;
  for (const auto& d : names_of(logs_dir(), kLongest)) with_snapshot += snapshots_in(logs_dir() + "/" + d) > 0;
  EXPECT_EQ(with_snapshot, static_cast<size_t>(n));

  ASSERT_NE(open(io::filesystem::posix()), nullptr);
  for (int32_t p = 0; p < n; ++p) {
    ASSERT_NE(pm_->get(kLongest, p), nullptr);
    EXPECT_EQ(pm_->get(kLongest, p)->log_end_offset(), offset(3));
  }
  ASSERT_FALSE(pm_->delete_topic(kLongest));
  EXPECT_TRUE(names_in(logs_dir()).empty());
  EXPECT_TRUE(names_in(meta_dir("producers")).empty());
  close();

  ASSERT_NE(open(io::filesystem::posix()), nullptr);
  EXPECT_FALSE(pm_->topic(kLongest));
  ASSERT_FALSE(pm_->create_topic(kLongest, 1, 1, {}, false));
  EXPECT_EQ(pm_->get(kLongest, 0)->log_end_offset(), offset(0));
}

// A directory left by a deletion that a crash (or an older version that
// could not rename it) cut short, and one whose name was never a valid
// rename target, never keep the broker from starting.
TEST_F(PartitionManagerTest, DeletionLeftoversFoundAtStartAreRemoved) {
  ASSERT_NE(open(io::filesystem::posix()), nullptr);
  ASSERT_FALSE(pm_->create_topic("keep", 1, 1, {}, false));
  ASSERT_FALSE(pm_->create_topic(kLongest, 2, 1, {}, false));
  append("keep", 0, 2);
  append(kLongest, 1, 2);
  close();
  // After the deletion, put back what a crash right after the table was
  // written would have left: a partition directory, a producer snapshot and
  // the overrides file; plus a half-removed old-style "-delete" directory
  // and a torn snapshot write.
  fs::copy(logs_dir() + "/" + kLongest + "-1", tmp_.sub("saved"), fs::copy_options::recursive);
  ASSERT_NE(open(io::filesystem::posix()), nullptr);
  ASSERT_FALSE(pm_->delete_topic(kLongest));
  close();
  fs::rename(tmp_.sub("saved"), logs_dir() + "/" + kLongest + "-1");
  fs::create_directories(logs_dir() + "/keep-0.3-delete/sub");  // an old-style rename, half removed
  std::ofstream(meta_dir("producers") + "/" + kLongest + "-0") << "stale";
  std::ofstream(meta_dir("producers") + "/keep-0.tmp") << "torn";
  std::ofstream(meta_dir("configs") + "/" + kLongest) << "retention.ms=1\n";

  ASSERT_NE(open(io::filesystem::posix()), nullptr);
  EXPECT_EQ(names_in(logs_dir()), std::set<std::string>{"keep-0"});
  // Stale and torn snapshots of earlier versions' place are gone; keep-0's
  // own lives in its log directory.
  EXPECT_TRUE(names_in(meta_dir("producers")).empty());
  EXPECT_EQ(snapshots_in(logs_dir() + "/keep-0"), 1u);
  EXPECT_TRUE(names_in(meta_dir("configs")).empty());
  EXPECT_EQ(pm_->get("keep", 0)->log_end_offset(), offset(2));
  // A topic created again under the name starts empty and with no overrides.
  ASSERT_FALSE(pm_->create_topic(kLongest, 2, 1, {}, false));
  EXPECT_TRUE(pm_->topic(kLongest)->overrides.empty());
  EXPECT_EQ(pm_->get(kLongest, 1)->log_end_offset(), offset(0));
}

// A deletion cut short by a crash at each of its steps in turn (table,
// overrides file, each partition's close, rename, directory sync, removal,
// snapshot): the next start succeeds, the other topic is intact, and the
// deleted topic is either still whole (the table was not yet written) or
// gone without a trace after that start.
TEST_F(PartitionManagerTest, DeletionCutShortAtEveryStepStillStarts) {
  const int32_t n = 3;
  auto setup = [&](io::fault_fs& ffs) {
    ASSERT_NE(open(ffs), nullptr);
    std::vector<config::config_entry> cfg{{"retention.ms", "86400000"}};
    ASSERT_FALSE(pm_->create_topic("keep", 1, 1, {}, false));
    ASSERT_FALSE(pm_->create_topic(kLongest, n, 1, cfg, false));
    append("keep", 0, 2);
    for (int32_t p = 0; p < n; ++p) append(kLongest, p, 2);
  };
  // A dry run counts the steps.
  uint64_t steps = 0;
  {
    io::fault_fs ffs(io::filesystem::posix());
    ffs.simulate_syncs(true);
    setup(ffs);
    const uint64_t before = ffs.ops();
    ASSERT_FALSE(pm_->delete_topic(kLongest));
    steps = ffs.ops() - before;
    close();
  }
  ASSERT_GT(steps, 10u);
  bool gone = false;  // once the table is written the topic stays deleted
  for (uint64_t k = 0; k <= steps; ++k) {
    SCOPED_TRACE("crash after " + std::to_string(k) + " of " + std::to_string(steps) + " steps");
    fs::remove_all(logs_dir());
    fs::remove_all(tmp_.sub("meta"));
    {
      io::fault_fs ffs(io::filesystem::posix());
      ffs.simulate_syncs(true);
      setup(ffs);
      ffs.crash_after_ops(k);
      pm_->delete_topic(kLongest);  // answers whatever it answers
      close();
    }
    ASSERT_NE(open(io::filesystem::posix()), nullptr);
    EXPECT_EQ(pm_->get("keep", 0)->log_end_offset(), offset(2));
    if (pm_->topic(kLongest)) {
      EXPECT_FALSE(gone) << "the topic came back";
      for (int32_t p = 0; p < n; ++p) EXPECT_EQ(pm_->get(kLongest, p)->log_end_offset(), offset(2));
    } else {
      gone = true;
      EXPECT_EQ(names_in(logs_dir()), std::set<std::string>{"keep-0"});
      EXPECT_TRUE(names_of(meta_dir("producers"), kLongest).empty());
      EXPECT_TRUE(names_in(meta_dir("configs")).empty());
    }
    close();
  }
}

// Issue 16 item 9: shutdown cost must not grow with idle partitions. With
// 5,000 partitions of which 10 were written, a clean shutdown syncs a few
// files per written partition and one record for all of them; the next
// start trusts every log without a sync per partition, and a crash after
// that start trusts none.
TEST_F(PartitionManagerTest, ShutdownSyncsPerWrittenPartitionNotPerPartition) {
  const int32_t n = 5000, written = 10;
  io::fault_fs ffs(io::filesystem::posix());
  ffs.simulate_syncs(true);
  ASSERT_NE(open(ffs), nullptr);
  ASSERT_FALSE(pm_->create_topic("many", n, 1, {}, false));
  for (int32_t p = 0; p < written; ++p) append("many", p * 499, 2);

  uint64_t before = ffs.syncs();
  close();
  const uint64_t shutdown_syncs = ffs.syncs() - before;
  std::printf("shutdown of %d partitions (%d written): %llu syncs\n", n, written,
              static_cast<unsigned long long>(shutdown_syncs));
  // A written partition: segment, two index files, the producer snapshot
  // and the leader-epoch checkpoint its first append left to the close
  // (each atomic: file and directory); then the record.
  EXPECT_LE(shutdown_syncs, static_cast<uint64_t>(written) * 10 + 10);

  before = ffs.syncs();
  ASSERT_NE(open(ffs), nullptr);
  const uint64_t start_syncs = ffs.syncs() - before;
  std::printf("start with %d partitions: %llu syncs\n", n,
              static_cast<unsigned long long>(start_syncs));
  EXPECT_LT(start_syncs, 100u);
  for (int32_t p = 0; p < n; ++p) {
    auto part = pm_->get("many", p);
    ASSERT_NE(part, nullptr);
    ASSERT_TRUE(partition_test_access::log(*part).recovery().clean_shutdown) << p;
    EXPECT_EQ(part->log_end_offset(), offset(p % 499 == 0 && p / 499 < written ? 2 : 0)) << p;
  }

  // Appends after a start that trusted the record, then a crash: the record
  // was removed before any log opened, so nothing is trusted now.
  append("many", 1, 3);
  ffs.crash_after_ops(0);
  close();
  ASSERT_NE(open(io::filesystem::posix()), nullptr);
  EXPECT_FALSE(partition_test_access::log(*pm_->get("many", 1)).recovery().clean_shutdown);
  EXPECT_FALSE(partition_test_access::log(*pm_->get("many", 2)).recovery().clean_shutdown);
  EXPECT_EQ(pm_->get("many", 1)->log_end_offset(), offset(3));
  EXPECT_EQ(pm_->get("many", 499)->log_end_offset(), offset(2));
}

// A log that did not close cleanly is left out of the record and scanned
// at the next start, while the others are trusted.
TEST_F(PartitionManagerTest, RecordLeavesOutALogThatDidNotCloseCleanly) {
  ASSERT_NE(open(io::filesystem::posix()), nullptr);
  ASSERT_FALSE(pm_->create_topic("t", 3, 1, {}, false));
  for (int32_t p = 0; p < 3; ++p) append("t", p, 2);
  // Its directory made unusable: closing it fails, so it goes offline.
  fs::rename(logs_dir() + "/t-1", tmp_.sub("t-1-away"));
  close();
  fs::rename(tmp_.sub("t-1-away"), logs_dir() + "/t-1");
  ASSERT_NE(open(io::filesystem::posix()), nullptr);
  EXPECT_TRUE(partition_test_access::log(*pm_->get("t", 0)).recovery().clean_shutdown);
  EXPECT_FALSE(partition_test_access::log(*pm_->get("t", 1)).recovery().clean_shutdown);
  EXPECT_TRUE(partition_test_access::log(*pm_->get("t", 2)).recovery().clean_shutdown);
  for (int32_t p = 0; p < 3; ++p) EXPECT_EQ(pm_->get("t", p)->log_end_offset(), offset(2));
}

// Issue 16 item 8: create_mode::background records the topic and returns;
// the logs follow on the background thread, and until then a partition
// answers NOT_LEADER_OR_FOLLOWER.
TEST_F(PartitionManagerTest, BackgroundCreationFinishesAndAppliesLaterConfig) {
  const int32_t n = 2000;
  ASSERT_NE(open(fast_fs()), nullptr);
  using mode = partition_manager::create_mode;
  ASSERT_FALSE(pm_->create_topic("bg", n, 1, {}, false, mode::background));
  ASSERT_TRUE(pm_->topic("bg"));
  EXPECT_EQ(pm_->topic("bg")->partitions, n);
  // An alter while logs are still being made reaches every partition.
  config::config_map ov;
  ov.set("retention.ms", int64_t{123'456});
  ASSERT_TRUE(pm_->set_topic_overrides("bg", ov).ok());
  if (!pm_->get("bg", n - 1)) {
    EXPECT_EQ(pm_->missing_partition_error("bg", n - 1), errc::not_leader);
  }
  EXPECT_EQ(pm_->missing_partition_error("bg", n), errc::not_found);
  EXPECT_EQ(pm_->missing_partition_error("none", 0), errc::not_found);
  std::promise<void> created;
  pm_->when_created("bg", [&] { created.set_value(); });
  ASSERT_EQ(created.get_future().wait_for(std::chrono::minutes(5)), std::future_status::ready);
  pm_->wait_for_creations();
  for (int32_t p = 0; p < n; ++p) {
    auto part = pm_->get("bg", p);
    ASSERT_NE(part, nullptr) << p;
    EXPECT_EQ(part->config().retention_ms, 123'456) << p;
  }
  // add_partitions in the background too.
  ASSERT_FALSE(pm_->add_partitions("bg", n + 10, false, mode::background));
  pm_->wait_for_creations();
  for (int32_t p = n; p < n + 10; ++p) ASSERT_NE(pm_->get("bg", p), nullptr) << p;
  EXPECT_EQ(names_of(logs_dir(), "bg-").size(), static_cast<size_t>(n + 10));
}

// A topic deleted while its logs are being created: no log of it is made
// or left afterwards, and the name can be used again at once.
TEST_F(PartitionManagerTest, DeleteDuringBackgroundCreationLeavesNothing) {
  ASSERT_NE(open(fast_fs()), nullptr);
  using mode = partition_manager::create_mode;
  for (int round = 0; round < 3; ++round) {
    ASSERT_FALSE(pm_->create_topic("gone", 1500, 1, {}, false, mode::background));
    std::this_thread::sleep_for(std::chrono::milliseconds(20 * round));
    ASSERT_FALSE(pm_->delete_topic("gone"));
    pm_->wait_for_creations();
    EXPECT_FALSE(pm_->topic("gone"));
    EXPECT_EQ(pm_->get("gone", 0), nullptr);
    EXPECT_TRUE(names_of(logs_dir(), "gone-").empty()) << round;
  }
  ASSERT_FALSE(pm_->create_topic("gone", 30, 1, {}, false, mode::background));
  pm_->wait_for_creations();
  EXPECT_EQ(names_of(logs_dir(), "gone-").size(), 30u);
  EXPECT_EQ(pm_->get("gone", 29)->log_end_offset(), offset(0));
}

// Deleting by topic id (DeleteTopics v6): the id names one incarnation of
// a topic, so after a delete and a create under the same name the old id
// finds nothing and the new topic stays.
TEST_F(PartitionManagerTest, DeleteByIdDeletesOnlyThatIncarnation) {
  ASSERT_NE(open(fast_fs()), nullptr);
  ASSERT_FALSE(pm_->create_topic("t", 2, 1, {}, false));
  const topic_id first = pm_->topic("t")->id;
  topic_info deleted;
  ASSERT_FALSE(pm_->delete_topic_by_id(first, &deleted));
  EXPECT_EQ(deleted.name, "t");
  EXPECT_EQ(deleted.id, first);
  EXPECT_FALSE(pm_->topic("t"));
  EXPECT_TRUE(names_of(logs_dir(), "t-").empty());

  ASSERT_FALSE(pm_->create_topic("t", 1, 1, {}, false));
  const topic_id second = pm_->topic("t")->id;
  EXPECT_NE(second, first);
  topic_info none;
  auto e = pm_->delete_topic_by_id(first, &none);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code, errc::unknown_topic_id);
  EXPECT_TRUE(none.name.empty());
  ASSERT_TRUE(pm_->topic("t"));
  EXPECT_NE(pm_->get("t", 0), nullptr);

  // By name, the deleted topic's id is reported too.
  ASSERT_FALSE(pm_->delete_topic("t", &deleted));
  EXPECT_EQ(deleted.id, second);
}

// A topic deleted while its logs are being made and created again at once
// under its name (as automatic creation does): the cancelled job must not
// remove the logs the new topic now uses.
TEST_F(PartitionManagerTest, RecreatedWhileTheOldJobRunsKeepsItsLogs) {
  ASSERT_NE(open(fast_fs()), nullptr);
  using mode = partition_manager::create_mode;
  const int32_t n = 400;
  for (int round = 0; round < 5; ++round) {
    ASSERT_FALSE(pm_->create_topic("again", n, 1, {}, false, mode::background));
    std::this_thread::sleep_for(std::chrono::milliseconds(5 * round));
    ASSERT_FALSE(pm_->delete_topic("again"));
    ASSERT_FALSE(pm_->create_topic("again", n, 1, {}, false, mode::wait));
    pm_->wait_for_creations();
    EXPECT_EQ(names_of(logs_dir(), "again-").size(), static_cast<size_t>(n)) << round;
    for (int32_t p = 0; p < n; ++p) {
      auto part = pm_->get("again", p);
      ASSERT_NE(part, nullptr) << round << " " << p;
      auto b = storage::testing::make_batch(1, 10, static_cast<uint32_t>(p));
      ASSERT_EQ(part->append(b, 1'700'000'000'000).error, errc::ok) << round << " " << p;
    }
    ASSERT_FALSE(pm_->delete_topic("again"));
  }
}

// A stop before every log exists: the next start finishes the job from the
// topic table.
TEST_F(PartitionManagerTest, RestartFinishesAnInterruptedCreation) {
  const int32_t n = 3000;
  ASSERT_NE(open(fast_fs()), nullptr);
  ASSERT_FALSE(
      pm_->create_topic("half", n, 1, {}, false, partition_manager::create_mode::background));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::promise<void> told;  // a waiting CreateTopics is answered at the stop
  pm_->when_created("half", [&] { told.set_value(); });
  close();  // stops the background thread wherever it is
  ASSERT_EQ(told.get_future().wait_for(std::chrono::seconds(0)), std::future_status::ready);
  const size_t made = names_of(logs_dir(), "half-").size();
  std::printf("%zu of %d logs existed at the stop\n", made, n);
  ASSERT_NE(open(fast_fs()), nullptr);
  pm_->wait_for_creations();
  for (int32_t p = 0; p < n; ++p) ASSERT_NE(pm_->get("half", p), nullptr) << p;
  append("half", n - 1, 2);
  close();
  ASSERT_NE(open(fast_fs()), nullptr);
  EXPECT_EQ(pm_->get("half", n - 1)->log_end_offset(), offset(2));
}

// Each partition holds its replica state: on one broker it leads at epoch 0,
// is its only replica and in-sync replica, and the high watermark is its
// log end offset.
TEST_F(PartitionManagerTest, PartitionHoldsItsReplicaState) {
  ASSERT_NE(open(io::filesystem::posix(), {{"node.id", "7"}}), nullptr);
  ASSERT_FALSE(pm_->create_topic("r", 1, 1, {}, false));
  append("r", 0, 3);
  auto part = pm_->get("r", 0);
  const replica_state st = part->replicas();
  EXPECT_EQ(st.role, replica_role::leader);
  EXPECT_EQ(st.leader_id, 7);
  EXPECT_EQ(st.epoch, leader_epoch(0));
  EXPECT_EQ(st.replicas, std::vector<int32_t>{7});
  EXPECT_EQ(st.isr, (std::vector<isr_member>{{7, offset(3)}}));
  EXPECT_EQ(st.high_watermark, offset(3));
  EXPECT_EQ(part->high_watermark(), offset(3));
  EXPECT_EQ(part->epoch(), leader_epoch(0));
}

// A roll's producer-state snapshot is written where the roll is sealed (the
// flusher), never by the producer's append; it covers the log end then.
TEST_F(PartitionManagerTest, RollSnapshotsProducersWhenSealed) {
  ASSERT_NE(open(io::filesystem::posix()), nullptr);
  const std::vector<config::config_entry> cfg{{"segment.bytes", std::string("2048")}};
  ASSERT_FALSE(pm_->create_topic("idem", 1, 1, cfg, false));
  auto part = pm_->get("idem", 0);
  ASSERT_NE(part, nullptr);
  for (int32_t i = 0; i < 20; ++i) {
    storage::batch_spec spec;
    spec.records = 1;
    spec.value_bytes = 300;
    spec.producer_id = 42;
    spec.producer_epoch = 0;
    spec.base_sequence = i;
    auto b = storage::build_batch(spec);
    auto out = part->append(b, 1'700'000'000'000);
    ASSERT_EQ(out.error, errc::ok) << out.message;
  }
  auto& log = partition_test_access::log(*part);
  ASSERT_GT(log.segments().size(), 2u);
  // The flusher seals the last roll and then writes the snapshot, which
  // covers at least everything below the active segment.
  const deadline until(10'000, sluice::clock::system());
  std::optional<producer_state::loaded> loaded;
  // Snapshots live in the log directory, one per roll
  // (docs/metadata_format.md); the newest is looked at.
  while (!until.passed()) {
    std::string newest;
    for (const auto& n : names_in(log.dir()))
      if (n.size() > 9 && n.substr(n.size() - 9) == ".snapshot" && n > newest) newest = n;
    if (!newest.empty()) {
      auto l = producer_state::load_snapshot(io::filesystem::posix(), io::join(log.dir(), newest));
      if (l.ok() && l->next_offset >= log.active_segment_base()) {
        loaded = std::move(l).value();
        break;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(loaded) << "no snapshot covering the last roll";
  EXPECT_LE(loaded->next_offset, log.log_end_offset());
  EXPECT_EQ(loaded->state.producer_count(), 1u);
}

// A producer-state snapshot the seal wrote past the active segment's base
// (appends that followed the roll) describes offsets a power loss takes
// with that segment's unsynced tail. Recovery removes it: kept, it would
// be loaded once the log grew past its offset with other batches (the next
// truncation's rebuild takes the newest snapshot at or below the new end),
// and its producers would be those of the lost history. The cluster
// simulation found this: a leader answered a producer's retry as a
// duplicate at an offset holding another batch.
TEST_F(PartitionManagerTest, PowerLossRemovesProducerSnapshotsPastTheRecoveredEnd) {
  io::fault_fs ffs(io::filesystem::posix());
  ffs.simulate_syncs(true);
  const std::vector<std::pair<std::string, std::string>> settings{{"sluice.log.fsync.enable", "false"}};
  ASSERT_NE(open(ffs, settings), nullptr);
  const std::vector<config::config_entry> cfg{{"segment.bytes", std::string("2048")}};
  ASSERT_FALSE(pm_->create_topic("idem", 1, 1, cfg, false));
  auto batch = [](int64_t producer, int32_t seq) {
    storage::batch_spec spec;
    spec.records = 1;
    spec.value_bytes = 300;
    spec.seed = static_cast<uint32_t>(producer * 1000 + seq);
    spec.producer_id = producer;
    spec.producer_epoch = 0;
    spec.base_sequence = seq;
    return storage::build_batch(spec);
  };
  auto append = [&](int64_t producer, int32_t seq) {
    auto b = batch(producer, seq);
    auto out = pm_->get("idem", 0)->append(b, 1'700'000'000'000);
    EXPECT_EQ(out.error, errc::ok) << out.message;
    return out;
  };
  // Producer 42 until a roll: its last batch opens the new segment, and the
  // seal's snapshot, written after that append, covers it.
  int32_t seq = 0;
  auto& log = partition_test_access::log(*pm_->get("idem", 0));
  while (log.segments().size() < 2) append(42, seq++);
  logs_->wait_idle();
  const offset active = log.active_segment_base();
  ASSERT_EQ(log.log_end_offset(), active + 1);
  auto newest_snapshot = [&](const std::string& dir) {
    int64_t newest = -1;
    for (const auto& n : names_in(dir))
      if (n.size() > 9 && n.substr(n.size() - 9) == ".snapshot") newest = std::max<int64_t>(newest, std::stoll(n.substr(0, 20)));
    return newest;
  };
  ASSERT_GT(newest_snapshot(log.dir()), active.value());

  ffs.crash_after_ops(0);  // the power goes: nothing more reaches the disk
  close();
  ASSERT_TRUE(ffs.drop_unsynced().ok());
  ffs.crash_after_ops(std::nullopt);
  ASSERT_NE(open(ffs, settings), nullptr);
  auto part = pm_->get("idem", 0);
  auto& relog = partition_test_access::log(*part);
  ASSERT_EQ(part->log_end_offset(), active) << "the sealed segments were synced, the active one's tail lost";
  EXPECT_LE(newest_snapshot(relog.dir()), active.value()) << "a snapshot describes offsets the power loss took";

  // Another history past that offset: producer 43 first, then 42's lost
  // batch again; a cut then rebuilds the producer state from the newest
  // snapshot at or below the new end, and the log after it.
  EXPECT_FALSE(append(43, 0).duplicate);
  EXPECT_FALSE(append(42, seq - 1).duplicate);
  EXPECT_FALSE(append(43, 1).duplicate);
  // The cut a follower makes (broker 1 leads for a moment), then this
  // broker leads again.
  ASSERT_TRUE(part->apply_state({0, 1}, partition_state{1, 1, {0, 1}, 1}));
  ASSERT_TRUE(part->truncate_to(active + 2).ok());
  ASSERT_TRUE(part->apply_state({0, 1}, partition_state{0, 2, {0, 1}, 2}));
  // Producer 43's first batch is at `active`: its retry is that batch.
  auto again = append(43, 0);
  EXPECT_TRUE(again.duplicate) << "producer 43's batch at " << active.value() << " was taken for new";
  EXPECT_EQ(again.base, active);
  close();  // before `ffs` goes
}

using testing::memory_store;

// A store that keeps the cluster-wide broker defaults (a cluster's etcd):
// an alter of the default level goes to the store, starts from what the
// store holds, writes no local file; a change the store reports later
// (another broker's alter, through the controller) is published by the
// background thread.
TEST_F(PartitionManagerTest, ClusterWideBrokerDefaultsLiveInTheStore) {
  auto store = std::make_unique<memory_store>(0, true);
  memory_store* s = store.get();
  s->keep_broker_defaults();
  ASSERT_NE(open(io::filesystem::posix(), {}, std::move(store)), nullptr);
  using ops = std::vector<config::alter_request>;
  auto alter = [&](bool cluster_default, ops o) {
    return pm_->alter_broker_config(
        cluster_default,
        [&](const config::broker_config& current) { return config::alter_broker_config(current, cluster_default, o); },
        false);
  };
  config::config_map elsewhere;  // written by another broker's alter, not yet applied here
  elsewhere.set("log.roll.ms", int64_t{600000});
  ASSERT_TRUE(s->set_broker_defaults(elsewhere).ok());
  ASSERT_TRUE(alter(true, ops{{"log.retention.ms", config::alter_op::set, "5000"}}).ok());
  auto d = s->broker_defaults();
  ASSERT_TRUE(d.has_value());
  EXPECT_NE(d->find("log.retention.ms"), nullptr);
  EXPECT_NE(d->find("log.roll.ms"), nullptr) << "the alter started from the store's level";
  EXPECT_EQ(pm_->broker_config()->topic_defaults.retention_ms, 5000);
  EXPECT_EQ(pm_->broker_config()->topic_defaults.segment_ms, 600000);
  EXPECT_FALSE(fs::exists(broker_default_configs_path(tmp_.path())));

  // Another broker removed both: published here once the store says so.
  ASSERT_TRUE(s->set_broker_defaults({}).ok());
  EXPECT_EQ(pm_->broker_config()->topic_defaults.retention_ms, 5000);
  pm_->on_broker_defaults_change();
  pm_->wait_for_creations();
  EXPECT_TRUE(pm_->broker_config()->dynamic_default_values.empty());
  EXPECT_NE(pm_->broker_config()->topic_defaults.retention_ms, 5000);

  // The node's own level stays local.
  ASSERT_TRUE(alter(false, ops{{"log.retention.ms", config::alter_op::set, "6000"}}).ok());
  EXPECT_TRUE(s->broker_defaults()->empty());
  EXPECT_TRUE(fs::exists(broker_node_configs_path(tmp_.path(), 0)));
}

// The partition manager keeps its topics only in the store it is given:
// topics created, grown and deleted through it land in that store, and
// nothing is written to the file-backed table.
TEST_F(PartitionManagerTest, TopicsLiveInTheGivenMetadataStore) {
  auto store = std::make_unique<memory_store>();
  memory_store* s = store.get();
  ASSERT_NE(open(io::filesystem::posix(), {}, std::move(store)), nullptr);
  ASSERT_FALSE(pm_->create_topic("m", 2, 1, {}, false));
  ASSERT_TRUE(s->get("m").has_value());
  EXPECT_EQ(s->get("m")->partitions, 2);
  append("m", 1, 2);
  ASSERT_FALSE(pm_->add_partitions("m", 3, false));
  EXPECT_EQ(s->get("m")->partitions, 3);
  EXPECT_EQ(pm_->topic_by_id(s->get("m")->id)->name, "m");
  EXPECT_FALSE(fs::exists(fs::path(tmp_.path()) / "meta" / "topics"));
  ASSERT_FALSE(pm_->delete_topic("m"));
  EXPECT_FALSE(s->get("m").has_value());
  EXPECT_EQ(pm_->get("m", 0), nullptr);
}

// The metadata cache answers what Metadata-like requests describe: the
// brokers and controller it was told, the topics of the store and each
// partition's leadership from its replica state.
TEST_F(PartitionManagerTest, MetadataCacheDescribesBrokersAndLeadership) {
  ASSERT_NE(open(io::filesystem::posix(), {{"node.id", "4"}}), nullptr);
  ASSERT_FALSE(pm_->create_topic("c", 1, 1, {}, false));
  metadata_cache md(pm_->store(), pm_->replicas(), 4, "cid");
  EXPECT_TRUE(md.brokers().empty());
  EXPECT_EQ(md.controller_id(), -1);
  md.set_brokers({{4, "h4", 9094, std::nullopt}, {5, "h5", 9095, std::string("r1")}}, 5);
  EXPECT_EQ(md.brokers().size(), 2u);
  EXPECT_EQ(md.broker(5)->rack, std::optional<std::string>("r1"));
  EXPECT_FALSE(md.broker(6).has_value());
  EXPECT_EQ(md.controller_id(), 5);
  EXPECT_EQ(md.cluster_id(), "cid");
  EXPECT_EQ(md.topic("c")->id, pm_->topic("c")->id);
  append("c", 0, 2);
  const partition_leadership l = md.leadership("c", 0);
  EXPECT_TRUE(l.has_leader);
  EXPECT_EQ(l.leader_id, 4);
  EXPECT_EQ(l.leader_epoch, 0);
  EXPECT_EQ(l.replicas, std::vector<int32_t>{4});
  EXPECT_EQ(l.isr, std::vector<int32_t>{4});
}

// A partition's leadership comes from the metadata store's state, as a
// controller wrote it: the hosted replica follows when another broker
// leads (appends answer not_leader) and leads again at the epoch the store
// says; Metadata shows the store's leader, epoch, replicas and ISR, and
// replicas that are not live as offline.
TEST_F(PartitionManagerTest, ReplicaStateFollowsTheStore) {
  auto store = std::make_unique<memory_store>(4);
  memory_store* s = store.get();
  ASSERT_NE(open(io::filesystem::posix(), {{"node.id", "4"}}, std::move(store)), nullptr);
  ASSERT_FALSE(pm_->create_topic("r", 2, 1, {}, false));
  EXPECT_EQ(s->get("r")->assignment, (std::vector<replica_list>{{4}, {4}}));
  metadata_cache md(pm_->store(), pm_->replicas(), 4, "cid");
  md.set_brokers({{4, "h4", 9094, std::nullopt}, {5, "h5", 9095, std::nullopt}}, 4);
  append("r", 0, 2);

  s->set_state("r", 0, {4, 5, 6}, {5, 3, {4, 5}, 7});
  ASSERT_TRUE(pm_->refresh_state("r", 0));
  auto part = pm_->get("r", 0);
  EXPECT_FALSE(part->is_leader());
  EXPECT_EQ(part->epoch(), leader_epoch(3));
  auto b = storage::testing::make_batch(1, 10, 1);
  EXPECT_EQ(part->append(b, 1'700'000'000'000).error, errc::not_leader);
  EXPECT_EQ(part->check_leader(), errc::not_leader);
  EXPECT_EQ(part->check_leader(3), errc::not_leader);
  const replica_state rs = part->replicas();
  EXPECT_EQ(rs.role, replica_role::follower);
  EXPECT_EQ(rs.leader_id, 5);
  EXPECT_EQ(rs.replicas, (std::vector<int32_t>{4, 5, 6}));
  ASSERT_EQ(rs.isr.size(), 2u);
  partition_leadership l = md.leadership("r", 0);
  EXPECT_TRUE(l.has_leader);
  EXPECT_EQ(l.leader_id, 5);
  EXPECT_EQ(l.leader_epoch, 3);
  EXPECT_EQ(l.replicas, (std::vector<int32_t>{4, 5, 6}));
  EXPECT_EQ(l.isr, (std::vector<int32_t>{4, 5}));
  EXPECT_EQ(l.offline_replicas, std::vector<int32_t>{6});
  // Partition 1 is untouched: this broker leads it at epoch 0.
  EXPECT_TRUE(pm_->get("r", 1)->is_leader());
  EXPECT_EQ(md.leadership("r", 1).leader_id, 4);

  // The leader is no longer live: no leader to show.
  md.set_brokers({{4, "h4", 9094, std::nullopt}}, 4);
  l = md.leadership("r", 0);
  EXPECT_FALSE(l.has_leader);
  EXPECT_EQ(l.leader_id, -1);
  EXPECT_EQ(l.offline_replicas, (std::vector<int32_t>{5, 6}));

  // An older state changes nothing; a newer one makes this broker lead,
  // stamping its batches with the new epoch.
  s->set_state("r", 0, {4, 5, 6}, {4, 2, {4}, 9});
  EXPECT_FALSE(pm_->refresh_state("r", 0));
  EXPECT_FALSE(part->is_leader());
  s->set_state("r", 0, {4, 5, 6}, {4, 4, {4}, 8});
  ASSERT_TRUE(pm_->refresh_state("r", 0));
  EXPECT_TRUE(part->is_leader());
  EXPECT_EQ(part->epoch(), leader_epoch(4));
  // A client's leader epoch: older is fenced, newer unknown here yet.
  EXPECT_EQ(part->check_leader(), errc::ok);
  EXPECT_EQ(part->check_leader(4), errc::ok);
  EXPECT_EQ(part->check_leader(3), errc::fenced_leader_epoch);
  EXPECT_EQ(part->check_leader(5), errc::unknown_leader_epoch);
  auto b2 = storage::testing::make_batch(1, 10, 1);
  auto out = part->append(b2, 1'700'000'000'000);
  ASSERT_EQ(out.error, errc::ok) << out.message;
  auto bytes = part->read_bytes(out.base, 1 << 20);
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(model::batch::parse(bytes->data()).partition_leader_epoch, 4);
  EXPECT_FALSE(pm_->refresh_state("nope", 0));
  EXPECT_FALSE(pm_->refresh_state("r", 2));
  // Leaving the cluster: no partition takes appends any more.
  pm_->stop_leading();
  auto b3 = storage::testing::make_batch(1, 10, 1);
  EXPECT_EQ(part->append(b3, 1'700'000'000'000).error, errc::not_leader);
  EXPECT_FALSE(pm_->get("r", 1)->is_leader());
}

// A state change of one partition reads that partition, not its topic's
// whole assignment: over a change of each of a topic's N partitions (a
// broker's death, a restarted follower back in every ISR) that cost N
// squared, seconds of the metadata thread at 5,000 partitions (issue 31,
// item 9).
TEST_F(PartitionManagerTest, ApplyingAPartitionsStateReadsOnlyThatPartition) {
  auto store = std::make_unique<memory_store>(4);
  memory_store* s = store.get();
  ASSERT_NE(open(io::filesystem::posix(), {{"node.id", "4"}}, std::move(store)), nullptr);
  ASSERT_FALSE(pm_->create_topic("wide", 50, 1, {}, false));
  const int before = s->whole_topic_reads;
  for (int32_t p = 0; p < 50; ++p) {
    s->set_state("wide", p, {4, 5}, {5, 1, {4, 5}, 1});
    ASSERT_TRUE(pm_->refresh_state("wide", p));
    EXPECT_FALSE(pm_->get("wide", p)->is_leader());
  }
  EXPECT_EQ(s->whole_topic_reads, before);
}

// Role listeners (the group coordinator) hear of every leadership this
// broker starts: also of one at a newer leader epoch while it seemed to lead
// all along, because the leader changes with every epoch, so another broker
// led in between (a state this broker missed) and may have written what
// the listener must read again.
TEST_F(PartitionManagerTest, RoleListenersHearALeadershipRegainedAcrossAMissedEpoch) {
  auto store = std::make_unique<memory_store>(4);
  memory_store* s = store.get();
  ASSERT_NE(open(io::filesystem::posix(), {{"node.id", "4"}}, std::move(store)), nullptr);
  std::vector<std::pair<int32_t, bool>> told;
  pm_->on_role_change([&](const std::string& topic, int32_t p, bool leads) {
    if (topic == "r") told.emplace_back(p, leads);
  });
  ASSERT_FALSE(pm_->create_topic("r", 1, 1, {}, false));
  s->set_state("r", 0, {4, 5}, {5, 2, {4, 5}, 1});
  ASSERT_TRUE(pm_->refresh_state("r", 0));
  s->set_state("r", 0, {4, 5}, {4, 3, {4, 5}, 2});
  ASSERT_TRUE(pm_->refresh_state("r", 0));
  ASSERT_TRUE(pm_->get("r", 0)->is_leader());
  EXPECT_EQ(told.back(), (std::pair<int32_t, bool>{0, true}));
  told.clear();
  // The same leadership with a changed ISR: nothing to tell.
  s->set_state("r", 0, {4, 5}, {4, 3, {4}, 3});
  ASSERT_TRUE(pm_->refresh_state("r", 0));
  EXPECT_TRUE(told.empty());
  s->set_state("r", 0, {4, 5}, {4, 5, {4}, 5});  // epoch 4 (broker 5 led) never seen here
  ASSERT_TRUE(pm_->refresh_state("r", 0));
  EXPECT_EQ(told, (std::vector<std::pair<int32_t, bool>>{{0, false}, {0, true}}));
}

// acks=-1 against min.insync.replicas, Kafka's two checks: before the
// append the store's ISR must be large enough, else NOT_ENOUGH_REPLICAS and
// nothing is written (Partition.appendRecordsToLeader); once the high
// watermark has passed an appended batch, a maximal ISR (the store's plus
// the followers the leader asked to add) below it answers
// NOT_ENOUGH_REPLICAS_AFTER_APPEND (checkEnoughReplicasReachOffset, asked
// by DelayedProduce). The ISR shrinking is what lets the high watermark
// pass the batch a lost follower never fetched.
TEST_F(PartitionManagerTest, AcksAllAnswersNotEnoughReplicasBeforeAndAfterTheAppendAsKafkaDoes) {
  auto store = std::make_unique<memory_store>(4);
  memory_store* s = store.get();
  ASSERT_NE(open(io::filesystem::posix(), {{"node.id", "4"}, {"min.insync.replicas", "2"}}, std::move(store)),
            nullptr);
  ASSERT_FALSE(pm_->create_topic("m", 1, 1, {}, false));
  // This broker leads; follower 5 is in sync.
  s->set_state("m", 0, {4, 5}, {4, 1, {4, 5}, 1});
  ASSERT_TRUE(pm_->refresh_state("m", 0));
  auto part = pm_->get("m", 0);
  ASSERT_TRUE(part->is_leader());
  auto append_one = [&] {
    EXPECT_EQ(part->check_min_insync(), errc::ok);  // what the handler asks first
    auto b = storage::testing::make_batch(1, 10, 1);
    auto out = part->append(b, 1'700'000'000'000);
    EXPECT_EQ(out.error, errc::ok) << out.message;
    return out.last;
  };
  auto committed = [&](offset last) {
    auto p = std::make_shared<std::promise<status>>();
    auto f = p->get_future();
    part->on_committed(last, [p](const status& st) { p->set_value(st); });
    return f;
  };
  using namespace std::chrono_literals;

  // The follower fetches past the batch: committed by both, answered ok.
  auto first = committed(append_one());
  EXPECT_EQ(first.wait_for(50ms), std::future_status::timeout);
  part->on_follower_fetch(5, offset(1));
  ASSERT_EQ(first.wait_for(10s), std::future_status::ready);
  EXPECT_TRUE(part->acks_all_outcome(first.get()).ok());

  // The follower stops fetching: the batch waits below the high watermark
  // until the store drops the follower from the ISR; then it is committed
  // (by the leader alone) and answered NOT_ENOUGH_REPLICAS_AFTER_APPEND.
  const offset second_last = append_one();
  auto second = committed(second_last);
  EXPECT_EQ(second.wait_for(100ms), std::future_status::timeout);
  s->set_state("m", 0, {4, 5}, {4, 1, {4}, 2});
  ASSERT_TRUE(pm_->refresh_state("m", 0));
  ASSERT_EQ(second.wait_for(10s), std::future_status::ready);
  const status waited = second.get();
  ASSERT_TRUE(waited.ok()) << waited.err().message;
  EXPECT_EQ(part->high_watermark(), offset(second_last.value() + 1));
  const status after = part->acks_all_outcome(waited);
  EXPECT_EQ(after.code(), errc::not_enough_replicas_after_append);
  EXPECT_EQ(kafka::to_kafka_error(after.code()), kafka::error_code::not_enough_replicas_after_append);
  // The next batch is refused before it is written.
  EXPECT_EQ(part->check_min_insync(), errc::not_enough_replicas);
  EXPECT_EQ(kafka::to_kafka_error(part->check_min_insync()), kafka::error_code::not_enough_replicas);

  // The follower catches up and the leader asks to add it back: the
  // maximal ISR counts it at once (as Kafka's PendingExpandIsr does), the
  // store's ISR, which the check before an append reads, not yet.
  part->on_follower_fetch(5, offset(second_last.value() + 1), /*broker_epoch=*/77);
  auto ask = part->propose_isr(30'000);
  ASSERT_TRUE(ask.has_value());
  EXPECT_EQ(ask->isr, (std::vector<int32_t>{4, 5}));
  // The addition carries the broker epoch the follower fetched with (KIP-903).
  EXPECT_EQ(ask->added_broker_epochs, (std::map<int32_t, int64_t>{{5, 77}}));
  EXPECT_TRUE(part->acks_all_outcome(status()).ok());
  EXPECT_EQ(part->check_min_insync(), errc::not_enough_replicas);

  // A wait that failed is answered with its own error.
  EXPECT_EQ(part->acks_all_outcome(status(errc::not_leader, "moved")).code(), errc::not_leader);
}

// A broker whose etcd session is lost (control_plane::standing, lost) is
// dead to the cluster, which is electing other leaders: Metadata names no
// controller and none of this broker's leaderships (at stale epochs), while
// leaders elsewhere stay as they are; all of it comes back with the session.
TEST_F(PartitionManagerTest, MetadataNamesNoControllerAndNoOwnLeadershipWhileTheSessionIsLost) {
  auto store = std::make_unique<memory_store>(4);
  memory_store* s = store.get();
  ASSERT_NE(open(io::filesystem::posix(), {{"node.id", "4"}}, std::move(store)), nullptr);
  ASSERT_FALSE(pm_->create_topic("r", 2, 1, {}, false));
  s->set_state("r", 0, {4, 5}, {4, 3, {4, 5}, 3});
  s->set_state("r", 1, {5, 4}, {5, 2, {5, 4}, 2});
  ASSERT_TRUE(pm_->refresh_state("r", 0));
  ASSERT_TRUE(pm_->refresh_state("r", 1));
  metadata_cache md(pm_->store(), pm_->replicas(), 4, "cid");
  std::atomic<bool> lost{false};
  const leadership_gate gate(
      [&] { return lost.load() ? session_standing::lost : session_standing::live; }, 30'000);
  md.set_leadership_gate(&gate);
  md.set_brokers({{4, "h4", 9094, std::nullopt}, {5, "h5", 9095, std::nullopt}}, 4);
  EXPECT_EQ(md.controller_id(), 4);
  EXPECT_EQ(md.leadership("r", 0).leader_id, 4);

  lost = true;
  EXPECT_EQ(md.controller_id(), -1);
  partition_leadership l = md.leadership("r", 0);
  EXPECT_FALSE(l.has_leader);
  EXPECT_EQ(l.leader_id, -1);
  EXPECT_EQ(l.leader_epoch, -1);
  EXPECT_EQ(l.replicas, (std::vector<int32_t>{4, 5}));
  l = md.leadership("r", 1);
  EXPECT_TRUE(l.has_leader);
  EXPECT_EQ(l.leader_id, 5);
  EXPECT_EQ(l.leader_epoch, 2);

  lost = false;
  EXPECT_EQ(md.controller_id(), 4);
  l = md.leadership("r", 0);
  EXPECT_TRUE(l.has_leader);
  EXPECT_EQ(l.leader_id, 4);
  EXPECT_EQ(l.leader_epoch, 3);
}

// A broker in doubt about its session (no renewal confirmed for a session
// timeout, and the etcd members it reaches know no leader) cannot tell an
// etcd quorum loss, through which its leaderships hold, from reaching only
// a minority while the majority elected other leaders. Each partition it
// leads decides by its ISR: while every follower in it keeps fetching it
// leads on (Metadata names it, Produce and consumer reads pass the gate);
// once a follower lagged past replica.lag.time.max.ms (it now follows the
// majority's leader) the partition is refused, and a leader alone in its
// ISR leads on (nobody else can be elected cleanly).
TEST_F(PartitionManagerTest, InDoubtALeaderLeadsOnlyWhileItsIsrFollows) {
  manual_clock clk(1'700'000'000'000);
  auto store = std::make_unique<memory_store>(4);
  memory_store* s = store.get();
  ASSERT_NE(open(io::filesystem::posix(), {{"node.id", "4"}}, std::move(store), clk), nullptr);
  ASSERT_FALSE(pm_->create_topic("d", 2, 1, {}, false));
  s->set_state("d", 0, {4, 5}, {4, 3, {4, 5}, 3});
  s->set_state("d", 1, {4, 5}, {4, 3, {4}, 3});  // the leader alone in its ISR
  ASSERT_TRUE(pm_->refresh_state("d", 0));
  ASSERT_TRUE(pm_->refresh_state("d", 1));
  auto p0 = pm_->get("d", 0);
  auto p1 = pm_->get("d", 1);
  std::atomic<session_standing> standing{session_standing::live};
  const int64_t lag_max = 10'000;
  const leadership_gate gate([&] { return standing.load(); }, lag_max);
  metadata_cache md(pm_->store(), pm_->replicas(), 4, "cid");
  md.set_leadership_gate(&gate);
  md.set_brokers({{4, "h4", 9094, std::nullopt}, {5, "h5", 9095, std::nullopt}}, 4);

  standing = session_standing::in_doubt;
  // Just elected: every follower counts as caught up.
  EXPECT_TRUE(gate.check(*p0).ok());
  EXPECT_EQ(md.leadership("d", 0).leader_id, 4);
  EXPECT_EQ(md.controller_id(), 4);  // in doubt is not lost
  // The follower keeps fetching: the leadership holds past the lag limit.
  for (int i = 0; i < 3; ++i) {
    clk.advance_ms(lag_max / 2);
    p0->on_follower_fetch(5, p0->log_end_offset());
  }
  EXPECT_TRUE(gate.check(*p0).ok());
  EXPECT_EQ(gate.check_leader(*p0, 3), errc::ok);
  // It stopped: past the lag limit the partition is refused, and Metadata
  // names no leader for it.
  clk.advance_ms(lag_max + 1);
  EXPECT_EQ(gate.check(*p0).code(), errc::not_leader);
  EXPECT_EQ(gate.check_leader(*p0, 3), errc::not_leader);
  EXPECT_FALSE(md.leadership("d", 0).has_leader);
  // Alone in its ISR, partition 1 leads on.
  EXPECT_TRUE(gate.check(*p1).ok());
  EXPECT_EQ(md.leadership("d", 1).leader_id, 4);
  // The follower is back (etcd lost its quorum after all): so is the leadership.
  p0->on_follower_fetch(5, p0->log_end_offset());
  EXPECT_TRUE(gate.check(*p0).ok());
  // Once the session is confirmed again the image holds whatever the followers do.
  clk.advance_ms(lag_max + 1);
  standing = session_standing::live;
  EXPECT_TRUE(gate.check(*p0).ok());
  EXPECT_EQ(md.leadership("d", 0).leader_id, 4);
  // Lost: nothing this broker leads passes, and no controller is named.
  standing = session_standing::lost;
  EXPECT_EQ(gate.check(*p1).code(), errc::not_leader);
  EXPECT_EQ(md.controller_id(), -1);
  // A single node's gate is always open.
  EXPECT_TRUE(leadership_gate().check(*p0).ok());
  p0.reset();
  p1.reset();
  close();  // before the clock goes
}

// acks=-1 batches waiting on a leader whose etcd session is lost are
// answered NOT_LEADER_OR_FOLLOWER at once (the broker calls
// answer_commit_waiters), not REQUEST_TIMED_OUT after the request's timeout
// (which Debian 12's librdkafka turns into a fatal OUT_OF_ORDER_SEQUENCE_NUMBER
// on the next leader); the role is left to the metadata, and a wait set up
// afterwards waits as before.
TEST_F(PartitionManagerTest, AWaitingAcksAllIsAnsweredNotLeaderOnceTheSessionIsLost) {
  auto store = std::make_unique<memory_store>(4);
  memory_store* s = store.get();
  ASSERT_NE(open(io::filesystem::posix(), {{"node.id", "4"}}, std::move(store)), nullptr);
  ASSERT_FALSE(pm_->create_topic("w", 1, 1, {}, false));
  s->set_state("w", 0, {4, 5}, {4, 1, {4, 5}, 1});
  ASSERT_TRUE(pm_->refresh_state("w", 0));
  auto part = pm_->get("w", 0);
  ASSERT_TRUE(part->is_leader());
  auto append_one = [&] {
    auto b = storage::testing::make_batch(1, 10, 1);
    auto out = part->append(b, 1'700'000'000'000);
    EXPECT_EQ(out.error, errc::ok) << out.message;
    return out.last;
  };
  auto committed = [&](offset last) {
    auto p = std::make_shared<std::promise<status>>();
    auto f = p->get_future();
    part->on_committed(last, [p](const status& st) { p->set_value(st); });
    return f;
  };
  using namespace std::chrono_literals;
  auto waiting = committed(append_one());
  // Follower 5 does not fetch: the batch waits for the high watermark.
  ASSERT_EQ(waiting.wait_for(200ms), std::future_status::timeout);
  part->answer_commit_waiters(status(errc::not_leader, "session lost"));
  ASSERT_EQ(waiting.wait_for(10s), std::future_status::ready);
  const status got = waiting.get();
  EXPECT_EQ(got.code(), errc::not_leader);
  EXPECT_EQ(kafka::to_kafka_error(part->acks_all_outcome(got).code()), kafka::error_code::not_leader_or_follower);
  EXPECT_TRUE(part->is_leader());
  // A later batch waits as usual and commits once the follower has it.
  const offset last = append_one();
  auto later = committed(last);
  ASSERT_EQ(later.wait_for(100ms), std::future_status::timeout);
  part->on_follower_fetch(5, offset(last.value() + 1));
  ASSERT_EQ(later.wait_for(10s), std::future_status::ready);
  EXPECT_TRUE(later.get().ok());
}

// With a store that follows a controller, the partition manager only asks
// the store; this broker's logs come and go when the store says it changed
// (what a cluster's metadata watch does), and only for the partitions the
// assignment gives this broker.
TEST_F(PartitionManagerTest, LogsFollowAControllersStore) {
  auto store = std::make_unique<memory_store>(4, true);
  memory_store* s = store.get();
  ASSERT_NE(open(io::filesystem::posix(), {{"node.id", "4"}}, std::move(store)), nullptr);
  ASSERT_FALSE(pm_->create_topic("f", 3, 1, {}, false));
  EXPECT_EQ(pm_->get("f", 0), nullptr);  // not until the store says so
  s->set_state("f", 2, {5}, {5, 0, {5}, 0});  // another broker's partition
  pm_->on_store_change("f");
  pm_->wait_for_creations();
  ASSERT_NE(pm_->get("f", 0), nullptr);
  ASSERT_NE(pm_->get("f", 1), nullptr);
  EXPECT_EQ(pm_->get("f", 2), nullptr);
  EXPECT_EQ(pm_->missing_partition_error("f", 2), errc::not_leader);
  append("f", 0, 3);
  EXPECT_TRUE(fs::exists(fs::path(tmp_.path()) / "logs" / "f-0"));
  EXPECT_FALSE(fs::exists(fs::path(tmp_.path()) / "logs" / "f-2"));
  // A state change reaches the hosted replica.
  s->set_state("f", 1, {4, 5}, {5, 1, {4, 5}, 1});
  pm_->on_store_change("f");
  pm_->wait_for_creations();
  EXPECT_FALSE(pm_->get("f", 1)->is_leader());
  // Deleted through the store: the logs go when it says so.
  std::vector<std::string> deleted;
  std::vector<topic_id> deleted_ids;
  const topic_id id = pm_->topic("f")->id;
  pm_->on_topic_deleted([&](const std::string& t, const topic_id& i) {
    deleted.push_back(t);
    deleted_ids.push_back(i);
  });
  ASSERT_FALSE(pm_->delete_topic("f"));
  pm_->on_store_change("f");
  pm_->wait_for_creations();
  EXPECT_EQ(pm_->get("f", 0), nullptr);
  EXPECT_EQ(pm_->missing_partition_error("f", 0), errc::not_found);
  EXPECT_FALSE(fs::exists(fs::path(tmp_.path()) / "logs" / "f-0"));
  EXPECT_EQ(deleted.size(), 2u);  // the deleting call, then the store's change
  // Both name the topic that went, by its id (the second from the replicas
  // this broker held).
  EXPECT_EQ(deleted_ids, (std::vector<topic_id>{id, id}));
}

}  // namespace
}  // namespace sluice::cluster
