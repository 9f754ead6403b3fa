// The control plane of several brokers over one in-memory etcd: one
// controller at a time, another when it goes, admin operations on the
// controller that its image then shows, and a node id in use refused.

#include "cluster/control_plane.h"

#include <gtest/gtest.h>

#include <future>

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
    const deadline d(10'000);
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

}  // namespace
}  // namespace sluice::cluster
