// Writes one file per request type and version (several seeds each) into
// the directory given as argv[1]: valid frames without the size prefix,
// filled by the generated random fillers. Produce requests carry a real
// record batch so the fuzzer reaches the batch decoder.

#include <cstdio>
#include <string>

#include "protocol/frame.h"
#include "protocol/messages_fill.h"
#include "protocol/records/record_batch.h"

using namespace sluice::protocol;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
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
