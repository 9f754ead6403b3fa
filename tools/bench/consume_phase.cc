// The librdkafka consumers the broker and cluster benchmarks share (see
// consume_phase.h).

#include "consume_phase.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <thread>

#include <librdkafka/rdkafka.h>
#include <unistd.h>

#include "kafka_util.h"
#include "report.h"

namespace sluice::bench {

double consume_rate(const consume_result& c) {
  if (c.messages > c.first_batch && c.last_ns > c.first_ns)
    return static_cast<double>(c.messages - c.first_batch) * 1e9 /
           static_cast<double>(c.last_ns - c.first_ns);
  if (c.last_ns > c.started_ns)
    return static_cast<double>(c.messages) * 1e9 / static_cast<double>(c.last_ns - c.started_ns);
  return 0;
}

void consume(const std::string& bootstrap, const std::string& topic, partition_range parts_to_read,
             bool record_e2e, const std::atomic<bool>& producing,
             const std::atomic<uint64_t>& expected, int64_t deadline_ns, consume_result& out,
             std::atomic<uint64_t>* together, std::atomic<bool>* ready,
             const std::vector<std::string>& props) {
  try {
    rd_kafka_conf_t* c = base_conf(bootstrap);
    set(c, "group.id", "sluice-bench-" + std::to_string(::getpid()));
    set(c, "enable.auto.commit", "false");
    set(c, "auto.offset.reset", "earliest");
    set_all(c, props);
    client_ptr rk = make_client(RD_KAFKA_CONSUMER, c);
    rd_kafka_poll_set_consumer(rk.get());
    parts_ptr parts(rd_kafka_topic_partition_list_new(parts_to_read.count));
    for (int p = parts_to_read.first; p < parts_to_read.first + parts_to_read.count; ++p)
      rd_kafka_topic_partition_list_add(parts.get(), topic.c_str(), p)->offset =
          RD_KAFKA_OFFSET_BEGINNING;
    if (auto e = rd_kafka_assign(rk.get(), parts.get()))
      throw bench_error{std::string("assign: ") + rd_kafka_err2str(e)};
    out.started_ns = now_ns();
    queue_ptr q(rd_kafka_queue_get_consumer(rk.get()));
    std::vector<rd_kafka_message_t*> batch(1024);
    if (record_e2e) out.e2e_ms.reserve(1 << 20);
    while (now_ns() < deadline_ns) {
      if (!producing.load() && (together ? together->load() : out.messages) >= expected.load())
        break;
      // Wait for one message, then take what else is already there: a batch
      // call alone would wait until `batch` is full (or the timeout), which
      // at a fixed rate adds that wait to every end-to-end latency.
      ssize_t n = 0;
      if (rd_kafka_message_t* m = rd_kafka_consume_queue(q.get(), 100)) {
        batch[0] = m;
        n = 1 + std::max<ssize_t>(0, rd_kafka_consume_batch_queue(q.get(), 0, batch.data() + 1,
                                                                  batch.size() - 1));
      }
      const int64_t t = now_ns();
      if (ready) *ready = true;
      const bool first = out.messages == 0;
      const uint64_t before = out.messages;
      for (ssize_t i = 0; i < n; ++i) {
        rd_kafka_message_t* m = batch[static_cast<size_t>(i)];
        if (!m->err) {
          if (out.messages == 0) out.first_ns = t;
          ++out.messages;
          out.last_ns = t;
          if (record_e2e && m->len >= 8) {
            int64_t sent;
            std::memcpy(&sent, m->payload, sizeof sent);
            out.e2e_ms.push_back(static_cast<double>(t - sent) / 1e6);
          }
        } else if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF && out.error.empty()) {
          out.error = rd_kafka_message_errstr(m);
        }
        rd_kafka_message_destroy(m);
      }
      if (together) *together += out.messages - before;
      if (first) out.first_batch = out.messages;
    }
    rd_kafka_consumer_close(rk.get());
  } catch (const bench_error& e) {
    out.error = e.message;
  }
  if (ready) *ready = true;
}

partition_range share_of(int partitions, int n, int i) {
  const int base = partitions / n, extra = partitions % n;
  return {i * base + std::min(i, extra), base + (i < extra ? 1 : 0)};
}

consume_result merged(const std::vector<consume_result>& all) {
  consume_result m;
  for (const auto& c : all) {
    if (m.error.empty()) m.error = c.error;
    m.messages += c.messages;
    if (m.started_ns == 0 || c.started_ns < m.started_ns) m.started_ns = c.started_ns;
    if (c.messages > 0 && (m.first_ns == 0 || c.first_ns < m.first_ns)) {
      m.first_ns = c.first_ns;
      m.first_batch = c.first_batch;
    }
    m.last_ns = std::max(m.last_ns, c.last_ns);
  }
  return m;
}

catch_up_result catch_up(const std::string& bootstrap, const std::string& topic, int partitions,
                         int consumers, uint64_t expected_msgs,
                         const std::vector<pid_t>& broker_pids,
                         const std::vector<std::string>& props) {
  catch_up_result out;
  std::atomic<uint64_t> expected{expected_msgs};
  std::vector<consume_result> cus(static_cast<size_t>(consumers));
  std::atomic<uint64_t> together{0};
  std::atomic<bool> not_producing{false};
  // CPU is figured between the first sample after the first message and the
  // last one before the last message, so connecting, the first fetch and
  // closing are left out. The consumers' threads end with them, so thread
  // times are sampled too.
  struct cpu_sample {
    int64_t at;
    std::optional<double> broker, self;
    std::map<pid_t, double> threads;
  };
  std::vector<cpu_sample> samples;
  {
    repeat_thread cpu([&] {
      samples.push_back({now_ns(), processes_cpu_seconds(broker_pids),
                         process_cpu_seconds(::getpid()), thread_cpu_seconds(::getpid())});
    });
    const int64_t deadline = now_ns() + 120'000'000'000;
    std::vector<std::thread> readers;
    for (int i = 0; i < consumers; ++i)
      readers.emplace_back([&, i] {
        consume(bootstrap, topic, share_of(partitions, consumers, i), false, not_producing,
                expected, deadline, cus[static_cast<size_t>(i)],
                consumers > 1 ? &together : nullptr, nullptr, props);
      });
    for (auto& t : readers) t.join();
  }
  const consume_result cu = merged(cus);
  if (!cu.error.empty()) throw bench_error{"catch-up consumer: " + cu.error};
  if (cu.messages < expected_msgs)
    throw bench_error{"catch-up consumer got " + std::to_string(cu.messages) + " of " +
                      std::to_string(expected_msgs)};
  out.msgs = consume_rate(cu);
  const cpu_sample* from = nullptr;
  const cpu_sample* to = nullptr;
  for (const auto& sm : samples) {
    if (!from && sm.at >= cu.first_ns) from = &sm;
    if (sm.at <= cu.last_ns) to = &sm;
  }
  if (from && to && to->at > from->at) {  // else too short to tell: left at -1
    out.broker_cpu = cores_between(from->broker, to->broker, from->at, to->at);
    out.client_cpu = cores_between(from->self, to->self, from->at, to->at);
    out.client_thread_max = busiest_thread_cores(from->threads, to->threads,
                                                 static_cast<double>(to->at - from->at) / 1e9);
  }
  return out;
}

}  // namespace sluice::bench
