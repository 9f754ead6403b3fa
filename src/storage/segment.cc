#include "storage/segment.h"

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <climits>
#include <cstdio>
#include <vector>

#include "base/endian.h"
#include "base/limits.h"
#include "base/log.h"

namespace sluice::storage {

namespace batch = model::batch;
namespace {

constexpr size_t kScanChunkBytes = limits::recovery_scan_chunk_bytes;

// A forward reader over a file region with one reusable buffer: its own, or
// `shared` (kept by the caller across readers). Reads `chunk` bytes at a
// time, or more for a larger request.
class chunk_reader {
 public:
  chunk_reader(io::file& f, uint64_t end, std::vector<std::byte>* shared = nullptr,
               size_t chunk = kScanChunkBytes)
      : f_(f), end_(end), buf_(shared ? *shared : own_), chunk_(std::max<size_t>(chunk, batch::header_bytes)) {}
  // Makes [pos, pos + n) available; returns nullptr when the file ends first.
  result<const std::byte*> get(uint64_t pos, size_t n) {
    if (pos >= start_ && pos + n <= start_ + len_) return buf_.data() + (pos - start_);
    if (pos + n > end_) return static_cast<const std::byte*>(nullptr);
    const size_t want = static_cast<size_t>(std::min<uint64_t>(std::max(n, chunk_), end_ - pos));
    buf_.resize(want);
    SLUICE_ASSIGN_OR_RETURN(size_t got, f_.pread(buf_.data(), want, pos));
    start_ = pos;
    len_ = got;
    if (got < n) return static_cast<const std::byte*>(nullptr);
    return buf_.data();
  }
  // Gives a shared buffer back smaller when one large batch grew it.
  void release() {
    if (buf_.capacity() > 4 * kScanChunkBytes) std::vector<std::byte>().swap(buf_);
  }

 private:
  io::file& f_;
  uint64_t end_;
  std::vector<std::byte> own_;
  std::vector<std::byte>& buf_;
  const size_t chunk_;
  uint64_t start_ = 0;
  size_t len_ = 0;
};

std::atomic<uint64_t> next_segment_id{1};

// What is at a position of a segment file: an intact batch (its header) or
// why not.
struct probe {
  std::optional<batch::header> h;
  std::string why;
};

// Checks the batch at `pos` of [.., to): a whole header that passes
// batch::check, a base offset of at least `min_base`, offsets within
// `seg_base` + 2^31 - 1 (invariants 1, 2, 4, 5, 6 of docs/log_format.md)
// and, with `verify_crc`, the CRC (invariant 3).
result<probe> probe_batch(chunk_reader& rd, uint64_t pos, uint64_t to, offset min_base, offset seg_base,
                          bool verify_crc) {
  SLUICE_ASSIGN_OR_RETURN(const std::byte* hp, rd.get(pos, batch::header_bytes));
  if (!hp) return probe{std::nullopt, "partial batch header"};
  const batch::header h = batch::parse(hp);
  if (status st = batch::check(h, to - pos, batch::strictness::stored); !st.ok())
    return probe{std::nullopt, st.err().message};
  if (h.base_offset < min_base)
    return probe{std::nullopt,
                 "base offset " + std::to_string(h.base_offset.value()) + " below " + std::to_string(min_base.value())};
  if (h.base_offset < seg_base || h.last_offset() - seg_base > INT32_MAX)
    return probe{std::nullopt, "offset too far from the segment base"};
  if (verify_crc) {
    SLUICE_ASSIGN_OR_RETURN(const std::byte* bp, rd.get(pos, h.size_bytes()));
    if (!bp) return probe{std::nullopt, "partial batch"};
    if (status c = batch::check_crc(h, std::span(bp, h.size_bytes())); !c.ok())
      return probe{std::nullopt, c.err().message};
  }
  return probe{h, {}};
}

// Whether [from, to) of the file holds only zero bytes: a prepared tail
// (segment::write_zeros) that no batch reached.
result<bool> all_zeros(chunk_reader& rd, uint64_t from, uint64_t to) {
  for (uint64_t pos = from; pos < to;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(to - pos, kScanChunkBytes));
    SLUICE_ASSIGN_OR_RETURN(const std::byte* p, rd.get(pos, n));
    if (!p) return false;
    for (size_t i = 0; i < n; ++i)
      if (p[i] != std::byte{0}) return false;
    pos += n;
  }
  return true;
}

// One past the last non-zero byte of [from, to), or `from`: where the
// written bytes of a torn tail end, zeros of a prepared tail after them not
// counted (the torn bytes' own trailing zeros cannot be told from those).
result<uint64_t> written_end(io::file& f, uint64_t from, uint64_t to) {
  std::vector<std::byte> buf;
  while (to > from) {
    const uint64_t start = to - std::min<uint64_t>(to - from, kScanChunkBytes);
    buf.resize(static_cast<size_t>(to - start));
    SLUICE_ASSIGN_OR_RETURN(size_t got, f.pread(buf.data(), buf.size(), start));
    for (size_t i = std::min(got, buf.size()); i > 0; --i)
      if (buf[i - 1] != std::byte{0}) return start + i;
    to = start;
  }
  return from;
}

// The first intact batch after a bad one at `bad` in [.., to), with a base
// offset of at least `min_base` (one past the last good batch): first where
// the bad batch's length says the next one starts, when that is plausible
// (a flipped bit in the records leaves the length intact, and trying there
// first keeps a batch that happens to sit inside the damaged batch's
// records from being taken for a real one); then at every byte after
// `bad`. A candidate must be fully intact, CRC included; the offset rule
// (a base at least `min_base` and within the segment's 2^31 offsets) alone
// rules out nearly every position in random bytes, so few CRCs are
// computed. nullopt when nothing intact follows: a torn tail.
result<std::optional<std::pair<uint64_t, batch::header>>> find_intact(chunk_reader& rd, uint64_t bad, uint64_t to,
                                                                      offset min_base, offset seg_base) {
  using found = std::optional<std::pair<uint64_t, batch::header>>;
  auto intact = [&](uint64_t q) -> result<found> {
    SLUICE_ASSIGN_OR_RETURN(probe p, probe_batch(rd, q, to, min_base, seg_base, true));
    if (!p.h) return found();
    return found(std::pair(q, *p.h));
  };
  SLUICE_ASSIGN_OR_RETURN(const std::byte* hp, rd.get(bad, batch::length_field_end));
  if (hp) {
    const int64_t declared =
        static_cast<int64_t>(batch::length_field_end) + load_be<int32_t>(hp + batch::length_pos);
    if (declared >= static_cast<int64_t>(batch::header_bytes) &&
        static_cast<uint64_t>(declared) < to - bad) {
      SLUICE_ASSIGN_OR_RETURN(found f, intact(bad + static_cast<uint64_t>(declared)));
      if (f) return f;
    }
  }
  for (uint64_t q = bad + 1; q + batch::header_bytes <= to; ++q) {
    SLUICE_ASSIGN_OR_RETURN(const std::byte* p, rd.get(q, batch::header_bytes));
    if (!p) break;
    if (p[batch::magic_pos] != std::byte{batch::current_magic}) continue;  // the cheap filter first
    SLUICE_ASSIGN_OR_RETURN(found f, intact(q));
    if (f) return f;
  }
  return found();
}

}  // namespace

std::string segment_path(const std::string& dir, offset base, const char* ext) {
  char name[48];
  std::snprintf(name, sizeof name, "%020" PRId64 ".%s", base.value(), ext);
  return io::join(dir, name);
}

std::optional<offset> parse_segment_name(const std::string& name) {
  if (name.size() != 24 || name.substr(20) != ".log") return std::nullopt;
  int64_t v = 0;
  for (size_t i = 0; i < 20; ++i) {
    if (name[i] < '0' || name[i] > '9') return std::nullopt;
    if (v > (INT64_MAX - 9) / 10) return std::nullopt;
    v = v * 10 + (name[i] - '0');
  }
  return offset(v);
}

segment::segment(io::filesystem& fs, file_cache& files, const std::string& dir, offset base, int64_t now_ms,
                 std::string log_path)
    : fs_(fs),
      files_(files),
      base_(base),
      log_path_(log_path.empty() ? segment_path(dir, base, "log") : std::move(log_path)),
      index_path_(segment_path(dir, base, "index")),
      time_index_path_(segment_path(dir, base, "timeindex")),
      next_(base),
      created_ms_(now_ms),
      id_(next_segment_id.fetch_add(1)) {}

result<std::unique_ptr<segment>> segment::create(io::filesystem& fs, file_cache& files,
                                                 const std::string& dir, offset base, int64_t now_ms) {
  std::unique_ptr<segment> s(new segment(fs, files, dir, base, now_ms));
  SLUICE_ASSIGN_OR_RETURN(auto f, fs.open(s->log_path_, io::open_mode::truncate));
  files.put(s->log_path_, std::move(f));
  return s;
}

result<std::unique_ptr<segment>> segment::create_staged(io::filesystem& fs, file_cache& files,
                                                        const std::string& dir, offset base,
                                                        std::string log_path) {
  std::unique_ptr<segment> s(new segment(fs, files, dir, base, 0, std::move(log_path)));
  SLUICE_ASSIGN_OR_RETURN(auto f, fs.open(s->log_path_, io::open_mode::truncate));
  files.put(s->log_path_, std::move(f));
  return s;
}

result<std::unique_ptr<segment>> segment::open_existing(io::filesystem& fs, file_cache& files,
                                                        const std::string& dir, offset base,
                                                        int64_t now_ms) {
  std::unique_ptr<segment> s(new segment(fs, files, dir, base, now_ms));
  SLUICE_ASSIGN_OR_RETURN(auto f, s->file());
  SLUICE_ASSIGN_OR_RETURN(uint64_t size, f->size());
  s->size_ = size;
  return s;
}

void segment::reset_to_start() {
  next_ = base_;
  max_ts_ = -1;
  bytes_since_index_ = 0;
  last_batch_rel_ = -1;
}

void segment::index_batch(uint64_t pos, const batch::header& h, const walk_opts& o) {
  const int32_t rel = static_cast<int32_t>(h.base_offset - base_);
  const int64_t ts = std::max(max_ts_, h.max_timestamp);
  if (o.add_entries && pos > 0 && bytes_since_index_ >= o.interval_bytes) {
    auto last = offsets_.last();
    if (!last || (rel > last->rel && static_cast<int64_t>(pos) > last->pos))
      offsets_.append({rel, static_cast<int32_t>(pos)});
    times_.maybe_append({ts, rel});
    bytes_since_index_ = 0;
  }
  max_ts_ = ts;
  bytes_since_index_ += static_cast<int64_t>(h.size_bytes());
  last_batch_rel_ = rel;
  next_ = h.last_offset() + 1;
}

result<batch::header> segment::read_header(io::file& f, uint64_t pos, uint64_t end) {
  std::byte buf[batch::header_bytes];
  if (end - pos < batch::header_bytes)
    return error{errc::corrupt_data, log_path_ + ": partial batch header at " + std::to_string(pos)};
  SLUICE_ASSIGN_OR_RETURN(size_t got, f.pread(buf, sizeof buf, pos));
  if (got < sizeof buf)
    return error{errc::corrupt_data, log_path_ + ": short read at " + std::to_string(pos)};
  batch::header h = batch::parse(buf);
  status st = batch::check(h, end - pos, batch::strictness::stored);
  if (!st.ok()) return error{errc::corrupt_data, log_path_ + " at " + std::to_string(pos) + ": " + st.err().message};
  return h;
}

result<std::pair<uint64_t, std::optional<error>>> segment::walk(uint64_t from, uint64_t to,
                                                                const walk_opts& o) {
  SLUICE_ASSIGN_OR_RETURN(auto f, file());
  chunk_reader rd(*f, to);
  uint64_t pos = from;
  offset min_base = o.min_base;
  while (pos < to) {
    if (const uint64_t past = past_damage(pos); past != pos) {
      // A known damaged range (truncate_at walks over them): the batch
      // after it gets an index entry, so lookups need not cross it.
      pos = past;
      bytes_since_index_ = o.interval_bytes;
      continue;
    }
    SLUICE_ASSIGN_OR_RETURN(probe p, probe_batch(rd, pos, to, min_base, base_, o.verify_crc));
    if (!p.h) return std::pair<uint64_t, std::optional<error>>(pos, error{errc::corrupt_data, std::move(p.why)});
    const batch::header& h = *p.h;
    if (o.visit) (*o.visit)(h);
    index_batch(pos, h, o);
    pos += h.size_bytes();
    size_ = pos;
    min_base = h.last_offset() + 1;
  }
  return std::pair<uint64_t, std::optional<error>>(pos, std::nullopt);
}

uint64_t segment::past_damage(uint64_t pos) const {
  for (const auto& d : damage_) {
    if (d.pos > pos) break;
    if (pos < d.end) pos = d.end;  // ranges may abut: keep going
  }
  return pos;
}

uint64_t segment::damage_after(uint64_t pos) const {
  for (const auto& d : damage_)
    if (d.pos >= pos) return d.pos;
  return size_;
}

result<std::vector<segment::damage>> segment::check_region(io::file& f, offset base, uint64_t from, uint64_t to,
                                                          uint64_t file_end, offset min_base) {
  // One buffer per thread: a catch-up consumer checks region after region,
  // and fresh memory for each would cost more than the check.
  thread_local std::vector<std::byte> buf;
  // Reads the region in one go (the find_intact after damage reads on).
  chunk_reader rd(f, file_end, &buf, static_cast<size_t>(std::min<uint64_t>(to - from, kScanChunkBytes)));
  std::vector<damage> out;
  uint64_t pos = from;
  while (pos < to) {
    auto p = probe_batch(rd, pos, file_end, min_base, base, true);
    if (!p.ok()) {
      rd.release();
      return p.err();
    }
    if (p->h) {
      pos += p->h->size_bytes();
      min_base = p->h->last_offset() + 1;
      continue;
    }
    auto q = find_intact(rd, pos, file_end, min_base, base);
    if (!q.ok()) {
      rd.release();
      return q.err();
    }
    out.push_back(damage{pos, *q ? (*q)->first : file_end, min_base, *q ? (*q)->second.base_offset : min_base,
                         std::move(p->why)});
    pos = out.back().end;
  }
  rd.release();
  return out;
}

bool segment::verified(uint64_t from, uint64_t to) const {
  if (from >= to) return true;
  for (const auto& [a, b] : verified_)
    if (a <= from && to <= b) return true;
  return false;
}

result<int64_t> segment::modified_ms(bool closed) {
  if (closed && closed_modified_ms_) return *closed_modified_ms_;
  SLUICE_ASSIGN_OR_RETURN(auto f, file());
  SLUICE_ASSIGN_OR_RETURN(int64_t ms, f->modified_ms());
  if (closed) closed_modified_ms_ = ms;
  return ms;
}

void segment::mark_verified(uint64_t from, uint64_t to) {
  if (from >= to) return;
  // Every append lands here with the log mutex held, right after the last
  // range: extend it in place, with no allocation.
  if (!verified_.empty() && verified_.back().first <= from && from <= verified_.back().second) {
    verified_.back().second = std::max(verified_.back().second, to);
    return;
  }
  // Merge with every range it overlaps or touches.
  std::vector<std::pair<uint64_t, uint64_t>> out;
  out.reserve(verified_.size() + 1);
  for (const auto& r : verified_) {
    if (r.second < from || r.first > to) {
      out.push_back(r);
    } else {
      from = std::min(from, r.first);
      to = std::max(to, r.second);
    }
  }
  out.insert(std::upper_bound(out.begin(), out.end(), std::pair(from, to)), {from, to});
  if (out.size() > limits::max_verified_ranges_per_segment) {
    auto smallest = std::min_element(out.begin(), out.end(), [](const auto& x, const auto& y) {
      return x.second - x.first < y.second - y.first;
    });
    out.erase(smallest);
  }
  verified_ = std::move(out);
}

bool segment::add_damage(const damage& d) {
  for (const auto& k : damage_)
    if (k.pos == d.pos) return false;
  auto it = std::upper_bound(damage_.begin(), damage_.end(), d.pos,
                             [](uint64_t p, const damage& x) { return p < x.pos; });
  damage_.insert(it, d);
  return true;
}

result<std::vector<std::byte>> segment::read_index_file(const std::string& path) {
  // An index is bounded by segment.index.bytes; twice the hard cap on that
  // setting is certainly corrupt.
  return fs_.read_all(path, 2 * static_cast<size_t>(limits::max_segment_bytes));
}

result<bool> segment::load_trusted(offset min_base, int64_t interval_bytes, const batch_visitor& visit) {
  const uint64_t file_size = size_;
  if (!fs_.exists(index_path_) || !fs_.exists(time_index_path_)) return file_size == 0;
  auto ob = read_index_file(index_path_);
  auto tb = read_index_file(time_index_path_);
  if (!ob.ok() || !tb.ok()) return false;
  auto oi = offset_index::parse(*ob, file_size);
  auto ti = time_index::parse(*tb);
  if (!oi.ok() || !ti.ok()) return false;
  offsets_ = std::move(*oi);
  times_ = std::move(*ti);
  // Sanity check of the last entries: the indexed batch must be where the
  // index says, and the walk to the end must be clean.
  reset_to_start();
  uint64_t from = 0;
  if (auto e = offsets_.last()) {
    SLUICE_ASSIGN_OR_RETURN(auto f, file());
    auto h = read_header(*f, static_cast<uint64_t>(e->pos), file_size);
    if (!h.ok() || h->base_offset != base_ + e->rel) return false;
    from = static_cast<uint64_t>(e->pos);
    min_base = h->base_offset;
    max_ts_ = times_.last() ? times_.last()->ts : -1;
  }
  walk_opts o{true, true, interval_bytes, min_base, &visit};
  SLUICE_ASSIGN_OR_RETURN(auto end, walk(from, file_size, o));
  if (end.second.has_value()) return false;
  if (auto t = times_.last(); t && t->rel > last_batch_rel_) return false;
  verified_.clear();
  mark_verified(from, file_size);  // the part before `from` is trusted, unchecked
  return true;
}

result<segment::recovered> segment::recover(offset min_base, int64_t interval_bytes, const batch_visitor& visit,
                                            bool last) {
  SLUICE_ASSIGN_OR_RETURN(auto f, file());
  SLUICE_ASSIGN_OR_RETURN(uint64_t file_size, f->size());
  offsets_.clear();
  times_.clear();
  damage_.clear();
  reset_to_start();
  size_ = 0;
  walk_opts o{true, true, interval_bytes, min_base, &visit};
  recovered out;
  uint64_t from = 0;
  for (;;) {
    SLUICE_ASSIGN_OR_RETURN(auto end, walk(from, file_size, o));
    if (!end.second) break;
    const uint64_t bad = end.first;
    // One past the last good batch; the first batch may start anywhere
    // from `min_base` on.
    const offset first = last_batch_rel_ >= 0 ? next_ : min_base;
    chunk_reader rd(*f, file_size);
    SLUICE_ASSIGN_OR_RETURN(bool zeros, all_zeros(rd, bad, file_size));
    if (zeros) {
      // The prepared tail past the last batch: no data, nothing lost.
      SLUICE_TRY(f->truncate(bad));
      size_ = bad;
      break;
    }
    SLUICE_ASSIGN_OR_RETURN(auto q, find_intact(rd, bad, file_size, first, base_));
    if (!q && last) {
      SLUICE_ASSIGN_OR_RETURN(uint64_t written, written_end(*f, bad, file_size));
      SLUICE_TRY(f->truncate(bad));
      size_ = bad;
      out.tail = cut{bad, written - bad, std::move(*end.second)};
      break;
    }
    damage d{bad, q ? q->first : file_size, first, q ? q->second.base_offset : first, std::move(end.second->message)};
    damage_.push_back(d);
    out.damaged.push_back(std::move(d));
    if (!q) {
      size_ = file_size;  // the damaged end stays until the rewrite; reads skip it
      break;
    }
    from = q->first;
    o.min_base = first;
    bytes_since_index_ = interval_bytes;  // an index entry right after the range
  }
  verified_.clear();
  mark_verified(0, size_);  // damaged ranges inside it are skipped by reads anyway
  return out;
}

result<std::vector<segment::damage>> segment::scan(io::file& f, offset base, uint64_t to,
                                                   const std::function<bool(uint64_t)>& pace) {
  chunk_reader rd(f, to);
  std::vector<damage> out;
  uint64_t pos = 0, paced = 0;
  offset min_base = base;
  while (pos < to) {
    if (pace && pos - paced >= kScanChunkBytes) {
      if (!pace(pos - paced)) return error{errc::shutting_down, "scan stopped"};
      paced = pos;
    }
    SLUICE_ASSIGN_OR_RETURN(probe p, probe_batch(rd, pos, to, min_base, base, true));
    if (p.h) {
      pos += p.h->size_bytes();
      min_base = p.h->last_offset() + 1;
      continue;
    }
    SLUICE_ASSIGN_OR_RETURN(auto q, find_intact(rd, pos, to, min_base, base));
    out.push_back(damage{pos, q ? q->first : to, min_base, q ? q->second.base_offset : min_base, std::move(p.why)});
    pos = q ? q->first : to;
  }
  if (pace && pos > paced && !pace(pos - paced)) return error{errc::shutting_down, "scan stopped"};
  return out;
}

status segment::append(std::span<const std::byte> data, std::span<const batch::header> hs,
                       int64_t interval_bytes, uint64_t reserve_up_to) {
  SLUICE_ASSIGN_OR_RETURN(auto f, file());
  const uint64_t start = size_;
  const uint64_t end = start + data.size();
  if (reserve_up_to > 0 && end > reserved_end_) {
    // A chunk at a time, so the cost is one call per chunk; one that fails
    // (a full disk, a file system without fallocate) is not tried again
    // before the next chunk.
    const uint64_t to = std::max(end, std::min(end + limits::segment_reserve_bytes, reserve_up_to));
    if (auto st = f->reserve(start, to - start); !st.ok())
      SLUICE_LOG_DEBUG("{}: reserving blocks: {}", log_path_, st.err().message);
    reserved_end_ = to;
  }
  // At the segment's end, which a prepared tail puts before the file's.
  status st = f->pwrite(data, start);
  if (!st.ok()) {
    // Leave no partial batch behind, so the next append (after a full disk,
    // say) writes where the segment ends. If even that fails, the file no
    // longer matches the segment: an I/O error, which takes the log offline.
    // The cut takes the prepared tail with it.
    zeroed_end_ = std::min(zeroed_end_, start);
    prepared_end_ = std::min(prepared_end_, start);
    if (auto t = f->truncate(start); !t.ok())
      return status(errc::io_error, st.err().message + "; cutting the partial write failed: " + t.err().message);
    return st;
  }
  walk_opts o{false, true, interval_bytes, offset(0), nullptr};
  uint64_t pos = start;
  for (const auto& h : hs) {
    index_batch(pos, h, o);
    pos += h.size_bytes();
  }
  size_ = pos;
  mark_verified(start, pos);  // the caller checked every batch, CRC included
  return {};
}

result<std::optional<segment::located>> segment::locate(offset o) {
  uint64_t pos = 0;
  const int64_t rel = std::clamp<int64_t>(o - base_, 0, INT32_MAX);
  if (auto e = offsets_.floor_offset(static_cast<int32_t>(rel))) pos = static_cast<uint64_t>(e->pos);
  SLUICE_ASSIGN_OR_RETURN(auto f, file());
  while ((pos = past_damage(pos)) < size_) {
    SLUICE_ASSIGN_OR_RETURN(batch::header h, read_header(*f, pos, size_));
    if (h.last_offset() >= o) return std::optional<located>(located{pos, h});
    pos += h.size_bytes();
  }
  return std::optional<located>();
}

result<uint64_t> segment::region_end(const located& start, size_t max_bytes, offset upper) {
  uint64_t limit = size_;
  if (upper < next_) {
    SLUICE_ASSIGN_OR_RETURN(auto u, locate(upper));
    if (u) limit = u->pos;
  }
  // A region never reaches into a damaged range: it ends before it, and
  // the next read starts after it (offset_at skips it).
  limit = std::min(limit, damage_after(start.pos));
  if (limit <= start.pos) return start.pos;  // the first batch reaches `upper`
  if (limit - start.pos <= max_bytes) return limit;
  const uint64_t first_end = start.pos + start.h.size_bytes();
  const uint64_t budget_end = start.pos + max_bytes;
  if (first_end >= budget_end) return first_end;
  uint64_t p = first_end;
  if (auto e = offsets_.floor_position(static_cast<int64_t>(budget_end)); e && static_cast<uint64_t>(e->pos) > p)
    p = static_cast<uint64_t>(e->pos);
  SLUICE_ASSIGN_OR_RETURN(auto f, file());
  while (p < limit) {
    SLUICE_ASSIGN_OR_RETURN(batch::header h, read_header(*f, p, size_));
    if (p + h.size_bytes() > budget_end) break;
    p += h.size_bytes();
  }
  return p;
}

result<offset> segment::offset_at(uint64_t pos) {
  pos = past_damage(pos);
  if (pos >= size_) return next_;
  SLUICE_ASSIGN_OR_RETURN(auto f, file());
  SLUICE_ASSIGN_OR_RETURN(batch::header h, read_header(*f, pos, size_));
  return h.base_offset;
}

result<std::optional<segment::located>> segment::locate_time(int64_t ts, offset from) {
  if (max_ts_ < ts) return std::optional<located>();
  uint64_t pos = 0;
  if (auto t = times_.last_before(ts)) {
    if (auto e = offsets_.floor_offset(t->rel)) pos = static_cast<uint64_t>(e->pos);
  }
  SLUICE_ASSIGN_OR_RETURN(auto f, file());
  while ((pos = past_damage(pos)) < size_) {
    SLUICE_ASSIGN_OR_RETURN(batch::header h, read_header(*f, pos, size_));
    if (h.max_timestamp >= ts && h.last_offset() >= from) return std::optional<located>(located{pos, h});
    pos += h.size_bytes();
  }
  return std::optional<located>();
}

result<std::optional<segment::located>> segment::locate_max_time(offset from) {
  SLUICE_ASSIGN_OR_RETURN(auto first, locate(from));
  if (!first) return std::optional<located>();
  SLUICE_ASSIGN_OR_RETURN(auto f, file());
  std::optional<located> best;
  uint64_t pos = first->pos;
  while ((pos = past_damage(pos)) < size_) {
    SLUICE_ASSIGN_OR_RETURN(batch::header h, read_header(*f, pos, size_));
    if (!best || h.max_timestamp > best->h.max_timestamp) best = located{pos, h};
    pos += h.size_bytes();
  }
  return best;
}

status segment::write_zeros(uint64_t to) {
  static const std::vector<std::byte> zeros(limits::segment_prepare_piece_bytes);
  const uint64_t from = std::max(size_, zeroed_end_);
  if (to <= from) return {};
  SLUICE_ASSIGN_OR_RETURN(auto f, file());
  for (uint64_t pos = from; pos < to;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(to - pos, zeros.size()));
    SLUICE_TRY(f->pwrite(std::span(zeros.data(), n), pos));
    pos += n;
    zeroed_end_ = pos;
  }
  return {};
}

void segment::set_prepared(uint64_t end) { prepared_end_ = std::max(prepared_end_, std::min(end, zeroed_end_)); }

void segment::release_reserve() {
  const uint64_t past = std::max(reserved_end_, zeroed_end_);
  zeroed_end_ = std::min(zeroed_end_, size_);
  prepared_end_ = std::min(prepared_end_, size_);
  if (past <= size_) return;
  reserved_end_ = size_;
  auto f = file();
  status st = f.ok() ? (*f)->truncate(size_) : f.to_status();
  if (!st.ok()) SLUICE_LOG_WARN("{}: releasing reserved blocks: {}", log_path_, st.err().message);
}

status segment::truncate_at(const located& at) {
  SLUICE_ASSIGN_OR_RETURN(auto f, file());
  SLUICE_TRY(f->truncate(at.pos));
  reserved_end_ = std::min(reserved_end_, at.pos);  // the cut released the rest
  zeroed_end_ = std::min(zeroed_end_, at.pos);
  prepared_end_ = std::min(prepared_end_, at.pos);
  std::erase_if(damage_, [&](const damage& d) { return d.pos >= at.pos; });
  std::erase_if(verified_, [&](const auto& r) { return r.first >= at.pos; });
  for (auto& r : verified_) r.second = std::min(r.second, at.pos);
  const int32_t rel = static_cast<int32_t>(std::max<int64_t>(at.h.base_offset - base_, 0));
  offsets_.truncate_from(rel);
  times_.truncate_from(rel);
  // Recompute the tail state from the last kept index entry.
  reset_to_start();
  uint64_t from = 0;
  if (auto e = offsets_.last()) from = static_cast<uint64_t>(e->pos);
  if (auto t = times_.last()) max_ts_ = t->ts;
  size_ = at.pos;
  walk_opts o{false, false, 0, offset(0), nullptr};
  SLUICE_ASSIGN_OR_RETURN(auto end, walk(from, at.pos, o));
  if (end.second) return status(*end.second);
  size_ = at.pos;
  return {};
}

void segment::seal_time_index() {
  if (last_batch_rel_ >= 0) times_.maybe_append({max_ts_, last_batch_rel_});
}

segment::index_files segment::index_files_now() const {
  return {index_path_, time_index_path_, offsets_.serialize(), times_.serialize()};
}

status segment::write_index_files(io::filesystem& fs, const index_files& f, bool sync) {
  if (sync) {
    SLUICE_TRY(fs.write_atomic(f.offsets_path, f.offsets));
    return fs.write_atomic(f.times_path, f.times);
  }
  for (auto [path, bytes] : {std::pair{&f.offsets_path, &f.offsets}, std::pair{&f.times_path, &f.times}}) {
    SLUICE_ASSIGN_OR_RETURN(auto file, fs.open(*path, io::open_mode::truncate));
    SLUICE_TRY(file->append(*bytes));
  }
  return {};
}

status segment::remove_index_files() {
  for (const std::string* p : {&index_path_, &time_index_path_})
    if (fs_.exists(*p)) SLUICE_TRY(fs_.remove(*p));
  return {};
}

status segment::sync() {
  SLUICE_ASSIGN_OR_RETURN(auto f, file());
  return f->sync();
}

status segment::remove_files() {
  files_.forget(log_path_);
  status first;
  for (const std::string* p : std::initializer_list<const std::string*>{&log_path_, &index_path_, &time_index_path_}) {
    if (!fs_.exists(*p)) continue;
    status st = fs_.remove(*p);
    if (!st.ok() && first.ok()) first = st;
  }
  return first;
}

status segment::rename_log(const std::string& to) {
  files_.forget(log_path_);
  SLUICE_TRY(fs_.rename(log_path_, to));
  files_.forget(to);
  log_path_ = to;
  return {};
}

result<uint64_t> segment::region_end_from(uint64_t pos, size_t max_bytes) {
  SLUICE_ASSIGN_OR_RETURN(auto f, file());
  SLUICE_ASSERT(past_damage(pos) == pos, "region_end_from inside a damaged range");
  SLUICE_ASSIGN_OR_RETURN(batch::header h, read_header(*f, pos, size_));
  return region_end(located{pos, h}, max_bytes, next_);
}

result<std::vector<std::string>> segment::retire() {
  files_.forget(log_path_);
  std::vector<std::string> renamed;
  for (const std::string* p : std::initializer_list<const std::string*>{&index_path_, &time_index_path_, &log_path_}) {
    if (!fs_.exists(*p)) continue;
    const std::string to = *p + ".deleted";
    SLUICE_TRY(fs_.rename(*p, to));
    renamed.push_back(to);
  }
  return renamed;
}

bool segment::index_full(int64_t segment_index_bytes) const {
  return static_cast<int64_t>(offsets_.bytes() + offset_index::kEntryBytes) > segment_index_bytes ||
         static_cast<int64_t>(times_.bytes() + time_index::kEntryBytes) > segment_index_bytes;
}

}  // namespace sluice::storage
