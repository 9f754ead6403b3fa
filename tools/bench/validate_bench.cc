// sluice-validate-bench: what record validation of a produced batch costs
// the broker (protocol/records/validate.h), per codec, against the one pass
// every produced batch already pays: its CRC-32C. Google Benchmark prints
// the figures; each row's bytes_per_second counts the batch's
// uncompressed record bytes, and the CRC rows run over the same bytes as a
// batch of that codec carries on the wire, so "validate none / crc none"
// is the share validation adds to the CRC's own pass.
//
// Batches are what the broker benchmark's producers send by default (1 KiB
// messages, about 1 MiB per batch), with two payloads: the bench's constant
// bytes (compressing about 200:1) and text-like bytes (about 3:1, closer to
// JSON or logs).
//
//   build/bin/sluice-validate-bench [--benchmark_filter=zstd] [--benchmark_repetitions=5]

#include <benchmark/benchmark.h>

#include <random>

#include "model/record_batch.h"
#include "protocol/records/record_batch.h"
#include "protocol/records/validate.h"

namespace pr = sluice::protocol::records;

namespace {

std::vector<uint8_t> make_batch(pr::compression c, bool text_like) {
  std::mt19937_64 rng(42);
  const char* words[] = {"order", "id", "user", "\"amount\":", "42", "true", "status", "ok", ",", "{", "}"};
  std::vector<pr::record_input> recs(1000);
  for (auto& r : recs) {
    std::vector<uint8_t> v(1024, 'x');
    if (text_like) {
      size_t i = 0;
      while (i < v.size()) {
        const char* w = words[rng() % std::size(words)];
        for (const char* p = w; *p && i < v.size(); ++p) v[i++] = static_cast<uint8_t>(*p);
        if (i < v.size()) v[i++] = static_cast<uint8_t>('0' + rng() % 10);
      }
    }
    r.value = std::move(v);
    r.timestamp_ms = 1'700'000'000'000;
  }
  pr::batch_options o;
  o.codec = c;
  auto b = pr::build_batch(o, recs);
  if (!b.ok()) std::abort();
  return std::move(b).value();
}

constexpr size_t record_bytes = 1000 * 1024;

void validate(benchmark::State& state, pr::compression c, bool text_like) {
  const auto batch = make_batch(c, text_like);
  pr::validation_options o;
  o.max_decompressed_bytes = 2 << 20;
  for (auto _ : state) {
    auto f = pr::validate_records(batch, o, &pr::produce_decompression_budget());
    if (!f.ok()) state.SkipWithError(f.err().message.c_str());
    benchmark::DoNotOptimize(f);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * record_bytes));
  state.counters["wire_bytes"] = static_cast<double>(batch.size());
}

void crc(benchmark::State& state, pr::compression c, bool text_like) {
  const auto batch = make_batch(c, text_like);
  for (auto _ : state) benchmark::DoNotOptimize(sluice::model::batch::compute_crc(batch));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * record_bytes));
  state.counters["wire_bytes"] = static_cast<double>(batch.size());
}

}  // namespace

BENCHMARK_CAPTURE(crc, none, pr::compression::none, false);
BENCHMARK_CAPTURE(validate, none, pr::compression::none, false);
BENCHMARK_CAPTURE(crc, lz4_constant, pr::compression::lz4, false);
BENCHMARK_CAPTURE(validate, lz4_constant, pr::compression::lz4, false);
BENCHMARK_CAPTURE(crc, lz4_text, pr::compression::lz4, true);
BENCHMARK_CAPTURE(validate, lz4_text, pr::compression::lz4, true);
BENCHMARK_CAPTURE(crc, zstd_constant, pr::compression::zstd, false);
BENCHMARK_CAPTURE(validate, zstd_constant, pr::compression::zstd, false);
BENCHMARK_CAPTURE(crc, zstd_text, pr::compression::zstd, true);
BENCHMARK_CAPTURE(validate, zstd_text, pr::compression::zstd, true);
BENCHMARK_CAPTURE(validate, gzip_text, pr::compression::gzip, true);
BENCHMARK_CAPTURE(validate, snappy_text, pr::compression::snappy, true);

BENCHMARK_MAIN();
