/* gandiva.h — the job-side C API of gandiva.
 *
 * A training program calls gd_boundary() once per iteration (e.g. after each
 * optimizer step). When the program runs under `gandiva run`, the node
 * controller (gandivad) can then suspend it exactly at an iteration boundary,
 * time-slice it with other jobs and read its iteration times. Run without a
 * controller, every call is cheap and changes nothing (the job is "unmanaged").
 *
 * A C API so that any framework or language can call it; gandiva.hpp wraps it
 * for C++. All functions are thread-safe except as noted. No function throws.
 */
#ifndef GANDIVA_GANDIVA_H_
#define GANDIVA_GANDIVA_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define GD_API __attribute__((visibility("default")))
#else
#define GD_API
#endif

/* Attaches to the controller named by the environment `gandiva run` sets
 * (GANDIVA_CONTROL_BLOCK, GANDIVA_JOB_ID). Idempotent; gd_boundary() attaches
 * on first use, so calling this is optional. Returns 1 when managed by a
 * controller, 0 when running unmanaged (no controller; said once on stderr). */
GD_API int gd_attach(void);

/* Marks an iteration boundary. Records the time since the previous boundary
 * (time spent parked excluded) and, if the controller asked the job to
 * suspend, parks here until resumed. Call from the training thread only.
 * When nothing is requested: no lock, no syscall, no allocation. */
GD_API void gd_boundary(void);

/* 1 while a controller manages this job, 0 when unmanaged (never attached, or
 * the controller went away and the job resumed itself). */
GD_API int gd_managed(void);

/* The job id the controller gave this job; 0 when unmanaged. */
GD_API uint64_t gd_job_id(void);

typedef struct gd_iteration_stats {
  uint64_t iterations;     /* measured iterations so far */
  double mean_ms;          /* mean iteration time over all iterations */
  double ewma_ms;          /* exponentially weighted moving average (alpha 1/8) */
  double p50_ms;           /* median over the last 1024 iterations */
  double p99_ms;           /* 99th percentile over the last 1024 iterations */
  double iterations_per_s; /* current rate, from the EWMA */
  uint64_t parks;          /* times this job parked at a boundary */
} gd_iteration_stats;

/* Fills *out with this job's iteration profile. Returns 0, or -1 if out is NULL. */
GD_API int gd_get_iteration_stats(gd_iteration_stats* out);

/* Marks the job as exited for the controller. Called automatically at exit. */
GD_API void gd_detach(void);

/* ------------------------------------------------------------------------
 * Checkpoint and restore: registered state
 *
 * A job registers the state it needs to continue elsewhere (model and
 * optimizer state, RNG states, the iteration counter, a data position) as
 * named sections. At an iteration boundary the runtime can then write every
 * section into one checksummed stream (a controller's checkpoint or migration
 * request, or gd_checkpoint), and a new process started with
 * GANDIVA_RESTORE=DIR (`gandiva run --restore DIR`) loads DIR/state.gdck at
 * its first gd_boundary(): register every section BEFORE that first boundary.
 * A restore verifies the whole stream before calling any load function; a
 * stream that is corrupt, truncated, or holds a section nobody registered (or
 * lacks a registered one) loads nothing, and a GANDIVA_RESTORE job then exits
 * with status 75. Format and details: docs/checkpoint.md.
 * ------------------------------------------------------------------------ */

#include <stddef.h>

/* Opaque: where a save function writes / a load function reads one section.
 * Valid only during the call that received it. */
typedef struct gd_writer gd_writer;
typedef struct gd_reader gd_reader;

/* Writes the section with gd_write(); returns 0, or non-zero to fail the
 * checkpoint (the stream is then abandoned: no file appears, the controller
 * sees an incomplete stream and the job keeps running where it is). */
typedef int (*gd_save_fn)(void* user, gd_writer* w);
/* Reads the section with gd_read(); returns 0, or non-zero to fail the restore. */
typedef int (*gd_load_fn)(void* user, gd_reader* r);

/* Registers a section named `name` (1..256 bytes, unique; copied). Sections
 * are saved and loaded in registration order. `user` is passed back to both
 * functions; it must stay valid until gd_unregister_state(). The functions
 * run on the thread that checkpoints: the thread calling gd_boundary() (while
 * parked) or gd_checkpoint(), never concurrently with each other.
 * Thread-safe. Returns 0; -1 if an argument is NULL or the name is taken. */
GD_API int gd_register_state(const char* name, gd_save_fn save, gd_load_fn load, void* user);

/* Registers the `size` bytes at `data` as the section `name`: the runtime
 * saves them and restores into them, with no functions to write. A restored
 * section of another size fails the restore. A migration's arriving state is
 * received straight into this memory (the warm copy is discarded if the
 * transfer fails), so nothing is copied once the stream is in, and the copy
 * keeps no second copy of it. The memory must stay valid, and its size the
 * same, until gd_unregister_state(); the job must not change it while parked
 * (a warm copy whose buffer changed fails its restore). Same ordering and names as
 * gd_register_state. Thread-safe. Returns 0; -1 if `name` or `data` is NULL,
 * `size` is 0, or the name is taken. */
GD_API int gd_register_buffer(const char* name, void* data, size_t size);

/* Removes a registered section. Returns 0; -1 if no section has that name. */
GD_API int gd_unregister_state(const char* name);

/* Appends data[0, n) to the section being saved. Large writes (>= 256 KiB)
 * go out without a copy: write big buffers whole. Returns 0; -1 once the
 * target failed (a full disk, a closed socket): the save function should then
 * return non-zero. */
GD_API int gd_write(gd_writer* w, const void* data, size_t n);

/* Copies up to n bytes of the section being loaded into out. Returns the
 * count (less than n only at the section's end), 0 at the end, -1 on a NULL
 * argument. Every byte it hands out has passed its checksum: in a restore
 * at start-up (GANDIVA_RESTORE) each chunk is checked as it is first read, and
 * a corrupt one ends the read short and the process (exit 75) before it
 * trains; everywhere else the whole stream is checked before any load
 * function is called. */
GD_API long long gd_read(gd_reader* r, void* out, size_t n);

/* The size in bytes of the section being loaded (-1 on NULL). */
GD_API long long gd_section_size(gd_reader* r);

/* Writes every registered section to DIR/state.gdck now, from the calling
 * thread (e.g. a job's own periodic checkpoint, at a point where its state
 * is consistent). DIR is created if missing. The file appears atomically
 * (temporary name, fsync, rename): a crash leaves the previous checkpoint.
 * Returns 0; -1 on failure (the reason is logged on stderr). */
GD_API int gd_checkpoint(const char* dir);

#ifdef __cplusplus
}
#endif

#endif /* GANDIVA_GANDIVA_H_ */
