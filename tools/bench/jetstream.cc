// NATS JetStream beside Sluice in `sluice-bench cluster` (see jetstream.h).

#include "jetstream.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>

#include <nats/nats.h>
#include <signal.h>
#include <unistd.h>

#include "child_process.h"
#include "kafka_util.h"
#include "pacer.h"
#include "report.h"

namespace sluice::bench {
namespace {

struct ack_state {
  std::mutex mu;
  std::vector<double> pub_ms;
  uint64_t acked = 0, failed = 0;
  int64_t last_ack_ns = 0;
  std::string first_error;
};

// Called on the client's thread that reads the acknowledgements.
void on_ack(jsCtx*, natsMsg* msg, jsPubAck* pa, jsPubAckErr* pae, void* closure) {
  auto* st = static_cast<ack_state*>(closure);
  const int64_t t = now_ns();
  int64_t sent = 0;
  if (natsMsg_GetDataLength(msg) >= static_cast<int>(sizeof sent))
    std::memcpy(&sent, natsMsg_GetData(msg), sizeof sent);
  {
    std::lock_guard g(st->mu);
    if (pa) {
      ++st->acked;
      st->last_ack_ns = t;
      st->pub_ms.push_back(static_cast<double>(t - sent) / 1e6);
    } else {
      ++st->failed;
      if (st->first_error.empty())
        st->first_error = pae && pae->ErrText ? pae->ErrText : "publish failed";
    }
  }
  natsMsg_Destroy(msg);
}

std::string nats_error(const std::string& what, natsStatus s) {
  return what + ": " + natsStatus_GetText(s) + " (" + nats_GetLastError(nullptr) + ")";
}

struct conn_deleter {
  void operator()(natsConnection* c) const { natsConnection_Destroy(c); }
  void operator()(jsCtx* j) const { jsCtx_Destroy(j); }
};

}  // namespace

jetstream_cluster::jetstream_cluster(const std::string& binary, const std::string& root,
                                     int servers) {
  if (::access(binary.c_str(), X_OK) != 0)
    throw bench_error{binary +
                      " not found: install the nats-server package (scripts/install-deps.sh) "
                      "or give --nats-server PATH"};
  std::vector<uint16_t> cluster_ports;
  for (int i = 0; i < servers; ++i) {
    ports_.push_back(free_port());
    cluster_ports.push_back(free_port());
  }
  for (int i = 0; i < servers; ++i) {
    std::string routes;
    for (int j = 0; j < servers; ++j)
      if (j != i)
        routes += (routes.empty() ? "" : ",") + std::string("nats://127.0.0.1:") +
                  std::to_string(cluster_ports[static_cast<size_t>(j)]);
    const std::string name = "js" + std::to_string(i + 1);
    std::vector<std::string> argv = {
        binary,
        "-a",
        "127.0.0.1",
        "-p",
        std::to_string(ports_[static_cast<size_t>(i)]),
        "--server_name",
        name,
        "-js",
        "-sd",
        root + "/" + name,
        "--cluster_name",
        "sluice-bench",
        "--cluster",
        "nats://127.0.0.1:" + std::to_string(cluster_ports[static_cast<size_t>(i)]),
        "--routes",
        routes};
    servers_.push_back(std::make_unique<child_process>(argv, root + "/" + name + ".log"));
    servers_.back()->start();
  }
  for (int i = 0; i < servers; ++i)
    servers_[static_cast<size_t>(i)]->wait_listening(ports_[static_cast<size_t>(i)], 30);
}

jetstream_cluster::~jetstream_cluster() {
  for (auto& s : servers_) s->stop(SIGTERM);
}

std::vector<pid_t> jetstream_cluster::pids() const {
  std::vector<pid_t> out;
  for (const auto& s : servers_) out.push_back(s->pid());
  return out;
}

std::string jetstream_cluster::urls() const {
  std::string out;
  for (auto p : ports_)
    out += (out.empty() ? "" : ",") + std::string("nats://127.0.0.1:") + std::to_string(p);
  return out;
}

js_publish_stats jetstream_cluster::publish_phase(const std::string& name, int replicas,
                                                  double rate, double seconds, size_t message_bytes,
                                                  int max_pending, const std::atomic<bool>* stop) {
  ack_state st;
  st.pub_ms.reserve(1 << 20);
  natsConnection* raw_nc = nullptr;
  if (natsStatus s = natsConnection_ConnectTo(&raw_nc, urls().c_str()); s != NATS_OK)
    throw bench_error{nats_error("connect to " + urls(), s)};
  std::unique_ptr<natsConnection, conn_deleter> nc(raw_nc);
  jsOptions jo;
  jsOptions_Init(&jo);
  jo.PublishAsync.MaxPending = max_pending;
  jo.PublishAsync.AckHandler = on_ack;
  jo.PublishAsync.AckHandlerClosure = &st;
  jo.PublishAsync.StallWait = 10;
  jsCtx* raw_js = nullptr;
  if (natsStatus s = natsConnection_JetStream(&raw_js, nc.get(), &jo); s != NATS_OK)
    throw bench_error{nats_error("JetStream context", s)};
  std::unique_ptr<jsCtx, conn_deleter> js(raw_js);

  // The stream, once the servers have elected JetStream's meta leader.
  jsStreamConfig cfg;
  jsStreamConfig_Init(&cfg);
  const char* subjects[] = {name.c_str()};
  cfg.Name = name.c_str();
  cfg.Subjects = subjects;
  cfg.SubjectsLen = 1;
  cfg.Storage = js_FileStorage;
  cfg.Replicas = replicas;
  const int64_t deadline = now_ns() + 30'000'000'000;
  for (;;) {
    jsStreamInfo* si = nullptr;
    jsErrCode jerr = static_cast<jsErrCode>(0);
    natsStatus s = js_AddStream(&si, js.get(), &cfg, nullptr, &jerr);
    if (si) jsStreamInfo_Destroy(si);
    if (s == NATS_OK) break;
    if (now_ns() > deadline || (stop && stop->load()))
      throw bench_error{
          nats_error("create stream " + name + " (R" + std::to_string(replicas) + ")", s)};
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }

  std::vector<char> payload(std::max<size_t>(message_bytes, 8), 'x');
  const auto cpu0 = processes_cpu_seconds(pids());
  const int64_t t0 = now_ns();
  const int64_t end = t0 + static_cast<int64_t>(seconds * 1e9);
  std::optional<pacer> pace;  // as Sluice's (produce_phase.cc): the same ticks, timed from due
  if (rate > 0) pace.emplace(t0, rate);
  uint64_t sent = 0;
  double lag_max = 0;
  for (;;) {
    int64_t now = now_ns();
    if (now >= end || (stop && stop->load())) break;
    if (pace) {
      if (const int64_t nap = pace->sleep_ns(now); nap > 0) {
        std::this_thread::sleep_for(std::chrono::nanoseconds(nap));
        continue;
      }
      const int64_t due = pace->sent();
      lag_max = std::max(lag_max, static_cast<double>(now - due) / 1e6);
      now = due;
    }
    for (;;) {
      std::memcpy(payload.data(), &now, sizeof now);
      natsStatus s = js_PublishAsync(js.get(), name.c_str(), payload.data(),
                                     static_cast<int>(payload.size()), nullptr);
      if (s == NATS_OK) break;
      // NATS_TIMEOUT: max_pending in flight for StallWait; try again.
      if (s != NATS_TIMEOUT) throw bench_error{nats_error("js_PublishAsync", s)};
      if (!pace) now = now_ns();
    }
    ++sent;
  }
  jsPubOptions po;
  jsPubOptions_Init(&po);
  po.MaxWait = 60'000;
  const natsStatus done = js_PublishAsyncComplete(js.get(), &po);
  const auto cpu1 = processes_cpu_seconds(pids());

  js_publish_stats r;
  {
    std::lock_guard g(st.mu);
    const int64_t t1 = st.last_ack_ns > 0 ? st.last_ack_ns : now_ns();
    r.acked = st.acked;
    r.failed = st.failed;
    r.first_error = st.first_error;
    if (done != NATS_OK && r.first_error.empty())
      r.first_error = nats_error("waiting for the acknowledgements", done);
    r.msgs_per_s =
        static_cast<double>(st.acked) * 1e9 / static_cast<double>(std::max<int64_t>(t1 - t0, 1));
    r.publish_ms = std::move(st.pub_ms);
  }
  std::sort(r.publish_ms.begin(), r.publish_ms.end());
  if (cpu0 && cpu1) r.server_cpu_seconds = *cpu1 - *cpu0;
  r.schedule_lag_max_ms = lag_max;
  jsErrCode jerr = static_cast<jsErrCode>(0);
  js_DeleteStream(js.get(), name.c_str(), nullptr, &jerr);  // best effort: frees the disk
  return r;
}

}  // namespace sluice::bench
