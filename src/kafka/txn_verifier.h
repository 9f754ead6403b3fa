#pragma once

// KIP-890 across brokers (docs/transactions.md, "Handlers and wiring"): a
// partition leader that is not the coordinator of a producer's
// transactional id asks the broker that is whether partitions are in the
// producer's ongoing transaction, with AddPartitionsToTxn v5 and
// verify_only, as Kafka's AddPartitionsToTxnManager does; for a producer of
// transaction version 2 it asks to add them instead (verify_only false).
//
// One thread sends. The questions queued for one broker go in one request,
// one entry per transactional id (the request keys its entries by id: a
// second question for an id already in the request waits for the next
// one). One connection per broker is kept open between requests and
// dropped on any error. A question is answered exactly once: with the
// coordinator's code per partition, or, when the request could not be sent
// or answered within the timeout, NOT_COORDINATOR for every partition
// (the producer is told to retry, the coordinator may have moved).
//
// Memory: at most limits::max_remote_verifications_queued questions wait;
// beyond, ask() answers at once (not_enough_replicas, retriable).
//
// Thread safety: ask() from any thread; answers run on the verifier's
// thread, or on the caller's when answered at once. stop() joins the
// thread and answers every waiting question NOT_COORDINATOR.

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "protocol/error_code.h"
#include "protocol/messages.h"
#include "txn/coordinator.h"

namespace sluice::kafka {

struct services;

// Whether this broker may answer as the transaction coordinator of
// `transactional_id`: it leads the id's partition of __transaction_state and
// the leadership gate lets it act as that leader. A broker deposed without
// knowing it yet (cut off, paused) still holds the id's old state; its word
// on a transaction already ended elsewhere would open one nobody ends.
bool coordinates_here(const services& svc, std::string_view transactional_id);

class txn_verifier {
 public:
  struct endpoint {
    std::string host;
    int32_t port = 0;
  };
  // The listener of broker `id`, or nullopt when it is not registered.
  using endpoint_fn = std::function<std::optional<endpoint>(int32_t id)>;
  // Every partition asked, with the coordinator's answer for it.
  using answer = std::map<txn::topic_partition, error_code>;
  using done_fn = std::function<void(const answer&)>;

  struct question {
    std::string transactional_id;
    int64_t producer_id = -1;
    int16_t producer_epoch = -1;
    txn::partition_set partitions;
    // Transaction version 2 (Produce v12, TxnOffsetCommit v5): add the
    // partitions to the producer's transaction rather than only verify.
    bool add = false;
  };

  explicit txn_verifier(endpoint_fn endpoints, int64_t timeout_ms);
  ~txn_verifier();  // stop()s

  // Asks broker `coordinator` about `q`; `done` runs exactly once.
  void ask(int32_t coordinator, question q, done_fn done);
  void stop();  // idempotent

  // The request of one round to one broker: which questions it holds (each
  // transactional id once), and which wait for a later round. Exposed for
  // tests.
  struct pending {
    question q;
    done_fn done;
  };
  static protocol::add_partitions_to_txn_request build_request(const std::deque<pending>& batch);
  // The answer to `q` in `resp` (a partition the coordinator did not name is
  // NOT_COORDINATOR). Exposed for tests.
  static answer answer_for(const question& q, const protocol::add_partitions_to_txn_response& resp);

 private:
  void run();
  // Sends `batch` (one id each) to `coordinator` and answers it.
  void send(int32_t coordinator, std::deque<pending> batch);

  const endpoint_fn endpoints_;
  const int64_t timeout_ms_;
  std::mutex mu_;  // guards queue_, queued_, stopping_
  std::condition_variable cv_;
  std::map<int32_t, std::deque<pending>> queue_;  // by coordinator
  size_t queued_ = 0;
  bool stopping_ = false;
  class connections;
  std::unique_ptr<connections> conns_;  // the sending thread's only
  std::thread thread_;
};

}  // namespace sluice::kafka
