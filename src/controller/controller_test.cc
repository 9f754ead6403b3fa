// The controller against an in-memory etcd, deterministically: campaign and
// fencing, topic writes with placement, elections after broker changes, and
// the image a broker builds from the watch.

#include "controller/controller.h"

#include <gtest/gtest.h>

#include "etcd/fake_client.h"

namespace sluice::controller {
namespace {

class ControllerTest : public ::testing::Test {
 protected:
  ControllerTest() : etcd_(clock_), keys_("/sluice/"), img_(keys_) {}

  // Registers broker `id` under a lease of its own, as membership does.
  int64_t register_broker(int32_t id, std::optional<std::string> rack = std::nullopt) {
    auto lease = etcd_.lease_grant(10);
    EXPECT_TRUE(lease.ok());
    broker_record r{id, "inc" + std::to_string(id), "127.0.0.1", 9090 + id, rack};
    EXPECT_TRUE(etcd_.put(keys_.broker(id), encode(r), {lease->id, false, false}).ok());
    leases_[id] = lease->id;
    return lease->id;
  }
  void kill_broker(int32_t id) { ASSERT_TRUE(etcd_.lease_revoke(leases_.at(id)).ok()); }
  // The image as a broker that has caught up would hold it.
  void sync() {
    auto r = etcd_.range(etcd::key_range::prefix(keys_.prefix()));
    ASSERT_TRUE(r.ok());
    auto errors = img_.load(r->kvs, r->header_revision);
    ASSERT_TRUE(errors.empty()) << errors[0].message;
  }
  std::unique_ptr<controller> make(int32_t id) {
    return std::make_unique<controller>(etcd_, keys_, controller_record{id, "inc" + std::to_string(id)});
  }
  // Brokers 0 .. n-1 registered, broker 0 the controller, the image caught up.
  std::unique_ptr<controller> controller_of(int32_t n) {
    auto c = make(0);
    for (int32_t id = 0; id < n; ++id) register_broker(id);
    auto won = c->campaign(leases_[0]);
    EXPECT_TRUE(won.ok() && *won);
    sync();
    return c;
  }
  partition_state state(const std::string& topic, int32_t p) {
    sync();
    const partition_entry* pe = img_.partition(topic, p);
    EXPECT_NE(pe, nullptr) << topic << "-" << p;
    return pe ? pe->record.state : partition_state{};
  }

  manual_clock clock_;
  etcd::fake_client etcd_;
  key_layout keys_;
  metadata_image img_;
  std::map<int32_t, int64_t> leases_;
};

TEST_F(ControllerTest, OneBrokerWinsTheCampaignAndItsEpochIsTheKeysCreateRevision) {
  auto a = make(1), b = make(2);
  const int64_t la = register_broker(1), lb = register_broker(2);
  ASSERT_TRUE(a->campaign(la).value());
  EXPECT_TRUE(a->active());
  const int64_t epoch = a->epoch();
  EXPECT_GT(epoch, 0);
  EXPECT_FALSE(b->campaign(lb).value());
  EXPECT_FALSE(b->active());
  // Campaigning again finds its own key: still the controller, same epoch.
  ASSERT_TRUE(a->campaign(la).value());
  EXPECT_EQ(a->epoch(), epoch);
  sync();
  ASSERT_TRUE(img_.controller().has_value());
  EXPECT_EQ(img_.controller()->record.id, 1);
  EXPECT_EQ(img_.controller()->epoch, epoch);
  EXPECT_EQ(b->create_topic(img_, "t", 1, 1, nullptr, {}).code(), errc::not_controller);
}

// A controller whose lease ran out while it was away is deposed: its next
// write fails the epoch compare, changes nothing, and it steps down.
TEST_F(ControllerTest, ADeposedControllerChangesNothing) {
  auto a = make(1), b = make(2);
  ASSERT_TRUE(a->campaign(register_broker(1)).value());
  const int64_t lb = register_broker(2);
  sync();
  const metadata_image before = img_;  // what the paused controller last saw
  clock_.advance_ms(6'000);
  ASSERT_GT(etcd_.lease_keepalive_once(lb, 0).value(), 0);  // broker 2 stays alive
  clock_.advance_ms(5'000);
  etcd_.expire_leases();  // broker 1's lease ran out
  ASSERT_TRUE(b->campaign(lb).value());
  EXPECT_GT(b->epoch(), a->epoch());
  auto r = a->create_topic(before, "t", 1, 1, nullptr, {});
  EXPECT_EQ(r.code(), errc::not_controller);
  EXPECT_FALSE(a->active());
  sync();
  EXPECT_EQ(img_.topic("t"), nullptr);
  EXPECT_TRUE(img_.partitions_of("t").empty());
  // The new controller writes.
  ASSERT_TRUE(b->create_topic(img_, "t", 1, 1, nullptr, {}).ok());
}

TEST_F(ControllerTest, CreateTopicPlacesReplicasAndStartsEachPartitionLedByItsPreferredReplica) {
  auto c = controller_of(3);
  auto t = c->create_topic(img_, "orders", 3, 3, nullptr, {{"retention.ms", "1000"}});
  ASSERT_TRUE(t.ok()) << t.err().message;
  sync();
  const topic_entry* te = img_.topic("orders");
  ASSERT_NE(te, nullptr);
  EXPECT_EQ(te->record, *t);
  EXPECT_EQ(te->record.assignment, (std::vector<partition_assignment>{{0, 1, 2}, {1, 2, 0}, {2, 0, 1}}));
  EXPECT_EQ(te->record.configs.at("retention.ms"), "1000");
  for (int32_t p = 0; p < 3; ++p) {
    const partition_entry* pe = img_.partition("orders", p);
    ASSERT_NE(pe, nullptr);
    EXPECT_EQ(pe->record.topic, t->id);
    EXPECT_EQ(pe->record.state, (partition_state{p, 0, te->record.assignment[p], 0}));
  }
  EXPECT_EQ(c->create_topic(img_, "orders", 1, 1, nullptr, {}).code(), errc::already_exists);
  EXPECT_EQ(c->create_topic(img_, "big", 1, 4, nullptr, {}).code(), errc::invalid_replication_factor);
  std::vector<manual_assignment> bad{{0, {0, 7}}};
  EXPECT_EQ(c->create_topic(img_, "m", 1, -1, &bad, {}).code(), errc::invalid_replica_assignment);
  std::vector<manual_assignment> good{{0, {2, 1}}, {1, {1, 0}}};
  ASSERT_TRUE(c->create_topic(img_, "m", 2, -1, &good, {}).ok());
  sync();
  EXPECT_EQ(img_.topic("m")->record.assignment, (std::vector<partition_assignment>{{2, 1}, {1, 0}}));
  EXPECT_EQ(state("m", 0).leader, 2);
}

// More partitions than one etcd transaction may write go in chunks, the
// topic record last.
TEST_F(ControllerTest, ALargeTopicIsWrittenInChunks) {
  auto c = controller_of(1);
  const int64_t before = etcd_.revision();
  ASSERT_TRUE(c->create_topic(img_, "wide", 450, 1, nullptr, {}).ok());
  EXPECT_GE(etcd_.revision() - before, 6);  // 5 chunks of partitions, then the topic
  sync();
  EXPECT_EQ(img_.partitions_of("wide").size(), 450u);
  ASSERT_TRUE(c->add_partitions(img_, "wide", 460, nullptr).ok());
  sync();
  EXPECT_EQ(img_.topic("wide")->record.assignment.size(), 460u);
  EXPECT_EQ(img_.partitions_of("wide").size(), 460u);
  EXPECT_EQ(c->add_partitions(img_, "wide", 400, nullptr).code(), errc::invalid_partitions);
  ASSERT_TRUE(c->delete_topic(img_, "wide").ok());
  sync();
  EXPECT_EQ(img_.topic("wide"), nullptr);
  EXPECT_TRUE(img_.partitions_of("wide").empty());
  EXPECT_EQ(c->delete_topic(img_, "wide").code(), errc::not_found);
}

TEST_F(ControllerTest, ABrokersDeathMovesItsLeadershipsToTheNextInSyncReplica) {
  auto c = controller_of(3);
  ASSERT_TRUE(c->create_topic(img_, "t", 3, 3, nullptr, {}).ok());
  kill_broker(1);
  sync();
  auto r = c->elect_after_broker_change(img_, [](const std::string&) { return false; });
  ASSERT_TRUE(r.ok()) << r.err().message;
  EXPECT_EQ(r->changed, 3);  // every ISR shrinks; one leader moves
  EXPECT_EQ(r->clean, 1);
  EXPECT_EQ(state("t", 1), (partition_state{2, 1, {2, 0}, 1}));
  EXPECT_EQ(state("t", 0), (partition_state{0, 0, {0, 2}, 1}));
  // Nothing more to decide: no write.
  const int64_t rev = etcd_.revision();
  ASSERT_EQ(c->elect_after_broker_change(img_, nullptr)->changed, 0);
  EXPECT_EQ(etcd_.revision(), rev);
  // With every replica of a partition gone, it is offline; its last ISR stays.
  kill_broker(2);
  sync();
  ASSERT_TRUE(c->elect_after_broker_change(img_, nullptr).ok());
  EXPECT_EQ(state("t", 1).leader, 0);
}

// A leader's ISR change that adds a member holds only while that member's
// registration is the one it fetched with (KIP-903): after the broker
// registered again, the old process's word adds nothing.
TEST_F(ControllerTest, AnIsrAdditionNeedsTheBrokerEpochOfTheCurrentRegistration) {
  auto c = controller_of(3);
  ASSERT_TRUE(c->create_topic(img_, "t", 1, 3, nullptr, {}).ok());
  kill_broker(2);
  sync();
  ASSERT_TRUE(c->elect_after_broker_change(img_, nullptr).ok());
  partition_state s = state("t", 0);
  ASSERT_EQ(std::count(s.isr.begin(), s.isr.end(), 2), 0);
  // Broker 2 is back: its registration's mod revision is its epoch.
  register_broker(2);
  sync();
  const int64_t epoch2 = img_.brokers().at(2).mod_revision;
  std::vector<int32_t> grown = s.isr;
  grown.push_back(2);
  // Without an epoch, or with another registration's, nothing is written.
  EXPECT_EQ(write_isr_change(etcd_, img_, "t", 0, s.leader, s.leader_epoch, s.partition_epoch, grown, {}).code(),
            errc::ineligible_replica);
  EXPECT_EQ(write_isr_change(etcd_, img_, "t", 0, s.leader, s.leader_epoch, s.partition_epoch, grown,
                             {{2, epoch2 - 1}})
                .code(),
            errc::invalid_update_version);
  EXPECT_EQ(state("t", 0).isr, s.isr);
  // With the current one it is.
  ASSERT_TRUE(write_isr_change(etcd_, img_, "t", 0, s.leader, s.leader_epoch, s.partition_epoch, grown,
                               {{2, epoch2}})
                  .ok());
  EXPECT_EQ(state("t", 0).isr, grown);
  // A shrink adds nobody and needs no epoch.
  s = state("t", 0);
  ASSERT_TRUE(write_isr_change(etcd_, img_, "t", 0, s.leader, s.leader_epoch, s.partition_epoch, {s.leader}, {})
                  .ok());
  EXPECT_EQ(state("t", 0).isr, std::vector<int32_t>{s.leader});
}

// Counts the transactions a test's code sends to the fake etcd.
class counting_etcd final : public etcd::client {
 public:
  explicit counting_etcd(etcd::client& to) : to_(to) {}
  result<etcd::range_result> range(const etcd::key_range& k, etcd::range_options o) override {
    return to_.range(k, o);
  }
  result<etcd::put_result> put(const std::string& k, const std::string& v, etcd::put_options o) override {
    return to_.put(k, v, o);
  }
  result<etcd::delete_result> delete_range(const etcd::key_range& k, bool prev) override {
    return to_.delete_range(k, prev);
  }
  result<etcd::txn_result> txn(const etcd::txn_request& r) override {
    ++txns;
    max_compares = std::max(max_compares, r.compares.size());
    max_else_ops = std::max(max_else_ops, r.else_ops.size());
    return to_.txn(r);
  }
  result<etcd::lease_grant_result> lease_grant(int64_t ttl) override { return to_.lease_grant(ttl); }
  result<int64_t> lease_keepalive_once(int64_t id, int64_t budget) override {
    return to_.lease_keepalive_once(id, budget);
  }
  result<int64_t> lease_time_to_live(int64_t id) override { return to_.lease_time_to_live(id); }
  status lease_revoke(int64_t id) override { return to_.lease_revoke(id); }
  result<std::unique_ptr<etcd::watch_handle>> watch(const etcd::key_range& k, int64_t rev,
                                                    etcd::watch_callback cb) override {
    return to_.watch(k, rev, std::move(cb));
  }
  result<std::vector<etcd::endpoint_status>> endpoints_status() override { return to_.endpoints_status(); }

  size_t txns = 0, max_compares = 0, max_else_ops = 0;

 private:
  etcd::client& to_;
};

// A restarted follower of many partitions comes back into each ISR through
// a batch of changes: they reach etcd a transaction per batch, not one per
// partition (issue 31, item 9), within etcd's limit on operations.
TEST_F(ControllerTest, ManyIsrAdditionsGoToEtcdInFewTransactions) {
  auto c = controller_of(3);
  ASSERT_TRUE(c->create_topic(img_, "t", 250, 3, nullptr, {}).ok());
  kill_broker(2);
  sync();
  ASSERT_TRUE(c->elect_after_broker_change(img_, nullptr).ok());
  register_broker(2);
  sync();
  const int64_t epoch2 = img_.brokers().at(2).mod_revision;
  std::map<int32_t, std::vector<isr_change>> by_leader;
  for (int32_t p = 0; p < 250; ++p) {
    const partition_state s = img_.partition("t", p)->record.state;
    ASSERT_EQ(std::count(s.isr.begin(), s.isr.end(), 2), 0);
    std::vector<int32_t> grown = s.isr;
    grown.push_back(2);
    by_leader[s.leader].push_back({"t", p, s.leader_epoch, s.partition_epoch, grown, {{2, epoch2}}});
  }
  ASSERT_EQ(by_leader.size(), 2u);  // brokers 0 and 1 lead every partition now
  for (const auto& [leader, changes] : by_leader) {
    counting_etcd counted(etcd_);
    // Two compares per addition (the record, broker 2's epoch): 10 a txn.
    const auto results = write_isr_changes(counted, img_, leader, changes, 20);
    for (const auto& r : results) EXPECT_TRUE(r.ok()) << r.err().message;
    EXPECT_LE(counted.txns, (changes.size() + 9) / 10);
    EXPECT_LE(counted.max_compares, 20u);
    EXPECT_LE(counted.max_else_ops, 20u);
  }
  sync();
  for (int32_t p = 0; p < 250; ++p) EXPECT_EQ(state("t", p).isr.size(), 3u) << p;
}

// One change of a batch that is refused, for a stale partition epoch, for a
// record that moved since the image was read, or for an added member's
// stale broker epoch (KIP-903, per member), sinks none of the others.
TEST_F(ControllerTest, ARefusedIsrChangeInABatchDoesNotSinkTheOthers) {
  auto c = controller_of(3);
  ASSERT_TRUE(c->create_topic(img_, "t", 6, 3, nullptr, {}).ok());
  kill_broker(2);
  sync();
  ASSERT_TRUE(c->elect_after_broker_change(img_, nullptr).ok());
  register_broker(2);
  sync();
  const int64_t epoch2 = img_.brokers().at(2).mod_revision;
  const metadata_image read = img_;  // what the leader decides over
  // Partition 3 moves in etcd after the leader read it (a shrink by its
  // leader through another path).
  const partition_state s3 = read.partition("t", 3)->record.state;
  ASSERT_TRUE(write_isr_change(etcd_, img_, "t", 3, s3.leader, s3.leader_epoch, s3.partition_epoch,
                               {s3.leader}, {})
                  .ok());
  std::vector<isr_change> changes;
  const int32_t leader = read.partition("t", 0)->record.state.leader;
  std::vector<int32_t> mine;
  for (int32_t p = 0; p < 6; ++p) {
    const partition_state s = read.partition("t", p)->record.state;
    if (s.leader != leader) continue;
    std::vector<int32_t> grown = s.isr;
    grown.push_back(2);
    changes.push_back({"t", p, s.leader_epoch, s.partition_epoch, grown, {{2, epoch2}}});
    mine.push_back(p);
  }
  ASSERT_GE(changes.size(), 3u);
  // Of this leader's: a stale partition epoch, a stale broker epoch.
  changes[0].partition_epoch -= 1;
  changes[1].added_broker_epochs[2] = epoch2 - 1;
  const bool moved_is_mine = std::find(mine.begin(), mine.end(), 3) != mine.end();
  counting_etcd counted(etcd_);
  const auto results = write_isr_changes(counted, read, leader, changes);
  ASSERT_EQ(results.size(), changes.size());
  EXPECT_EQ(results[0].code(), errc::invalid_update_version);
  EXPECT_EQ(results[1].code(), errc::invalid_update_version);
  sync();
  EXPECT_EQ(state("t", mine[0]).isr.size(), 2u);
  EXPECT_EQ(state("t", mine[1]).isr.size(), 2u);
  for (size_t i = 2; i < changes.size(); ++i) {
    if (mine[i] == 3) {
      EXPECT_EQ(results[i].code(), errc::invalid_update_version);
      continue;
    }
    EXPECT_TRUE(results[i].ok()) << mine[i] << ": " << results[i].err().message;
    EXPECT_EQ(state("t", mine[i]).isr.size(), 3u) << mine[i];
  }
  // The refusals cost one transaction more, not one per change.
  EXPECT_LE(counted.txns, 2u + (moved_is_mine ? 1u : 0u));
}

TEST_F(ControllerTest, ControlledShutdownAndPreferredElection) {
  auto c = controller_of(3);
  ASSERT_TRUE(c->create_topic(img_, "t", 3, 3, nullptr, {}).ok());
  sync();
  auto r = c->controlled_shutdown(img_, 2);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(state("t", 2).leader, 0);
  EXPECT_EQ(state("t", 2).isr, (std::vector<int32_t>{0, 1}));
  // Broker 2 is back in sync (as an ISR change would write) and the
  // preferred election gives it its partition back.
  {
    const partition_entry* pe = img_.partition("t", 2);
    partition_record back = pe->record;
    back.state = apply_isr_change(back.state, {0, 1, 2});
    ASSERT_TRUE(etcd_.put(keys_.partition("t", 2), encode(back)).ok());
  }
  sync();
  r = c->elect_preferred(img_, {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->changed, 1);
  EXPECT_EQ(state("t", 2).leader, 2);
}

// unclean.leader.election.enable as the controller reads it: the topic's
// own config, else the cluster-wide dynamic default, else the static one.
TEST_F(ControllerTest, UncleanElectionIsReadFromTheTopicThenTheClusterDefaultThenTheStaticSetting) {
  auto c = controller_of(1);
  ASSERT_TRUE(c->create_topic(img_, "plain", 1, 1, nullptr, {}).ok());
  ASSERT_TRUE(c->create_topic(img_, "on", 1, 1, nullptr, {{"unclean.leader.election.enable", "true"}}).ok());
  ASSERT_TRUE(c->create_topic(img_, "off", 1, 1, nullptr, {{"unclean.leader.election.enable", "false"}}).ok());
  sync();
  EXPECT_FALSE(unclean_election_enabled(img_, "plain", false));
  EXPECT_TRUE(unclean_election_enabled(img_, "plain", true));
  EXPECT_TRUE(unclean_election_enabled(img_, "on", false));
  EXPECT_FALSE(unclean_election_enabled(img_, "off", true));
  EXPECT_FALSE(unclean_election_enabled(img_, "absent", false));
  // The cluster-wide default beats the static setting, never a topic's own.
  ASSERT_TRUE(c->set_broker_configs(img_, {{"unclean.leader.election.enable", "true"}}).ok());
  sync();
  EXPECT_TRUE(unclean_election_enabled(img_, "plain", false));
  EXPECT_TRUE(unclean_election_enabled(img_, "absent", false));
  EXPECT_FALSE(unclean_election_enabled(img_, "off", false));
  ASSERT_TRUE(c->set_broker_configs(img_, {{"unclean.leader.election.enable", "false"}}).ok());
  sync();
  EXPECT_FALSE(unclean_election_enabled(img_, "plain", true));
  EXPECT_TRUE(unclean_election_enabled(img_, "on", false));
  // Other cluster-wide defaults leave it to the static setting.
  ASSERT_TRUE(c->set_broker_configs(img_, {{"log.retention.ms", "1000"}}).ok());
  sync();
  EXPECT_TRUE(unclean_election_enabled(img_, "plain", true));
}

TEST_F(ControllerTest, ElectionsAreDueOnBrokerControllerTopicAndDefaultConfigChanges) {
  using kind = key_layout::parsed::kind;
  EXPECT_FALSE(elections_due({}));
  EXPECT_FALSE(elections_due({{kind::partition, "t", 0, false}, {kind::cluster_id, {}, -1, false}}));
  EXPECT_FALSE(elections_due({{kind::topic, "t", -1, true}}));  // deleted: nothing left to elect
  EXPECT_TRUE(elections_due({{kind::broker, {}, 3, true}}));
  EXPECT_TRUE(elections_due({{kind::broker, {}, 3, false}}));
  EXPECT_TRUE(elections_due({{kind::controller, {}, -1, false}}));
  EXPECT_TRUE(elections_due({{kind::partition, "t", 0, false}, {kind::topic, "t", -1, false}}));
  EXPECT_TRUE(elections_due({{kind::broker_configs, {}, -1, false}}));
  EXPECT_TRUE(elections_due({{kind::broker_configs, {}, -1, true}}));
}

// An offline partition whose only live replica is out of the ISR stays
// offline while unclean election is off, and is elected uncleanly by the
// next election pass once its topic (or the cluster-wide default) turns
// it on; no broker came or went in between.
TEST_F(ControllerTest, TurningUncleanElectionOnElectsAnOfflinePartitionWithoutABrokerChange) {
  auto c = controller_of(3);
  const std::vector<manual_assignment> manual{{0, {1, 2}}};
  ASSERT_TRUE(c->create_topic(img_, "t", 1, 2, &manual, {}).ok());
  ASSERT_TRUE(c->create_topic(img_, "u", 1, 2, &manual, {}).ok());
  sync();
  // Broker 2 fell out of both ISRs (as broker 1's AlterPartition writes it).
  for (const char* t : {"t", "u"}) {
    partition_record r = img_.partition(t, 0)->record;
    r.state = apply_isr_change(r.state, {1});
    ASSERT_TRUE(etcd_.put(keys_.partition(t, 0), encode(r)).ok());
  }
  kill_broker(1);
  sync();
  auto policy = [&](const std::string& topic) { return unclean_election_enabled(img_, topic, false); };
  auto r = c->elect_after_broker_change(img_, policy);
  ASSERT_TRUE(r.ok()) << r.err().message;
  EXPECT_EQ(r->offline, 2);
  EXPECT_EQ(state("t", 0), (partition_state{-1, 1, {1}, 2}));
  // Nothing changes on a pass while unclean election stays off.
  ASSERT_EQ(c->elect_after_broker_change(img_, policy)->changed, 0);

  ASSERT_TRUE(c->set_topic_configs(img_, "t", {{"unclean.leader.election.enable", "true"}}).ok());
  sync();
  r = c->elect_after_broker_change(img_, policy);
  ASSERT_TRUE(r.ok()) << r.err().message;
  EXPECT_EQ(r->changed, 1);
  EXPECT_EQ(r->unclean, 1);
  EXPECT_EQ(state("t", 0), (partition_state{2, 2, {2}, 3}));
  EXPECT_EQ(state("u", 0).leader, -1);
  EXPECT_EQ(c->unclean_elections_total(), 1u);

  ASSERT_TRUE(c->set_broker_configs(img_, {{"unclean.leader.election.enable", "true"}}).ok());
  sync();
  r = c->elect_after_broker_change(img_, policy);
  ASSERT_TRUE(r.ok()) << r.err().message;
  EXPECT_EQ(r->unclean, 1);
  EXPECT_EQ(state("u", 0), (partition_state{2, 2, {2}, 3}));
  EXPECT_EQ(c->unclean_elections_total(), 2u);
}

// Elections an operator asks for (ElectLeaders): each partition's outcome,
// and only the partitions that change are written.
TEST_F(ControllerTest, RequestedElectionsSayWhyAPartitionDoesNotChange) {
  auto c = controller_of(3);
  // p0 prefers 1 (then 0), p1 prefers 2 (then 1), p2 prefers 0 (then 1).
  const std::vector<manual_assignment> manual{{0, {1, 0}}, {1, {2, 1}}, {2, {0, 1}}};
  ASSERT_TRUE(c->create_topic(img_, "t", 3, 2, &manual, {}).ok());
  sync();
  using parts = std::vector<std::pair<std::string, int32_t>>;
  const parts asked{{"t", 0}, {"t", 2}, {"t", 7}, {"nope", 0}};
  auto r = c->elect_on_request(img_, requested_election::preferred, &asked);
  ASSERT_TRUE(r.ok()) << r.err().message;
  ASSERT_EQ(r->outcomes.size(), 4u);
  EXPECT_EQ(r->outcomes[0].result.code(), errc::election_not_needed);
  EXPECT_EQ(r->outcomes[1].result.code(), errc::election_not_needed);
  EXPECT_EQ(r->outcomes[2].result.code(), errc::not_found);
  EXPECT_EQ(r->outcomes[3].result.code(), errc::not_found);
  EXPECT_EQ(r->report.changed, 0);

  // Broker 1 dies: p0 moves to 0 and 1 leaves the ISR; back, it is live but
  // out of sync, so its preferred election is refused.
  kill_broker(1);
  sync();
  ASSERT_TRUE(c->elect_after_broker_change(img_, nullptr).ok());
  EXPECT_EQ(state("t", 0), (partition_state{0, 1, {0}, 1}));
  register_broker(1);
  sync();
  const parts p0{{"t", 0}};
  r = c->elect_on_request(img_, requested_election::preferred, &p0);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->outcomes[0].result.code(), errc::preferred_leader_not_available);
  // Once in sync again (as an ISR change would write), it is elected.
  {
    partition_record back = img_.partition("t", 0)->record;
    back.state = apply_isr_change(back.state, {0, 1});
    ASSERT_TRUE(etcd_.put(keys_.partition("t", 0), encode(back)).ok());
  }
  sync();
  r = c->elect_on_request(img_, requested_election::preferred, nullptr);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->report.clean, 1);
  EXPECT_EQ(state("t", 0).leader, 1);

  // p1's only in-sync replica (2) dies while 1 is away: offline, as the
  // topic does not allow unclean elections. Broker 1 comes back out of sync.
  kill_broker(1);
  sync();
  ASSERT_TRUE(c->elect_after_broker_change(img_, nullptr).ok());
  EXPECT_EQ(state("t", 1).isr, (std::vector<int32_t>{2}));
  kill_broker(2);
  sync();
  ASSERT_TRUE(c->elect_after_broker_change(img_, nullptr).ok());
  EXPECT_EQ(state("t", 1).leader, partition_state::no_leader);
  const parts p1{{"t", 1}};
  r = c->elect_on_request(img_, requested_election::unclean, &p1);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->outcomes[0].result.code(), errc::eligible_leaders_not_available);
  register_broker(1);
  sync();
  ASSERT_TRUE(c->elect_after_broker_change(img_, nullptr).ok());
  EXPECT_EQ(state("t", 1).leader, partition_state::no_leader);  // clean: 1 is out of sync
  r = c->elect_on_request(img_, requested_election::unclean, &p1);
  ASSERT_TRUE(r.ok()) << r.err().message;
  EXPECT_TRUE(r->outcomes[0].result.ok());
  EXPECT_EQ(r->report.unclean, 1);
  const partition_state now = state("t", 1);
  EXPECT_EQ(now.leader, 1);
  EXPECT_EQ(now.isr, (std::vector<int32_t>{1}));
  // A live in-sync leader needs no election, clean or not.
  r = c->elect_on_request(img_, requested_election::unclean, &p1);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->outcomes[0].result.code(), errc::election_not_needed);
  // What /metrics counts: every leader written, clean or not.
  EXPECT_EQ(c->unclean_elections_total(), 1u);
  EXPECT_EQ(c->clean_elections_total(), 3u);  // p0 to 0, back to 1, to 0 again
}

// A decision over an image older than etcd is refused, not written over.
TEST_F(ControllerTest, AStaleImageIsRefused) {
  auto c = make(0);
  for (int32_t id = 0; id < 2; ++id) register_broker(id);
  ASSERT_TRUE(c->campaign(leases_[0]).value());
  sync();
  ASSERT_TRUE(c->create_topic(img_, "t", 1, 2, nullptr, {}).ok());
  sync();
  const metadata_image old = img_;
  ASSERT_TRUE(c->set_topic_configs(img_, "t", {{"retention.ms", "5"}}).ok());
  EXPECT_EQ(c->set_topic_configs(old, "t", {{"retention.ms", "6"}}).code(), errc::invalid_update_version);
  EXPECT_TRUE(c->active());
  sync();
  EXPECT_EQ(img_.topic("t")->record.configs.at("retention.ms"), "5");
  ASSERT_TRUE(c->set_broker_configs(img_, {{"log.retention.ms", "7"}}).ok());
  EXPECT_EQ(c->set_broker_configs(img_, {{"log.retention.ms", "8"}}).code(), errc::invalid_update_version);
  sync();
  EXPECT_EQ(img_.broker_configs()->configs.at("log.retention.ms"), "7");
}

// A group's configs: one record per group, written and deleted by the
// controller over the image's revision of it.
TEST_F(ControllerTest, GroupConfigsAreOneRecordPerGroup) {
  auto c = make(0);
  register_broker(0);
  ASSERT_TRUE(c->campaign(leases_[0]).value());
  sync();
  ASSERT_TRUE(c->set_group_configs(img_, "g/1", {{"share.delivery.count.limit", "3"}}).ok());
  sync();
  ASSERT_NE(img_.group_configs("g/1"), nullptr);
  EXPECT_EQ(img_.group_configs("g/1")->record.configs.at("share.delivery.count.limit"), "3");
  const metadata_image old = img_;
  ASSERT_TRUE(c->set_group_configs(img_, "g/1", {{"share.delivery.count.limit", "4"}}).ok());
  EXPECT_EQ(c->set_group_configs(old, "g/1", {{"share.delivery.count.limit", "5"}}).code(),
            errc::invalid_update_version);
  // Two creations of one group over the same image: the second finds it there.
  EXPECT_EQ(c->set_group_configs(old, "g/2", {{"share.isolation.level", "read_committed"}}).code(), errc::ok);
  EXPECT_EQ(c->set_group_configs(old, "g/2", {{"share.isolation.level", "read_uncommitted"}}).code(),
            errc::invalid_update_version);
  sync();
  EXPECT_EQ(img_.group_configs().size(), 2u);
  EXPECT_EQ(img_.group_configs("g/1")->record.configs.at("share.delivery.count.limit"), "4");
  ASSERT_TRUE(c->set_group_configs(img_, "g/1", {}).ok());
  ASSERT_TRUE(c->set_group_configs(img_, "never", {}).ok());  // nothing to delete
  sync();
  EXPECT_EQ(img_.group_configs("g/1"), nullptr);
  EXPECT_EQ(img_.group_configs().size(), 1u);
}

// A creation cut short between its partition chunks and its topic record
// leaves orphans; the next controller removes them, and nothing of its own.
TEST_F(ControllerTest, OrphanPartitionRecordsAreRemovedByTheNextController) {
  register_broker(0);
  partition_record orphan{new_topic_id(), {0, 0, {0}, 0}};
  ASSERT_TRUE(etcd_.put(keys_.partition("gone", 0), encode(orphan)).ok());
  auto c = make(0);
  ASSERT_TRUE(c->campaign(leases_[0]).value());
  sync();
  ASSERT_TRUE(c->create_topic(img_, "kept", 1, 1, nullptr, {}).ok());
  sync();
  EXPECT_EQ(c->remove_orphans(img_).value(), 1);
  sync();
  EXPECT_EQ(img_.partition("gone", 0), nullptr);
  EXPECT_NE(img_.partition("kept", 0), nullptr);
}

// etcd applied a write but the answer was lost (a member died with it):
// the controller's writes are safe to repeat, so the client tries again.
// A repeated partition chunk changes nothing; a repeated topic record fails
// its compare and reports the record moved, while the image shows the
// topic created: the caller's retry then finds it exists.
TEST_F(ControllerTest, AnAmbiguousWriteIsRepeatedSafely) {
  register_broker(0);
  auto c = make(0);
  ASSERT_TRUE(c->campaign(leases_[0]).value());
  sync();
  etcd_.apply_then_fail_next(1);  // the partition chunk
  ASSERT_TRUE(c->create_topic(img_, "t", 1, 1, nullptr, {}).ok());
  sync();
  ASSERT_NE(img_.topic("t"), nullptr);
  EXPECT_EQ(img_.partitions_of("t").size(), 1u);

  etcd_.apply_then_fail_next(2);  // the chunk, then the topic record
  EXPECT_EQ(c->create_topic(img_, "u", 1, 1, nullptr, {}).code(), errc::invalid_update_version);
  EXPECT_TRUE(c->active());
  sync();
  EXPECT_NE(img_.topic("u"), nullptr);
  EXPECT_EQ(c->create_topic(img_, "u", 1, 1, nullptr, {}).code(), errc::already_exists);

  etcd_.set_unavailable(true);
  EXPECT_EQ(c->create_topic(img_, "v", 1, 1, nullptr, {}).code(), errc::unavailable);
  etcd_.set_unavailable(false);
  sync();
  EXPECT_EQ(img_.topic("v"), nullptr);
  ASSERT_TRUE(c->create_topic(img_, "v", 1, 1, nullptr, {}).ok());
}

// The image a broker builds by applying the watch equals a fresh read.
TEST_F(ControllerTest, TheWatchedImageEqualsAFreshRead) {
  metadata_image watched(keys_);
  std::vector<std::string> errors;
  auto w = etcd_.watch(etcd::key_range::prefix(keys_.prefix()), 1, [&](const etcd::watch_update& u) {
    for (const auto& ev : u.events) {
      auto r = watched.apply(ev);
      if (!r.ok()) errors.push_back(r.err().message);
    }
  });
  ASSERT_TRUE(w.ok());
  auto c = controller_of(3);
  ASSERT_TRUE(c->create_topic(img_, "a", 4, 2, nullptr, {}).ok());
  ASSERT_TRUE(c->create_topic(img_, "b", 2, 3, nullptr, {}).ok());
  sync();
  ASSERT_TRUE(c->delete_topic(img_, "a").ok());
  kill_broker(2);
  sync();
  ASSERT_TRUE(c->elect_after_broker_change(img_, nullptr).ok());
  sync();
  EXPECT_TRUE(errors.empty());
  EXPECT_EQ(watched.revision(), img_.revision());
  EXPECT_EQ(watched.live_brokers(), img_.live_brokers());
  ASSERT_EQ(watched.topics().size(), 1u);
  EXPECT_EQ(watched.topic("b")->record, img_.topic("b")->record);
  for (int32_t p = 0; p < 2; ++p)
    EXPECT_EQ(watched.partition("b", p)->record, img_.partition("b", p)->record);
  EXPECT_TRUE(watched.partitions_of("a").empty());
  // A damaged value is reported and left out; the rest stays.
  ASSERT_TRUE(etcd_.put(keys_.topic("c"), "garbage").ok());
  EXPECT_EQ(errors.size(), 1u);
  EXPECT_EQ(watched.topic("c"), nullptr);
  EXPECT_NE(watched.topic("b"), nullptr);
}

}  // namespace
}  // namespace sluice::controller
