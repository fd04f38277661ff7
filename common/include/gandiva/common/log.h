// Levelled logging to stderr: GD_LOG(kInfo, "job %d parked", id).
// The level comes from GANDIVA_LOG (error, warn, info, debug); default info.
#ifndef GANDIVA_COMMON_LOG_H_
#define GANDIVA_COMMON_LOG_H_

namespace gandiva::log {

enum Level { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

Level CurrentLevel();
void SetLevel(Level level);
// "error", "warn", "info" or "debug" (a --log flag); false for another name.
bool SetLevelByName(const char* name);
// Sets the prefix printed before each line, e.g. "gandivad" or "gandiva[job 3]".
void SetTag(const char* tag);
void Write(Level level, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));

}  // namespace gandiva::log

#define GD_LOG(level, ...)                                                           \
  do {                                                                               \
    if (::gandiva::log::level <= ::gandiva::log::CurrentLevel())                     \
      ::gandiva::log::Write(::gandiva::log::level, __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)

#endif  // GANDIVA_COMMON_LOG_H_
