// `sluice group list|describe|lag|reset-offsets|delete`, through librdkafka's
// admin API (ListConsumerGroups, DescribeConsumerGroups,
// ListConsumerGroupOffsets, AlterConsumerGroupOffsets, DeleteGroups).
//
// Share groups (KIP-932; cli/share_group.h: raw requests, librdkafka 2.0.2
// has no share-group API):
//   list            also asks every broker for its share groups (ListGroups
//                   v5, types "share") and prints them after the classic
//                   ones: GROUP  STATE  type=share
// `describe` and `reset-offsets` first ask the group's coordinator whether
// GROUP is a share group, and if so
//   describe        prints (tab-separated)
//                     group G  type=share  state=S  group_epoch=N
//                       assignment_epoch=N  assignor=simple  members=N
//                     member ID  client=C  host=H  member_epoch=N  [rack=R]
//                       partitions=T-P,...
//                     partition T-P  start_offset=N  leader_epoch=N  lag=N
//                       in_flight=N  archived=N
//                   (one partition line per share partition, from
//                   DescribeShareGroupOffsets, in_flight and archived from
//                   Sluice's tagged fields of it; "-" for what is not
//                   known: a start offset the share partition has no state
//                   for yet, a lag the coordinator cannot tell, counts a
//                   broker other than Sluice does not send, the epochs and
//                   assignor of a group its coordinator knows only by its
//                   share partitions' state, after a restart).
//   reset-offsets   sets the share partitions' start offsets of --topic
//                   with AlterShareGroupOffsets, resolved as for a classic
//                   group; the share group must be empty (no members), as
//                   the broker also checks (NON_EMPTY_GROUP).
// Exit status: 0 done, 1 failed (a message on stderr says why), 2 bad usage.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "cli/commands.h"
#include "cli/kafka_client.h"
#include "cli/share_group.h"
#include "maintenance/headroom.h"

namespace sluice::cli {
namespace {

struct group_options {
  std::string bootstrap = default_bootstrap;
  std::string group;
  std::string topic;
  int timeout_ms = default_timeout_ms;
  bool to_earliest = false;
  bool to_latest = false;
  std::optional<int64_t> to_offset;
  std::optional<int64_t> to_datetime_ms;
  bool dry_run = false;
};

int fail(const std::string& what) {
  std::fprintf(stderr, "sluice group: %s\n", what.c_str());
  return 1;
}

std::chrono::milliseconds timeout(const group_options& o) { return std::chrono::milliseconds(o.timeout_ms); }
std::chrono::milliseconds wait_timeout(const group_options& o) { return std::chrono::milliseconds(o.timeout_ms + 5000); }

result<client_ptr> admin_client(const group_options& o) {
  SLUICE_ASSIGN_OR_RETURN(auto conf, make_conf(o.bootstrap));
  return make_client(RD_KAFKA_PRODUCER, std::move(conf));
}

int run_list(const group_options& o) {
  auto rk = admin_client(o);
  if (!rk) return fail(rk.err().message);
  queue_ptr q(rd_kafka_queue_new(rk->get()));
  auto opts = admin_options(rk->get(), RD_KAFKA_ADMIN_OP_LISTCONSUMERGROUPS, timeout(o));
  rd_kafka_ListConsumerGroups(rk->get(), opts.get(), q.get());
  auto ev = wait_admin_result(q.get(), RD_KAFKA_EVENT_LISTCONSUMERGROUPS_RESULT, wait_timeout(o));
  if (!ev) return fail(ev.err().message);
  const auto* res = rd_kafka_event_ListConsumerGroups_result(ev->get());
  size_t n = 0, nerr = 0;
  auto valid = rd_kafka_ListConsumerGroups_result_valid(res, &n);
  auto errors = rd_kafka_ListConsumerGroups_result_errors(res, &nerr);
  std::map<std::string, std::string> rows;
  for (size_t i = 0; i < n; ++i) {
    rows[rd_kafka_ConsumerGroupListing_group_id(valid[i])] =
        rd_kafka_consumer_group_state_name(rd_kafka_ConsumerGroupListing_state(valid[i]));
  }
  for (const auto& [id, state] : rows) std::printf("%s\t%s\n", id.c_str(), state.c_str());
  for (size_t i = 0; i < nerr; ++i) std::fprintf(stderr, "sluice group: %s\n", rd_kafka_error_string(errors[i]));
  // librdkafka 2.0.2 drops groups whose protocol type is not "consumer".
  auto shares = list_share_groups(o.bootstrap, timeout(o));
  if (!shares) {
    std::fprintf(stderr, "sluice group: share groups: %s\n", shares.err().message.c_str());
    return 1;
  }
  for (const auto& [id, state] : *shares) std::printf("%s\t%s\ttype=share\n", id.c_str(), state.c_str());
  return nerr == 0 ? 0 : 1;
}

// The group's state name ("Empty", "Stable", ... or "Dead" when unknown).
result<std::string> print_description(rd_kafka_t* rk, const group_options& o, bool print) {
  queue_ptr q(rd_kafka_queue_new(rk));
  auto opts = admin_options(rk, RD_KAFKA_ADMIN_OP_DESCRIBECONSUMERGROUPS, timeout(o));
  const char* groups[] = {o.group.c_str()};
  rd_kafka_DescribeConsumerGroups(rk, groups, 1, opts.get(), q.get());
  SLUICE_ASSIGN_OR_RETURN(auto ev, wait_admin_result(q.get(), RD_KAFKA_EVENT_DESCRIBECONSUMERGROUPS_RESULT,
                                                     wait_timeout(o)));
  size_t n = 0;
  auto descs = rd_kafka_DescribeConsumerGroups_result_groups(rd_kafka_event_DescribeConsumerGroups_result(ev.get()), &n);
  if (n != 1) return error{errc::invalid_argument, "no description returned"};
  const auto* d = descs[0];
  if (const rd_kafka_error_t* e = rd_kafka_ConsumerGroupDescription_error(d))
    return error{errc::invalid_argument, rd_kafka_error_string(e)};
  std::string state = rd_kafka_consumer_group_state_name(rd_kafka_ConsumerGroupDescription_state(d));
  if (!print) return state;
  std::printf("group %s\tstate=%s\tassignor=%s\tmembers=%zu\n", o.group.c_str(), state.c_str(),
              rd_kafka_ConsumerGroupDescription_partition_assignor(d),
              rd_kafka_ConsumerGroupDescription_member_count(d));
  for (size_t i = 0; i < rd_kafka_ConsumerGroupDescription_member_count(d); ++i) {
    const auto* m = rd_kafka_ConsumerGroupDescription_member(d, i);
    const char* instance = rd_kafka_MemberDescription_group_instance_id(m);
    std::printf("member %s\tclient=%s\thost=%s%s%s\tpartitions=", rd_kafka_MemberDescription_consumer_id(m),
                rd_kafka_MemberDescription_client_id(m), rd_kafka_MemberDescription_host(m),
                instance ? "\tinstance=" : "", instance ? instance : "");
    const auto* parts = rd_kafka_MemberAssignment_partitions(rd_kafka_MemberDescription_assignment(m));
    for (int j = 0; parts && j < parts->cnt; ++j)
      std::printf("%s%s-%d", j ? "," : "", parts->elems[j].topic, parts->elems[j].partition);
    std::printf("\n");
  }
  return state;
}

int run_describe(const group_options& o) {
  auto share = find_share_group(o.bootstrap, o.group, timeout(o));
  if (!share) return fail(share.err().message);
  if (*share) return print_share_group(**share);
  auto rk = admin_client(o);
  if (!rk) return fail(rk.err().message);
  auto s = print_description(rk->get(), o, true);
  return s ? 0 : fail(s.err().message);
}

// Committed offsets of the group, every partition it has committed.
result<partition_list_ptr> committed_offsets(rd_kafka_t* rk, const group_options& o) {
  queue_ptr q(rd_kafka_queue_new(rk));
  auto opts = admin_options(rk, RD_KAFKA_ADMIN_OP_LISTCONSUMERGROUPOFFSETS, timeout(o));
  rd_kafka_ListConsumerGroupOffsets_t* req = rd_kafka_ListConsumerGroupOffsets_new(o.group.c_str(), nullptr);
  rd_kafka_ListConsumerGroupOffsets(rk, &req, 1, opts.get(), q.get());
  rd_kafka_ListConsumerGroupOffsets_destroy(req);
  SLUICE_ASSIGN_OR_RETURN(auto ev, wait_admin_result(q.get(), RD_KAFKA_EVENT_LISTCONSUMERGROUPOFFSETS_RESULT,
                                                     wait_timeout(o)));
  size_t n = 0;
  auto groups = rd_kafka_ListConsumerGroupOffsets_result_groups(
      rd_kafka_event_ListConsumerGroupOffsets_result(ev.get()), &n);
  if (n != 1) return error{errc::invalid_argument, "no offsets returned"};
  if (const rd_kafka_error_t* e = rd_kafka_group_result_error(groups[0]))
    return error{errc::invalid_argument, rd_kafka_error_string(e)};
  return partition_list_ptr(rd_kafka_topic_partition_list_copy(rd_kafka_group_result_partitions(groups[0])));
}

// The timestamp of the record at `offset` in each partition, read with a
// group-less consumer (nothing is committed).
std::map<std::pair<std::string, int>, int64_t> timestamps_at(const group_options& o,
                                                             const std::vector<std::pair<std::pair<std::string, int>, int64_t>>& at) {
  std::map<std::pair<std::string, int>, int64_t> out;
  if (at.empty()) return out;
  auto conf = make_conf(o.bootstrap, {{"enable.auto.commit", "false"}, {"group.id", "sluice-group-lag"}});
  if (!conf) return out;
  auto rk = make_client(RD_KAFKA_CONSUMER, std::move(*conf));
  if (!rk) return out;
  partition_list_ptr list(rd_kafka_topic_partition_list_new(static_cast<int>(at.size())));
  for (const auto& [tp, off] : at) rd_kafka_topic_partition_list_add(list.get(), tp.first.c_str(), tp.second)->offset = off;
  if (rd_kafka_assign(rk->get(), list.get()) != RD_KAFKA_RESP_ERR_NO_ERROR) return out;
  const sluice::deadline until(5'000, sluice::clock::system());
  while (out.size() < at.size() && !until.passed()) {
    rd_kafka_message_t* m = rd_kafka_consumer_poll(rk->get(), 100);
    if (!m) continue;
    if (!m->err) {
      std::pair<std::string, int> tp{rd_kafka_topic_name(m->rkt), m->partition};
      if (!out.count(tp)) out[tp] = rd_kafka_message_timestamp(m, nullptr);
    }
    rd_kafka_message_destroy(m);
  }
  rd_kafka_consumer_close(rk->get());
  return out;
}

// What `group lag` needs of a topic's config to judge retention.
struct topic_retention {
  cluster::retention_policy policy;
};

int64_t parse_i64(const char* v, int64_t fallback) {
  if (!v) return fallback;
  char* end = nullptr;
  long long x = std::strtoll(v, &end, 10);
  return (end && *end == 0 && end != v) ? x : fallback;
}

// retention.ms, retention.bytes and cleanup.policy of each topic, and the
// broker's sluice.retention.headroom.alert.ms (24 h when the broker does not
// have it, as with a Kafka broker), through DescribeConfigs.
result<std::map<std::string, topic_retention>> describe_retention(
    rd_kafka_t* rk, const group_options& o, const std::vector<std::string>& topics,
    int64_t* alert_ms) {
  *alert_ms = 24ll * 3600 * 1000;
  std::map<std::string, topic_retention> out;
  auto md = fetch_metadata(rk, "", timeout(o));
  if (!md) return md.err();
  std::vector<rd_kafka_ConfigResource_t*> res;
  for (const auto& t : topics)
    res.push_back(rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_TOPIC, t.c_str()));
  if ((*md)->broker_cnt > 0) {
    res.push_back(rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_BROKER,
                                              std::to_string((*md)->brokers[0].id).c_str()));
  }
  queue_ptr q(rd_kafka_queue_new(rk));
  auto opts = admin_options(rk, RD_KAFKA_ADMIN_OP_DESCRIBECONFIGS, timeout(o));
  rd_kafka_DescribeConfigs(rk, res.data(), res.size(), opts.get(), q.get());
  for (auto* r : res) rd_kafka_ConfigResource_destroy(r);
  SLUICE_ASSIGN_OR_RETURN(
      auto ev, wait_admin_result(q.get(), RD_KAFKA_EVENT_DESCRIBECONFIGS_RESULT, wait_timeout(o)));
  size_t n = 0;
  auto got = rd_kafka_DescribeConfigs_result_resources(
      rd_kafka_event_DescribeConfigs_result(ev.get()), &n);
  for (size_t i = 0; i < n; ++i) {
    if (rd_kafka_ConfigResource_error(got[i]) != RD_KAFKA_RESP_ERR_NO_ERROR) continue;
    size_t m = 0;
    auto entries = rd_kafka_ConfigResource_configs(got[i], &m);
    const bool broker = rd_kafka_ConfigResource_type(got[i]) == RD_KAFKA_RESOURCE_BROKER;
    topic_retention tr;
    for (size_t j = 0; j < m; ++j) {
      const std::string name = rd_kafka_ConfigEntry_name(entries[j]);
      const char* v = rd_kafka_ConfigEntry_value(entries[j]);
      if (broker) {
        if (name == "sluice.retention.headroom.alert.ms") *alert_ms = parse_i64(v, *alert_ms);
      } else if (name == "retention.ms") {
        tr.policy.retention_ms = parse_i64(v, -1);
      } else if (name == "retention.bytes") {
        tr.policy.retention_bytes = parse_i64(v, -1);
      } else if (name == "cleanup.policy") {
        tr.policy.deletes = v && std::string(v).find("delete") != std::string::npos;
      }
    }
    if (!broker) out[rd_kafka_ConfigResource_name(got[i])] = tr;
  }
  return out;
}

std::string format_ms(std::optional<int64_t> ms) {
  return ms ? std::to_string(*ms) : "inf";
}

int run_lag(const group_options& o) {
  auto rk = admin_client(o);
  if (!rk) return fail(rk.err().message);
  auto committed = committed_offsets(rk->get(), o);
  if (!committed) return fail(committed.err().message);
  struct row {
    std::string topic;
    int partition;
    int64_t committed, log_start, high, lag;
  };
  std::vector<row> rows;
  std::vector<std::pair<std::pair<std::string, int>, int64_t>> unread;
  std::vector<std::string> topics;
  for (int i = 0; i < (*committed)->cnt; ++i) {
    const auto& e = (*committed)->elems[i];
    if (!o.topic.empty() && o.topic != e.topic) continue;
    int64_t lo = 0, hi = 0;
    if (rd_kafka_query_watermark_offsets(rk->get(), e.topic, e.partition, &lo, &hi, o.timeout_ms) !=
        RD_KAFKA_RESP_ERR_NO_ERROR)
      return fail(std::string("watermarks of ") + e.topic);
    // Lag counts from the committed offset, lost messages included, as the
    // broker's sluice_group_lag_messages does.
    const int64_t from = e.offset >= 0 ? e.offset : lo;
    rows.push_back({e.topic, e.partition, e.offset, lo, hi, std::max<int64_t>(0, hi - from)});
    // The oldest unconsumed message still there.
    const int64_t oldest = std::max(from, lo);
    if (hi > oldest) unread.push_back({{e.topic, e.partition}, oldest});
    if (std::find(topics.begin(), topics.end(), e.topic) == topics.end()) topics.push_back(e.topic);
  }
  std::sort(rows.begin(), rows.end(), [](const row& a, const row& b) {
    return std::tie(a.topic, a.partition) < std::tie(b.topic, b.partition);
  });
  int64_t alert_ms = 0;
  auto retention = describe_retention(rk->get(), o, topics, &alert_ms);
  if (!retention) return fail("topic configs: " + retention.err().message);
  auto ts = timestamps_at(o, unread);
  const int64_t now = sluice::clock::system().now_ms();
  int64_t total = 0;
  bool marked = false, size_limited = false;
  std::printf(
      "topic\tpartition\tcommitted\thigh_watermark\tlag_messages\tlag_ms\theadroom_ms\tlost\n");
  for (const auto& r : rows) {
    total += r.lag;
    auto it = ts.find({r.topic, r.partition});
    std::string lag_ms = r.lag == 0 ? "0" : (it == ts.end() ? "?" : std::to_string(std::max<int64_t>(0, now - it->second)));
    // Headroom as the broker computes it (maintenance/headroom.h). Through the
    // Kafka protocol the tool sees records, not segments: the timestamp of
    // the oldest unconsumed record stands in for its segment's largest
    // timestamp, so this is a lower bound of the broker's figure, and size
    // retention is left to /metrics.
    std::optional<int64_t> headroom;
    const int64_t lost =
        r.committed >= 0 && r.committed < r.log_start ? r.log_start - r.committed : 0;
    auto rt = retention->find(r.topic);
    if (r.lag > 0) {
      if (lost > 0) {
        headroom = 0;
      } else if (rt != retention->end()) {
        cluster::unconsumed_position pos;
        if (it != ts.end()) pos.segment_max_timestamp_ms = it->second;
        headroom = cluster::retention_headroom_ms(rt->second.policy, pos, now, 0);
      }
    }
    if (rt != retention->end() && rt->second.policy.deletes &&
        rt->second.policy.retention_bytes >= 0)
      size_limited = true;
    const bool warn = headroom && *headroom < alert_ms;
    marked = marked || warn;
    std::printf("%s\t%d\t%lld\t%lld\t%lld\t%s\t%s%s\t%s\n", r.topic.c_str(), r.partition,
                static_cast<long long>(r.committed), static_cast<long long>(r.high),
                static_cast<long long>(r.lag), lag_ms.c_str(), format_ms(headroom).c_str(),
                warn ? " !" : "", lost > 0 ? std::to_string(lost).c_str() : "");
  }
  std::printf("total lag %lld messages\n", static_cast<long long>(total));
  if (marked) {
    std::fprintf(
        stderr,
        "sluice group lag: ! marks headroom under %lld ms (sluice.retention.headroom.alert.ms): "
        "retention will soon delete messages this group has not read\n",
        static_cast<long long>(alert_ms));
  }
  if (size_limited) {
    std::fprintf(stderr,
                 "sluice group lag: retention.bytes is set; headroom here counts time only "
                 "(the broker's /metrics counts size too)\n");
  }
  return 0;
}

// The new offsets of --topic's partitions, as the options choose them:
// the log start offset (--to-earliest), the high watermark (--to-latest),
// an offset clamped to the log (--to-offset), or the first offset at or
// after a time (--to-datetime; the high watermark where nothing is that
// new), through ListOffsets.
result<partition_list_ptr> reset_targets(rd_kafka_t* rk, const group_options& o) {
  SLUICE_ASSIGN_OR_RETURN(auto md, fetch_metadata(rk, o.topic, timeout(o)));
  if (md->topic_cnt != 1 || md->topics[0].err) return error{errc::not_found, "no topic " + o.topic};
  const int partitions = md->topics[0].partition_cnt;
  partition_list_ptr target(rd_kafka_topic_partition_list_new(partitions));
  auto watermarks = [&](int p, int64_t* lo, int64_t* hi) -> status {
    if (rd_kafka_query_watermark_offsets(rk, o.topic.c_str(), p, lo, hi, o.timeout_ms) != RD_KAFKA_RESP_ERR_NO_ERROR)
      return status(errc::unavailable, "watermarks of " + o.topic);
    return {};
  };
  for (int p = 0; p < partitions; ++p) {
    int64_t lo = 0, hi = 0;
    SLUICE_TRY(watermarks(p, &lo, &hi));
    int64_t off = o.to_earliest ? lo : hi;
    if (o.to_offset) off = std::clamp(*o.to_offset, lo, hi);
    rd_kafka_topic_partition_list_add(target.get(), o.topic.c_str(), p)->offset = o.to_datetime_ms ? *o.to_datetime_ms : off;
  }
  if (o.to_datetime_ms) {
    if (rd_kafka_offsets_for_times(rk, target.get(), o.timeout_ms) != RD_KAFKA_RESP_ERR_NO_ERROR)
      return error{errc::unavailable, "offsets for the time could not be looked up"};
    for (int i = 0; i < target->cnt; ++i) {
      if (target->elems[i].offset < 0) {
        int64_t lo = 0, hi = 0;
        SLUICE_TRY(watermarks(target->elems[i].partition, &lo, &hi));
        target->elems[i].offset = hi;
      }
    }
  }
  return target;
}

// AlterShareGroupOffsets with the targets as the share partitions' start offsets.
int reset_share_group(share_group_view& view, const group_options& o, const rd_kafka_topic_partition_list_t& target) {
  std::vector<share_start_offset> offsets;
  for (int i = 0; i < target.cnt; ++i)
    offsets.push_back({target.elems[i].topic, target.elems[i].partition, target.elems[i].offset});
  auto s = alter_share_group_offsets(view, offsets);
  if (!s.ok()) return fail(s.err().message);
  std::printf("reset %s on %s\n", o.group.c_str(), o.topic.c_str());
  return 0;
}

int run_reset(const group_options& o) {
  const int modes = int{o.to_earliest} + int{o.to_latest} + int{o.to_offset.has_value()} +
                    int{o.to_datetime_ms.has_value()};
  if (modes != 1) {
    std::fprintf(stderr, "sluice group reset-offsets: give exactly one of --to-earliest, --to-latest, "
                         "--to-offset, --to-datetime\n");
    return 2;
  }
  auto share = find_share_group(o.bootstrap, o.group, timeout(o));
  if (!share) return fail(share.err().message);
  auto rk = admin_client(o);
  if (!rk) return fail(rk.err().message);
  if (*share) {
    const auto& g = (*share)->group;
    if (g.group_state != "Empty" && !o.dry_run)
      return fail("share group " + o.group + " is " + g.group_state + " (members: " + std::to_string(g.members.size()) +
                  "): stop its share consumers first (or use --dry-run)");
  } else {
    auto state = print_description(rk->get(), o, false);
    if (!state) return fail(state.err().message);
    if (*state != "Empty" && *state != "Dead" && !o.dry_run)
      return fail("group " + o.group + " is " + *state + ": stop its members first (or use --dry-run)");
  }
  auto target = reset_targets(rk->get(), o);
  if (!target) return fail(target.err().message);
  for (int i = 0; i < (*target)->cnt; ++i)
    std::printf("%s\t%d\t%lld%s\n", (*target)->elems[i].topic, (*target)->elems[i].partition,
                static_cast<long long>((*target)->elems[i].offset), o.dry_run ? "\t(dry run)" : "");
  if (o.dry_run) return 0;
  if (*share) return reset_share_group(**share, o, **target);
  queue_ptr q(rd_kafka_queue_new(rk->get()));
  auto opts = admin_options(rk->get(), RD_KAFKA_ADMIN_OP_ALTERCONSUMERGROUPOFFSETS, timeout(o));
  rd_kafka_AlterConsumerGroupOffsets_t* req = rd_kafka_AlterConsumerGroupOffsets_new(o.group.c_str(), target->get());
  rd_kafka_AlterConsumerGroupOffsets(rk->get(), &req, 1, opts.get(), q.get());
  rd_kafka_AlterConsumerGroupOffsets_destroy(req);
  auto ev = wait_admin_result(q.get(), RD_KAFKA_EVENT_ALTERCONSUMERGROUPOFFSETS_RESULT, wait_timeout(o));
  if (!ev) return fail(ev.err().message);
  size_t n = 0;
  auto groups = rd_kafka_AlterConsumerGroupOffsets_result_groups(
      rd_kafka_event_AlterConsumerGroupOffsets_result(ev->get()), &n);
  if (n != 1) return fail("no result returned");
  if (const rd_kafka_error_t* e = rd_kafka_group_result_error(groups[0])) return fail(rd_kafka_error_string(e));
  int rc = 0;
  const auto* parts = rd_kafka_group_result_partitions(groups[0]);
  for (int i = 0; parts && i < parts->cnt; ++i) {
    if (parts->elems[i].err) {
      std::fprintf(stderr, "sluice group: %s-%d: %s\n", parts->elems[i].topic, parts->elems[i].partition,
                   rd_kafka_err2name(parts->elems[i].err));
      rc = 1;
    }
  }
  if (rc == 0) std::printf("reset %s on %s\n", o.group.c_str(), o.topic.c_str());
  return rc;
}

int run_delete(const group_options& o) {
  auto rk = admin_client(o);
  if (!rk) return fail(rk.err().message);
  queue_ptr q(rd_kafka_queue_new(rk->get()));
  auto opts = admin_options(rk->get(), RD_KAFKA_ADMIN_OP_DELETEGROUPS, timeout(o));
  rd_kafka_DeleteGroup_t* dg = rd_kafka_DeleteGroup_new(o.group.c_str());
  rd_kafka_DeleteGroups(rk->get(), &dg, 1, opts.get(), q.get());
  rd_kafka_DeleteGroup_destroy(dg);
  auto ev = wait_admin_result(q.get(), RD_KAFKA_EVENT_DELETEGROUPS_RESULT, wait_timeout(o));
  if (!ev) return fail(ev.err().message);
  size_t n = 0;
  auto groups = rd_kafka_DeleteGroups_result_groups(rd_kafka_event_DeleteGroups_result(ev->get()), &n);
  if (n != 1) return fail("no result returned");
  if (const rd_kafka_error_t* e = rd_kafka_group_result_error(groups[0])) return fail(rd_kafka_error_string(e));
  std::printf("deleted %s\n", o.group.c_str());
  return 0;
}

}  // namespace

void add_group_command(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<group_options>();
  auto* cmd = app.add_subcommand("group", "List, inspect, reset and delete consumer groups");
  cmd->require_subcommand(1);
  auto common = [&](CLI::App* sub, bool needs_group) {
    sub->add_option("-b,--bootstrap", o->bootstrap, "Broker address")->capture_default_str();
    sub->add_option("--timeout-ms", o->timeout_ms, "Request timeout")->capture_default_str();
    if (needs_group) sub->add_option("-g,--group", o->group, "Group id")->required();
  };
  auto* list = cmd->add_subcommand("list", "Groups and their states");
  common(list, false);
  list->callback([o, exit_code] { *exit_code = run_list(*o); });
  auto* describe = cmd->add_subcommand("describe", "Members of a group and their partitions");
  common(describe, true);
  describe->callback([o, exit_code] { *exit_code = run_describe(*o); });
  auto* lag = cmd->add_subcommand("lag",
                                  "Lag per partition in messages and time, retention headroom (! "
                                  "under the alert threshold) and "
                                  "messages already lost to retention");
  common(lag, true);
  lag->add_option("-t,--topic", o->topic, "Only this topic");
  lag->callback([o, exit_code] { *exit_code = run_lag(*o); });
  auto* reset = cmd->add_subcommand("reset-offsets", "Move an inactive group's committed offsets of one topic");
  common(reset, true);
  reset->add_option("-t,--topic", o->topic, "Topic")->required();
  reset->add_flag("--to-earliest", o->to_earliest, "The log start offset");
  reset->add_flag("--to-latest", o->to_latest, "The high watermark");
  reset->add_option("--to-offset", o->to_offset, "An offset (clamped to the log)");
  reset->add_option("--to-datetime", o->to_datetime_ms, "A time in ms since the epoch");
  reset->add_flag("--dry-run", o->dry_run, "Print the new offsets without committing them");
  reset->callback([o, exit_code] { *exit_code = run_reset(*o); });
  auto* del = cmd->add_subcommand("delete", "Delete an empty group and its offsets");
  common(del, true);
  del->callback([o, exit_code] { *exit_code = run_delete(*o); });
}

}  // namespace sluice::cli
