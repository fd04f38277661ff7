// Test program: the workload calling the driver through directly linked symbols
// (the way a program linked with -lcuda does). Kernels come from --image (nvcc-built).
#include "workload.h"

int main(int argc, char** argv) {
  gandiva::testapp::Driver d;
#define GD_DIRECT(name, pfn) d.name = &::name;
  GD_APP_DRIVER(GD_DIRECT)
#undef GD_DIRECT
  return gandiva::testapp::RunWorkload(d, argc, argv);
}
