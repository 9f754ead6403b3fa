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

namespace json_lines {

inline void append_utf8_escaped(std::string& out, std::string_view s) {
  static constexpr char hex[] = "0123456789abcdef";
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    unsigned char c = p[i];
    if (c < 0x80) {
      switch (c) {
        case '"':
          out += "\\\"";
          break;
        case '\\':
          out += "\\\\";
          break;
        case '\n':
          out += "\\n";
          break;
        case '\r':
          out += "\\r";
          break;
        case '\t':
          out += "\\t";
          break;
        default:
          if (c < 0x20) {
            out += "\\u00";
            out += hex[c >> 4];
            out += hex[c & 0xf];
          } else {
            out += static_cast<char>(c);
          }
      }
      ++i;
      continue;
    }
    // A well-formed multi-byte sequence (RFC 3629: no overlongs, no
    // surrogates, at most U+10FFFF) is copied; anything else is one U+FFFD.
    size_t len = 0;
    unsigned char lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) {
      len = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
      len = 3;
      if (c == 0xe0) lo = 0xa0;
      if (c == 0xed) hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      len = 4;
      if (c == 0xf0) lo = 0x90;
      if (c == 0xf4) hi = 0x8f;
    }
    bool ok = len != 0 && i + len <= n && p[i + 1] >= lo && p[i + 1] <= hi;
    for (size_t k = 2; ok && k < len; ++k) ok = p[i + k] >= 0x80 && p[i + k] <= 0xbf;
    if (ok) {
      out.append(s.substr(i, len));
      i += len;
    } else {
      out += "\xef\xbf\xbd";
      ++i;
    }
  }
}

// One JSON object under construction; line() writes it and flushes, unless
// told not to (the caller then flushes stdout itself).
class json_line {
 public:
  json_line& str(const char* key, std::string_view v) {
    start(key);
    out_ += '"';
    append_utf8_escaped(out_, v);
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
