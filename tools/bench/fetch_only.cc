#include "fetch_only.h"

#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include <netdb.h>
#include <sys/socket.h>

#include "base/endian.h"
#include "protocol/frame.h"
#include "model/record_batch.h"
#include "protocol/records/record_batch.h"
#include "raw_limits.h"
#include "report.h"

namespace sluice::bench {
namespace {

// librdkafka's receive.message.max.bytes: a larger answer is refused, not
// allocated.
constexpr int32_t max_answer_bytes = 100'000'000;

bool read_exact(int fd, uint8_t* p, size_t n) {
  while (n > 0) {
    ssize_t r = ::recv(fd, p, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

}  // namespace

std::variant<fetch_only_result, std::string> fetch_only(const std::string& bootstrap,
                                                        const std::string& topic, int partitions,
                                                        const fetch_shape& shape) {
  // HOST:PORT, the first of a comma-separated list; HOST resolved as
  // librdkafka would (a name, IPv4, or IPv6 in brackets).
  const std::string first = bootstrap.substr(0, bootstrap.find(','));
  const auto colon = first.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == first.size())
    return "fetch-only: bootstrap " + first + " is not HOST:PORT";
  std::string host = first.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int e = ::getaddrinfo(host.c_str(), first.substr(colon + 1).c_str(), &hints, &found))
    return "fetch-only: " + first + ": " + ::gai_strerror(e);
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> addrs(found, &::freeaddrinfo);
  fd_guard sock(::socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (sock.fd < 0) return os_error("fetch-only: socket");
  if (::connect(sock.fd, found->ai_addr, found->ai_addrlen) != 0)
    return os_error("fetch-only: connect " + first);

  std::vector<int64_t> next(static_cast<size_t>(partitions), 0);
  // What the client may read up to: the high watermark, or for
  // read_committed the last stable offset; -1 until an answer says.
  std::vector<int64_t> end(static_cast<size_t>(partitions), -1);
  auto all_read = [&] {
    for (size_t i = 0; i < next.size(); ++i)
      if (end[i] < 0 || next[i] < end[i]) return false;
    return true;
  };
  std::vector<uint8_t> frame;  // reused, as a client reuses its receive buffer
  fetch_only_result out;
  int32_t correlation = 0;
  const int64_t t0 = now_ns();
  while (!all_read()) {
    protocol::fetch_request req;
    req.max_wait_ms = 500;
    req.min_bytes = 1;
    req.max_bytes = shape.max_bytes;
    req.isolation_level = shape.isolation_level;
    auto& t = req.topics.emplace_back();
    t.topic = topic;
    for (int p = 0; p < partitions; ++p) {
      auto& fp = t.partitions.emplace_back();
      fp.partition = p;
      fp.fetch_offset = next[static_cast<size_t>(p)];
      fp.partition_max_bytes = shape.partition_max_bytes;
    }
    auto bytes = protocol::encode_request(++correlation, shape.version, req).flatten();
    if (!bytes.ok()) return "fetch-only: encoding a request: " + bytes.err().message;
    if (!write_all(sock.fd, bytes->data(), bytes->size()))
      return os_error("fetch-only: sending a request");

    uint8_t len[4];
    if (!read_exact(sock.fd, len, 4)) return os_error("fetch-only: reading an answer");
    const int32_t n = load_be<int32_t>(len);
    if (n < 0 || n > max_answer_bytes)
      return "fetch-only: answer of " + std::to_string(n) + " bytes";
    if (frame.size() < static_cast<size_t>(n)) frame.resize(static_cast<size_t>(n));
    if (!read_exact(sock.fd, frame.data(), static_cast<size_t>(n)))
      return os_error("fetch-only: reading an answer");
    ++out.answers;
    out.answer_bytes += 4 + static_cast<uint64_t>(n);

    protocol::reader r(std::span<const uint8_t>(frame.data(), static_cast<size_t>(n)));
    protocol::response_header h;
    h.read(r, protocol::response_header_version(protocol::fetch_response::api_key, shape.version));
    protocol::fetch_response resp;
    resp.read(r, shape.version);
    if (!r.ok()) return "fetch-only: malformed answer: " + r.to_status().err().message;
    if (h.correlation_id != correlation) return "fetch-only: answer to another request";
    if (resp.error_code != 0)
      return "fetch-only: answer with error code " + std::to_string(resp.error_code);
    bool moved = false;
    for (const auto& tr : resp.responses)
      for (const auto& pd : tr.partitions) {
        if (pd.error_code != 0)
          return "fetch-only: partition " + std::to_string(pd.partition_index) + " error code " +
                 std::to_string(pd.error_code);
        if (pd.partition_index < 0 || pd.partition_index >= partitions)
          return "fetch-only: answer for partition " + std::to_string(pd.partition_index);
        const auto i = static_cast<size_t>(pd.partition_index);
        end[i] = shape.isolation_level == 1 && pd.last_stable_offset >= 0 ? pd.last_stable_offset
                                                                          : pd.high_watermark;
        auto batches = protocol::records::split_batches(pd.records.view());
        if (!batches.ok()) return "fetch-only: " + batches.err().message;
        for (auto b : *batches) {
          auto hdr = model::batch::read_header(b);
          if (!hdr.ok()) return "fetch-only: " + hdr.err().message;
          out.records += static_cast<uint64_t>(hdr->records_count);
          next[i] = hdr->last_offset().value() + 1;
          moved = true;
        }
      }
    // The broker answers as soon as it has records at the offsets asked
    // for (min_bytes 1), so an answer that moved nothing would repeat
    // forever.
    if (!moved && !all_read())
      return std::string("fetch-only: an answer moved no partition forward");
  }
  out.seconds = static_cast<double>(now_ns() - t0) / 1e9;
  return out;
}

}  // namespace sluice::bench
