// Levelled stderr logging; one write(2) per line so lines from threads do not interleave.
#include "gandiva/common/log.h"

#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace gandiva::log {
namespace {

// -1 for a name that is not a level.
int LevelFromName(const char* s) {
  if (!std::strcmp(s, "error")) return kError;
  if (!std::strcmp(s, "warn")) return kWarn;
  if (!std::strcmp(s, "info")) return kInfo;
  if (!std::strcmp(s, "debug")) return kDebug;
  return -1;
}

Level LevelFromEnv() {
  const char* s = std::getenv("GANDIVA_LOG");
  const int level = s ? LevelFromName(s) : -1;
  return level < 0 ? kInfo : static_cast<Level>(level);
}

std::atomic<int> g_level{-1};
std::atomic<const char*> g_tag{"gandiva"};
constexpr const char* kLevelNames[] = {"E", "W", "I", "D"};

}  // namespace

Level CurrentLevel() {
  int l = g_level.load(std::memory_order_relaxed);
  if (l < 0) {
    l = LevelFromEnv();
    g_level.store(l, std::memory_order_relaxed);
  }
  return static_cast<Level>(l);
}

void SetLevel(Level level) { g_level.store(level, std::memory_order_relaxed); }
bool SetLevelByName(const char* name) {
  const int level = LevelFromName(name);
  if (level >= 0) SetLevel(static_cast<Level>(level));
  return level >= 0;
}
void SetTag(const char* tag) { g_tag.store(tag, std::memory_order_relaxed); }

void Write(Level level, const char* file, int line, const char* fmt, ...) {
  char buf[1024];
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  tm t;
  localtime_r(&ts.tv_sec, &t);
  const char* base = std::strrchr(file, '/');
  base = base ? base + 1 : file;
  int n =
      std::snprintf(buf, sizeof buf, "%s %02d:%02d:%02d.%03ld %s %s:%d] ", kLevelNames[level],
                    t.tm_hour, t.tm_min, t.tm_sec, ts.tv_nsec / 1000000, g_tag.load(), base, line);
  va_list ap;
  va_start(ap, fmt);
  if (n > 0 && n < static_cast<int>(sizeof buf))
    n += std::vsnprintf(buf + n, sizeof buf - n, fmt, ap);
  va_end(ap);
  if (n >= static_cast<int>(sizeof buf) - 1) n = sizeof buf - 2;
  buf[n++] = '\n';
  ssize_t ignored = ::write(2, buf, n);
  (void)ignored;
}

}  // namespace gandiva::log
