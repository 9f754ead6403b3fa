#include "share/share_partition.h"

#include <gtest/gtest.h>

#include <random>
#include <set>

namespace sluice::share {
namespace {

std::vector<log_batch> batches(std::initializer_list<std::pair<int64_t, int64_t>> ranges) {
  std::vector<log_batch> out;
  for (auto [a, b] : ranges) out.push_back({a, b, false, false});
  return out;
}

ack_batch ack(int64_t first, int64_t last, ack_type t) { return {first, last, {t}}; }

settings small(int16_t limit = 3, int32_t locks = 100, int32_t lock_ms = 1000) {
  settings s;
  s.delivery_count_limit = limit;
  s.max_record_locks = locks;
  s.record_lock_duration_ms = lock_ms;
  return s;
}

TEST(SharePartition, AcquiresNewRecordsOnceAndCountsTheDelivery) {
  share_partition sp(10, small());
  std::vector<archived_record> archived;
  EXPECT_EQ(sp.next_fetch_offset(), 10);
  auto got = sp.acquire("a", batches({{10, 14}}), 0, 0, archived);
  ASSERT_EQ(got, (std::vector<acquired_range>{{10, 14, 1}}));
  EXPECT_EQ(sp.end_offset(), 15);
  EXPECT_EQ(sp.next_fetch_offset(), 15);
  // A second consumer reading the same batch gets nothing of it.
  EXPECT_TRUE(sp.acquire("b", batches({{10, 14}}), 0, 0, archived).empty());
  EXPECT_EQ(sp.count(record_state::acquired), 5);
  EXPECT_TRUE(archived.empty());
}

TEST(SharePartition, RecordsBelowTheStartAreNotAcquired) {
  share_partition sp(12, small());
  std::vector<archived_record> archived;
  auto got = sp.acquire("a", batches({{10, 14}}), 0, 0, archived);
  EXPECT_EQ(got, (std::vector<acquired_range>{{12, 14, 1}}));
}

TEST(SharePartition, MaxRecordsStopsTheAcquisition) {
  share_partition sp(0, small());
  std::vector<archived_record> archived;
  auto got = sp.acquire("a", batches({{0, 9}}), 4, 0, archived);
  EXPECT_EQ(got, (std::vector<acquired_range>{{0, 3, 1}}));
  EXPECT_EQ(sp.next_fetch_offset(), 4);
  EXPECT_EQ(sp.acquire("b", batches({{0, 9}}), 100, 0, archived), (std::vector<acquired_range>{{4, 9, 1}}));
}

TEST(SharePartition, TheAcquireLimitEndsWhereMaxRecordsAvailableRecordsEnd) {
  share_partition sp(10, small(3, 100));
  std::vector<archived_record> archived;
  // Nothing in flight: every offset from the start is available.
  EXPECT_EQ(sp.acquire_limit(10, 5), 15);
  EXPECT_EQ(sp.acquire_limit(10, 0), 110);    // no limit: the window's end
  EXPECT_EQ(sp.acquire_limit(10, 500), 110);  // more than the window holds
  // 10-14 to "a", 15-19 to "b"; "a" releases 12-13.
  (void)sp.acquire("a", batches({{10, 14}}), 0, 0, archived);
  (void)sp.acquire("b", batches({{15, 19}}), 0, 0, archived);
  ASSERT_TRUE(sp.acknowledge("a", {ack(12, 13, ack_type::release)}, 0, archived)[0].ok());
  ASSERT_EQ(sp.next_fetch_offset(), 12);
  // Two available in the window (12, 13), the rest past its end offset (20).
  EXPECT_EQ(sp.acquire_limit(12, 2), 14);
  EXPECT_EQ(sp.acquire_limit(12, 3), 21);
  // What acquire() takes from a read up to the limit is what it would take
  // from a longer one.
  EXPECT_EQ(sp.acquire("c", batches({{10, 14}, {15, 19}, {20, 20}}), 3, 0, archived),
            (std::vector<acquired_range>{{12, 13, 2}, {20, 20, 1}}));
}

TEST(SharePartition, AcceptMovesTheStartPastAcknowledgedRecords) {
  share_partition sp(0, small());
  std::vector<archived_record> archived;
  (void)sp.acquire("a", batches({{0, 4}}), 0, 0, archived);
  auto r = sp.acknowledge("a", {ack(0, 2, ack_type::accept)}, 0, archived);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_TRUE(r[0].ok());
  EXPECT_EQ(sp.start_offset(), 3);
  // Accepting out of order leaves the start at the first not done.
  r = sp.acknowledge("a", {ack(4, 4, ack_type::accept)}, 0, archived);
  EXPECT_TRUE(r[0].ok());
  EXPECT_EQ(sp.start_offset(), 3);
  EXPECT_EQ(sp.state_of(4), record_state::acknowledged);
  r = sp.acknowledge("a", {ack(3, 3, ack_type::accept)}, 0, archived);
  EXPECT_EQ(sp.start_offset(), 5);
  EXPECT_EQ(sp.in_flight(), 0);
}

TEST(SharePartition, AcknowledgingWhatAnotherMemberHoldsIsInvalidRecordStateAndChangesNothing) {
  share_partition sp(0, small());
  std::vector<archived_record> archived;
  (void)sp.acquire("a", batches({{0, 1}}), 0, 0, archived);
  (void)sp.acquire("b", batches({{2, 3}}), 0, 0, archived);
  auto r = sp.acknowledge("a", {ack(1, 2, ack_type::accept)}, 0, archived);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].code(), errc::invalid_record_state);
  EXPECT_EQ(sp.state_of(1), record_state::acquired);  // all or nothing
  r = sp.acknowledge("c", {ack(0, 0, ack_type::accept)}, 0, archived);
  EXPECT_EQ(r[0].code(), errc::invalid_record_state);
  // Offsets never acquired, or beyond the end.
  r = sp.acknowledge("a", {ack(7, 8, ack_type::accept)}, 0, archived);
  EXPECT_EQ(r[0].code(), errc::invalid_record_state);
  // A client's widest range is refused, not counted (no overflow).
  r = sp.acknowledge("a", {{INT64_MIN, INT64_MAX, {ack_type::accept, ack_type::accept}}}, 0, archived);
  EXPECT_EQ(r[0].code(), errc::invalid_record_state);
  EXPECT_EQ(sp.state_of(1), record_state::acquired);
}

TEST(SharePartition, MalformedAcknowledgementBatchesAreInvalidArguments) {
  share_partition sp(0, small());
  std::vector<archived_record> archived;
  (void)sp.acquire("a", batches({{0, 3}}), 0, 0, archived);
  auto r = sp.acknowledge("a",
                          {{3, 1, {ack_type::accept}},
                           {0, 3, {ack_type::accept, ack_type::accept}},
                           {0, 1, {}},
                           {0, 0, {static_cast<ack_type>(9)}}},
                          0, archived);
  ASSERT_EQ(r.size(), 4u);
  for (const auto& s : r) EXPECT_EQ(s.code(), errc::invalid_argument);
  EXPECT_EQ(sp.count(record_state::acquired), 4);
}

TEST(SharePartition, PerOffsetTypesAndGaps) {
  share_partition sp(0, small());
  std::vector<archived_record> archived;
  (void)sp.acquire("a", batches({{0, 3}}), 0, 0, archived);
  auto r = sp.acknowledge("a", {{0, 3, {ack_type::accept, ack_type::gap, ack_type::release, ack_type::reject}}}, 0,
                          archived);
  EXPECT_TRUE(r[0].ok());
  EXPECT_EQ(sp.start_offset(), 2);
  EXPECT_EQ(sp.state_of(2), record_state::available);
  EXPECT_EQ(sp.state_of(3), record_state::archived);
  EXPECT_EQ(archived, (std::vector<archived_record>{{3, 1, archive_reason::rejected}}));
  EXPECT_EQ(sp.next_fetch_offset(), 2);
}

TEST(SharePartition, ReleasedRecordsAreRedeliveredWithTheirCountUntilTheLimit) {
  share_partition sp(0, small(3));
  std::vector<archived_record> archived;
  for (int16_t delivery = 1; delivery <= 3; ++delivery) {
    auto got = sp.acquire("a", batches({{0, 0}}), 0, 0, archived);
    ASSERT_EQ(got, (std::vector<acquired_range>{{0, 0, delivery}}));
    auto r = sp.acknowledge("a", {ack(0, 0, ack_type::release)}, 0, archived);
    ASSERT_TRUE(r[0].ok());
  }
  // Released at the limit: archived, not delivered again.
  EXPECT_EQ(sp.state_of(0), record_state::acknowledged);  // below the start: done
  EXPECT_EQ(sp.start_offset(), 1);
  EXPECT_EQ(archived, (std::vector<archived_record>{{0, 3, archive_reason::delivery_count_exhausted}}));
}

TEST(SharePartition, ExpiredLocksMakeRecordsAvailableAndAtTheLimitArchived) {
  share_partition sp(0, small(2, 100, 1000));
  std::vector<archived_record> archived;
  (void)sp.acquire("a", batches({{0, 1}}), 0, 0, archived);
  EXPECT_EQ(sp.next_lock_deadline(), 1000);
  EXPECT_FALSE(sp.expire_locks(999, archived));
  EXPECT_TRUE(sp.expire_locks(1000, archived));
  EXPECT_EQ(sp.state_of(0), record_state::available);
  EXPECT_EQ(sp.next_lock_deadline(), std::nullopt);
  // A second consumer gets them at delivery 2; its lock expires too:
  // the limit of 2 is reached, so both are archived.
  EXPECT_EQ(sp.acquire("b", batches({{0, 1}}), 0, 1500, archived), (std::vector<acquired_range>{{0, 1, 2}}));
  // The first member's late acknowledgement is refused.
  EXPECT_EQ(sp.acknowledge("a", {ack(0, 1, ack_type::accept)}, 1600, archived)[0].code(), errc::invalid_record_state);
  EXPECT_TRUE(sp.expire_locks(2500, archived));
  EXPECT_EQ(archived, (std::vector<archived_record>{{0, 2, archive_reason::delivery_count_exhausted},
                                                    {1, 2, archive_reason::delivery_count_exhausted}}));
  EXPECT_EQ(sp.start_offset(), 2);
}

TEST(SharePartition, ReleasingAMemberFreesOnlyItsRecords) {
  share_partition sp(0, small());
  std::vector<archived_record> archived;
  (void)sp.acquire("a", batches({{0, 1}}), 0, 0, archived);
  (void)sp.acquire("b", batches({{2, 3}}), 0, 0, archived);
  EXPECT_TRUE(sp.release_member("a", archived));
  EXPECT_EQ(sp.state_of(0), record_state::available);
  EXPECT_EQ(sp.state_of(2), record_state::acquired);
  EXPECT_FALSE(sp.release_member("nobody", archived));
  EXPECT_EQ(sp.acquire("c", batches({{0, 3}}), 0, 0, archived), (std::vector<acquired_range>{{0, 1, 2}}));
}

TEST(SharePartition, MarkersAbortedRecordsAndCompactedGapsAreDoneWithoutDelivery) {
  share_partition sp(0, small());
  std::vector<archived_record> archived;
  std::vector<log_batch> read = {{0, 1, false, false}, {2, 2, true, false}, {3, 4, false, true}, {8, 9, false, false}};
  auto got = sp.acquire("a", read, 0, 0, archived);
  EXPECT_EQ(got, (std::vector<acquired_range>{{0, 1, 1}, {8, 9, 1}}));
  EXPECT_EQ(sp.end_offset(), 10);
  (void)sp.acknowledge("a", {ack(0, 1, ack_type::accept)}, 0, archived);
  EXPECT_EQ(sp.start_offset(), 8);  // 2 (marker), 3-4 (aborted), 5-7 (no records) are done
  EXPECT_TRUE(archived.empty());
}

TEST(SharePartition, TheWindowIsBoundedByMaxRecordLocks) {
  share_partition sp(0, small(5, 10));
  std::vector<archived_record> archived;
  auto got = sp.acquire("a", batches({{0, 24}}), 0, 0, archived);
  EXPECT_EQ(got, (std::vector<acquired_range>{{0, 9, 1}}));
  EXPECT_EQ(sp.in_flight(), 10);
  EXPECT_EQ(sp.next_fetch_offset(), std::nullopt);
  EXPECT_TRUE(sp.acquire("b", batches({{10, 24}}), 0, 0, archived).empty());
  // A gap far past the start does not stretch the window either.
  (void)sp.acknowledge("a", {ack(0, 8, ack_type::accept)}, 0, archived);
  EXPECT_EQ(sp.start_offset(), 9);
  EXPECT_EQ(sp.acquire("b", batches({{100, 120}}), 0, 0, archived), std::vector<acquired_range>{});
  EXPECT_LE(sp.in_flight(), 10);
}

TEST(SharePartition, DurableStateRebuildsTheSamePartitionWithLocksDropped) {
  share_partition sp(5, small(4));
  std::vector<archived_record> archived;
  (void)sp.acquire("a", batches({{5, 14}}), 0, 0, archived);
  (void)sp.acknowledge("a", {ack(5, 6, ack_type::accept), ack(8, 8, ack_type::reject), ack(9, 9, ack_type::release)},
                       0, archived);
  (void)sp.acquire("b", batches({{9, 9}}), 0, 0, archived);  // delivery 2
  durable_state d = sp.durable();
  EXPECT_EQ(d.start_offset, 7);
  EXPECT_EQ(d.batches, (std::vector<state_batch>{{7, 7, record_state::available, 1},
                                                 {8, 8, record_state::archived, 1},
                                                 {9, 9, record_state::available, 2},
                                                 {10, 14, record_state::available, 1}}));
  share_partition back(d, small(4));
  EXPECT_EQ(back.durable(), d);
  EXPECT_EQ(back.start_offset(), 7);
  EXPECT_EQ(back.end_offset(), 15);
  EXPECT_EQ(back.count(record_state::acquired), 0);
  // After the failover the records are delivered again, their counts kept.
  auto got = back.acquire("c", batches({{7, 15}}), 0, 0, archived);
  EXPECT_EQ(got, (std::vector<acquired_range>{{7, 7, 2}, {9, 9, 3}, {10, 14, 2}, {15, 15, 1}}));
}

TEST(SharePartition, ADurableStateAtTheLimitArchivesOnTheNextAcquisition) {
  durable_state d{0, {{0, 0, record_state::available, 3}}};
  share_partition sp(d, small(3));
  std::vector<archived_record> archived;
  EXPECT_EQ(sp.acquire("a", batches({{0, 1}}), 0, 0, archived), (std::vector<acquired_range>{{1, 1, 1}}));
  EXPECT_EQ(archived, (std::vector<archived_record>{{0, 3, archive_reason::delivery_count_exhausted}}));
}

TEST(SharePartition, LogStartMovingPastRecordsEndsThem) {
  share_partition sp(0, small());
  std::vector<archived_record> archived;
  (void)sp.acquire("a", batches({{0, 9}}), 0, 0, archived);
  sp.log_start_moved(5);
  EXPECT_EQ(sp.start_offset(), 5);
  EXPECT_EQ(sp.count(record_state::acquired), 5);
  sp.log_start_moved(20);
  EXPECT_EQ(sp.start_offset(), 20);
  EXPECT_EQ(sp.in_flight(), 0);
  EXPECT_EQ(sp.next_fetch_offset(), 20);
}

TEST(SharePartition, ResetOnlyWhileNothingIsHeld) {
  share_partition sp(0, small());
  std::vector<archived_record> archived;
  (void)sp.acquire("a", batches({{0, 1}}), 0, 0, archived);
  EXPECT_FALSE(sp.reset(0).ok());
  EXPECT_TRUE(sp.release_member("a", archived));
  EXPECT_TRUE(sp.reset(100).ok());
  EXPECT_EQ(sp.start_offset(), 100);
  EXPECT_EQ(sp.in_flight(), 0);
}

TEST(SharePartition, DeadLettersAreNumberedKeptDurableAndDroppedOnceWritten) {
  share_partition sp(0, small(2, 10));
  std::vector<archived_record> archived;
  (void)sp.acquire("a", batches({{0, 3}}), 0, 0, archived);
  (void)sp.acknowledge("a", {ack(0, 1, ack_type::reject)}, 0, archived);
  sp.set_dead_letter_producer(77, 0);
  sp.add_dead_letters(archived);
  ASSERT_EQ(sp.pending_dead_letters().size(), 2u);
  EXPECT_EQ(sp.pending_dead_letters()[0], (dead_letter{0, 1, archive_reason::rejected, 0}));
  EXPECT_EQ(sp.pending_dead_letters()[1], (dead_letter{1, 1, archive_reason::rejected, 1}));
  // Durable with the state: a new leader has them, at the same sequences.
  share_partition back(sp.durable(), small(2, 10));
  EXPECT_EQ(back.pending_dead_letters(), sp.pending_dead_letters());
  EXPECT_EQ(back.dead_letter_producer_id(), 77);
  archived.clear();
  (void)back.acquire("b", batches({{2, 2}}), 0, 0, archived);
  (void)back.acknowledge("b", {ack(2, 2, ack_type::reject)}, 0, archived);
  back.add_dead_letters(archived);
  EXPECT_EQ(back.pending_dead_letters().back().sequence, 2);
  // Every archiving is counted, and the count is durable.
  EXPECT_EQ(back.durable().archived_count, 3);
  EXPECT_EQ(share_in_flight(back.durable()), 1);  // 3: delivered to a, offered again
  EXPECT_EQ(share_partition(back.durable(), small(2, 10)).durable().archived_count, 3);
  back.dead_letters_written(1);
  ASSERT_EQ(back.pending_dead_letters().size(), 1u);
  EXPECT_EQ(back.pending_dead_letters()[0].offset, 2);
  back.dead_letters_written(1);  // twice: nothing more goes
  EXPECT_EQ(back.pending_dead_letters().size(), 1u);
  // Another producer numbers the pending ones again from 0.
  back.set_dead_letter_producer(78, 0);
  EXPECT_EQ(back.pending_dead_letters()[0].sequence, 0);
  EXPECT_EQ(back.durable().dead_letter_sequence, 1);
}

TEST(SharePartition, AWindowFullOfDeadLettersStopsAcquisition) {
  share_partition sp(0, small(5, 100));
  std::vector<archived_record> archived;
  for (int64_t o = 0; o < 100; ++o) archived.push_back({o, 1, archive_reason::rejected});
  sp.add_dead_letters(archived);
  EXPECT_EQ(sp.next_fetch_offset(), std::nullopt);
  sp.dead_letters_written(0);
  EXPECT_EQ(sp.next_fetch_offset(), 0);
}

// Random operations by several members against a model: no record is held
// by two members at once, the start only moves up, every archived record
// is reported exactly once, delivery counts never exceed the limit, and a
// partition rebuilt from its durable state at any point agrees on every
// offset's done-ness and count.
TEST(SharePartition, LagCountsWhatIsNeitherAcknowledgedNorArchived) {
  durable_state d;
  d.start_offset = 10;
  d.batches = {{10, 11, record_state::acknowledged, 1},
               {12, 12, record_state::available, 1},
               {13, 14, record_state::archived, 5},
               {18, 30, record_state::acknowledged, 1}};
  // 10..19: 10,11,13,14 done, 18,19 done: 4 left (12, 15, 16, 17).
  EXPECT_EQ(share_lag(d, 20), 4);
  EXPECT_EQ(share_lag(d, 12), 0);
  EXPECT_EQ(share_lag(d, 10), 0);
  EXPECT_EQ(share_lag(d, 5), 0);  // the log end behind the start offset (truncated)
  EXPECT_EQ(share_lag(durable_state{}, 7), 7);
  EXPECT_EQ(share_in_flight(d), 1);  // 12: delivered, offered again
}

TEST(SharePartition, RandomOperationsKeepTheInvariants) {
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    std::mt19937 rng(seed);
    const settings s = small(static_cast<int16_t>(2 + seed % 4), 50, 100);
    share_partition sp(0, s);
    std::map<int64_t, std::string> holder;  // offset -> member, per our own bookkeeping
    std::set<int64_t> archived_seen;
    int64_t now = 0, last_start = 0, log_end = 0;
    const std::vector<std::string> members = {"m1", "m2", "m3"};
    for (int step = 0; step < 400; ++step) {
      now += static_cast<int64_t>(rng() % 40);
      log_end += static_cast<int64_t>(rng() % 5);
      std::vector<archived_record> archived;
      const std::string& m = members[rng() % members.size()];
      switch (rng() % 5) {
        case 0:
        case 1: {
          auto from = sp.next_fetch_offset();
          if (!from || *from >= log_end) break;
          auto got = sp.acquire(m, {{*from, log_end - 1, false, false}}, static_cast<int32_t>(rng() % 8), now, archived);
          for (const auto& r : got) {
            ASSERT_LE(r.delivery_count, s.delivery_count_limit);
            for (int64_t o = r.first_offset; o <= r.last_offset; ++o) {
              ASSERT_FALSE(holder.count(o)) << "offset " << o << " held twice, seed " << seed;
              holder[o] = m;
            }
          }
          break;
        }
        case 2: {
          std::vector<int64_t> mine;
          for (auto& [o, who] : holder) if (who == m) mine.push_back(o);
          if (mine.empty()) break;
          int64_t o = mine[rng() % mine.size()];
          auto t = static_cast<ack_type>(1 + rng() % 3);
          auto r = sp.acknowledge(m, {ack(o, o, t)}, now, archived);
          ASSERT_TRUE(r[0].ok()) << "seed " << seed;
          holder.erase(o);
          break;
        }
        case 3: {
          (void)sp.expire_locks(now, archived);
          for (auto it = holder.begin(); it != holder.end();) {
            it = sp.state_of(it->first) == record_state::acquired ? std::next(it) : holder.erase(it);
          }
          break;
        }
        case 4: {
          (void)sp.release_member(m, archived);
          for (auto it = holder.begin(); it != holder.end();) it = it->second == m ? holder.erase(it) : std::next(it);
          break;
        }
      }
      for (const auto& a : archived) {
        ASSERT_TRUE(archived_seen.insert(a.offset).second) << "archived twice: " << a.offset << " seed " << seed;
        ASSERT_LE(a.delivery_count, s.delivery_count_limit);
      }
      ASSERT_GE(sp.start_offset(), last_start);
      last_start = sp.start_offset();
      ASSERT_LE(sp.in_flight(), s.max_record_locks);
      ASSERT_EQ(sp.count(record_state::acquired), static_cast<int64_t>(holder.size()));
      share_partition back(sp.durable(), s);
      ASSERT_EQ(back.start_offset(), sp.start_offset());
      for (int64_t o = sp.start_offset(); o < sp.end_offset(); ++o) {
        ASSERT_EQ(back.delivery_count_of(o), sp.delivery_count_of(o)) << o;
        const auto st = sp.state_of(o);
        ASSERT_EQ(back.state_of(o), st == record_state::acquired ? record_state::available : st) << o;
      }
    }
  }
}

}  // namespace
}  // namespace sluice::share
