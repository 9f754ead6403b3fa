#include "etcd/client.h"

namespace sluice::etcd {

key_range key_range::prefix(std::string p) {
  // etcd's convention: the range end of a prefix is the prefix with its last
  // byte below 0xff incremented (and the 0xff bytes after it dropped). A
  // prefix of only 0xff bytes, and the empty prefix, have no such end: the
  // range is then every key from `key` on, written as range_end "\0".
  if (p.empty()) return key_range{std::string(1, '\0'), std::string(1, '\0')};
  std::string end = p;
  while (!end.empty() && static_cast<unsigned char>(end.back()) == 0xff) end.pop_back();
  if (end.empty()) return key_range{std::move(p), std::string(1, '\0')};
  end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
  return key_range{std::move(p), std::move(end)};
}

bool key_range::contains(const std::string& k) const {
  // std::string compares bytes as unsigned, as etcd does.
  if (range_end.empty()) return k == key;
  if (range_end == std::string(1, '\0')) return k >= key;
  return k >= key && k < range_end;
}

std::string_view compare_target_name(compare_target t) {
  switch (t) {
    case compare_target::value:
      return "value";
    case compare_target::version:
      return "version";
    case compare_target::create_revision:
      return "create_revision";
    case compare_target::mod_revision:
      return "mod_revision";
    case compare_target::lease:
      return "lease";
  }
  return "unknown";
}

std::string_view compare_op_name(compare_op o) {
  switch (o) {
    case compare_op::equal:
      return "==";
    case compare_op::not_equal:
      return "!=";
    case compare_op::less:
      return "<";
    case compare_op::greater:
      return ">";
  }
  return "?";
}

}  // namespace sluice::etcd
