#pragma once

// The machine's own limits, measured the plain way with system calls, so each
// Sluice figure can be printed beside what the same disk, page cache or
// loopback interface does with no broker in the way.
//
// Rates are bytes per second, or an error message. Files are created in the
// given directory and removed before returning unless said otherwise.

#include <cstddef>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include <unistd.h>

#include "report.h"

namespace sluice::bench {

// "what: strerror(errno)".
std::string os_error(const std::string& what);

// Writes all `n` bytes to a file or socket, retrying on EINTR; false with
// errno set when it cannot.
bool write_all(int fd, const void* data, size_t n);

// A closed-on-scope descriptor.
struct fd_guard {
  int fd = -1;
  explicit fd_guard(int f) : fd(f) {}
  ~fd_guard() {
    if (fd >= 0) ::close(fd);
  }
  fd_guard(const fd_guard&) = delete;
  fd_guard& operator=(const fd_guard&) = delete;
};

// Bytes per second, or why it could not be measured.
using rate = std::variant<double, std::string>;

// The rate, or a bench_error saying why there is none.
inline double or_throw(const rate& r) {
  if (auto e = std::get_if<std::string>(&r)) throw bench_error{*e};
  return std::get<double>(r);
}

// Sequential write of `total_bytes` in write(2) calls of `chunk_bytes`,
// fdatasync after every `sync_every_bytes` and once at the end.
rate raw_sync_write(const std::string& dir, uint64_t total_bytes, size_t chunk_bytes,
                    uint64_t sync_every_bytes);

// A write measured for a time: its rate, and that of its first
// `first_bytes` alone (0 when it wrote fewer).
struct timed_write {
  double bytes_per_s = 0;
  double first_bytes_per_s = 0;
};

// raw_sync_write for `seconds` (at most `max_bytes`) into `path`: a disk may
// take a burst far faster than it sustains, so the rate of a run as long as
// the one compared. The file is left in place (removed only on an error):
// deleting gigabytes stalls this VM's disk (mounted with discard) for about
// ten seconds, so the caller removes it when nothing is measured any more.
std::variant<timed_write, std::string> raw_sync_write_for(const std::string& path, double seconds,
                                                          uint64_t max_bytes, size_t chunk_bytes,
                                                          uint64_t sync_every_bytes,
                                                          uint64_t first_bytes);

// Sequential write into the page cache, never synced.
rate raw_buffered_write(const std::string& dir, uint64_t total_bytes, size_t chunk_bytes);

// Sequential pread(2) of a whole, already cached file in `chunk_bytes` calls
// into one reused buffer.
rate raw_cached_read(const std::string& path, size_t chunk_bytes);

// Writes `total_bytes` of a file into the page cache (kept).
bool write_file(const std::string& path, uint64_t total_bytes, size_t chunk_bytes);

// `count` rounds (or as many as fit in `max_seconds`) of a 4 KiB write then
// fdatasync, in milliseconds, sorted: no acks=all answer can come sooner.
// Empty with `error` set when it could not be measured.
std::vector<double> raw_fsync_latencies_ms(const std::string& dir, int count, double max_seconds,
                                           std::string& error);

// The same for a produce spread over partitions: a round writes 4 KiB to
// each of `files` files and fdatasyncs every one, `threads` threads sharing
// the work (as the broker's flusher threads do). A round: when it began and
// ended (steady clock, nanoseconds).
struct fsync_round {
  int64_t start_ns = 0, end_ns = 0;
};
// `count` rounds (or as many as fit in `max_seconds`) back to back, in the
// order they ran; empty with `error` set when they could not be measured.
std::vector<fsync_round> raw_fsync_rounds(const std::string& dir, int files, int threads, int count,
                                          double max_seconds, std::string& error);
// Each round's own latency in milliseconds, sorted.
std::vector<double> round_latencies_ms(const std::vector<fsync_round>& rounds);

// The group-commit floor: the publish latency an ideal group commit would
// give on this disk. Messages arrive every `interval_ns` while `rounds` run
// back to back, and each is made durable by the first round that starts
// after it arrives; a stall then weighs as much as the messages held up
// behind it. Milliseconds, sorted; empty with fewer than two rounds. At most
// max_floor_arrivals are taken (spaced wider when `interval_ns` would give
// more), which bounds the memory of a high --rate.
inline constexpr int64_t max_floor_arrivals = 1'000'000;
std::vector<double> group_commit_floor_ms(const std::vector<fsync_round>& rounds,
                                          int64_t interval_ns);

// One TCP stream over 127.0.0.1 between two threads, `chunk_bytes` per call,
// for about `seconds` after a short warm-up, under the congestion control
// `congestion` (the system's default, as the broker's sockets have, when
// empty).
rate loopback_tcp(double seconds, size_t chunk_bytes, const std::string& congestion = {});

// The congestion control a new TCP socket gets, or "unknown".
std::string default_congestion_control();

// The same stream fed by sendfile(2) from a file of `file_bytes` in the page
// cache of `dir`, as the broker sends fetch answers.
rate loopback_sendfile(const std::string& dir, double seconds, size_t chunk_bytes,
                       uint64_t file_bytes);

}  // namespace sluice::bench
