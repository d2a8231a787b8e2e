/* A plugin EP library that goes wrong as onnxruntime loads it, for the bad inputs of
 * `ort-conformance init` (tests/test_init.py): STUB_EP_DEVICES says what its factory's
 * GetSupportedDevices does: `none` lists no device, `abort` calls abort(), `hang` never returns.
 * Built with -DSTUB_EP_NO_ENTRY it exports no CreateEpFactories at all. Its EP cannot run: the
 * registration is all these cases reach. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "onnxruntime_c_api.h"

#define STUB_EXPORT __attribute__((visibility("default")))

#ifdef STUB_EP_NO_ENTRY

STUB_EXPORT int stub_ep_is_no_ep_library(void) { return 1; }

#else

static const OrtApi* g_ort = NULL;

static const char* ORT_API_CALL stub_name(const OrtEpFactory* self) {
  (void)self;
  return "StubExecutionProvider";
}
static const char* ORT_API_CALL stub_vendor(const OrtEpFactory* self) {
  (void)self;
  return "ort-ep-conformance tests";
}
static uint32_t ORT_API_CALL stub_vendor_id(const OrtEpFactory* self) {
  (void)self;
  return 0x5157;
}
static const char* ORT_API_CALL stub_version(const OrtEpFactory* self) {
  (void)self;
  return "0.0.1";
}

static OrtStatus* ORT_API_CALL stub_devices(OrtEpFactory* self, const OrtHardwareDevice* const* devices, size_t num_devices,
                                            OrtEpDevice** ep_devices, size_t max_ep_devices, size_t* num_ep_devices) {
  (void)self, (void)devices, (void)num_devices, (void)ep_devices, (void)max_ep_devices;
  const char* mode = getenv("STUB_EP_DEVICES");
  *num_ep_devices = 0;
  if (mode != NULL && strcmp(mode, "abort") == 0) abort();
  if (mode != NULL && strcmp(mode, "hang") == 0) {
    for (;;) sleep(1);
  }
  return NULL; /* `none`, or unset: no device */
}

static OrtStatus* ORT_API_CALL stub_create_ep(OrtEpFactory* self, const OrtHardwareDevice* const* devices,
                                              const OrtKeyValuePairs* const* metadata, size_t num_devices,
                                              const OrtSessionOptions* options, const OrtLogger* logger, OrtEp** ep) {
  (void)self, (void)devices, (void)metadata, (void)num_devices, (void)options, (void)logger;
  *ep = NULL;
  return g_ort->CreateStatus(ORT_NOT_IMPLEMENTED, "the stub EP creates no EP");
}
static void ORT_API_CALL stub_release_ep(OrtEpFactory* self, OrtEp* ep) { (void)self, (void)ep; }
static OrtStatus* ORT_API_CALL stub_data_transfer(OrtEpFactory* self, OrtDataTransferImpl** data_transfer) {
  (void)self;
  *data_transfer = NULL;
  return NULL;
}
static bool ORT_API_CALL stub_stream_aware(const OrtEpFactory* self) {
  (void)self;
  return false;
}

static OrtEpFactory g_factory;

STUB_EXPORT OrtStatus* CreateEpFactories(const char* registered_name, const OrtApiBase* ort_api_base, const OrtLogger* logger,
                                         OrtEpFactory** factories, size_t max_factories, size_t* num_factories) {
  (void)registered_name, (void)logger;
  *num_factories = 0;
  g_ort = ort_api_base->GetApi(ORT_API_VERSION);
  if (g_ort == NULL || max_factories < 1) return NULL;
  memset(&g_factory, 0, sizeof g_factory);
  g_factory.ort_version_supported = ORT_API_VERSION;
  g_factory.GetName = stub_name;
  g_factory.GetVendor = stub_vendor;
  g_factory.GetVendorId = stub_vendor_id;
  g_factory.GetVersion = stub_version;
  g_factory.GetSupportedDevices = stub_devices;
  g_factory.CreateEp = stub_create_ep;
  g_factory.ReleaseEp = stub_release_ep;
  g_factory.CreateDataTransfer = stub_data_transfer;
  g_factory.IsStreamAware = stub_stream_aware;
  factories[0] = &g_factory;
  *num_factories = 1;
  return NULL;
}

STUB_EXPORT OrtStatus* ReleaseEpFactory(OrtEpFactory* factory) {
  (void)factory;
  return NULL;
}

#endif
