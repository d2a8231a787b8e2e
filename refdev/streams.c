/* Sync streams and their notifications. */
#include "refdev.h"

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
  if (n == NULL) return refdev_make_status(ORT_FAIL, "RefDev: out of memory");
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

bool ORT_API_CALL refdev_factory_is_stream_aware(const OrtEpFactory* this_ptr) {
  (void)this_ptr;
  return true;
}

OrtStatus* ORT_API_CALL refdev_factory_create_sync_stream(OrtEpFactory* this_ptr, const OrtMemoryDevice* memory_device,
                                                          const OrtKeyValuePairs* stream_options,
                                                          OrtSyncStreamImpl** stream) {
  refdev_factory* f = (refdev_factory*)this_ptr;
  (void)stream_options;
  *stream = NULL;
  mem_kind k = refdev_classify_device(f, memory_device);
  if (k != MEM_DEVICE) {
    return refdev_make_status(ORT_INVALID_ARGUMENT, "RefDev: streams exist only for RefDev DEFAULT memory, not %s",
                              refdev_kind_name(k));
  }
  refdev_stream* s = (refdev_stream*)calloc(1, sizeof *s);
  if (s == NULL) return refdev_make_status(ORT_FAIL, "RefDev: out of memory");
  s->base.ort_version_supported = ORT_API_VERSION;
  s->base.Release = stream_release;
  s->base.GetHandle = stream_get_handle;
  s->base.CreateNotification = stream_create_notification;
  s->base.Flush = stream_flush;
  s->base.OnSessionRunEnd = stream_on_session_run_end;
  *stream = &s->base;
  return NULL;
}
