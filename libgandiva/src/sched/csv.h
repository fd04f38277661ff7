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
// Reads a whole file; false if it cannot be opened.
bool ReadFile(const std::string& path, std::string* out);

}  // namespace gandiva::sched::csv

#endif  // GANDIVA_SRC_SCHED_CSV_H_
