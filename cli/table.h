// Plain-text tables for the CLI's human output.
#ifndef GANDIVA_CLI_TABLE_H_
#define GANDIVA_CLI_TABLE_H_

#include <cstdio>
#include <string>
#include <vector>

namespace gandiva::cli {

class Table {
 public:
  explicit Table(std::vector<std::string> header) : rows_{std::move(header)} {}
  void Add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  std::string Render() const;
  void Print(FILE* out = stdout) const { std::fputs(Render().c_str(), out); }

 private:
  std::vector<std::vector<std::string>> rows_;
};

// "%.2f"-style formatting without iostreams.
std::string Fixed(double v, int decimals);
// 1536 -> "1.5 KiB"
std::string Bytes(double bytes);

}  // namespace gandiva::cli

#endif  // GANDIVA_CLI_TABLE_H_
