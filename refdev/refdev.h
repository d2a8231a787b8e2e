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
 *
 * refdev.h: what the files of the EP share (faults.c, registry.c, allocator.c, data_transfer.c,
 * streams.c, kernels.c, importer.c, factory.c). Only CreateEpFactories and ReleaseEpFactory are
 * exported (REFDEV_EXPORT); everything else is hidden (-fvisibility=hidden).
 */
#ifndef REFDEV_H
#define REFDEV_H

#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/file.h>
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
  /* the asynchronous device's ordering (they make the device asynchronous: async.c) */
  FAULT_DROP_STREAM,
  FAULT_NO_WAIT,
  FAULT_NO_DRAIN,
  FAULT_EARLY_RETURN,
  /* tries that differ: flaky results, and a crash that does not come back */
  FAULT_INTERMITTENT,
  FAULT_INTERMITTENT_ABORT,
  /* kernels that take empty tensors and cannot run on them */
  FAULT_EMPTY_FAILS,
  /* stress: harmless to one thread of small copies, each certain to break under load */
  FAULT_LEAK,
  FAULT_RACE,
  FAULT_RACE_KERNEL,
  FAULT_AFFINITY,
  FAULT_SIZE32,
  FAULT_NTH,
  /* lawful, not a fault of the EP: its allocators leave OrtAllocator::GetStats NULL, as the header
   * allows and the WebGPU plugin EP does; onnxruntime 1.32's AllocatorGetStats then jumps to 0 */
  FAULT_NO_STATS,
  FAULT_COUNT_
} refdev_fault;

/* The name of each mode, by refdev_fault (faults.c). */
extern const char* const k_fault_names[FAULT_COUNT_];

#define REFDEV_FAULT_LIST                                                                    \
  "none, no-data-transfer, corrupt, short-copy, no-d2d, no-d2h, no-h2d, wrong-memory, "      \
  "cpu-default, host-accessible-inputs, alloc-fail, abort, hang, slow-d2d, claim-nothing, "  \
  "wrong-compute, unregister-crash, host-accessible-as-device, import-copy, import-misread, "  \
  "import-no-bounds, import-denies, kernel-fails, misplaced-inputs, overrun, drop-stream, "     \
  "no-wait, no-drain, early-return, intermittent, intermittent-abort, empty-fails, leak, race, " \
  "race-kernel, affinity, size32, nth"

/* faults.c */
extern refdev_fault g_fault_at_load;
bool refdev_parse_fault(const char* s, refdev_fault* out);
refdev_fault refdev_current_fault(void);
bool refdev_env_flag(const char* name);
/* what the stress faults of several files share: the thread that registered the library
 * (affinity; noted by CreateEpFactories), the pause that holds a race window open (race,
 * race-kernel) */
void refdev_note_registering_thread(void);
bool refdev_on_registering_thread(long* here, long* registered);
void refdev_race_pause(void);
/* data_transfer.c: nth's handle pool, which copies drain and allocations need */
bool refdev_handle_pool_dry(void);

/* ------------------------------------------------------------------------------------------ */
/* Globals                                                                                      */
/* ------------------------------------------------------------------------------------------ */

/* factory.c */
extern const OrtApi* g_ort;
extern const OrtEpApi* g_ep;

OrtStatus* refdev_make_status(OrtErrorCode code, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));

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

/* registry.c */
extern pthread_mutex_t g_reg_lock;
extern alloc_entry* g_reg_head;
void refdev_reg_add_as(void* p, size_t size, mem_kind kind, bool plain);
void refdev_reg_add(void* p, size_t size, mem_kind kind);
bool refdev_reg_remove(void* p);
mem_kind refdev_reg_lookup(const void* p, size_t len, bool* out_of_bounds);
bool refdev_reg_is_plain(const void* p, bool fault_misread);

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

/* registry.c: which memory a memory device is, and its name in messages */
mem_kind refdev_classify_device(const refdev_factory* f, const OrtMemoryDevice* d);
const char* refdev_kind_name(mem_kind k);

/* ------------------------------------------------------------------------------------------ */
/* The factory's functions, defined beside what they make                                       */
/* ------------------------------------------------------------------------------------------ */

/* allocator.c */
OrtStatus* ORT_API_CALL refdev_factory_create_allocator(OrtEpFactory* this_ptr, const OrtMemoryInfo* memory_info,
                                                        const OrtKeyValuePairs* allocator_options,
                                                        OrtAllocator** allocator);
void ORT_API_CALL refdev_factory_release_allocator(OrtEpFactory* this_ptr, OrtAllocator* allocator);

/* data_transfer.c */
OrtStatus* ORT_API_CALL refdev_factory_create_data_transfer(OrtEpFactory* this_ptr,
                                                            OrtDataTransferImpl** data_transfer);

/* streams.c */
bool ORT_API_CALL refdev_factory_is_stream_aware(const OrtEpFactory* this_ptr);
OrtStatus* ORT_API_CALL refdev_factory_create_sync_stream(OrtEpFactory* this_ptr, const OrtMemoryDevice* memory_device,
                                                          const OrtKeyValuePairs* stream_options,
                                                          OrtSyncStreamImpl** stream);

/* kernels.c */
typedef struct refdev_ep {
  OrtEp base;
  refdev_factory* factory;
  const OrtLogger* logger;
  bool async_option; /* the session's provider option async=1 (ep.refdevexecutionprovider.async) */
  bool context_model; /* the session writes an EPContext model (ep.context_enable=1): Compile returns EPContext nodes */
  int device;        /* the virtual device it was made for */
} refdev_ep;

OrtStatus* ORT_API_CALL refdev_factory_create_ep(OrtEpFactory* this_ptr, const OrtHardwareDevice* const* devices,
                                                 const OrtKeyValuePairs* const* ep_metadata, size_t num_devices,
                                                 const OrtSessionOptions* session_options, const OrtLogger* logger,
                                                 OrtEp** out);
void ORT_API_CALL refdev_factory_release_ep(OrtEpFactory* this_ptr, OrtEp* ep);
/* where the kernels record the memory of their inputs (kernels.c, log_input_placement) */
#define REFDEV_INPUT_LOG_ENV "ORT_REFDEV_INPUT_LOG"

/* ------------------------------------------------------------------------------------------ */
/* The asynchronous device (ORT_REFDEV_ASYNC=1; README.md, "The asynchronous device")           */
/* ------------------------------------------------------------------------------------------ */

/* One unit of queued work: runs on a queue's thread (or at once, on the caller's), then frees
 * its argument. It must not call onnxruntime: everything it needs is read at the call.
 * abandoned: the caller was told the work had finished (a fault skipped the wait or drain, or
 * queued it behind the caller's back), so it may have freed its own memory: the work then
 * writes no CPU memory (README.md, "The asynchronous device"). */
typedef void (*refdev_work_fn)(void* arg, bool abandoned);

/* async.c: FIFO queues, each served by its own thread. */
typedef struct refdev_queue refdev_queue;
#define REFDEV_ASYNC_ENV "ORT_REFDEV_ASYNC"
#define REFDEV_ASYNC_DELAY_ENV "ORT_REFDEV_ASYNC_DELAY_MS"
#define REFDEV_ASYNC_LOG_ENV "ORT_REFDEV_ASYNC_LOG"
#define REFDEV_ANY_DEVICE (-1)
void refdev_async_log(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
bool refdev_async_fault(refdev_fault fault);
bool refdev_async_wanted(void);
long refdev_async_hold_ms(void);
refdev_queue* refdev_queue_create(long hold_ms, int device, const void* owner);
bool refdev_queue_push(refdev_queue* q, refdev_work_fn fn, void* arg);
bool refdev_queue_busy(refdev_queue* q);
void refdev_queue_urge(refdev_queue* q);
void refdev_queue_drain(refdev_queue* q);
void refdev_queue_release(refdev_queue* q, bool drain_first);
bool refdev_stray_push(refdev_work_fn fn, void* arg);
void refdev_queue_abandon(refdev_queue* q);
void refdev_async_drain_where(int device, const void* owner);
void refdev_async_abandon_where(int device, const void* owner);
bool refdev_async_defer_free(void* p);
void refdev_async_shutdown(void);

/* streams.c: where a copy or a kernel's arithmetic runs. The copy of a stream (NULL: none) and
 * the kernel on the stream whose native handle is `handle` (NULL: none) run fn(arg) now, or
 * queue it and return at once; either way fn owns arg. A copy about to be queued is first
 * handed to before_queueing (false: it runs at once instead). */
void refdev_async_copy(OrtSyncStream* stream, refdev_work_fn fn, bool (*before_queueing)(void* arg), void* arg);
void refdev_async_compute(void* handle, refdev_work_fn fn, void* arg);
OrtStatus* ORT_API_CALL refdev_ep_create_sync_stream(OrtEp* this_ptr, const OrtMemoryDevice* memory_device,
                                                     OrtSyncStreamImpl** stream);
OrtStatus* ORT_API_CALL refdev_ep_on_run_end(OrtEp* this_ptr, const OrtRunOptions* run_options, bool sync_stream);
#if ORT_API_VERSION >= 25
OrtStatus* ORT_API_CALL refdev_ep_sync(OrtEp* this_ptr);
#endif
OrtStatus* refdev_stream_create(refdev_factory* f, const OrtMemoryDevice* memory_device, bool async, const void* owner,
                                OrtSyncStreamImpl** stream);

/* importer.c: C API >= 24 has the importer, which takes opaque fds where Vulkan's headers are found */
#if ORT_API_VERSION >= 24
#define REFDEV_IMPORTS 1
#if defined(__has_include)
#if __has_include(<vulkan/vulkan_core.h>)
#define REFDEV_VULKAN 1
#endif
#endif
#endif

#ifdef REFDEV_IMPORTS
OrtStatus* refdev_import_settings_check(void);
/* import fault clear-first: CopyTensors clears each destination before copying into it */
bool refdev_copy_clears_first(void);
OrtStatus* ORT_API_CALL refdev_factory_create_importer(OrtEpFactory* this_ptr, const OrtEpDevice* ep_device,
                                                       OrtExternalResourceImporterImpl** out_importer);
#else
static inline bool refdev_copy_clears_first(void) { return false; }
#endif

#endif /* REFDEV_H */
