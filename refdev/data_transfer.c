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

    if (src_scrambled == dst_scrambled) {
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
