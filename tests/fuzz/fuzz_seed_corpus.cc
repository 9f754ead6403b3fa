// Writes one file per request type and version (several seeds each) into
// the directory given as argv[1]: valid frames without the size prefix,
// filled by the generated random fillers. Produce requests carry a real
// record batch so the fuzzer reaches the batch decoder.
// With two more directories, also writes the inputs of fuzz_record_batch
// and fuzz_compressed_batch (fuzz_records.cc): a prefix byte (record count,
// compacted), a codec byte for the second, and the records of a real batch,
// plain or compressed with each codec.

#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "model/record_batch.h"
#include "protocol/frame.h"
#include "protocol/messages_fill.h"
#include "protocol/records/record_batch.h"

using namespace sluice::protocol;

namespace {

bool write_file(const std::string& path, std::span<const uint8_t> prefix, std::span<const uint8_t> body) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return false;
  std::fwrite(prefix.data(), 1, prefix.size(), f);
  std::fwrite(body.data(), 1, body.size(), f);
  return std::fclose(f) == 0;
}

bool write_record_seeds(const std::string& plain_dir, const std::string& compressed_dir) {
  std::vector<records::record_input> recs(5);
  for (size_t i = 0; i < recs.size(); ++i) {
    recs[i].key = std::vector<uint8_t>{'k', static_cast<uint8_t>('0' + i)};
    recs[i].value = std::vector<uint8_t>(50 + 30 * i, static_cast<uint8_t>('a' + i));
    recs[i].timestamp_ms = 1'700'000'000'000 + static_cast<int64_t>(i * 7 % 5);
    if (i == 2) recs[i].headers.push_back({"h", std::vector<uint8_t>{'x'}});
  }
  const uint8_t count_keyed = static_cast<uint8_t>(recs.size() | 0x40);
  for (int c = 0; c <= 4; ++c) {
    records::batch_options o;
    o.codec = static_cast<records::compression>(c);
    auto b = records::build_batch(o, recs);
    if (!b.ok()) return false;
    const auto payload = std::span<const uint8_t>(*b).subspan(sluice::model::batch::header_bytes);
    const uint8_t prefix[2] = {count_keyed, static_cast<uint8_t>(c)};
    if (c == 0 && !write_file(plain_dir + "/records", std::span(prefix, 1), payload)) return false;
    if (!write_file(compressed_dir + "/codec_" + std::to_string(c), prefix, payload)) return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 && argc != 4) {
    std::fprintf(stderr, "usage: %s DIR [RECORDS_DIR COMPRESSED_DIR]\n", argv[0]);
    return 2;
  }
  if (argc == 4 && !write_record_seeds(argv[2], argv[3])) return 1;
  const std::string dir = argv[1];
  records::record_input rec;
  rec.key = std::vector<uint8_t>{'k'};
  rec.value = std::vector<uint8_t>(100, 'v');
  rec.headers.push_back({"h", std::vector<uint8_t>{'x'}});
  records::batch_options opts;
  opts.codec = records::compression::lz4;
  auto batch = records::build_batch(opts, std::span<const records::record_input>(&rec, 1));
  if (!batch.ok()) return 1;
  int files = 0;
  for_each_message_type([&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (requires { T::api_key; } && std::string_view(T::message_name).ends_with("_request")) {
      for (int16_t v = T::min_version; v <= T::max_version; ++v) {
        for (uint64_t seed = 0; seed < 3; ++seed) {
          testing::fill_context c(seed * 131 + static_cast<uint64_t>(v));
          T m;
          testing::fill_random(m, c, v);
          if constexpr (std::is_same_v<T, produce_request>) {
            for (auto& t : m.topic_data)
              for (auto& p : t.partition_data) p.records = records_field::of(*batch);
          }
          auto frame = encode_request(static_cast<int32_t>(seed), v, m).flatten();
          if (!frame.ok()) return;
          const std::string path = dir + "/" + std::string(T::message_name) + "_v" + std::to_string(v) + "_" +
                                   std::to_string(seed);
          std::FILE* f = std::fopen(path.c_str(), "wb");
          if (!f) return;
          std::fwrite(frame->data() + 4, 1, frame->size() - 4, f);
          std::fclose(f);
          ++files;
        }
      }
    }
  });
  std::printf("wrote %d seed files to %s\n", files, dir.c_str());
  return files > 0 ? 0 : 1;
}
