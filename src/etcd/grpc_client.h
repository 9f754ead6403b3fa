#pragma once

// etcd::client over etcd's v3 gRPC API (docs/etcd_client.md), with deadlines,
// retries with backoff, failover between endpoints and resuming watches.
//
// Rules (the contract callers rely on; docs/etcd_client.md says why):
//
//   Deadlines. Each attempt of a unary request has request_timeout_ms; all
//   attempts of one call together have retry_budget_ms. A call never takes
//   (much) longer than the budget: then it returns errc::unavailable naming
//   the endpoints and the last error.
//
//   Retries. An attempt that fails because the endpoint is unreachable,
//   timed out, has no leader, or lost its leader is retried on the next
//   endpoint after a backoff (backoff_initial_ms doubling up to
//   backoff_max_ms, each wait shortened by up to backoff_jitter_percent at
//   random). Every request carries etcd's "require leader" marker, so a
//   member cut off from the quorum refuses at once instead of waiting.
//
//   Writes. put, delete_range and a txn that has a write in either branch are
//   retried only when the failed attempt surely did not reach etcd (no
//   connection to the endpoint, or etcd refused it before proposing it: "no
//   leader", "too many requests"). When the outcome is unknown (a timeout, a
//   connection lost mid-request, "leader changed"), the call returns
//   errc::unavailable at once with "outcome unknown" in the message, and the
//   caller re-reads and decides. Callers write conditionally (txn on
//   create_revision / mod_revision), so re-reading tells them what happened.
//   A put or txn the caller marks retry_if_unknown (client.h) is retried like
//   a read instead; the answer is then that of the last attempt. Expect
//   "outcome unknown" during every leader election: a follower forwards a
//   write to a leader that may be gone, and nobody can say if it got there.
//   Reads, lease calls and keepalives are retried whatever the failure:
//   repeating them is harmless (a repeated lease_grant leaves at worst an
//   unused lease that expires after its TTL).
//
//   Watches. Each watch has one thread and one gRPC stream. When the stream
//   breaks, the callback gets `interrupted` once; the thread reconnects to
//   the next endpoint (with backoff, for as long as it takes) and resumes
//   from the revision after the last event delivered, then sends `resumed`.
//   If that revision has been compacted meanwhile, the callback gets
//   `compacted` and the watch ends.
//
//   Endpoints are "http://host:port" (or bare "host:port"), comma separated.
//   https is refused (errc::invalid_config) until TLS is wired up.
//
// Threads: all methods may be called from any thread. Watch handles may
// outlive the grpc_client (they share its channels); a lease_keeper holds a
// reference to its client and must be stopped before the client goes.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "base/limits.h"
#include "etcd/client.h"

namespace sluice::etcd {

struct grpc_client_options {
  std::string endpoints;  // "http://127.0.0.1:2379,http://127.0.0.1:22379"
  int64_t request_timeout_ms = limits::default_etcd_request_timeout_ms;
  int64_t retry_budget_ms = limits::default_etcd_retry_budget_ms;
  int64_t backoff_initial_ms = limits::default_etcd_backoff_initial_ms;
  int64_t backoff_max_ms = limits::default_etcd_backoff_max_ms;
  int64_t backoff_jitter_percent = limits::default_etcd_backoff_jitter_percent;
};

// One parsed endpoint.
struct endpoint_address {
  std::string url;     // as given, normalised to "http://host:port"
  std::string target;  // "host:port", for gRPC
};

// Parses the endpoint list; invalid_config with a message saying what is wrong.
result<std::vector<endpoint_address>> parse_endpoints(std::string_view list);

class grpc_client final : public client {
 public:
  // Checks the options and parses the endpoints; connects lazily (the first
  // call connects), so it succeeds while etcd is down.
  static result<std::unique_ptr<grpc_client>> create(const grpc_client_options& opts,
                                                     const clock& clk);
  ~grpc_client() override;

  result<range_result> range(const key_range& keys, range_options opts = {}) override;
  result<put_result> put(const std::string& key, const std::string& value,
                         put_options opts = {}) override;
  result<delete_result> delete_range(const key_range& keys, bool prev_kv = false) override;
  result<txn_result> txn(const txn_request& req) override;
  result<lease_grant_result> lease_grant(int64_t ttl_s) override;
  result<int64_t> lease_keepalive_once(int64_t lease_id, int64_t budget_ms) override;
  result<int64_t> lease_time_to_live(int64_t lease_id) override;
  status lease_revoke(int64_t lease_id) override;
  result<std::unique_ptr<watch_handle>> watch(const key_range& keys, int64_t start_revision,
                                              watch_callback cb) override;
  result<std::vector<endpoint_status>> endpoints_status() override;
  void wind_down(int64_t grace_ms) override;
  bool leaderless_within(int64_t window_ms) const override;

  const std::vector<endpoint_address>& endpoints() const;

  struct core;  // gRPC channels and stubs; private to grpc_client.cc

 private:
  explicit grpc_client(std::shared_ptr<core> c);
  std::shared_ptr<core> core_;
};

}  // namespace sluice::etcd
