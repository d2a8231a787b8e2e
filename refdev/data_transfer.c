/* The data transfer: CanCopy, CopyTensors (the only copier of scrambled memory), the copy log. */
#include "refdev.h"

/* ------------------------------------------------------------------------------------------ */
/* Data transfer                                                                                */
/* ------------------------------------------------------------------------------------------ */

typedef struct refdev_data_transfer {
  OrtDataTransferImpl base;
  refdev_factory* factory;
} refdev_data_transfer;

static bool can_copy_kinds(mem_kind src, mem_kind dst, refdev_fault fault) {
  if (src == MEM_UNKNOWN || dst == MEM_UNKNOWN) return false;
  if (src == MEM_CPU && dst == MEM_CPU) return false; /* plain CPU copies are onnxruntime's own */
  if (src == MEM_DEVICE && dst == MEM_DEVICE && fault == FAULT_NO_D2D) return false;
  if (src == MEM_DEVICE && dst == MEM_CPU && fault == FAULT_NO_D2H) return false;
  if (src == MEM_CPU && dst == MEM_DEVICE && fault == FAULT_NO_H2D) return false;
  return true;
}

static bool ORT_API_CALL dt_can_copy(const OrtDataTransferImpl* this_ptr, const OrtMemoryDevice* src,
                                     const OrtMemoryDevice* dst) {
  const refdev_data_transfer* dt = (const refdev_data_transfer*)this_ptr;
  mem_kind s = refdev_classify_device(dt->factory, src);
  mem_kind d = refdev_classify_device(dt->factory, dst);
  return can_copy_kinds(s, d, refdev_current_fault());
}

static void sleep_ms(long ms) {
  struct timespec ts;
  ts.tv_sec = ms / 1000;
  ts.tv_nsec = (ms % 1000) * 1000000L;
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* --- intermittent faults (intermittent, intermittent-abort) ----------------------------------
 * They fail some tries of a check and not others, as a flaky device or driver would: every Nth
 * CopyTensors call of the process goes wrong (N = ORT_REFDEV_INTERMITTENT_EVERY, default 3) and
 * the others are right. A check tried again in a fresh process starts the count again, so its
 * retry passes where it makes fewer than N copies. */
static long g_intermittent_calls = 0;

static long intermittent_period(void) {
  const char* v = getenv("ORT_REFDEV_INTERMITTENT_EVERY");
  long n = v != NULL ? strtol(v, NULL, 10) : 0;
  return n > 0 ? n : 3;
}

/* Whether this CopyTensors call is one of those that go wrong (counted only in these modes). */
static bool intermittent_strikes(refdev_fault fault) {
  if (fault != FAULT_INTERMITTENT && fault != FAULT_INTERMITTENT_ABORT) return false;
  long n = __atomic_add_fetch(&g_intermittent_calls, 1, __ATOMIC_RELAXED);
  return n % intermittent_period() == 0;
}

static void intermittent_abort(void) {
  fprintf(stderr, "refdev: fault 'intermittent-abort': CopyTensors call %ld of this process calls abort()\n",
          __atomic_load_n(&g_intermittent_calls, __ATOMIC_RELAXED));
  fflush(stderr);
  abort();
}

/* --- the hold (ORT_REFDEV_HOLD_FILE, ORT_REFDEV_HOLD_COUNT) -----------------------------------
 * Not a fault: a point where the kit's tests can kill or stop a worker from outside while a check
 * is in flight, and know that it is there. The first CopyTensors call of each of the first N
 * processes (N = ORT_REFDEV_HOLD_COUNT, default 1) appends the process's pid as a line to the file
 * ORT_REFDEV_HOLD_FILE names and waits there until the file is removed; every later process finds
 * N lines there and copies at once. So a check held in one process and killed there passes when
 * it is tried again in a fresh one, and with N = 2 its next try is held too: which processes hold
 * is decided by the file alone, never by when a test acts (tests/test_machine_events.py). */
static int g_hold_tried = 0;

static long hold_count(void) {
  const char* v = getenv("ORT_REFDEV_HOLD_COUNT");
  long n = v != NULL ? strtol(v, NULL, 10) : 0;
  return n > 0 ? n : 1;
}

/* Whether this process takes one of the file's N places: its pid appended as a line, under a
 * lock, so that two processes never both count the same lines. */
static bool hold_taken(const char* path) {
  int fd = open(path, O_RDWR | O_CREAT | O_APPEND, 0644);
  if (fd < 0) return false;
  bool taken = false;
  if (flock(fd, LOCK_EX) == 0) {
    long lines = 0;
    char buffer[256];
    ssize_t got;
    off_t offset = 0;
    while ((got = pread(fd, buffer, sizeof buffer, offset)) > 0) {
      for (ssize_t i = 0; i < got; ++i) lines += buffer[i] == '\n';
      offset += got;
    }
    if (lines < hold_count()) {
      char line[32];
      int length = snprintf(line, sizeof line, "%ld\n", (long)getpid());
      /* One write: a test reads the pid once the line's end is there. */
      taken = length > 0 && write(fd, line, (size_t)length) == (ssize_t)length;
    }
    flock(fd, LOCK_UN);
  }
  close(fd);
  return taken;
}

static void hold_once(void) {
  if (__atomic_exchange_n(&g_hold_tried, 1, __ATOMIC_RELAXED)) return;
  const char* path = getenv("ORT_REFDEV_HOLD_FILE");
  if (path == NULL || path[0] == '\0' || !hold_taken(path)) return;
  fprintf(stderr, "refdev: CopyTensors held until %s is removed\n", path);
  fflush(stderr);
  while (access(path, F_OK) == 0) sleep_ms(10);
}

typedef struct copy_job {
  const void* src;
  void* dst;
  size_t bytes;
  mem_kind skind;
  mem_kind dkind;
  /* read at the call, for a copy that may run later on a stream's thread */
  bool src_scrambled;
  bool dst_scrambled;
  size_t overrun_element; /* overrun: the destination's element size */
  void* staged;           /* a queued copy's CPU source, taken at the call */
} copy_job;

/* The copies of one CopyTensors call that go to one stream (or to none): run at once, or queued
 * on the stream (streams.c), and freed by whoever runs them. */
typedef struct copy_batch {
  refdev_fault fault;
  bool clear_first; /* import fault clear-first: each destination cleared before it is copied into */
  bool strikes; /* intermittent: this call's copy that goes wrong */
  size_t n;
  copy_job jobs[];
} copy_batch;

static void copy_batch_free(copy_batch* b) {
  for (size_t i = 0; i < b->n; ++i) free(b->jobs[i].staged);
  free(b);
}

/* Before a copy is queued: its CPU sources are read now, so the caller may reuse or free them as
 * soon as CopyTensors returns (as a GPU driver stages pageable memory). False when out of
 * memory: the copy then runs at once. */
static bool stage_cpu_sources(void* arg) {
  copy_batch* b = (copy_batch*)arg;
  for (size_t i = 0; i < b->n; ++i) {
    copy_job* j = &b->jobs[i];
    if (j->skind != MEM_CPU || j->bytes == 0) continue;
    j->staged = malloc(j->bytes);
    if (j->staged == NULL) return false;
    memcpy(j->staged, j->src, j->bytes);
    j->src = j->staged;
  }
  return true;
}

static void perform_copies(void* arg, bool abandoned);

static OrtStatus* check_pointer(const void* p, size_t bytes, mem_kind kind, size_t index, const char* role) {
  if (kind != MEM_DEVICE && kind != MEM_HOST) return NULL; /* CPU memory is not ours to track */
  if (bytes == 0) return NULL;
  bool oob = false;
  mem_kind found = refdev_reg_lookup(p, bytes, &oob);
  if (found == MEM_UNKNOWN) {
    return refdev_make_status(ORT_INVALID_ARGUMENT,
                              "RefDev CopyTensors: %s tensor %zu claims %s memory but %p is not a live RefDev allocation",
                              role, index, refdev_kind_name(kind), p);
  }
  if (found != kind) {
    return refdev_make_status(ORT_INVALID_ARGUMENT,
                              "RefDev CopyTensors: %s tensor %zu claims %s memory but %p was allocated as %s", role, index,
                              refdev_kind_name(kind), p, refdev_kind_name(found));
  }
  if (oob) {
    return refdev_make_status(ORT_INVALID_ARGUMENT,
                              "RefDev CopyTensors: %s tensor %zu (%zu bytes at %p) runs past the end of its allocation",
                              role, index, bytes, p);
  }
  return NULL;
}

/* Copy record: with ORT_REFDEV_COPY_LOG naming a file, every copy onnxruntime asks of the data
 * transfer appends "<source kind> <destination kind> <bytes> <source imported> <destination
 * imported> <source address> <destination address>" (imported: 1 where the bytes are imported
 * memory), so that the copies asked around a run with imported outputs can be read afterwards
 * (refdev/README.md, "Imports"). */
static void copy_log(mem_kind sk, mem_kind dk, const void* src, const void* dst, size_t bytes) {
  const char* path = getenv("ORT_REFDEV_COPY_LOG");
  if (path == NULL || path[0] == '\0') return;
  FILE* log = fopen(path, "a");
  if (log == NULL) return;
  fprintf(log, "%s %s %zu %d %d %p %p\n", refdev_kind_name(sk), refdev_kind_name(dk), bytes, sk != MEM_CPU && refdev_reg_is_plain(src, false) ? 1 : 0,
          dk != MEM_CPU && refdev_reg_is_plain(dst, false) ? 1 : 0, src, dst);
  fclose(log);
}

/* The copy that goes wrong in mode `intermittent`: one bit of the middle byte of its first
 * non-empty destination flipped, after the copy (as `corrupt` does to every copy). */
static void intermittent_corrupt(copy_job* jobs, size_t num_tensors) {
  for (size_t i = 0; i < num_tensors; ++i) {
    if (jobs[i].bytes == 0) continue;
    ((unsigned char*)jobs[i].dst)[jobs[i].bytes / 2] ^= 0x10u;
    return;
  }
}

/* --- stress faults (leak, race, affinity, size32, nth) -----------------------------------------
 * Each is harmless to one thread making small copies, so the functional tier passes on it, and
 * certain to break one stress contract: memory that does not grow, copies from many threads at
 * once or from any thread, byte counts past 4 GiB, thousands of calls. */

/* leak: every CopyTensors call leaks ORT_REFDEV_LEAK_BYTES (default 16 KiB; `tensor`: the bytes
 * of the call's source tensors), filled so that every page is resident and RSS grows by that
 * much. */
#define LEAK_DEFAULT_BYTES ((size_t)16 * 1024)

/* The last leaked block: a volatile global the compiler must assume is read, so neither the
 * allocation nor the filling is optimised away; every earlier block is unreachable. */
static void* volatile g_leaked_block = NULL;

/* An unset, empty or unreadable ORT_REFDEV_LEAK_BYTES gives the default, as
 * ORT_REFDEV_INTERMITTENT_EVERY does. */
static size_t leak_bytes(const OrtValue* const* src_tensors, size_t num_tensors) {
  const char* v = getenv("ORT_REFDEV_LEAK_BYTES");
  if (v != NULL && strcmp(v, "tensor") == 0) {
    size_t total = 0;
    for (size_t i = 0; src_tensors != NULL && i < num_tensors; ++i) {
      size_t bytes = 0;
      OrtStatus* st = src_tensors[i] != NULL ? g_ort->GetTensorSizeInBytes(src_tensors[i], &bytes) : NULL;
      if (st != NULL) g_ort->ReleaseStatus(st); /* the copy itself reports a bad tensor */
      total += bytes;
    }
    return total;
  }
  if (v == NULL || v[0] < '0' || v[0] > '9') return LEAK_DEFAULT_BYTES;
  char* end = NULL;
  errno = 0;
  unsigned long long n = strtoull(v, &end, 10);
  if (errno != 0 || *end != '\0') return LEAK_DEFAULT_BYTES;
  return (size_t)n;
}

static void leak_per_call(const OrtValue* const* src_tensors, size_t num_tensors) {
  size_t bytes = leak_bytes(src_tensors, num_tensors);
  if (bytes == 0) return;
  unsigned char* block = (unsigned char*)malloc(bytes);
  if (block == NULL) return;
  memset(block, 0xA5, bytes);
  g_leaked_block = block;
}

/* race: every copy goes through one staging buffer with no lock, as through a driver's single
 * pinned bounce buffer: window by window, the source is written into the buffer in
 * RACE_CHUNKS chunks, with refdev_race_pause after each, and only then copied from the buffer
 * to the destination (unscrambled or scrambled on the way as the direction needs). A copy
 * alone is right. Two that overlap in time write over each other in the buffer while the other
 * sleeps, so one of them delivers bytes of the other's source to its destination. */
#define RACE_STAGING_BYTES ((size_t)1 << 20)
#define RACE_CHUNKS 2
static unsigned char g_race_staging[RACE_STAGING_BYTES];

static void race_copy(unsigned char* dp, const unsigned char* sp, size_t n, bool flip) {
  /* a destination that overlaps its source further on is copied last window first, so that no
   * window overwrites source bytes a later window still has to read (memmove's rule) */
  bool backwards = dp > sp && dp < sp + n;
  size_t windows = (n + RACE_STAGING_BYTES - 1) / RACE_STAGING_BYTES;
  for (size_t w = 0; w < windows; ++w) {
    size_t offset = (backwards ? windows - 1 - w : w) * RACE_STAGING_BYTES;
    size_t len = n - offset < RACE_STAGING_BYTES ? n - offset : RACE_STAGING_BYTES;
    size_t chunk = (len + RACE_CHUNKS - 1) / RACE_CHUNKS;
    for (size_t c = 0; c < len; c += chunk) {
      memcpy(g_race_staging + c, sp + offset + c, len - c < chunk ? len - c : chunk);
      refdev_race_pause();
    }
    for (size_t k = 0; k < len; ++k) dp[offset + k] = (unsigned char)(g_race_staging[k] ^ (flip ? REFDEV_KEY : 0u));
  }
}

/* affinity: copies work only on the thread that registered the library, as with a driver
 * context bound to the thread that created it. */
static OrtStatus* affinity_refusal(void) {
  long here = 0, registered = 0;
  if (refdev_on_registering_thread(&here, &registered)) return NULL;
  return refdev_make_status(ORT_FAIL,
                            "RefDev CopyTensors: fault 'affinity': called on thread %ld; copies work only on thread %ld, "
                            "the one that registered the library (CreateEpFactories)",
                            here, registered);
}

/* size32: the byte count of each copy passes through a 32-bit unsigned int once the pair is
 * validated (whole), so a copy of 4 GiB + N bytes copies N bytes and leaves the rest of the
 * destination as it was. Copies under 4 GiB are right. */
static size_t size32_count(size_t bytes) { return (size_t)(uint32_t)bytes; }

/* nth: a pool of ORT_REFDEV_NTH handles (default 8000; an unset, empty or unreadable value
 * gives the default) that each CopyTensors call takes one of and never gives back: call N+1 of
 * the process and every later one fail, and so does every allocation once the pool is dry. */
#define NTH_DEFAULT_HANDLES 8000L
static long g_nth_calls = 0;

static long nth_handles(void) {
  const char* v = getenv("ORT_REFDEV_NTH");
  if (v == NULL || v[0] < '0' || v[0] > '9') return NTH_DEFAULT_HANDLES;
  char* end = NULL;
  errno = 0;
  long n = strtol(v, &end, 10);
  return errno != 0 || *end != '\0' ? NTH_DEFAULT_HANDLES : n;
}

static OrtStatus* nth_refusal(void) {
  long call = __atomic_add_fetch(&g_nth_calls, 1, __ATOMIC_RELAXED);
  long handles = nth_handles();
  if (call <= handles) return NULL;
  return refdev_make_status(ORT_FAIL,
                            "RefDev CopyTensors: fault 'nth': handle pool exhausted: call %ld of this process, the pool "
                            "held %ld handles (ORT_REFDEV_NTH)",
                            call, handles);
}

bool refdev_handle_pool_dry(void) {
  return refdev_current_fault() == FAULT_NTH && __atomic_load_n(&g_nth_calls, __ATOMIC_RELAXED) >= nth_handles();
}

static OrtStatus* ORT_API_CALL dt_copy_tensors(OrtDataTransferImpl* this_ptr, const OrtValue** src_tensors,
                                               OrtValue** dst_tensors, OrtSyncStream** streams,
                                               size_t num_tensors) {
  refdev_data_transfer* dt = (refdev_data_transfer*)this_ptr;
  refdev_factory* f = dt->factory;
  refdev_fault fault = refdev_current_fault();

  if (fault == FAULT_ABORT) {
    fprintf(stderr, "refdev: fault 'abort': CopyTensors calls abort()\n");
    fflush(stderr);
    abort();
  }
  if (fault == FAULT_HANG) {
    fprintf(stderr, "refdev: fault 'hang': CopyTensors never returns\n");
    fflush(stderr);
    for (;;) sleep_ms(1000);
  }
  hold_once();
  OrtStatus* refused = fault == FAULT_AFFINITY ? affinity_refusal() : (fault == FAULT_NTH ? nth_refusal() : NULL);
  if (refused != NULL) return refused;
  if (fault == FAULT_LEAK) leak_per_call(src_tensors, num_tensors);
  bool strikes = intermittent_strikes(fault);
  if (strikes && fault == FAULT_INTERMITTENT_ABORT) intermittent_abort();
  if (num_tensors == 0) return NULL;
  if (src_tensors == NULL || dst_tensors == NULL) {
    return refdev_make_status(ORT_INVALID_ARGUMENT, "RefDev CopyTensors: NULL tensor list");
  }

  copy_job* jobs = (copy_job*)calloc(num_tensors, sizeof *jobs);
  if (jobs == NULL) return refdev_make_status(ORT_FAIL, "RefDev CopyTensors: out of memory");
  OrtStatus* st = NULL;

  /* Validate every pair before touching any destination: a bad request copies nothing. */
  for (size_t i = 0; i < num_tensors && st == NULL; ++i) {
    const OrtValue* s = src_tensors[i];
    OrtValue* d = dst_tensors[i];
    if (s == NULL || d == NULL) {
      st = refdev_make_status(ORT_INVALID_ARGUMENT, "RefDev CopyTensors: tensor pair %zu has a NULL value", i);
      break;
    }
    size_t sbytes = 0, dbytes = 0;
    if ((st = g_ort->GetTensorSizeInBytes(s, &sbytes)) != NULL) break;
    if ((st = g_ort->GetTensorSizeInBytes(d, &dbytes)) != NULL) break;
    if (sbytes != dbytes) {
      st = refdev_make_status(ORT_INVALID_ARGUMENT,
                              "RefDev CopyTensors: size mismatch for tensor pair %zu: source %zu bytes, destination %zu bytes",
                              i, sbytes, dbytes);
      break;
    }
    mem_kind sk = refdev_classify_device(f, g_ep->Value_GetMemoryDevice(s));
    mem_kind dk = refdev_classify_device(f, g_ep->Value_GetMemoryDevice(d));
    if (!can_copy_kinds(sk, dk, fault)) {
      st = refdev_make_status(ORT_NOT_IMPLEMENTED, "RefDev CopyTensors: cannot copy tensor pair %zu from %s to %s memory", i,
                              refdev_kind_name(sk), refdev_kind_name(dk));
      break;
    }
    const void* sp = NULL;
    void* dp = NULL;
    if (sbytes > 0) {
      if ((st = g_ort->GetTensorData(s, &sp)) != NULL) break;
      if ((st = g_ort->GetTensorMutableData(d, &dp)) != NULL) break;
    }
    if ((st = check_pointer(sp, sbytes, sk, i, "source")) != NULL) break;
    if ((st = check_pointer(dp, dbytes, dk, i, "destination")) != NULL) break;
    jobs[i].src = sp;
    jobs[i].dst = dp;
    jobs[i].bytes = sbytes;
    jobs[i].skind = sk;
    jobs[i].dkind = dk;
    if (fault == FAULT_SIZE32) jobs[i].bytes = size32_count(sbytes);
  }
  if (st != NULL) {
    free(jobs);
    return st;
  }

  /* What a copy needs from onnxruntime, the registry and the environment is read now: it may
   * run later, on a stream's thread. */
  bool misread = fault == FAULT_IMPORT_MISREAD;
  for (size_t i = 0; i < num_tensors; ++i) {
    copy_job* j = &jobs[i];
    copy_log(j->skind, j->dkind, j->src, j->dst, j->bytes);
    if (j->bytes == 0) continue;
    j->src_scrambled = j->skind == MEM_DEVICE && !refdev_reg_is_plain(j->src, misread);
    j->dst_scrambled = j->dkind == MEM_DEVICE && !refdev_reg_is_plain(j->dst, misread);
    if (fault == FAULT_OVERRUN && j->skind == MEM_DEVICE && j->dkind == MEM_CPU) {
      /* the element size is the destination tensor's own */
      size_t count = 0;
      OrtTensorTypeAndShapeInfo* info = NULL;
      OrtStatus* ist = g_ort->GetTensorTypeAndShape(dst_tensors[i], &info);
      if (ist == NULL) {
        ist = g_ort->GetTensorShapeElementCount(info, &count);
        g_ort->ReleaseTensorTypeAndShapeInfo(info);
      }
      if (ist != NULL) g_ort->ReleaseStatus(ist);
      j->overrun_element = count > 0 && j->bytes >= count ? j->bytes / count : 1;
    }
  }

  /* One batch per run of pairs that share a stream (onnxruntime gives every pair of a call the
   * same one); all made before any is handed over, so that running out of memory copies nothing. */
  size_t num_batches = 0;
  copy_batch** batches = (copy_batch**)calloc(num_tensors, sizeof *batches);
  if (batches == NULL) st = refdev_make_status(ORT_FAIL, "RefDev CopyTensors: out of memory");
  for (size_t i = 0; i < num_tensors && st == NULL;) {
    size_t k = i + 1;
    while (k < num_tensors && streams != NULL && streams[k] == streams[i]) ++k;
    copy_batch* b = (copy_batch*)calloc(1, sizeof *b + (k - i) * sizeof(copy_job));
    if (b == NULL) {
      st = refdev_make_status(ORT_FAIL, "RefDev CopyTensors: out of memory");
      break;
    }
    b->fault = fault;
    b->clear_first = refdev_copy_clears_first();
    b->strikes = strikes && i == 0;
    b->n = k - i;
    memcpy(b->jobs, &jobs[i], (k - i) * sizeof(copy_job));
    batches[num_batches++] = b;
    i = k;
  }
  if (st == NULL) {
    for (size_t i = 0, first = 0; i < num_batches; ++i) {
      size_t n = batches[i]->n; /* read before the batch is handed over: it may be freed at once */
      refdev_async_copy(streams != NULL ? streams[first] : NULL, perform_copies, stage_cpu_sources, batches[i]);
      first += n;
    }
  } else {
    for (size_t i = 0; i < num_batches; ++i) copy_batch_free(batches[i]);
  }
  free(batches);
  free(jobs);
  return st;
}

static void perform_copies(void* arg, bool abandoned) {
  copy_batch* batch = (copy_batch*)arg;
  copy_job* jobs = batch->jobs;
  size_t num_tensors = batch->n;
  refdev_fault fault = batch->fault;
  for (size_t i = 0; i < num_tensors; ++i) {
    copy_job* j = &jobs[i];
    if (j->bytes == 0) continue;
    /* a copy the caller was told had landed writes no CPU memory: the caller may have freed it
     * (RefDev memory stays allocated until the copy has run: async.c) */
    if (abandoned && j->dkind == MEM_CPU) {
      j->bytes = 0;
      continue;
    }
    size_t n = fault == FAULT_SHORT_COPY ? j->bytes / 2 : j->bytes;
    bool src_scrambled = j->src_scrambled;
    bool dst_scrambled = j->dst_scrambled;
    const unsigned char* sp = (const unsigned char*)j->src;
    unsigned char* dp = (unsigned char*)j->dst;
    /* wrong on purpose where the destination is the source: the bytes are gone before they are read */
    if (batch->clear_first) memset(dp, 0, n);

    if (fault == FAULT_RACE) {
      race_copy(dp, sp, n, src_scrambled != dst_scrambled);
    } else if (src_scrambled == dst_scrambled) {
      memmove(dp, sp, n);
    } else if (sp == dp) {
      for (size_t k = 0; k < n; ++k) dp[k] ^= (unsigned char)REFDEV_KEY;
    } else {
      /* regions of different memory kinds never overlap */
      for (size_t k = 0; k < n; ++k) dp[k] = (unsigned char)(sp[k] ^ REFDEV_KEY);
    }
    if (fault == FAULT_CORRUPT) {
      /* one bit of the middle byte; the bit depends on the direction so that a corrupted
       * CPU->RefDev->CPU round trip does not flip the same bit back */
      unsigned bit = j->skind == MEM_CPU ? 0u : (j->dkind == MEM_CPU ? 1u : (src_scrambled && dst_scrambled ? 2u : 3u));
      dp[j->bytes / 2] ^= (unsigned char)(1u << bit);
    }
    if (fault == FAULT_OVERRUN && j->skind == MEM_DEVICE && j->dkind == MEM_CPU) {
      /* surface-copy: one element more than the destination holds, written past its end
       * (a size taken from the wrong tensor) */
      memset(dp + j->bytes, 0xEE, j->overrun_element);
    }
    if (fault == FAULT_SLOW_D2D && j->skind == MEM_DEVICE && j->dkind == MEM_DEVICE) {
      /* correct bytes, but far slower than a device->CPU->device round trip */
      sleep_ms(20 + (long)(j->bytes >> 16));
    }
  }
  if (batch->strikes && fault == FAULT_INTERMITTENT) intermittent_corrupt(jobs, num_tensors);
  copy_batch_free(batch);
}

static void ORT_API_CALL dt_release(OrtDataTransferImpl* this_ptr) { free(this_ptr); }

OrtStatus* ORT_API_CALL refdev_factory_create_data_transfer(OrtEpFactory* this_ptr,
                                                            OrtDataTransferImpl** data_transfer) {
  refdev_factory* f = (refdev_factory*)this_ptr;
  *data_transfer = NULL;
  if (refdev_current_fault() == FAULT_NO_DATA_TRANSFER) return NULL;
  refdev_data_transfer* dt = (refdev_data_transfer*)calloc(1, sizeof *dt);
  if (dt == NULL) return refdev_make_status(ORT_FAIL, "RefDev: out of memory");
  dt->base.ort_version_supported = ORT_API_VERSION;
  dt->base.Release = dt_release;
  dt->base.CanCopy = dt_can_copy;
  dt->base.CopyTensors = dt_copy_tensors;
  dt->factory = f;
  *data_transfer = &dt->base;
  return NULL;
}
