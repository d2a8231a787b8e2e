/*
 * RefDev: a reference plugin execution provider for ONNX Runtime with a virtual device.
 *
 * Written against the public C API only (onnxruntime_c_api.h / onnxruntime_ep_c_api.h,
 * ORT_API_VERSION as found in the headers, 23 for onnxruntime 1.23.x). Does not link
 * against onnxruntime: everything comes through the OrtApiBase handed to CreateEpFactories.
 *
 * The virtual device's DEFAULT memory stores every byte XOR-scrambled with REFDEV_KEY, so any
 * code path that reads device memory as if it were host memory sees wrong bytes. Only the data
 * transfer (CopyTensors) and the EP's kernels decode/encode it. HOST_ACCESSIBLE memory (optional)
 * holds plain bytes.
 *
 * Fault modes (ORT_REFDEV_FAULT) each break one contract on purpose; see README.md.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "onnxruntime_c_api.h"

#define REFDEV_EP_NAME "RefDevExecutionProvider"
#define REFDEV_VENDOR "ort-ep-conformance"
#define REFDEV_VERSION "1.0.0"
#define REFDEV_VENDOR_ID 0xC0DEu
#define REFDEV_WRONG_VENDOR_ID 0xBAD0u
#define REFDEV_DEVICE_ID 0
#define REFDEV_MAX_DEVICES 4
#define REFDEV_KEY 0x5Au
#define REFDEV_ALIGN 64u
#define REFDEV_DEFAULT_NAME "RefDev"
#define REFDEV_HOST_NAME "RefDevHost"

#if defined(__GNUC__)
#define REFDEV_EXPORT __attribute__((visibility("default")))
#else
#define REFDEV_EXPORT
#endif

/* ------------------------------------------------------------------------------------------ */
/* Fault modes                                                                                  */
/* ------------------------------------------------------------------------------------------ */

typedef enum {
  FAULT_NONE = 0,
  FAULT_NO_DATA_TRANSFER,
  FAULT_CORRUPT,
  FAULT_SHORT_COPY,
  FAULT_NO_D2D,
  FAULT_NO_D2H,
  FAULT_NO_H2D,
  FAULT_WRONG_MEMORY,
  FAULT_CPU_DEFAULT,
  FAULT_HOST_ACCESSIBLE_INPUTS,
  FAULT_ALLOC_FAIL,
  FAULT_ABORT,
  FAULT_HANG,
  FAULT_SLOW_D2D,
  FAULT_CLAIM_NOTHING,
  FAULT_WRONG_COMPUTE,
  FAULT_UNREGISTER_CRASH,
  FAULT_HOST_ACCESSIBLE_AS_DEVICE,
  FAULT_IMPORT_COPY,
  FAULT_IMPORT_MISREAD,
  FAULT_IMPORT_NO_BOUNDS,
  FAULT_IMPORT_DENIES,
  FAULT_KERNEL_FAILS,
  /* kernel-input placement */
  FAULT_MISPLACED_INPUTS,
  /* guard memory */
  FAULT_OVERRUN,
  /* tries that differ: flaky results, and a crash that does not come back */
  FAULT_INTERMITTENT,
  FAULT_INTERMITTENT_ABORT,
  /* kernels that take empty tensors and cannot run on them */
  FAULT_EMPTY_FAILS,
  FAULT_COUNT_
} refdev_fault;

static const char* const k_fault_names[FAULT_COUNT_] = {
    "none",       "no-data-transfer", "corrupt",    "short-copy",
    "no-d2d",     "no-d2h",           "no-h2d",     "wrong-memory",
    "cpu-default", "host-accessible-inputs", "alloc-fail", "abort",
    "hang",       "slow-d2d",         "claim-nothing", "wrong-compute",
    "unregister-crash", "host-accessible-as-device", "import-copy", "import-misread",
    "import-no-bounds", "import-denies", "kernel-fails",
    "misplaced-inputs",
    "overrun",
    "intermittent", "intermittent-abort",
    "empty-fails",
};

#define REFDEV_FAULT_LIST                                                                    \
  "none, no-data-transfer, corrupt, short-copy, no-d2d, no-d2h, no-h2d, wrong-memory, "      \
  "cpu-default, host-accessible-inputs, alloc-fail, abort, hang, slow-d2d, claim-nothing, "  \
  "wrong-compute, unregister-crash, host-accessible-as-device, import-copy, import-misread, "  \
  "import-no-bounds, import-denies, kernel-fails, misplaced-inputs, overrun, intermittent, "   \
  "intermittent-abort, empty-fails"

/* Parse a fault name. Unset or empty means none. Returns false for an unknown name. */
static bool parse_fault(const char* s, refdev_fault* out) {
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
static refdev_fault g_fault_at_load = FAULT_NONE;

/* Behavioural faults re-read ORT_REFDEV_FAULT on each call; an unknown value at that point
 * falls back to the value read at registration. */
static refdev_fault current_fault(void) {
  refdev_fault f;
  if (parse_fault(getenv("ORT_REFDEV_FAULT"), &f)) return f;
  return g_fault_at_load;
}

static bool env_flag(const char* name) {
  const char* v = getenv(name);
  return v != NULL && strcmp(v, "1") == 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Globals                                                                                      */
/* ------------------------------------------------------------------------------------------ */

static const OrtApi* g_ort = NULL;
static const OrtEpApi* g_ep = NULL;

static OrtStatus* make_status(OrtErrorCode code, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));

static OrtStatus* make_status(OrtErrorCode code, const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return g_ort->CreateStatus(code, buf);
}

#define RETURN_IF_STATUS(expr)       \
  do {                               \
    OrtStatus* st_ = (expr);         \
    if (st_ != NULL) return st_;     \
  } while (0)

/* ------------------------------------------------------------------------------------------ */
/* Registry of live allocations                                                                 */
/* ------------------------------------------------------------------------------------------ */

typedef enum { MEM_UNKNOWN = 0, MEM_CPU, MEM_DEVICE, MEM_HOST } mem_kind;

typedef struct alloc_entry {
  uintptr_t base;
  size_t size;
  mem_kind kind;
  bool plain; /* imported memory: plain bytes even where the kind is RefDev (see "Imports") */
  struct alloc_entry* next;
} alloc_entry;

static pthread_mutex_t g_reg_lock = PTHREAD_MUTEX_INITIALIZER;
static alloc_entry* g_reg_head = NULL;

static void reg_add_as(void* p, size_t size, mem_kind kind, bool plain) {
  alloc_entry* e = (alloc_entry*)malloc(sizeof *e);
  if (e == NULL) return;
  e->base = (uintptr_t)p;
  e->size = size;
  e->kind = kind;
  e->plain = plain;
  pthread_mutex_lock(&g_reg_lock);
  e->next = g_reg_head;
  g_reg_head = e;
  pthread_mutex_unlock(&g_reg_lock);
}

static void reg_add(void* p, size_t size, mem_kind kind) { reg_add_as(p, size, kind, false); }

/* Removes p; returns false if p was not a live allocation. */
static bool reg_remove(void* p) {
  bool found = false;
  pthread_mutex_lock(&g_reg_lock);
  for (alloc_entry** pp = &g_reg_head; *pp != NULL; pp = &(*pp)->next) {
    if ((*pp)->base == (uintptr_t)p) {
      alloc_entry* e = *pp;
      *pp = e->next;
      free(e);
      found = true;
      break;
    }
  }
  pthread_mutex_unlock(&g_reg_lock);
  return found;
}

/* Finds the live allocation containing [p, p+len). Returns its kind or MEM_UNKNOWN. On a
 * pointer inside an allocation whose range is too short, *out_of_bounds is set. */
static mem_kind reg_lookup(const void* p, size_t len, bool* out_of_bounds) {
  mem_kind kind = MEM_UNKNOWN;
  uintptr_t a = (uintptr_t)p;
  *out_of_bounds = false;
  pthread_mutex_lock(&g_reg_lock);
  for (alloc_entry* e = g_reg_head; e != NULL; e = e->next) {
    /* an allocation of size 0 still owns its base address */
    if (a >= e->base && (a < e->base + e->size || a == e->base)) {
      kind = e->kind;
      if (len > e->size - (size_t)(a - e->base)) *out_of_bounds = true;
      break;
    }
  }
  pthread_mutex_unlock(&g_reg_lock);
  return kind;
}

/* Whether the bytes at p are stored as they are: CPU and RefDevHost memory, and imported memory
 * (the producer wrote plain bytes), unless import-misread reads imports as RefDev's format. */
static bool reg_is_plain(const void* p, bool fault_misread) {
  bool plain = false;
  uintptr_t a = (uintptr_t)p;
  pthread_mutex_lock(&g_reg_lock);
  for (alloc_entry* e = g_reg_head; e != NULL; e = e->next) {
    if (a >= e->base && (a < e->base + e->size || a == e->base)) {
      plain = e->plain && !fault_misread;
      break;
    }
  }
  pthread_mutex_unlock(&g_reg_lock);
  return plain;
}

/* ------------------------------------------------------------------------------------------ */
/* Factory                                                                                      */
/* ------------------------------------------------------------------------------------------ */

typedef struct refdev_factory {
  OrtEpFactory base;
  const OrtLogger* logger;
  char registered_name[128];
  refdev_fault fault;                 /* at registration */
  bool host_enabled;                  /* a HOST_ACCESSIBLE memory info is advertised */
  size_t num_devices;                 /* virtual devices, ORT_REFDEV_DEVICES (default 1) */
  OrtMemoryInfo* default_infos[REFDEV_MAX_DEVICES]; /* "RefDev" DEFAULT, device id = index */
  OrtMemoryInfo* host_info;           /* "RefDevHost" HOST_ACCESSIBLE, or NULL */
  uint32_t default_vendor;            /* vendor id in default_infos */
  OrtMemoryInfoDeviceType default_type;
  bool import_host;                   /* imported tensors report HOST_ACCESSIBLE memory ("RefDevHost") */
} refdev_factory;

/* ------------------------------------------------------------------------------------------ */
/* Memory classification                                                                        */
/* ------------------------------------------------------------------------------------------ */

static mem_kind classify_device(const refdev_factory* f, const OrtMemoryDevice* d) {
  if (d == NULL) return MEM_UNKNOWN;
  OrtMemoryInfoDeviceType type = g_ep->MemoryDevice_GetDeviceType(d);
  OrtDeviceMemoryType mtype = g_ep->MemoryDevice_GetMemoryType(d);
  uint32_t vendor = g_ep->MemoryDevice_GetVendorId(d);
  uint32_t dev_id = g_ep->MemoryDevice_GetDeviceId(d);

  if (mtype == OrtDeviceMemoryType_DEFAULT && type == f->default_type && vendor == f->default_vendor &&
      dev_id < f->num_devices) {
    return MEM_DEVICE;
  }
  if ((f->host_enabled || f->import_host) && mtype == OrtDeviceMemoryType_HOST_ACCESSIBLE && vendor == REFDEV_VENDOR_ID &&
      type == OrtMemoryInfoDeviceType_GPU && dev_id == REFDEV_DEVICE_ID) {
    return MEM_HOST;
  }
  if (type == OrtMemoryInfoDeviceType_CPU && mtype == OrtDeviceMemoryType_DEFAULT) {
    return MEM_CPU;
  }
  return MEM_UNKNOWN;
}

static const char* kind_name(mem_kind k) {
  switch (k) {
    case MEM_CPU: return "CPU";
    case MEM_DEVICE: return "RefDev";
    case MEM_HOST: return "RefDevHost";
    default: return "unknown";
  }
}

/* ------------------------------------------------------------------------------------------ */
/* Allocator                                                                                    */
/* ------------------------------------------------------------------------------------------ */

typedef struct refdev_allocator {
  OrtAllocator base;
  const OrtMemoryInfo* info; /* owned by the factory */
  mem_kind kind;
  pthread_mutex_t lock;
  size_t in_use;
  size_t num_allocs;
  size_t max_in_use;
} refdev_allocator;

static void* ORT_API_CALL alloc_impl(OrtAllocator* this_, size_t size) {
  refdev_allocator* a = (refdev_allocator*)this_;
  if (a->kind == MEM_DEVICE && current_fault() == FAULT_ALLOC_FAIL) return NULL;

  size_t rounded = (size + REFDEV_ALIGN - 1) / REFDEV_ALIGN * REFDEV_ALIGN;
  if (rounded == 0) rounded = REFDEV_ALIGN;
  void* p = aligned_alloc(REFDEV_ALIGN, rounded);
  if (p == NULL) return NULL;
  /* Fresh device memory holds scrambled zeros, fresh host memory plain zeros. */
  memset(p, a->kind == MEM_DEVICE ? (int)REFDEV_KEY : 0, rounded);
  reg_add(p, size, a->kind);

  pthread_mutex_lock(&a->lock);
  a->in_use += size;
  a->num_allocs += 1;
  if (a->in_use > a->max_in_use) a->max_in_use = a->in_use;
  pthread_mutex_unlock(&a->lock);
  return p;
}

static void ORT_API_CALL free_impl(OrtAllocator* this_, void* p) {
  refdev_allocator* a = (refdev_allocator*)this_;
  if (p == NULL) return;
  uintptr_t base = (uintptr_t)p;
  size_t size = 0;
  pthread_mutex_lock(&g_reg_lock);
  for (alloc_entry* e = g_reg_head; e != NULL; e = e->next) {
    if (e->base == base) {
      size = e->size;
      break;
    }
  }
  pthread_mutex_unlock(&g_reg_lock);
  if (!reg_remove(p)) {
    fprintf(stderr, "refdev: Free of %p which is not a live RefDev allocation (ignored)\n", p);
    return;
  }
  pthread_mutex_lock(&a->lock);
  a->in_use -= size <= a->in_use ? size : a->in_use;
  pthread_mutex_unlock(&a->lock);
  free(p);
}

static const OrtMemoryInfo* ORT_API_CALL info_impl(const OrtAllocator* this_) {
  const refdev_allocator* a = (const refdev_allocator*)this_;
  return a->info;
}

static void* ORT_API_CALL reserve_impl(OrtAllocator* this_, size_t size) { return alloc_impl(this_, size); }

static void* ORT_API_CALL alloc_on_stream_impl(OrtAllocator* this_, size_t size, OrtSyncStream* stream) {
  (void)stream; /* the virtual device is synchronous */
  return alloc_impl(this_, size);
}

static OrtStatus* ORT_API_CALL get_stats_impl(const OrtAllocator* this_, OrtKeyValuePairs** out) {
  refdev_allocator* a = (refdev_allocator*)this_;
  char buf[32];
  g_ort->CreateKeyValuePairs(out);
  pthread_mutex_lock(&a->lock);
  snprintf(buf, sizeof buf, "%zu", a->in_use);
  g_ort->AddKeyValuePair(*out, "InUse", buf);
  snprintf(buf, sizeof buf, "%zu", a->num_allocs);
  g_ort->AddKeyValuePair(*out, "NumAllocs", buf);
  snprintf(buf, sizeof buf, "%zu", a->max_in_use);
  g_ort->AddKeyValuePair(*out, "MaxInUse", buf);
  pthread_mutex_unlock(&a->lock);
  return NULL;
}

static OrtStatus* ORT_API_CALL factory_create_allocator(OrtEpFactory* this_ptr, const OrtMemoryInfo* memory_info,
                                                        const OrtKeyValuePairs* allocator_options,
                                                        OrtAllocator** allocator) {
  refdev_factory* f = (refdev_factory*)this_ptr;
  (void)allocator_options;
  *allocator = NULL;
  if (memory_info == NULL) {
    return make_status(ORT_INVALID_ARGUMENT, "RefDev: CreateAllocator needs a memory info");
  }
  mem_kind kind = classify_device(f, g_ep->MemoryInfo_GetMemoryDevice(memory_info));
  const OrtMemoryInfo* own_info = NULL;
  if (kind == MEM_DEVICE) {
    own_info = f->default_infos[g_ep->MemoryDevice_GetDeviceId(g_ep->MemoryInfo_GetMemoryDevice(memory_info))];
    /* host-accessible-inputs: the DEFAULT allocator describes itself with the HOST_ACCESSIBLE
     * memory info, so values it allocates (session inputs among them) report that memory. */
    if (f->fault == FAULT_HOST_ACCESSIBLE_INPUTS && f->host_info != NULL) own_info = f->host_info;
  } else if (kind == MEM_HOST) {
    own_info = f->host_info;
  } else {
    const char* name = "?";
    OrtStatus* nst = g_ort->MemoryInfoGetName(memory_info, &name);
    if (nst != NULL) g_ort->ReleaseStatus(nst);
    return make_status(ORT_INVALID_ARGUMENT, "RefDev: no allocator for memory info '%s'", name);
  }

  refdev_allocator* a = (refdev_allocator*)calloc(1, sizeof *a);
  if (a == NULL) return make_status(ORT_FAIL, "RefDev: out of memory");
  a->base.version = ORT_API_VERSION;
  a->base.Alloc = alloc_impl;
  a->base.Free = free_impl;
  a->base.Info = info_impl;
  a->base.Reserve = reserve_impl;
  a->base.GetStats = get_stats_impl;
  a->base.AllocOnStream = alloc_on_stream_impl;
  a->info = own_info;
  a->kind = kind;
  pthread_mutex_init(&a->lock, NULL);
  *allocator = &a->base;
  return NULL;
}

static void ORT_API_CALL factory_release_allocator(OrtEpFactory* this_ptr, OrtAllocator* allocator) {
  (void)this_ptr;
  if (allocator == NULL) return;
  refdev_allocator* a = (refdev_allocator*)allocator;
  pthread_mutex_destroy(&a->lock);
  free(a);
}

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
  mem_kind s = classify_device(dt->factory, src);
  mem_kind d = classify_device(dt->factory, dst);
  return can_copy_kinds(s, d, current_fault());
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
} copy_job;

static OrtStatus* check_pointer(const void* p, size_t bytes, mem_kind kind, size_t index, const char* role) {
  if (kind != MEM_DEVICE && kind != MEM_HOST) return NULL; /* CPU memory is not ours to track */
  if (bytes == 0) return NULL;
  bool oob = false;
  mem_kind found = reg_lookup(p, bytes, &oob);
  if (found == MEM_UNKNOWN) {
    return make_status(ORT_INVALID_ARGUMENT,
                       "RefDev CopyTensors: %s tensor %zu claims %s memory but %p is not a live RefDev allocation",
                       role, index, kind_name(kind), p);
  }
  if (found != kind) {
    return make_status(ORT_INVALID_ARGUMENT,
                       "RefDev CopyTensors: %s tensor %zu claims %s memory but %p was allocated as %s", role, index,
                       kind_name(kind), p, kind_name(found));
  }
  if (oob) {
    return make_status(ORT_INVALID_ARGUMENT,
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
  fprintf(log, "%s %s %zu %d %d %p %p\n", kind_name(sk), kind_name(dk), bytes, sk != MEM_CPU && reg_is_plain(src, false) ? 1 : 0,
          dk != MEM_CPU && reg_is_plain(dst, false) ? 1 : 0, src, dst);
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
  refdev_fault fault = current_fault();
  (void)streams; /* all work is synchronous */

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
    return make_status(ORT_INVALID_ARGUMENT, "RefDev CopyTensors: NULL tensor list");
  }

  copy_job* jobs = (copy_job*)calloc(num_tensors, sizeof *jobs);
  if (jobs == NULL) return make_status(ORT_FAIL, "RefDev CopyTensors: out of memory");
  OrtStatus* st = NULL;

  /* Validate every pair before touching any destination: a bad request copies nothing. */
  for (size_t i = 0; i < num_tensors && st == NULL; ++i) {
    const OrtValue* s = src_tensors[i];
    OrtValue* d = dst_tensors[i];
    if (s == NULL || d == NULL) {
      st = make_status(ORT_INVALID_ARGUMENT, "RefDev CopyTensors: tensor pair %zu has a NULL value", i);
      break;
    }
    size_t sbytes = 0, dbytes = 0;
    if ((st = g_ort->GetTensorSizeInBytes(s, &sbytes)) != NULL) break;
    if ((st = g_ort->GetTensorSizeInBytes(d, &dbytes)) != NULL) break;
    if (sbytes != dbytes) {
      st = make_status(ORT_INVALID_ARGUMENT,
                       "RefDev CopyTensors: size mismatch for tensor pair %zu: source %zu bytes, destination %zu bytes",
                       i, sbytes, dbytes);
      break;
    }
    mem_kind sk = classify_device(f, g_ep->Value_GetMemoryDevice(s));
    mem_kind dk = classify_device(f, g_ep->Value_GetMemoryDevice(d));
    if (!can_copy_kinds(sk, dk, fault)) {
      st = make_status(ORT_NOT_IMPLEMENTED, "RefDev CopyTensors: cannot copy tensor pair %zu from %s to %s memory", i,
                       kind_name(sk), kind_name(dk));
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

  for (size_t i = 0; i < num_tensors; ++i) {
    copy_job* j = &jobs[i];
    copy_log(j->skind, j->dkind, j->src, j->dst, j->bytes);
    if (j->bytes == 0) continue;
    size_t n = fault == FAULT_SHORT_COPY ? j->bytes / 2 : j->bytes;
    bool misread = fault == FAULT_IMPORT_MISREAD;
    bool src_scrambled = j->skind == MEM_DEVICE && !reg_is_plain(j->src, misread);
    bool dst_scrambled = j->dkind == MEM_DEVICE && !reg_is_plain(j->dst, misread);
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
       * (a size taken from the wrong tensor); the element size is the tensor's own */
      size_t count = 0;
      OrtTensorTypeAndShapeInfo* info = NULL;
      OrtStatus* ist = g_ort->GetTensorTypeAndShape(dst_tensors[i], &info);
      if (ist == NULL) {
        ist = g_ort->GetTensorShapeElementCount(info, &count);
        g_ort->ReleaseTensorTypeAndShapeInfo(info);
      }
      if (ist != NULL) g_ort->ReleaseStatus(ist);
      size_t element = count > 0 && j->bytes >= count ? j->bytes / count : 1;
      memset(dp + j->bytes, 0xEE, element);
    }
    if (fault == FAULT_SLOW_D2D && j->skind == MEM_DEVICE && j->dkind == MEM_DEVICE) {
      /* correct bytes, but far slower than a device->CPU->device round trip */
      sleep_ms(20 + (long)(j->bytes >> 16));
    }
  }
  if (strikes && fault == FAULT_INTERMITTENT) intermittent_corrupt(jobs, num_tensors);
  free(jobs);
  return NULL;
}

static void ORT_API_CALL dt_release(OrtDataTransferImpl* this_ptr) { free(this_ptr); }

static OrtStatus* ORT_API_CALL factory_create_data_transfer(OrtEpFactory* this_ptr,
                                                            OrtDataTransferImpl** data_transfer) {
  refdev_factory* f = (refdev_factory*)this_ptr;
  *data_transfer = NULL;
  if (current_fault() == FAULT_NO_DATA_TRANSFER) return NULL;
  refdev_data_transfer* dt = (refdev_data_transfer*)calloc(1, sizeof *dt);
  if (dt == NULL) return make_status(ORT_FAIL, "RefDev: out of memory");
  dt->base.ort_version_supported = ORT_API_VERSION;
  dt->base.Release = dt_release;
  dt->base.CanCopy = dt_can_copy;
  dt->base.CopyTensors = dt_copy_tensors;
  dt->factory = f;
  *data_transfer = &dt->base;
  return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* Streams: the virtual device is synchronous, so a stream and its notifications are no-ops.    */
/* ------------------------------------------------------------------------------------------ */

typedef struct refdev_notification {
  OrtSyncNotificationImpl base;
} refdev_notification;

static void ORT_API_CALL notif_release(OrtSyncNotificationImpl* this_ptr) { free(this_ptr); }
static OrtStatus* ORT_API_CALL notif_activate(OrtSyncNotificationImpl* this_ptr) {
  (void)this_ptr;
  return NULL;
}
static OrtStatus* ORT_API_CALL notif_wait_on_device(OrtSyncNotificationImpl* this_ptr, OrtSyncStream* consumer) {
  (void)this_ptr;
  (void)consumer;
  return NULL;
}
static OrtStatus* ORT_API_CALL notif_wait_on_host(OrtSyncNotificationImpl* this_ptr) {
  (void)this_ptr;
  return NULL;
}

typedef struct refdev_stream {
  OrtSyncStreamImpl base;
  int handle; /* address used as the opaque native handle */
} refdev_stream;

static void ORT_API_CALL stream_release(OrtSyncStreamImpl* this_ptr) { free(this_ptr); }
static void* ORT_API_CALL stream_get_handle(OrtSyncStreamImpl* this_ptr) {
  return &((refdev_stream*)this_ptr)->handle;
}
static OrtStatus* ORT_API_CALL stream_create_notification(OrtSyncStreamImpl* this_ptr,
                                                          OrtSyncNotificationImpl** notification) {
  (void)this_ptr;
  refdev_notification* n = (refdev_notification*)calloc(1, sizeof *n);
  if (n == NULL) return make_status(ORT_FAIL, "RefDev: out of memory");
  n->base.ort_version_supported = ORT_API_VERSION;
  n->base.Release = notif_release;
  n->base.Activate = notif_activate;
  n->base.WaitOnDevice = notif_wait_on_device;
  n->base.WaitOnHost = notif_wait_on_host;
  *notification = &n->base;
  return NULL;
}
static OrtStatus* ORT_API_CALL stream_flush(OrtSyncStreamImpl* this_ptr) {
  (void)this_ptr;
  return NULL;
}
static OrtStatus* ORT_API_CALL stream_on_session_run_end(OrtSyncStreamImpl* this_ptr) {
  (void)this_ptr;
  return NULL;
}

static bool ORT_API_CALL factory_is_stream_aware(const OrtEpFactory* this_ptr) {
  (void)this_ptr;
  return true;
}

static OrtStatus* ORT_API_CALL factory_create_sync_stream(OrtEpFactory* this_ptr, const OrtMemoryDevice* memory_device,
                                                          const OrtKeyValuePairs* stream_options,
                                                          OrtSyncStreamImpl** stream) {
  refdev_factory* f = (refdev_factory*)this_ptr;
  (void)stream_options;
  *stream = NULL;
  mem_kind k = classify_device(f, memory_device);
  if (k != MEM_DEVICE) {
    return make_status(ORT_INVALID_ARGUMENT, "RefDev: streams exist only for RefDev DEFAULT memory, not %s",
                       kind_name(k));
  }
  refdev_stream* s = (refdev_stream*)calloc(1, sizeof *s);
  if (s == NULL) return make_status(ORT_FAIL, "RefDev: out of memory");
  s->base.ort_version_supported = ORT_API_VERSION;
  s->base.Release = stream_release;
  s->base.GetHandle = stream_get_handle;
  s->base.CreateNotification = stream_create_notification;
  s->base.Flush = stream_flush;
  s->base.OnSessionRunEnd = stream_on_session_run_end;
  *stream = &s->base;
  return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* The EP: GetCapability, Compile, kernels                                                      */
/* ------------------------------------------------------------------------------------------ */

typedef enum { OP_ADD = 1, OP_RELU = 2 } refdev_op;

typedef struct refdev_ep {
  OrtEp base;
  refdev_factory* factory;
  const OrtLogger* logger;
} refdev_ep;

typedef struct refdev_compute_info {
  OrtNodeComputeInfo base;
  refdev_ep* ep;
  refdev_op op;
  char name[256];
} refdev_compute_info;

static const char* ORT_API_CALL ep_get_name(const OrtEp* this_ptr) {
  (void)this_ptr;
  return REFDEV_EP_NAME;
}

#define REFDEV_MAX_RANK 16

/* Reads a value info's tensor element type and static shape. rank = -1: not a tensor or no
 * shape. Dims < 0 are dynamic. */
static OrtStatus* value_info_tensor(const OrtValueInfo* vi, ONNXTensorElementDataType* elem, int* rank,
                                    int64_t dims[REFDEV_MAX_RANK]) {
  *elem = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
  *rank = -1;
  if (vi == NULL) return NULL;
  const OrtTypeInfo* ti = NULL;
  RETURN_IF_STATUS(g_ort->GetValueInfoTypeInfo(vi, &ti));
  if (ti == NULL) return NULL;
  const OrtTensorTypeAndShapeInfo* tsi = NULL;
  RETURN_IF_STATUS(g_ort->CastTypeInfoToTensorInfo(ti, &tsi));
  if (tsi == NULL) return NULL;
  RETURN_IF_STATUS(g_ort->GetTensorElementType(tsi, elem));
  size_t n = 0;
  RETURN_IF_STATUS(g_ort->GetDimensionsCount(tsi, &n));
  if (n > REFDEV_MAX_RANK) return NULL;
  RETURN_IF_STATUS(g_ort->GetDimensions(tsi, dims, n));
  *rank = (int)n;
  return NULL;
}

/* Narrow mode: ORT_REFDEV_OPS names the ops the EP takes, comma-separated (e.g. "Relu"), as an
 * NPU takes only some operators; unset or empty, it takes every op it implements. Read on each
 * GetCapability, so that a session made after the variable changes sees the new set. */
#define REFDEV_OPS_ENV "ORT_REFDEV_OPS"

static bool op_enabled(const char* op) {
  const char* list = getenv(REFDEV_OPS_ENV);
  if (list == NULL || list[0] == '\0') return true;
  size_t len = strlen(op);
  for (const char* p = list; *p != '\0';) {
    const char* end = strchr(p, ',');
    size_t n = end != NULL ? (size_t)(end - p) : strlen(p);
    if (n == len && strncmp(p, op, len) == 0) return true;
    if (end == NULL) break;
    p = end + 1;
  }
  return false;
}

/* Decides whether a node is one the EP runs. */
static OrtStatus* node_supported(const OrtNode* node, bool* ok) {
  *ok = false;
  const char* op = NULL;
  const char* domain = NULL;
  RETURN_IF_STATUS(g_ort->Node_GetOperatorType(node, &op));
  RETURN_IF_STATUS(g_ort->Node_GetDomain(node, &domain));
  if (domain != NULL && domain[0] != '\0' && strcmp(domain, "ai.onnx") != 0) return NULL;
  size_t want_inputs;
  if (strcmp(op, "Add") == 0) {
    want_inputs = 2;
  } else if (strcmp(op, "Relu") == 0) {
    want_inputs = 1;
  } else {
    return NULL;
  }
  if (!op_enabled(op)) return NULL;
  size_t nin = 0, nout = 0;
  RETURN_IF_STATUS(g_ort->Node_GetNumInputs(node, &nin));
  RETURN_IF_STATUS(g_ort->Node_GetNumOutputs(node, &nout));
  if (nin != want_inputs || nout != 1) return NULL;

  const OrtValueInfo* ins[2] = {NULL, NULL};
  const OrtValueInfo* outs[1] = {NULL};
  RETURN_IF_STATUS(g_ort->Node_GetInputs(node, ins, nin));
  RETURN_IF_STATUS(g_ort->Node_GetOutputs(node, outs, nout));

  ONNXTensorElementDataType et[3];
  int rank[3];
  int64_t dims[3][REFDEV_MAX_RANK];
  size_t nvals = nin + 1;
  for (size_t i = 0; i < nin; ++i) RETURN_IF_STATUS(value_info_tensor(ins[i], &et[i], &rank[i], dims[i]));
  RETURN_IF_STATUS(value_info_tensor(outs[0], &et[nin], &rank[nin], dims[nin]));
  for (size_t i = 0; i < nvals; ++i) {
    if (et[i] != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT) return NULL;
  }
  if (want_inputs == 2) {
    /* Add: equal, fully static shapes only (no broadcasting) */
    if (rank[0] < 0 || rank[0] != rank[1]) return NULL;
    for (int d = 0; d < rank[0]; ++d) {
      if (dims[0][d] < 0 || dims[0][d] != dims[1][d]) return NULL;
    }
  }
  *ok = true;
  return NULL;
}

static OrtStatus* ORT_API_CALL ep_get_capability(OrtEp* this_ptr, const OrtGraph* graph,
                                                 OrtEpGraphSupportInfo* graph_support_info) {
  (void)this_ptr;
  if (current_fault() == FAULT_CLAIM_NOTHING) return NULL;
  size_t num_nodes = 0;
  RETURN_IF_STATUS(g_ort->Graph_GetNumNodes(graph, &num_nodes));
  if (num_nodes == 0) return NULL;
  const OrtNode** nodes = (const OrtNode**)calloc(num_nodes, sizeof *nodes);
  if (nodes == NULL) return make_status(ORT_FAIL, "RefDev: out of memory");
  OrtStatus* st = g_ort->Graph_GetNodes(graph, nodes, num_nodes);
  OrtNodeFusionOptions opts;
  memset(&opts, 0, sizeof opts);
  opts.ort_version_supported = ORT_API_VERSION;
  opts.drop_constant_initializers = false;
  for (size_t i = 0; i < num_nodes && st == NULL; ++i) {
    bool ok = false;
    st = node_supported(nodes[i], &ok);
    if (st == NULL && ok) {
      /* one compiled partition per node: every value between two RefDev nodes stays on RefDev */
      st = g_ep->EpGraphSupportInfo_AddNodesToFuse(graph_support_info, &nodes[i], 1, &opts);
    }
  }
  free(nodes);
  return st;
}

static OrtStatus* ORT_API_CALL ci_create_state(OrtNodeComputeInfo* this_ptr, OrtNodeComputeContext* ctx,
                                               void** state) {
  (void)ctx;
  *state = this_ptr;
  return NULL;
}

static void ORT_API_CALL ci_release_state(OrtNodeComputeInfo* this_ptr, void* state) {
  (void)this_ptr;
  (void)state;
}

/* A kernel input or output: shape, element count, and a host copy of the true values. */
typedef struct tensor_view {
  size_t count;
  size_t rank;
  int64_t dims[REFDEV_MAX_RANK];
  mem_kind kind;
} tensor_view;

static OrtStatus* view_of(refdev_factory* f, const OrtValue* v, tensor_view* tv, const char* what) {
  OrtTensorTypeAndShapeInfo* tsi = NULL;
  RETURN_IF_STATUS(g_ort->GetTensorTypeAndShape(v, &tsi));
  ONNXTensorElementDataType et = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
  OrtStatus* st = g_ort->GetTensorElementType(tsi, &et);
  if (st == NULL) st = g_ort->GetTensorShapeElementCount(tsi, &tv->count);
  if (st == NULL) st = g_ort->GetDimensionsCount(tsi, &tv->rank);
  if (st == NULL && tv->rank > REFDEV_MAX_RANK) st = make_status(ORT_EP_FAIL, "RefDev: %s has rank > 16", what);
  if (st == NULL) st = g_ort->GetDimensions(tsi, tv->dims, tv->rank);
  g_ort->ReleaseTensorTypeAndShapeInfo(tsi);
  if (st != NULL) return st;
  if (et != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT) {
    return make_status(ORT_EP_FAIL, "RefDev: %s is not float32 (element type %d)", what, (int)et);
  }
  tv->kind = classify_device(f, g_ep->Value_GetMemoryDevice(v));
  if (tv->kind == MEM_UNKNOWN) {
    return make_status(ORT_EP_FAIL, "RefDev: %s lives on memory the EP cannot read", what);
  }
  return NULL;
}

/* Whether a kernel reads and writes memory of `kind` in the device's scrambled format.
 * onnxruntime hands the kernels HOST_ACCESSIBLE inputs and bound outputs as they are (no copy);
 * host-accessible-as-device treats them as device memory, so the EP misreads what the CPU wrote
 * there and leaves scrambled results where the CPU reads them. Copies stay right. */
static bool kernel_sees_device_format(mem_kind kind, const void* p) {
  refdev_fault fault = current_fault();
  if (kind == MEM_DEVICE) return !reg_is_plain(p, fault == FAULT_IMPORT_MISREAD);
  if (kind == MEM_HOST && fault == FAULT_IMPORT_MISREAD && reg_is_plain(p, false)) return true;
  return kind == MEM_HOST && fault == FAULT_HOST_ACCESSIBLE_AS_DEVICE;
}

/* Copies true float values out of (possibly scrambled) memory. */
static void decode(const void* src, mem_kind kind, float* out, size_t count) {
  size_t bytes = count * sizeof(float);
  memcpy(out, src, bytes);
  if (kernel_sees_device_format(kind, src)) {
    unsigned char* b = (unsigned char*)out;
    for (size_t i = 0; i < bytes; ++i) b[i] ^= (unsigned char)REFDEV_KEY;
  }
}

static void encode(const float* in, mem_kind kind, void* dst, size_t count) {
  size_t bytes = count * sizeof(float);
  memcpy(dst, in, bytes);
  if (kernel_sees_device_format(kind, dst)) {
    unsigned char* b = (unsigned char*)dst;
    for (size_t i = 0; i < bytes; ++i) b[i] ^= (unsigned char)REFDEV_KEY;
  }
}

/* Placement record: with ORT_REFDEV_INPUT_LOG naming a file, every kernel call
 * appends one line per input, `<node> <input index> <device type> <memory type> <vendor id>`,
 * the memory device onnxruntime handed the kernel (Value_GetMemoryDevice). A file, because the
 * kit's check runs in the process that loaded the library and reads it back after the run: no
 * change to the model (a custom op's output would be a node of its own, placed by onnxruntime
 * like any other) and no new API. The variable is read on every call, so a check sets it only
 * around its own run. misplaced-inputs records input 0 as plain CPU memory: what a kernel would
 * see had onnxruntime handed it CPU memory where the EP declared its DEFAULT memory. */
#define REFDEV_INPUT_LOG_ENV "ORT_REFDEV_INPUT_LOG"

static void log_input_placement(const char* node, size_t index, const OrtValue* v) {
  const char* path = getenv(REFDEV_INPUT_LOG_ENV);
  if (path == NULL || path[0] == '\0') return;
  const OrtMemoryDevice* d = g_ep->Value_GetMemoryDevice(v);
  const char* type = "unknown";
  const char* mtype = "unknown";
  uint32_t vendor = 0;
  if (d != NULL) {
    switch (g_ep->MemoryDevice_GetDeviceType(d)) {
      case OrtMemoryInfoDeviceType_CPU: type = "cpu"; break;
      case OrtMemoryInfoDeviceType_GPU: type = "gpu"; break;
      case OrtMemoryInfoDeviceType_NPU: type = "npu"; break;
      case OrtMemoryInfoDeviceType_FPGA: type = "fpga"; break;
      default: break;
    }
    mtype = g_ep->MemoryDevice_GetMemoryType(d) == OrtDeviceMemoryType_HOST_ACCESSIBLE ? "host_accessible" : "default";
    vendor = g_ep->MemoryDevice_GetVendorId(d);
  }
  if (index == 0 && current_fault() == FAULT_MISPLACED_INPUTS) {
    type = "cpu";
    mtype = "default";
    vendor = 0;
  }
  FILE* log = fopen(path, "a");
  if (log == NULL) return;
  fprintf(log, "%s %zu %s %s 0x%X\n", node, index, type, mtype, (unsigned)vendor);
  fclose(log);
}

static OrtStatus* ORT_API_CALL ci_compute(OrtNodeComputeInfo* this_ptr, void* state, OrtKernelContext* kctx) {
  (void)state;
  refdev_compute_info* ci = (refdev_compute_info*)this_ptr;
  refdev_factory* f = ci->ep->factory;
  /* kernel-fails: ORT_EP_FAIL is the status Python's InferenceSession.run answers by rerunning
   * the model on the CPU EP, unless the session's fallback is disabled. */
  if (current_fault() == FAULT_KERNEL_FAILS) {
    return make_status(ORT_EP_FAIL, "RefDev %s: fault 'kernel-fails': the kernel fails on purpose", ci->name);
  }
  size_t nin = 0, nout = 0;
  RETURN_IF_STATUS(g_ort->KernelContext_GetInputCount(kctx, &nin));
  RETURN_IF_STATUS(g_ort->KernelContext_GetOutputCount(kctx, &nout));
  size_t want = ci->op == OP_ADD ? 2 : 1;
  if (nin != want || nout != 1) {
    return make_status(ORT_EP_FAIL, "RefDev %s: expected %zu inputs and 1 output, got %zu and %zu", ci->name, want,
                       nin, nout);
  }
  const OrtValue* in[2] = {NULL, NULL};
  tensor_view tv[2];
  for (size_t i = 0; i < nin; ++i) {
    RETURN_IF_STATUS(g_ort->KernelContext_GetInput(kctx, i, &in[i]));
    if (in[i] == NULL) return make_status(ORT_EP_FAIL, "RefDev %s: missing input %zu", ci->name, i);
    RETURN_IF_STATUS(view_of(f, in[i], &tv[i], "input"));
    log_input_placement(ci->name, i, in[i]);
    /* empty-fails: the node was taken (GetCapability claims empty shapes as any other), and its
     * kernel fails on an input with a zero-sized dimension instead of giving the empty output. */
    if (tv[i].count == 0 && current_fault() == FAULT_EMPTY_FAILS) {
      return make_status(ORT_EP_FAIL, "RefDev %s: fault 'empty-fails': input %zu has no elements", ci->name, i);
    }
  }
  if (ci->op == OP_ADD) {
    bool same = tv[0].rank == tv[1].rank;
    for (size_t d = 0; same && d < tv[0].rank; ++d) same = tv[0].dims[d] == tv[1].dims[d];
    if (!same) return make_status(ORT_EP_FAIL, "RefDev %s: Add needs equal input shapes", ci->name);
  }

  OrtValue* out = NULL;
  RETURN_IF_STATUS(g_ort->KernelContext_GetOutput(kctx, 0, tv[0].dims, tv[0].rank, &out));
  tensor_view ov;
  RETURN_IF_STATUS(view_of(f, out, &ov, "output"));
  size_t n = tv[0].count;
  if (n == 0) return NULL;

  float* a = (float*)malloc(n * sizeof(float));
  float* b = ci->op == OP_ADD ? (float*)malloc(n * sizeof(float)) : NULL;
  float* r = (float*)malloc(n * sizeof(float));
  OrtStatus* st = NULL;
  if (a == NULL || r == NULL || (ci->op == OP_ADD && b == NULL)) {
    st = make_status(ORT_FAIL, "RefDev: out of memory");
    goto done;
  }
  const void* p = NULL;
  if ((st = g_ort->GetTensorData(in[0], &p)) != NULL) goto done;
  decode(p, tv[0].kind, a, n);
  if (ci->op == OP_ADD) {
    if ((st = g_ort->GetTensorData(in[1], &p)) != NULL) goto done;
    decode(p, tv[1].kind, b, n);
    for (size_t i = 0; i < n; ++i) r[i] = a[i] + b[i];
  } else if (current_fault() == FAULT_WRONG_COMPUTE) {
    memcpy(r, a, n * sizeof(float)); /* wrong on purpose: Relu returns its input */
  } else {
    for (size_t i = 0; i < n; ++i) r[i] = a[i] > 0.0f ? a[i] : (a[i] != a[i] ? a[i] : 0.0f);
  }
  void* q = NULL;
  if ((st = g_ort->GetTensorMutableData(out, &q)) != NULL) goto done;
  encode(r, ov.kind, q, n);
done:
  free(a);
  free(b);
  free(r);
  return st;
}

static OrtStatus* ORT_API_CALL ep_compile(OrtEp* this_ptr, const OrtGraph** graphs, const OrtNode** fused_nodes,
                                          size_t count, OrtNodeComputeInfo** node_compute_infos,
                                          OrtNode** ep_context_nodes) {
  refdev_ep* ep = (refdev_ep*)this_ptr;
  (void)ep_context_nodes;
  for (size_t i = 0; i < count; ++i) node_compute_infos[i] = NULL;
  for (size_t i = 0; i < count; ++i) {
    size_t nn = 0;
    RETURN_IF_STATUS(g_ort->Graph_GetNumNodes(graphs[i], &nn));
    if (nn != 1) return make_status(ORT_EP_FAIL, "RefDev Compile: expected 1 node per partition, got %zu", nn);
    const OrtNode* node = NULL;
    RETURN_IF_STATUS(g_ort->Graph_GetNodes(graphs[i], &node, 1));
    const char* op = NULL;
    RETURN_IF_STATUS(g_ort->Node_GetOperatorType(node, &op));
    refdev_op kind;
    if (strcmp(op, "Add") == 0) {
      kind = OP_ADD;
    } else if (strcmp(op, "Relu") == 0) {
      kind = OP_RELU;
    } else {
      return make_status(ORT_EP_FAIL, "RefDev Compile: unsupported op %s", op);
    }
    refdev_compute_info* ci = (refdev_compute_info*)calloc(1, sizeof *ci);
    if (ci == NULL) return make_status(ORT_FAIL, "RefDev: out of memory");
    ci->base.ort_version_supported = ORT_API_VERSION;
    ci->base.CreateState = ci_create_state;
    ci->base.Compute = ci_compute;
    ci->base.ReleaseState = ci_release_state;
    ci->ep = ep;
    ci->op = kind;
    const char* fused_name = NULL;
    if (g_ort->Node_GetName(fused_nodes[i], &fused_name) == NULL && fused_name != NULL) {
      snprintf(ci->name, sizeof ci->name, "%s", fused_name);
    } else {
      snprintf(ci->name, sizeof ci->name, "%s", op);
    }
    node_compute_infos[i] = &ci->base;
  }
  return NULL;
}

static void ORT_API_CALL ep_release_node_compute_infos(OrtEp* this_ptr, OrtNodeComputeInfo** infos, size_t n) {
  (void)this_ptr;
  for (size_t i = 0; i < n; ++i) free(infos[i]);
}

static OrtStatus* ORT_API_CALL ep_get_preferred_data_layout(OrtEp* this_ptr, OrtEpDataLayout* layout) {
  (void)this_ptr;
  *layout = OrtEpDataLayout_NCHW;
  return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* Imports (C API >= 24): VK_MEMORY_OPAQUE_FD through Vulkan, HOST_ALLOCATION                   */
/* ------------------------------------------------------------------------------------------ */
/*
 * Two handle types:
 * - VK_MEMORY_OPAQUE_FD (3). An opaque fd is private to the driver that exported it (lavapipe's
 *   is a memfd whose data starts after a header of its own), so it is imported through Vulkan
 *   itself: a VkDevice of the first physical device that has VK_KHR_external_memory_fd,
 *   vkAllocateMemory with VkImportMemoryFdInfoKHR, vkMapMemory. The loader is dlopen'ed on first
 *   use, so the library still needs only libc. Built without Vulkan's headers, the importer
 *   takes HOST_ALLOCATION only.
 * - HOST_ALLOCATION (4, onnxruntime >= 1.30; the value is written out because the 1.27 headers
 *   refdev is built with do not name it): a page-aligned host address. No graphics API: the
 *   importer checks that the whole range is mapped (msync answers ENOMEM where it is not, as a
 *   host-memory registration of unmapped pages fails) and views it.
 * The mapping holds the producer's bytes as they are, so it is registered "plain": copies and
 * kernels do not apply the RefDev scrambling to it, whichever memory type the tensors report
 * (ORT_REFDEV_IMPORT_MEMORY=default|host_accessible). Tensors are views of the mapping; the
 * mapping lives until the handle and every tensor made from it are released.
 *
 * Who owns the fd after a successful import is not stated by onnxruntime's documents, so the
 * importer does either (ORT_REFDEV_IMPORT_FD): `dup` (the default) hands the driver a dup and
 * leaves the caller's fd alone; `take` closes the caller's fd once the import has succeeded, as an
 * importer that gives the fd itself to vkAllocateMemory does. Either way the driver gets a dup
 * (lavapipe closes the fd it is handed even when the import fails).
 *
 * ORT_REFDEV_IMPORT_FAULT (read on every call) breaks what onnxruntime's interop layer leaves to
 * the EP, to see what onnxruntime does with it (README.md, "Import faults").
 */
#if ORT_API_VERSION >= 24
#define REFDEV_IMPORTS 1
#if defined(__has_include)
#if __has_include(<vulkan/vulkan_core.h>)
#define REFDEV_VULKAN 1
#endif
#endif
#endif

#ifdef REFDEV_IMPORTS
#include <sys/mman.h>

#define REFDEV_HANDLE_OPAQUE_FD 3      /* ORT_EXTERNAL_MEMORY_HANDLE_TYPE_(VK_)MEMORY_OPAQUE_FD */
#define REFDEV_HANDLE_HOST_ALLOCATION 4 /* ORT_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION (1.30) */

typedef enum {
  IMPORT_FAULT_NONE = 0,
  IMPORT_FAULT_NULL_HANDLE,    /* ImportMemory: OK, and no handle */
  IMPORT_FAULT_NULL_TENSOR,    /* CreateTensorFromMemory: OK, and no tensor */
  IMPORT_FAULT_NO_RELEASE,     /* handles without a Release function */
  IMPORT_FAULT_IMPORTER_ERROR, /* CreateExternalResourceImporterForDevice: an error status, not "OK, no importer" */
  IMPORT_FAULT_DENIES_HOST,    /* HOST_ALLOCATION denied and refused (a lawful importer of opaque fds only) */
  IMPORT_FAULT_ABORT_TENSOR,   /* CreateTensorFromMemory aborts the process */
  IMPORT_FAULT_COUNT_
} refdev_import_fault;

static const char* const k_import_fault_names[IMPORT_FAULT_COUNT_] = {
    "none", "null-handle", "null-tensor", "no-release", "importer-error", "denies-host", "abort-tensor",
};
#define REFDEV_IMPORT_FAULT_LIST "none, null-handle, null-tensor, no-release, importer-error, denies-host, abort-tensor"

static bool parse_import_fault(const char* s, refdev_import_fault* out) {
  *out = IMPORT_FAULT_NONE;
  if (s == NULL || s[0] == '\0') return true;
  for (int i = 0; i < IMPORT_FAULT_COUNT_; ++i) {
    if (strcmp(s, k_import_fault_names[i]) == 0) {
      *out = (refdev_import_fault)i;
      return true;
    }
  }
  return false;
}

static refdev_import_fault current_import_fault(void) {
  refdev_import_fault f;
  return parse_import_fault(getenv("ORT_REFDEV_IMPORT_FAULT"), &f) ? f : IMPORT_FAULT_NONE;
}

/* ORT_REFDEV_IMPORT_FD=take: the importer closes the caller's fd after a successful import. */
__attribute__((unused)) static bool import_takes_fd(void) {
  const char* v = getenv("ORT_REFDEV_IMPORT_FD");
  return v != NULL && strcmp(v, "take") == 0;
}

/* The import settings, checked once at registration: an unknown value fails it. */
static OrtStatus* import_settings_check(void) {
  refdev_import_fault fault;
  const char* v = getenv("ORT_REFDEV_IMPORT_FAULT");
  if (!parse_import_fault(v, &fault)) {
    return make_status(ORT_INVALID_ARGUMENT, "RefDev: unknown ORT_REFDEV_IMPORT_FAULT '%s'; valid modes: " REFDEV_IMPORT_FAULT_LIST, v);
  }
  const char* fd = getenv("ORT_REFDEV_IMPORT_FD");
  if (fd != NULL && fd[0] != '\0' && strcmp(fd, "dup") != 0 && strcmp(fd, "take") != 0) {
    return make_status(ORT_INVALID_ARGUMENT, "RefDev: ORT_REFDEV_IMPORT_FD must be dup or take, got '%s'", fd);
  }
  return NULL;
}

#ifdef REFDEV_VULKAN
#define VK_NO_PROTOTYPES
#include <dlfcn.h>
#include <vulkan/vulkan_core.h>

typedef struct refdev_vulkan {
  bool tried;
  char error[256];  /* why there is no device, when there is none */
  PFN_vkGetDeviceProcAddr get_device_proc;
  VkDevice device;
  uint32_t memory_type;
  PFN_vkAllocateMemory allocate;
  PFN_vkFreeMemory free_memory;
  PFN_vkMapMemory map;
  PFN_vkUnmapMemory unmap;
} refdev_vulkan;

static refdev_vulkan g_vk;
static pthread_mutex_t g_vk_lock = PTHREAD_MUTEX_INITIALIZER;

static bool vk_has_extension(PFN_vkEnumerateDeviceExtensionProperties enumerate, VkPhysicalDevice pd) {
  uint32_t n = 0;
  if (enumerate(pd, NULL, &n, NULL) != VK_SUCCESS || n == 0) return false;
  VkExtensionProperties* props = (VkExtensionProperties*)calloc(n, sizeof *props);
  if (props == NULL) return false;
  bool found = false;
  if (enumerate(pd, NULL, &n, props) == VK_SUCCESS) {
    for (uint32_t i = 0; i < n && !found; ++i) found = strcmp(props[i].extensionName, VK_KHR_EXTERNAL_MEMORY_FD_EXTENSION_NAME) == 0;
  }
  free(props);
  return found;
}

/* The Vulkan device imports go through, made once; NULL with g_vk.error set when there is none. */
static refdev_vulkan* vulkan(void) {
  pthread_mutex_lock(&g_vk_lock);
  if (g_vk.tried) {
    pthread_mutex_unlock(&g_vk_lock);
    return g_vk.device != NULL ? &g_vk : NULL;
  }
  g_vk.tried = true;
  void* lib = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
  PFN_vkGetInstanceProcAddr gip = lib != NULL ? (PFN_vkGetInstanceProcAddr)(uintptr_t)dlsym(lib, "vkGetInstanceProcAddr") : NULL;
  VkInstance instance = VK_NULL_HANDLE;
  if (gip == NULL) {
    snprintf(g_vk.error, sizeof g_vk.error, "no Vulkan loader (libvulkan.so.1)");
    goto out;
  }
  PFN_vkCreateInstance create_instance = (PFN_vkCreateInstance)(uintptr_t)gip(NULL, "vkCreateInstance");
  VkApplicationInfo app = {VK_STRUCTURE_TYPE_APPLICATION_INFO, NULL, "refdev", 1, "refdev", 1, VK_API_VERSION_1_1};
  VkInstanceCreateInfo ici = {VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, NULL, 0, &app, 0, NULL, 0, NULL};
  if (create_instance == NULL || create_instance(&ici, NULL, &instance) != VK_SUCCESS) {
    snprintf(g_vk.error, sizeof g_vk.error, "vkCreateInstance failed (no Vulkan driver)");
    goto out;
  }
#define REFDEV_VK(name) PFN_##name name##_ = (PFN_##name)(uintptr_t)gip(instance, #name)
  REFDEV_VK(vkEnumeratePhysicalDevices);
  REFDEV_VK(vkEnumerateDeviceExtensionProperties);
  REFDEV_VK(vkGetPhysicalDeviceMemoryProperties);
  REFDEV_VK(vkCreateDevice);
  REFDEV_VK(vkGetDeviceProcAddr);
#undef REFDEV_VK
  VkPhysicalDevice pds[8];
  uint32_t n = 8;
  if (vkEnumeratePhysicalDevices_(instance, &n, pds) < 0) n = 0;
  for (uint32_t i = 0; i < n; ++i) {
    if (!vk_has_extension(vkEnumerateDeviceExtensionProperties_, pds[i])) continue;
    VkPhysicalDeviceMemoryProperties mp;
    vkGetPhysicalDeviceMemoryProperties_(pds[i], &mp);
    const VkMemoryPropertyFlags want = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    uint32_t type = UINT32_MAX;
    for (uint32_t t = 0; t < mp.memoryTypeCount && type == UINT32_MAX; ++t) {
      if ((mp.memoryTypes[t].propertyFlags & want) == want) type = t;
    }
    if (type == UINT32_MAX) continue;
    float priority = 1.0f;
    VkDeviceQueueCreateInfo qci = {VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, NULL, 0, 0, 1, &priority};
    const char* ext = VK_KHR_EXTERNAL_MEMORY_FD_EXTENSION_NAME;
    VkDeviceCreateInfo dci = {VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, NULL, 0, 1, &qci, 0, NULL, 1, &ext, NULL};
    VkDevice device = VK_NULL_HANDLE;
    if (vkCreateDevice_(pds[i], &dci, NULL, &device) != VK_SUCCESS) continue;
    g_vk.device = device;
    g_vk.memory_type = type;
    g_vk.get_device_proc = vkGetDeviceProcAddr_;
    g_vk.allocate = (PFN_vkAllocateMemory)(uintptr_t)vkGetDeviceProcAddr_(device, "vkAllocateMemory");
    g_vk.free_memory = (PFN_vkFreeMemory)(uintptr_t)vkGetDeviceProcAddr_(device, "vkFreeMemory");
    g_vk.map = (PFN_vkMapMemory)(uintptr_t)vkGetDeviceProcAddr_(device, "vkMapMemory");
    g_vk.unmap = (PFN_vkUnmapMemory)(uintptr_t)vkGetDeviceProcAddr_(device, "vkUnmapMemory");
    goto out;
  }
  snprintf(g_vk.error, sizeof g_vk.error, "no Vulkan device with %s and host-visible memory",
           VK_KHR_EXTERNAL_MEMORY_FD_EXTENSION_NAME);
out:
  /* instance, device and loader stay for the life of the process: mappings may outlive the EP */
  pthread_mutex_unlock(&g_vk_lock);
  return g_vk.device != NULL ? &g_vk : NULL;
}
#endif /* REFDEV_VULKAN */

/* One imported allocation, mapped; shared by its handle and every tensor made from it. */
typedef struct refdev_mapping {
  pthread_mutex_t lock;
  int refs;
  uint64_t memory; /* the VkDeviceMemory of an opaque fd; 0 for HOST_ALLOCATION (the caller's memory) */
  unsigned char* address;
  size_t size;
} refdev_mapping;

static void mapping_unref(refdev_mapping* m) {
  pthread_mutex_lock(&m->lock);
  int left = --m->refs;
  pthread_mutex_unlock(&m->lock);
  if (left > 0) return;
  reg_remove(m->address);
#ifdef REFDEV_VULKAN
  if (m->memory != 0) {
    g_vk.unmap(g_vk.device, (VkDeviceMemory)m->memory);
    g_vk.free_memory(g_vk.device, (VkDeviceMemory)m->memory, NULL);
  }
#endif
  pthread_mutex_destroy(&m->lock);
  free(m);
}

typedef struct refdev_import_handle {
  OrtExternalMemoryHandle base;
  refdev_mapping* mapping;
} refdev_import_handle;

typedef struct refdev_importer {
  OrtExternalResourceImporterImpl base;
  refdev_factory* factory;
  const OrtEpDevice* ep_device;
  size_t device_index;
} refdev_importer;

/* The deleter of one imported tensor: onnxruntime calls Free(data) when the tensor is released. */
typedef struct refdev_view_deleter {
  OrtAllocator base;
  OrtMemoryInfo* info;
  refdev_mapping* mapping; /* NULL for a copy (fault import-copy): data is then malloc'ed */
} refdev_view_deleter;

static void* ORT_API_CALL view_alloc(OrtAllocator* this_, size_t size) {
  (void)this_;
  (void)size;
  return NULL;
}
static void ORT_API_CALL view_free(OrtAllocator* this_, void* p) {
  refdev_view_deleter* d = (refdev_view_deleter*)this_;
  if (d->mapping != NULL) {
    mapping_unref(d->mapping);
  } else {
    reg_remove(p);
    free(p);
  }
  g_ort->ReleaseMemoryInfo(d->info);
  free(d);
}
static const OrtMemoryInfo* ORT_API_CALL view_info(const OrtAllocator* this_) {
  return ((const refdev_view_deleter*)this_)->info;
}

static void ORT_API_CALL handle_release(OrtExternalMemoryHandle* handle) {
  refdev_import_handle* h = (refdev_import_handle*)handle;
  if (getenv("ORT_REFDEV_TRACE_RELEASE") != NULL) fprintf(stderr, "refdev: handle release\n");
  mapping_unref(h->mapping);
  free(h);
}

static bool ORT_API_CALL importer_can_import_memory(const OrtExternalResourceImporterImpl* this_ptr,
                                                    OrtExternalMemoryHandleType handle_type) {
  (void)this_ptr;
  /* import-denies: says no to every type ImportMemory then takes */
  if (current_fault() == FAULT_IMPORT_DENIES) return false;
  if ((int)handle_type == REFDEV_HANDLE_HOST_ALLOCATION) return current_import_fault() != IMPORT_FAULT_DENIES_HOST;
#ifdef REFDEV_VULKAN
  return (int)handle_type == REFDEV_HANDLE_OPAQUE_FD && vulkan() != NULL;
#else
  return false;
#endif
}

/* A HOST_ALLOCATION import: the caller's page-aligned memory, `size_bytes` of it mapped. */
static OrtStatus* import_host_allocation(const OrtExternalMemoryDescriptor* desc, bool bounds, unsigned char** address) {
  uintptr_t base = (uintptr_t)desc->native_handle;
  long page = sysconf(_SC_PAGESIZE);
  if (base == 0) return make_status(ORT_INVALID_ARGUMENT, "RefDev ImportMemory: HOST_ALLOCATION at a NULL address");
  if (page > 0 && base % (uintptr_t)page != 0) {
    return make_status(ORT_INVALID_ARGUMENT, "RefDev ImportMemory: HOST_ALLOCATION address %p is not page-aligned", desc->native_handle);
  }
  /* import-no-bounds: takes the range unchecked */
  if (bounds && msync(desc->native_handle, desc->size_bytes, MS_ASYNC) != 0) {
    return make_status(ORT_INVALID_ARGUMENT, "RefDev ImportMemory: the %zu bytes at %p are not all mapped: %s", desc->size_bytes,
                       desc->native_handle, strerror(errno));
  }
  *address = (unsigned char*)base;
  return NULL;
}

#ifdef REFDEV_VULKAN
/* An opaque fd imported through Vulkan and mapped; the caller's fd is closed after success
 * where the importer takes it (ORT_REFDEV_IMPORT_FD=take). */
static OrtStatus* import_opaque_fd(const OrtExternalMemoryDescriptor* desc, bool bounds, unsigned char** address, uint64_t* memory_out) {
  refdev_vulkan* vk = vulkan();
  if (vk == NULL) return make_status(ORT_NOT_IMPLEMENTED, "RefDev ImportMemory: %s", g_vk.error);
  int fd = (int)(intptr_t)desc->native_handle;
  int dup_fd = dup(fd);
  if (dup_fd < 0) return make_status(ORT_INVALID_ARGUMENT, "RefDev ImportMemory: fd %d cannot be duplicated: %s", fd, strerror(errno));
  /* import-no-bounds: maps what the fd holds, whatever size the descriptor claims */
  off_t end = lseek(dup_fd, 0, SEEK_END);
  size_t import_size = bounds || end <= 0 ? desc->size_bytes : (size_t)end;
  if (!bounds && end > 4096) import_size = (size_t)end - 4096; /* lavapipe's memfd: its header, then the data */
  VkImportMemoryFdInfoKHR import = {VK_STRUCTURE_TYPE_IMPORT_MEMORY_FD_INFO_KHR, NULL,
                                    VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT, dup_fd};
  VkMemoryAllocateInfo mai = {VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, &import, import_size, vk->memory_type};
  VkDeviceMemory memory = VK_NULL_HANDLE;
  VkResult r = vk->allocate(vk->device, &mai, NULL, &memory);
  if (r != VK_SUCCESS) {
    /* on failure the fd is still ours per the spec; lavapipe may have closed it already */
    close(dup_fd);
    return make_status(ORT_INVALID_ARGUMENT, "RefDev ImportMemory: vkAllocateMemory of %zu bytes from fd %d failed (VkResult %d)",
                       desc->size_bytes, fd, (int)r);
  }
  void* mapped = NULL;
  r = vk->map(vk->device, memory, 0, VK_WHOLE_SIZE, 0, &mapped);
  if (r != VK_SUCCESS) {
    vk->free_memory(vk->device, memory, NULL);
    return make_status(ORT_FAIL, "RefDev ImportMemory: vkMapMemory failed (VkResult %d)", (int)r);
  }
  if (import_takes_fd()) close(fd); /* the import succeeded: the caller's fd is the importer's now */
  *address = (unsigned char*)mapped;
  *memory_out = (uint64_t)memory;
  return NULL;
}
#endif

static OrtStatus* ORT_API_CALL importer_import_memory(OrtExternalResourceImporterImpl* this_ptr,
                                                      const OrtExternalMemoryDescriptor* desc,
                                                      OrtExternalMemoryHandle** out_handle) {
  refdev_importer* imp = (refdev_importer*)this_ptr;
  bool bounds = current_fault() != FAULT_IMPORT_NO_BOUNDS;
  refdev_import_fault import_fault = current_import_fault();
  *out_handle = NULL;
  if (desc == NULL) return make_status(ORT_INVALID_ARGUMENT, "RefDev ImportMemory: NULL descriptor");
  if (desc->version < 24 || desc->version > ORT_API_VERSION) {
    return make_status(ORT_INVALID_ARGUMENT, "RefDev ImportMemory: descriptor version %u is not one of 24..%d",
                       desc->version, ORT_API_VERSION);
  }
  int type = (int)desc->handle_type;
  bool host = type == REFDEV_HANDLE_HOST_ALLOCATION && import_fault != IMPORT_FAULT_DENIES_HOST;
#ifdef REFDEV_VULKAN
  bool opaque_fd = type == REFDEV_HANDLE_OPAQUE_FD;
#else
  bool opaque_fd = false;
#endif
  if (!host && !opaque_fd) {
    return make_status(ORT_NOT_IMPLEMENTED, "RefDev ImportMemory: handle type %d is not supported", type);
  }
  if (desc->size_bytes == 0) return make_status(ORT_INVALID_ARGUMENT, "RefDev ImportMemory: size_bytes is 0");
  if (bounds && desc->offset_bytes >= desc->size_bytes) {
    return make_status(ORT_INVALID_ARGUMENT, "RefDev ImportMemory: offset_bytes %zu is past the end of %zu bytes",
                       desc->offset_bytes, desc->size_bytes);
  }
  /* null-handle: "succeeds" with nothing to show for it */
  if (import_fault == IMPORT_FAULT_NULL_HANDLE) return NULL;
  unsigned char* address = NULL;
  uint64_t memory = 0;
  OrtStatus* st = NULL;
  if (host) {
    st = import_host_allocation(desc, bounds, &address);
  } else {
#ifdef REFDEV_VULKAN
    st = import_opaque_fd(desc, bounds, &address, &memory);
#endif
  }
  if (st != NULL) return st;
  refdev_mapping* m = (refdev_mapping*)calloc(1, sizeof *m);
  refdev_import_handle* h = (refdev_import_handle*)calloc(1, sizeof *h);
  if (m == NULL || h == NULL) {
    free(m);
    free(h);
#ifdef REFDEV_VULKAN
    if (memory != 0) {
      g_vk.unmap(g_vk.device, (VkDeviceMemory)memory);
      g_vk.free_memory(g_vk.device, (VkDeviceMemory)memory, NULL);
    }
#endif
    return make_status(ORT_FAIL, "RefDev ImportMemory: out of memory");
  }
  pthread_mutex_init(&m->lock, NULL);
  m->refs = 1;
  m->memory = memory;
  m->address = address;
  m->size = bounds ? desc->size_bytes : SIZE_MAX / 2;
  reg_add_as(address, desc->size_bytes, imp->factory->import_host ? MEM_HOST : MEM_DEVICE, true);
  h->base.version = ORT_API_VERSION;
  h->base.ep_device = imp->ep_device;
  h->base.descriptor = *desc;
  /* no-release: a handle onnxruntime cannot release through its own Release */
  h->base.Release = import_fault == IMPORT_FAULT_NO_RELEASE ? NULL : handle_release;
  h->mapping = m;
  *out_handle = &h->base;
  return NULL;
}

static void ORT_API_CALL importer_release_memory(OrtExternalResourceImporterImpl* this_ptr,
                                                 OrtExternalMemoryHandle* handle) {
  (void)this_ptr;
  if (getenv("ORT_REFDEV_TRACE_RELEASE") != NULL) fprintf(stderr, "refdev: ReleaseMemory\n");
  if (handle != NULL) handle_release(handle);
}

static size_t element_size(ONNXTensorElementDataType t) {
  switch (t) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT: case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT32: return 4;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE: case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT64: return 8;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16: case ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16: case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT16: return 2;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8: case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL: return 1;
    default: return 0;
  }
}

static OrtStatus* ORT_API_CALL importer_create_tensor(OrtExternalResourceImporterImpl* this_ptr,
                                                      const OrtExternalMemoryHandle* mem_handle,
                                                      const OrtExternalTensorDescriptor* tensor_desc,
                                                      OrtValue** out_tensor) {
  refdev_importer* imp = (refdev_importer*)this_ptr;
  refdev_factory* f = imp->factory;
  refdev_fault fault = current_fault();
  *out_tensor = NULL;
  if (mem_handle == NULL || tensor_desc == NULL) return make_status(ORT_INVALID_ARGUMENT, "RefDev CreateTensorFromMemory: NULL argument");
  const refdev_import_handle* h = (const refdev_import_handle*)mem_handle;
  if (tensor_desc->version < 24 || tensor_desc->version > ORT_API_VERSION) {
    return make_status(ORT_INVALID_ARGUMENT, "RefDev CreateTensorFromMemory: descriptor version %u is not one of 24..%d",
                       tensor_desc->version, ORT_API_VERSION);
  }
  if (h->base.ep_device != imp->ep_device && fault != FAULT_IMPORT_NO_BOUNDS) {
    return make_status(ORT_INVALID_ARGUMENT,
                       "RefDev CreateTensorFromMemory: the handle was imported by another device's importer");
  }
  size_t esize = element_size(tensor_desc->element_type);
  if (esize == 0) {
    return make_status(ORT_NOT_IMPLEMENTED, "RefDev CreateTensorFromMemory: element type %d is not supported",
                       (int)tensor_desc->element_type);
  }
  size_t count = 1;
  for (size_t i = 0; i < tensor_desc->rank; ++i) {
    if (tensor_desc->shape[i] < 0) return make_status(ORT_INVALID_ARGUMENT, "RefDev CreateTensorFromMemory: negative dimension");
    count *= (size_t)tensor_desc->shape[i];
  }
  size_t bytes = count * esize;
  size_t offset = h->base.descriptor.offset_bytes + tensor_desc->offset_bytes;
  if (fault != FAULT_IMPORT_NO_BOUNDS && (offset > h->base.descriptor.size_bytes || bytes > h->base.descriptor.size_bytes - offset)) {
    return make_status(ORT_INVALID_ARGUMENT,
                       "RefDev CreateTensorFromMemory: %zu bytes at offset %zu run past the end of the %zu imported bytes",
                       bytes, offset, h->base.descriptor.size_bytes);
  }
  /* null-tensor: "succeeds" with no tensor; abort-tensor: takes the process down */
  if (current_import_fault() == IMPORT_FAULT_NULL_TENSOR) return NULL;
  if (current_import_fault() == IMPORT_FAULT_ABORT_TENSOR) {
    fprintf(stderr, "refdev: import fault 'abort-tensor': CreateTensorFromMemory aborts\n");
    fflush(stderr);
    abort();
  }
  refdev_view_deleter* d = (refdev_view_deleter*)calloc(1, sizeof *d);
  if (d == NULL) return make_status(ORT_FAIL, "RefDev CreateTensorFromMemory: out of memory");
  OrtStatus* st_info = NULL;
  d->base.version = ORT_API_VERSION;
  d->base.Alloc = view_alloc;
  d->base.Free = view_free;
  d->base.Info = view_info;
  /* a memory info of its own: the tensor may outlive the factory (its library unregistered) */
  st_info = f->import_host
                ? g_ort->CreateMemoryInfo_V2(REFDEV_HOST_NAME, OrtMemoryInfoDeviceType_GPU, REFDEV_VENDOR_ID, REFDEV_DEVICE_ID,
                                             OrtDeviceMemoryType_HOST_ACCESSIBLE, 0, OrtDeviceAllocator, &d->info)
                : g_ort->CreateMemoryInfo_V2(REFDEV_DEFAULT_NAME, f->default_type, f->default_vendor, (int)imp->device_index,
                                             OrtDeviceMemoryType_DEFAULT, 0, OrtDeviceAllocator, &d->info);
  if (st_info != NULL) {
    free(d);
    return st_info;
  }
  void* data = h->mapping->address + offset;
  if (fault == FAULT_IMPORT_COPY) {
    /* wrong on purpose: a private copy of what the producer holds now, not a view of it */
    void* copy = malloc(bytes > 0 ? bytes : 1);
    if (copy == NULL) {
      g_ort->ReleaseMemoryInfo(d->info);
      free(d);
      return make_status(ORT_FAIL, "RefDev CreateTensorFromMemory: out of memory");
    }
    memcpy(copy, data, bytes);
    reg_add_as(copy, bytes, f->import_host ? MEM_HOST : MEM_DEVICE, true);
    data = copy;
  } else {
    d->mapping = h->mapping;
    pthread_mutex_lock(&h->mapping->lock);
    h->mapping->refs++;
    pthread_mutex_unlock(&h->mapping->lock);
  }
  OrtStatus* st = g_ort->CreateTensorWithDataAndDeleterAsOrtValue(&d->base, data, bytes, tensor_desc->shape, tensor_desc->rank,
                                                                  tensor_desc->element_type, out_tensor);
  if (st != NULL) view_free(&d->base, data);
  return st;
}

static bool ORT_API_CALL importer_can_import_semaphore(const OrtExternalResourceImporterImpl* this_ptr,
                                                       OrtExternalSemaphoreType type) {
  (void)this_ptr;
  (void)type;
  return false;
}
static OrtStatus* ORT_API_CALL importer_import_semaphore(OrtExternalResourceImporterImpl* this_ptr,
                                                         const OrtExternalSemaphoreDescriptor* desc,
                                                         OrtExternalSemaphoreHandle** out_handle) {
  (void)this_ptr;
  (void)desc;
  *out_handle = NULL;
  return make_status(ORT_NOT_IMPLEMENTED, "RefDev imports no semaphores (the device is synchronous)");
}
static void ORT_API_CALL importer_release_semaphore(OrtExternalResourceImporterImpl* this_ptr,
                                                    OrtExternalSemaphoreHandle* handle) {
  (void)this_ptr;
  (void)handle;
}
static OrtStatus* ORT_API_CALL importer_wait_semaphore(OrtExternalResourceImporterImpl* this_ptr,
                                                       OrtExternalSemaphoreHandle* handle, OrtSyncStream* stream,
                                                       uint64_t value) {
  (void)this_ptr;
  (void)handle;
  (void)stream;
  (void)value;
  return make_status(ORT_NOT_IMPLEMENTED, "RefDev imports no semaphores");
}
/* The importer is wiped before it is freed, so that a call through it after its release (a
 * use after free by its caller) meets NULL function pointers instead of working by chance. */
static void ORT_API_CALL importer_release(OrtExternalResourceImporterImpl* this_ptr) {
  memset(this_ptr, 0, sizeof(refdev_importer));
  free(this_ptr);
}

static OrtStatus* ORT_API_CALL factory_create_importer(OrtEpFactory* this_ptr, const OrtEpDevice* ep_device,
                                                       OrtExternalResourceImporterImpl** out_importer) {
  refdev_factory* f = (refdev_factory*)this_ptr;
  *out_importer = NULL;
  /* importer-error: "unsupported" said with an error status, where the guide says OK and no importer */
  if (current_import_fault() == IMPORT_FAULT_IMPORTER_ERROR) {
    return make_status(ORT_FAIL, "RefDev: External resource importer is not supported (fault importer-error)");
  }
  refdev_importer* imp = (refdev_importer*)calloc(1, sizeof *imp);
  if (imp == NULL) return make_status(ORT_FAIL, "RefDev: out of memory");
  imp->base.ort_version_supported = ORT_API_VERSION;
  imp->base.CanImportMemory = importer_can_import_memory;
  imp->base.ImportMemory = importer_import_memory;
  imp->base.ReleaseMemory = importer_release_memory;
  imp->base.CreateTensorFromMemory = importer_create_tensor;
  imp->base.CanImportSemaphore = importer_can_import_semaphore;
  imp->base.ImportSemaphore = importer_import_semaphore;
  imp->base.ReleaseSemaphore = importer_release_semaphore;
  imp->base.WaitSemaphore = importer_wait_semaphore;
  imp->base.SignalSemaphore = importer_wait_semaphore;
  imp->base.Release = importer_release;
  imp->factory = f;
  imp->ep_device = ep_device;
  /* which virtual device: its metadata says */
  const OrtKeyValuePairs* meta = g_ort->EpDevice_EpMetadata(ep_device);
  const char* id = meta != NULL ? g_ort->GetKeyValue(meta, "refdev.device_id") : NULL;
  imp->device_index = id != NULL ? (size_t)strtoul(id, NULL, 10) : 0;
  if (imp->device_index >= f->num_devices) imp->device_index = 0;
  *out_importer = &imp->base;
  return NULL;
}
#endif /* REFDEV_IMPORTS */

/* ------------------------------------------------------------------------------------------ */
/* Factory entry points                                                                         */
/* ------------------------------------------------------------------------------------------ */

static const char* ORT_API_CALL factory_get_name(const OrtEpFactory* this_ptr) {
  (void)this_ptr;
  return REFDEV_EP_NAME;
}
static const char* ORT_API_CALL factory_get_vendor(const OrtEpFactory* this_ptr) {
  (void)this_ptr;
  return REFDEV_VENDOR;
}
static uint32_t ORT_API_CALL factory_get_vendor_id(const OrtEpFactory* this_ptr) {
  (void)this_ptr;
  return REFDEV_VENDOR_ID;
}
static const char* ORT_API_CALL factory_get_version(const OrtEpFactory* this_ptr) {
  (void)this_ptr;
  return REFDEV_VERSION;
}

static OrtStatus* ORT_API_CALL factory_get_supported_devices(OrtEpFactory* this_ptr,
                                                             const OrtHardwareDevice* const* devices,
                                                             size_t num_devices, OrtEpDevice** ep_devices,
                                                             size_t max_ep_devices, size_t* num_ep_devices) {
  refdev_factory* f = (refdev_factory*)this_ptr;
  *num_ep_devices = 0;
  if (max_ep_devices == 0) return NULL;
  for (size_t i = 0; i < num_devices; ++i) {
    if (g_ort->HardwareDevice_Type(devices[i]) != OrtHardwareDeviceType_CPU) continue;
    /* the virtual devices, all attached to the (first) CPU; HOST_ACCESSIBLE memory on device 0 */
    for (size_t d = 0; d < f->num_devices && d < max_ep_devices; ++d) {
      char device_id[8];
      snprintf(device_id, sizeof device_id, "%zu", d);
      OrtKeyValuePairs* meta = NULL;
      g_ort->CreateKeyValuePairs(&meta);
      g_ort->AddKeyValuePair(meta, "refdev.version", REFDEV_VERSION);
      g_ort->AddKeyValuePair(meta, "refdev.fault", k_fault_names[f->fault]);
      g_ort->AddKeyValuePair(meta, "refdev.host_accessible", f->host_enabled && d == 0 ? "1" : "0");
      g_ort->AddKeyValuePair(meta, "refdev.device_id", device_id);
      /* where the kernels record the memory of their inputs (see log_input_placement) */
      g_ort->AddKeyValuePair(meta, "conformance.kernel_input_log", REFDEV_INPUT_LOG_ENV);
      OrtEpDevice* epd = NULL;
      OrtStatus* st = g_ep->CreateEpDevice(&f->base, devices[i], meta, NULL, &epd);
      g_ort->ReleaseKeyValuePairs(meta);
      if (st != NULL) return st;
      st = g_ep->EpDevice_AddAllocatorInfo(epd, f->default_infos[d]);
      if (st == NULL && f->host_info != NULL && d == 0) st = g_ep->EpDevice_AddAllocatorInfo(epd, f->host_info);
      if (st != NULL) {
        g_ep->ReleaseEpDevice(epd);
        return st;
      }
      ep_devices[d] = epd;
      *num_ep_devices = d + 1;
    }
    break;
  }
  return NULL;
}

static OrtStatus* ORT_API_CALL factory_create_ep(OrtEpFactory* this_ptr, const OrtHardwareDevice* const* devices,
                                                 const OrtKeyValuePairs* const* ep_metadata, size_t num_devices,
                                                 const OrtSessionOptions* session_options, const OrtLogger* logger,
                                                 OrtEp** out) {
  refdev_factory* f = (refdev_factory*)this_ptr;
  (void)devices;
  (void)ep_metadata;
  (void)session_options;
  *out = NULL;
  if (num_devices != 1) {
    return make_status(ORT_INVALID_ARGUMENT, "RefDev: expected to be selected for exactly one device, got %zu",
                       num_devices);
  }
  refdev_ep* ep = (refdev_ep*)calloc(1, sizeof *ep);
  if (ep == NULL) return make_status(ORT_FAIL, "RefDev: out of memory");
  ep->base.ort_version_supported = ORT_API_VERSION;
  ep->base.GetName = ep_get_name;
  ep->base.GetCapability = ep_get_capability;
  ep->base.Compile = ep_compile;
  ep->base.ReleaseNodeComputeInfos = ep_release_node_compute_infos;
  ep->base.GetPreferredDataLayout = ep_get_preferred_data_layout;
  /* CreateAllocator / CreateSyncStreamForDevice left NULL: onnxruntime then uses the factory's. */
  ep->factory = f;
  ep->logger = logger;
  *out = &ep->base;
  return NULL;
}

static void ORT_API_CALL factory_release_ep(OrtEpFactory* this_ptr, OrtEp* ep) {
  (void)this_ptr;
  free(ep);
}

static void factory_free(refdev_factory* f) {
  if (f == NULL) return;
  for (size_t d = 0; d < REFDEV_MAX_DEVICES; ++d) {
    if (f->default_infos[d] != NULL) g_ort->ReleaseMemoryInfo(f->default_infos[d]);
  }
  if (f->host_info != NULL) g_ort->ReleaseMemoryInfo(f->host_info);
  free(f);
}

REFDEV_EXPORT OrtStatus* CreateEpFactories(const char* registered_name, const OrtApiBase* ort_api_base,
                                           const OrtLogger* default_logger, OrtEpFactory** factories,
                                           size_t max_factories, size_t* num_factories) {
  *num_factories = 0;
  const OrtApi* api = ort_api_base->GetApi(ORT_API_VERSION);
  if (api == NULL) {
    fprintf(stderr, "refdev: onnxruntime %s does not provide C API version %d\n", ort_api_base->GetVersionString(),
            ORT_API_VERSION);
    return NULL; /* no OrtApi to build a status with */
  }
  g_ort = api;
  g_ep = api->GetEpApi();
  if (max_factories < 1) return make_status(ORT_INVALID_ARGUMENT, "RefDev: no room for a factory");

  const char* fault_env = getenv("ORT_REFDEV_FAULT");
  refdev_fault fault;
  if (!parse_fault(fault_env, &fault)) {
    return make_status(ORT_INVALID_ARGUMENT, "RefDev: unknown ORT_REFDEV_FAULT '%s'; valid modes: " REFDEV_FAULT_LIST,
                       fault_env);
  }
  g_fault_at_load = fault;

  refdev_factory* f = (refdev_factory*)calloc(1, sizeof *f);
  if (f == NULL) return make_status(ORT_FAIL, "RefDev: out of memory");
  f->base.ort_version_supported = ORT_API_VERSION;
  f->base.GetName = factory_get_name;
  f->base.GetVendor = factory_get_vendor;
  f->base.GetSupportedDevices = factory_get_supported_devices;
  f->base.CreateEp = factory_create_ep;
  f->base.ReleaseEp = factory_release_ep;
  f->base.GetVendorId = factory_get_vendor_id;
  f->base.GetVersion = factory_get_version;
  f->base.ValidateCompiledModelCompatibilityInfo = NULL;
  f->base.CreateAllocator = factory_create_allocator;
  f->base.ReleaseAllocator = factory_release_allocator;
  f->base.CreateDataTransfer = factory_create_data_transfer;
  f->base.IsStreamAware = factory_is_stream_aware;
  f->base.CreateSyncStreamForDevice = factory_create_sync_stream;
#ifdef REFDEV_IMPORTS
  f->base.CreateExternalResourceImporterForDevice = factory_create_importer;
  {
    OrtStatus* st_import = import_settings_check();
    if (st_import != NULL) {
      factory_free(f);
      return st_import;
    }
  }
#endif
  f->logger = default_logger;
  snprintf(f->registered_name, sizeof f->registered_name, "%s", registered_name ? registered_name : "");
  f->fault = fault;
  f->host_enabled = env_flag("ORT_REFDEV_HOST_ACCESSIBLE") || fault == FAULT_HOST_ACCESSIBLE_INPUTS ||
                    fault == FAULT_HOST_ACCESSIBLE_AS_DEVICE;
  f->default_vendor = fault == FAULT_WRONG_MEMORY ? REFDEV_WRONG_VENDOR_ID : REFDEV_VENDOR_ID;
  f->default_type = fault == FAULT_CPU_DEFAULT ? OrtMemoryInfoDeviceType_CPU : OrtMemoryInfoDeviceType_GPU;
  const char* import_env = getenv("ORT_REFDEV_IMPORT_MEMORY");
  if (import_env != NULL && import_env[0] != '\0' && strcmp(import_env, "default") != 0 &&
      strcmp(import_env, "host_accessible") != 0) {
    factory_free(f);
    return make_status(ORT_INVALID_ARGUMENT, "RefDev: ORT_REFDEV_IMPORT_MEMORY must be default or host_accessible, got '%s'",
                       import_env);
  }
  f->import_host = import_env != NULL && strcmp(import_env, "host_accessible") == 0;

  const char* devices_env = getenv("ORT_REFDEV_DEVICES");
  f->num_devices = devices_env != NULL && devices_env[0] != '\0' ? (size_t)strtoul(devices_env, NULL, 10) : 1;
  if (f->num_devices < 1 || f->num_devices > REFDEV_MAX_DEVICES) {
    factory_free(f);
    return make_status(ORT_INVALID_ARGUMENT, "RefDev: ORT_REFDEV_DEVICES must be 1 to %d, got '%s'", REFDEV_MAX_DEVICES,
                       devices_env);
  }
  OrtStatus* st = NULL;
  for (size_t d = 0; d < f->num_devices && st == NULL; ++d) {
    st = api->CreateMemoryInfo_V2(REFDEV_DEFAULT_NAME, f->default_type, f->default_vendor, (int)d,
                                  OrtDeviceMemoryType_DEFAULT, 0, OrtDeviceAllocator, &f->default_infos[d]);
  }
  if (st == NULL && f->host_enabled) {
    st = api->CreateMemoryInfo_V2(REFDEV_HOST_NAME, OrtMemoryInfoDeviceType_GPU, REFDEV_VENDOR_ID, REFDEV_DEVICE_ID,
                                  OrtDeviceMemoryType_HOST_ACCESSIBLE, 0, OrtDeviceAllocator, &f->host_info);
  }
  if (st != NULL) {
    factory_free(f);
    return st;
  }
  factories[0] = &f->base;
  *num_factories = 1;
  return NULL;
}

/* Never mapped; volatile, so the compiler cannot see the write coming (fault unregister-crash). */
static volatile uintptr_t g_dead_address = 16;

REFDEV_EXPORT OrtStatus* ReleaseEpFactory(OrtEpFactory* factory) {
  refdev_fault fault = current_fault();
  factory_free((refdev_factory*)factory);
  if (fault == FAULT_UNREGISTER_CRASH) {
    /* What a library that touches memory it has already released does when it is unloaded:
     * here made certain by writing through an address that is never mapped (SIGSEGV). */
    fprintf(stderr, "refdev: fault 'unregister-crash': ReleaseEpFactory writes through a dead pointer\n");
    fflush(stderr);
    *(volatile int*)g_dead_address = 0;
  }
  return NULL;
}
