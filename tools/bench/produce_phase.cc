#include "produce_phase.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>

#include <librdkafka/rdkafka.h>
#include <unistd.h>

#include "kafka_util.h"
#include "pacer.h"
#include "report.h"

namespace sluice::bench {
namespace {

struct producer_state {
  std::mutex mu;
  const std::function<void(int32_t, int64_t, int64_t, bool)>* on_ack = nullptr;
  std::vector<double> pub_ms;
  uint64_t acked = 0, failed = 0;
  int64_t last_ack_ns = 0;
  std::string first_error;
};

void on_delivery(rd_kafka_t*, const rd_kafka_message_t* m, void* opaque) {
  auto* st = static_cast<producer_state*>(opaque);
  const int64_t t = now_ns();
  const auto sent = static_cast<int64_t>(reinterpret_cast<intptr_t>(m->_private));
  // Called on the poller thread and, at the end, on the
  // sending thread inside rd_kafka_flush; the lock orders them and the
  // final read.
  std::lock_guard g(st->mu);
  if (st->on_ack && *st->on_ack) (*st->on_ack)(m->partition, sent, t, !m->err);
  if (m->err) {
    ++st->failed;
    if (st->first_error.empty()) st->first_error = rd_kafka_err2str(m->err);
    return;
  }
  ++st->acked;
  st->last_ack_ns = t;
  st->pub_ms.push_back(static_cast<double>(t - sent) / 1e6);
}

struct topic_deleter {
  void operator()(rd_kafka_topic_t* t) const { rd_kafka_topic_destroy(t); }
};

}  // namespace

produce_stats produce_phase(const produce_spec& spec) {
  producer_state ps;
  ps.on_ack = &spec.on_ack;
  ps.pub_ms.reserve(1 << 20);
  std::vector<pid_t> brokers = spec.more_broker_pids;
  if (spec.broker_pid > 0) brokers.push_back(spec.broker_pid);
  rd_kafka_conf_t* c = base_conf(spec.bootstrap);
  set(c, "acks", spec.acks);
  set(c, "linger.ms", "1");
  set(c, "batch.size", "1048576");
  set_all(c, spec.props);
  rd_kafka_conf_set_dr_msg_cb(c, on_delivery);
  rd_kafka_conf_set_opaque(c, &ps);
  client_ptr prod = make_client(RD_KAFKA_PRODUCER, c);
  std::unique_ptr<rd_kafka_topic_t, topic_deleter> t(
      rd_kafka_topic_new(prod.get(), spec.topic.c_str(), nullptr));
  // Delivery reports are served on a thread of their own, so each is timed
  // when librdkafka hands it over, not when the sender next gets round to it.
  std::optional<repeat_thread> poller(
      std::in_place, [rk = prod.get()] { rd_kafka_poll(rk, 10); }, std::chrono::milliseconds(0));
  // The clock starts once the producer knows the topic's partitions and
  // leaders, and so is connected to the broker: otherwise the first
  // milliseconds of messages wait for the connection and the metadata
  // (about 15 ms here), a cost paid once, which alone set the p99.9.
  const rd_kafka_metadata_t* md = nullptr;
  if (auto e = rd_kafka_metadata(prod.get(), 0, t.get(), &md, 10'000))
    throw bench_error{std::string("metadata of ") + spec.topic + ": " + rd_kafka_err2str(e)};
  rd_kafka_metadata_destroy(md);

  std::vector<char> payload(std::max<size_t>(spec.message_bytes, 8), 'x');
  std::vector<std::string> keys;
  for (int i = 0; i < spec.key_count; ++i) keys.push_back("key-" + std::to_string(i));

  const auto cpu0 = processes_cpu_seconds(brokers);
  const auto self0 = process_cpu_seconds(::getpid());
  const int64_t t0 = now_ns();
  const int64_t end = t0 + static_cast<int64_t>(spec.seconds * 1e9);
  std::optional<pacer> pace;
  if (spec.rate > 0) pace.emplace(t0, spec.rate);
  uint64_t sent = 0;
  double lag_max = 0;
  for (;;) {
    int64_t now = now_ns();
    if (now >= end || (spec.max_messages > 0 && sent >= spec.max_messages) ||
        (spec.stop && spec.stop->load()))
      break;
    if (pace) {
      // Sleep, never spin: a spinning sender takes a core from the broker
      // on a small machine.
      if (const int64_t nap = pace->sleep_ns(now); nap > 0) {
        std::this_thread::sleep_for(std::chrono::nanoseconds(nap));
        continue;
      }
      const int64_t due = pace->sent();
      lag_max = std::max(lag_max, static_cast<double>(now - due) / 1e6);
      now = due;  // timed from when it fell due (pacer.h)
    }
    std::memcpy(payload.data(), &now, sizeof now);
    const std::string* key = keys.empty() ? nullptr : &keys[sent % keys.size()];
    const int32_t partition =
        spec.round_robin_partitions > 0
            ? static_cast<int32_t>(sent % static_cast<uint64_t>(spec.round_robin_partitions))
            : RD_KAFKA_PARTITION_UA;
    for (;;) {
      int rc = rd_kafka_produce(t.get(), partition, RD_KAFKA_MSG_F_COPY, payload.data(),
                                payload.size(), key ? key->data() : nullptr, key ? key->size() : 0,
                                reinterpret_cast<void*>(static_cast<intptr_t>(now)));
      if (rc == 0) break;
      if (rd_kafka_last_error() != RD_KAFKA_RESP_ERR__QUEUE_FULL)
        throw bench_error{std::string("produce: ") + rd_kafka_err2str(rd_kafka_last_error())};
      std::this_thread::sleep_for(std::chrono::milliseconds(1));  // the poller frees room
      if (!pace) {  // a paced message keeps its due time
        now = now_ns();
        std::memcpy(payload.data(), &now, sizeof now);
      }
    }
    ++sent;
  }
  rd_kafka_flush(prod.get(), 60'000);
  poller.reset();
  const auto cpu1 = processes_cpu_seconds(brokers);
  const auto self1 = process_cpu_seconds(::getpid());

  produce_stats r;
  std::lock_guard g(ps.mu);
  const int64_t t1 = ps.last_ack_ns > 0 ? ps.last_ack_ns : now_ns();
  r.acked = ps.acked;
  r.failed = ps.failed;
  r.first_error = ps.first_error;
  r.msgs_per_s =
      static_cast<double>(ps.acked) * 1e9 / static_cast<double>(std::max<int64_t>(t1 - t0, 1));
  r.bytes_per_s = r.msgs_per_s * static_cast<double>(payload.size());
  r.publish_ms = std::move(ps.pub_ms);
  std::sort(r.publish_ms.begin(), r.publish_ms.end());
  if (!brokers.empty()) r.broker_cores = cores_between(cpu0, cpu1, t0, t1);
  if (cpu0 && cpu1) r.broker_cpu_seconds = *cpu1 - *cpu0;
  r.client_cores = cores_between(self0, self1, t0, t1);
  r.schedule_lag_max_ms = lag_max;
  return r;
}

background_produce::background_produce(produce_spec spec)
    : thread_([this, spec = std::move(spec)]() mutable {
        spec.stop = &stop_;
        try {
          stats_ = produce_phase(spec);
        } catch (...) {
          error_ = std::current_exception();
        }
      }) {}

background_produce::~background_produce() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

produce_stats background_produce::finish() {
  thread_.join();
  if (error_) std::rethrow_exception(error_);
  return std::move(stats_);
}

}  // namespace sluice::bench
