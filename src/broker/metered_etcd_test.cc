// The etcd metrics (every call timed, failures counted) and the control
// plane's section of /metrics, over the in-memory etcd.

#include "broker/metered_etcd.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "broker/metrics_view.h"
#include "etcd/fake_client.h"

namespace sluice::broker {
namespace {

// The value of the sample `name` (with its labels, if any, as written), or
// -1 when absent: the line "<name> <value>". (No std::regex: GCC 12 warns
// inside it under the sanitizer build's -O1.)
double value_of(const std::string& text, const std::string& name) {
  const std::string prefix = name + " ";
  for (size_t at = 0; at < text.size();) {
    const size_t end = std::min(text.find('\n', at), text.size());
    if (text.compare(at, prefix.size(), prefix) == 0 && end > at + prefix.size())
      return std::stod(text.substr(at + prefix.size(), end - at - prefix.size()));
    at = end + 1;
  }
  return -1;
}

TEST(MeteredEtcdTest, EveryCallIsTimedAndFailuresCounted) {
  manual_clock clk;
  auto inner = std::make_unique<etcd::fake_client>(clk);
  etcd::fake_client* fake = inner.get();
  metered_etcd m(std::move(inner), clk);
  ASSERT_TRUE(m.put("/k", "v").ok());
  ASSERT_TRUE(m.range(etcd::key_range::one("/k")).ok());
  EXPECT_EQ(m.request_latency().count(), 2u);
  EXPECT_EQ(m.failures_total(), 0u);
  // A transaction whose compare fails is an answer, not a failure.
  etcd::txn_request t;
  t.compares.push_back(etcd::compare::absent("/k"));
  auto tr = m.txn(t);
  ASSERT_TRUE(tr.ok());
  EXPECT_FALSE(tr->succeeded);
  EXPECT_EQ(m.failures_total(), 0u);
  fake->set_unavailable(true);
  EXPECT_FALSE(m.range(etcd::key_range::one("/k")).ok());
  EXPECT_EQ(m.failures_total(), 1u);
  EXPECT_EQ(m.request_latency().count(), 4u);
  std::string out;
  m.render(out);
  EXPECT_EQ(value_of(out, "sluice_etcd_request_failures_total"), 1);
  EXPECT_EQ(value_of(out, "sluice_etcd_request_seconds_count"), 4);
  EXPECT_NE(out.find("# TYPE sluice_etcd_request_seconds histogram"), std::string::npos);
}

TEST(MeteredEtcdTest, TheControllerShowsItselfActiveAndTheClusterItSees) {
  manual_clock clk;
  metered_etcd etcd(std::make_unique<etcd::fake_client>(clk), clk);
  cluster::control_plane::options o;
  o.node_id = 1;
  o.new_cluster_id = "c";
  auto cp = cluster::control_plane::start(etcd, clk, o);
  ASSERT_TRUE(cp.ok()) << cp.err().message;
  ASSERT_TRUE((*cp)->register_broker("127.0.0.1", 9092).ok());
  const deadline d(10'000, sluice::clock::system());
  while (!(*cp)->is_controller() && !d.passed()) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  ASSERT_TRUE((*cp)->is_controller());
  ASSERT_TRUE((*cp)->submit(
                       [](controller::controller& k, const controller::metadata_image& img) {
                         return k.create_topic(img, "t", 2, 1, nullptr, {}).to_status();
                       },
                       10'000)
                  .ok());
  metrics_sources src;
  src.control = cp->get();
  src.etcd = &etcd;
  const std::string text = render_metrics(src);
  EXPECT_EQ(value_of(text, "sluice_controller_active"), 1) << text;
  EXPECT_EQ(value_of(text, "sluice_controller_changes_total"), 1) << text;
  EXPECT_EQ(value_of(text, "sluice_brokers_alive"), 1) << text;
  EXPECT_EQ(value_of(text, "sluice_offline_partitions"), 0) << text;
  EXPECT_EQ(value_of(text, "sluice_leader_elections_total{kind=\"unclean\"}"), 0) << text;
  EXPECT_GT(value_of(text, "sluice_etcd_request_seconds_count"), 0) << text;
  (*cp)->shutdown().ignore();
}

}  // namespace
}  // namespace sluice::broker
