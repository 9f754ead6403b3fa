#pragma once

// Assertions for programmer errors (bugs). They stay on in every build type:
// a broken invariant must stop the process before it damages data. Bad bytes
// from a client or a disk are input, never a reason to assert: return an
// error value instead (see base/result.h).

#include <cstdio>
#include <cstdlib>

#define SLUICE_ASSERT(cond, msg)                                                    \
  do {                                                                              \
    if (!(cond)) [[unlikely]] {                                                     \
      std::fprintf(stderr, "%s:%d: assertion failed: %s: %s\n", __FILE__, __LINE__, \
                   #cond, (msg));                                                   \
      std::abort();                                                                 \
    }                                                                               \
  } while (0)
