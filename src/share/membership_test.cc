#include "share/membership.h"

#include <gtest/gtest.h>

namespace sluice::share {
namespace {

using kafka::error_code;

struct fixture {
  std::map<std::string, topic_info> topics;
  topic_lookup lookup() {
    return [this](const std::string& n) -> std::optional<topic_info> {
      auto it = topics.find(n);
      if (it == topics.end()) return std::nullopt;
      return it->second;
    };
  }
};

topic_id id_of(uint8_t b) {
  topic_id t{};
  t[15] = b;
  return t;
}

heartbeat_request join(const std::string& group, const std::string& member, std::vector<std::string> topics) {
  heartbeat_request r;
  r.group_id = group;
  r.member_id = member;
  r.member_epoch = 0;
  r.subscribed_topic_names = std::move(topics);
  return r;
}

heartbeat_request beat(const std::string& group, const std::string& member, int32_t epoch) {
  heartbeat_request r;
  r.group_id = group;
  r.member_id = member;
  r.member_epoch = epoch;
  return r;
}

TEST(SimpleAssign, FewerMembersThanPartitionsSplitsThem) {
  auto a = simple_assign({"a", "b"}, 5);
  EXPECT_EQ(a["a"], (std::vector<int32_t>{0, 2, 4}));
  EXPECT_EQ(a["b"], (std::vector<int32_t>{1, 3}));
}

TEST(SimpleAssign, MoreMembersThanPartitionsShareThem) {
  auto a = simple_assign({"a", "b", "c"}, 1);
  for (auto m : {"a", "b", "c"}) EXPECT_EQ(a[m], (std::vector<int32_t>{0}));
  a = simple_assign({"a", "b", "c", "d", "e"}, 2);
  EXPECT_EQ(a["a"], (std::vector<int32_t>{0}));
  EXPECT_EQ(a["b"], (std::vector<int32_t>{1}));
  EXPECT_EQ(a["e"], (std::vector<int32_t>{0}));
  EXPECT_TRUE(simple_assign({}, 3).empty());
}

TEST(ShareGroups, JoinAssignsAndEpochsFollowTheGroup) {
  fixture f;
  f.topics["t"] = {id_of(1), 2};
  share_groups g({});
  auto a = g.heartbeat(join("g", "m1", {"t"}), f.lookup(), 0);
  ASSERT_EQ(a.error, error_code::none);
  EXPECT_EQ(a.member_id, "m1");
  EXPECT_EQ(a.member_epoch, 1);
  ASSERT_TRUE(a.assigned);
  EXPECT_EQ((*a.assigned)[id_of(1)], (std::vector<int32_t>{0, 1}));
  // A steady heartbeat sends no assignment.
  a = g.heartbeat(beat("g", "m1", 1), f.lookup(), 10);
  EXPECT_EQ(a.error, error_code::none);
  EXPECT_FALSE(a.assigned);
  // A second member: the group moves to epoch 2; m1 keeps heartbeating at
  // its epoch 1 and is told the new assignment and epoch.
  auto b = g.heartbeat(join("g", "m2", {"t"}), f.lookup(), 20);
  EXPECT_EQ(b.member_epoch, 2);
  EXPECT_EQ((*b.assigned)[id_of(1)], (std::vector<int32_t>{1}));
  a = g.heartbeat(beat("g", "m1", 1), f.lookup(), 30);
  ASSERT_EQ(a.error, error_code::none);
  EXPECT_EQ(a.member_epoch, 2);
  ASSERT_TRUE(a.assigned);
  EXPECT_EQ((*a.assigned)[id_of(1)], (std::vector<int32_t>{0}));
  // Its old epoch is now fenced.
  EXPECT_EQ(g.heartbeat(beat("g", "m1", 1), f.lookup(), 40).error, error_code::fenced_member_epoch);
  EXPECT_EQ(g.heartbeat(beat("g", "m1", 7), f.lookup(), 40).error, error_code::fenced_member_epoch);
}

TEST(ShareGroups, EmptyMemberIdGetsOneAndUnknownMembersAreToldSo) {
  fixture f;
  share_groups g({});
  auto a = g.heartbeat(join("g", "", {"t"}), f.lookup(), 0);
  ASSERT_EQ(a.error, error_code::none);
  EXPECT_FALSE(a.member_id.empty());
  EXPECT_TRUE(a.assigned && a.assigned->empty());  // the topic does not exist yet
  EXPECT_EQ(g.heartbeat(beat("g", "nobody", 1), f.lookup(), 0).error, error_code::unknown_member_id);
  EXPECT_EQ(g.heartbeat(beat("other", a.member_id, 1), f.lookup(), 0).error, error_code::unknown_member_id);
}

TEST(ShareGroups, BadRequestsAreInvalidRequest) {
  fixture f;
  share_groups g({});
  EXPECT_EQ(g.heartbeat(join("", "m", {"t"}), f.lookup(), 0).error, error_code::invalid_request);
  auto r = join("g", "m", {"t"});
  r.subscribed_topic_names.reset();
  EXPECT_EQ(g.heartbeat(r, f.lookup(), 0).error, error_code::invalid_request);
  EXPECT_EQ(g.heartbeat(beat("g", "", 3), f.lookup(), 0).error, error_code::invalid_request);
  EXPECT_EQ(g.heartbeat(beat("g", "m", -2), f.lookup(), 0).error, error_code::invalid_request);
}

TEST(ShareGroups, LeavingAndSessionExpiryReassign) {
  fixture f;
  f.topics["t"] = {id_of(1), 2};
  share_groups g(membership_settings{1000, 100, 10});
  (void)g.heartbeat(join("g", "m1", {"t"}), f.lookup(), 0);
  (void)g.heartbeat(join("g", "m2", {"t"}), f.lookup(), 0);
  // m1 is told epoch 2 (m2's join) with this heartbeat at its epoch 1.
  EXPECT_EQ(g.heartbeat(beat("g", "m1", 1), f.lookup(), 900).member_epoch, 2);
  auto dropped = g.expire(1000, f.lookup());
  EXPECT_EQ(dropped, (std::vector<std::pair<std::string, std::string>>{{"g", "m2"}}));
  auto a = g.heartbeat(beat("g", "m1", 2), f.lookup(), 1100);
  EXPECT_EQ(a.member_epoch, 3);
  EXPECT_EQ((*a.assigned)[id_of(1)], (std::vector<int32_t>{0, 1}));
  a = g.heartbeat(beat("g", "m1", -1), f.lookup(), 1200);
  EXPECT_EQ(a.error, error_code::none);
  EXPECT_EQ(a.member_epoch, -1);
  auto d = g.describe("g", f.lookup());
  ASSERT_TRUE(d);
  EXPECT_EQ(d->state, "Empty");
  EXPECT_EQ(g.heartbeat(beat("g", "m1", -1), f.lookup(), 1300).error, error_code::unknown_member_id);
  EXPECT_EQ(g.remove("g"), error_code::none);
  EXPECT_FALSE(g.exists("g"));
}

TEST(ShareGroups, MaxSizeAndNonEmptyDelete) {
  fixture f;
  share_groups g(membership_settings{1000, 100, 2});
  EXPECT_EQ(g.heartbeat(join("g", "a", {"t"}), f.lookup(), 0).error, error_code::none);
  EXPECT_EQ(g.heartbeat(join("g", "b", {"t"}), f.lookup(), 0).error, error_code::none);
  EXPECT_EQ(g.heartbeat(join("g", "c", {"t"}), f.lookup(), 0).error, error_code::group_max_size_reached);
  // A member already in rejoins even at the limit.
  EXPECT_EQ(g.heartbeat(join("g", "a", {"t"}), f.lookup(), 0).error, error_code::none);
  EXPECT_EQ(g.remove("g"), error_code::non_empty_group);
  EXPECT_EQ(g.remove("nope"), error_code::group_id_not_found);
}

TEST(ShareGroups, TopicsCreatedLaterAndSubscriptionChangesAreAssigned) {
  fixture f;
  share_groups g({});
  auto a = g.heartbeat(join("g", "m", {"later"}), f.lookup(), 0);
  EXPECT_TRUE(a.assigned->empty());
  f.topics["later"] = {id_of(2), 3};
  g.topic_changed("later", f.lookup());
  a = g.heartbeat(beat("g", "m", a.member_epoch), f.lookup(), 10);
  ASSERT_TRUE(a.assigned);
  EXPECT_EQ((*a.assigned)[id_of(2)], (std::vector<int32_t>{0, 1, 2}));
  f.topics["x"] = {id_of(3), 1};
  auto r = beat("g", "m", a.member_epoch);
  r.subscribed_topic_names = std::vector<std::string>{"x"};
  a = g.heartbeat(r, f.lookup(), 20);
  ASSERT_TRUE(a.assigned);
  EXPECT_EQ(a.assigned->size(), 1u);
  EXPECT_EQ((*a.assigned)[id_of(3)], (std::vector<int32_t>{0}));
}

TEST(ShareGroups, AdminChangesNeedAnEmptyGroupAndTopicsAreRemembered) {
  fixture f;
  share_groups g({});
  f.topics["t"] = {id_of(1), 2};
  f.topics["u"] = {id_of(2), 1};
  // An unknown group is created empty, so its offsets can be placed first.
  EXPECT_EQ(g.prepare_admin_change("new"), error_code::none);
  EXPECT_TRUE(g.exists("new"));
  EXPECT_TRUE(g.topics("new").empty());
  auto a = g.heartbeat(join("g", "m", {"t", "missing"}), f.lookup(), 0);
  EXPECT_EQ(g.prepare_admin_change("g"), error_code::non_empty_group);
  auto r = beat("g", "m", a.member_epoch);
  r.subscribed_topic_names = std::vector<std::string>{"u"};
  a = g.heartbeat(r, f.lookup(), 10);
  // Topics subscribed once stay (their share partitions keep state); a
  // name that is no topic is not remembered.
  EXPECT_EQ(g.topics("g"), (std::vector<std::string>{"t", "u"}));
  EXPECT_EQ(g.heartbeat(beat("g", "m", -1), f.lookup(), 20).error, error_code::none);
  EXPECT_EQ(g.prepare_admin_change("g"), error_code::none);
  g.forget_topic("g", "t");
  EXPECT_EQ(g.topics("g"), (std::vector<std::string>{"u"}));
}

}  // namespace
}  // namespace sluice::share
