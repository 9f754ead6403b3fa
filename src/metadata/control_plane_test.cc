// The control plane of several brokers over one in-memory etcd: one
// controller at a time, another when it goes, admin operations on the
// controller that its image then shows, and a node id in use refused.

#include "metadata/control_plane.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <future>
#include <mutex>

#include "etcd/fake_client.h"

namespace sluice::cluster {
namespace {

class ControlPlaneTest : public ::testing::Test {
 protected:
  ControlPlaneTest() : etcd_(clock_) {}

  std::unique_ptr<control_plane> start(int32_t id, int64_t rebalance_interval_ms = 300'000) {
    control_plane::options o;
    o.node_id = id;
    o.leader_imbalance_check_interval_ms = rebalance_interval_ms;
    o.new_cluster_id = "cluster-" + std::to_string(id);
    auto cp = control_plane::start(etcd_, clock_, o);
    EXPECT_TRUE(cp.ok()) << cp.err().message;
    if (!cp.ok()) return nullptr;
    EXPECT_TRUE((*cp)->register_broker("127.0.0.1", 9090 + id).ok());
    return std::move(cp).value();
  }
  // Waits (a bounded while) until `pred` holds.
  template <class F>
  bool eventually(F pred) {
    const deadline d(10'000, sluice::clock::system());
    while (!d.passed()) {
      if (pred()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return pred();
  }
  static int32_t controller_of(const control_plane& cp) {
    return cp.with_image([](const controller::metadata_image& img) {
      return img.controller() ? img.controller()->record.id : -1;
    });
  }

  manual_clock clock_;
  etcd::fake_client etcd_;
};

TEST_F(ControlPlaneTest, OneControllerAtATimeAndAnotherWhenItGoes) {
  auto a = start(1), b = start(2), c = start(3);
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(a->cluster_id(), "cluster-1");  // the first broker's, kept
  EXPECT_EQ(c->cluster_id(), "cluster-1");
  ASSERT_TRUE(eventually([&] { return controller_of(*a) != -1 && controller_of(*b) == controller_of(*a) &&
                                      controller_of(*c) == controller_of(*a); }));
  EXPECT_EQ(a->is_controller() + b->is_controller() + c->is_controller(), 1);
  ASSERT_TRUE(eventually([&] {
    return b->with_image([](const auto& img) { return img.live_brokers().size() == 3; });
  }));
  control_plane* ctl = a->is_controller() ? a.get() : b->is_controller() ? b.get() : c.get();
  const int32_t first = ctl->node_id();

  // Topic creation on the controller: its own image shows the topic at once.
  ASSERT_TRUE(ctl->submit(
                     [](controller::controller& k, const controller::metadata_image& img) {
                       return k.create_topic(img, "t", 3, 3, nullptr, {}).ok()
                                  ? status()
                                  : status(errc::invalid_argument, "create failed");
                     },
                     10'000)
                  .ok());
  EXPECT_TRUE(ctl->with_image([](const auto& img) { return img.topic("t") != nullptr; }));
  control_plane* other = ctl == a.get() ? b.get() : a.get();
  EXPECT_EQ(other->submit([](auto&, const auto&) { return status(); }, 1'000).code(), errc::not_controller);

  // The controller stops (its lease given up): another takes over and moves
  // the leaderships the stopped broker held.
  if (ctl == a.get()) a.reset();
  else if (ctl == b.get()) b.reset();
  else c.reset();
  control_plane* rest[2];
  int n = 0;
  for (auto* cp : {a.get(), b.get(), c.get()})
    if (cp) rest[n++] = cp;
  ASSERT_TRUE(eventually([&] {
    const int32_t k = controller_of(*rest[0]);
    return k != -1 && k != first && controller_of(*rest[1]) == k && (rest[0]->is_controller() || rest[1]->is_controller());
  }));
  ASSERT_TRUE(eventually([&] {
    return rest[0]->with_image([&](const controller::metadata_image& img) {
      for (int32_t p = 0; p < 3; ++p) {
        const auto* pe = img.partition("t", p);
        if (!pe || pe->record.state.leader == first || pe->record.state.leader < 0) return false;
      }
      return true;
    });
  }));
}

// Issue 31, item 10: a controlled shutdown the controller cannot write
// (etcd away) is reported, not passed over in silence; one that can
// reports ok.
TEST_F(ControlPlaneTest, AFailedControlledShutdownIsReported) {
  auto a = start(1), b = start(2);
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(eventually([&] { return a->is_controller() || b->is_controller(); }));
  control_plane* ctl = a->is_controller() ? a.get() : b.get();
  control_plane* other = ctl == a.get() ? b.get() : a.get();
  ASSERT_TRUE(eventually([&] { return ctl->with_image([](const auto& img) { return img.live_brokers().size() == 2; }); }));
  ASSERT_TRUE(ctl->submit(
                     [&](controller::controller& k, const controller::metadata_image& img) {
                       return k.create_topic(img, "t", 4, 2, nullptr, {}).ok() ? status()
                                                                              : status(errc::invalid_argument, "x");
                     },
                     10'000)
                  .ok());
  // The broker that is not the controller has nothing to report.
  EXPECT_TRUE(other->shutdown().ok());
  etcd_.set_unavailable(true);
  const status s = ctl->shutdown();
  etcd_.set_unavailable(false);
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(ctl->shutdown().ok());  // once
}

// Issue 31, item 6: etcd without a quorum for longer than the session
// timeout expires no lease and renews them all when it elects again, so
// no broker registers anew (same broker epochs) and no ISR shrinks: the
// controller saw nobody leave. (Before, every lease keeper gave up after a
// TTL and each broker revoked its lease and registered again.)
TEST_F(ControlPlaneTest, AQuorumLossLongerThanTheSessionCostsNoRegistrationAndNoIsr) {
  auto a = start(1), b = start(2), c = start(3);
  ASSERT_TRUE(a && b && c);
  control_plane* all[] = {a.get(), b.get(), c.get()};
  ASSERT_TRUE(eventually([&] {
    for (auto* cp : all)
      if (!cp->view_current() || controller_of(*cp) == -1 ||
          !cp->with_image([](const auto& img) { return img.live_brokers().size() == 3; }))
        return false;
    return true;
  }));
  control_plane* ctl = a->is_controller() ? a.get() : b->is_controller() ? b.get() : c.get();
  ASSERT_TRUE(ctl->submit(
                     [](controller::controller& k, const controller::metadata_image& img) {
                       return k.create_topic(img, "q", 3, 3, nullptr, {}).ok() ? status()
                                                                              : status(errc::invalid_argument, "x");
                     },
                     10'000)
                  .ok());
  auto isrs = [](control_plane& cp) {
    return cp.with_image([](const controller::metadata_image& img) {
      std::vector<std::vector<int32_t>> out;
      for (int32_t p = 0; p < 3; ++p) {
        const auto* pe = img.partition("q", p);
        auto isr = pe ? pe->record.state.isr : std::vector<int32_t>{};
        std::sort(isr.begin(), isr.end());
        out.push_back(isr);
      }
      return out;
    });
  };
  const std::vector<std::vector<int32_t>> full(3, std::vector<int32_t>{1, 2, 3});
  ASSERT_TRUE(eventually([&] { return isrs(*a) == full && isrs(*b) == full && isrs(*c) == full; }));
  const int64_t epochs[] = {a->broker_epoch(), b->broker_epoch(), c->broker_epoch()};
  // Three session timeouts (10 s) without a quorum.
  etcd_.set_no_leader(true);
  for (int i = 0; i < 60; ++i) {
    clock_.advance_ms(500);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  etcd_.set_no_leader(false);
  ASSERT_TRUE(eventually([&] {
    clock_.advance_ms(50);
    return a->view_current() && b->view_current() && c->view_current();
  }));
  EXPECT_EQ(a->broker_epoch(), epochs[0]);
  EXPECT_EQ(b->broker_epoch(), epochs[1]);
  EXPECT_EQ(c->broker_epoch(), epochs[2]);
  for (auto* cp : all) EXPECT_EQ(isrs(*cp), full);
  EXPECT_EQ(controller_of(*a), controller_of(*b));
  EXPECT_NE(controller_of(*a), -1);
}

// A broker's epoch is the mod revision of its registration, as every
// image shows it; another broker's image agrees, and a new registration
// (another process of the node id) gets a new one.
TEST_F(ControlPlaneTest, TheBrokerEpochIsTheRegistrationsRevision) {
  auto a = start(1), b = start(2);
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(eventually([&] { return a->broker_epoch() > 0; }));
  const int64_t first = a->broker_epoch();
  ASSERT_TRUE(eventually([&] {
    return b->with_image([&](const controller::metadata_image& img) {
      auto it = img.brokers().find(1);
      return it != img.brokers().end() && it->second.mod_revision == first;
    });
  }));
  ASSERT_TRUE(eventually([&] { return b->broker_epoch() > 0; }));
  EXPECT_NE(b->broker_epoch(), first);
  a.reset();  // deregisters
  ASSERT_TRUE(eventually([&] {
    return b->with_image([](const controller::metadata_image& img) { return !img.brokers().count(1); });
  }));
  auto again = start(1);
  ASSERT_TRUE(again);
  ASSERT_TRUE(eventually([&] { return again->broker_epoch() > 0; }));
  EXPECT_GT(again->broker_epoch(), first);
}

// Starts a control plane for `id` on another thread while the test moves
// the clock a second at a time (the start waits a session timeout for a
// registration of its node id to go).
result<std::unique_ptr<control_plane>> start_while_time_passes(manual_clock& clk, etcd::fake_client& etcd,
                                                               int32_t id) {
  control_plane::options o;
  o.node_id = id;
  o.new_cluster_id = "x";
  auto f = std::async(std::launch::async, [&] { return control_plane::start(etcd, clk, o); });
  while (f.wait_for(std::chrono::milliseconds(20)) != std::future_status::ready) {
    clk.advance_ms(1'000);
    etcd.expire_leases();
  }
  return f.get();
}

TEST_F(ControlPlaneTest, ANodeIdInUseIsRefused) {
  auto a = start(1);
  ASSERT_TRUE(a);
  auto again = start_while_time_passes(clock_, etcd_, 1);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.code(), errc::already_exists);
  EXPECT_NE(again.err().message.find("node.id 1 is registered by a live broker (127.0.0.1:9091)"), std::string::npos)
      << again.err().message;
}

// A registration left by a process that died (its lease no longer kept
// alive) is waited out: the restarted broker starts once it is gone.
TEST_F(ControlPlaneTest, ARestartWaitsForItsOldRegistrationToExpire) {
  auto lease = etcd_.lease_grant(5);
  ASSERT_TRUE(lease.ok());
  ASSERT_TRUE(etcd_.put("/sluice/brokers/2", controller::encode(controller::broker_record{2, "old", "h", 1, {}}),
                        {lease->id, false, false})
                  .ok());
  auto cp = start_while_time_passes(clock_, etcd_, 2);
  ASSERT_TRUE(cp.ok()) << cp.err().message;
  EXPECT_TRUE((*cp)->register_broker("127.0.0.1", 9092).ok());
}

// auto.leader.rebalance.enable: a partition led by another than its
// preferred replica (after a failover) goes back to it at the next check,
// once the preferred replica is live and in sync.
TEST_F(ControlPlaneTest, LeadershipGoesBackToPreferredReplicasAtTheCheck) {
  auto a = start(1, 2'000), b = start(2, 2'000);
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(eventually([&] { return a->is_controller() || b->is_controller(); }));
  control_plane* ctl = a->is_controller() ? a.get() : b.get();
  ASSERT_TRUE(eventually([&] { return ctl->with_image([](const auto& img) { return img.brokers().size() == 2; }); }));
  std::vector<controller::manual_assignment> m{{0, {1, 2}}, {1, {2, 1}}};
  ASSERT_TRUE(ctl->submit(
                     [&](controller::controller& k, const controller::metadata_image& img) {
                       auto r = k.create_topic(img, "t", 2, 2, &m, {});
                       return r.ok() ? status() : status(r.err());
                     },
                     10'000)
                  .ok());
  // As after a failover: broker 2 leads partition 0, both in sync.
  const auto moved = ctl->with_image([](const controller::metadata_image& img) {
    controller::partition_record r = img.partition("t", 0)->record;
    r.state = {2, r.state.leader_epoch + 1, {1, 2}, r.state.partition_epoch + 1};
    return r;
  });
  ASSERT_TRUE(etcd_.put("/sluice/partitions/t/0", controller::encode(moved)).ok());
  ASSERT_TRUE(eventually([&] {
    return ctl->with_image([](const auto& img) { return img.partition("t", 0)->record.state.leader == 2; });
  }));
  clock_.advance_ms(1'000);  // not yet
  ASSERT_TRUE(ctl->with_image([](const auto& img) { return img.partition("t", 0)->record.state.leader == 2; }));
  clock_.advance_ms(1'500);
  ASSERT_TRUE(eventually([&] {
    return ctl->with_image([](const auto& img) {
      const auto& s = img.partition("t", 0)->record.state;
      return s.leader == 1 && s.leader_epoch == 2;
    });
  }));
}

// A partition offline for want of an in-sync replica, with a live one out
// of sync, is elected uncleanly as soon as unclean.leader.election.enable
// is turned on, by its topic's config or by the cluster-wide default in
// etcd: the config change alone triggers it, no broker comes or goes and
// no time passes on the clock.
TEST_F(ControlPlaneTest, TurningUncleanElectionOnElectsAnOfflinePartitionAtOnce) {
  auto a = start(1), b = start(2), c = start(3);
  ASSERT_TRUE(a && b && c);
  ASSERT_TRUE(eventually([&] { return a->is_controller() || b->is_controller() || c->is_controller(); }));
  control_plane* ctl = a->is_controller() ? a.get() : b->is_controller() ? b.get() : c.get();
  ASSERT_TRUE(eventually([&] { return ctl->with_image([](const auto& img) { return img.brokers().size() == 3; }); }));
  // x leads both partitions; y is assigned but out of the ISR.
  std::vector<int32_t> others;
  for (int32_t id : {1, 2, 3})
    if (id != ctl->node_id()) others.push_back(id);
  const int32_t x = others[0], y = others[1];
  std::vector<controller::manual_assignment> m{{0, {x, y}}};
  auto create = [&](const std::string& name) {
    return ctl->submit(
        [&](controller::controller& k, const controller::metadata_image& img) {
          auto r = k.create_topic(img, name, 1, 2, &m, {});
          return r.ok() ? status() : status(r.err());
        },
        10'000);
  };
  ASSERT_TRUE(create("t").ok());
  ASSERT_TRUE(create("u").ok());
  for (const char* t : {"t", "u"}) {
    const auto shrunk = ctl->with_image([&](const controller::metadata_image& img) {
      controller::partition_record r = img.partition(t, 0)->record;
      r.state = controller::apply_isr_change(r.state, {x});
      return r;
    });
    ASSERT_TRUE(etcd_.put(std::string("/sluice/partitions/") + t + "/0", controller::encode(shrunk)).ok());
  }
  // x stops: both partitions go offline (unclean election is off).
  (x == 1 ? a : x == 2 ? b : c).reset();
  auto leader_of = [&](const char* t) {
    return ctl->with_image([&](const controller::metadata_image& img) { return img.partition(t, 0)->record.state; });
  };
  ASSERT_TRUE(eventually([&] { return leader_of("t").leader == -1 && leader_of("u").leader == -1; }));
  EXPECT_EQ(leader_of("t").isr, std::vector<int32_t>{x});
  EXPECT_EQ(ctl->unclean_elections_total(), 0u);

  // The topic's config turns it on (what AlterConfigs on the controller writes).
  ASSERT_TRUE(ctl->submit(
                     [](controller::controller& k, const controller::metadata_image& img) {
                       return k.set_topic_configs(img, "t", {{"unclean.leader.election.enable", "true"}});
                     },
                     10'000)
                  .ok());
  ASSERT_TRUE(eventually([&] { return leader_of("t").leader == y; }));
  EXPECT_EQ(leader_of("t").isr, std::vector<int32_t>{y});
  EXPECT_EQ(leader_of("u").leader, -1);
  EXPECT_EQ(ctl->unclean_elections_total(), 1u);

  // The cluster-wide default turns it on for the other topic.
  ASSERT_TRUE(ctl->submit(
                     [](controller::controller& k, const controller::metadata_image& img) {
                       return k.set_broker_configs(img, {{"unclean.leader.election.enable", "true"}});
                     },
                     10'000)
                  .ok());
  ASSERT_TRUE(eventually([&] { return leader_of("u").leader == y; }));
  EXPECT_EQ(leader_of("u").isr, std::vector<int32_t>{y});
  EXPECT_EQ(ctl->unclean_elections_total(), 2u);
}

// While etcd is away the image stays and nothing is decided; afterwards the
// control plane goes on.
TEST_F(ControlPlaneTest, EtcdAwayChangesNothingAndItRecovers) {
  auto a = start(1);
  ASSERT_TRUE(a);
  ASSERT_TRUE(eventually([&] { return a->is_controller(); }));
  etcd_.set_unavailable(true);
  EXPECT_EQ(a->submit([](controller::controller& k, const controller::metadata_image& img) {
                       return k.create_topic(img, "t", 1, 1, nullptr, {}).ok() ? status()
                                                                                 : status(errc::unavailable, "no");
                     },
                     5'000)
                .code(),
            errc::unavailable);
  etcd_.set_unavailable(false);
  ASSERT_TRUE(a->submit(
                   [](controller::controller& k, const controller::metadata_image& img) {
                     auto r = k.create_topic(img, "t", 1, 1, nullptr, {});
                     return r.ok() ? status() : status(r.err());
                   },
                   5'000)
                  .ok());
  EXPECT_TRUE(a->with_image([](const auto& img) { return img.topic("t") != nullptr; }));
}

// A broker's view counts as current only once its registration is applied,
// and stops counting the moment its lease may have run out (a process
// resumed after SIGSTOP: the clock jumped, no thread has run yet); it counts
// again once the broker registered anew and applied that too.
TEST_F(ControlPlaneTest, TheViewIsCurrentOnlyUnderALiveSessionAndAfterItsRegistration) {
  auto a = start(1);
  ASSERT_TRUE(a);
  ASSERT_TRUE(eventually([&] { return a->view_current(); }));
  // Within the TTL (10 s, the default session timeout): still current.
  clock_.advance_ms(2'000);
  EXPECT_TRUE(a->view_current());
  // Past it, all at once: not current, whatever the keeper's thread does.
  etcd_.set_unavailable(true);  // no renewal or new registration meanwhile
  clock_.advance_ms(20'000);
  EXPECT_FALSE(a->view_current());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(a->view_current());
  // etcd back: a new lease, a new registration, applied: current again.
  etcd_.set_unavailable(false);
  ASSERT_TRUE(eventually([&] {
    clock_.advance_ms(100);  // the metadata thread's waits follow the clock
    return a->view_current();
  }));
}

// A session lost because etcd cannot be reached at all counts as lost (the
// others may have elected new leaders meanwhile); one that ran out while
// etcd answered that it has no leader (a lost quorum) does not: nobody can
// expire the lease or elect meanwhile, and the broker goes on serving what
// it leads. Either way it registers again once etcd is back.
TEST_F(ControlPlaneTest, ASessionRunOutDuringALostQuorumIsNotCountedLost) {
  auto a = start(1);
  ASSERT_TRUE(a);
  ASSERT_TRUE(eventually([&] { return a->view_current(); }));
  EXPECT_FALSE(a->session_lost());
  // Quorum lost for longer than the session (10 s).
  etcd_.set_no_leader(true);
  clock_.advance_ms(20'000);
  EXPECT_FALSE(a->view_current());
  EXPECT_FALSE(a->session_lost());
  EXPECT_TRUE(a->view_trusted());  // the group coordinator goes on
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the keeper gives up meanwhile
  EXPECT_FALSE(a->session_lost());
  etcd_.set_no_leader(false);
  ASSERT_TRUE(eventually([&] {
    clock_.advance_ms(100);
    return a->view_current();
  }));
  // Now cut off: no member answers at all.
  etcd_.set_unavailable(true);
  clock_.advance_ms(20'000);
  EXPECT_TRUE(a->session_lost());
  EXPECT_FALSE(a->view_trusted());
  etcd_.set_unavailable(false);
  ASSERT_TRUE(eventually([&] {
    clock_.advance_ms(100);
    return !a->session_lost() && a->view_current();
  }));
}

// An op its caller gave up on before it started never runs: it may hold
// references into the caller's frame, which is gone.
TEST_F(ControlPlaneTest, AnOpWhoseCallerTimedOutBeforeItStartedNeverRuns) {
  auto a = start(1);
  ASSERT_TRUE(a);
  ASSERT_TRUE(eventually([&] { return a->is_controller(); }));
  // The first op holds the metadata thread until released.
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::promise<void> entered;
  auto first = std::async(std::launch::async, [&] {
    return a->submit(
        [&](controller::controller&, const controller::metadata_image&) {
          entered.set_value();
          released.wait();
          return status();
        },
        60'000);
  });
  entered.get_future().wait();
  auto ran = std::make_shared<std::atomic<bool>>(false);
  auto second = std::async(std::launch::async, [&] {
    return a->submit(
        [ran](controller::controller&, const controller::metadata_image&) {
          ran->store(true);
          return status();
        },
        100);
  });
  // The second caller's timeout passes while the first op still runs.
  ASSERT_TRUE(eventually([&] {
    clock_.advance_ms(50);
    return second.wait_for(std::chrono::milliseconds(1)) == std::future_status::ready;
  }));
  EXPECT_EQ(second.get().code(), errc::unavailable);
  release.set_value();
  EXPECT_TRUE(first.get().ok());
  // A later op runs, and the abandoned one has not.
  EXPECT_TRUE(a->submit([](controller::controller&, const controller::metadata_image&) { return status(); }, 5'000)
                  .ok());
  EXPECT_FALSE(ran->load());
}

// An etcd client over the fake for one broker, whose ISR writes (txns on
// partition records) the test holds or fails, and which logs the calls
// that matter here in order: "isr" for such a write, "grant" for a lease
// grant. Everything else goes to the fake.
class held_isr_etcd final : public etcd::client {
 public:
  explicit held_isr_etcd(etcd::fake_client& inner) : inner_(inner) {}

  // Called (on the caller's thread) for each ISR write while `hold` is
  // set, which then fails as an etcd away for its whole budget would.
  std::function<void(int n)> on_isr_write;
  std::atomic<bool> hold{false};
  // Transactions on partition records, held or not.
  std::atomic<int> isr_txns{0};

  std::vector<std::string> log() const {
    std::lock_guard g(mu_);
    return log_;
  }
  int isr_writes() const {
    auto l = log();
    return static_cast<int>(std::count(l.begin(), l.end(), "isr"));
  }

  result<etcd::range_result> range(const etcd::key_range& keys, etcd::range_options opts = {}) override {
    return inner_.range(keys, opts);
  }
  result<etcd::put_result> put(const std::string& key, const std::string& value,
                               etcd::put_options opts = {}) override {
    return inner_.put(key, value, opts);
  }
  result<etcd::delete_result> delete_range(const etcd::key_range& keys, bool prev_kv = false) override {
    return inner_.delete_range(keys, prev_kv);
  }
  result<etcd::txn_result> txn(const etcd::txn_request& req) override {
    if (touches_partitions(req)) isr_txns++;
    if (hold.load() && touches_partitions(req)) {
      int n = 0;
      {
        std::lock_guard g(mu_);
        log_.push_back("isr");
        n = static_cast<int>(std::count(log_.begin(), log_.end(), "isr"));
      }
      if (on_isr_write) on_isr_write(n);
      return error{errc::unavailable, "etcd unavailable (held by the test)"};
    }
    return inner_.txn(req);
  }
  result<etcd::lease_grant_result> lease_grant(int64_t ttl_s) override {
    {
      std::lock_guard g(mu_);
      log_.push_back("grant");
    }
    return inner_.lease_grant(ttl_s);
  }
  result<int64_t> lease_keepalive_once(int64_t lease_id, int64_t budget_ms) override {
    return inner_.lease_keepalive_once(lease_id, budget_ms);
  }
  result<int64_t> lease_time_to_live(int64_t lease_id) override { return inner_.lease_time_to_live(lease_id); }
  status lease_revoke(int64_t lease_id) override { return inner_.lease_revoke(lease_id); }
  result<std::unique_ptr<etcd::watch_handle>> watch(const etcd::key_range& keys, int64_t start_revision,
                                                    etcd::watch_callback cb) override {
    return inner_.watch(keys, start_revision, std::move(cb));
  }
  result<std::vector<etcd::endpoint_status>> endpoints_status() override { return inner_.endpoints_status(); }
  bool leaderless_within(int64_t window_ms) const override { return inner_.leaderless_within(window_ms); }

 private:
  static bool touches_partitions(const etcd::txn_request& req) {
    for (const auto& c : req.compares)
      if (c.key.find("/partitions/") != std::string::npos) return true;
    return false;
  }
  etcd::fake_client& inner_;
  mutable std::mutex mu_;
  std::vector<std::string> log_;
};

// Broker 1 (the controller) on the fake directly, broker 2 through a
// held_isr_etcd; a topic of 20 partitions on both. Returns the ISR shrinks
// broker 2 may ask for (one per partition it leads).
struct two_brokers {
  std::unique_ptr<control_plane> one;
  std::unique_ptr<held_isr_etcd> etcd_two;
  std::unique_ptr<control_plane> two;
  std::atomic<int> lost_calls{0};
  std::vector<isr_request> shrinks;
  // Held by the test: broker 2's metadata thread stops in a listener, so
  // that everything queued meanwhile is taken as one batch.
  std::mutex gate;
  std::atomic<bool> at_gate{false};
};

class ControlPlaneSessionTest : public ControlPlaneTest {
 protected:
  std::unique_ptr<two_brokers> start_two() {
    auto t = std::make_unique<two_brokers>();
    t->one = start(1);
    if (!t->one) return nullptr;
    EXPECT_TRUE(eventually([&] { return t->one->is_controller(); }));
    t->etcd_two = std::make_unique<held_isr_etcd>(etcd_);
    control_plane::options o;
    o.node_id = 2;
    o.new_cluster_id = "cluster-2";
    auto cp = control_plane::start(*t->etcd_two, clock_, o);
    EXPECT_TRUE(cp.ok()) << cp.err().message;
    if (!cp.ok()) return nullptr;
    t->two = std::move(cp).value();
    two_brokers* raw = t.get();
    t->two->on_session_lost([raw] { raw->lost_calls++; });
    t->two->on_change([raw](const controller::metadata_image&, const std::vector<controller::image_change>&) {
      raw->at_gate = true;
      std::lock_guard g(raw->gate);
      raw->at_gate = false;
    });
    EXPECT_TRUE(t->two->register_broker("127.0.0.1", 9092).ok());
    EXPECT_TRUE(eventually([&] {
      return t->one->with_image([](const controller::metadata_image& img) { return img.live_brokers().size() == 2; });
    }));
    EXPECT_TRUE(t->one->submit(
                        [](controller::controller& k, const controller::metadata_image& img) {
                          auto r = k.create_topic(img, "t", 20, 2, nullptr, {});
                          return r.ok() ? status() : status(r.err());
                        },
                        10'000)
                    .ok());
    EXPECT_TRUE(eventually([&] {
      return t->two->with_image([](const controller::metadata_image& img) { return img.topic("t") != nullptr; });
    }));
    t->two->with_image([&](const controller::metadata_image& img) {
      for (int32_t p = 0; p < 20; ++p) {
        const auto* pe = img.partition("t", p);
        if (pe && pe->record.state.leader == 2)
          t->shrinks.push_back({"t", p, pe->record.state.leader_epoch, pe->record.state.partition_epoch, {2}, {}});
      }
      return 0;
    });
    EXPECT_GE(t->shrinks.size(), 5u);
    return t;
  }
  // Queues every shrink while broker 2's metadata thread waits in its
  // listener (stopped there by a topic the controller creates), so that
  // it takes them all at once.
  void queue_shrinks_at_once(two_brokers& t) {
    std::unique_lock g(t.gate);
    t.at_gate = false;
    ASSERT_TRUE(t.one->submit(
                       [](controller::controller& k, const controller::metadata_image& img) {
                         auto r = k.create_topic(img, "other", 1, 1, nullptr, {});
                         return r.ok() ? status() : status(r.err());
                       },
                       10'000)
                    .ok());
    ASSERT_TRUE(eventually([&] { return t.at_gate.load(); }));
    for (const auto& c : t.shrinks) t.two->request_isr_change(c);
  }
  // Broker 2's current lease, as its registration holds it.
  int64_t lease_of_two() {
    auto r = etcd_.range(etcd::key_range::one("/sluice/brokers/2"));
    return r.ok() && !r->kvs.empty() ? r->kvs[0].lease : 0;
  }
};

// A broker whose session is lost while ISR changes are queued renews the
// session first: each queued write may take the whole etcd budget while
// etcd is away (5 s; with 20 partitions led, a renewal was tried about
// once in 100 s and the broker stayed out of the cluster). Until it has
// registered again, session_lost() says so and the listeners heard it once.
TEST_F(ControlPlaneSessionTest, TheSessionIsRenewedAheadOfQueuedIsrChanges) {
  auto t = start_two();
  ASSERT_TRUE(t);
  EXPECT_FALSE(t->two->session_lost());
  const int64_t first_lease = lease_of_two();
  ASSERT_NE(first_lease, 0);
  control_plane* two = t->two.get();
  // The first ISR write: etcd takes the lease away meanwhile (it expired
  // while the write waited), and the broker's keeper finds out.
  t->etcd_two->on_isr_write = [&](int n) {
    if (n != 1) return;
    EXPECT_TRUE(etcd_.lease_revoke(first_lease).ok());
    const deadline d(10'000, sluice::clock::system());
    while ((!two->session_lost() || t->lost_calls.load() == 0) && !d.passed()) {
      clock_.advance_ms(500);  // the keeper's next renewal finds the lease gone
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  };
  t->etcd_two->hold = true;
  const auto before = t->etcd_two->log().size();
  queue_shrinks_at_once(*t);
  ASSERT_TRUE(eventually([&] {
    auto l = t->etcd_two->log();
    return std::find(l.begin() + static_cast<std::ptrdiff_t>(before), l.end(), "grant") != l.end();
  }));
  auto l = t->etcd_two->log();
  l.erase(l.begin(), l.begin() + static_cast<std::ptrdiff_t>(before));
  const auto grant = std::find(l.begin(), l.end(), "grant");
  EXPECT_EQ(std::count(l.begin(), grant, "isr"), 1) << "ISR writes tried before the session was renewed";
  EXPECT_EQ(t->lost_calls.load(), 1);
  // Registered again under a new lease: the session is no longer lost.
  ASSERT_TRUE(eventually([&] {
    clock_.advance_ms(100);
    return !t->two->session_lost() && lease_of_two() != 0 && lease_of_two() != first_lease;
  }));
}

// Stopping does not wait behind queued ISR changes either: the write in
// flight finishes, the rest are dropped.
TEST_F(ControlPlaneSessionTest, StoppingDoesNotWaitBehindQueuedIsrChanges) {
  auto t = start_two();
  ASSERT_TRUE(t);
  std::promise<void> entered;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  t->etcd_two->on_isr_write = [&](int n) {
    if (n != 1) return;
    entered.set_value();
    released.wait();
  };
  t->etcd_two->hold = true;
  queue_shrinks_at_once(*t);
  entered.get_future().wait();
  auto stopped = std::async(std::launch::async, [&] { t->two->shutdown().ignore(); });
  // shutdown() has asked the metadata thread to stop before the write returns.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  release.set_value();
  ASSERT_EQ(stopped.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  EXPECT_EQ(t->etcd_two->isr_writes(), 1);
}

// ISR changes queued together reach etcd together: one transaction for a
// batch, not one round trip per partition (issue 31, item 9: a restarted
// broker of 20,000 partitions waited 75-134 s to be back in every ISR).
TEST_F(ControlPlaneSessionTest, QueuedIsrChangesGoToEtcdInOneTransaction) {
  auto t = start_two();
  ASSERT_TRUE(t);
  const int before = t->etcd_two->isr_txns.load();
  queue_shrinks_at_once(*t);
  ASSERT_TRUE(eventually([&] {
    return t->one->with_image([&](const controller::metadata_image& img) {
      for (const auto& c : t->shrinks)
        if (img.partition("t", c.partition)->record.state.isr != std::vector<int32_t>{2}) return false;
      return true;
    });
  }));
  EXPECT_EQ(t->etcd_two->isr_txns.load() - before, 1) << t->shrinks.size() << " changes";
  EXPECT_EQ(t->two->isr_shrinks_total(), t->shrinks.size());
}

}  // namespace
}  // namespace sluice::cluster
