// Placeholder until the simulator lands: `gandiva sim` (owned by the scheduler work).
#include <cstdio>

#include "commands.h"

namespace gandiva::cli {
int SimCommand(const Args&) {
  std::fprintf(stderr, "gandiva sim: not built yet\n");
  return 2;
}
}  // namespace gandiva::cli
