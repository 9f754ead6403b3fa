#include "etcd/fake_client.h"

#include <atomic>
#include <thread>

#include <gtest/gtest.h>

#include "etcd/lease_keeper.h"

namespace sluice::etcd {
namespace {

struct recorder {
  std::vector<watch_update> updates;
  watch_callback cb() {
    return [this](const watch_update& u) { updates.push_back(u); };
  }
  // Every event delivered, flattened.
  std::vector<watch_event> events() const {
    std::vector<watch_event> out;
    for (const auto& u : updates) {
      if (u.type == watch_update::kind::events)
        out.insert(out.end(), u.events.begin(), u.events.end());
    }
    return out;
  }
};

class fake_client_test : public ::testing::Test {
 protected:
  manual_clock clk_;
  fake_client etcd_{clk_};
};

TEST(key_range_test, prefix_ends_like_etcd) {
  EXPECT_EQ(key_range::prefix("abc").range_end, "abd");
  EXPECT_EQ(key_range::prefix(std::string("a\xff", 2)).range_end, "b");
  EXPECT_EQ(key_range::prefix(std::string("\xff\xff", 2)).range_end, std::string(1, '\0'));
  EXPECT_EQ(key_range::prefix("").key, std::string(1, '\0'));
  EXPECT_TRUE(key_range::prefix("a/").contains("a/b"));
  EXPECT_FALSE(key_range::prefix("a/").contains("a0"));
  EXPECT_TRUE(key_range::prefix("").contains("anything"));
  EXPECT_TRUE(key_range::one("k").contains("k"));
  EXPECT_FALSE(key_range::one("k").contains("k2"));
}

TEST_F(fake_client_test, revisions_versions_and_prefix_ranges) {
  EXPECT_EQ(etcd_.revision(), 1);
  auto p1 = etcd_.put("/t/a", "1");
  ASSERT_TRUE(p1.ok());
  EXPECT_EQ(p1->header_revision, 2);
  ASSERT_TRUE(etcd_.put("/t/b", "2").ok());
  auto p3 = etcd_.put("/t/a", "3", put_options{.prev_kv = true});
  ASSERT_TRUE(p3.ok());
  ASSERT_TRUE(p3->prev_kv.has_value());
  EXPECT_EQ(p3->prev_kv->value, "1");
  ASSERT_TRUE(etcd_.put("/u", "x").ok());

  auto r = etcd_.range(key_range::prefix("/t/"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->header_revision, 5);
  ASSERT_EQ(r->kvs.size(), 2u);
  EXPECT_EQ(r->kvs[0], (key_value{"/t/a", "3", 2, 4, 2, 0}));
  EXPECT_EQ(r->kvs[1], (key_value{"/t/b", "2", 3, 3, 1, 0}));

  auto limited = etcd_.range(key_range::prefix("/t/"), range_options{.limit = 1});
  ASSERT_TRUE(limited.ok());
  EXPECT_EQ(limited->kvs.size(), 1u);
  EXPECT_TRUE(limited->more);
  EXPECT_EQ(limited->count, 2);

  // A read at an older revision sees the store as it was.
  auto old = etcd_.range(key_range::one("/t/a"), range_options{.revision = 2});
  ASSERT_TRUE(old.ok());
  ASSERT_EQ(old->kvs.size(), 1u);
  EXPECT_EQ(old->kvs[0].value, "1");

  // A delete of nothing leaves the revision; a delete of something moves it.
  auto d0 = etcd_.delete_range(key_range::one("/nope"));
  ASSERT_TRUE(d0.ok());
  EXPECT_EQ(d0->deleted, 0);
  EXPECT_EQ(etcd_.revision(), 5);
  auto d = etcd_.delete_range(key_range::prefix("/t/"), true);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->deleted, 2);
  EXPECT_EQ(d->prev_kvs.size(), 2u);
  EXPECT_EQ(etcd_.revision(), 6);

  // Re-created keys start over at version 1 with a new create revision.
  ASSERT_TRUE(etcd_.put("/t/a", "again").ok());
  auto again = etcd_.range(key_range::one("/t/a"));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->kvs[0].version, 1);
  EXPECT_EQ(again->kvs[0].create_revision, 7);

  EXPECT_EQ(etcd_.range(key_range::one("/t/a"), range_options{.revision = 99}).code(),
            errc::offset_out_of_range);
  EXPECT_EQ(etcd_.put("", "v").code(), errc::invalid_argument);
}

TEST_F(fake_client_test, txn_create_if_absent_and_compare_and_swap) {
  txn_request create{{compare::absent("/leader")},
                     {put_op{"/leader", "me", {}}},
                     {range_op{key_range::one("/leader"), {}}}};
  auto first = etcd_.txn(create);
  ASSERT_TRUE(first.ok());
  EXPECT_TRUE(first->succeeded);
  EXPECT_EQ(first->header_revision, 2);
  auto second = etcd_.txn(create);
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(second->succeeded);
  EXPECT_EQ(second->header_revision, 2);  // no writes: no new revision
  ASSERT_EQ(second->results.size(), 1u);
  const auto& seen = std::get<range_result>(second->results[0]);
  ASSERT_EQ(seen.kvs.size(), 1u);
  EXPECT_EQ(seen.kvs[0].value, "me");

  // Compare-and-swap on mod_revision: only the writer that read revision 2 wins.
  txn_request cas{{compare::unchanged_since("/leader", 2)}, {put_op{"/leader", "you", {}}}, {}};
  auto won = etcd_.txn(cas);
  ASSERT_TRUE(won.ok());
  EXPECT_TRUE(won->succeeded);
  auto lost = etcd_.txn(cas);
  ASSERT_TRUE(lost.ok());
  EXPECT_FALSE(lost->succeeded);
}

TEST_F(fake_client_test, txn_compares_like_etcd) {
  ASSERT_TRUE(etcd_.put("k", "m").ok());  // rev 2, version 1
  ASSERT_TRUE(etcd_.put("k", "m").ok());  // rev 3, version 2
  auto holds = [&](compare c) {
    auto r = etcd_.txn(txn_request{{std::move(c)}, {}, {}});
    EXPECT_TRUE(r.ok());
    return r.ok() && r->succeeded;
  };
  using T = compare_target;
  using O = compare_op;
  EXPECT_TRUE(holds(compare::value_is("k", O::equal, "m")));
  EXPECT_TRUE(holds(compare::value_is("k", O::less, "n")));
  EXPECT_TRUE(holds(compare::value_is("k", O::greater, "l")));
  EXPECT_TRUE(holds(compare::value_is("k", O::not_equal, "x")));
  EXPECT_FALSE(holds(compare::value_is("k", O::greater, "m")));
  EXPECT_TRUE(holds(compare::number_is("k", T::version, O::equal, 2)));
  EXPECT_TRUE(holds(compare::number_is("k", T::create_revision, O::equal, 2)));
  EXPECT_TRUE(holds(compare::number_is("k", T::mod_revision, O::equal, 3)));
  EXPECT_TRUE(holds(compare::number_is("k", T::mod_revision, O::greater, 2)));
  EXPECT_TRUE(holds(compare::number_is("k", T::mod_revision, O::less, 4)));
  EXPECT_TRUE(holds(compare::number_is("k", T::lease, O::equal, 0)));
  // An absent key: numbers are 0, and a value compare always fails, even "!=".
  EXPECT_TRUE(holds(compare::number_is("none", T::version, O::equal, 0)));
  EXPECT_TRUE(holds(compare::number_is("none", T::mod_revision, O::less, 1)));
  EXPECT_FALSE(holds(compare::value_is("none", O::not_equal, "x")));
  EXPECT_FALSE(holds(compare::value_is("none", O::equal, "")));
  // Bytes compare unsigned: 0xff sorts after 'a'.
  ASSERT_TRUE(etcd_.put("hi", std::string("\xff", 1)).ok());
  EXPECT_TRUE(holds(compare::value_is("hi", O::greater, "a")));
  // All compares must hold.
  auto both =
      etcd_.txn(txn_request{{compare::value_is("k", O::equal, "m"), compare::absent("k")}, {}, {}});
  ASSERT_TRUE(both.ok());
  EXPECT_FALSE(both->succeeded);
}

TEST_F(fake_client_test, txn_branch_checks) {
  auto dup = etcd_.txn(txn_request{{}, {put_op{"a", "1", {}}, put_op{"a", "2", {}}}, {}});
  EXPECT_EQ(dup.code(), errc::invalid_argument);
  auto put_and_delete =
      etcd_.txn(txn_request{{}, {put_op{"a/x", "1", {}}}, {delete_op{key_range::prefix("a/")}}});
  EXPECT_TRUE(put_and_delete.ok());  // different branches may touch one key
  auto overlap =
      etcd_.txn(txn_request{{}, {put_op{"a/x", "1", {}}, delete_op{key_range::prefix("a/")}}, {}});
  EXPECT_EQ(overlap.code(), errc::invalid_argument);
  auto bad_lease = etcd_.txn(txn_request{{}, {put_op{"a", "1", {.lease = 42}}}, {}});
  EXPECT_EQ(bad_lease.code(), errc::not_found);
  EXPECT_EQ(etcd_.put("a", "1", {.lease = 42}).code(), errc::not_found);

  // One revision for all writes of a txn; a range sees the earlier writes.
  auto multi = etcd_.txn(txn_request{
      {},
      {put_op{"m/1", "a", {}}, put_op{"m/2", "b", {}}, range_op{key_range::prefix("m/"), {}}},
      {}});
  ASSERT_TRUE(multi.ok());
  const int64_t rev = multi->header_revision;
  EXPECT_EQ(std::get<range_result>(multi->results[2]).kvs.size(), 2u);
  auto r = etcd_.range(key_range::prefix("m/"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->kvs[0].mod_revision, rev);
  EXPECT_EQ(r->kvs[1].mod_revision, rev);
}

TEST_F(fake_client_test, lease_expiry_deletes_keys_with_events) {
  auto lease = etcd_.lease_grant(10);
  ASSERT_TRUE(lease.ok());
  ASSERT_TRUE(etcd_.put("/brokers/1", "a", {.lease = lease->id}).ok());
  ASSERT_TRUE(etcd_.put("/brokers/2", "b", {.lease = lease->id}).ok());
  ASSERT_TRUE(etcd_.put("/brokers/3", "c").ok());
  recorder rec;
  auto w = etcd_.watch(key_range::prefix("/brokers/"), 0, rec.cb());
  ASSERT_TRUE(w.ok());

  clk_.advance_ms(9'000);
  EXPECT_EQ(etcd_.expire_leases(), 0u);
  auto ka = etcd_.lease_keepalive_once(lease->id, 0);
  ASSERT_TRUE(ka.ok());
  EXPECT_EQ(*ka, 10);
  clk_.advance_ms(9'000);
  EXPECT_EQ(etcd_.expire_leases(), 0u);  // renewed 9 s ago
  EXPECT_EQ(*etcd_.lease_time_to_live(lease->id), 1);
  clk_.advance_ms(1'000);
  const int64_t before = etcd_.revision();
  EXPECT_EQ(etcd_.expire_leases(), 1u);
  EXPECT_EQ(etcd_.revision(), before + 1);  // both keys in one revision

  auto r = etcd_.range(key_range::prefix("/brokers/"));
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->kvs.size(), 1u);
  EXPECT_EQ(r->kvs[0].key, "/brokers/3");
  auto ev = rec.events();
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].type, watch_event::kind::del);
  EXPECT_EQ(ev[0].kv.key, "/brokers/1");
  EXPECT_EQ(ev[0].kv.mod_revision, before + 1);
  EXPECT_EQ(ev[1].kv.key, "/brokers/2");
  EXPECT_EQ(*etcd_.lease_keepalive_once(lease->id, 0), 0);
  EXPECT_EQ(etcd_.lease_revoke(lease->id).code(), errc::not_found);
}

TEST_F(fake_client_test, leases_expire_on_any_call_and_revoke_deletes) {
  auto l1 = etcd_.lease_grant(5);
  auto l2 = etcd_.lease_grant(5);
  ASSERT_TRUE(l1.ok() && l2.ok());
  EXPECT_NE(l1->id, l2->id);
  ASSERT_TRUE(etcd_.put("x", "1", {.lease = l1->id}).ok());
  ASSERT_TRUE(etcd_.put("y", "1", {.lease = l2->id}).ok());
  ASSERT_TRUE(etcd_.lease_revoke(l2->id).ok());
  EXPECT_TRUE(etcd_.range(key_range::one("y"))->kvs.empty());
  clk_.advance_ms(5'000);
  // No expire_leases(): the range itself expires the lease first.
  EXPECT_TRUE(etcd_.range(key_range::one("x"))->kvs.empty());
  EXPECT_EQ(etcd_.lease_count(), 0u);
}

TEST_F(fake_client_test, watch_delivers_in_revision_order_and_replays_history) {
  ASSERT_TRUE(etcd_.put("/w/a", "1").ok());    // rev 2
  ASSERT_TRUE(etcd_.put("/x", "other").ok());  // rev 3
  ASSERT_TRUE(etcd_.put("/w/b", "2").ok());    // rev 4
  recorder rec;
  auto w = etcd_.watch(key_range::prefix("/w/"), 2, rec.cb());
  ASSERT_TRUE(w.ok());
  // History replayed synchronously inside watch().
  ASSERT_EQ(rec.events().size(), 2u);
  ASSERT_TRUE(etcd_.delete_range(key_range::one("/w/a")).ok());  // rev 5
  ASSERT_TRUE(etcd_.txn(txn_request{{}, {put_op{"/w/c", "3", {}}, put_op{"/w/d", "4", {}}}, {}})
                  .ok());  // rev 6
  auto ev = rec.events();
  ASSERT_EQ(ev.size(), 5u);
  int64_t last = 0;
  for (const auto& e : ev) {
    EXPECT_GE(e.kv.mod_revision, last);
    last = e.kv.mod_revision;
  }
  EXPECT_EQ(ev[2].type, watch_event::kind::del);
  EXPECT_EQ(ev[2].kv.mod_revision, 5);
  EXPECT_EQ(ev[3].kv.mod_revision, 6);
  EXPECT_EQ(ev[4].kv.mod_revision, 6);
  EXPECT_EQ(ev[4].kv.create_revision, 6);
  EXPECT_EQ(ev[4].kv.version, 1);

  (*w)->cancel();
  ASSERT_TRUE(etcd_.put("/w/e", "5").ok());
  EXPECT_EQ(rec.events().size(), 5u);
  EXPECT_EQ(etcd_.live_watches(), 0u);
}

TEST_F(fake_client_test, callback_may_write_and_its_events_come_after) {
  std::vector<int64_t> revs;
  std::unique_ptr<watch_handle> w;
  auto r = etcd_.watch(key_range::prefix("/c/"), 0, [&](const watch_update& u) {
    for (const auto& e : u.events) {
      revs.push_back(e.kv.mod_revision);
      if (e.kv.key == "/c/ping") {
        EXPECT_TRUE(etcd_.put("/c/pong", "1").ok());
      }
    }
  });
  ASSERT_TRUE(r.ok());
  w = std::move(r).value();
  ASSERT_TRUE(etcd_.put("/c/ping", "1").ok());
  EXPECT_EQ(revs, (std::vector<int64_t>{2, 3}));
}

TEST_F(fake_client_test, a_callback_may_cancel_its_own_watch) {
  int calls = 0;
  std::unique_ptr<watch_handle> w;
  auto r = etcd_.watch(key_range::prefix("/s/"), 0, [&](const watch_update&) {
    ++calls;
    w->cancel();
  });
  ASSERT_TRUE(r.ok());
  w = std::move(r).value();
  ASSERT_TRUE(etcd_.put("/s/1", "a").ok());
  ASSERT_TRUE(etcd_.put("/s/2", "b").ok());
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(etcd_.live_watches(), 0u);
}

TEST_F(fake_client_test, compaction_notice_for_old_start_revisions) {
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(etcd_.put("/k", std::to_string(i)).ok());  // revs 2..6
  ASSERT_TRUE(etcd_.compact(5).ok());
  recorder old;
  auto w1 = etcd_.watch(key_range::one("/k"), 3, old.cb());
  ASSERT_TRUE(w1.ok());
  ASSERT_EQ(old.updates.size(), 1u);
  EXPECT_EQ(old.updates[0].type, watch_update::kind::compacted);
  EXPECT_EQ(old.updates[0].revision, 5);
  ASSERT_TRUE(etcd_.put("/k", "later").ok());
  EXPECT_EQ(old.updates.size(), 1u);  // the compacted watch has ended

  recorder fresh;
  auto w2 = etcd_.watch(key_range::one("/k"), 5, fresh.cb());
  ASSERT_TRUE(w2.ok());
  EXPECT_EQ(fresh.events().size(), 3u);  // revs 5, 6, 7
  EXPECT_EQ(etcd_.range(key_range::one("/k"), {.revision = 4}).code(), errc::offset_out_of_range);
  EXPECT_TRUE(etcd_.range(key_range::one("/k"), {.revision = 5}).ok());
}

TEST_F(fake_client_test, faults) {
  etcd_.fail_next(2);
  EXPECT_EQ(etcd_.put("a", "1").code(), errc::unavailable);
  EXPECT_EQ(etcd_.range(key_range::one("a")).code(), errc::unavailable);
  EXPECT_TRUE(etcd_.range(key_range::one("a"))->kvs.empty());  // the failed put did nothing

  recorder rec;
  auto w = etcd_.watch(key_range::prefix(""), 0, rec.cb());
  ASSERT_TRUE(w.ok());
  etcd_.set_unavailable(true);
  EXPECT_EQ(etcd_.put("a", "1").code(), errc::unavailable);
  EXPECT_EQ(etcd_.lease_grant(5).code(), errc::unavailable);
  auto st = etcd_.endpoints_status();
  ASSERT_TRUE(st.ok());
  EXPECT_FALSE((*st)[0].reachable);
  etcd_.set_unavailable(false);
  ASSERT_EQ(rec.updates.size(), 2u);
  EXPECT_EQ(rec.updates[0].type, watch_update::kind::interrupted);
  EXPECT_EQ(rec.updates[1].type, watch_update::kind::resumed);

  // The ambiguous write: applied at "etcd", reported as unavailable. A
  // caller that re-reads finds it; a conditional retry does not apply twice.
  etcd_.apply_then_fail_next(1);
  txn_request create{{compare::absent("b")}, {put_op{"b", "1", {}}}, {}};
  EXPECT_EQ(etcd_.txn(create).code(), errc::unavailable);
  auto again = etcd_.txn(create);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->succeeded);
  auto r = etcd_.range(key_range::one("b"));
  ASSERT_EQ(r->kvs.size(), 1u);
  EXPECT_EQ(r->kvs[0].version, 1);
  ASSERT_EQ(rec.events().size(), 1u);  // watchers saw the write once
}

TEST_F(fake_client_test, a_write_marked_safe_to_repeat_is_repeated_after_an_unknown_outcome) {
  // The first attempt applies; the client cannot know and repeats the txn;
  // the repeat's compare fails, and that is the answer the caller sees.
  etcd_.apply_then_fail_next(1);
  txn_request create{{compare::absent("/owner")},
                     {put_op{"/owner", "me", {}}},
                     {range_op{key_range::one("/owner"), {}}}};
  create.retry_if_unknown = true;
  auto r = etcd_.txn(create);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->succeeded);
  // The caller tells "I won earlier" from "someone else won" by the value.
  EXPECT_EQ(std::get<range_result>(r->results[0]).kvs[0].value, "me");
  EXPECT_EQ(etcd_.revision(), 2);  // applied once

  // A put marked safe is applied twice (the same value; version 2).
  etcd_.apply_then_fail_next(1);
  auto p = etcd_.put("/idem", "v", put_options{.retry_if_unknown = true});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(etcd_.range(key_range::one("/idem"))->kvs[0].version, 2);
}

TEST_F(fake_client_test, watch_events_missed_while_unavailable_arrive_on_resume) {
  auto lease = etcd_.lease_grant(2);
  ASSERT_TRUE(lease.ok());
  ASSERT_TRUE(etcd_.put("/e", "1", {.lease = lease->id}).ok());
  recorder rec;
  auto w = etcd_.watch(key_range::one("/e"), 0, rec.cb());
  ASSERT_TRUE(w.ok());
  etcd_.set_unavailable(true);
  clk_.advance_ms(2'000);
  EXPECT_EQ(etcd_.expire_leases(), 1u);  // etcd goes on without us
  etcd_.set_unavailable(false);
  ASSERT_EQ(rec.updates.size(), 3u);
  EXPECT_EQ(rec.updates[1].type, watch_update::kind::resumed);
  ASSERT_EQ(rec.updates[2].events.size(), 1u);
  EXPECT_EQ(rec.updates[2].events[0].type, watch_event::kind::del);
}

// ---- lease_keeper on the fake and a manual clock ----

// Waits (real time, bounded) for `pred`; the keeper runs on its own thread.
template <class Pred>
bool eventually(Pred pred) {
  for (int i = 0; i < 4000 && !pred(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return pred();
}

TEST_F(fake_client_test, lease_keeper_keeps_the_lease_past_many_ttls) {
  auto lease = etcd_.lease_grant(3);
  ASSERT_TRUE(lease.ok());
  ASSERT_TRUE(etcd_.put("/alive", "1", {.lease = lease->id}).ok());
  std::atomic<int> lost{0};
  lease_keeper keeper(
      etcd_, lease->id, 3, [&](const error&) { lost++; }, clk_);
  for (int i = 1; i <= 10; ++i) {
    clk_.advance_ms(1'000);
    // The keeper renews at every third of the TTL; wait for the renewal
    // that is due before moving the clock on.
    ASSERT_TRUE(eventually([&] { return keeper.renewals() >= i; })) << "renewal " << i;
  }
  EXPECT_EQ(etcd_.range(key_range::one("/alive"))->kvs.size(), 1u);
  EXPECT_EQ(lost.load(), 0);
  keeper.stop();
}

TEST_F(fake_client_test, lease_keeper_reports_a_revoked_lease_once) {
  auto lease = etcd_.lease_grant(3);
  ASSERT_TRUE(lease.ok());
  std::atomic<int> lost{0};
  std::atomic<errc> why{errc::ok};
  lease_keeper keeper(
      etcd_, lease->id, 3,
      [&](const error& e) {
        why = e.code;
        lost++;
      },
      clk_);
  ASSERT_TRUE(etcd_.lease_revoke(lease->id).ok());
  clk_.advance_ms(1'000);
  ASSERT_TRUE(eventually([&] { return lost.load() == 1; }));
  EXPECT_EQ(why.load(), errc::not_found);
  clk_.advance_ms(5'000);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(lost.load(), 1);
  EXPECT_TRUE(keeper.lost());
}

// Issue 31, item 6: a whole TTL without etcd is no loss by itself. An etcd
// that lost its quorum expires nothing and renews every lease when it
// elects again: the keeper's next renewal succeeds and nothing is lost. An
// etcd that expired the lease meanwhile (the broker was the one cut off)
// says so, and that is the loss.
TEST_F(fake_client_test, lease_keeper_waits_for_etcds_verdict_past_the_ttl) {
  auto lease = etcd_.lease_grant(3);
  ASSERT_TRUE(lease.ok());
  ASSERT_TRUE(etcd_.put("/alive", "1", {.lease = lease->id}).ok());
  std::atomic<int> lost{0};
  std::atomic<errc> why{errc::ok};
  std::atomic<int64_t> good_until{0};
  lease_keeper keeper(
      etcd_, lease->id, 3,
      [&](const error& e) {
        why = e.code;
        lost++;
      },
      clk_, [&](int64_t until) { good_until = until; });
  // Quorum lost for three TTLs.
  etcd_.set_no_leader(true);
  for (int i = 0; i < 18; ++i) {
    clk_.advance_ms(500);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(lost.load(), 0);
  EXPECT_LT(good_until.load(), clk_.monotonic_ms());  // the holder knows it may be gone
  const int64_t renewed = keeper.renewals();
  etcd_.set_no_leader(false);
  ASSERT_TRUE(eventually([&] {
    clk_.advance_ms(100);
    return keeper.renewals() > renewed;
  }));
  EXPECT_EQ(lost.load(), 0);
  EXPECT_GT(good_until.load(), clk_.monotonic_ms());
  EXPECT_EQ(etcd_.range(key_range::one("/alive"))->kvs.size(), 1u);  // the registration lived on

  // Cut off while etcd works: etcd expires the lease, and says so once
  // reachable again.
  etcd_.set_unavailable(true);
  for (int i = 0; i < 18; ++i) {
    clk_.advance_ms(500);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(lost.load(), 0);
  etcd_.set_unavailable(false);
  ASSERT_TRUE(eventually([&] {
    clk_.advance_ms(100);
    return lost.load() == 1;
  }));
  EXPECT_EQ(why.load(), errc::not_found);
  EXPECT_TRUE(etcd_.range(key_range::one("/alive"))->kvs.empty());
}

}  // namespace
}  // namespace sluice::etcd
