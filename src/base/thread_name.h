#pragma once

// Names the calling thread, as `top -H`, `ps -L` and profilers show it.
// Linux keeps at most 15 bytes; a longer name is cut there. Best effort: a
// thread that cannot be named runs unnamed.

#include <string_view>

namespace sluice {

void set_thread_name(std::string_view name);

}  // namespace sluice
