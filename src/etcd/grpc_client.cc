#include "etcd/grpc_client.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <condition_variable>
#include <mutex>
#include <random>
#include <thread>

#include <grpc/support/time.h>
#include <grpcpp/grpcpp.h>

#include "base/assert.h"
#include "etcd/proto/etcd_rpc.grpc.pb.h"

namespace sluice::etcd {

namespace pb = ::etcdserverpb;

namespace {

// A deadline `ms` from now. gRPC measures it on its own timers (a relative
// gpr_timespec is turned into one against gRPC's monotonic clock), so no
// clock is read here; our own decisions (the retry budget) use sluice::clock.
gpr_timespec deadline_in(int64_t ms) {
  return gpr_time_from_millis(std::max<int64_t>(ms, 1), GPR_TIMESPAN);
}

// etcd's marker (rpctypes.MetadataRequireLeaderKey): a member that knows no
// leader refuses the request at once with "no leader" (and ends streams when
// it loses its leader) instead of letting it wait for a quorum it lacks.
void require_leader(grpc::ClientContext& ctx) {
  ctx.AddMetadata("hasleader", "true");
}

// What a failed attempt means for the call.
enum class failure {
  not_applied,  // etcd surely did not act on it: retry anywhere
  unknown,      // it may have been applied: reads retry, writes stop
  final,        // an answer: return it to the caller
};

failure classify(const grpc::Status& s) {
  const std::string& m = s.error_message();
  switch (s.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
      // Refused before being proposed to raft.
      if (m.find("no leader") != std::string::npos) return failure::not_applied;
      // gRPC found no connection to send it on.
      if (m.find("failed to connect") != std::string::npos) return failure::not_applied;
      // raft dropped the proposal (no leader known to forward it to).
      if (m.find("proposal dropped") != std::string::npos) return failure::not_applied;
      return failure::unknown;  // "leader changed", "request timed out", connection reset, ...
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      if (m.find("too many requests") != std::string::npos) return failure::not_applied;
      return failure::final;  // database space exceeded, message too large
    case grpc::StatusCode::UNKNOWN:
      if (m.find("proposal dropped") != std::string::npos) return failure::not_applied;
      return failure::unknown;
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::ABORTED:
    case grpc::StatusCode::INTERNAL:
    case grpc::StatusCode::CANCELLED:
      return failure::unknown;
    default:
      return failure::final;
  }
}

errc final_errc(const grpc::Status& s) {
  switch (s.error_code()) {
    case grpc::StatusCode::NOT_FOUND:
      return errc::not_found;
    case grpc::StatusCode::OUT_OF_RANGE:
      return errc::offset_out_of_range;
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::FAILED_PRECONDITION:
      return errc::invalid_argument;
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return errc::no_space;
    case grpc::StatusCode::UNAUTHENTICATED:
    case grpc::StatusCode::PERMISSION_DENIED:
      return errc::invalid_config;  // etcd auth is not supported
    default:
      return errc::unavailable;
  }
}

std::string describe(const grpc::Status& s) {
  return "gRPC " + std::to_string(static_cast<int>(s.error_code())) + " " + s.error_message();
}

key_value from_pb(const ::mvccpb::KeyValue& kv) {
  return key_value{kv.key(),          kv.value(),   kv.create_revision(),
                   kv.mod_revision(), kv.version(), kv.lease()};
}

range_result from_pb(const pb::RangeResponse& r) {
  range_result out;
  out.header_revision = r.header().revision();
  out.more = r.more();
  out.count = r.count();
  out.kvs.reserve(r.kvs_size());
  for (const auto& kv : r.kvs()) out.kvs.push_back(from_pb(kv));
  return out;
}

put_result from_pb(const pb::PutResponse& r) {
  put_result out;
  out.header_revision = r.header().revision();
  if (r.has_prev_kv()) out.prev_kv = from_pb(r.prev_kv());
  return out;
}

delete_result from_pb(const pb::DeleteRangeResponse& r) {
  delete_result out;
  out.header_revision = r.header().revision();
  out.deleted = r.deleted();
  for (const auto& kv : r.prev_kvs()) out.prev_kvs.push_back(from_pb(kv));
  return out;
}

void to_pb(const key_range& keys, const range_options& o, pb::RangeRequest* r) {
  r->set_key(keys.key);
  r->set_range_end(keys.range_end);
  r->set_limit(o.limit);
  r->set_revision(o.revision);
}

void to_pb(const std::string& key, const std::string& value, const put_options& o,
           pb::PutRequest* r) {
  r->set_key(key);
  r->set_value(value);
  r->set_lease(o.lease);
  r->set_prev_kv(o.prev_kv);
}

void to_pb(const key_range& keys, bool prev_kv, pb::DeleteRangeRequest* r) {
  r->set_key(keys.key);
  r->set_range_end(keys.range_end);
  r->set_prev_kv(prev_kv);
}

void to_pb(const compare& c, pb::Compare* r) {
  r->set_key(c.key);
  switch (c.op) {
    case compare_op::equal:
      r->set_result(pb::Compare::EQUAL);
      break;
    case compare_op::not_equal:
      r->set_result(pb::Compare::NOT_EQUAL);
      break;
    case compare_op::less:
      r->set_result(pb::Compare::LESS);
      break;
    case compare_op::greater:
      r->set_result(pb::Compare::GREATER);
      break;
  }
  switch (c.target) {
    case compare_target::value:
      r->set_target(pb::Compare::VALUE);
      r->set_value(c.value);
      break;
    case compare_target::version:
      r->set_target(pb::Compare::VERSION);
      r->set_version(c.number);
      break;
    case compare_target::create_revision:
      r->set_target(pb::Compare::CREATE);
      r->set_create_revision(c.number);
      break;
    case compare_target::mod_revision:
      r->set_target(pb::Compare::MOD);
      r->set_mod_revision(c.number);
      break;
    case compare_target::lease:
      r->set_target(pb::Compare::LEASE);
      r->set_lease(c.number);
      break;
  }
}

void to_pb(const txn_op& op, pb::RequestOp* r) {
  if (const auto* p = std::get_if<put_op>(&op)) {
    to_pb(p->key, p->value, p->options, r->mutable_request_put());
  } else if (const auto* d = std::get_if<delete_op>(&op)) {
    to_pb(d->keys, d->prev_kv, r->mutable_request_delete_range());
  } else {
    const auto& rg = std::get<range_op>(op);
    to_pb(rg.keys, rg.options, r->mutable_request_range());
  }
}

bool has_write(const std::vector<txn_op>& ops) {
  return std::any_of(ops.begin(), ops.end(),
                     [](const txn_op& op) { return !std::holds_alternative<range_op>(op); });
}

}  // namespace

// ---- Endpoints -----------------------------------------------------------------

result<std::vector<endpoint_address>> parse_endpoints(std::string_view list) {
  if (list.size() > limits::max_etcd_endpoints_string_bytes) {
    return make_error(errc::invalid_config, "etcd endpoint list is too long");
  }
  std::vector<endpoint_address> out;
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t comma = list.find(',', pos);
    if (comma == std::string_view::npos) comma = list.size();
    std::string_view e = list.substr(pos, comma - pos);
    pos = comma + 1;
    while (!e.empty() && e.front() == ' ') e.remove_prefix(1);
    while (!e.empty() && (e.back() == ' ' || e.back() == '/')) e.remove_suffix(1);
    if (e.empty()) continue;
    const std::string given(e);
    if (e.starts_with("https://")) {
      return make_error(errc::invalid_config,
                        "etcd endpoint " + given +
                            ": https (TLS) is not supported yet; use http:// on a trusted network");
    }
    if (e.starts_with("http://")) e.remove_prefix(7);
    if (e.find("://") != std::string_view::npos || e.find('/') != std::string_view::npos) {
      return make_error(errc::invalid_config,
                        "etcd endpoint " + given + ": expected http://host:port");
    }
    const size_t colon = e.rfind(':');
    if (colon == std::string_view::npos || colon == 0) {
      return make_error(errc::invalid_config, "etcd endpoint " + given + ": expected host:port");
    }
    int port = 0;
    const std::string_view port_text = e.substr(colon + 1);
    auto [p, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (ec != std::errc() || p != port_text.data() + port_text.size() || port <= 0 ||
        port > 65535) {
      return make_error(errc::invalid_config, "etcd endpoint " + given + ": bad port");
    }
    out.push_back(endpoint_address{"http://" + std::string(e), std::string(e)});
    if (out.size() > limits::max_etcd_endpoints) {
      return make_error(
          errc::invalid_config,
          "more than " + std::to_string(limits::max_etcd_endpoints) + " etcd endpoints");
    }
  }
  if (out.empty()) return make_error(errc::invalid_config, "no etcd endpoints given");
  return out;
}

// ---- The shared core -------------------------------------------------------------

struct grpc_client::core {
  struct endpoint {
    endpoint_address address;
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<pb::KV::Stub> kv;
    std::unique_ptr<pb::Watch::Stub> watch;
    std::unique_ptr<pb::Lease::Stub> lease;
    std::unique_ptr<pb::Maintenance::Stub> maintenance;
  };
  // How failures are retried: `read` whatever the failure (reads, and
  // writes the caller marked safe to repeat); `write` only when the attempt
  // surely never reached etcd.
  enum class kind { read, write };

  grpc_client_options opts;
  const clock& clk;
  std::vector<endpoint> eps;
  std::vector<endpoint_address> addresses;  // eps' addresses, in order
  // The endpoint that answered last; calls start there.
  std::atomic<size_t> current{0};
  // wind_down(): no call goes on past this (monotonic ms on clk).
  std::atomic<int64_t> closing_at_ms{INT64_MAX};
  // When a member last answered "no leader" (monotonic ms on clk; -1: never).
  std::atomic<int64_t> no_leader_at_ms{-1};
  std::mutex rng_mu;
  std::minstd_rand rng{std::random_device{}()};

  core(const grpc_client_options& o, const clock& c) : opts(o), clk(c) {}

  std::string endpoint_list() const {
    std::string s;
    for (const auto& e : eps) s += (s.empty() ? "" : ",") + e.address.url;
    return s;
  }

  // The backoff before attempt n + 1, with jitter.
  int64_t backoff_ms(int attempt) {
    int64_t b = opts.backoff_initial_ms;
    for (int i = 1; i < attempt && b < opts.backoff_max_ms; ++i) b *= 2;
    b = std::min(b, opts.backoff_max_ms);
    std::lock_guard lk(rng_mu);
    const int64_t cut = b * opts.backoff_jitter_percent / 100;
    return b - (cut > 0 ? static_cast<int64_t>(rng() % static_cast<uint64_t>(cut + 1)) : 0);
  }

  void sleep_until(int64_t deadline_ms) const {
    while (clk.monotonic_ms() < deadline_ms) {
      std::this_thread::sleep_for(std::chrono::milliseconds(clk.sleep_ms_until(deadline_ms)));
    }
  }

  // True if the channel is connected, waiting up to `timeout_ms` for a
  // connection being made. A write is sent only on a connected channel, so
  // false proves the write was never sent.
  //
  // TRANSIENT_FAILURE is waited through too, not taken as an answer: the
  // channel leaves it for a new attempt within its reconnect backoff, and
  // a thread waiting here is what lets that attempt's handshake proceed.
  // (Answering false at once left a member that came back from a network
  // cut unused: each attempt was cut before its handshake finished, and
  // no call ever waited for one.)
  bool connected(endpoint& ep, int64_t timeout_ms) const {
    const int64_t until_ms = clk.monotonic_ms() + timeout_ms;
    auto st = ep.channel->GetState(true);
    while (st != GRPC_CHANNEL_READY) {
      if (st == GRPC_CHANNEL_SHUTDOWN) return false;
      const int64_t left_ms = until_ms - clk.monotonic_ms();
      if (left_ms <= 0 || !ep.channel->WaitForStateChange(st, deadline_in(left_ms))) return false;
      st = ep.channel->GetState(true);
    }
    return true;
  }

  // Runs `attempt(endpoint, context)` until it succeeds, fails finally, or
  // the budget runs out, moving to the next endpoint after each failure.
  template <class Attempt>
  status call(std::string_view what, kind k, int64_t budget_ms, Attempt&& attempt) {
    if (budget_ms <= 0) budget_ms = opts.retry_budget_ms;
    const int64_t start_ms = clk.monotonic_ms();
    int64_t end_ms = start_ms + budget_ms;
    size_t at = current.load();
    std::vector<std::string> last(eps.size());  // each endpoint's latest failure
    int attempts = 0;
    while (true) {
      // wind_down() shortens every call, those already retrying included.
      if (const int64_t closing = closing_at_ms.load(std::memory_order_acquire); closing < end_ms) {
        end_ms = closing;
        if (clk.monotonic_ms() >= end_ms) {
          return status(errc::shutting_down,
                        "etcd " + std::string(what) + ": the client is shutting down");
        }
      }
      const int64_t left_ms = end_ms - clk.monotonic_ms();
      if (left_ms <= 0) break;
      endpoint& ep = eps[at % eps.size()];
      ++attempts;
      const int64_t timeout_ms = std::min(opts.request_timeout_ms, left_ms);
      std::string& why = last[at % eps.size()];
      if (k == kind::write && !connected(ep, timeout_ms)) {
        why = "not connected";
      } else {
        // The wait for a connection came out of this attempt's time.
        const int64_t rpc_ms = std::min(timeout_ms, end_ms - clk.monotonic_ms());
        if (rpc_ms <= 0) break;
        grpc::ClientContext ctx;
        ctx.set_deadline(deadline_in(rpc_ms));
        // A read (or a repeatable write) waits, within its deadline, for a
        // connection being made instead of failing at once while the
        // channel is between attempts: the waiting call is what lets a
        // reconnection finish. A write is sent on a channel connected()
        // found ready and fails fast, so "never sent" stays provable.
        ctx.set_wait_for_ready(k == kind::read);
        require_leader(ctx);
        const grpc::Status s = attempt(ep, ctx);
        if (s.ok()) {
          current.store(at % eps.size());
          return {};
        }
        const failure f = classify(s);
        if (f == failure::final) {
          return status(final_errc(s), "etcd " + std::string(what) + " at " + ep.address.url +
                                           ": " + s.error_message());
        }
        why = describe(s);
        if (s.error_code() == grpc::StatusCode::UNAVAILABLE &&
            s.error_message().find("no leader") != std::string::npos) {
          no_leader_at_ms.store(clk.monotonic_ms(), std::memory_order_release);
        }
        if (k == kind::write && f == failure::unknown) {
          return status(errc::unavailable, "etcd " + std::string(what) +
                                               " outcome unknown (it may have been applied): " +
                                               ep.address.url + ": " + why);
        }
      }
      ++at;
      current.store(at % eps.size());
      sleep_until(std::min(clk.monotonic_ms() + backoff_ms(attempts), end_ms));
    }
    std::string msg = "etcd unavailable: " + std::string(what) + " failed " +
                      std::to_string(attempts) + " times in " +
                      std::to_string(clk.monotonic_ms() - start_ms) + " ms at " + endpoint_list() +
                      "; last errors:";
    for (size_t i = 0; i < eps.size(); ++i) {
      msg += " " + eps[i].address.url + ": " + (last[i].empty() ? "not tried" : last[i]) + ";";
    }
    msg.pop_back();
    return status(errc::unavailable, std::move(msg));
  }
};

result<std::unique_ptr<grpc_client>> grpc_client::create(const grpc_client_options& opts,
                                                         const clock& clk) {
  SLUICE_ASSIGN_OR_RETURN(auto addrs, parse_endpoints(opts.endpoints));
  if (opts.request_timeout_ms <= 0 || opts.retry_budget_ms <= 0 || opts.backoff_initial_ms <= 0 ||
      opts.backoff_max_ms < opts.backoff_initial_ms || opts.backoff_jitter_percent < 0 ||
      opts.backoff_jitter_percent > 100) {
    return make_error(errc::invalid_config,
                      "etcd client: timeouts and backoffs must be positive, "
                      "backoff max >= initial, jitter 0..100 percent");
  }
  auto c = std::make_shared<core>(opts, clk);
  c->addresses = addrs;
  for (auto& a : addrs) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(limits::etcd_max_receive_message_bytes);
    // Reconnect to a member that went away within about a second of its
    // return, not after gRPC's default backoff of up to two minutes.
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS,
                static_cast<int>(limits::etcd_reconnect_backoff_initial_ms));
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS,
                static_cast<int>(limits::etcd_reconnect_backoff_max_ms));
    // In gRPC 1.51 this is also each connection attempt's deadline (TCP
    // connect, HTTP/2 preface and the server's SETTINGS), taken as
    // max(it, the backoff). At 100 ms with a 1 s backoff every attempt was
    // cut near a second, and after a network cut healed the broker kept
    // opening connections and closing them before the handshake was done.
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS,
                static_cast<int>(limits::etcd_connect_timeout_ms));
    // Pings on open streams (watches) find a member that stopped answering
    // without closing the connection. etcd refuses pings more often than
    // every 5 s (--grpc-keepalive-min-time) and without streams.
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10'000);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5'000);
    args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 0);
    // Each endpoint its own connection, even to one address twice.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    core::endpoint ep;
    ep.address = a;
    ep.channel = grpc::CreateCustomChannel(a.target, grpc::InsecureChannelCredentials(), args);
    ep.kv = pb::KV::NewStub(ep.channel);
    ep.watch = pb::Watch::NewStub(ep.channel);
    ep.lease = pb::Lease::NewStub(ep.channel);
    ep.maintenance = pb::Maintenance::NewStub(ep.channel);
    c->eps.push_back(std::move(ep));
  }
  return std::unique_ptr<grpc_client>(new grpc_client(std::move(c)));
}

grpc_client::grpc_client(std::shared_ptr<core> c) : core_(std::move(c)) {}
grpc_client::~grpc_client() = default;

bool grpc_client::leaderless_within(int64_t window_ms) const {
  const int64_t at = core_->no_leader_at_ms.load(std::memory_order_acquire);
  return at >= 0 && core_->clk.monotonic_ms() - at <= window_ms;
}

void grpc_client::wind_down(int64_t grace_ms) {
  const int64_t at = core_->clk.monotonic_ms() + std::max<int64_t>(grace_ms, 0);
  int64_t cur = core_->closing_at_ms.load();
  while (at < cur && !core_->closing_at_ms.compare_exchange_weak(cur, at)) {
  }
}

const std::vector<endpoint_address>& grpc_client::endpoints() const {
  return core_->addresses;
}

// ---- KV ----------------------------------------------------------------------------

result<range_result> grpc_client::range(const key_range& keys, range_options opts) {
  pb::RangeRequest req;
  to_pb(keys, opts, &req);
  pb::RangeResponse resp;
  SLUICE_TRY(
      core_->call("range", core::kind::read, 0, [&](core::endpoint& ep, grpc::ClientContext& ctx) {
        return ep.kv->Range(&ctx, req, &resp);
      }));
  return from_pb(resp);
}

result<put_result> grpc_client::put(const std::string& key, const std::string& value,
                                    put_options opts) {
  pb::PutRequest req;
  to_pb(key, value, opts, &req);
  pb::PutResponse resp;
  const auto k = opts.retry_if_unknown ? core::kind::read : core::kind::write;
  SLUICE_TRY(core_->call("put", k, 0, [&](core::endpoint& ep, grpc::ClientContext& ctx) {
    return ep.kv->Put(&ctx, req, &resp);
  }));
  return from_pb(resp);
}

result<delete_result> grpc_client::delete_range(const key_range& keys, bool prev_kv) {
  pb::DeleteRangeRequest req;
  to_pb(keys, prev_kv, &req);
  pb::DeleteRangeResponse resp;
  SLUICE_TRY(core_->call("delete_range", core::kind::write, 0,
                         [&](core::endpoint& ep, grpc::ClientContext& ctx) {
                           return ep.kv->DeleteRange(&ctx, req, &resp);
                         }));
  return from_pb(resp);
}

result<txn_result> grpc_client::txn(const txn_request& t) {
  pb::TxnRequest req;
  for (const auto& c : t.compares) to_pb(c, req.add_compare());
  for (const auto& op : t.then_ops) to_pb(op, req.add_success());
  for (const auto& op : t.else_ops) to_pb(op, req.add_failure());
  const bool writes = has_write(t.then_ops) || has_write(t.else_ops);
  const auto k = writes && !t.retry_if_unknown ? core::kind::write : core::kind::read;
  pb::TxnResponse resp;
  SLUICE_TRY(core_->call("txn", k, 0, [&](core::endpoint& ep, grpc::ClientContext& ctx) {
    return ep.kv->Txn(&ctx, req, &resp);
  }));
  txn_result out;
  out.succeeded = resp.succeeded();
  out.header_revision = resp.header().revision();
  for (const auto& r : resp.responses()) {
    switch (r.response_case()) {
      case pb::ResponseOp::kResponsePut:
        out.results.emplace_back(from_pb(r.response_put()));
        break;
      case pb::ResponseOp::kResponseDeleteRange:
        out.results.emplace_back(from_pb(r.response_delete_range()));
        break;
      case pb::ResponseOp::kResponseRange:
        out.results.emplace_back(from_pb(r.response_range()));
        break;
      default:
        return make_error(errc::malformed, "etcd txn answered with an op we did not send");
    }
  }
  // The ops of a txn all see (and their writes make) the txn's revision.
  for (auto& r : out.results)
    std::visit([&](auto& x) { x.header_revision = out.header_revision; }, r);
  return out;
}

// ---- Leases ------------------------------------------------------------------------

result<lease_grant_result> grpc_client::lease_grant(int64_t ttl_s) {
  if (ttl_s <= 0) return make_error(errc::invalid_argument, "lease ttl must be > 0");
  pb::LeaseGrantRequest req;
  req.set_ttl(ttl_s);
  pb::LeaseGrantResponse resp;
  SLUICE_TRY(core_->call("lease_grant", core::kind::read, 0,
                         [&](core::endpoint& ep, grpc::ClientContext& ctx) {
                           return ep.lease->LeaseGrant(&ctx, req, &resp);
                         }));
  if (!resp.error().empty())
    return make_error(errc::unavailable, "etcd lease_grant: " + resp.error());
  return lease_grant_result{resp.id(), resp.ttl()};
}

result<int64_t> grpc_client::lease_keepalive_once(int64_t lease_id, int64_t budget_ms) {
  int64_t ttl = 0;
  SLUICE_TRY(core_->call(
      "lease_keepalive", core::kind::read, budget_ms,
      [&](core::endpoint& ep, grpc::ClientContext& ctx) {
        auto stream = ep.lease->LeaseKeepAlive(&ctx);
        pb::LeaseKeepAliveRequest req;
        req.set_id(lease_id);
        pb::LeaseKeepAliveResponse resp;
        bool got = false;
        if (stream->Write(req)) {
          stream->WritesDone();
          got = stream->Read(&resp);
        }
        if (got) ctx.TryCancel();  // we have our answer; do not wait for the close
        grpc::Status s = stream->Finish();
        if (got) {
          ttl = std::max<int64_t>(resp.ttl(), 0);
          return grpc::Status::OK;
        }
        return s.ok() ? grpc::Status(grpc::StatusCode::UNAVAILABLE, "keepalive stream closed") : s;
      }));
  return ttl;
}

result<int64_t> grpc_client::lease_time_to_live(int64_t lease_id) {
  pb::LeaseTimeToLiveRequest req;
  req.set_id(lease_id);
  pb::LeaseTimeToLiveResponse resp;
  SLUICE_TRY(core_->call("lease_time_to_live", core::kind::read, 0,
                         [&](core::endpoint& ep, grpc::ClientContext& ctx) {
                           return ep.lease->LeaseTimeToLive(&ctx, req, &resp);
                         }));
  return std::max<int64_t>(resp.ttl(), 0);
}

status grpc_client::lease_revoke(int64_t lease_id) {
  pb::LeaseRevokeRequest req;
  req.set_id(lease_id);
  pb::LeaseRevokeResponse resp;
  // Retried like a read: a second revoke of a lease the first one did
  // revoke answers not_found, which callers read as "gone" anyway.
  return core_->call("lease_revoke", core::kind::read, 0,
                     [&](core::endpoint& ep, grpc::ClientContext& ctx) {
                       return ep.lease->LeaseRevoke(&ctx, req, &resp);
                     });
}

// ---- Status --------------------------------------------------------------------------

result<std::vector<endpoint_status>> grpc_client::endpoints_status() {
  std::vector<endpoint_status> out;
  for (auto& ep : core_->eps) {
    endpoint_status st;
    st.endpoint = ep.address.url;
    grpc::ClientContext ctx;
    ctx.set_deadline(deadline_in(core_->opts.request_timeout_ms));
    pb::StatusRequest req;
    pb::StatusResponse resp;
    // Without the leader marker: a member cut off from the quorum still
    // tells what it knows (leader 0), which is what an operator wants.
    grpc::Status s = ep.maintenance->Status(&ctx, req, &resp);
    if (s.ok()) {
      st.reachable = true;
      st.member_id = resp.header().member_id();
      st.leader_id = resp.leader();
      st.raft_term = resp.raftterm();
      st.db_size_bytes = resp.dbsize();
      st.version = resp.version();
      for (const auto& e : resp.errors()) st.alarms.push_back(e);
    } else {
      st.error = describe(s);
    }
    out.push_back(std::move(st));
  }
  return out;
}

// ---- Watch ---------------------------------------------------------------------------

namespace {

class grpc_watch final : public watch_handle {
 public:
  grpc_watch(std::shared_ptr<grpc_client::core> c, key_range keys, int64_t start_revision,
             watch_callback cb)
      : core_(std::move(c)), keys_(std::move(keys)), next_rev_(start_revision), cb_(std::move(cb)) {
    thread_ = std::thread([this] { run(); });
  }
  ~grpc_watch() override { cancel(); }

  void cancel() override {
    {
      std::lock_guard lk(mu_);
      cancelled_ = true;
      if (ctx_ != nullptr) ctx_->TryCancel();
    }
    cv_.notify_all();
    if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
  }

 private:
  bool cancelled() {
    std::lock_guard lk(mu_);
    return cancelled_;
  }

  void deliver(const watch_update& u) {
    if (!cancelled()) cb_(u);
  }

  // One stream's life: returns false when the watch has ended for good
  // (cancelled or compacted), true to reconnect; `why` says what broke.
  bool stream_once(grpc_client::core::endpoint& ep, bool& interrupted, std::string& why) {
    grpc::ClientContext ctx;
    require_leader(ctx);
    {
      std::lock_guard lk(mu_);
      if (cancelled_) return false;
      ctx_ = &ctx;
    }
    auto stream = ep.watch->Watch(&ctx);
    pb::WatchRequest req;
    auto* create = req.mutable_create_request();
    create->set_key(keys_.key);
    create->set_range_end(keys_.range_end);
    create->set_start_revision(next_rev_);
    bool more = true;
    bool ended = false;
    if (stream->Write(req)) {
      pb::WatchResponse resp;
      while (!cancelled() && stream->Read(&resp)) {
        if (resp.compact_revision() > 0) {
          deliver(
              watch_update{watch_update::kind::compacted,
                           {},
                           resp.compact_revision(),
                           "etcd: revision " + std::to_string(next_rev_) + " has been compacted"});
          ended = true;
          break;
        }
        if (resp.canceled()) {
          why = ep.address.url + ": etcd ended the watch: " + resp.cancel_reason();
          break;
        }
        if (resp.created()) {
          // A watch "from now" is from the revision after the one etcd had
          // when it created the watcher.
          if (next_rev_ == 0) next_rev_ = resp.header().revision() + 1;
          attempts_ = 0;
          if (interrupted) {
            interrupted = false;
            deliver(watch_update{
                watch_update::kind::resumed, {}, next_rev_, "resumed at " + ep.address.url});
          }
        }
        if (resp.events_size() == 0) continue;
        watch_update u{watch_update::kind::events, {}, 0, {}};
        for (const auto& e : resp.events()) {
          if (e.kv().mod_revision() < next_rev_) continue;  // seen before a reconnect
          watch_event ev;
          ev.type =
              e.type() == ::mvccpb::Event::DELETE ? watch_event::kind::del : watch_event::kind::put;
          ev.kv = from_pb(e.kv());
          u.revision = ev.kv.mod_revision;
          u.events.push_back(std::move(ev));
        }
        if (u.events.empty()) continue;
        next_rev_ = u.revision + 1;
        deliver(u);
      }
    }
    ctx.TryCancel();  // Finish() would otherwise wait for etcd to close the stream
    grpc::Status s = stream->Finish();
    {
      std::lock_guard lk(mu_);
      ctx_ = nullptr;
      if (cancelled_) more = false;
    }
    if (ended) more = false;
    if (why.empty()) why = ep.address.url + ": " + (s.ok() ? "stream closed" : describe(s));
    return more;
  }

  void run() {
    size_t at = core_->current.load();
    bool interrupted = false;
    while (true) {
      std::string why;
      if (!stream_once(core_->eps[at % core_->eps.size()], interrupted, why)) return;
      if (!interrupted) {
        interrupted = true;
        deliver(watch_update{watch_update::kind::interrupted, {}, next_rev_, why});
      }
      ++at;
      ++attempts_;
      const int64_t until = core_->clk.monotonic_ms() + core_->backoff_ms(attempts_);
      std::unique_lock lk(mu_);
      while (!cancelled_ && core_->clk.monotonic_ms() < until) {
        cv_.wait_for(lk, std::chrono::milliseconds(core_->clk.sleep_ms_until(until)));
      }
      if (cancelled_) return;
    }
  }

  std::shared_ptr<grpc_client::core> core_;
  const key_range keys_;
  int64_t next_rev_;  // the oldest revision not yet delivered (0: "now", before the first create)
  int attempts_ = 0;  // reconnects since the last successful create
  watch_callback cb_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool cancelled_ = false;
  grpc::ClientContext* ctx_ = nullptr;  // the live stream's, for cancel()
  std::thread thread_;
};

}  // namespace

result<std::unique_ptr<watch_handle>> grpc_client::watch(const key_range& keys,
                                                         int64_t start_revision,
                                                         watch_callback cb) {
  if (keys.key.empty()) return make_error(errc::invalid_argument, "etcd watch: empty key");
  if (!cb) return make_error(errc::invalid_argument, "etcd watch: no callback");
  if (start_revision < 0)
    return make_error(errc::invalid_argument, "etcd watch: negative start revision");
  return std::unique_ptr<watch_handle>(
      std::make_unique<grpc_watch>(core_, keys, start_revision, std::move(cb)));
}

}  // namespace sluice::etcd
