// WriteJsonReport: where `gandiva sim`'s modes put their JSON (see commands.h).
#include <cstdio>
#include <fstream>

#include "commands.h"

namespace gandiva::cli {

Status WriteJsonReport(const std::string& json, const std::string& path) {
  if (path == "none") return Status::Ok();
  if (path == "-") {
    std::fputs((json + "\n").c_str(), stdout);
    return Status::Ok();
  }
  std::ofstream out(path);
  out << json << "\n";
  if (!out) return Unavailable("cannot write " + path);
  std::fprintf(stderr, "wrote %s\n", path.c_str());
  return Status::Ok();
}

}  // namespace gandiva::cli
