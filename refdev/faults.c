/* Fault modes: their names, ORT_REFDEV_FAULT as read at registration and on each call. */
#include "refdev.h"

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
