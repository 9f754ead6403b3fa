// JSON lines for the test programs built on librdkafka 2.15.1
// (share_consumer, group_consumer): one object per line on stdout, flushed at
// once, so a test reading the pipe sees each line as soon as it is written
// (record lines under --compact are the exception: the program flushes
// them in bunches, see its header comment).
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

#include <librdkafka/rdkafka.h>

#include "base/json_text.h"

namespace json_lines {

// One JSON object under construction; line() writes it and flushes, unless
// told not to (the caller then flushes stdout itself).
class json_line {
 public:
  json_line& str(const char* key, std::string_view v) {
    start(key);
    out_ += '"';
    sluice::append_json_escaped(out_, v);
    out_ += '"';
    return *this;
  }
  json_line& bytes_or_null(const char* key, const void* data, size_t len) {
    if (data == nullptr) return raw(key, "null");
    return str(key, std::string_view(static_cast<const char*>(data), len));
  }
  json_line& num(const char* key, long long v) { return raw(key, std::to_string(v)); }
  json_line& boolean(const char* key, bool v) { return raw(key, v ? "true" : "false"); }
  json_line& raw(const char* key, std::string_view json) {
    start(key);
    out_ += json;
    return *this;
  }
  void line(bool flush = true) {
    out_ += "}\n";
    std::fwrite(out_.data(), 1, out_.size(), stdout);
    if (flush) std::fflush(stdout);
  }

 private:
  void start(const char* key) {
    out_ += out_.empty() ? "{\"" : ",\"";
    out_ += key;
    out_ += "\":";
  }
  std::string out_;
};

inline void print_error(const char* source, rd_kafka_resp_err_t code, std::string_view message,
                        bool fatal = false) {
  json_line()
      .str("error", message)
      .num("code", code)
      .str("name", rd_kafka_err2name(code))
      .str("source", source)
      .boolean("fatal", fatal)
      .line();
}

// Prints an rd_kafka_error_t and frees it; returns whether it was fatal.
inline bool print_and_destroy(const char* source, rd_kafka_error_t* error) {
  bool fatal = rd_kafka_error_is_fatal(error) != 0;
  print_error(source, rd_kafka_error_code(error), rd_kafka_error_string(error), fatal);
  rd_kafka_error_destroy(error);
  return fatal;
}

}  // namespace json_lines
