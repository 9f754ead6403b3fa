#pragma once

// The etcd client interface the cluster control plane is written against
// (docs/etcd_client.md). Two implementations: grpc_client (real etcd over
// gRPC) and fake_client (in memory, deterministic, for unit tests).
//
// Terms, as etcd defines them:
//   revision         the store's logical clock; every write (put, delete that
//                    deleted something, txn with writes) makes it one larger.
//   create_revision  the revision that created a key (0: the key is absent).
//   mod_revision     the revision of a key's latest change.
//   version          puts since the key was created (1 after the creating put).
//   lease            a TTL'd id; keys attached to it are deleted when it ends.
//
// Errors. Every call returns a status or result with an errc:
//   unavailable       etcd could not be reached, had no leader, or did not
//                     answer within the client's retry budget. Retriable.
//                     For a WRITE (put, delete_range, txn with writes) it also
//                     means "outcome unknown": the write may have been applied.
//                     Callers make writes conditional (txn on mod_revision or
//                     create_revision) and, after unavailable, re-read before
//                     deciding whether to write again. The client itself
//                     repeats a write that may have reached etcd only when the
//                     caller marks it safe to repeat (retry_if_unknown below);
//                     a repeated conditional txn then answers for its last
//                     attempt (succeeded == false if the first one applied).
//   not_found         lease operations on a lease etcd does not know.
//   offset_out_of_range  a read at a revision already compacted (or not yet
//                     reached).
//   invalid_argument  a request etcd (or the fake) refuses as malformed: empty
//                     key, the same key written twice in one txn.
//
// Threads: every method may be called from any thread, concurrently.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "base/result.h"

namespace sluice::etcd {

// One key as etcd stores it.
struct key_value {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t version = 0;
  int64_t lease = 0;  // 0: no lease

  bool operator==(const key_value&) const = default;
};

// A set of keys: one key, or all keys with a prefix. Held as etcd's
// [key, range_end) pair; build it with one() or prefix().
struct key_range {
  std::string key;
  std::string range_end;  // empty: just `key`

  static key_range one(std::string k) { return key_range{std::move(k), {}}; }
  // Every key starting with `p`; an empty prefix is every key.
  static key_range prefix(std::string p);
  bool contains(const std::string& k) const;
};

// ---- KV --------------------------------------------------------------------

struct range_options {
  int64_t revision = 0;  // read as of this revision; 0: the newest
  int64_t limit = 0;     // at most this many keys; 0: all
};

struct range_result {
  int64_t header_revision = 0;  // the store's revision the read saw
  std::vector<key_value> kvs;   // in key order
  bool more = false;            // limit cut the answer short
  int64_t count = 0;            // keys in the range, whatever the limit
};

struct put_options {
  int64_t lease = 0;     // attach the key to this lease; 0: none
  bool prev_kv = false;  // return the key as it was before
  // The caller says applying this put twice is harmless (the same value
  // again; watchers then see it twice), so the client may repeat it after
  // a timeout whose outcome is unknown. Ignored for a put inside a txn.
  bool retry_if_unknown = false;
};

struct put_result {
  int64_t header_revision = 0;       // the revision of this put
  std::optional<key_value> prev_kv;  // set if asked for and the key existed
};

struct delete_result {
  int64_t header_revision = 0;  // unchanged if nothing was deleted
  int64_t deleted = 0;
  std::vector<key_value> prev_kvs;  // if asked for
};

// ---- Txn -------------------------------------------------------------------

enum class compare_target { value, version, create_revision, mod_revision, lease };
enum class compare_op { equal, not_equal, less, greater };

// "key's <target> <op> operand". As in etcd, a compare on an absent key
// sees version, create_revision, mod_revision and lease as 0, and a compare
// of an absent key's value is always false. Values compare as bytes.
struct compare {
  std::string key;
  compare_target target = compare_target::version;
  compare_op op = compare_op::equal;
  int64_t number = 0;  // for every target but value
  std::string value;   // for compare_target::value

  static compare value_is(std::string key, compare_op op, std::string v) {
    return compare{std::move(key), compare_target::value, op, 0, std::move(v)};
  }
  static compare number_is(std::string key, compare_target t, compare_op op, int64_t n) {
    return compare{std::move(key), t, op, n, {}};
  }
  // The key does not exist (create_revision == 0): create-if-absent.
  static compare absent(std::string key) {
    return number_is(std::move(key), compare_target::create_revision, compare_op::equal, 0);
  }
  // The key was last changed at exactly `rev`: compare-and-swap.
  static compare unchanged_since(std::string key, int64_t rev) {
    return number_is(std::move(key), compare_target::mod_revision, compare_op::equal, rev);
  }
};

struct put_op {
  std::string key;
  std::string value;
  put_options options;
};
struct delete_op {
  key_range keys;
  bool prev_kv = false;
};
struct range_op {
  key_range keys;
  range_options options;
};
using txn_op = std::variant<put_op, delete_op, range_op>;
using txn_op_result = std::variant<put_result, delete_result, range_result>;

// If every compare holds, then_ops run in order, else else_ops do; the
// whole is atomic and its writes share one revision. A range op sees the
// writes of the ops before it. One key may be written at most once per
// branch (etcd refuses otherwise: invalid_argument).
struct txn_request {
  std::vector<compare> compares;
  std::vector<txn_op> then_ops;
  std::vector<txn_op> else_ops;
  // The caller says repeating this txn is safe: its compares make a second
  // application a no-op (create-if-absent, compare-and-swap), and the caller
  // can tell from a re-read, or from what it wrote, whether an attempt that
  // answered succeeded == false was in fact preceded by one that applied.
  bool retry_if_unknown = false;
};

struct txn_result {
  bool succeeded = false;
  int64_t header_revision = 0;
  std::vector<txn_op_result> results;  // one per op of the branch that ran
};

// ---- Leases ----------------------------------------------------------------

struct lease_grant_result {
  int64_t id = 0;
  int64_t ttl_s = 0;  // as granted (etcd may raise a very short TTL)
};

// ---- Watch -----------------------------------------------------------------

struct watch_event {
  enum class kind { put, del };
  kind type = kind::put;
  // For put, the key after the change. For del, the key with mod_revision
  // set to the deleting revision; the other fields are 0.
  key_value kv;
};

// What a watch callback receives.
struct watch_update {
  enum class kind {
    // `events`, in revision order, none older than any delivered before.
    events,
    // The watch's next revision was compacted away: events were lost. The
    // watch has ended (no more updates). Re-read the range (range() gives a
    // header_revision H) and watch again from H + 1. `revision` is the
    // oldest revision etcd still has.
    compacted,
    // The stream to etcd broke; the watch is reconnecting. No events are
    // lost: it resumes from the revision after the last one delivered.
    interrupted,
    // Reconnected after `interrupted`; `revision` is where it resumed.
    resumed,
  };
  kind type = kind::events;
  std::vector<watch_event> events;
  int64_t revision = 0;
  std::string message;  // why, for interrupted and compacted
};

// Called with each update, one at a time, in order, from a thread of the
// client (never from the caller's thread inside watch() for grpc_client;
// see fake_client.h for the fake). It may call any client method and
// cancel() on its own handle, but must not destroy its own handle.
using watch_callback = std::function<void(const watch_update&)>;

// A running watch. cancel() (or destruction) stops it: when cancel()
// returns, the callback is not running and will not be called again
// (unless cancel() was called from inside the callback, which returns at
// once; the callback is then not called again after it returns).
class watch_handle {
 public:
  virtual ~watch_handle() = default;
  virtual void cancel() = 0;
};

// ---- Cluster status --------------------------------------------------------

// One member as seen through one endpoint, for `cluster describe`.
struct endpoint_status {
  std::string endpoint;  // as configured, "http://127.0.0.1:2379"
  bool reachable = false;
  std::string error;  // why not, when unreachable
  uint64_t member_id = 0;
  uint64_t leader_id = 0;  // the leader this member knows of; 0: none
  uint64_t raft_term = 0;
  int64_t db_size_bytes = 0;
  std::string version;              // etcd's server version
  std::vector<std::string> alarms;  // health problems the member reports
};

// ---- The interface ---------------------------------------------------------

class client {
 public:
  virtual ~client() = default;

  virtual result<range_result> range(const key_range& keys, range_options opts = {}) = 0;
  virtual result<put_result> put(const std::string& key, const std::string& value,
                                 put_options opts = {}) = 0;
  virtual result<delete_result> delete_range(const key_range& keys, bool prev_kv = false) = 0;
  virtual result<txn_result> txn(const txn_request& req) = 0;

  // A lease of `ttl_s` seconds (> 0).
  virtual result<lease_grant_result> lease_grant(int64_t ttl_s) = 0;
  // Renews the lease once; returns its TTL in seconds from now, or 0 when
  // the lease no longer exists (expired or revoked). `budget_ms` (> 0)
  // bounds the time spent retrying, so a lease_keeper can stop in time;
  // 0 uses the client's own budget.
  virtual result<int64_t> lease_keepalive_once(int64_t lease_id, int64_t budget_ms) = 0;
  // Seconds the lease has left; 0 when it no longer exists.
  virtual result<int64_t> lease_time_to_live(int64_t lease_id) = 0;
  // Ends the lease at once, deleting its keys. not_found if unknown.
  virtual status lease_revoke(int64_t lease_id) = 0;

  // Watches `keys` from `start_revision` (inclusive). 0 means "from the
  // revision etcd has when the watch is first established", which for
  // grpc_client may be a little after this call returns: to miss nothing,
  // read (range) first and watch from its header_revision + 1. Fails only
  // on bad arguments or when the client is shut down;
  // a watch whose etcd is unreachable keeps trying and says so with
  // `interrupted`.
  virtual result<std::unique_ptr<watch_handle>> watch(const key_range& keys, int64_t start_revision,
                                                      watch_callback cb) = 0;

  // Each configured endpoint's status, asked of that endpoint alone (no
  // failover). Succeeds with unreachable entries when members are down.
  virtual result<std::vector<endpoint_status>> endpoints_status() = 0;

  // The process is stopping: from now on no call lasts much past
  // `grace_ms` from now, whatever etcd does (a broker must stop within
  // seconds of SIGTERM even when etcd is unreachable). Calls still get the
  // grace to finish (a controlled shutdown, revoking the lease); a call
  // still retrying when it ends returns errc::shutting_down, and one
  // started later fails at once. An attempt already sent keeps its own
  // deadline (at most the request timeout). Watches are not affected:
  // their handles end them. Any thread; the earliest deadline wins.
  // The default does nothing (a client whose calls never wait).
  virtual void wind_down(int64_t grace_ms) { (void)grace_ms; }

  // Whether some member answered, within the last `window_ms` (on the
  // client's clock), that it knows no leader: etcd is reachable but has
  // lost its quorum as far as this client can see, so nobody can expire a
  // lease or write a record through the members it reaches. (A client that
  // reaches no member at all cannot tell: it answers false.) Any thread.
  virtual bool leaderless_within(int64_t window_ms) const {
    (void)window_ms;
    return false;
  }
};

// For logs and tests.
std::string_view compare_target_name(compare_target t);
std::string_view compare_op_name(compare_op o);

}  // namespace sluice::etcd
