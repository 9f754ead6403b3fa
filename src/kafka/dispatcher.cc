#include "kafka/dispatcher.h"

#include "kafka/forwarder.h"
#include "kafka/handlers/handlers.h"
#include "metadata/metadata_cache.h"

#include <algorithm>
#include <atomic>

#include "base/limits.h"
#include "base/log.h"

namespace sluice::kafka {

net::response to_net_response(const protocol::response_chunks& rc) {
  net::response out;
  uint64_t skip = 4;  // the size prefix; the server writes its own
  std::vector<std::byte> pending;
  const auto& chunks = rc.chunks();
  for (size_t i = 0; i < chunks.size(); ++i) {
    const protocol::chunk& c = chunks[i];
    if (c.type == protocol::chunk::kind::file) {
      if (!pending.empty()) out.append(std::move(pending));
      pending.clear();
      out.append(net::file_region{c.file.owner, c.file.fd, c.file.pos, c.file.length});
      continue;
    }
    if (pending.empty()) {
      // One allocation for the run of byte chunks up to the next file
      // chunk: a share fetch's records (memory chunks of megabytes) would
      // otherwise be copied again at each doubling.
      uint64_t run = 0;
      for (size_t j = i; j < chunks.size() && chunks[j].type != protocol::chunk::kind::file; ++j)
        run += rc.bytes_of(chunks[j]).size();
      pending.reserve(run);
    }
    auto b = rc.bytes_of(c);
    uint64_t cut = std::min<uint64_t>(skip, b.size());
    skip -= cut;
    b = b.subspan(cut);
    const auto* p = reinterpret_cast<const std::byte*>(b.data());
    pending.insert(pending.end(), p, p + b.size());
  }
  if (!pending.empty()) out.append(std::move(pending));
  return out;
}

std::string client_host_of(const std::string& peer) {
  const auto colon = peer.rfind(':');
  if (colon == std::string::npos) return {};  // the server could not read the address
  return "/" + peer.substr(0, colon);
}

void dispatcher::on_connection_open(net::connection_context& ctx) {
  auto st = std::make_shared<connection_state>();
  st->client_host = client_host_of(ctx.peer);
  ctx.state = std::move(st);
}

namespace {

// An INFO line names the client that asked for a version the broker does
// not serve (the operator's clue to an old client), at most one per
// limits::rate_limited_log_interval_ms so a client retrying in a loop cannot
// flood the log; the rest go to DEBUG.
void log_unsupported(const sluice::clock& clk, const net::connection_context& ctx, int16_t key, int16_t version,
                     const std::optional<std::string>& client_id, std::string_view answer) {
  static std::atomic<int64_t> last_info_ms{INT64_MIN / 2};
  const int64_t now_ms = clk.monotonic_ms();
  int64_t last = last_info_ms.load(std::memory_order_relaxed);
  const bool info = now_ms - last >= limits::rate_limited_log_interval_ms && last_info_ms.compare_exchange_strong(last, now_ms);
  if (info) {
    SLUICE_LOG_INFO("client {} at {} asked for api {} version {}, which this broker does not serve; {}",
                    client_id.value_or("(none)"), ctx.peer, key, version, answer);
  } else {
    SLUICE_LOG_DEBUG("client {} at {} asked for api {} version {}, not served", client_id.value_or("(none)"),
                     ctx.peer, key, version);
  }
}

}  // namespace

void dispatcher::handle_here(request req) {
  auto handlers = api_handlers();
  auto it = std::find_if(handlers.begin(), handlers.end(),
                         [&](const api_handler& h) { return h.api_key == req.api_key(); });
  SLUICE_ASSERT(it != handlers.end(), "a request forwarded here was of a known API");
  it->handle(std::move(req));
}

void dispatcher::on_request(net::connection_context& ctx, std::vector<std::byte> frame, net::responder r) {
  auto bytes = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(frame.data()), frame.size());
  protocol::reader rd(bytes);
  auto hdr = protocol::decode_request_header(rd);
  if (!hdr.ok()) {
    SLUICE_LOG_DEBUG("closing connection {} ({}): bad request header: {}", ctx.id, ctx.peer, hdr.err().message);
    r.close_connection();
    return;
  }
  const int16_t key = hdr->header.request_api_key;
  const int16_t version = hdr->header.request_api_version;
  if (svc_.requests) svc_.requests->on_request(key, frame.size() + 4);
  auto handlers = api_handlers();
  auto it = std::find_if(handlers.begin(), handlers.end(), [&](const api_handler& h) { return h.api_key == key; });
  const bool known = it != handlers.end();
  const bool supported = known && hdr->supported && version >= it->min_version && version <= it->max_version;
  const bool advertised_only =
      known && hdr->supported && version >= advertised_min_version(*it) && version < it->min_version;

  if (auto* st = static_cast<connection_state*>(ctx.state.get()); st && st->client_id.empty() && hdr->header.client_id) {
    st->client_id = *hdr->header.client_id;
  }

  if (!supported) {
    if (svc_.requests) svc_.requests->on_unsupported_version(key);
    log_unsupported(*svc_.clk, ctx, key, version, hdr->header.client_id,
                    advertised_only ? "answering UNSUPPORTED_VERSION"
                                    : "closing the connection (ApiVersions answers UNSUPPORTED_VERSION)");
  }
  if (!supported && !advertised_only) {
    if (key == protocol::api_versions_request::api_key) {
      // KIP-511: answer in v0 layout, listing the ApiVersions range.
      std::vector<protocol::api_support> rows;
      for (const auto& h : handlers) rows.push_back({h.api_key, "", h.min_version, h.max_version, 0});
      auto body = protocol::unsupported_api_versions_response(rows);
      r.respond(to_net_response(protocol::encode_response(hdr->header.correlation_id, 0, body)));
      return;
    }
    r.close_connection();
    return;
  }
  request req{std::move(hdr->header), std::move(frame), std::move(r), &svc_};
  req.arrived_ns = svc_.clk->monotonic_ns();
  const auto* st = static_cast<const connection_state*>(ctx.state.get());
  if (st) req.client_host = st->client_host;
  if (key == protocol::fetch_request::api_key) {
    req.min_rtt = ctx.min_rtt();
    if (st) req.fetch_cursor = st->fetch_cursor;
  }
  // The controller's requests (forwarder.h): passed on to the controller,
  // or on the controller run on the forwarding thread, since they wait on
  // etcd, which an I/O thread must not.
  if (svc_.forward && svc_.metadata &&
      (forwarder::forwardable(key) || (is_alter_configs(key) && alter_configs_for_controller(req)))) {
    const int32_t controller = svc_.metadata->controller_id();
    if (controller >= 0 && controller != svc_.node_id) {
      if (auto b = svc_.metadata->broker(controller)) {
        svc_.forward->submit(std::move(req), b->host, b->port);
        return;
      }
    }
    svc_.forward->handle_here(std::move(req));
    return;
  }
  it->handle(std::move(req));
}

}  // namespace sluice::kafka
