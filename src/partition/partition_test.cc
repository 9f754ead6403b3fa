// A partition's produce path on what it writes into a batch header: the
// max timestamp is the largest record timestamp whatever the client put
// there, and the CRC is computed again only for a batch whose header
// changed.

#include "partition/partition.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <future>

#include "config/dynamic.h"
#include "metadata/test_managers.h"
#include "model/record_batch.h"
#include "storage/batch_builder.h"
#include "storage/test_util.h"

namespace sluice::cluster {
namespace {

namespace batch = model::batch;

constexpr int64_t kBaseTs = 1'700'000'000'000;

class PartitionAppend : public ::testing::Test {
 protected:
  void SetUp() override {
    config::config_map m;
    m.set("log.dirs", std::vector<std::string>{tmp_.path()});
    auto cfg = config::make_broker_config(std::move(m));
    ASSERT_TRUE(cfg.ok()) << cfg.err().message;
    m_ = testing::open_managers(io::filesystem::posix(), tmp_.sub("logs"), *cfg);
    ASSERT_NE(m_.partitions, nullptr);
    ASSERT_FALSE(m_.partitions->create_topic("t", 1, 1, {}, false));
    part_ = m_.partitions->get("t", 0);
    ASSERT_NE(part_, nullptr);
  }
  void TearDown() override {
    if (m_.partitions) m_.partitions->shutdown();
    m_.partitions.reset();
    if (m_.logs) m_.logs->shutdown().ignore();
  }

  // Three records at kBaseTs, +10, +20, with `client_max_ts` in the header
  // and a CRC that matches it, as a client sends them.
  static std::vector<std::byte> sent(int64_t client_max_ts) {
    storage::batch_spec spec;
    spec.records = 3;
    spec.base_timestamp = kBaseTs;
    spec.timestamp_step = 10;
    auto b = storage::build_batch(spec);
    batch::header h = batch::parse(b.data());
    h.max_timestamp = client_max_ts;
    batch::write(b.data(), h);
    batch::update_crc(b);
    return b;
  }

  // Appends a copy of `b` and returns what the log stored.
  std::vector<std::byte> append_and_read(const std::vector<std::byte>& b) {
    auto copy = b;
    auto out = part_->append(copy, kBaseTs + 1000);
    EXPECT_EQ(out.error, errc::ok) << out.message;
    auto stored = part_->read_bytes(out.base, 1 << 20);
    EXPECT_TRUE(stored.ok());
    if (!stored.ok()) return {};
    EXPECT_EQ(stored->size(), b.size());
    return std::move(stored).value();
  }

  storage::testing::temp_dir tmp_;
  testing::managers m_;
  std::shared_ptr<partition> part_;
};

TEST_F(PartitionAppend, AnUnsetOrWrongMaxTimestampIsTheLargestRecordTimestamp) {
  // -1 is what clients that leave the field unset write.
  for (int64_t client_max : {int64_t{-1}, int64_t{0}, kBaseTs + 5, kBaseTs + 99'999}) {
    SCOPED_TRACE(client_max);
    const auto stored = append_and_read(sent(client_max));
    ASSERT_GE(stored.size(), batch::header_bytes);
    const batch::header h = batch::parse(stored.data());
    EXPECT_EQ(h.max_timestamp, kBaseTs + 20);
    EXPECT_EQ(h.ts_type(), model::timestamp_type::create_time);
    // The rewritten field is inside the CRC'd range: the CRC was redone.
    EXPECT_TRUE(batch::check_crc(h, stored).ok());
  }
}

TEST_F(PartitionAppend, ABatchWithTheRightMaxTimestampKeepsItsBytesAndCrc) {
  const auto b = sent(kBaseTs + 20);
  const auto stored = append_and_read(b);
  ASSERT_EQ(stored.size(), b.size());
  // Only the broker-stamped fields before the CRC differ.
  EXPECT_TRUE(std::equal(stored.begin() + batch::crc_pos, stored.end(), b.begin() + batch::crc_pos));
}


// Transactions in one partition on one broker: transactional batches open
// transactions, markers end them, the last stable offset stays at the
// oldest open or uncommitted one, aborts are named to read_committed
// fetches, and all of it survives a restart.
class PartitionTxn : public PartitionAppend {
 protected:
  produce_outcome txn(int64_t pid, int32_t seq, bool transactional = true) {
    storage::batch_spec spec;
    spec.producer_id = pid;
    spec.producer_epoch = 0;
    spec.base_sequence = seq;
    spec.transactional = transactional;
    auto b = storage::build_batch(spec);
    verification_guard guard;
    if (transactional) {
      // The coordinator's yes is taken as given here (KIP-890's guard).
      auto g = part_->begin_verification(pid, 0);
      if (!g.ok()) return produce_outcome{g.code(), g.err().message};
      if (*g) guard = **g;
    }
    auto out = part_->append(b, kBaseTs, true, true, guard);
    if (out.error == errc::ok) committed(out.last);
    return out;
  }
  produce_outcome marker(int64_t pid, bool commit, int32_t coordinator_epoch = 0) {
    auto out = part_->append_marker(pid, 0, commit, coordinator_epoch, kBaseTs);
    if (out.error == errc::ok) committed(out.last);
    return out;
  }
  void committed(offset last) {
    std::promise<status> done;
    part_->on_committed(last, [&](const status& s) { done.set_value(s); });
    ASSERT_TRUE(done.get_future().get().ok());
  }
  std::vector<int64_t> aborted(int64_t from, int64_t upper) {
    auto a = part_->aborted_transactions(offset(from), offset(upper));
    EXPECT_TRUE(a.ok());
    std::vector<int64_t> pids;
    if (a.ok())
      for (const auto& t : a->txns) pids.push_back(t.producer_id);
    return pids;
  }
  void restart() {
    part_.reset();
    TearDown();
    config::config_map m;
    m.set("log.dirs", std::vector<std::string>{tmp_.path()});
    auto cfg = config::make_broker_config(std::move(m));
    ASSERT_TRUE(cfg.ok());
    m_ = testing::open_managers(io::filesystem::posix(), tmp_.sub("logs"), *cfg);
    ASSERT_NE(m_.partitions, nullptr);
    part_ = m_.partitions->get("t", 0);
    ASSERT_NE(part_, nullptr);
  }
};

TEST_F(PartitionTxn, TheLastStableOffsetFollowsOpenAndEndedTransactions) {
  ASSERT_EQ(txn(1, 0).error, errc::ok);                  // offset 0: producer 1 opens
  ASSERT_EQ(txn(2, 0).error, errc::ok);                  // offset 1: producer 2 opens
  ASSERT_EQ(txn(3, 0, false).error, errc::ok);           // offset 2: not transactional
  EXPECT_EQ(part_->high_watermark(), offset(3));
  EXPECT_EQ(part_->last_stable_offset(), offset(0));
  EXPECT_EQ(part_->open_transactions(), 2u);
  EXPECT_EQ(txn(2, 1, false).error, errc::invalid_txn_state) << "a plain write cannot join an open transaction";
  {
    storage::batch_spec spec;
    spec.producer_id = 9;
    spec.producer_epoch = 0;
    spec.base_sequence = 0;
    spec.transactional = true;
    auto b = storage::build_batch(spec);
    EXPECT_EQ(part_->append(b, kBaseTs).error, errc::invalid_txn_state) << "not verified with a coordinator";
  }

  ASSERT_EQ(marker(1, /*commit=*/false).error, errc::ok);  // offset 3
  EXPECT_EQ(part_->last_stable_offset(), offset(1));
  EXPECT_EQ(aborted(0, 10), std::vector<int64_t>{1});
  EXPECT_EQ(marker(1, false, /*coordinator_epoch=*/-1).error, errc::coordinator_fenced);

  ASSERT_EQ(marker(2, /*commit=*/true).error, errc::ok);   // offset 4
  EXPECT_EQ(part_->last_stable_offset(), offset(5));
  EXPECT_EQ(part_->last_stable_offset(), part_->high_watermark());
  EXPECT_TRUE(aborted(4, 10).empty()) << "the abort's marker is below the fetch";
  EXPECT_TRUE(aborted(0, 1).size() == 1) << "the abort began below 1";

  ASSERT_EQ(txn(1, 1).error, errc::ok);                  // offset 5: producer 1 opens again
  restart();
  EXPECT_EQ(part_->last_stable_offset(), offset(5)) << "the open transaction is found again";
  EXPECT_EQ(aborted(0, 10), std::vector<int64_t>{1}) << "the index is kept";
  ASSERT_EQ(marker(1, false).error, errc::ok);            // offset 6
  EXPECT_EQ(aborted(0, 10), (std::vector<int64_t>{1, 1}));
  auto a = part_->aborted_transactions(offset(0), offset(10));
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->txns[1].first, offset(5));
  EXPECT_EQ(a->txns[1].last, offset(6));
}

// KIP-890's guard: a batch verified against a transaction that a marker
// ended meanwhile cannot open a new one (KAFKA-17754's late write); a
// producer's later batches of an open transaction need no verification;
// a failed verification retires its guard; a leadership change retires all.
TEST_F(PartitionTxn, AVerificationGuardIsRetiredByTheMarkerThatEndsItsTransaction) {
  auto batch = [](int64_t pid, int32_t seq) {
    storage::batch_spec spec;
    spec.producer_id = pid;
    spec.producer_epoch = 0;
    spec.base_sequence = seq;
    spec.transactional = true;
    return storage::build_batch(spec);
  };
  // Producer 1 opens a transaction here; it is asked for verification again
  // only once it has ended.
  ASSERT_EQ(txn(1, 0).error, errc::ok);
  auto g = part_->begin_verification(1, 0);
  ASSERT_TRUE(g.ok());
  EXPECT_FALSE(g->has_value()) << "an open transaction at this epoch needs no verification";
  auto again = batch(1, 1);
  EXPECT_EQ(part_->append(again, kBaseTs).error, errc::ok) << "continuing an open transaction takes no guard";
  EXPECT_TRUE(part_->begin_verification(1, 1).value().has_value()) << "another epoch is verified";

  // Producer 2: the question goes out, the transaction ends meanwhile (a
  // marker: the coordinator had it in an earlier transaction), and the
  // batch verified against it arrives late.
  auto g2 = part_->begin_verification(2, 0);
  ASSERT_TRUE(g2.ok() && g2->has_value());
  auto same = part_->begin_verification(2, 0);
  EXPECT_EQ(same.value()->id, (*g2)->id) << "one guard per producer until retired";
  ASSERT_EQ(marker(2, /*commit=*/true).error, errc::ok);
  auto late = batch(2, 0);
  EXPECT_EQ(part_->append(late, kBaseTs, true, true, **g2).error, errc::invalid_txn_state);
  // Verified afresh, it goes in.
  auto g3 = part_->begin_verification(2, 0);
  ASSERT_TRUE(g3.ok() && g3->has_value());
  EXPECT_NE((*g3)->id, (*g2)->id);
  auto fresh = batch(2, 0);
  EXPECT_EQ(part_->append(fresh, kBaseTs, true, true, **g3).error, errc::ok);

  // A failed verification retires its guard.
  auto g4 = part_->begin_verification(3, 0);
  ASSERT_TRUE(g4.ok() && g4->has_value());
  part_->end_verification(3, **g4);
  auto b3 = batch(3, 0);
  EXPECT_EQ(part_->append(b3, kBaseTs, true, true, **g4).error, errc::invalid_txn_state);
  // So does a change of leadership (here: to another leader epoch).
  auto g5 = part_->begin_verification(3, 0);
  ASSERT_TRUE(g5.ok() && g5->has_value());
  const int32_t self = part_->replicas().leader_id;
  partition_state st;
  st.leader = self;
  st.leader_epoch = part_->epoch().value() + 1;
  st.partition_epoch = 100;
  st.isr = {self};
  ASSERT_TRUE(part_->apply_state({self}, st));
  auto b3b = batch(3, 0);
  EXPECT_EQ(part_->append(b3b, kBaseTs, true, true, **g5).error, errc::not_leader)
      << "a guard the leadership retired is answered retriably: the producer asks again";
}

// The group coordinator writes a producer's transactional offsets as its
// own batch (TxnOffsetCommit): no sequence, the producer's id and epoch.
// Kafka's AppendOrigin.COORDINATOR: the sequence checks are skipped, the
// transaction opens, an older epoch is fenced, and a replay after a
// restart rebuilds the same state.
TEST_F(PartitionTxn, ACoordinatorsBatchOpensTheTransactionWithoutASequence) {
  auto coordinator_batch = [](int16_t epoch) {
    storage::batch_spec spec;
    spec.producer_id = 4;
    spec.producer_epoch = epoch;
    spec.base_sequence = -1;
    spec.transactional = true;
    return storage::build_batch(spec);
  };
  auto as_coordinator = [&](int16_t epoch) {
    auto b = coordinator_batch(epoch);
    auto out = part_->append(b, kBaseTs, true, true, {}, append_origin::coordinator);
    if (out.error == errc::ok) committed(out.last);
    return out;
  };
  {
    auto b = coordinator_batch(1);
    auto g = part_->begin_verification(4, 1);
    ASSERT_TRUE(g.ok() && g->has_value());
    EXPECT_EQ(part_->append(b, kBaseTs, true, true, **g).error, errc::invalid_record)
        << "a client's batch needs a sequence";
  }
  const auto first = as_coordinator(1);
  ASSERT_EQ(first.error, errc::ok) << first.message;
  EXPECT_EQ(part_->open_transactions(), 1u);
  EXPECT_EQ(part_->last_stable_offset(), first.base) << "the batch opened producer 4's transaction";
  // A second commit of the same transaction: no sequence to match, so no
  // duplicate; it is appended and the transaction stays where it began.
  const auto second = as_coordinator(1);
  ASSERT_EQ(second.error, errc::ok) << second.message;
  EXPECT_FALSE(second.duplicate);
  EXPECT_EQ(second.base, first.last + 1);
  EXPECT_EQ(part_->last_stable_offset(), first.base);
  EXPECT_EQ(as_coordinator(0).error, errc::invalid_producer_epoch) << "an older epoch is fenced";
  const auto producers = part_->producers();
  ASSERT_EQ(producers.size(), 1u);
  EXPECT_EQ(producers[0].producer_epoch, 1);
  EXPECT_EQ(producers[0].last_sequence, -1) << "no sequence is remembered";

  auto m = part_->append_marker(4, 1, /*commit=*/true, 0, kBaseTs);
  ASSERT_EQ(m.error, errc::ok);
  committed(m.last);
  EXPECT_EQ(part_->open_transactions(), 0u);
  EXPECT_EQ(part_->last_stable_offset(), part_->high_watermark());

  const auto reopened = as_coordinator(1);  // the producer's next transaction
  ASSERT_EQ(reopened.error, errc::ok);
  restart();
  EXPECT_EQ(part_->open_transactions(), 1u) << "the replay finds the coordinator's batch open";
  EXPECT_EQ(part_->last_stable_offset(), reopened.base);
  EXPECT_EQ(as_coordinator(0).error, errc::invalid_producer_epoch) << "still fenced after the replay";
}

TEST_F(PartitionTxn, AnAbortTheIndexLostInACrashIsFoundAgainInTheLog) {
  ASSERT_EQ(txn(7, 0).error, errc::ok);
  ASSERT_EQ(marker(7, false).error, errc::ok);
  restart();
  part_.reset();
  TearDown();
  // What a crash after the marker's append and before the index's write
  // reached the disk leaves: the log (synced by the acknowledgement) holds
  // the marker, the index not, and no producer snapshot covers the marker
  // (a snapshot syncs the index first).
  for (const auto& e : std::filesystem::recursive_directory_iterator(tmp_.sub("logs"))) {
    if (e.path().filename() == storage::aborted_index::file_name) std::filesystem::resize_file(e.path(), 0);
    if (e.path().extension() == ".snapshot") std::filesystem::remove(e.path());
  }
  restart();
  EXPECT_EQ(aborted(0, 10), std::vector<int64_t>{7});
}

// A partition nobody reads from (no fetch asks for its last stable offset)
// does not keep every transaction it ever ended: one whose marker the high
// watermark passed is dropped as later markers come.
TEST_F(PartitionTxn, EndedTransactionsGoOnceTheHighWatermarkPassedTheirMarkers) {
  for (int32_t seq = 0; seq < 100; ++seq) {
    ASSERT_EQ(txn(5, seq).error, errc::ok);
    ASSERT_EQ(marker(5, /*commit=*/seq % 2 == 0).error, errc::ok);
  }
  EXPECT_LE(part_->unstable_ended_transactions(), 1u) << "only the last marker may be above it";
  EXPECT_EQ(part_->last_stable_offset(), part_->high_watermark());
  EXPECT_EQ(part_->unstable_ended_transactions(), 0u);
}

}  // namespace
}  // namespace sluice::cluster
