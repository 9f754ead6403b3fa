#include "group/coordinator.h"

#include <algorithm>
#include <deque>
#include <set>

#include <gtest/gtest.h>
#include <malloc.h>

#include "base/limits.h"
#include "maintenance/compaction.h"
#include "metadata/test_managers.h"
#include "protocol/consumer_protocol.h"
#include "storage/test_util.h"

namespace sluice::group {
namespace {

using kafka::error_code;
using kafka::to_wire;
namespace proto = protocol;

// __consumer_offsets in memory. By default an append is durable at once;
// with hold = true it waits until complete_all() (or fail_all()). Each
// append is one batch at the partition's next offset (one offset per
// record); marker() writes a transaction marker after them.
class mem_log final : public record_log {
 public:
  struct rec {
    int32_t partition;
    std::vector<uint8_t> key;
    std::optional<std::vector<uint8_t>> value;
    int64_t batch_offset = -1;
    int64_t producer_id = -1;
    bool transactional = false;
    std::optional<bool> marker;
  };
  void append(int32_t p, std::vector<proto::records::record_input> records, const txn_producer* txn,
              append_done done) override {
    ++appends;
    held.push_back({p, std::move(records), txn ? std::optional<txn_producer>(*txn) : std::nullopt, std::move(done)});
    if (!hold) complete_all();
  }
  void complete_all() {
    auto h = std::move(held);
    held.clear();
    for (auto& e : h) {
      int64_t& next = next_offset[e.p];
      const int64_t base = next;
      next += static_cast<int64_t>(e.records.size());
      if (keep)
        for (auto& r : e.records)
          durable.push_back({e.p, *r.key, r.value, base, e.txn ? e.txn->producer_id : -1, e.txn.has_value(), {}});
      e.done({}, base);
    }
  }
  // Writes a COMMIT or ABORT marker of `pid` to partition `p`; returns its offset.
  int64_t marker(int32_t p, int64_t pid, bool commit) {
    const int64_t at = next_offset[p]++;
    durable.push_back({p, {}, std::nullopt, at, pid, false, commit});
    return at;
  }
  status read(int32_t p, const entry_fn& fn) override {
    ++reads;
    for (const auto& r : durable) {
      if (r.partition != p) continue;
      log_entry e;
      e.batch_offset = r.batch_offset;
      e.producer_id = r.producer_id;
      e.transactional = r.transactional;
      e.marker = r.marker;
      e.key = r.key;
      if (r.value) e.value = std::span<const uint8_t>(*r.value);
      if (!fn(e)) break;
    }
    return {};
  }
  void fail_all(errc code = errc::not_enough_replicas) {
    auto h = std::move(held);
    held.clear();
    for (auto& e : h) e.done(status(code, "the append failed"), -1);
  }
  struct entry {
    int32_t p;
    std::vector<proto::records::record_input> records;
    std::optional<txn_producer> txn;
    append_done done;
  };
  bool hold = false;
  bool keep = true;
  size_t appends = 0;
  size_t reads = 0;
  std::vector<entry> held;
  std::vector<rec> durable;
  std::map<int32_t, int64_t> next_offset;
};

template <class T>
struct slot {
  std::shared_ptr<std::optional<T>> v = std::make_shared<std::optional<T>>();
  std::function<void(T)> cb() {
    return [v = v](T r) {
      ASSERT_FALSE(v->has_value()) << "answered twice";
      *v = std::move(r);
    };
  }
  bool done() const { return v->has_value(); }
  const T& operator*() const { return **v; }
  const T* operator->() const { return &**v; }
};

coordinator_config test_config() {
  coordinator_config c;
  c.min_session_timeout_ms = 1000;
  c.max_session_timeout_ms = 60'000;
  c.max_group_size = 5;
  c.initial_rebalance_delay_ms = 0;
  c.num_partitions = 4;
  c.offsets_retention_ms = 3'600'000;
  c.offsets_retention_check_interval_ms = 1000;
  c.offsets_commit_timeout_ms = 5000;
  return c;
}

std::vector<uint8_t> subscription(std::vector<std::string> topics) {
  proto::consumer_protocol_subscription s;
  s.topics = std::move(topics);
  return proto::encode_subscription(s, 1);
}

class coordinator_test : public ::testing::Test {
 protected:
  explicit coordinator_test(coordinator_config cfg = test_config()) : cfg_(cfg) { reset(); }

  void reset() {
    c_ = std::make_unique<coordinator>(
        cfg_, log_, clk_, [this](std::function<void()> fn) { tasks_.push_back(std::move(fn)); },
        [this](const std::string& topic) { return lookup(topic); });
    c_->set_loaded();
  }

  // The broker's topic table as the coordinator sees it: every topic has
  // 100 partitions and its first id, except "missing" and the topics set
  // in topics_ (nullopt: deleted).
  static sluice::topic_id id_of(const std::string& name, uint8_t incarnation = 1) {
    sluice::topic_id id{};
    id[0] = incarnation;
    for (size_t i = 0; i < name.size() && i + 1 < id.size(); ++i) id[i + 1] = static_cast<uint8_t>(name[i]);
    return id;
  }
  std::optional<topic_ref> lookup(const std::string& name) const {
    if (auto it = topics_.find(name); it != topics_.end()) return it->second;
    if (name == "missing") return std::nullopt;
    return topic_ref{id_of(name), 100};
  }
  // Deletes `name` from the table (the coordinator hears of it only when
  // a test says so) and creates it again under a new id; returns the id
  // it had.
  sluice::topic_id recreate(const std::string& name) {
    const sluice::topic_id old = lookup(name)->id;
    topics_[name] = topic_ref{id_of(name, static_cast<uint8_t>(old[0] + 1)), 100};
    return old;
  }
  void run() {
    while (!tasks_.empty()) {
      auto f = std::move(tasks_.front());
      tasks_.pop_front();
      f();
    }
  }
  void advance(int64_t ms) {
    // Moves in tick-sized steps, as the service's timer thread would.
    for (int64_t left = ms; left > 0; left -= 100) {
      clk_.advance_ms(std::min<int64_t>(100, left));
      c_->tick();
      run();
    }
  }

  proto::join_group_request join_req(const std::string& group, const std::string& member,
                                     std::optional<std::string> instance = std::nullopt,
                                     std::vector<std::string> topics = {"t"}, int32_t session_ms = 10'000,
                                     std::string protocol = "range") {
    proto::join_group_request r;
    r.group_id = group;
    r.member_id = member;
    r.group_instance_id = std::move(instance);
    r.session_timeout_ms = session_ms;
    r.rebalance_timeout_ms = 20'000;
    r.protocol_type = "consumer";
    r.protocols.push_back({std::move(protocol), subscription(std::move(topics))});
    return r;
  }
  slot<proto::join_group_response> join(const proto::join_group_request& r, int16_t version = 5) {
    slot<proto::join_group_response> s;
    c_->join_group(r, version, "client", "/127.0.0.1", s.cb());
    run();
    return s;
  }
  // The two-step join of JoinGroup v4+: returns the member id handed out.
  std::string first_join(const std::string& group) {
    auto s = join(join_req(group, ""));
    EXPECT_TRUE(s.done());
    EXPECT_EQ(s->error_code, to_wire(error_code::member_id_required));
    return s->member_id;
  }
  slot<proto::sync_group_response> sync(const std::string& group, const std::string& member, int32_t generation,
                                        std::vector<std::pair<std::string, std::vector<uint8_t>>> assignment = {},
                                        std::optional<std::string> instance = std::nullopt) {
    proto::sync_group_request r;
    r.group_id = group;
    r.member_id = member;
    r.generation_id = generation;
    r.group_instance_id = std::move(instance);
    for (auto& [m, a] : assignment) r.assignments.push_back({m, a});
    slot<proto::sync_group_response> s;
    c_->sync_group(r, 3, s.cb());
    run();
    return s;
  }
  int16_t heartbeat(const std::string& group, const std::string& member, int32_t generation,
                    std::optional<std::string> instance = std::nullopt) {
    proto::heartbeat_request r;
    r.group_id = group;
    r.member_id = member;
    r.generation_id = generation;
    r.group_instance_id = std::move(instance);
    return c_->heartbeat(r, 3).error_code;
  }
  slot<proto::offset_commit_response> commit(const std::string& group, const std::string& member,
                                             int32_t generation, const std::string& topic, int32_t partition,
                                             int64_t offset, std::optional<std::string> metadata = "") {
    proto::offset_commit_request r;
    r.group_id = group;
    r.member_id = member;
    r.generation_id_or_member_epoch = generation;
    auto& t = r.topics.emplace_back();
    t.name = topic;
    auto& p = t.partitions.emplace_back();
    p.partition_index = partition;
    p.committed_offset = offset;
    p.committed_metadata = std::move(metadata);
    slot<proto::offset_commit_response> s;
    c_->offset_commit(r, 7, s.cb());
    run();
    return s;
  }
  int16_t commit_error(const slot<proto::offset_commit_response>& s) {
    EXPECT_TRUE(s.done());
    return s->topics.at(0).partitions.at(0).error_code;
  }
  // The committed offset of one partition, -1 if none.
  int64_t fetch(const std::string& group, const std::string& topic, int32_t partition) {
    proto::offset_fetch_request r;
    r.group_id = group;
    r.topics.emplace();
    r.topics->push_back({topic, {partition}});
    auto resp = c_->offset_fetch(r, 7);
    return resp.topics.at(0).partitions.at(0).committed_offset;
  }
  proto::describe_groups_response::described_group describe(const std::string& group) {
    proto::describe_groups_request r;
    r.groups.push_back(group);
    return c_->describe_groups(r).groups.at(0);
  }
  std::vector<int16_t> delete_groups(std::vector<std::string> ids) {
    proto::delete_groups_request r;
    r.groups_names = std::move(ids);
    slot<proto::delete_groups_response> s;
    c_->delete_groups(r, s.cb());
    run();
    EXPECT_TRUE(s.done());
    std::vector<int16_t> out;
    for (const auto& x : s->results) out.push_back(x.error_code);
    return out;
  }

  // Forms a stable group of `n` members; returns their ids (the leader first).
  std::vector<std::string> stable_group(const std::string& group, int n, int32_t* generation) {
    std::vector<std::string> ids;
    std::vector<slot<proto::join_group_response>> joins;
    for (int i = 0; i < n; ++i) ids.push_back(first_join(group));
    for (const auto& id : ids) joins.push_back(join(join_req(group, id)));
    std::string leader;
    for (auto& j : joins) {
      EXPECT_TRUE(j.done());
      EXPECT_EQ(j->error_code, 0);
      leader = j->leader;
      *generation = j->generation_id;
    }
    std::vector<std::pair<std::string, std::vector<uint8_t>>> assignment;
    for (const auto& id : ids) assignment.push_back({id, std::vector<uint8_t>(id.begin(), id.end())});
    std::vector<slot<proto::sync_group_response>> syncs;
    for (const auto& id : ids)
      if (id != leader) syncs.push_back(sync(group, id, *generation));
    for (auto& s : syncs) EXPECT_FALSE(s.done());
    auto ls = sync(group, leader, *generation, assignment);
    EXPECT_TRUE(ls.done());
    EXPECT_EQ(ls->assignment, std::vector<uint8_t>(leader.begin(), leader.end()));
    for (auto& s : syncs) EXPECT_TRUE(s.done());
    EXPECT_EQ(describe(group).group_state, "Stable");
    std::erase(ids, leader);
    ids.insert(ids.begin(), leader);
    return ids;
  }

  coordinator_config cfg_;
  manual_clock clk_;
  mem_log log_;
  std::deque<std::function<void()>> tasks_;
  std::map<std::string, std::optional<topic_ref>> topics_;
  std::unique_ptr<coordinator> c_;
};

TEST_F(coordinator_test, OneMemberJoinsSyncsAndHeartbeats) {
  std::string id = first_join("g");
  EXPECT_FALSE(id.empty());
  EXPECT_EQ(id.rfind("client-", 0), 0u);
  auto j = join(join_req("g", id));
  ASSERT_TRUE(j.done());
  EXPECT_EQ(j->error_code, 0);
  EXPECT_EQ(j->generation_id, 1);
  EXPECT_EQ(j->leader, id);
  EXPECT_EQ(j->protocol_name, "range");
  ASSERT_EQ(j->members.size(), 1u);
  EXPECT_EQ(j->members[0].metadata, subscription({"t"}));
  EXPECT_EQ(describe("g").group_state, "CompletingRebalance");
  EXPECT_EQ(heartbeat("g", id, 1), 0);
  auto s = sync("g", id, 1, {{id, {7, 7}}});
  ASSERT_TRUE(s.done());
  EXPECT_EQ(s->error_code, 0);
  EXPECT_EQ(s->assignment, (std::vector<uint8_t>{7, 7}));
  auto d = describe("g");
  EXPECT_EQ(d.group_state, "Stable");
  EXPECT_EQ(d.protocol_type, "consumer");
  EXPECT_EQ(d.protocol_data, "range");
  ASSERT_EQ(d.members.size(), 1u);
  EXPECT_EQ(d.members[0].member_assignment, (std::vector<uint8_t>{7, 7}));
  EXPECT_EQ(heartbeat("g", id, 1), 0);
  // A repeated SyncGroup in Stable gives the same assignment.
  auto again = sync("g", id, 1);
  EXPECT_EQ(again->assignment, (std::vector<uint8_t>{7, 7}));
}

TEST_F(coordinator_test, OldJoinVersionsGetAnIdAtOnce) {
  auto j = join(join_req("g", ""), 3);
  ASSERT_TRUE(j.done());
  EXPECT_EQ(j->error_code, 0);
  EXPECT_FALSE(j->member_id.empty());
  EXPECT_EQ(j->leader, j->member_id);
}

TEST_F(coordinator_test, JoinWaitsForEveryKnownMemberAndHeartbeatsSignalTheRebalance) {
  int32_t gen = 0;
  auto ids = stable_group("g", 2, &gen);
  EXPECT_EQ(gen, 1);
  // A third member joins: the group rebalances.
  std::string third = first_join("g");
  auto j3 = join(join_req("g", third));
  EXPECT_FALSE(j3.done());
  EXPECT_EQ(describe("g").group_state, "PreparingRebalance");
  EXPECT_EQ(heartbeat("g", ids[0], gen), to_wire(error_code::rebalance_in_progress));
  EXPECT_EQ(heartbeat("g", ids[1], gen), to_wire(error_code::rebalance_in_progress));
  auto j0 = join(join_req("g", ids[0]));
  EXPECT_FALSE(j0.done());
  auto j1 = join(join_req("g", ids[1]));
  ASSERT_TRUE(j0.done() && j1.done() && j3.done());
  EXPECT_EQ(j0->generation_id, 2);
  // The leader stays the leader and alone receives the members' metadata.
  EXPECT_EQ(j0->leader, ids[0]);
  EXPECT_EQ(j0->members.size(), 3u);
  EXPECT_TRUE(j1->members.empty());
  EXPECT_TRUE(j3->members.empty());
  // The old generation is refused.
  EXPECT_EQ(heartbeat("g", ids[1], 1), to_wire(error_code::illegal_generation));
  EXPECT_EQ(sync("g", ids[1], 1)->error_code, to_wire(error_code::illegal_generation));
}

TEST_F(coordinator_test, ProtocolChosenAmongThoseEveryMemberSupports) {
  auto a = first_join("g");
  auto b = first_join("g");
  auto ra = join_req("g", a);
  ra.protocols.insert(ra.protocols.begin(), {"cooperative-sticky", subscription({"t"})});
  auto rb = join_req("g", b);
  rb.protocols.push_back({"roundrobin", subscription({"t"})});
  auto ja = join(ra);
  auto jb = join(rb);
  ASSERT_TRUE(ja.done() && jb.done());
  EXPECT_EQ(ja->protocol_name, "range");
  // A member with no protocol in common, or another protocol type, is refused.
  auto bad = join(join_req("g", "", std::nullopt, {"t"}, 10'000, "sticky"));
  EXPECT_EQ(bad->error_code, to_wire(error_code::inconsistent_group_protocol));
  auto other_type = join_req("g", "");
  other_type.protocol_type = "connect";
  EXPECT_EQ(join(other_type)->error_code, to_wire(error_code::inconsistent_group_protocol));
}

TEST_F(coordinator_test, InvalidRequestsGetTheirErrors) {
  EXPECT_EQ(join(join_req("", ""))->error_code, to_wire(error_code::invalid_group_id));
  EXPECT_EQ(join(join_req("g", "", std::nullopt, {"t"}, 999))->error_code,
            to_wire(error_code::invalid_session_timeout));
  EXPECT_EQ(join(join_req("g", "", std::nullopt, {"t"}, 60'001))->error_code,
            to_wire(error_code::invalid_session_timeout));
  EXPECT_EQ(join(join_req("g", "nobody"))->error_code, to_wire(error_code::unknown_member_id));
  auto no_protocols = join_req("g", "");
  no_protocols.protocols.clear();
  EXPECT_EQ(join(no_protocols)->error_code, to_wire(error_code::inconsistent_group_protocol));
  // Oversized metadata is refused and leaves nothing behind.
  auto huge = join_req("g2", "");
  huge.protocols[0].metadata.assign(300 * 1024, 1);
  EXPECT_EQ(join(huge)->error_code, to_wire(error_code::invalid_request));
  EXPECT_EQ(describe("g2").group_state, "Dead");
  EXPECT_EQ(sync("g", "nobody", 1)->error_code, to_wire(error_code::unknown_member_id));
  EXPECT_EQ(heartbeat("g", "nobody", 1), to_wire(error_code::unknown_member_id));
  EXPECT_EQ(heartbeat("", "nobody", 1), to_wire(error_code::invalid_group_id));
}

TEST_F(coordinator_test, GroupMaxSizeIsEnforced) {
  for (int i = 0; i < cfg_.max_group_size; ++i) first_join("g");
  auto j = join(join_req("g", ""));
  EXPECT_EQ(j->error_code, to_wire(error_code::group_max_size_reached));
}

TEST_F(coordinator_test, SessionTimeoutRemovesASilentMember) {
  int32_t gen = 0;
  auto ids = stable_group("g", 2, &gen);
  // ids[0] keeps heartbeating; ids[1] goes silent.
  for (int i = 0; i < 9; ++i) {
    advance(1000);
    ASSERT_EQ(heartbeat("g", ids[0], gen), 0);
  }
  advance(1100);
  EXPECT_EQ(describe("g").group_state, "PreparingRebalance");
  EXPECT_EQ(heartbeat("g", ids[0], gen), to_wire(error_code::rebalance_in_progress));
  EXPECT_EQ(heartbeat("g", ids[1], gen), to_wire(error_code::unknown_member_id));
  auto j = join(join_req("g", ids[0]));
  ASSERT_TRUE(j.done());
  EXPECT_EQ(j->generation_id, gen + 1);
  EXPECT_EQ(j->members.size(), 1u);
}

TEST_F(coordinator_test, RebalanceTimeoutDropsMembersThatDoNotRejoin) {
  int32_t gen = 0;
  auto ids = stable_group("g", 2, &gen);
  std::string third = first_join("g");
  auto j3 = join(join_req("g", third));
  auto j0 = join(join_req("g", ids[0]));
  EXPECT_FALSE(j0.done());
  // ids[1] keeps heartbeating (so its session holds) but never rejoins.
  for (int i = 0; i < 19; ++i) {
    advance(1000);
    EXPECT_EQ(heartbeat("g", ids[1], gen), to_wire(error_code::rebalance_in_progress));
  }
  EXPECT_FALSE(j0.done());
  advance(1100);
  ASSERT_TRUE(j0.done());
  EXPECT_EQ(j0->generation_id, gen + 1);
  EXPECT_EQ(j0->members.size(), 2u);
  EXPECT_EQ(heartbeat("g", ids[1], gen + 1), to_wire(error_code::unknown_member_id));
}

TEST_F(coordinator_test, PendingMemberIdExpires) {
  std::string id = first_join("g");
  advance(10'100);
  EXPECT_EQ(join(join_req("g", id))->error_code, to_wire(error_code::unknown_member_id));
}

TEST(coordinator_delay_test, InitialRebalanceDelayWaitsForMoreMembers) {
  auto cfg = test_config();
  cfg.initial_rebalance_delay_ms = 3000;
  manual_clock clk;
  mem_log log;
  std::deque<std::function<void()>> tasks;
  coordinator c(cfg, log, clk, [&](std::function<void()> fn) { tasks.push_back(std::move(fn)); });
  c.set_loaded();
  proto::join_group_request r;
  r.group_id = "g";
  r.session_timeout_ms = 10'000;
  r.rebalance_timeout_ms = 20'000;
  r.protocol_type = "consumer";
  r.protocols.push_back({"range", {}});
  std::optional<proto::join_group_response> a, b;
  c.join_group(r, 3, "c", "h", [&](proto::join_group_response x) { a = x; });
  clk.advance_ms(1000);
  c.tick();
  EXPECT_FALSE(a.has_value());
  c.join_group(r, 3, "c", "h", [&](proto::join_group_response x) { b = x; });
  EXPECT_FALSE(b.has_value());
  clk.advance_ms(2100);
  c.tick();
  ASSERT_TRUE(a.has_value() && b.has_value());
  EXPECT_EQ(a->generation_id, 1);
  EXPECT_EQ(a->leader, b->leader);
}

TEST_F(coordinator_test, LeaveGroupSingleAndBatched) {
  int32_t gen = 0;
  auto ids = stable_group("g", 3, &gen);
  proto::leave_group_request one;
  one.group_id = "g";
  one.member_id = ids[2];
  auto r0 = c_->leave_group(one, 1);
  EXPECT_EQ(r0.error_code, 0);
  EXPECT_EQ(describe("g").group_state, "PreparingRebalance");
  one.member_id = "nobody";
  EXPECT_EQ(c_->leave_group(one, 1).error_code, to_wire(error_code::unknown_member_id));

  proto::leave_group_request batch;
  batch.group_id = "g";
  batch.members.push_back({ids[0], std::nullopt});
  batch.members.push_back({ids[1], std::nullopt});
  batch.members.push_back({"nobody", std::nullopt});
  auto r3 = c_->leave_group(batch, 3);
  EXPECT_EQ(r3.error_code, 0);
  ASSERT_EQ(r3.members.size(), 3u);
  EXPECT_EQ(r3.members[0].error_code, 0);
  EXPECT_EQ(r3.members[1].error_code, 0);
  EXPECT_EQ(r3.members[2].error_code, to_wire(error_code::unknown_member_id));
  auto d = describe("g");
  EXPECT_EQ(d.group_state, "Empty");
  EXPECT_TRUE(d.members.empty());
}

TEST_F(coordinator_test, StaticMemberRestartKeepsItsAssignmentWithoutRebalance) {
  auto a = join(join_req("g", "", "instance-a"));
  ASSERT_TRUE(a.done());
  EXPECT_EQ(a->error_code, 0);  // no MEMBER_ID_REQUIRED round for static members
  auto b = join(join_req("g", "", "instance-b"));
  EXPECT_FALSE(b.done());
  // a's join is parked; b's arrival ended the first rebalance only when a rejoins.
  auto a2 = join(join_req("g", a->member_id, "instance-a"));
  ASSERT_TRUE(a2.done() && b.done());
  const int32_t gen = a2->generation_id;
  const std::string leader = a2->leader;
  std::string a_id = a2->member_id, b_id = b->member_id;
  auto lead = leader == a_id ? a_id : b_id;
  auto other = leader == a_id ? b_id : a_id;
  auto other_instance = leader == a_id ? "instance-b" : "instance-a";
  auto so = sync("g", other, gen, {}, other_instance);
  sync("g", lead, gen, {{a_id, {1}}, {b_id, {2}}});
  ASSERT_TRUE(so.done());
  const auto other_assignment = so->assignment;

  // The non-leader restarts: a new member id, the same generation, its
  // assignment back, and no rebalance for the others.
  const size_t appends = log_.appends;
  auto re = join(join_req("g", "", other_instance));
  ASSERT_TRUE(re.done());
  EXPECT_EQ(re->error_code, 0);
  EXPECT_EQ(re->generation_id, gen);
  EXPECT_NE(re->member_id, other);
  EXPECT_EQ(log_.appends, appends + 1);  // the new member id is recorded
  EXPECT_EQ(describe("g").group_state, "Stable");
  EXPECT_EQ(heartbeat("g", lead, gen), 0);
  auto s = sync("g", re->member_id, gen, {}, other_instance);
  EXPECT_EQ(s->assignment, other_assignment);
  // The old process is fenced.
  EXPECT_EQ(heartbeat("g", other, gen, other_instance), to_wire(error_code::fenced_instance_id));
  EXPECT_EQ(commit_error(commit("g", other, gen, "t", 0, 5)), to_wire(error_code::unknown_member_id));
  proto::offset_commit_request c;
  EXPECT_EQ(join(join_req("g", other, other_instance))->error_code, to_wire(error_code::fenced_instance_id));

  // Leaving by instance id (LeaveGroup v3) removes the static member.
  proto::leave_group_request l;
  l.group_id = "g";
  l.members.push_back({"", std::string(other_instance)});
  auto lr = c_->leave_group(l, 3);
  EXPECT_EQ(lr.members.at(0).error_code, 0);
  EXPECT_EQ(describe("g").group_state, "PreparingRebalance");
}

TEST_F(coordinator_test, CommitsCheckGenerationAndMember) {
  int32_t gen = 0;
  auto ids = stable_group("g", 2, &gen);
  EXPECT_EQ(commit_error(commit("g", ids[0], gen, "t", 0, 10)), 0);
  EXPECT_EQ(fetch("g", "t", 0), 10);
  EXPECT_EQ(commit_error(commit("g", ids[0], gen - 1, "t", 0, 11)), to_wire(error_code::illegal_generation));
  EXPECT_EQ(commit_error(commit("g", "nobody", gen, "t", 0, 11)), to_wire(error_code::unknown_member_id));
  // A groupless commit into a group with members is refused.
  EXPECT_EQ(commit_error(commit("g", "", -1, "t", 0, 11)), to_wire(error_code::unknown_member_id));
  EXPECT_EQ(commit_error(commit("g", ids[0], gen, "missing", 0, 11)),
            to_wire(error_code::unknown_topic_or_partition));
  EXPECT_EQ(commit_error(commit("g", ids[0], gen, "t", 0, 11, std::string(5000, 'm'))),
            to_wire(error_code::offset_metadata_too_large));
  EXPECT_EQ(fetch("g", "t", 0), 10);
  // During a rebalance's sync phase commits wait for the new generation.
  std::string third = first_join("g");
  auto j3 = join(join_req("g", third));
  join(join_req("g", ids[0]));
  join(join_req("g", ids[1]));
  ASSERT_TRUE(j3.done());
  EXPECT_EQ(commit_error(commit("g", ids[0], gen + 1, "t", 0, 12)), to_wire(error_code::rebalance_in_progress));
  // Unknown group with a generation: ILLEGAL_GENERATION, as Kafka.
  EXPECT_EQ(commit_error(commit("nogroup", "m", 3, "t", 0, 1)), to_wire(error_code::illegal_generation));
}

TEST_F(coordinator_test, GrouplessCommitsAndFetches) {
  EXPECT_EQ(commit_error(commit("solo", "", -1, "t", 0, 5, "hello")), 0);
  EXPECT_EQ(commit_error(commit("solo", "", -1, "t", 3, 7)), 0);
  EXPECT_EQ(commit_error(commit("solo", "", -1, "u", 1, 9)), 0);
  EXPECT_EQ(fetch("solo", "t", 0), 5);
  EXPECT_EQ(fetch("solo", "t", 1), -1);
  EXPECT_EQ(fetch("nobody", "t", 0), -1);
  // Null topics: every committed partition, by topic.
  proto::offset_fetch_request all;
  all.group_id = "solo";
  auto r = c_->offset_fetch(all, 7);
  ASSERT_EQ(r.topics.size(), 2u);
  EXPECT_EQ(r.topics[0].name, "t");
  EXPECT_EQ(r.topics[0].partitions.size(), 2u);
  EXPECT_EQ(r.topics[0].partitions[0].metadata, "hello");
  EXPECT_EQ(r.topics[1].partitions[0].committed_offset, 9);
  // v8: several groups at once.
  commit("other", "", -1, "t", 0, 55);
  proto::offset_fetch_request v8;
  v8.groups.push_back({"solo", std::nullopt});
  proto::offset_fetch_request::offset_fetch_request_group og;
  og.group_id = "other";
  og.topics.emplace();
  og.topics->push_back({"t", {0, 1}});
  v8.groups.push_back(og);
  auto r8 = c_->offset_fetch(v8, 8);
  ASSERT_EQ(r8.groups.size(), 2u);
  EXPECT_EQ(r8.groups[0].topics.size(), 2u);
  EXPECT_EQ(r8.groups[1].topics.at(0).partitions.at(0).committed_offset, 55);
  EXPECT_EQ(r8.groups[1].topics.at(0).partitions.at(1).committed_offset, -1);
  // Groupless groups are listed as Empty with no protocol type.
  auto l = c_->list_groups({});
  ASSERT_EQ(l.groups.size(), 2u);
  EXPECT_EQ(l.groups[0].group_state, "Empty");
}

TEST_F(coordinator_test, CommitAnsweredOnlyWhenDurable) {
  log_.hold = true;
  auto s = commit("solo", "", -1, "t", 0, 5);
  EXPECT_FALSE(s.done());
  EXPECT_EQ(fetch("solo", "t", 0), -1);  // not applied before it is durable
  log_.complete_all();
  run();
  ASSERT_TRUE(s.done());
  EXPECT_EQ(commit_error(s), 0);
  EXPECT_EQ(fetch("solo", "t", 0), 5);
  auto f = commit("solo", "", -1, "t", 0, 6);
  log_.fail_all();
  run();
  EXPECT_EQ(commit_error(f), to_wire(error_code::coordinator_not_available));
  EXPECT_EQ(fetch("solo", "t", 0), 5);
}

// offsets.commit.timeout.ms: a commit whose record never commits (a leader
// whose followers left before its ISR shrank) is answered REQUEST_TIMED_OUT,
// as Kafka's delayed produce times out, and changes nothing; the record
// committing later is left to the next load.
TEST_F(coordinator_test, CommitNeverCommittedIsAnsweredRequestTimedOut) {
  auto done = commit("solo", "", -1, "t", 0, 5);
  ASSERT_EQ(commit_error(done), 0);
  log_.hold = true;
  auto s = commit("solo", "", -1, "t", 0, 6);
  advance(cfg_.offsets_commit_timeout_ms - 100);
  EXPECT_FALSE(s.done()) << "answered before offsets.commit.timeout.ms";
  advance(100);
  ASSERT_TRUE(s.done()) << "still waiting after offsets.commit.timeout.ms";
  EXPECT_EQ(commit_error(s), to_wire(error_code::request_timed_out));
  EXPECT_EQ(fetch("solo", "t", 0), 5);
  // The write completing after the answer neither answers again (slot
  // asserts) nor applies.
  log_.complete_all();
  run();
  EXPECT_EQ(fetch("solo", "t", 0), 5);
  // Later commits are served as usual.
  log_.hold = false;
  EXPECT_EQ(commit_error(commit("solo", "", -1, "t", 0, 7)), 0);
  EXPECT_EQ(fetch("solo", "t", 0), 7);
}

// A group's record (the leader's assignment) that never commits: the
// members' SyncGroups get COORDINATOR_NOT_AVAILABLE (Kafka's storeGroup maps
// the timeout so) and the group rebalances again.
TEST_F(coordinator_test, AssignmentNeverCommittedIsAnsweredCoordinatorNotAvailable) {
  std::string id = first_join("g");
  join(join_req("g", id));
  log_.hold = true;
  auto s = sync("g", id, 1, {{id, {1}}});
  EXPECT_FALSE(s.done());
  advance(cfg_.offsets_commit_timeout_ms);
  ASSERT_TRUE(s.done()) << "still waiting after offsets.commit.timeout.ms";
  EXPECT_EQ(s->error_code, to_wire(error_code::coordinator_not_available));
  EXPECT_EQ(describe("g").group_state, "PreparingRebalance");
  log_.complete_all();
  run();
  EXPECT_EQ(describe("g").group_state, "PreparingRebalance");
}

// A broker whose view of the cluster is not current (back from a pause or a
// cut that outlasted its session) may hold groups another broker serves now:
// it answers NOT_COORDINATOR, never offsets or members from memory, and
// serves them again, unchanged, once its view is current.
TEST_F(coordinator_test, NothingIsAnsweredFromMemoryWhileTheViewIsNotCurrent) {
  std::string id = first_join("g");
  join(join_req("g", id));
  ASSERT_EQ(sync("g", id, 1, {{id, {1}}})->error_code, 0);
  ASSERT_EQ(commit_error(commit("g", id, 1, "t", 0, 5)), 0);
  bool current = false;
  c_->set_view_check([&current] { return current; });
  proto::offset_fetch_request r;
  r.groups.emplace_back().group_id = "g";
  auto f = c_->offset_fetch(r, 9);
  ASSERT_EQ(f.groups.size(), 1u);
  EXPECT_EQ(f.groups[0].error_code, to_wire(error_code::not_coordinator));
  EXPECT_TRUE(f.groups[0].topics.empty());
  proto::offset_fetch_request old;
  old.group_id = "g";
  old.topics.emplace();
  old.topics->push_back({"t", {0}});
  auto f3 = c_->offset_fetch(old, 3);
  EXPECT_EQ(f3.error_code, to_wire(error_code::not_coordinator));
  EXPECT_EQ(f3.topics.at(0).partitions.at(0).committed_offset, -1);
  EXPECT_EQ(commit_error(commit("g", id, 1, "t", 0, 6)), to_wire(error_code::not_coordinator));
  EXPECT_EQ(heartbeat("g", id, 1), to_wire(error_code::not_coordinator));
  EXPECT_EQ(describe("g").error_code, to_wire(error_code::not_coordinator));
  EXPECT_EQ(join(join_req("g", id))->error_code, to_wire(error_code::not_coordinator));
  current = true;
  EXPECT_EQ(fetch("g", "t", 0), 5);
  EXPECT_EQ(heartbeat("g", id, 1), 0);
}

// The append's own errors, as Kafka's GroupMetadataManager maps them.
TEST_F(coordinator_test, FailedWritesAnswerKafkasCodes) {
  struct row {
    errc append;
    error_code commit, sync;
  };
  const row rows[] = {
      {errc::not_leader, error_code::not_coordinator, error_code::not_coordinator},
      {errc::not_coordinator, error_code::not_coordinator, error_code::not_coordinator},
      {errc::io_error, error_code::not_coordinator, error_code::not_coordinator},
      {errc::not_enough_replicas, error_code::coordinator_not_available, error_code::coordinator_not_available},
      {errc::not_enough_replicas_after_append, error_code::coordinator_not_available,
       error_code::coordinator_not_available},
      {errc::unavailable, error_code::request_timed_out, error_code::coordinator_not_available},
      {errc::message_too_large, error_code::invalid_commit_offset_size, error_code::unknown_server_error},
  };
  int n = 0;
  for (const auto& r : rows) {
    SCOPED_TRACE(std::string(errc_name(r.append)));
    log_.hold = true;
    auto c = commit("solo", "", -1, "t", 0, 5);
    log_.fail_all(r.append);
    run();
    EXPECT_EQ(commit_error(c), to_wire(r.commit));
    log_.hold = false;
    const std::string g = "g" + std::to_string(n++);
    std::string id = first_join(g);
    join(join_req(g, id));
    log_.hold = true;
    auto s = sync(g, id, 1, {{id, {1}}});
    log_.fail_all(r.append);
    run();
    ASSERT_TRUE(s.done());
    EXPECT_EQ(s->error_code, to_wire(r.sync));
    log_.hold = false;
  }
}

TEST_F(coordinator_test, SyncAnsweredOnlyWhenTheAssignmentIsDurable) {
  std::string id = first_join("g");
  join(join_req("g", id));
  log_.hold = true;
  auto s = sync("g", id, 1, {{id, {1}}});
  EXPECT_FALSE(s.done());
  EXPECT_EQ(describe("g").group_state, "CompletingRebalance");
  log_.fail_all();
  run();
  ASSERT_TRUE(s.done());
  EXPECT_EQ(s->error_code, to_wire(error_code::coordinator_not_available));
  EXPECT_EQ(describe("g").group_state, "PreparingRebalance");
}

TEST_F(coordinator_test, DeleteGroupsAndOffsets) {
  int32_t gen = 0;
  auto ids = stable_group("live", 1, &gen);
  commit("live", ids[0], gen, "t", 0, 1);
  commit("live", ids[0], gen, "u", 0, 1);
  commit("idle", "", -1, "t", 0, 1);
  EXPECT_EQ(delete_groups({"live", "idle", "nobody", ""}),
            (std::vector<int16_t>{to_wire(error_code::non_empty_group), 0, to_wire(error_code::group_id_not_found),
                                  to_wire(error_code::invalid_group_id)}));
  EXPECT_EQ(describe("idle").group_state, "Dead");
  EXPECT_EQ(fetch("idle", "t", 0), -1);

  proto::offset_delete_request od;
  od.group_id = "live";
  od.topics.push_back({"t", {{0}}});
  od.topics.push_back({"u", {{0}}});
  slot<proto::offset_delete_response> s;
  c_->offset_delete(od, s.cb());
  run();
  ASSERT_TRUE(s.done());
  EXPECT_EQ(s->topics[0].partitions[0].error_code, to_wire(error_code::group_subscribed_to_topic));
  EXPECT_EQ(s->topics[1].partitions[0].error_code, 0);
  EXPECT_EQ(fetch("live", "t", 0), 1);
  EXPECT_EQ(fetch("live", "u", 0), -1);
  od.group_id = "nobody";
  slot<proto::offset_delete_response> s2;
  c_->offset_delete(od, s2.cb());
  EXPECT_EQ(s2->error_code, to_wire(error_code::group_id_not_found));
}

TEST_F(coordinator_test, CommittedOffsetsAndTheObserverOfReplacedOffsets) {
  std::vector<std::string> seen;
  c_->set_offset_observer([&](const std::string& g, const std::string& t, int32_t p, int64_t prev) {
    seen.push_back(g + "/" + t + "/" + std::to_string(p) + "@" + std::to_string(prev));
  });
  commit("a", "", -1, "t", 0, 5);  // nothing replaced: not observed
  commit("a", "", -1, "t", 0, 9);
  commit("a", "", -1, "t", 1, 3);
  commit("b", "", -1, "u", 2, 7);
  auto rows = c_->committed_offsets();
  std::vector<std::string> got;
  for (const auto& r : rows)
    got.push_back(r.group + "/" + r.topic + "/" + std::to_string(r.partition) + "=" +
                  std::to_string(r.offset));
  EXPECT_EQ(got, (std::vector<std::string>{"a/t/0=9", "a/t/1=3", "b/u/2=7"}));
  EXPECT_EQ(seen, (std::vector<std::string>{"a/t/0@5"}));
  // Deleting a group reports each offset it held.
  seen.clear();
  EXPECT_EQ(delete_groups({"a"}), (std::vector<int16_t>{0}));
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, (std::vector<std::string>{"a/t/0@9", "a/t/1@3"}));
  EXPECT_EQ(c_->committed_offsets().size(), 1u);
}

TEST_F(coordinator_test, ListGroupsFiltersByState) {
  int32_t gen = 0;
  stable_group("a", 1, &gen);
  commit("b", "", -1, "t", 0, 1);
  proto::list_groups_request r;
  r.states_filter = {"stable"};
  auto l = c_->list_groups(r);
  ASSERT_EQ(l.groups.size(), 1u);
  EXPECT_EQ(l.groups[0].group_id, "a");
  EXPECT_EQ(l.groups[0].protocol_type, "consumer");
}

TEST_F(coordinator_test, RequestsWaitForTheLoad) {
  c_ = std::make_unique<coordinator>(cfg_, log_, clk_, [this](std::function<void()> fn) { tasks_.push_back(fn); });
  EXPECT_EQ(join(join_req("g", ""))->error_code, to_wire(error_code::coordinator_load_in_progress));
  EXPECT_EQ(heartbeat("g", "m", 1), to_wire(error_code::coordinator_load_in_progress));
  EXPECT_EQ(commit_error(commit("g", "", -1, "t", 0, 1)), to_wire(error_code::coordinator_load_in_progress));
  EXPECT_EQ(c_->list_groups({}).error_code, to_wire(error_code::coordinator_load_in_progress));
  proto::offset_fetch_request f;
  f.group_id = "g";
  EXPECT_EQ(c_->offset_fetch(f, 7).error_code, to_wire(error_code::coordinator_load_in_progress));
}

TEST_F(coordinator_test, ReplayRebuildsTheSameState) {
  int32_t gen = 0;
  auto ids = stable_group("g", 3, &gen);
  commit("g", ids[1], gen, "t", 2, 20, "m");
  commit("solo", "", -1, "t", 0, 5);
  commit("solo", "", -1, "t", 0, 6);
  commit("gone", "", -1, "t", 0, 1);
  delete_groups({"gone"});
  int32_t gen2 = 0;
  auto ids2 = stable_group("left", 1, &gen2);
  proto::leave_group_request l;
  l.group_id = "left";
  l.member_id = ids2[0];
  (void)c_->leave_group(l, 1);
  run();

  auto describe_all = [&] {
    proto::describe_groups_request r;
    r.groups = {"g", "solo", "gone", "left"};
    return c_->describe_groups(r);
  };
  auto fetch_all = [&] {
    proto::offset_fetch_request r;
    r.groups.push_back({"g", std::nullopt});
    r.groups.push_back({"solo", std::nullopt});
    r.groups.push_back({"gone", std::nullopt});
    return c_->offset_fetch(r, 8);
  };
  const auto before_d = describe_all();
  const auto before_f = fetch_all();
  const auto before_l = c_->list_groups({});
  const auto records = log_.durable;
  ASSERT_FALSE(records.empty());
  for (int round = 0; round < 2; ++round) {
    reset();
    c_ = std::make_unique<coordinator>(cfg_, log_, clk_, [this](std::function<void()> fn) { tasks_.push_back(fn); });
    for (const auto& r : records) {
      // Each group's records are in the partition its id maps to.
      auto k = decode_key(r.key);
      ASSERT_TRUE(k.ok());
      const std::string& g = std::holds_alternative<offset_key>(*k) ? std::get<offset_key>(*k).group
                                                                   : std::get<group_key>(*k).group;
      EXPECT_EQ(r.partition, partition_for(g, cfg_.num_partitions));
      std::optional<std::span<const uint8_t>> v;
      if (r.value) v = std::span<const uint8_t>(*r.value);
      ASSERT_TRUE(c_->replay(r.key, v).ok());
    }
    c_->set_loaded();
    EXPECT_EQ(describe_all(), before_d);
    EXPECT_EQ(fetch_all(), before_f);
    EXPECT_EQ(c_->list_groups({}), before_l);
  }
  // The replayed group works on: members heartbeat at their generation.
  EXPECT_EQ(heartbeat("g", ids[0], gen), 0);
  EXPECT_EQ(describe("left").group_state, "Empty");
  // Foreign or broken records are skipped with an error, not applied.
  EXPECT_FALSE(c_->replay(std::vector<uint8_t>{0, 9, 0, 0}, std::nullopt).ok());
  EXPECT_FALSE(c_->replay(encode_key(offset_key{"x", "t", 0}), std::vector<uint8_t>{0, 3}).ok());
  EXPECT_EQ(describe("x").group_state, "Dead");
}

// __consumer_offsets is compacted: replaying a cleaned copy of the records
// (superseded commits and group records gone, tombstones kept, then gone
// after delete.retention.ms) rebuilds the same groups and offsets.
TEST_F(coordinator_test, ReplayOfACompactedLogRebuildsTheSameState) {
  int32_t gen = 0;
  auto ids = stable_group("g", 2, &gen);
  for (int i = 0; i < 50; ++i) commit("g", ids[i % 2], gen, "t", i % 3, 100 + i, "m");
  for (int i = 0; i < 30; ++i) commit("solo", "", -1, "t", i % 2, 10 + i);
  commit("gone", "", -1, "t", 0, 1);
  delete_groups({"gone"});
  int32_t gen2 = 0;
  auto ids2 = stable_group("left", 1, &gen2);
  proto::leave_group_request l;
  l.group_id = "left";
  l.member_id = ids2[0];
  (void)c_->leave_group(l, 1);
  run();
  auto describe_all = [&] {
    proto::describe_groups_request r;
    r.groups = {"g", "solo", "gone", "left"};
    return c_->describe_groups(r);
  };
  auto fetch_all = [&] {
    proto::offset_fetch_request r;
    r.groups.push_back({"g", std::nullopt});
    r.groups.push_back({"solo", std::nullopt});
    r.groups.push_back({"gone", std::nullopt});
    return c_->offset_fetch(r, 8);
  };
  const auto before_d = describe_all();
  const auto before_f = fetch_all();
  const auto before_l = c_->list_groups({});

  // The records into __consumer_offsets-0, one batch each, as the service
  // writes them, through the broker's partition manager and log cleaner.
  storage::testing::temp_dir tmp;
  manual_clock log_clk;
  config::config_map settings;
  settings.set("log.dirs", std::vector<std::string>{tmp.path()});
  auto broker_cfg = config::make_broker_config(std::move(settings));
  ASSERT_TRUE(broker_cfg.ok());
  auto m = cluster::testing::open_managers(io::filesystem::posix(), tmp.sub("logs"), *broker_cfg, nullptr, log_clk);
  ASSERT_TRUE(m.partitions);
  const std::vector<config::config_entry> topic_cfg = {
      {"cleanup.policy", "compact"}, {"segment.bytes", "2048"}, {"delete.retention.ms", "1000"}};
  ASSERT_FALSE(m.partitions->create_topic(std::string(offsets_topic), 1, 1, topic_cfg, false).has_value());
  auto part = m.partitions->get(std::string(offsets_topic), 0);
  ASSERT_TRUE(part);
  auto append = [&](const proto::records::record_input& in) {
    auto b = proto::records::build_batch({}, std::span(&in, 1));
    ASSERT_TRUE(b.ok());
    std::vector<std::byte> bytes(reinterpret_cast<const std::byte*>(b->data()),
                                 reinterpret_cast<const std::byte*>(b->data()) + b->size());
    ASSERT_EQ(part->append(bytes, log_clk.now_ms()).error, errc::ok);
  };
  for (const auto& r : log_.durable) {
    proto::records::record_input in;
    in.key = r.key;
    in.value = r.value;
    in.timestamp_ms = log_clk.now_ms();
    append(in);
  }
  // Close the last segment so all of it is cleanable.
  auto tc = part->config();
  tc.segment_ms = 1;
  ASSERT_TRUE(part->set_config(tc).ok());
  log_clk.advance_ms(2);
  {
    proto::records::record_input in;
    in.key = encode_key(offset_key{"other", "t", 0});
    in.value = std::nullopt;
    append(in);
  }
  cluster::log_cleaner cleaner(*m.partitions, log_clk, 1, 1 << 20, 1000);
  const std::string log_name = std::string(offsets_topic) + "-0";
  auto replay_log = [&] {
    c_ = std::make_unique<coordinator>(cfg_, log_, clk_, [this](std::function<void()> fn) { tasks_.push_back(fn); });
    size_t n = 0;
    offset o = part->log_start_offset();
    const offset active_base = part->segments().back().base;
    while (o < active_base) {
      auto rb = part->read_bytes(o, 1 << 20, active_base);
      EXPECT_TRUE(rb.ok());
      if (!rb.ok() || rb->empty()) break;
      auto split = proto::records::split_batches(std::span(reinterpret_cast<const uint8_t*>(rb->data()), rb->size()));
      EXPECT_TRUE(split.ok());
      for (auto b : *split) {
        auto d = proto::records::decode_batch(b);
        EXPECT_TRUE(d.ok());
        for (const auto& r : d->records) {
          EXPECT_TRUE(c_->replay(*r.key, r.value).ok());
          ++n;
        }
        o = offset(d->header.last_offset() + 1);
      }
    }
    c_->set_loaded();
    return n;
  };
  ASSERT_TRUE(cleaner.run_once());
  const uint64_t removed = cleaner.stats(log_name).records_removed;
  EXPECT_GT(removed, 50u);
  const size_t kept = replay_log();
  EXPECT_LT(kept, log_.durable.size() - 50);
  EXPECT_EQ(describe_all(), before_d);
  EXPECT_EQ(fetch_all(), before_f);
  EXPECT_EQ(c_->list_groups({}), before_l);
  // Past delete.retention.ms the tombstones go too; the state stays.
  log_clk.advance_ms(tc.delete_retention_ms);
  cleaner.run_once();
  EXPECT_GT(cleaner.stats(log_name).records_removed, removed);
  EXPECT_LT(replay_log(), kept);
  EXPECT_EQ(describe_all(), before_d);
  EXPECT_EQ(fetch_all(), before_f);
  EXPECT_EQ(c_->list_groups({}), before_l);
  EXPECT_EQ(heartbeat("g", ids[0], gen), 0);
}

TEST_F(coordinator_test, UnloadAnswersWaitingRequests) {
  int32_t gen = 0;
  auto ids = stable_group("g", 2, &gen);
  auto j = join(join_req("g", ids[0]));  // the leader rejoins: a rebalance starts and it waits
  EXPECT_FALSE(j.done());
  c_->unload();
  ASSERT_TRUE(j.done());
  EXPECT_EQ(j->error_code, to_wire(error_code::not_coordinator));
  EXPECT_EQ(heartbeat("g", ids[1], gen), to_wire(error_code::coordinator_load_in_progress));
}

TEST_F(coordinator_test, ReplayFinishingAfterUnloadDoesNotReopen) {
  // Shutdown can begin while the service thread still replays
  // __consumer_offsets: unload() comes first, set_loaded() after. The
  // coordinator must stay closed, or a JoinGroup arriving during the server's
  // drain would park in it and hold the drain up.
  int32_t gen = 0;
  auto ids = stable_group("g", 1, &gen);
  const auto records = log_.durable;
  const size_t appends_before = log_.appends;
  c_ = std::make_unique<coordinator>(cfg_, log_, clk_, [this](std::function<void()> fn) { tasks_.push_back(fn); });
  for (const auto& r : records) {
    std::optional<std::span<const uint8_t>> v;
    if (r.value) v = std::span<const uint8_t>(*r.value);
    ASSERT_TRUE(c_->replay(r.key, v).ok());
  }
  c_->unload();
  EXPECT_TRUE(c_->unloaded());
  EXPECT_FALSE(c_->set_loaded());
  EXPECT_FALSE(c_->loaded());
  auto j = join(join_req("g", ""));
  ASSERT_TRUE(j.done()) << "a join parked in a coordinator that is shutting down";
  EXPECT_EQ(j->error_code, to_wire(error_code::coordinator_load_in_progress));
  EXPECT_EQ(heartbeat("g", ids[0], gen), to_wire(error_code::coordinator_load_in_progress));
  advance(30'000);  // timers stay off: the replayed member does not expire, nothing is written
  EXPECT_EQ(log_.appends, appends_before);
}

// ---- Per-partition load and unload of __consumer_offsets ------------------------

// A group id that hashes to partition `p` of __consumer_offsets.
std::string group_in(int32_t p, const std::string& prefix, int32_t partitions) {
  for (int i = 0;; ++i) {
    std::string id = prefix + std::to_string(i);
    if (partition_for(id, partitions) == p) return id;
  }
}

TEST_F(coordinator_test, LoadOfOnePartitionReplaysOnlyItsGroups) {
  const std::string a = group_in(1, "a", cfg_.num_partitions), b = group_in(2, "b", cfg_.num_partitions);
  int32_t gen = 0;
  auto ids = stable_group(a, 1, &gen);
  commit(a, ids[0], gen, "t", 0, 11);
  commit(b, "", -1, "t", 0, 22);
  // A record of `a` filed under another partition is foreign there.
  offset_value stray;
  stray.offset = 99;
  log_.durable.push_back({3, encode_key(offset_key{a, "t", 5}), encode_value(stray)});

  c_ = std::make_unique<coordinator>(cfg_, log_, clk_, [this](std::function<void()> fn) { tasks_.push_back(fn); });
  const auto r = c_->load_partition(1);
  EXPECT_TRUE(r.loaded);
  EXPECT_TRUE(r.read.ok());
  EXPECT_EQ(r.skipped, 0u);
  EXPECT_GT(r.records, 0u);
  EXPECT_EQ(c_->group_count(), 1u);
  EXPECT_EQ(fetch(a, "t", 0), 11);
  EXPECT_EQ(heartbeat(a, ids[0], gen), 0);
  EXPECT_EQ(describe(a).group_state, "Stable");
  // b's partition has not been loaded: it still loads.
  const int16_t loading = to_wire(error_code::coordinator_load_in_progress);
  EXPECT_EQ(describe(b).error_code, loading);
  EXPECT_EQ(commit_error(commit(b, "", -1, "t", 0, 23)), loading);
  EXPECT_EQ(c_->list_groups({}).error_code, loading);
  EXPECT_FALSE(c_->loaded());

  EXPECT_TRUE(c_->load_partition(2).loaded);
  EXPECT_EQ(fetch(b, "t", 0), 22);
  EXPECT_EQ(c_->group_count(), 2u);
  const auto foreign = c_->load_partition(3);
  EXPECT_EQ(foreign.records, 1u);
  EXPECT_EQ(foreign.skipped, 1u);
  EXPECT_EQ(fetch(a, "t", 5), -1);
  EXPECT_TRUE(c_->load_partition(0).loaded);
  EXPECT_TRUE(c_->loaded());
  // Loading a loaded partition again reads nothing.
  const size_t reads = log_.reads;
  EXPECT_TRUE(c_->load_partition(1).loaded);
  EXPECT_EQ(log_.reads, reads);
}

TEST_F(coordinator_test, UnloadedPartitionAnswersNotCoordinatorAndReloadBringsItBack) {
  const std::string a = group_in(1, "a", cfg_.num_partitions), b = group_in(2, "b", cfg_.num_partitions);
  int32_t gen = 0;
  auto ids = stable_group(a, 2, &gen);
  commit(a, ids[0], gen, "t", 0, 11);
  commit(a, ids[1], gen, "t", 1, 12);
  commit(b, "", -1, "t", 0, 22);
  std::vector<std::string> observed;
  c_->set_offset_observer([&](const std::string& g, const std::string&, int32_t, int64_t) { observed.push_back(g); });
  const auto before = describe(a);
  const size_t appends = log_.appends;

  c_->unload_partition(1);
  EXPECT_TRUE(observed.empty()) << "unloaded offsets are not lost";
  EXPECT_EQ(log_.appends, appends);
  EXPECT_EQ(c_->group_count(), 1u);
  EXPECT_EQ(c_->committed_offsets().size(), 1u);
  const int16_t not_coordinator = to_wire(error_code::not_coordinator);
  EXPECT_EQ(heartbeat(a, ids[0], gen), not_coordinator);
  EXPECT_EQ(join(join_req(a, ""))->error_code, not_coordinator);
  EXPECT_EQ(sync(a, ids[0], gen)->error_code, not_coordinator);
  EXPECT_EQ(commit_error(commit(a, ids[0], gen, "t", 0, 13)), not_coordinator);
  proto::offset_fetch_request f;
  f.group_id = a;
  EXPECT_EQ(c_->offset_fetch(f, 7).error_code, not_coordinator);
  EXPECT_EQ(describe(a).error_code, not_coordinator);
  EXPECT_EQ(delete_groups({a}), std::vector<int16_t>{not_coordinator});
  proto::leave_group_request l;
  l.group_id = a;
  l.member_id = ids[1];
  EXPECT_EQ(c_->leave_group(l, 1).error_code, not_coordinator);
  auto listed = c_->list_groups({});
  EXPECT_EQ(listed.error_code, 0);
  ASSERT_EQ(listed.groups.size(), 1u);
  EXPECT_EQ(listed.groups[0].group_id, b);
  EXPECT_EQ(fetch(b, "t", 0), 22);  // other partitions are served as before
  advance(30'000);                   // nothing of the unloaded group expires or is written
  EXPECT_EQ(log_.appends, appends);

  // Reload: the same generation, members and offsets, from the log alone.
  EXPECT_TRUE(c_->load_partition(1).loaded);
  EXPECT_EQ(describe(a), before);
  EXPECT_EQ(fetch(a, "t", 0), 11);
  EXPECT_EQ(fetch(a, "t", 1), 12);
  EXPECT_EQ(heartbeat(a, ids[0], gen), 0);
  EXPECT_EQ(heartbeat(a, ids[1], gen), 0);
  EXPECT_EQ(commit_error(commit(a, ids[0], gen, "t", 0, 14)), 0);
  EXPECT_EQ(observed, std::vector<std::string>{a});  // a live change again
}

TEST_F(coordinator_test, UnloadAnswersWaitingRequestsOfItsGroupsOnly) {
  const std::string a = group_in(1, "a", cfg_.num_partitions), b = group_in(2, "b", cfg_.num_partitions);
  int32_t gen = 0, gen_b = 0;
  auto ids = stable_group(a, 2, &gen);
  auto ids_b = stable_group(b, 2, &gen_b);
  auto j = join(join_req(a, ids[0]));  // the leader rejoins: the join waits for the other member
  auto jb = join(join_req(b, ids_b[0]));
  ASSERT_FALSE(j.done());
  ASSERT_FALSE(jb.done());
  // A commit and a static member's rejoin in flight when the partition goes.
  const std::string solo = group_in(1, "solo", cfg_.num_partitions);
  const std::string st = group_in(1, "static", cfg_.num_partitions);
  auto s1 = join(join_req(st, "", "instance-1"));
  ASSERT_TRUE(s1.done());
  sync(st, s1->member_id, s1->generation_id, {{s1->member_id, {1}}}, "instance-1");
  ASSERT_EQ(describe(st).group_state, "Stable");
  log_.hold = true;
  auto c = commit(solo, "", -1, "t", 0, 7);
  auto s2 = join(join_req(st, "", "instance-1"));
  ASSERT_FALSE(c.done());
  ASSERT_FALSE(s2.done());

  c_->unload_partition(1);
  run();
  ASSERT_TRUE(j.done());
  EXPECT_EQ(j->error_code, to_wire(error_code::not_coordinator));
  EXPECT_FALSE(jb.done()) << "another partition's rebalance goes on";
  log_.complete_all();
  run();
  ASSERT_TRUE(c.done());
  EXPECT_EQ(commit_error(c), to_wire(error_code::not_coordinator));
  ASSERT_TRUE(s2.done());
  EXPECT_EQ(s2->error_code, to_wire(error_code::not_coordinator));
  EXPECT_EQ(c_->group_count(), 1u) << "a completion after the unload applies nothing";
  // The durable commit is the next load's: the log is the truth.
  log_.hold = false;
  EXPECT_TRUE(c_->load_partition(1).loaded);
  EXPECT_EQ(fetch(solo, "t", 0), 7);
}

// A topic deleted while the partition of a group's offsets was loading (or
// held by another broker) is deleted from the group when the load ends:
// tombstones for its offsets, as the live deletion writes, so a topic
// created again under the name does not inherit them.
TEST_F(coordinator_test, ATopicDeletedDuringTheLoadIsDeletedAfterIt) {
  const std::string g = group_in(1, "g", cfg_.num_partitions);
  ASSERT_EQ(commit_error(commit(g, "", -1, "old", 0, 5)), 0);
  ASSERT_EQ(commit_error(commit(g, "", -1, "kept", 0, 6)), 0);
  c_->unload_partition(1);
  // Deleted while partition 1 is not served here: nothing to write now.
  const sluice::topic_id old_id = lookup("old")->id;
  topics_["old"] = std::nullopt;
  const size_t appends = log_.appends;
  c_->delete_topic_offsets("old", old_id);
  run();
  EXPECT_EQ(log_.appends, appends);
  ASSERT_TRUE(c_->load_partition(1).loaded);
  run();
  EXPECT_EQ(fetch(g, "old", 0), -1);
  EXPECT_EQ(fetch(g, "kept", 0), 6);
  // Durable: the next load finds the tombstone, not the offset.
  recreate("old");
  c_->unload_partition(1);
  ASSERT_TRUE(c_->load_partition(1).loaded);
  run();
  EXPECT_EQ(fetch(g, "old", 0), -1);
  EXPECT_EQ(fetch(g, "kept", 0), 6);
}

// ---- Topic ids (docs/group_records.md, "Topic ids") ----------------------------

// The tombstones in __consumer_offsets, as "group topic partition".
std::vector<std::string> tombstones(const mem_log& log) {
  std::vector<std::string> out;
  for (const auto& r : log.durable) {
    if (r.value) continue;
    auto k = decode_key(r.key);
    if (!k.ok() || !std::holds_alternative<offset_key>(*k)) continue;
    const auto& ok = std::get<offset_key>(*k);
    out.push_back(ok.group + " " + ok.topic + " " + std::to_string(ok.partition));
  }
  return out;
}

// An offset value as written before topic ids were kept (version 3).
std::vector<uint8_t> version3_value(int64_t offset) {
  std::vector<uint8_t> v = {0, 3};
  for (int i = 7; i >= 0; --i) v.push_back(static_cast<uint8_t>(offset >> (8 * i)));
  v.insert(v.end(), {0xff, 0xff, 0xff, 0xff, 0, 0});  // leader epoch -1, metadata ""
  for (int i = 0; i < 8; ++i) v.push_back(0);         // commit timestamp 0
  return v;
}

TEST_F(coordinator_test, ACommitRecordsTheTopicIdItWasMadeAgainst) {
  ASSERT_EQ(commit_error(commit("g", "", -1, "t", 0, 5)), 0);
  ASSERT_FALSE(log_.durable.empty());
  auto v = decode_offset_value(*log_.durable.back().value);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->topic_id, id_of("t"));
  const sluice::topic_id first = recreate("t");
  ASSERT_EQ(commit_error(commit("g", "", -1, "t", 0, 6)), 0);
  v = decode_offset_value(*log_.durable.back().value);
  ASSERT_TRUE(v.ok());
  EXPECT_NE(v->topic_id, first);
  EXPECT_EQ(v->topic_id, lookup("t")->id);
}

// A topic deleted and created again under its name: until the deletion
// reaches the coordinator (or if it never does), the old topic's offsets
// are not the new one's.
TEST_F(coordinator_test, FetchDoesNotAnswerAnOffsetOfTheNamesEarlierTopic) {
  ASSERT_EQ(commit_error(commit("g", "", -1, "t", 0, 5)), 0);
  ASSERT_EQ(commit_error(commit("g", "", -1, "u", 0, 8)), 0);
  recreate("t");
  EXPECT_EQ(fetch("g", "t", 0), -1);
  EXPECT_EQ(fetch("g", "u", 0), 8);
  // Nor in a fetch of every topic, nor in /metrics.
  proto::offset_fetch_request all;
  all.groups.push_back({"g", std::nullopt});
  const auto resp = c_->offset_fetch(all, 8);
  ASSERT_EQ(resp.groups.at(0).topics.size(), 1u);
  EXPECT_EQ(resp.groups.at(0).topics[0].name, "u");
  ASSERT_EQ(c_->committed_offsets().size(), 1u);
  EXPECT_EQ(c_->committed_offsets()[0].topic, "u");
  // The name gone altogether: the same.
  topics_["u"] = std::nullopt;
  EXPECT_EQ(fetch("g", "u", 0), -1);
  // A commit against the new topic is answered.
  ASSERT_EQ(commit_error(commit("g", "", -1, "t", 0, 7)), 0);
  EXPECT_EQ(fetch("g", "t", 0), 7);
}

// Records of both kinds replay: one without an id (written before ids were
// kept) counts as the current topic's; one with the id of an earlier topic
// of the name is not answered.
TEST_F(coordinator_test, ReplayOfRecordsWithAndWithoutTopicIds) {
  const std::string g = group_in(1, "g", cfg_.num_partitions);
  auto put = [&](const std::string& topic, std::vector<uint8_t> value) {
    log_.durable.push_back({1, encode_key(offset_key{g, topic, 0}), std::move(value)});
  };
  put("before-ids", version3_value(11));
  offset_value stale{12, -1, "", 0, id_of("stale")};
  put("stale", encode_value(stale));
  offset_value current{13, -1, "", 0, id_of("current")};
  put("current", encode_value(current));
  recreate("stale");
  c_->unload_partition(1);
  topics_["stale"] = std::nullopt;  // not even the name is left
  c_->load_partition(1);
  run();
  EXPECT_EQ(fetch(g, "before-ids", 0), 11);
  EXPECT_EQ(fetch(g, "stale", 0), -1);
  EXPECT_EQ(fetch(g, "current", 0), 13);
  // And with the name taken by a newer topic than the record's.
  recreate("stale");
  log_.durable.clear();
  put("stale", encode_value(stale));
  c_->unload_partition(1);
  c_->load_partition(1);
  run();
  EXPECT_EQ(fetch(g, "stale", 0), -1);
}

// A load removes (tombstones) the offsets of topics that are gone or were
// replaced while it was not served here, and only those: an offset of the
// name's current topic, or one without an id, stays.
TEST_F(coordinator_test, ALoadRemovesOffsetsOfAnEarlierTopicOfTheName) {
  const std::string g = group_in(1, "g", cfg_.num_partitions);
  ASSERT_EQ(commit_error(commit(g, "", -1, "t", 0, 5)), 0);
  ASSERT_EQ(commit_error(commit(g, "", -1, "kept", 0, 6)), 0);
  log_.durable.push_back({1, encode_key(offset_key{g, "before-ids", 0}), version3_value(4)});
  c_->unload_partition(1);
  recreate("t");
  ASSERT_TRUE(c_->load_partition(1).loaded);
  run();
  EXPECT_EQ(tombstones(log_), (std::vector<std::string>{g + " t 0"}));
  EXPECT_EQ(fetch(g, "t", 0), -1);
  EXPECT_EQ(fetch(g, "kept", 0), 6);
  EXPECT_EQ(fetch(g, "before-ids", 0), 4);
  ASSERT_EQ(commit_error(commit(g, "", -1, "t", 0, 9)), 0);
  c_->unload_partition(1);
  ASSERT_TRUE(c_->load_partition(1).loaded);
  run();
  EXPECT_EQ(fetch(g, "t", 0), 9);
  EXPECT_EQ(tombstones(log_).size(), 1u);
}

// The deletion of a topic reaches the coordinator after the name was taken
// again and the group committed against the new topic: the old topic's
// offsets go, the new topic's stay, in memory and in the log.
TEST_F(coordinator_test, ALateDeletionKeepsTheOffsetsOfTheTopicCreatedAgain) {
  const std::string g = group_in(1, "g", cfg_.num_partitions);
  ASSERT_EQ(commit_error(commit(g, "", -1, "t", 0, 5)), 0);
  ASSERT_EQ(commit_error(commit(g, "", -1, "t", 1, 3)), 0);
  log_.durable.push_back({1, encode_key(offset_key{g, "t", 2}), version3_value(4)});
  c_->unload_partition(1);
  ASSERT_TRUE(c_->load_partition(1).loaded);
  run();
  const sluice::topic_id old_id = recreate("t");
  ASSERT_EQ(commit_error(commit(g, "", -1, "t", 0, 7)), 0);
  c_->delete_topic_offsets("t", old_id);
  run();
  EXPECT_EQ(fetch(g, "t", 0), 7);
  EXPECT_EQ(fetch(g, "t", 1), -1);
  EXPECT_EQ(fetch(g, "t", 2), -1);
  // The old topic's offset and the one without an id (older than the
  // deletion) got tombstones; the new topic's did not.
  EXPECT_EQ(tombstones(log_), (std::vector<std::string>{g + " t 1", g + " t 2"}));
  ASSERT_EQ(c_->committed_offsets().size(), 1u);
  // A deletion whose id the broker did not know (all zero) does the same.
  c_->delete_topic_offsets("t", sluice::topic_id{});
  run();
  EXPECT_EQ(fetch(g, "t", 0), 7);
  // Durable: a replay rebuilds it.
  c_->unload_partition(1);
  ASSERT_TRUE(c_->load_partition(1).loaded);
  run();
  EXPECT_EQ(fetch(g, "t", 0), 7);
  EXPECT_EQ(fetch(g, "t", 1), -1);
  // The new topic deleted in turn: its offsets go.
  const sluice::topic_id new_id = lookup("t")->id;
  topics_["t"] = std::nullopt;
  c_->delete_topic_offsets("t", new_id);
  run();
  EXPECT_EQ(c_->committed_offsets().size(), 0u);
  EXPECT_EQ(tombstones(log_).back(), g + " t 0");
}

// A commit against the new topic still in flight (appended, not durable)
// when the old topic's deletion comes: a tombstone written now would land
// after the commit in the log and delete it at the next replay.
TEST_F(coordinator_test, ADeletionLeavesACommitInFlightForTheNewTopicAlone) {
  const std::string g = group_in(1, "g", cfg_.num_partitions);
  ASSERT_EQ(commit_error(commit(g, "", -1, "t", 0, 5)), 0);
  ASSERT_EQ(commit_error(commit(g, "", -1, "t", 1, 6)), 0);
  const sluice::topic_id old_id = recreate("t");
  log_.hold = true;
  auto in_flight = commit(g, "", -1, "t", 0, 9);
  EXPECT_FALSE(in_flight.done());
  c_->delete_topic_offsets("t", old_id);
  run();
  log_.hold = false;
  log_.complete_all();
  run();
  ASSERT_TRUE(in_flight.done());
  EXPECT_EQ(commit_error(in_flight), 0);
  EXPECT_EQ(fetch(g, "t", 0), 9);
  EXPECT_EQ(tombstones(log_), (std::vector<std::string>{g + " t 1"}));
  c_->unload_partition(1);
  ASSERT_TRUE(c_->load_partition(1).loaded);
  run();
  EXPECT_EQ(fetch(g, "t", 0), 9);
}

TEST_F(coordinator_test, OffsetsOfEmptyGroupsExpire) {
  commit("solo", "", -1, "t", 0, 5);
  int32_t gen = 0;
  auto ids = stable_group("live", 1, &gen);
  commit("live", ids[0], gen, "t", 0, 5);
  for (int i = 0; i < 40; ++i) {
    clk_.advance_ms(100'000);
    heartbeat("live", ids[0], gen);
    c_->tick();
    run();
  }
  EXPECT_EQ(fetch("solo", "t", 0), -1);
  EXPECT_EQ(describe("solo").group_state, "Dead");
  EXPECT_EQ(fetch("live", "t", 0), 5);  // a group with members keeps its offsets
}

TEST_F(coordinator_test, TenThousandGroupsCreatedAndDeletedKeepMemoryBounded) {
  log_.keep = false;
  auto round = [&] {
    std::vector<std::string> ids;
    for (int i = 0; i < 10'000; ++i) {
      ids.push_back("group-" + std::to_string(i));
      ASSERT_EQ(commit_error(commit(ids.back(), "", -1, "t", i % 8, i)), 0);
    }
    EXPECT_EQ(c_->group_count(), 10'000u);
    auto errors = delete_groups(ids);
    EXPECT_EQ(std::count(errors.begin(), errors.end(), 0), 10'000);
    EXPECT_EQ(c_->group_count(), 0u);
  };
  round();
  const size_t after_first = mallinfo2().uordblks;
  round();
  round();
  const size_t after_third = mallinfo2().uordblks;
  EXPECT_LT(after_third, after_first + (1u << 20)) << "memory grew by " << (after_third - after_first);
}

// ---- Offsets in a transaction (TxnOffsetCommit) ----------------------------------

class txn_offsets_test : public coordinator_test {
 protected:
  proto::txn_offset_commit_request txn_req(const std::string& group, int64_t pid, const std::string& topic,
                                           int32_t partition, int64_t offset) {
    proto::txn_offset_commit_request r;
    r.transactional_id = "txn-" + std::to_string(pid);
    r.group_id = group;
    r.producer_id = pid;
    r.producer_epoch = 0;
    auto& t = r.topics.emplace_back();
    t.name = topic;
    auto& p = t.partitions.emplace_back();
    p.partition_index = partition;
    p.committed_offset = offset;
    p.committed_metadata = "";
    return r;
  }
  // The error of the request's only partition, once answered.
  int16_t txn_commit(const proto::txn_offset_commit_request& r, int16_t version = 3) {
    slot<proto::txn_offset_commit_response> s;
    c_->txn_offset_commit(r, version, s.cb());
    run();
    EXPECT_TRUE(s.done());
    if (!s.done()) return -2;
    return s->topics.at(0).partitions.at(0).error_code;
  }
  int16_t txn_commit(const std::string& group, int64_t pid, const std::string& topic, int32_t partition,
                     int64_t offset) {
    return txn_commit(txn_req(group, pid, topic, partition, offset));
  }
  // The producer's marker written to the group's partition and reported
  // committed, as WriteTxnMarkers does it.
  void end_txn(const std::string& group, int64_t pid, bool commit) {
    const int32_t p = partition_for(group, cfg_.num_partitions);
    c_->on_transaction_completed(p, pid, commit, log_.marker(p, pid, commit));
    run();
  }
  // OffsetFetch v7 with require_stable: the partition's error and offset.
  std::pair<int16_t, int64_t> fetch_stable(const std::string& group, const std::string& topic, int32_t partition) {
    proto::offset_fetch_request r;
    r.group_id = group;
    r.topics.emplace();
    r.topics->push_back({topic, {partition}});
    r.require_stable = true;
    const auto resp = c_->offset_fetch(r, 7);
    const auto& p = resp.topics.at(0).partitions.at(0);
    return {p.error_code, p.committed_offset};
  }
  // A restart: a new coordinator loads every partition from the log.
  void restart() {
    c_ = std::make_unique<coordinator>(
        cfg_, log_, clk_, [this](std::function<void()> fn) { tasks_.push_back(std::move(fn)); },
        [this](const std::string& topic) { return lookup(topic); });
    for (int32_t p = 0; p < cfg_.num_partitions; ++p) ASSERT_TRUE(c_->load_partition(p).loaded);
    ASSERT_TRUE(c_->loaded());
    run();
  }
  static constexpr int16_t unstable = to_wire(error_code::unstable_offset_commit);
};

TEST_F(txn_offsets_test, PendingOffsetsBecomeCommittedWithTheCommitMarker) {
  ASSERT_EQ(commit_error(commit("g", "", -1, "t", 0, 5)), 0);
  EXPECT_EQ(txn_commit("g", 7, "t", 0, 10), 0);
  // The batch is transactional, for the producer.
  ASSERT_FALSE(log_.durable.empty());
  EXPECT_TRUE(log_.durable.back().transactional);
  EXPECT_EQ(log_.durable.back().producer_id, 7);
  EXPECT_EQ(fetch("g", "t", 0), 5) << "a pending offset is not answered";
  EXPECT_EQ(fetch_stable("g", "t", 0), std::make_pair(unstable, int64_t{-1}));
  EXPECT_EQ(fetch_stable("g", "t", 1), std::make_pair(int16_t{0}, int64_t{-1})) << "only the pending partition";
  end_txn("g", 8, true);  // another producer's marker changes nothing
  EXPECT_EQ(fetch_stable("g", "t", 0).first, unstable);
  end_txn("g", 7, true);
  EXPECT_EQ(fetch("g", "t", 0), 10);
  EXPECT_EQ(fetch_stable("g", "t", 0), std::make_pair(int16_t{0}, int64_t{10}));
  // The marker heard again (a retried WriteTxnMarkers) changes nothing.
  EXPECT_EQ(commit_error(commit("g", "", -1, "t", 0, 11)), 0);
  end_txn("g", 7, true);
  EXPECT_EQ(fetch("g", "t", 0), 11);
}

TEST_F(txn_offsets_test, AnAbortDropsPendingOffsets) {
  ASSERT_EQ(commit_error(commit("g", "", -1, "t", 0, 5)), 0);
  EXPECT_EQ(txn_commit("g", 7, "t", 0, 10), 0);
  EXPECT_EQ(txn_commit("g", 7, "t", 1, 20), 0);
  end_txn("g", 7, false);
  EXPECT_EQ(fetch_stable("g", "t", 0), std::make_pair(int16_t{0}, int64_t{5}));
  EXPECT_EQ(fetch_stable("g", "t", 1), std::make_pair(int16_t{0}, int64_t{-1}));
  // The producer's next transaction starts afresh.
  EXPECT_EQ(txn_commit("g", 7, "t", 1, 30), 0);
  end_txn("g", 7, true);
  EXPECT_EQ(fetch("g", "t", 1), 30);
  EXPECT_EQ(fetch("g", "t", 0), 5);
}

TEST_F(txn_offsets_test, TheCommitWrittenLastInTheLogWins) {
  // A plain commit written after the transactional one holds the
  // partition: the transaction's commit does not replace it.
  EXPECT_EQ(txn_commit("g", 7, "t", 0, 10), 0);
  ASSERT_EQ(commit_error(commit("g", "", -1, "t", 0, 20)), 0);
  EXPECT_EQ(fetch("g", "t", 0), 20);
  end_txn("g", 7, true);
  EXPECT_EQ(fetch("g", "t", 0), 20);
  // Written before it, the plain commit is replaced.
  ASSERT_EQ(commit_error(commit("g", "", -1, "t", 1, 20)), 0);
  EXPECT_EQ(txn_commit("g", 7, "t", 1, 10), 0);
  end_txn("g", 7, true);
  EXPECT_EQ(fetch("g", "t", 1), 10);
  // A later transactional commit of the same producer replaces its own.
  EXPECT_EQ(txn_commit("g", 7, "t", 2, 1), 0);
  EXPECT_EQ(txn_commit("g", 7, "t", 2, 2), 0);
  end_txn("g", 7, true);
  EXPECT_EQ(fetch("g", "t", 2), 2);
}

TEST_F(txn_offsets_test, ALoadRebuildsPendingAndResolvedOffsetsFromBatchesAndMarkers) {
  ASSERT_NE(partition_for("g", cfg_.num_partitions), partition_for("h", cfg_.num_partitions));
  ASSERT_EQ(commit_error(commit("g", "", -1, "t", 0, 5)), 0);
  EXPECT_EQ(txn_commit("g", 1, "t", 0, 10), 0);  // committed below
  EXPECT_EQ(txn_commit("g", 2, "t", 1, 20), 0);  // aborted below
  EXPECT_EQ(txn_commit("g", 3, "t", 2, 30), 0);  // overtaken by a plain commit, then committed
  ASSERT_EQ(commit_error(commit("g", "", -1, "t", 2, 31)), 0);
  EXPECT_EQ(txn_commit("g", 4, "t", 3, 40), 0);  // still pending
  EXPECT_EQ(txn_commit("h", 4, "t", 0, 50), 0);  // the same producer in another group: pending
  end_txn("g", 1, true);
  end_txn("g", 2, false);
  end_txn("g", 3, true);
  EXPECT_EQ(txn_commit("g", 1, "t", 0, 11), 0);  // producer 1's next transaction: pending
  auto state = [&] {
    std::vector<std::pair<int16_t, int64_t>> out;
    for (int32_t p = 0; p < 4; ++p) out.push_back(fetch_stable("g", "t", p));
    for (int32_t p = 0; p < 4; ++p) out.push_back({0, fetch("g", "t", p)});
    out.push_back(fetch_stable("h", "t", 0));
    return out;
  };
  const auto before = state();
  const std::vector<std::pair<int16_t, int64_t>> expected = {
      {unstable, -1}, {0, -1}, {0, 31}, {unstable, -1}, {0, 10}, {0, -1}, {0, 31}, {0, -1}, {unstable, -1}};
  EXPECT_EQ(before, expected);
  restart();
  EXPECT_EQ(state(), before);
  restart();
  EXPECT_EQ(state(), before) << "a second load gives the same state";
  // The pending transactions end after the restart as before it.
  end_txn("g", 4, true);
  end_txn("g", 1, false);
  EXPECT_EQ(fetch_stable("g", "t", 3), std::make_pair(int16_t{0}, int64_t{40}));
  EXPECT_EQ(fetch_stable("g", "t", 0), std::make_pair(int16_t{0}, int64_t{10}));
  EXPECT_EQ(fetch_stable("h", "t", 0).first, unstable) << "its marker goes to h's own partition";
  end_txn("h", 4, true);
  EXPECT_EQ(fetch("h", "t", 0), 50);
}

TEST_F(txn_offsets_test, AMarkerHeardWhileTheBatchIsInFlightEndsItOnceDurable) {
  log_.hold = true;
  slot<proto::txn_offset_commit_response> s;
  c_->txn_offset_commit(txn_req("g", 7, "t", 0, 10), 3, s.cb());
  run();
  EXPECT_FALSE(s.done());
  // The batch reaches the log, the producer's marker is written after it
  // and reported before the batch's completion runs.
  log_.complete_all();
  const int32_t p = partition_for("g", cfg_.num_partitions);
  c_->on_transaction_completed(p, 7, true, log_.marker(p, 7, true));
  EXPECT_EQ(fetch("g", "t", 0), -1);
  EXPECT_FALSE(s.done()) << "the batch's completion has not run yet";
  run();
  ASSERT_TRUE(s.done());
  EXPECT_EQ(s->topics[0].partitions[0].error_code, 0);
  EXPECT_EQ(fetch_stable("g", "t", 0), std::make_pair(int16_t{0}, int64_t{10}));
  // A marker heard while nothing is in flight is not kept for later batches.
  end_txn("g", 7, false);
  log_.hold = false;
  EXPECT_EQ(txn_commit("g", 7, "t", 0, 20), 0);
  EXPECT_EQ(fetch_stable("g", "t", 0).first, unstable);
}

TEST_F(txn_offsets_test, AMarkerCommittedDuringALoadIsAppliedWhenItEnds) {
  EXPECT_EQ(txn_commit("g", 7, "t", 0, 10), 0);
  const int32_t p = partition_for("g", cfg_.num_partitions);
  // The replay has read the batch; the marker comes after what it read.
  c_ = std::make_unique<coordinator>(
      cfg_, log_, clk_, [this](std::function<void()> fn) { tasks_.push_back(std::move(fn)); },
      [this](const std::string& topic) { return lookup(topic); });
  const auto durable = log_.durable;
  int64_t marker_at = -1;
  for (const auto& r : durable) {
    if (r.partition != p) continue;
    log_entry e;
    e.batch_offset = r.batch_offset;
    e.producer_id = r.producer_id;
    e.transactional = r.transactional;
    e.key = r.key;
    if (r.value) e.value = std::span<const uint8_t>(*r.value);
    ASSERT_TRUE(c_->replay(p, e).ok());
    marker_at = r.batch_offset + 1;
  }
  c_->on_transaction_completed(p, 7, true, marker_at);
  EXPECT_EQ(fetch("g", "t", 0), -1) << "still loading: COORDINATOR_LOAD_IN_PROGRESS";
  ASSERT_TRUE(c_->set_loaded());
  EXPECT_EQ(fetch_stable("g", "t", 0), std::make_pair(int16_t{0}, int64_t{10}));
}

TEST_F(txn_offsets_test, GenerationMemberAndInstanceAreCheckedFromVersion3) {
  int32_t gen = 0;
  auto ids = stable_group("g", 1, &gen);
  auto with = [&](int32_t generation, const std::string& member, std::optional<std::string> instance) {
    auto r = txn_req("g", 7, "t", 0, 10);
    r.generation_id = generation;
    r.member_id = member;
    r.group_instance_id = std::move(instance);
    return r;
  };
  EXPECT_EQ(txn_commit(with(gen, ids[0], std::nullopt)), 0);
  EXPECT_EQ(txn_commit(with(gen + 1, ids[0], std::nullopt)), to_wire(error_code::illegal_generation));
  EXPECT_EQ(txn_commit(with(gen, "stranger", std::nullopt)), to_wire(error_code::unknown_member_id));
  EXPECT_EQ(txn_commit(with(-1, "stranger", std::nullopt)), to_wire(error_code::unknown_member_id));
  // No generation and no member: not checked, in any state (Kafka).
  EXPECT_EQ(txn_commit(with(-1, "", std::nullopt)), 0);
  // A group that does not exist, named with a generation.
  auto none = txn_req("nobody", 7, "t", 0, 1);
  none.generation_id = 3;
  none.member_id = "m";
  EXPECT_EQ(txn_commit(none), to_wire(error_code::illegal_generation));
  none.generation_id = -1;
  none.member_id = "";
  EXPECT_EQ(txn_commit(none), 0) << "a producer that commits for a group of its own";
  // Before v3 the request carries no member: never checked.
  EXPECT_EQ(txn_commit(with(-1, "", std::nullopt), 2), 0);
  // Per partition: unknown topics, oversized metadata.
  EXPECT_EQ(txn_commit("g", 7, "missing", 0, 1), to_wire(error_code::unknown_topic_or_partition));
  EXPECT_EQ(txn_commit("g", 7, "t", 100, 1), to_wire(error_code::unknown_topic_or_partition));
  auto big = txn_req("g", 7, "t", 0, 1);
  big.topics[0].partitions[0].committed_metadata = std::string(limits::max_offset_metadata_bytes + 1, 'x');
  EXPECT_EQ(txn_commit(big), to_wire(error_code::offset_metadata_too_large));

  // A static member fenced by its instance id.
  auto a = join(join_req("s", "", "instance-a"));
  ASSERT_TRUE(a.done());
  auto fenced = txn_req("s", 7, "t", 0, 1);
  fenced.generation_id = a->generation_id;
  fenced.member_id = "another";
  fenced.group_instance_id = "instance-a";
  EXPECT_EQ(txn_commit(fenced), to_wire(error_code::fenced_instance_id));
}

TEST_F(txn_offsets_test, TheCoordinatorsGatesAndWriteErrors) {
  const int32_t p = partition_for("g", cfg_.num_partitions);
  c_->unload_partition(p);
  EXPECT_EQ(txn_commit("g", 7, "t", 0, 1), to_wire(error_code::not_coordinator));
  c_ = std::make_unique<coordinator>(cfg_, log_, clk_, [this](std::function<void()> fn) { tasks_.push_back(fn); });
  EXPECT_EQ(txn_commit("g", 7, "t", 0, 1), to_wire(error_code::coordinator_load_in_progress));
  ASSERT_TRUE(c_->set_loaded());
  // The partition fences the producer's older epoch: that is the answer,
  // by version (TRANSACTION_ABORTABLE is v4's).
  log_.hold = true;
  for (auto [code, version, expected] :
       {std::tuple{errc::invalid_producer_epoch, int16_t{3}, error_code::invalid_producer_epoch},
        std::tuple{errc::transaction_abortable, int16_t{4}, error_code::transaction_abortable},
        std::tuple{errc::transaction_abortable, int16_t{3}, error_code::invalid_txn_state},
        std::tuple{errc::not_leader, int16_t{3}, error_code::not_coordinator},
        std::tuple{errc::not_enough_replicas, int16_t{3}, error_code::coordinator_not_available}}) {
    slot<proto::txn_offset_commit_response> s;
    c_->txn_offset_commit(txn_req("g", 7, "t", 0, 1), version, s.cb());
    run();
    log_.fail_all(code);
    run();
    ASSERT_TRUE(s.done());
    EXPECT_EQ(s->topics[0].partitions[0].error_code, to_wire(expected)) << errc_name(code);
  }
  EXPECT_EQ(fetch_stable("g", "t", 0).first, 0) << "a failed write leaves nothing pending";
  auto bad = txn_req("g", -1, "t", 0, 1);
  EXPECT_EQ(txn_commit(bad), to_wire(error_code::invalid_producer_id_mapping));
}

TEST_F(txn_offsets_test, PendingOffsetsCountTowardTheGroupsBound) {
  // One transaction fills the group to the bound with pending offsets.
  proto::txn_offset_commit_request r = txn_req("g", 7, "t0", 0, 1);
  r.topics.clear();
  for (size_t n = 0; n < limits::max_offsets_per_group; ++n) {
    if (n % 100 == 0) r.topics.emplace_back().name = "t" + std::to_string(n / 100);
    auto& p = r.topics.back().partitions.emplace_back();
    p.partition_index = static_cast<int32_t>(n % 100);
    p.committed_offset = 1;
    p.committed_metadata = "";
  }
  slot<proto::txn_offset_commit_response> s;
  c_->txn_offset_commit(r, 3, s.cb());
  run();
  ASSERT_TRUE(s.done());
  EXPECT_EQ(s->topics.back().partitions.back().error_code, 0);
  const int16_t too_many = to_wire(error_code::invalid_commit_offset_size);
  EXPECT_EQ(commit_error(commit("g", "", -1, "other", 0, 1)), too_many) << "a plain commit of a new partition";
  EXPECT_EQ(txn_commit("g", 8, "other", 0, 1), too_many) << "another producer's";
  EXPECT_EQ(txn_commit("g", 7, "t0", 0, 2), 0) << "the producer's own pending offset is replaced";
  EXPECT_EQ(commit_error(commit("g", "", -1, "t0", 1, 1)), too_many) << "pending elsewhere: a new committed one";
  end_txn("g", 7, false);
  EXPECT_EQ(commit_error(commit("g", "", -1, "other", 0, 1)), 0) << "the abort freed them";
}

TEST_F(txn_offsets_test, DeletingAGroupDropsItsPendingOffsets) {
  EXPECT_EQ(txn_commit("solo", 7, "t", 0, 10), 0);  // a group with pending offsets only
  ASSERT_EQ(commit_error(commit("both", "", -1, "t", 0, 5)), 0);
  EXPECT_EQ(txn_commit("both", 7, "t", 1, 10), 0);
  EXPECT_EQ(delete_groups({"solo", "both"}), (std::vector<int16_t>{0, 0}));
  EXPECT_EQ(fetch_stable("solo", "t", 0), std::make_pair(int16_t{0}, int64_t{-1}));
  EXPECT_EQ(fetch_stable("both", "t", 1), std::make_pair(int16_t{0}, int64_t{-1}));
  end_txn("solo", 7, true);
  end_txn("both", 7, true);
  EXPECT_EQ(fetch("solo", "t", 0), -1) << "the commit finds nothing pending";
  EXPECT_EQ(fetch("both", "t", 1), -1);
  restart();
  EXPECT_EQ(fetch("solo", "t", 0), -1) << "the deletion's tombstones drop them at replay too";
  EXPECT_EQ(fetch("both", "t", 1), -1);
  EXPECT_EQ(describe("solo").group_state, "Dead");
}

TEST_F(txn_offsets_test, PendingOffsetsNeitherExpireNorLetTheirGroupExpire) {
  ASSERT_EQ(commit_error(commit("g", "", -1, "t", 0, 5)), 0);
  ASSERT_EQ(commit_error(commit("g", "", -1, "t", 1, 5)), 0);
  EXPECT_EQ(txn_commit("g", 7, "t", 0, 10), 0);
  EXPECT_EQ(txn_commit("p", 7, "t", 0, 10), 0);  // pending only
  advance(cfg_.offsets_retention_ms + 2 * cfg_.offsets_retention_check_interval_ms);
  EXPECT_EQ(fetch("g", "t", 1), -1) << "the offset without a transaction expired";
  EXPECT_EQ(fetch("g", "t", 0), 5) << "the one a transaction may replace stays";
  EXPECT_EQ(describe("g").group_state, "Empty");
  EXPECT_EQ(describe("p").group_state, "Empty") << "a group with an open transaction stays";
  end_txn("g", 7, true);
  end_txn("p", 7, true);
  EXPECT_EQ(fetch("g", "t", 0), 10);
  EXPECT_EQ(fetch("p", "t", 0), 10);
}

}  // namespace
}  // namespace sluice::group
