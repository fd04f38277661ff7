// Trace readers: Philly, Tiresias and the generic CSV, with per-line errors.
#include "gandiva/scheduler/trace.h"

#include <algorithm>
#include <map>

#include "cluster/csv.h"

namespace gandiva::sched {
namespace {

// Days from 1970-01-01 to y-m-d (proleptic Gregorian), H. Hinnant's algorithm.
long DaysFromCivil(long y, unsigned m, unsigned d) {
  y -= m <= 2;
  const long era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<long>(doe) - 719468;
}

// Column positions for one format; -1 = absent.
struct Columns {
  int submit = -1, duration = -1, gpu_time = -1, gpus = -1, vc = -1, user = -1, job_type = -1,
      gpu_type = -1;
  bool submit_is_datetime = false;
};

int Find(const std::vector<std::string>& header, std::initializer_list<const char*> names) {
  for (size_t i = 0; i < header.size(); ++i)
    for (const char* n : names)
      if (header[i] == n) return static_cast<int>(i);
  return -1;
}

// The columns of a trace with this header; *format_name: the format, detected
// from the header when fmt is kAuto.
Columns ColumnsOf(const std::vector<std::string>& header, TraceFormat fmt,
                  std::string* format_name) {
  if (fmt == TraceFormat::kAuto) {
    if (Find(header, {"timestamp"}) >= 0 && Find(header, {"cluster"}) >= 0)
      fmt = TraceFormat::kPhilly;
    else if (Find(header, {"num_gpu"}) >= 0 && Find(header, {"model_name"}) >= 0)
      fmt = TraceFormat::kTiresias;
    else
      fmt = TraceFormat::kGeneric;
  }
  Columns col;
  if (fmt == TraceFormat::kPhilly) {
    *format_name = "philly";
    col.submit = Find(header, {"timestamp"});
    col.submit_is_datetime = true;
    col.duration = Find(header, {"duration"});
    col.gpus = Find(header, {"num_gpus"});
    col.vc = Find(header, {"cluster"});
  } else if (fmt == TraceFormat::kTiresias) {
    *format_name = "tiresias";
    col.submit = Find(header, {"submit_time"});
    col.duration = Find(header, {"duration"});
    col.gpus = Find(header, {"num_gpu"});
  } else {
    *format_name = "generic";
    col.submit = Find(header, {"submit_time"});
    col.duration = Find(header, {"duration"});
    col.gpu_time = Find(header, {"gpu_time", "work"});
    col.gpus = Find(header, {"num_gpus"});
    col.vc = Find(header, {"vc"});
    col.user = Find(header, {"user"});
    col.job_type = Find(header, {"job_type"});
    col.gpu_type = Find(header, {"gpu_type"});
  }
  return col;
}

// One data row into *job; returns why it is malformed, or "" if it is not.
std::string ParseRow(const std::vector<std::string>& f, size_t header_size, const Columns& col,
                     TraceJob* job) {
  auto get = [&](int c) -> const std::string& {
    static const std::string kEmpty;
    return c >= 0 && c < static_cast<int>(f.size()) ? f[c] : kEmpty;
  };
  long gpus = 0;
  double dur = -1;
  if (f.size() < header_size)
    return "expected " + std::to_string(header_size) + " fields, got " + std::to_string(f.size());
  if (col.submit_is_datetime ? !ParseDateTime(get(col.submit), &job->submit_time)
                             : !csv::ParseDouble(get(col.submit), &job->submit_time))
    return "bad submit time '" + get(col.submit) + "'";
  if (!csv::ParseInt(get(col.gpus), &gpus) || gpus < 1 || gpus > 100000)
    return "GPU count must be a positive integer, got '" + get(col.gpus) + "'";
  if (col.duration >= 0 ? !csv::ParseDouble(get(col.duration), &dur) || dur < 0
                        : !csv::ParseDouble(get(col.gpu_time), &dur) || dur < 0)
    return "duration must be a number >= 0, got '" +
           get(col.duration >= 0 ? col.duration : col.gpu_time) + "'";
  job->num_gpus = static_cast<int>(gpus);
  job->duration = col.duration >= 0 ? dur : dur / static_cast<double>(gpus);
  job->vc = get(col.vc);
  job->user = get(col.user);
  job->job_type = get(col.job_type);
  job->gpu_type = get(col.gpu_type);
  return "";
}

// Jobs in submit order (stable), the first max_jobs kept, submit times rebased
// to the first job and divided by the load.
void SortAndRebase(const TraceOptions& opt, Trace* trace) {
  std::stable_sort(
      trace->jobs.begin(), trace->jobs.end(),
      [](const TraceJob& a, const TraceJob& b) { return a.submit_time < b.submit_time; });
  if (opt.max_jobs > 0 && static_cast<int>(trace->jobs.size()) > opt.max_jobs)
    trace->jobs.resize(opt.max_jobs);
  if (!trace->jobs.empty()) {
    double t0 = trace->jobs.front().submit_time;
    for (auto& j : trace->jobs) j.submit_time = (j.submit_time - t0) / opt.load;
  }
}
}  // namespace

bool ParseDateTime(std::string_view s, double* seconds) {
  s = csv::Trim(s);
  // YYYY-MM-DD HH:MM:SS (a 'T' separator is accepted too).
  if (s.size() != 19 || s[4] != '-' || s[7] != '-' || (s[10] != ' ' && s[10] != 'T') ||
      s[13] != ':' || s[16] != ':')
    return false;
  long y, mo, d, h, mi, se;
  if (!csv::ParseInt(s.substr(0, 4), &y) || !csv::ParseInt(s.substr(5, 2), &mo) ||
      !csv::ParseInt(s.substr(8, 2), &d) || !csv::ParseInt(s.substr(11, 2), &h) ||
      !csv::ParseInt(s.substr(14, 2), &mi) || !csv::ParseInt(s.substr(17, 2), &se))
    return false;
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || se > 60) return false;
  *seconds = static_cast<double>(DaysFromCivil(y, mo, d)) * 86400 + h * 3600 + mi * 60 + se;
  return true;
}

StatusOr<Trace> ParseTrace(const std::string& text, const std::string& name,
                           const TraceOptions& opt) {
  if (!(opt.load > 0)) return InvalidArgument("--load must be positive");
  Trace trace;
  std::vector<std::string> f, header;
  Columns col;
  bool have_header = false;
  auto where = [&](int line) { return name + ":" + std::to_string(line) + ": "; };
  csv::Lines lines(text);
  for (std::string_view line; lines.Next(&line);) {
    const int line_no = lines.number();
    std::string_view t = csv::Trim(line);
    if (t.empty() || t[0] == '#') continue;
    if (!have_header) {
      have_header = true;
      csv::Split(line, &header);
      col = ColumnsOf(header, opt.format, &trace.format);
      if (col.submit < 0 || col.gpus < 0 || (col.duration < 0 && col.gpu_time < 0))
        return InvalidArgument(where(line_no) + "header of a " + trace.format +
                               " trace must name the submit time, GPU count and duration columns");
      continue;
    }
    csv::Split(line, &f);
    TraceJob job;
    const std::string why = ParseRow(f, header.size(), col, &job);
    if (!why.empty()) {
      if (opt.skip_bad_rows) {
        ++trace.skipped_rows;
        continue;
      }
      return InvalidArgument(where(line_no) + why + " (use --skip-bad-rows to skip such rows)");
    }
    trace.jobs.push_back(std::move(job));
  }
  if (!have_header) return InvalidArgument(name + ": empty trace");
  SortAndRebase(opt, &trace);
  return trace;
}

StatusOr<Trace> ReadTrace(const std::string& path, const TraceOptions& options) {
  std::string text;
  if (!csv::ReadFile(path, &text)) return NotFound("cannot open trace " + path);
  return ParseTrace(text, path, options);
}

}  // namespace gandiva::sched
