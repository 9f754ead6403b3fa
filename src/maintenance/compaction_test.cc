// The log cleaner against a real storage log: newest value per key, offsets
// kept, codecs kept and CRCs valid in rebuilt batches, tombstones kept for
// delete.retention.ms and then dropped, a map too small for the dirty part,
// an idempotent producer's last batch kept (emptied), min.compaction.lag.ms.

#include "maintenance/compaction.h"

#include <algorithm>
#include <map>

#include <gtest/gtest.h>

#include "model/record_batch.h"
#include "protocol/records/record_batch.h"
#include "storage/test_util.h"

namespace sluice::cluster {
namespace {

namespace records = protocol::records;
using storage::testing::log_env;
using storage::testing::temp_dir;

struct seen_record {
  int64_t offset;
  std::optional<std::string> value;
  int64_t timestamp;
};

std::vector<uint8_t> bytes_of(const std::string& s) {
  return {s.begin(), s.end()};
}

class Compaction : public ::testing::Test {
 protected:
  void SetUp() override {
    storage::log_config c;
    c.segment_bytes = 8192;
    c.index_interval_bytes = 512;
    auto r = storage::log::open(env_.ctx(), tmp_.sub("t-0"), "t-0", c);
    ASSERT_TRUE(r.ok());
    log_ = *r;
    cfg_.cleanup_compact = true;
    cfg_.segment_bytes = 8192;
    cfg_.delete_retention_ms = 1000;
    cfg_.max_compaction_lag_ms = INT64_MAX;
  }

  // Appends one batch of (key, value-or-tombstone) records.
  offset produce(const std::vector<std::pair<std::string, std::optional<std::string>>>& recs,
                 records::compression codec, int64_t producer_id = -1, bool transactional = false) {
    std::vector<records::record_input> in;
    for (const auto& [k, v] : recs) {
      records::record_input ri;
      ri.key = bytes_of(k);
      if (v) ri.value = bytes_of(*v);
      ri.timestamp_ms = env_.clk.now_ms();
      ri.headers.push_back({"h", bytes_of("x")});
      in.push_back(std::move(ri));
    }
    records::batch_options o;
    o.codec = codec;
    if (producer_id >= 0) {
      o.producer_id = producer_id;
      o.producer_epoch = 0;
      o.base_sequence = seq_;
      seq_ += static_cast<int32_t>(recs.size());
      o.transactional = transactional;
    }
    auto b = records::build_batch(o, in);
    EXPECT_TRUE(b.ok());
    std::vector<std::byte> bytes(reinterpret_cast<const std::byte*>(b->data()),
                                 reinterpret_cast<const std::byte*>(b->data()) + b->size());
    auto r = log_->append(bytes, leader_epoch(0));
    EXPECT_TRUE(r.ok()) << r.err().message;
    codecs_[r->base.value()] = codec;
    int64_t off = r->base.value();
    for (const auto& [k, v] : recs) newest_[k] = {off++, v, env_.clk.now_ms()};
    return r->base;
  }

  // Closes the last segment: an unrelated record in a fresh active one.
  void roll() {
    storage::log_config c = log_->config();
    c.segment_ms = 1;
    ASSERT_TRUE(log_->set_config(c).ok());
    env_.clk.advance_ms(2);
    produce({{"~active", "x"}}, records::compression::none);
    c.segment_ms = limits::default_segment_ms;
    ASSERT_TRUE(log_->set_config(c).ok());
  }

  // A sole replica's high watermark is its log end offset.
  result<clean_result> clean(offset_map& map, std::vector<offset> producer_last = {},
                             std::optional<offset> high_watermark = std::nullopt,
                             std::vector<storage::aborted_txn> aborted = {}) {
    return clean_log(*log_, cfg_, map, producer_last, high_watermark.value_or(log_->log_end_offset()), aborted,
                     env_.clk.now_ms(), stop_);
  }

  // Every record readable from the log start, per key in offset order;
  // checks every batch's CRC, codec and ascending offsets on the way.
  std::map<std::string, std::vector<seen_record>> read_all(
      int* batches_out = nullptr, std::vector<model::batch::header>* headers = nullptr) {
    std::map<std::string, std::vector<seen_record>> out;
    offset o = log_->log_start_offset();
    int64_t last = -1;
    int batches = 0;
    while (o < log_->log_end_offset()) {
      auto r = log_->read_bytes(o, 1 << 20);
      EXPECT_TRUE(r.ok());
      if (!r.ok() || r->empty()) break;
      auto split =
          records::split_batches(std::span(reinterpret_cast<const uint8_t*>(r->data()), r->size()));
      EXPECT_TRUE(split.ok());
      for (auto b : *split) {
        EXPECT_TRUE(model::batch::crc_matches(b));
        auto d = records::decode_batch(b);
        EXPECT_TRUE(d.ok()) << d.err().message;
        if (!d.ok()) return out;
        EXPECT_GT(d->header.base_offset.value(), last);
        EXPECT_EQ(d->header.codec(), codecs_[d->header.base_offset.value()])
            << "batch at " << d->header.base_offset.value();
        ++batches;
        if (headers) headers->push_back(d->header);
        for (const auto& rec : d->records) {
          std::string k(rec.key->begin(), rec.key->end());
          std::optional<std::string> v;
          if (rec.value) v = std::string(rec.value->begin(), rec.value->end());
          out[k].push_back({d->header.base_offset.value() + rec.offset_delta, v,
                            d->header.base_timestamp + rec.timestamp_delta});
          EXPECT_EQ(rec.headers.size(), 1u);
        }
        last = d->header.last_offset().value();
      }
      o = offset(last + 1);
    }
    if (batches_out) *batches_out = batches;
    return out;
  }

  // Asserts the log holds exactly the newest record of each key (tombstones
  // included unless `without_tombstones`), at its original offset.
  void expect_newest_only(bool without_tombstones) {
    auto got = read_all();
    size_t want = 0;
    for (const auto& [k, n] : newest_) {
      if (without_tombstones && !n.value) {
        EXPECT_EQ(got.count(k), 0u) << k;
        continue;
      }
      ++want;
      ASSERT_EQ(got[k].size(), 1u) << "key " << k;
      EXPECT_EQ(got[k][0].offset, n.offset) << k;
      EXPECT_EQ(got[k][0].value, n.value) << k;
      EXPECT_EQ(got[k][0].timestamp, n.timestamp) << k;
    }
    EXPECT_EQ(got.size(), want);
  }

  temp_dir tmp_;
  log_env env_;
  std::shared_ptr<storage::log> log_;
  config::topic_config cfg_;
  std::atomic<bool> stop_{false};
  std::map<int64_t, records::compression> codecs_;
  std::map<std::string, seen_record> newest_;
  int32_t seq_ = 0;
};

const records::compression kCodecs[] = {records::compression::none, records::compression::gzip,
                                        records::compression::snappy, records::compression::lz4,
                                        records::compression::zstd};

TEST_F(Compaction, KeepsTheNewestValuePerKeyWithOffsetsCodecsAndCrcs) {
  for (int round = 0; round < 12; ++round) {
    for (int b = 0; b < 10; ++b) {
      std::vector<std::pair<std::string, std::optional<std::string>>> recs;
      for (int r = 0; r < 4; ++r) {
        const int k = (round * 7 + b * 4 + r) % 30;
        recs.push_back({"k" + std::to_string(k),
                        "v" + std::to_string(round) + "-" + std::string(60, 'a' + r)});
      }
      produce(recs, kCodecs[(round + b) % 5]);
      env_.clk.advance_ms(1);
    }
  }
  roll();
  auto bytes_in = [&] {
    uint64_t n = 0;
    for (const auto& s : log_->segments()) n += s.size_bytes;
    return n;
  };
  const uint64_t bytes_before = bytes_in();
  int batches_before = 0;
  read_all(&batches_before);
  offset_map map(1 << 20);
  auto r = clean(map);
  ASSERT_TRUE(r.ok()) << r.err().message;
  EXPECT_TRUE(r->cleaned);
  EXPECT_GT(r->records_removed, 0u);
  EXPECT_LT(r->bytes_written, r->bytes_read);
  EXPECT_EQ(r->map_end, log_->active_segment_base());
  EXPECT_EQ(log_->cleaner_checkpoint(), log_->active_segment_base());
  EXPECT_LT(bytes_in(), bytes_before);
  expect_newest_only(false);
  // Cleaning again changes nothing that matters and survives a restart.
  auto again = clean(map);
  ASSERT_TRUE(again.ok());
  expect_newest_only(false);
  ASSERT_TRUE(log_->close().ok());
  log_.reset();
  log_env env2;
  auto reopened = storage::log::open(env2.ctx(), tmp_.sub("t-0"), "t-0", {});
  ASSERT_TRUE(reopened.ok());
  log_ = *reopened;
  EXPECT_EQ(log_->cleaner_checkpoint(), r->map_end);
  expect_newest_only(false);
  log_.reset();
}

// A committed value is never cleaned away in favour of one past the high
// watermark: a failover may truncate the newer one (issue 31's lost
// consumer offset). Only once the high watermark passes it does it count.
TEST_F(Compaction, NeverPastTheHighWatermark) {
  produce({{"offset", "committed"}, {"x", "1"}}, records::compression::none);
  roll();  // segment 0: the committed value
  const offset committed_end = log_->active_segment_base();
  produce({{"offset", "uncommitted"}, {"x", "2"}}, records::compression::none);
  roll();  // segment 1: a newer value the ISR does not have yet
  const offset uncommitted_end = log_->active_segment_base();
  offset_map map(1 << 20);
  auto r = clean(map, {}, committed_end);
  ASSERT_TRUE(r.ok()) << r.err().message;
  auto got = read_all();
  ASSERT_EQ(got["offset"].size(), 2u);
  EXPECT_EQ(got["offset"][0].value, std::optional<std::string>("committed"));
  EXPECT_LE(log_->cleaner_checkpoint(), committed_end);
  // The high watermark inside the second segment still leaves it alone.
  ASSERT_TRUE(clean(map, {}, uncommitted_end - 1).ok());
  EXPECT_EQ(read_all()["offset"].size(), 2u);
  // Committed: now the newer value wins.
  ASSERT_TRUE(clean(map, {}, uncommitted_end).ok());
  got = read_all();
  ASSERT_EQ(got["offset"].size(), 1u);
  EXPECT_EQ(got["offset"][0].value, std::optional<std::string>("uncommitted"));
}

TEST_F(Compaction, TombstonesStayForDeleteRetentionThenGo) {
  for (int i = 0; i < 40; ++i)
    produce({{"k" + std::to_string(i % 10), std::string(200, 'v')}}, kCodecs[i % 5]);
  produce({{"k3", std::nullopt}, {"k4", "four"}}, records::compression::zstd);
  produce({{"k7", std::nullopt}}, records::compression::lz4);
  for (int i = 0; i < 20; ++i)
    produce({{"z" + std::to_string(i), std::string(200, 'z')}}, records::compression::none);
  roll();
  offset_map map(1 << 20);
  auto r = clean(map);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->next_horizon_ms, env_.clk.now_ms() + cfg_.delete_retention_ms);
  expect_newest_only(false);  // the tombstones are still there
  std::vector<model::batch::header> hs;
  read_all(nullptr, &hs);
  int with_horizon = 0;
  for (const auto& h : hs)
    if (h.has_delete_horizon()) ++with_horizon;
  EXPECT_EQ(with_horizon, 2);
  // Before the horizon nothing changes; after it the tombstones go.
  env_.clk.advance_ms(cfg_.delete_retention_ms - 1);
  ASSERT_TRUE(clean(map).ok());
  expect_newest_only(false);
  env_.clk.advance_ms(1);
  auto late = clean(map);
  ASSERT_TRUE(late.ok());
  EXPECT_EQ(late->next_horizon_ms, INT64_MAX);
  expect_newest_only(true);
  auto got = read_all();
  EXPECT_EQ(got["k4"][0].value, std::optional<std::string>("four"));
}

TEST_F(Compaction, AMapTooSmallCleansWhatFittedAndGoesOnNextTime) {
  for (int i = 0; i < 600; ++i)
    produce({{"key-" + std::to_string(i % 300), std::to_string(i)}}, kCodecs[i % 5]);
  roll();
  offset_map map(16 * 24);  // 16 slots: 14 keys per clean
  ASSERT_LT(map.capacity(), 300u);
  int cleans = 0;
  while (log_->cleaner_checkpoint() < log_->active_segment_base()) {
    auto r = clean(map);
    ASSERT_TRUE(r.ok()) << r.err().message;
    ASSERT_GT(r->map_end, offset(0));
    ASSERT_LT(++cleans, 400) << "the checkpoint does not advance";
  }
  EXPECT_GT(cleans, 5);
  expect_newest_only(false);
}

TEST_F(Compaction, AnIdempotentProducersLastBatchStaysEmptied) {
  for (int i = 0; i < 30; ++i) produce({{"a", std::string(300, 'a')}}, records::compression::none);
  const offset last_of_producer =
      produce({{"p", "old"}, {"q", "old"}}, records::compression::snappy, 77);
  produce({{"p", "new"}, {"q", "new"}}, records::compression::none);
  roll();
  offset_map map(1 << 20);
  ASSERT_TRUE(clean(map, {last_of_producer}).ok());
  std::vector<model::batch::header> hs;
  read_all(nullptr, &hs);
  auto it = std::find_if(hs.begin(), hs.end(),
                         [&](const auto& h) { return h.base_offset == last_of_producer; });
  ASSERT_NE(it, hs.end());
  EXPECT_EQ(it->records_count, 0);
  EXPECT_EQ(it->last_offset_delta, 1);
  EXPECT_EQ(it->producer_id, 77);
  EXPECT_EQ(it->base_sequence, 30 - 30);  // the producer's first sequence, kept
  EXPECT_EQ(it->codec(), records::compression::snappy);
  expect_newest_only(false);
}

TEST(CompactionDirtiness, RespectsMinLagAndNeverTheActiveSegment) {
  std::vector<storage::segment_info> s = {{offset(0), offset(10), 1000, 100, 100},
                                          {offset(10), offset(20), 1000, 200, 200},
                                          {offset(20), offset(30), 1000, 900, 900},
                                          {offset(30), offset(35), 500, 950, 950}};
  auto d = measure_dirtiness(s, offset(10), offset(35), 1000, 0, INT64_MAX);
  EXPECT_EQ(d.cleanable_end, offset(30));
  EXPECT_EQ(d.dirty_bytes, 2000u);
  EXPECT_DOUBLE_EQ(d.ratio, 2.0 / 3.0);
  EXPECT_FALSE(d.past_max_lag);
  // Records younger than 500 ms at now=1000 (the segment with 900) stay dirty.
  d = measure_dirtiness(s, offset(10), offset(35), 1000, 500, INT64_MAX);
  EXPECT_EQ(d.cleanable_end, offset(20));
  EXPECT_DOUBLE_EQ(d.ratio, 0.5);
  d = measure_dirtiness(s, offset(10), offset(35), 1000, 0, 700);
  EXPECT_TRUE(d.past_max_lag);
  // A high watermark inside a closed segment: that segment and all after
  // it are not committed yet, so not cleanable.
  d = measure_dirtiness(s, offset(10), offset(25), 1000, 0, INT64_MAX);
  EXPECT_EQ(d.cleanable_end, offset(20));
  EXPECT_EQ(d.dirty_bytes, 1000u);
  d = measure_dirtiness(s, offset(10), offset(20), 1000, 0, INT64_MAX);
  EXPECT_EQ(d.cleanable_end, offset(20));
}

TEST(OffsetMap, KeepsTheNewestOffsetAndRefusesWhenFull) {
  offset_map m(24 * 100);
  auto a = offset_map::hash(bytes_of("a"));
  EXPECT_TRUE(m.put(a, 5));
  EXPECT_TRUE(m.put(a, 3));
  EXPECT_EQ(m.get(a), 5);
  EXPECT_FALSE(m.get(offset_map::hash(bytes_of("b"))).has_value());
  size_t n = 1;
  while (m.put(offset_map::hash(bytes_of("k" + std::to_string(n))), 1)) ++n;
  EXPECT_EQ(n, m.capacity());
  EXPECT_TRUE(m.put(a, 9));  // a known key still updates
  m.clear();
  EXPECT_EQ(m.size(), 0u);
}

}  // namespace
}  // namespace sluice::cluster

namespace sluice::cluster {
namespace {

// A record of an aborted transaction never makes a committed record of its
// key go: it stays out of the cleaner's map (it is the newest of its key
// in the log, and consumers and the group coordinator skip it by the
// aborted index, so cleaning by it would leave the key without a value).
// The cleaner removes it, as Kafka's does; its producer's last batch stays,
// emptied, for the producer state.
TEST_F(Compaction, AnAbortedRecordNeverReplacesACommittedOneAndIsRemoved) {
  produce({{"offset", "committed"}}, records::compression::none);
  const offset aborted_at = produce({{"offset", "aborted"}}, records::compression::none, 7, /*transactional=*/true);
  roll();
  roll();
  const std::vector<storage::aborted_txn> aborted = {{7, aborted_at, aborted_at + 1, aborted_at + 2}};
  offset_map map(1 << 20);
  ASSERT_TRUE(clean(map, {}, std::nullopt, aborted).ok());
  auto got = read_all();
  ASSERT_EQ(got["offset"].size(), 1u) << "the aborted record is removed";
  EXPECT_EQ(got["offset"][0].value, std::optional<std::string>("committed"));
  // Another aborted transaction, its producer's last batch: emptied, kept.
  const offset again = produce({{"offset", "aborted-again"}}, records::compression::none, 8, /*transactional=*/true);
  roll();
  roll();
  auto with_again = aborted;
  with_again.push_back({8, again, again + 1, again + 2});
  std::vector<model::batch::header> headers;
  ASSERT_TRUE(clean(map, {again}, std::nullopt, with_again).ok());
  got = read_all(nullptr, &headers);
  ASSERT_EQ(got["offset"].size(), 1u);
  EXPECT_EQ(got["offset"][0].value, std::optional<std::string>("committed"));
  auto kept = std::find_if(headers.begin(), headers.end(), [&](const auto& h) { return h.base_offset == again; });
  ASSERT_NE(kept, headers.end()) << "the producer's last batch stays for its sequence state";
  EXPECT_EQ(kept->records_count, 0);
  EXPECT_TRUE(kept->is_transactional());
  // A later committed value replaces the committed one.
  produce({{"offset", "later"}}, records::compression::none);
  roll();
  roll();
  ASSERT_TRUE(clean(map, {again}, std::nullopt, with_again).ok());
  got = read_all();
  ASSERT_EQ(got["offset"].size(), 1u);
  EXPECT_EQ(got["offset"][0].value, std::optional<std::string>("later"));
  log_.reset();
}

}  // namespace
}  // namespace sluice::cluster
