/* Sync streams and their notifications; where copies and kernels run (README.md, "The
 * asynchronous device"). A synchronous stream (the default) has no queue: its work runs at the
 * call and its notifications have nothing to wait for. An asynchronous stream has a FIFO queue
 * served by its own thread (async.c). */
#include "refdev.h"

/* ------------------------------------------------------------------------------------------ */
/* Streams                                                                                      */
/* ------------------------------------------------------------------------------------------ */

typedef struct refdev_stream {
  OrtSyncStreamImpl base;
  int handle;             /* its address is the native handle (GetHandle) */
  refdev_queue* queue;    /* NULL: a synchronous stream */
  unsigned id;            /* its number in ORT_REFDEV_ASYNC_LOG */
  struct refdev_stream* next; /* g_streams */
} refdev_stream;

static unsigned g_stream_ids = 0;

/* The live streams, to tell ours from anything else a caller hands over and to keep a stream
 * from being released while work is queued on it. Lock order: g_streams_lock, then what
 * async.c locks. */
static pthread_mutex_t g_streams_lock = PTHREAD_MUTEX_INITIALIZER;
static refdev_stream* g_streams = NULL;

static refdev_stream* find_by_impl_locked(const OrtSyncStreamImpl* impl) {
  for (refdev_stream* s = g_streams; s != NULL; s = s->next) {
    if (&s->base == impl) return s;
  }
  return NULL;
}

static refdev_stream* find_by_handle_locked(const void* handle) {
  for (refdev_stream* s = g_streams; s != NULL; s = s->next) {
    if ((const void*)&s->handle == handle) return s;
  }
  return NULL;
}

static refdev_stream* find_stream_locked(const OrtSyncStream* stream) {
  if (stream == NULL) return NULL;
  return find_by_impl_locked(g_ep->SyncStream_GetImpl(stream));
}

/* ------------------------------------------------------------------------------------------ */
/* Where copies and kernels run                                                                 */
/* ------------------------------------------------------------------------------------------ */

/* A copy with no stream completes before CopyTensors returns (the API's rule), without waiting
 * for work queued on any stream (README: the stricter reading). A copy given an asynchronous
 * stream is queued on it. The async faults move copies off their stream. */
void refdev_async_copy(OrtSyncStream* stream, refdev_work_fn fn, bool (*before_queueing)(void* arg), void* arg) {
  refdev_fault fault = refdev_current_fault();
  if (stream == NULL) {
    /* early-return: the copy lands late, on the stray queue, after CopyTensors has returned */
    if (fault == FAULT_EARLY_RETURN && before_queueing(arg) && refdev_stray_push(fn, arg)) {
      refdev_async_log("copy stream=none stray");
      return;
    }
    refdev_async_log("copy stream=none now");
    fn(arg, false);
    return;
  }
  bool queued = false;
  const char* how = "now (not a RefDev stream)";
  unsigned id = 0;
  pthread_mutex_lock(&g_streams_lock);
  refdev_stream* s = find_stream_locked(stream);
  if (s != NULL) {
    id = s->id;
    how = "now (synchronous stream)";
  }
  if (s != NULL && s->queue != NULL) {
    if (fault != FAULT_DROP_STREAM) {
      queued = before_queueing(arg) && refdev_queue_push(s->queue, fn, arg);
      how = queued ? "queued" : "now (not queued)";
    } else if (!refdev_queue_busy(s->queue)) {
      /* drop-stream, the stream idle: the copy goes to the stray queue, where syncing the
       * stream does not reach it and what is queued on the stream next runs first */
      queued = before_queueing(arg) && refdev_stray_push(fn, arg);
      how = queued ? "stray (drop-stream)" : "now (not queued)";
    } else {
      /* drop-stream with work pending on the stream: the copy runs at once, before that work,
       * which then overwrites or reads what it should have come after (onnxruntime 32643) */
      how = "now, ahead of the stream's work (drop-stream)";
    }
  }
  pthread_mutex_unlock(&g_streams_lock);
  refdev_async_log("copy stream=%u %s", id, how);
  if (!queued) fn(arg, false);
}

/* A kernel's arithmetic runs on the stream onnxruntime gave the kernel (the native handle of
 * KernelContext_GetGPUComputeStream); with none, or a synchronous one, at once. */
void refdev_async_compute(void* handle, refdev_work_fn fn, void* arg) {
  bool queued = false;
  unsigned id = 0;
  if (handle != NULL) {
    pthread_mutex_lock(&g_streams_lock);
    refdev_stream* s = find_by_handle_locked(handle);
    if (s != NULL) id = s->id;
    if (s != NULL && s->queue != NULL) queued = refdev_queue_push(s->queue, fn, arg);
    pthread_mutex_unlock(&g_streams_lock);
  }
  if (id != 0) refdev_async_log("compute stream=%u %s", id, queued ? "queued" : "now");
  else refdev_async_log("compute stream=none now");
  if (!queued) fn(arg, false);
}

/* ------------------------------------------------------------------------------------------ */
/* Notifications                                                                                */
/* ------------------------------------------------------------------------------------------ */

/* Activate queues a mark on the notification's stream; a wait is for the marks queued before
 * it. Queued marks and waits hold a reference, so onnxruntime may release the notification
 * while they are still queued. */
typedef struct refdev_notification {
  OrtSyncNotificationImpl base;
  const OrtSyncStreamImpl* producer; /* its stream: a lookup key only, never dereferenced */
  pthread_mutex_t lock;
  pthread_cond_t cv;     /* a mark ran */
  uint64_t marks_queued;
  uint64_t marks_done;
  int refs;
} refdev_notification;

static void notif_unref(refdev_notification* n) {
  pthread_mutex_lock(&n->lock);
  bool last = --n->refs == 0;
  pthread_mutex_unlock(&n->lock);
  if (!last) return;
  pthread_cond_destroy(&n->cv);
  pthread_mutex_destroy(&n->lock);
  free(n);
}

static void mark_run(void* arg, bool abandoned) {
  (void)abandoned; /* a mark writes no memory of the caller's */
  refdev_notification* n = (refdev_notification*)arg;
  pthread_mutex_lock(&n->lock);
  n->marks_done += 1;
  pthread_cond_broadcast(&n->cv);
  pthread_mutex_unlock(&n->lock);
  notif_unref(n);
}

/* Blocks until the marks queued before `target` was taken have run. A wait for a mark is a wait
 * for the producer's queue: what is queued there runs without its hold. */
static void wait_marks(refdev_notification* n, uint64_t target) {
  pthread_mutex_lock(&g_streams_lock);
  refdev_stream* producer = find_by_impl_locked(n->producer);
  if (producer != NULL && producer->queue != NULL) refdev_queue_urge(producer->queue);
  pthread_mutex_unlock(&g_streams_lock);
  pthread_mutex_lock(&n->lock);
  while (n->marks_done < target) pthread_cond_wait(&n->cv, &n->lock);
  pthread_mutex_unlock(&n->lock);
}

typedef struct wait_job {
  refdev_notification* n;
  uint64_t target;
} wait_job;

static void wait_run(void* arg, bool abandoned) {
  (void)abandoned;
  wait_job* w = (wait_job*)arg;
  wait_marks(w->n, w->target);
  notif_unref(w->n);
  free(w);
}

static void ORT_API_CALL notif_release(OrtSyncNotificationImpl* this_ptr) {
  notif_unref((refdev_notification*)this_ptr);
}

static OrtStatus* ORT_API_CALL notif_activate(OrtSyncNotificationImpl* this_ptr) {
  refdev_notification* n = (refdev_notification*)this_ptr;
  pthread_mutex_lock(&n->lock);
  n->marks_queued += 1;
  n->refs += 1; /* the mark's */
  pthread_mutex_unlock(&n->lock);
  bool queued = false;
  unsigned id = 0;
  pthread_mutex_lock(&g_streams_lock);
  refdev_stream* s = find_by_impl_locked(n->producer);
  if (s != NULL) id = s->id;
  if (s != NULL && s->queue != NULL) queued = refdev_queue_push(s->queue, mark_run, n);
  pthread_mutex_unlock(&g_streams_lock);
  refdev_async_log("activate stream=%u %s", id, queued ? "queued" : "now");
  if (!queued) mark_run(n, false); /* a synchronous stream: everything before the mark has run */
  return NULL;
}

/* no-wait: the wait is skipped, and what the producer's stream holds is abandoned: the caller
 * goes on as if it had run. */
static void skip_wait(refdev_notification* n, const char* entry) {
  refdev_async_log("%s skipped (no-wait)", entry);
  pthread_mutex_lock(&g_streams_lock);
  refdev_stream* s = find_by_impl_locked(n->producer);
  if (s != NULL && s->queue != NULL) refdev_queue_abandon(s->queue);
  pthread_mutex_unlock(&g_streams_lock);
}

static OrtStatus* ORT_API_CALL notif_wait_on_host(OrtSyncNotificationImpl* this_ptr) {
  refdev_notification* n = (refdev_notification*)this_ptr;
  if (refdev_current_fault() == FAULT_NO_WAIT) {
    skip_wait(n, "wait_on_host");
    return NULL;
  }
  pthread_mutex_lock(&n->lock);
  uint64_t target = n->marks_queued;
  pthread_mutex_unlock(&n->lock);
  refdev_async_log("wait_on_host");
  wait_marks(n, target);
  return NULL;
}

static OrtStatus* ORT_API_CALL notif_wait_on_device(OrtSyncNotificationImpl* this_ptr, OrtSyncStream* consumer) {
  refdev_notification* n = (refdev_notification*)this_ptr;
  if (refdev_current_fault() == FAULT_NO_WAIT) {
    skip_wait(n, "wait_on_device");
    return NULL;
  }
  wait_job* w = (wait_job*)malloc(sizeof *w);
  if (w == NULL) return refdev_make_status(ORT_FAIL, "RefDev: out of memory");
  pthread_mutex_lock(&n->lock);
  w->n = n;
  w->target = n->marks_queued;
  n->refs += 1; /* the wait's */
  pthread_mutex_unlock(&n->lock);
  bool queued = false;
  unsigned id = 0;
  pthread_mutex_lock(&g_streams_lock);
  refdev_stream* s = find_stream_locked(consumer);
  if (s != NULL) id = s->id;
  if (s != NULL && s->queue != NULL) queued = refdev_queue_push(s->queue, wait_run, w);
  pthread_mutex_unlock(&g_streams_lock);
  if (consumer == NULL) refdev_async_log("wait_on_device stream=none on the host");
  else if (s == NULL) refdev_async_log("wait_on_device stream=other on the host");
  else refdev_async_log("wait_on_device stream=%u %s", id, queued ? "queued" : "on the host");
  /* a synchronous (or unknown) consumer runs its next work at the call: wait here */
  if (!queued) wait_run(w, false);
  return NULL;
}

static OrtStatus* ORT_API_CALL stream_create_notification(OrtSyncStreamImpl* this_ptr,
                                                          OrtSyncNotificationImpl** notification) {
  refdev_notification* n = (refdev_notification*)calloc(1, sizeof *n);
  if (n == NULL) return refdev_make_status(ORT_FAIL, "RefDev: out of memory");
  n->base.ort_version_supported = ORT_API_VERSION;
  n->base.Release = notif_release;
  n->base.Activate = notif_activate;
  n->base.WaitOnDevice = notif_wait_on_device;
  n->base.WaitOnHost = notif_wait_on_host;
  n->producer = this_ptr;
  pthread_mutex_init(&n->lock, NULL);
  pthread_cond_init(&n->cv, NULL);
  n->refs = 1; /* onnxruntime's */
  *notification = &n->base;
  return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* Stream entry points                                                                          */
/* ------------------------------------------------------------------------------------------ */

/* Releasing a stream drains it, stops and joins its thread, then frees it; no-drain lets the
 * thread finish the queue in the background (joined later: async.c). */
static void ORT_API_CALL stream_release(OrtSyncStreamImpl* this_ptr) {
  refdev_stream* s = (refdev_stream*)this_ptr;
  pthread_mutex_lock(&g_streams_lock);
  for (refdev_stream** pp = &g_streams; *pp != NULL; pp = &(*pp)->next) {
    if (*pp == s) {
      *pp = s->next;
      break;
    }
  }
  pthread_mutex_unlock(&g_streams_lock);
  bool drain = refdev_current_fault() != FAULT_NO_DRAIN;
  refdev_async_log("release stream=%u%s", s->id, s->queue == NULL ? "" : (drain ? " drained" : " not drained (no-drain)"));
  if (s->queue != NULL && !drain) refdev_queue_abandon(s->queue);
  if (s->queue != NULL) refdev_queue_release(s->queue, drain);
  free(s);
}

static void* ORT_API_CALL stream_get_handle(OrtSyncStreamImpl* this_ptr) {
  return &((refdev_stream*)this_ptr)->handle;
}

/* Flush and OnSessionRunEnd return once every item queued on the stream before the call ran. */
static OrtStatus* stream_drain(refdev_stream* s, const char* entry) {
  bool drain = refdev_current_fault() != FAULT_NO_DRAIN;
  refdev_async_log("%s stream=%u%s", entry, s->id, s->queue == NULL ? "" : (drain ? " drained" : " not drained (no-drain)"));
  if (s->queue != NULL && drain) refdev_queue_drain(s->queue);
  if (s->queue != NULL && !drain) refdev_queue_abandon(s->queue);
  return NULL;
}

static OrtStatus* ORT_API_CALL stream_flush(OrtSyncStreamImpl* this_ptr) {
  return stream_drain((refdev_stream*)this_ptr, "flush");
}

static OrtStatus* ORT_API_CALL stream_on_session_run_end(OrtSyncStreamImpl* this_ptr) {
  return stream_drain((refdev_stream*)this_ptr, "on_session_run_end");
}

/* Makes a stream for RefDev DEFAULT memory; async: with a queue and a thread, tagged with its
 * device and the EP that made it (NULL: the factory) for the EP's Sync and OnRunEnd. */
OrtStatus* refdev_stream_create(refdev_factory* f, const OrtMemoryDevice* memory_device, bool async, const void* owner,
                                OrtSyncStreamImpl** stream) {
  *stream = NULL;
  mem_kind k = refdev_classify_device(f, memory_device);
  if (k != MEM_DEVICE) {
    return refdev_make_status(ORT_INVALID_ARGUMENT, "RefDev: streams exist only for RefDev DEFAULT memory, not %s",
                              refdev_kind_name(k));
  }
  refdev_stream* s = (refdev_stream*)calloc(1, sizeof *s);
  if (s == NULL) return refdev_make_status(ORT_FAIL, "RefDev: out of memory");
  if (async) {
    int device = (int)g_ep->MemoryDevice_GetDeviceId(memory_device);
    s->queue = refdev_queue_create(refdev_async_hold_ms(), device, owner);
    if (s->queue == NULL) {
      free(s);
      return refdev_make_status(ORT_FAIL, "RefDev: cannot start the thread of an asynchronous stream");
    }
  }
  s->base.ort_version_supported = ORT_API_VERSION;
  s->base.Release = stream_release;
  s->base.GetHandle = stream_get_handle;
  s->base.CreateNotification = stream_create_notification;
  s->base.Flush = stream_flush;
  s->base.OnSessionRunEnd = stream_on_session_run_end;
  s->id = __atomic_add_fetch(&g_stream_ids, 1, __ATOMIC_RELAXED);
  refdev_async_log("create stream=%u %s by %s", s->id, async ? "async" : "sync", owner != NULL ? "ep" : "factory");
  pthread_mutex_lock(&g_streams_lock);
  s->next = g_streams;
  g_streams = s;
  pthread_mutex_unlock(&g_streams_lock);
  *stream = &s->base;
  return NULL;
}

bool ORT_API_CALL refdev_factory_is_stream_aware(const OrtEpFactory* this_ptr) {
  (void)this_ptr;
  return true;
}

/* The factory's streams (the C API's CreateSyncStreamForEpDevice, Python's create_sync_stream):
 * asynchronous under ORT_REFDEV_ASYNC=1 (or an async fault), or with the stream option
 * async=1. */
OrtStatus* ORT_API_CALL refdev_factory_create_sync_stream(OrtEpFactory* this_ptr, const OrtMemoryDevice* memory_device,
                                                          const OrtKeyValuePairs* stream_options,
                                                          OrtSyncStreamImpl** stream) {
  const char* opt = stream_options != NULL ? g_ort->GetKeyValue(stream_options, "async") : NULL;
  bool async = refdev_async_wanted() || (opt != NULL && strcmp(opt, "1") == 0);
  return refdev_stream_create((refdev_factory*)this_ptr, memory_device, async, NULL, stream);
}

/* ------------------------------------------------------------------------------------------ */
/* The EP's stream entry points                                                                 */
/* ------------------------------------------------------------------------------------------ */

/* A session's streams come from the EP (onnxruntime prefers OrtEp::CreateSyncStreamForDevice to
 * the factory's), so that they know their EP: asynchronous under ORT_REFDEV_ASYNC=1 (or an
 * async fault), or where the session's provider options say async=1. */
OrtStatus* ORT_API_CALL refdev_ep_create_sync_stream(OrtEp* this_ptr, const OrtMemoryDevice* memory_device,
                                                     OrtSyncStreamImpl** stream) {
  refdev_ep* ep = (refdev_ep*)this_ptr;
  return refdev_stream_create(ep->factory, memory_device, ep->async_option || refdev_async_wanted(), ep, stream);
}

/* The end of a run: with sync_stream, every stream the EP made is drained (the session's). */
OrtStatus* ORT_API_CALL refdev_ep_on_run_end(OrtEp* this_ptr, const OrtRunOptions* run_options, bool sync_stream) {
  (void)run_options;
  if (!sync_stream) {
    refdev_async_log("on_run_end sync_stream=0");
    return NULL;
  }
  bool drain = refdev_current_fault() != FAULT_NO_DRAIN;
  refdev_async_log("on_run_end sync_stream=1%s", drain ? " drained" : " not drained (no-drain)");
  if (drain) refdev_async_drain_where(REFDEV_ANY_DEVICE, this_ptr);
  else refdev_async_abandon_where(REFDEV_ANY_DEVICE, this_ptr);
  return NULL;
}

#if ORT_API_VERSION >= 25
/* OrtEp::Sync: the device has completed everything asked of it before the call: every stream of
 * the device, whoever made it, and the stray queue. */
OrtStatus* ORT_API_CALL refdev_ep_sync(OrtEp* this_ptr) {
  refdev_ep* ep = (refdev_ep*)this_ptr;
  bool drain = refdev_current_fault() != FAULT_NO_DRAIN;
  refdev_async_log("sync device=%d%s", ep->device, drain ? " drained" : " not drained (no-drain)");
  if (drain) refdev_async_drain_where(ep->device, NULL);
  else refdev_async_abandon_where(ep->device, NULL);
  return NULL;
}
#endif
