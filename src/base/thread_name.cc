#include "base/thread_name.h"

#include <algorithm>
#include <cstring>

#include <sys/prctl.h>

namespace sluice {

void set_thread_name(std::string_view name) {
  char buf[16] = {};
  std::memcpy(buf, name.data(), std::min(name.size(), sizeof(buf) - 1));
  ::prctl(PR_SET_NAME, buf, 0, 0, 0);
}

}  // namespace sluice
