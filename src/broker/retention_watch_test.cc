// The operator's view in-process: a real partition manager on a temporary
// directory, a coordinator over an in-memory __consumer_offsets, and a
// manual clock, so lag, headroom, losses and write rates are exact.

#include "broker/retention_watch.h"

#include <deque>
#include <map>
#include <sstream>

#include <gtest/gtest.h>

#include "config/broker_config.h"
#include "storage/batch_builder.h"
#include "storage/test_util.h"

namespace sluice::broker {
namespace {

// Appends are durable at once; completions run when the test drains them.
class instant_log final : public group::record_log {
 public:
  void append(int32_t, std::vector<protocol::records::record_input> records, const group::txn_producer*,
              append_done done) override {
    const int64_t base = next_;
    next_ += static_cast<int64_t>(records.size());
    done({}, base);
  }
  status read(int32_t, const entry_fn&) override { return {}; }  // nothing was written before

 private:
  int64_t next_ = 0;
};

class RetentionWatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto b = config::make_broker_config({});
    ASSERT_TRUE(b.ok());
    b->data_dir = dir_.path();
    b->retention_headroom_alert_ms = 3'000'000;  // 50 minutes
    cfg_ = std::make_shared<const config::broker_config>(*b);
    storage::log_manager_config lc;
    lc.data_dir = dir_.sub("logs");
    auto logs = storage::log_manager::open(io::filesystem::posix(), clk_, lc);
    ASSERT_TRUE(logs.ok());
    logs_ = std::move(*logs);
    auto pm = cluster::partition_manager::open(io::filesystem::posix(), clk_, cfg_, *logs_);
    ASSERT_TRUE(pm.ok());
    pm_ = std::move(*pm);
    coord_ = std::make_unique<group::coordinator>(
        group::coordinator_config{}, log_, clk_,
        [this](std::function<void()> fn) { tasks_.push_back(std::move(fn)); });
    watch_ = std::make_unique<retention_watch>(*pm_, coord_.get(), clk_, 10'000);
    coord_->set_offset_observer(
        [this](const std::string& g, const std::string& t, int32_t p, int64_t prev) {
          watch_->on_offset_replaced(g, t, p, prev);
        });
    coord_->set_loaded();
    // Segments of about two batches; one hour of time retention.
    std::vector<config::config_entry> entries = {{"segment.bytes", std::string("1200")},
                                                 {"retention.ms", std::string("3600000")}};
    ASSERT_FALSE(pm_->create_topic("t", 1, 1, entries, false).has_value());
    part_ = pm_->get("t", 0);
    ASSERT_TRUE(part_);
  }
  void TearDown() override {
    watch_.reset();
    coord_.reset();
    if (pm_) pm_->shutdown();
    pm_.reset();
    if (logs_) logs_->shutdown().ignore();
  }

  // Appends one batch of 5 records stamped `age_ms` ago; returns its bytes.
  size_t append(int64_t age_ms) {
    storage::batch_spec s;
    s.records = 5;
    s.value_bytes = 100;
    s.base_timestamp = clk_.now_ms() - age_ms;
    s.timestamp_step = 0;
    auto bytes = storage::build_batch(s);
    auto r = part_->append(bytes, clk_.now_ms());
    EXPECT_EQ(r.error, errc::ok) << r.message;
    return bytes.size();
  }
  void commit(const std::string& group, int64_t offset) {
    protocol::offset_commit_request r;
    r.group_id = group;
    r.generation_id_or_member_epoch = -1;
    auto& t = r.topics.emplace_back();
    t.name = "t";
    t.partitions.emplace_back().partition_index = 0;
    t.partitions.back().committed_offset = offset;
    bool done = false;
    coord_->offset_commit(r, 7, [&](protocol::offset_commit_response resp) {
      EXPECT_EQ(resp.topics.at(0).partitions.at(0).error_code, 0);
      done = true;
    });
    while (!tasks_.empty()) {
      auto f = std::move(tasks_.front());
      tasks_.pop_front();
      f();
    }
    ASSERT_TRUE(done);
  }
  // Scrapes the way metrics_view does; returns {"name{labels}": value}.
  std::map<std::string, std::string> scrape() {
    std::vector<retention_watch::partition_row> rows(1);
    auto& r = rows[0];
    r.topic = "t";
    r.labels = "topic=\"t\",partition=\"0\"";
    r.part = part_;
    r.log_start = part_->log_start_offset().value();
    r.log_end = part_->log_end_offset().value();
    r.high_watermark = part_->high_watermark().value();
    r.segments = part_->segments();
    for (const auto& s : r.segments) r.size_bytes += s.size_bytes;
    std::string text;
    watch_->render(text, rows);
    std::map<std::string, std::string> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
      if (line.empty() || line[0] == '#') continue;
      auto sp = line.rfind(' ');
      out[line.substr(0, sp)] = line.substr(sp + 1);
    }
    return out;
  }
  static std::string g(const std::string& name, const std::string& group) {
    return name + "{group=\"" + group + "\",topic=\"t\",partition=\"0\"}";
  }

  storage::testing::temp_dir dir_;
  manual_clock clk_;
  std::shared_ptr<const config::broker_config> cfg_;
  std::unique_ptr<storage::log_manager> logs_;
  std::unique_ptr<cluster::partition_manager> pm_;
  instant_log log_;
  std::deque<std::function<void()>> tasks_;
  std::unique_ptr<group::coordinator> coord_;
  std::unique_ptr<retention_watch> watch_;
  std::shared_ptr<cluster::partition> part_;
};

TEST_F(RetentionWatchTest, LagHeadroomAndAlert) {
  for (int i = 0; i < 10; ++i) append(60'000);  // 50 records, a minute old
  commit("behind", 12);
  commit("done", 50);
  auto m = scrape();
  EXPECT_EQ(m[g("sluice_group_committed_offset", "behind")], "12");
  EXPECT_EQ(m[g("sluice_group_lag_messages", "behind")], "38");
  EXPECT_EQ(m[g("sluice_group_lag_seconds", "behind")], "60");
  // Its segment's newest record is a minute old: 59 minutes left, above the
  // 50-minute threshold.
  EXPECT_EQ(m[g("sluice_group_retention_headroom_seconds", "behind")], "3540");
  EXPECT_EQ(m[g("sluice_group_retention_headroom_alert", "behind")], "0");
  EXPECT_EQ(m[g("sluice_group_lag_messages", "done")], "0");
  EXPECT_EQ(m[g("sluice_group_retention_headroom_seconds", "done")], "+Inf");
  // Ten minutes later it is under the threshold.
  clk_.advance_ms(600'000);
  m = scrape();
  EXPECT_EQ(m[g("sluice_group_retention_headroom_seconds", "behind")], "2940");
  EXPECT_EQ(m[g("sluice_group_retention_headroom_alert", "behind")], "1");
  EXPECT_EQ(m[g("sluice_group_lag_seconds", "behind")], "660");
  EXPECT_EQ(m[g("sluice_group_retention_headroom_alert", "done")], "0");
}

TEST_F(RetentionWatchTest, LossesAreCountedOnceAcrossScrapesAndCommits) {
  for (int i = 0; i < 10; ++i) append(1000);
  commit("slow", 12);
  auto segs = part_->segments();
  ASSERT_GE(segs.size(), 6u);
  ASSERT_TRUE(part_->delete_records_before(segs[3].base).ok());
  const int64_t first = segs[3].base.value();
  ASSERT_GT(first, 12);
  EXPECT_EQ(scrape()[g("sluice_group_lost_messages_total", "slow")], std::to_string(first - 12));
  EXPECT_EQ(scrape()[g("sluice_group_lost_messages_total", "slow")], std::to_string(first - 12));
  EXPECT_EQ(scrape()[g("sluice_group_retention_headroom_seconds", "slow")], "0");
  EXPECT_EQ(scrape()[g("sluice_group_retention_headroom_alert", "slow")], "1");
  // Retention moves again and the group resets itself before any scrape:
  // the commit's observer counts the new loss.
  ASSERT_TRUE(part_->delete_records_before(segs[5].base).ok());
  const int64_t second = segs[5].base.value();
  commit("slow", second);
  EXPECT_EQ(watch_->lost("slow", "t", 0), second - 12);
  EXPECT_EQ(scrape()[g("sluice_group_lost_messages_total", "slow")], std::to_string(second - 12));
  // Moving back below the log start over counted messages adds nothing.
  commit("slow", 0);
  EXPECT_EQ(scrape()[g("sluice_group_lost_messages_total", "slow")], std::to_string(second - 12));
  // A deleted group's loss stays visible.
  protocol::delete_groups_request del;
  del.groups_names = {"slow"};
  coord_->delete_groups(del, [](protocol::delete_groups_response) {});
  while (!tasks_.empty()) {
    auto f = std::move(tasks_.front());
    tasks_.pop_front();
    f();
  }
  auto m = scrape();
  EXPECT_EQ(m[g("sluice_group_lost_messages_total", "slow")], std::to_string(second - 12));
  EXPECT_EQ(m.count(g("sluice_group_lag_messages", "slow")), 0u);
}

TEST_F(RetentionWatchTest, WriteRateOverTheWindowAndProjectedBytes) {
  watch_->sample_rates();
  clk_.advance_ms(2000);
  size_t bytes = 0;
  for (int i = 0; i < 4; ++i) bytes += append(0);
  auto m = scrape();
  const double rate = static_cast<double>(bytes) / 2.0;
  EXPECT_NEAR(std::stod(m["sluice_log_write_rate_bytes_per_second{topic=\"t\",partition=\"0\"}"]),
              rate, 1e-6 * rate);
  EXPECT_NEAR(std::stod(m["sluice_log_retention_projected_bytes{topic=\"t\",partition=\"0\"}"]),
              rate * 3600, 1e-6 * rate * 3600);
  // After a whole window without writes the rate is back to 0.
  for (int i = 0; i < 40; ++i) {
    clk_.advance_ms(500);
    watch_->sample_rates();
  }
  m = scrape();
  EXPECT_EQ(m["sluice_log_write_rate_bytes_per_second{topic=\"t\",partition=\"0\"}"], "0");
  EXPECT_EQ(m["sluice_log_retention_projected_bytes{topic=\"t\",partition=\"0\"}"], "0");
}

}  // namespace
}  // namespace sluice::broker
