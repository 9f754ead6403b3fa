#include "kafka/fetch_sessions.h"

namespace sluice::kafka {

bool fetch_session::upsert(const sluice::topic_id& id, const std::string& topic, int32_t partition,
                           int64_t fetch_offset, int32_t max_bytes) {
  key k{id, uses_topic_ids ? std::string() : topic, partition};
  auto it = index.find(k);
  if (it == index.end()) {
    if (partitions.size() >= limits::max_fetch_session_partitions) return false;
    if (budget && !budget->take()) return false;
    partitions.push_back(
        std::make_shared<session_partition>(session_partition{id, topic, partition, fetch_offset, max_bytes}));
    index.emplace(std::move(k), partitions.back().get());
    return true;
  }
  it->second->fetch_offset = fetch_offset;
  it->second->max_bytes = max_bytes;
  if (it->second->topic.empty()) it->second->topic = topic;
  return true;
}

void fetch_session::forget(const sluice::topic_id& id, const std::string& topic, int32_t partition) {
  auto it = index.find(key{id, uses_topic_ids ? std::string() : topic, partition});
  if (it == index.end()) return;
  const session_partition* gone = it->second;
  index.erase(it);
  std::erase_if(partitions, [&](const auto& p) { return p.get() == gone; });
  if (budget) budget->give(1);
}

std::shared_ptr<fetch_session> fetch_session_cache::create() {
  std::lock_guard g(mu_);
  if (max_sessions_ == 0) return nullptr;
  while (sessions_.size() >= max_sessions_) {
    sessions_.erase(lru_.back());
    lru_.pop_back();
  }
  int32_t id;
  do {
    id = next_id_++;
    if (next_id_ <= 0) next_id_ = 1;
  } while (sessions_.count(id));
  auto s = std::make_shared<fetch_session>();
  s->id = id;
  s->budget = budget_;
  lru_.push_front(id);
  sessions_[id] = {s, lru_.begin()};
  return s;
}

std::shared_ptr<fetch_session> fetch_session_cache::find(int32_t id) {
  std::lock_guard g(mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second.second);
  return it->second.first;
}

void fetch_session_cache::remove(int32_t id) {
  std::lock_guard g(mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return;
  lru_.erase(it->second.second);
  sessions_.erase(it);
}

size_t fetch_session_cache::size() const {
  std::lock_guard g(mu_);
  return sessions_.size();
}

}  // namespace sluice::kafka
