#include "kafka/share_sessions.h"

#include "base/limits.h"

namespace sluice::kafka {

error_code share_session_cache::advance(session* s, int32_t epoch, std::string& message) {
  if (!s) {
    message = "no share session for this member on this broker";
    return error_code::share_session_not_found;
  }
  if (epoch != s->next_epoch) {
    message = "share session epoch " + std::to_string(epoch) + " is not the next one (" +
              std::to_string(s->next_epoch) + ")";
    return error_code::invalid_share_session_epoch;
  }
  s->next_epoch = s->next_epoch == INT32_MAX ? 1 : s->next_epoch + 1;
  return error_code::none;
}

void share_session_cache::close(std::map<key, session>::iterator it, outcome& out) {
  if (it == sessions_.end()) {
    out.error = error_code::share_session_not_found;
    out.message = "no share session for this member on this broker";
    return;
  }
  out.partitions.assign(it->second.partitions.begin(), it->second.partitions.end());
  out.released.push_back({it->first, out.partitions});
  sessions_.erase(it);
}

share_session_cache::outcome share_session_cache::fetch(const std::string& group_id, const std::string& member_id,
                                                        int32_t epoch, const std::vector<share_tp>& added,
                                                        const std::vector<share_tp>& forgotten, int64_t now_ms) {
  outcome out;
  const key k{group_id, member_id};
  std::lock_guard g(mu_);
  auto it = sessions_.find(k);
  if (epoch == 0) {
    if (it != sessions_.end()) {
      // Replaced: what the member held under the old session goes back.
      out.released.push_back({k, {it->second.partitions.begin(), it->second.partitions.end()}});
      sessions_.erase(it);
    } else if (sessions_.size() >= limits::max_share_sessions) {
      // Evict the least recently used idle session, if one is idle enough.
      auto victim = sessions_.end();
      for (auto j = sessions_.begin(); j != sessions_.end(); ++j)
        if (now_ms - j->second.last_used_ms >= idle_eviction_ms_ &&
            (victim == sessions_.end() || j->second.last_used_ms < victim->second.last_used_ms))
          victim = j;
      if (victim == sessions_.end()) {
        out.error = error_code::share_session_limit_reached;
        out.message = "this broker holds the most share sessions it may";
        return out;
      }
      out.released.push_back({victim->first, {victim->second.partitions.begin(), victim->second.partitions.end()}});
      sessions_.erase(victim);
    }
    session s;
    s.last_used_ms = now_ms;
    for (const auto& tp : added) {
      if (s.partitions.size() >= limits::max_share_session_partitions) break;
      s.partitions.insert(tp);
    }
    out.partitions.assign(s.partitions.begin(), s.partitions.end());
    sessions_.emplace(k, std::move(s));
    return out;
  }
  session* s = it == sessions_.end() ? nullptr : &it->second;
  if (epoch == -1) {
    close(it, out);
    return out;
  }
  if ((out.error = advance(s, epoch, out.message)) != error_code::none) return out;
  s->last_used_ms = now_ms;
  std::vector<share_tp> gone;
  for (const auto& tp : forgotten)
    if (s->partitions.erase(tp)) gone.push_back(tp);
  if (!gone.empty()) out.released.push_back({k, std::move(gone)});
  for (const auto& tp : added) {
    if (s->partitions.size() >= limits::max_share_session_partitions && !s->partitions.count(tp)) {
      out.error = error_code::invalid_request;
      out.message = "a share session holds at most " + std::to_string(limits::max_share_session_partitions) +
                    " partitions";
      return out;
    }
    s->partitions.insert(tp);
  }
  out.partitions.assign(s->partitions.begin(), s->partitions.end());
  return out;
}

share_session_cache::outcome share_session_cache::acknowledge(const std::string& group_id,
                                                              const std::string& member_id, int32_t epoch,
                                                              int64_t now_ms) {
  outcome out;
  const key k{group_id, member_id};
  std::lock_guard g(mu_);
  auto it = sessions_.find(k);
  session* s = it == sessions_.end() ? nullptr : &it->second;
  if (epoch == 0) {
    out.error = error_code::invalid_share_session_epoch;
    out.message = "ShareAcknowledge cannot open a share session (epoch 0)";
    return out;
  }
  if (epoch == -1) {
    close(it, out);
    return out;
  }
  if ((out.error = advance(s, epoch, out.message)) != error_code::none) return out;
  s->last_used_ms = now_ms;
  out.partitions.assign(s->partitions.begin(), s->partitions.end());
  return out;
}

size_t share_session_cache::size() const {
  std::lock_guard g(mu_);
  return sessions_.size();
}

}  // namespace sluice::kafka
