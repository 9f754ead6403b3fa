#pragma once

// The machine's own limits, measured the plain way with system calls, so each
// Sluice figure can be printed beside what the same disk, page cache or
// loopback interface does with no broker in the way.
//
// Every function returns bytes per second, or an error message. Files are
// created in the given directory and removed before returning.

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
// errno set when it cannot (SIGPIPE is ignored in sluice-bench, so a closed
// peer is EPIPE).
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
// calling fdatasync after every `sync_every_bytes` and once at the end.
rate raw_sync_write(const std::string& dir, uint64_t total_bytes, size_t chunk_bytes,
                    uint64_t sync_every_bytes);

// What a write measured for a time gives: its rate over the whole time, and
// the rate of its first `first_bytes` alone (0 when it wrote fewer).
struct timed_write {
  double bytes_per_s = 0;
  double first_bytes_per_s = 0;
  uint64_t bytes = 0;
};

// raw_sync_write for `seconds` (at most `max_bytes`): the rate a run of that
// length gets. A disk may take a burst far faster than it sustains (this
// VM's takes about 1 GB at over 1 GB/s, then 150-300 MB/s); the rate of the
// first `first_bytes` shows the burst beside it.
// The file written is `path`, and it is left in place (removed only on an
// error): deleting gigabytes makes a disk stall for a while, so the caller
// removes it when nothing is measured any more. On this VM's ext4, mounted
// with discard, rounds of 4 KiB fdatasyncs on 16 files took 20-80 ms every
// 2 s for about 10 s after a 2 GB file was deleted, and none did without
// the delete (nor after deleting 160 MB, as the fsync rounds' files are).
std::variant<timed_write, std::string> raw_sync_write_for(const std::string& path, double seconds,
                                                          uint64_t max_bytes, size_t chunk_bytes,
                                                          uint64_t sync_every_bytes,
                                                          uint64_t first_bytes);

// Sequential write of `total_bytes` in write(2) calls of `chunk_bytes` into
// the page cache, never synced (the file is removed, dropping dirty pages).
rate raw_buffered_write(const std::string& dir, uint64_t total_bytes, size_t chunk_bytes);

// Sequential pread(2) of a whole, already cached file in `chunk_bytes` calls
// into one reused buffer.
rate raw_cached_read(const std::string& path, size_t chunk_bytes);

// Writes `total_bytes` of a file into the page cache (the compaction bench's source).
bool write_file(const std::string& path, uint64_t total_bytes, size_t chunk_bytes);

// Latency of one small durable write: `count` rounds (or as many as fit in
// `max_seconds`) of a 4 KiB write(2) then fdatasync, in milliseconds, sorted.
// Empty with `error` set when it could not be measured. No acks=all answer
// can come sooner than this.
std::vector<double> raw_fsync_latencies_ms(const std::string& dir, int count, double max_seconds,
                                           std::string& error);

// The same for a produce that touches many partitions: each round writes
// 4 KiB to each of `files` files and fdatasyncs every one of them, `threads`
// threads sharing the work (as the broker's flusher threads do), and takes
// as long as the slowest. No acks=all answer for messages spread over
// every partition can come sooner than such a round: each partition's sync
// shares the threads and the disk with all the others. A round: when it
// began and ended (steady clock, nanoseconds).
struct fsync_round {
  int64_t start_ns = 0, end_ns = 0;
};
// `count` rounds (or as many as fit in `max_seconds`) back to back, in the
// order they ran; empty with `error` set when they could not be measured.
std::vector<fsync_round> raw_fsync_rounds(const std::string& dir, int files, int threads, int count,
                                          double max_seconds, std::string& error);
// Each round's own latency in milliseconds, sorted.
std::vector<double> round_latencies_ms(const std::vector<fsync_round>& rounds);

// The publish latency an ideal group commit would give on this disk:
// messages arrive every `interval_ns` while `rounds` run back to back, and
// each one is made durable by the first round that starts after it
// arrives, as by a broker that syncs whatever has come in as soon as its
// last sync ended. Unlike the rounds' own latencies, a stall then weighs as
// much as the messages that pile up behind it. Milliseconds, sorted; empty with
// fewer than two rounds.
// At most this many arrivals are taken (spaced wider when `interval_ns`
// would give more), which bounds the memory of a high --rate.
inline constexpr int64_t max_floor_arrivals = 1'000'000;
std::vector<double> group_commit_floor_ms(const std::vector<fsync_round>& rounds,
                                          int64_t interval_ns);

// One TCP stream over 127.0.0.1: a writer thread sends `chunk_bytes` writes
// and a reader thread receives into a buffer of the same size, for about
// `seconds` after a short warm-up. The sending socket uses the congestion
// control `congestion` (TCP_CONGESTION; an error if the kernel refuses it),
// or the system's default when it is empty, as the broker's sockets do.
rate loopback_tcp(double seconds, size_t chunk_bytes, const std::string& congestion = {});

// The name of the congestion control a new TCP socket gets
// (net.ipv4.tcp_congestion_control), or "unknown" when the kernel does not
// say. A pacing one such as bbr spaces segments with a timer, on loopback
// too, where no link or queue is there to protect.
std::string default_congestion_control();

// The same stream fed by sendfile(2) from a file of `file_bytes` written
// into the page cache in `dir` (removed before returning), `chunk_bytes` per
// call, wrapping round: the most the broker's fetch path, which sends
// segment files with sendfile, can move over one connection. On a loopback
// device the kernel's page-fragment path can be slower than the copy of
// loopback_tcp.
rate loopback_sendfile(const std::string& dir, double seconds, size_t chunk_bytes,
                       uint64_t file_bytes);

}  // namespace sluice::bench
