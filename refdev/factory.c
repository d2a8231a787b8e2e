/* The factory: the API globals, the factory's entry points, CreateEpFactories, ReleaseEpFactory. */
#include "refdev.h"

/* ------------------------------------------------------------------------------------------ */
/* Globals                                                                                      */
/* ------------------------------------------------------------------------------------------ */

const OrtApi* g_ort = NULL;
const OrtEpApi* g_ep = NULL;

OrtStatus* refdev_make_status(OrtErrorCode code, const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return g_ort->CreateStatus(code, buf);
}

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
  if (max_factories < 1) return refdev_make_status(ORT_INVALID_ARGUMENT, "RefDev: no room for a factory");

  const char* fault_env = getenv("ORT_REFDEV_FAULT");
  refdev_fault fault;
  if (!refdev_parse_fault(fault_env, &fault)) {
    return refdev_make_status(ORT_INVALID_ARGUMENT, "RefDev: unknown ORT_REFDEV_FAULT '%s'; valid modes: " REFDEV_FAULT_LIST,
                              fault_env);
  }
  g_fault_at_load = fault;

  refdev_factory* f = (refdev_factory*)calloc(1, sizeof *f);
  if (f == NULL) return refdev_make_status(ORT_FAIL, "RefDev: out of memory");
  f->base.ort_version_supported = ORT_API_VERSION;
  f->base.GetName = factory_get_name;
  f->base.GetVendor = factory_get_vendor;
  f->base.GetSupportedDevices = factory_get_supported_devices;
  f->base.CreateEp = refdev_factory_create_ep;
  f->base.ReleaseEp = refdev_factory_release_ep;
  f->base.GetVendorId = factory_get_vendor_id;
  f->base.GetVersion = factory_get_version;
  f->base.ValidateCompiledModelCompatibilityInfo = NULL;
  f->base.CreateAllocator = refdev_factory_create_allocator;
  f->base.ReleaseAllocator = refdev_factory_release_allocator;
  f->base.CreateDataTransfer = refdev_factory_create_data_transfer;
  f->base.IsStreamAware = refdev_factory_is_stream_aware;
  f->base.CreateSyncStreamForDevice = refdev_factory_create_sync_stream;
#ifdef REFDEV_IMPORTS
  f->base.CreateExternalResourceImporterForDevice = refdev_factory_create_importer;
  {
    OrtStatus* st_import = refdev_import_settings_check();
    if (st_import != NULL) {
      factory_free(f);
      return st_import;
    }
  }
#endif
  f->logger = default_logger;
  snprintf(f->registered_name, sizeof f->registered_name, "%s", registered_name ? registered_name : "");
  f->fault = fault;
  f->host_enabled = refdev_env_flag("ORT_REFDEV_HOST_ACCESSIBLE") || fault == FAULT_HOST_ACCESSIBLE_INPUTS ||
                    fault == FAULT_HOST_ACCESSIBLE_AS_DEVICE;
  f->default_vendor = fault == FAULT_WRONG_MEMORY ? REFDEV_WRONG_VENDOR_ID : REFDEV_VENDOR_ID;
  f->default_type = fault == FAULT_CPU_DEFAULT ? OrtMemoryInfoDeviceType_CPU : OrtMemoryInfoDeviceType_GPU;
  const char* import_env = getenv("ORT_REFDEV_IMPORT_MEMORY");
  if (import_env != NULL && import_env[0] != '\0' && strcmp(import_env, "default") != 0 &&
      strcmp(import_env, "host_accessible") != 0) {
    factory_free(f);
    return refdev_make_status(ORT_INVALID_ARGUMENT, "RefDev: ORT_REFDEV_IMPORT_MEMORY must be default or host_accessible, got '%s'",
                              import_env);
  }
  f->import_host = import_env != NULL && strcmp(import_env, "host_accessible") == 0;

  const char* devices_env = getenv("ORT_REFDEV_DEVICES");
  f->num_devices = devices_env != NULL && devices_env[0] != '\0' ? (size_t)strtoul(devices_env, NULL, 10) : 1;
  if (f->num_devices < 1 || f->num_devices > REFDEV_MAX_DEVICES) {
    factory_free(f);
    return refdev_make_status(ORT_INVALID_ARGUMENT, "RefDev: ORT_REFDEV_DEVICES must be 1 to %d, got '%s'", REFDEV_MAX_DEVICES,
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
  refdev_fault fault = refdev_current_fault();
  /* the library may be unmapped next: no stream thread may outlive this call */
  refdev_async_shutdown();
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
