// A per-process scratch file for harnesses whose entry point reads a path:
// each run overwrites it with the input. One per process, so that parallel
// fuzzing jobs (-jobs=N) never read each other's inputs.
#ifndef GANDIVA_FUZZ_TEMP_FILE_H_
#define GANDIVA_FUZZ_TEMP_FILE_H_

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace gandiva::fuzz {

class TempFile {
 public:
  explicit TempFile(const char* tag) {
    const char* dir = std::getenv("TMPDIR");
    path_ = std::string(dir && *dir ? dir : "/tmp") + "/gandiva-fuzz-" + tag + "-" +
            std::to_string(getpid());
  }
  ~TempFile() { std::remove(path_.c_str()); }

  // Replaces the file's contents with data[0, n); aborts when it cannot, since
  // a harness that silently tests an empty file finds nothing.
  const std::string& Write(const void* data, size_t n) {
    FILE* f = std::fopen(path_.c_str(), "wb");
    if (!f || std::fwrite(data, 1, n, f) != n || std::fclose(f) != 0) std::abort();
    return path_;
  }

 private:
  std::string path_;
};

}  // namespace gandiva::fuzz

#endif  // GANDIVA_FUZZ_TEMP_FILE_H_
