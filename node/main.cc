// gandivad: the node controller daemon.
#include <string>
#include <vector>

#include "gandiva/node/daemon.h"

int main(int argc, char** argv) {
  return gandiva::controller::RunDaemon(std::vector<std::string>(argv + 1, argv + argc));
}
