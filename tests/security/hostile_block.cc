// What a hostile user can do to their own job's control block, for the
// adversarial suite: the block is theirs (0600, owned by them), so nothing
// here needs a privilege the attacker lacks.
//
//   hostile_block write-pid BLOCK PID   reports PID as the block's process
//   hostile_block cut BLOCK             cuts the block's file to 0 bytes
//   hostile_block unterminated BLOCK    fills transfer_error with no NUL
//
// BLOCK is the shared-memory name ("/gandiva.…"). Exit 0 when done.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "gandiva/contract/shared_control_block.h"

using gandiva::runtime::SharedControlBlock;

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: hostile_block write-pid|cut|unterminated BLOCK [PID]\n");
    return 2;
  }
  const std::string verb = argv[1], name = argv[2];
  if (verb == "cut") {
    const int fd = shm_open(name.c_str(), O_RDWR, 0);
    if (fd < 0 || ftruncate(fd, 0) != 0) {
      std::perror(name.c_str());
      return 1;
    }
    return 0;
  }
  auto block = SharedControlBlock::Open(name);
  if (!block.ok()) {
    std::fprintf(stderr, "%s\n", block.status().ToString().c_str());
    return 1;
  }
  gandiva::runtime::ControlBlock* cb = (*block)->get();
  if (verb == "write-pid" && argc == 4) {
    cb->pid.store(std::atoi(argv[3]));
    return 0;
  }
  if (verb == "unterminated") {
    std::memset(cb->transfer_error, 'x', sizeof(cb->transfer_error));
    return 0;
  }
  std::fprintf(stderr, "unknown: %s\n", verb.c_str());
  return 2;
}
