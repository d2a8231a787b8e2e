/* Fault modes: their names, ORT_REFDEV_FAULT as read at registration and on each call, and
 * what the stress faults of several files share. */
/* syscall(SYS_gettid): the kernel's thread id, the number Python's threading.get_native_id()
 * and ps show, so that affinity's message names a thread a caller can recognise */
#define _DEFAULT_SOURCE
#include "refdev.h"

#include <sched.h>
#include <sys/syscall.h>

/* ------------------------------------------------------------------------------------------ */
/* Fault modes                                                                                  */
/* ------------------------------------------------------------------------------------------ */

const char* const k_fault_names[FAULT_COUNT_] = {
    "none",       "no-data-transfer", "corrupt",    "short-copy",
    "no-d2d",     "no-d2h",           "no-h2d",     "wrong-memory",
    "cpu-default", "host-accessible-inputs", "alloc-fail", "abort",
    "hang",       "slow-d2d",         "claim-nothing", "wrong-compute",
    "unregister-crash", "host-accessible-as-device", "import-copy", "import-misread",
    "import-no-bounds", "import-denies", "kernel-fails",
    "misplaced-inputs",
    "overrun",
    "drop-stream", "no-wait", "no-drain", "early-return",
    "intermittent", "intermittent-abort",
    "empty-fails",
    "leak", "race", "race-kernel", "affinity", "size32", "nth",
    "no-stats",
};

/* Parse a fault name. Unset or empty means none. Returns false for an unknown name. */
bool refdev_parse_fault(const char* s, refdev_fault* out) {
  if (s == NULL || s[0] == '\0') {
    *out = FAULT_NONE;
    return true;
  }
  for (int i = 0; i < FAULT_COUNT_; ++i) {
    if (strcmp(s, k_fault_names[i]) == 0) {
      *out = (refdev_fault)i;
      return true;
    }
  }
  return false;
}

/* Value read when the library was registered (CreateEpFactories). */
refdev_fault g_fault_at_load = FAULT_NONE;

/* Behavioural faults re-read ORT_REFDEV_FAULT on each call; an unknown value at that point
 * falls back to the value read at registration. */
refdev_fault refdev_current_fault(void) {
  refdev_fault f;
  if (refdev_parse_fault(getenv("ORT_REFDEV_FAULT"), &f)) return f;
  return g_fault_at_load;
}

bool refdev_env_flag(const char* name) {
  const char* v = getenv(name);
  return v != NULL && strcmp(v, "1") == 0;
}

/* ------------------------------------------------------------------------------------------ */
/* What the stress faults share                                                                 */
/* ------------------------------------------------------------------------------------------ */

/* affinity: the thread of the process's first CreateEpFactories. The first, because the kit
 * registers the library twice in one process (onnxruntime's Python module and the C library of
 * its wheel each load it, and share its statics); a later registration from another thread
 * must not move the one thread where copies work. */
static pthread_once_t g_registering_once = PTHREAD_ONCE_INIT;
static pthread_t g_registering_thread;
static long g_registering_tid = 0;

static long current_tid(void) { return (long)syscall(SYS_gettid); }

static void note_thread(void) {
  g_registering_thread = pthread_self();
  g_registering_tid = current_tid();
}

void refdev_note_registering_thread(void) { pthread_once(&g_registering_once, note_thread); }

/* Whether the caller is the thread that registered the library; both threads' kernel ids for
 * the message. A library never registered (no CreateEpFactories yet) has no such thread: true. */
bool refdev_on_registering_thread(long* here, long* registered) {
  *here = current_tid();
  *registered = g_registering_tid;
  return g_registering_tid == 0 || pthread_equal(pthread_self(), g_registering_thread);
}

/* race, race-kernel: what a thread does between writing a shared buffer and reading it back.
 * It gives the CPU away (sched_yield) and then sleeps 200 us, so another thread in the same
 * fault always gets to write the buffer in between: the race shows on every overlap of two
 * calls, not on a lucky one, even with more threads than cores. */
void refdev_race_pause(void) {
  sched_yield();
  struct timespec ts = {0, 200000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}
