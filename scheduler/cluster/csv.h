// Minimal CSV helpers for the trace and machine-list readers: split a line
// (double quotes allowed around a field), trim, and parse numbers strictly.
#ifndef GANDIVA_SRC_SCHED_CSV_H_
#define GANDIVA_SRC_SCHED_CSV_H_

#include <string>
#include <string_view>
#include <vector>

namespace gandiva::sched::csv {

// Splits into trimmed fields; reuses `out`.
void Split(std::string_view line, std::vector<std::string>* out);
std::string_view Trim(std::string_view s);
// Whole-field parses: "12abc" and "" fail.
bool ParseDouble(std::string_view s, double* out);
bool ParseInt(std::string_view s, long* out);
// Walks a file's text line by line, numbering lines from 1 for error messages:
//   csv::Lines lines(text);
//   for (std::string_view line; lines.Next(&line);) ... lines.number() ...
class Lines {
 public:
  explicit Lines(std::string_view text) : text_(text) {}
  bool Next(std::string_view* line) {
    if (pos_ >= text_.size()) return false;
    size_t end = text_.find('\n', pos_);
    if (end == std::string_view::npos) end = text_.size();
    *line = text_.substr(pos_, end - pos_);
    pos_ = end + 1;
    ++number_;
    return true;
  }
  int number() const { return number_; }

 private:
  std::string_view text_;
  size_t pos_ = 0;
  int number_ = 0;
};

// Reads a whole file; false if it cannot be opened.
bool ReadFile(const std::string& path, std::string* out);

}  // namespace gandiva::sched::csv

#endif  // GANDIVA_SRC_SCHED_CSV_H_
