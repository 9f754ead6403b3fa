#include "partition/producer_state.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "model/record_batch.h"
#include "protocol/records/control.h"
#include "storage/batch_builder.h"

namespace sluice::cluster {
namespace {

producer_batch pb(int64_t pid, int16_t epoch, int32_t first, int32_t count, int64_t ts = 1000) {
  producer_batch b;
  b.producer_id = pid;
  b.producer_epoch = epoch;
  b.first_sequence = first;
  b.last_sequence = first + (count - 1);
  b.max_timestamp = ts;
  return b;
}

TEST(ProducerState, NonIdempotentAlwaysAccepted) {
  producer_state s;
  producer_batch b;
  EXPECT_EQ(s.check(b).error, errc::ok);
  s.record(b, offset(0), offset(0));
  EXPECT_EQ(s.producer_count(), 0u);
}

TEST(ProducerState, InOrderDuplicateAndGap) {
  producer_state s;
  auto b0 = pb(7, 0, 0, 10);
  ASSERT_EQ(s.check(b0).error, errc::ok);
  s.record(b0, offset(100), offset(109));
  auto b1 = pb(7, 0, 10, 5);
  ASSERT_EQ(s.check(b1).error, errc::ok);
  s.record(b1, offset(110), offset(114));

  // A retry of b0 is a duplicate with its original offsets.
  auto dup = s.check(b0);
  EXPECT_EQ(dup.error, errc::ok);
  ASSERT_TRUE(dup.duplicate_base.has_value());
  EXPECT_EQ(*dup.duplicate_base, offset(100));
  EXPECT_EQ(*dup.duplicate_last, offset(109));

  // A gap is refused.
  EXPECT_EQ(s.check(pb(7, 0, 16, 1)).error, errc::out_of_order_sequence);
  // The next one in order is fine.
  EXPECT_EQ(s.check(pb(7, 0, 15, 1)).error, errc::ok);
}

// A producer this leader knows nothing of starts at sequence 0; any other
// first sequence may follow batches lost with a deposed leader, and is
// refused (UNKNOWN_PRODUCER_ID) rather than taken for proof that they are
// stored.
TEST(ProducerState, AnUnknownProducerMustStartAtSequenceZero) {
  producer_state s;
  EXPECT_EQ(s.check(pb(9, 0, 55, 3)).error, errc::unknown_producer_id);
  EXPECT_EQ(s.check(pb(9, 0, 0, 3)).error, errc::ok);
  s.record(pb(9, 0, 0, 3), offset(0), offset(2));
  EXPECT_EQ(s.check(pb(9, 0, 3, 1)).error, errc::ok);
}

TEST(ProducerState, OnlyLastFiveBatchesRemembered) {
  producer_state s;
  for (int i = 0; i < 7; ++i) s.record(pb(1, 0, i, 1), offset(i), offset(i));
  EXPECT_FALSE(s.check(pb(1, 0, 0, 1)).duplicate_base.has_value());
  EXPECT_EQ(s.check(pb(1, 0, 0, 1)).error, errc::out_of_order_sequence);
  EXPECT_TRUE(s.check(pb(1, 0, 2, 1)).duplicate_base.has_value());
}

TEST(ProducerState, EpochFencingAndBump) {
  producer_state s;
  s.record(pb(3, 2, 0, 1), offset(0), offset(0));
  EXPECT_EQ(s.check(pb(3, 1, 1, 1)).error, errc::invalid_producer_epoch);
  EXPECT_EQ(s.check(pb(3, 3, 5, 1)).error, errc::out_of_order_sequence);
  EXPECT_EQ(s.check(pb(3, 3, 0, 1)).error, errc::ok);
}

TEST(ProducerState, SequenceWraps) {
  producer_state s;
  s.record(pb(9, 0, INT32_MAX, 1), offset(0), offset(0));
  EXPECT_EQ(s.check(pb(9, 0, 0, 1)).error, errc::ok);
}

TEST(ProducerState, ReplayFromBatchesAndSnapshot) {
  std::vector<std::byte> log;
  for (int i = 0; i < 3; ++i) {
    storage::batch_spec spec;
    spec.records = 4;
    spec.producer_id = 42;
    spec.producer_epoch = 1;
    spec.base_sequence = i * 4;
    auto b = storage::build_batch(spec);
    // Stamp the base offset as the log would.
    model::batch::stamp(b.data(), offset(i * 4), leader_epoch(-1));
    log.insert(log.end(), b.begin(), b.end());
  }
  producer_state s;
  ASSERT_TRUE(s.replay(log).ok());
  auto dup = s.check(pb(42, 1, 4, 4));
  ASSERT_TRUE(dup.duplicate_base.has_value());
  EXPECT_EQ(*dup.duplicate_base, offset(4));
  EXPECT_EQ(s.check(pb(42, 1, 12, 1)).error, errc::ok);
  EXPECT_EQ(s.check(pb(42, 1, 13, 1)).error, errc::out_of_order_sequence);

  auto dir = std::filesystem::temp_directory_path() / ("producer_state_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto path = (dir / "snap").string();
  ASSERT_TRUE(s.write_snapshot(io::filesystem::posix(), path, offset(12)).ok());
  auto l = producer_state::load_snapshot(io::filesystem::posix(), path);
  ASSERT_TRUE(l.ok()) << l.err().message;
  EXPECT_EQ(l->next_offset, offset(12));
  EXPECT_TRUE(l->state.check(pb(42, 1, 8, 4)).duplicate_base.has_value());

  // A flipped byte is caught.
  {
    std::FILE* f = std::fopen(path.c_str(), "r+");
    std::fseek(f, 20, SEEK_SET);
    int c = std::fgetc(f);
    std::fseek(f, 20, SEEK_SET);
    std::fputc(c ^ 1, f);
    std::fclose(f);
  }
  EXPECT_EQ(producer_state::load_snapshot(io::filesystem::posix(), path).code(), errc::corrupt_data);
  std::filesystem::remove_all(dir);
}

TEST(ProducerState, Expiry) {
  producer_state s;
  s.record(pb(1, 0, 0, 1, 100), offset(0), offset(0));
  s.record(pb(2, 0, 0, 1, 200), offset(1), offset(1));
  s.record(pb(3, 0, 0, 1, 300), offset(2), offset(2));
  s.expire(150, 100);
  EXPECT_EQ(s.producer_count(), 2u);
  s.expire(0, 1);
  EXPECT_EQ(s.producer_count(), 1u);
  EXPECT_TRUE(s.check(pb(3, 0, 0, 1)).duplicate_base.has_value());
}

// DescribeProducers' view: one entry per producer, by id, with the epoch
// and last sequence of its latest batch and its largest timestamp.
TEST(ProducerState, ProducersListsEachOnceWithItsLatestState) {
  producer_state s;
  EXPECT_TRUE(s.producers().empty());
  s.record(pb(9, 0, 0, 3, 500), offset(0), offset(2));
  s.record(pb(4, 1, 0, 1, 700), offset(3), offset(3));
  s.record(pb(9, 0, 3, 2, 400), offset(4), offset(5));   // an older timestamp keeps the largest
  s.record(pb(4, 2, 0, 5, 800), offset(6), offset(10));  // epoch bump restarts the sequence
  const auto ps = s.producers();
  ASSERT_EQ(ps.size(), 2u);
  EXPECT_EQ(ps[0], (producer_info{4, 2, 4, 800}));
  EXPECT_EQ(ps[1], (producer_info{9, 0, 4, 500}));
}

}  // namespace
}  // namespace sluice::cluster

namespace sluice::cluster {
namespace {

producer_batch txn_batch(int64_t pid, int16_t epoch, int32_t first, int32_t count) {
  auto b = pb(pid, epoch, first, count);
  b.transactional = true;
  return b;
}

// A transactional batch opens a transaction at its base offset; the
// producer's marker ends it and says where it began; the oldest open one
// bounds the last stable offset.
TEST(ProducerStateTxn, MarkersEndWhatTransactionalBatchesOpened) {
  producer_state s;
  ASSERT_EQ(s.check(txn_batch(1, 0, 0, 2)).error, errc::ok);
  s.record(txn_batch(1, 0, 0, 2), offset(10), offset(11));
  s.record(txn_batch(2, 0, 0, 1), offset(12), offset(12));
  s.record(txn_batch(1, 0, 2, 1), offset(13), offset(13));  // the same transaction
  EXPECT_EQ(s.open_txn_count(), 2u);
  EXPECT_EQ(s.first_open_txn(), offset(10));
  auto infos = s.producers();
  ASSERT_EQ(infos.size(), 2u);
  EXPECT_EQ(infos[0].current_txn_start_offset, 10);

  ASSERT_EQ(s.check_marker(1, 0, 0).error, errc::ok);
  auto t = s.record_marker(1, 0, 0, /*commit=*/false, offset(14), 2000);
  EXPECT_EQ(t, (completed_txn{1, offset(10), offset(14), true}));
  EXPECT_EQ(s.first_open_txn(), offset(12));
  auto c = s.record_marker(2, 0, 0, /*commit=*/true, offset(15), 2000);
  EXPECT_EQ(c, (completed_txn{2, offset(12), offset(15), false}));
  EXPECT_FALSE(s.first_open_txn().has_value());
  // A marker for a producer with nothing open here ends an empty transaction.
  auto empty = s.record_marker(3, 0, 0, true, offset(16), 2000);
  EXPECT_EQ(empty.first, offset(16));
}

TEST(ProducerStateTxn, TheRulesOfMarkersAndTransactionalWrites) {
  producer_state s;
  s.record(txn_batch(1, 3, 0, 1), offset(0), offset(0));
  // A non-transactional batch cannot join an open transaction.
  EXPECT_EQ(s.check(pb(1, 3, 1, 1)).error, errc::invalid_txn_state);
  // A fenced producer's marker (older epoch) and an older coordinator's are refused.
  EXPECT_EQ(s.check_marker(1, 2, 0).error, errc::invalid_producer_epoch);
  s.record_marker(1, 4, 5, false, offset(1), 0);  // aborted under a bumped epoch, coordinator epoch 5
  EXPECT_EQ(s.check_marker(1, 4, 4).error, errc::coordinator_fenced);
  EXPECT_EQ(s.check_marker(1, 4, 5).error, errc::ok);
  // The old epoch's writes are fenced; the bumped epoch starts at sequence 0.
  EXPECT_EQ(s.check(txn_batch(1, 3, 1, 1)).error, errc::invalid_producer_epoch);
  EXPECT_EQ(s.check(txn_batch(1, 4, 0, 1)).error, errc::ok);
  EXPECT_EQ(s.check_marker(-1, 0, 0).error, errc::invalid_txn_marker);
}

TEST(ProducerStateTxn, OpenTransactionsSurviveReplaySnapshotsAndExpiry) {
  std::vector<std::byte> log;
  auto add = [&](std::vector<std::byte> b, int64_t at) {
    model::batch::stamp(b.data(), offset(at), leader_epoch(0));
    log.insert(log.end(), b.begin(), b.end());
  };
  storage::batch_spec spec;
  spec.producer_id = 5;
  spec.producer_epoch = 0;
  spec.base_sequence = 0;
  spec.transactional = true;
  add(storage::build_batch(spec), 0);  // producer 5 opens at 0
  spec.producer_id = 6;
  add(storage::build_batch(spec), 1);  // producer 6 opens at 1
  auto marker = protocol::records::build_marker_batch(5, 0, {false, 2}, 1'700'000'000'000);
  std::vector<std::byte> m(reinterpret_cast<const std::byte*>(marker.data()),
                           reinterpret_cast<const std::byte*>(marker.data()) + marker.size());
  add(m, 2);  // producer 5 aborts at 2
  producer_state s;
  std::vector<completed_txn> ended;
  ASSERT_TRUE(s.replay(log, [&](const completed_txn& t) { ended.push_back(t); }).ok());
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(ended[0], (completed_txn{5, offset(0), offset(2), true}));
  EXPECT_EQ(s.first_open_txn(), offset(1));

  auto dir = std::filesystem::temp_directory_path() / ("producer_state_txn_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto path = (dir / "snap").string();
  ASSERT_TRUE(s.write_snapshot(io::filesystem::posix(), path, offset(3)).ok());
  auto l = producer_state::load_snapshot(io::filesystem::posix(), path);
  ASSERT_TRUE(l.ok()) << l.err().message;
  EXPECT_EQ(l->state.first_open_txn(), offset(1));
  EXPECT_EQ(l->state.check_marker(5, 0, 1).error, errc::coordinator_fenced) << "the coordinator epoch is kept";
  std::filesystem::remove_all(dir);

  // Expiry never forgets a producer with an open transaction.
  s.expire(INT64_MAX, 0);
  EXPECT_EQ(s.producer_count(), 1u);
  EXPECT_EQ(s.first_open_txn(), offset(1));
}

}  // namespace
}  // namespace sluice::cluster
