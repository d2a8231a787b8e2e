/* The external resource importer (C API >= 24: without it in the headers, this file holds nothing). */
#include "refdev.h"

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
  IMPORT_FAULT_UNCHECKED,      /* descriptors of any version, and handle types CanImportMemory denies, taken */
  IMPORT_FAULT_CLEAR_FIRST,    /* CopyTensors clears each destination before copying: a self-copy loses its bytes */
  IMPORT_FAULT_COUNT_
} refdev_import_fault;

static const char* const k_import_fault_names[IMPORT_FAULT_COUNT_] = {
    "none", "null-handle", "null-tensor", "no-release", "importer-error", "denies-host", "abort-tensor", "unchecked", "clear-first",
};
#define REFDEV_IMPORT_FAULT_LIST \
  "none, null-handle, null-tensor, no-release, importer-error, denies-host, abort-tensor, unchecked, clear-first"

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

bool refdev_copy_clears_first(void) { return current_import_fault() == IMPORT_FAULT_CLEAR_FIRST; }

/* ORT_REFDEV_IMPORT_FD=take: the importer closes the caller's fd after a successful import. */
__attribute__((unused)) static bool import_takes_fd(void) {
  const char* v = getenv("ORT_REFDEV_IMPORT_FD");
  return v != NULL && strcmp(v, "take") == 0;
}

/* The import settings, checked once at registration: an unknown value fails it. */
OrtStatus* refdev_import_settings_check(void) {
  refdev_import_fault fault;
  const char* v = getenv("ORT_REFDEV_IMPORT_FAULT");
  if (!parse_import_fault(v, &fault)) {
    return refdev_make_status(ORT_INVALID_ARGUMENT, "RefDev: unknown ORT_REFDEV_IMPORT_FAULT '%s'; valid modes: " REFDEV_IMPORT_FAULT_LIST, v);
  }
  const char* fd = getenv("ORT_REFDEV_IMPORT_FD");
  if (fd != NULL && fd[0] != '\0' && strcmp(fd, "dup") != 0 && strcmp(fd, "take") != 0) {
    return refdev_make_status(ORT_INVALID_ARGUMENT, "RefDev: ORT_REFDEV_IMPORT_FD must be dup or take, got '%s'", fd);
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
  refdev_reg_remove(m->address);
  /* the asynchronous device may still have work queued on the mapping: it is unmapped once
   * that work has run, not under it */
  refdev_async_drain_where(REFDEV_ANY_DEVICE, NULL);
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
    refdev_reg_remove(p);
    if (!refdev_async_defer_free(p)) free(p); /* queued work may still touch it (async.c) */
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
  if (refdev_current_fault() == FAULT_IMPORT_DENIES) return false;
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
  if (base == 0) return refdev_make_status(ORT_INVALID_ARGUMENT, "RefDev ImportMemory: HOST_ALLOCATION at a NULL address");
  if (page > 0 && base % (uintptr_t)page != 0) {
    return refdev_make_status(ORT_INVALID_ARGUMENT, "RefDev ImportMemory: HOST_ALLOCATION address %p is not page-aligned", desc->native_handle);
  }
  /* import-no-bounds: takes the range unchecked */
  if (bounds && msync(desc->native_handle, desc->size_bytes, MS_ASYNC) != 0) {
    return refdev_make_status(ORT_INVALID_ARGUMENT, "RefDev ImportMemory: the %zu bytes at %p are not all mapped: %s", desc->size_bytes,
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
  if (vk == NULL) return refdev_make_status(ORT_NOT_IMPLEMENTED, "RefDev ImportMemory: %s", g_vk.error);
  int fd = (int)(intptr_t)desc->native_handle;
  int dup_fd = dup(fd);
  if (dup_fd < 0) return refdev_make_status(ORT_INVALID_ARGUMENT, "RefDev ImportMemory: fd %d cannot be duplicated: %s", fd, strerror(errno));
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
    return refdev_make_status(ORT_INVALID_ARGUMENT, "RefDev ImportMemory: vkAllocateMemory of %zu bytes from fd %d failed (VkResult %d)",
                              desc->size_bytes, fd, (int)r);
  }
  void* mapped = NULL;
  r = vk->map(vk->device, memory, 0, VK_WHOLE_SIZE, 0, &mapped);
  if (r != VK_SUCCESS) {
    vk->free_memory(vk->device, memory, NULL);
    return refdev_make_status(ORT_FAIL, "RefDev ImportMemory: vkMapMemory failed (VkResult %d)", (int)r);
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
  bool bounds = refdev_current_fault() != FAULT_IMPORT_NO_BOUNDS;
  refdev_import_fault import_fault = current_import_fault();
  *out_handle = NULL;
  if (desc == NULL) return refdev_make_status(ORT_INVALID_ARGUMENT, "RefDev ImportMemory: NULL descriptor");
  /* unchecked: onnxruntime hands descriptors over as the application made them, so an EP that
   * does not look at the version or the type reads fields it does not know as ones it does */
  bool unchecked = import_fault == IMPORT_FAULT_UNCHECKED;
  if (!unchecked && (desc->version < 24 || desc->version > ORT_API_VERSION)) {
    return refdev_make_status(ORT_INVALID_ARGUMENT, "RefDev ImportMemory: descriptor version %u is not one of 24..%d",
                              desc->version, ORT_API_VERSION);
  }
  int type = (int)desc->handle_type;
#ifdef REFDEV_VULKAN
  bool opaque_fd = type == REFDEV_HANDLE_OPAQUE_FD;
#else
  bool opaque_fd = false;
#endif
  /* unchecked: any type but an opaque fd is taken for a host address */
  bool host = (type == REFDEV_HANDLE_HOST_ALLOCATION && import_fault != IMPORT_FAULT_DENIES_HOST) || (unchecked && !opaque_fd);
  if (!host && !opaque_fd) {
    return refdev_make_status(ORT_NOT_IMPLEMENTED, "RefDev ImportMemory: handle type %d is not supported", type);
  }
  if (desc->size_bytes == 0) return refdev_make_status(ORT_INVALID_ARGUMENT, "RefDev ImportMemory: size_bytes is 0");
  if (bounds && desc->offset_bytes >= desc->size_bytes) {
    return refdev_make_status(ORT_INVALID_ARGUMENT, "RefDev ImportMemory: offset_bytes %zu is past the end of %zu bytes",
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
    return refdev_make_status(ORT_FAIL, "RefDev ImportMemory: out of memory");
  }
  pthread_mutex_init(&m->lock, NULL);
  m->refs = 1;
  m->memory = memory;
  m->address = address;
  m->size = bounds ? desc->size_bytes : SIZE_MAX / 2;
  refdev_reg_add_as(address, desc->size_bytes, imp->factory->import_host ? MEM_HOST : MEM_DEVICE, true);
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
  refdev_fault fault = refdev_current_fault();
  *out_tensor = NULL;
  if (mem_handle == NULL || tensor_desc == NULL) return refdev_make_status(ORT_INVALID_ARGUMENT, "RefDev CreateTensorFromMemory: NULL argument");
  const refdev_import_handle* h = (const refdev_import_handle*)mem_handle;
  if (current_import_fault() != IMPORT_FAULT_UNCHECKED && (tensor_desc->version < 24 || tensor_desc->version > ORT_API_VERSION)) {
    return refdev_make_status(ORT_INVALID_ARGUMENT, "RefDev CreateTensorFromMemory: descriptor version %u is not one of 24..%d",
                              tensor_desc->version, ORT_API_VERSION);
  }
  if (h->base.ep_device != imp->ep_device && fault != FAULT_IMPORT_NO_BOUNDS) {
    return refdev_make_status(ORT_INVALID_ARGUMENT,
                              "RefDev CreateTensorFromMemory: the handle was imported by another device's importer");
  }
  size_t esize = element_size(tensor_desc->element_type);
  if (esize == 0) {
    return refdev_make_status(ORT_NOT_IMPLEMENTED, "RefDev CreateTensorFromMemory: element type %d is not supported",
                              (int)tensor_desc->element_type);
  }
  size_t count = 1;
  for (size_t i = 0; i < tensor_desc->rank; ++i) {
    if (tensor_desc->shape[i] < 0) return refdev_make_status(ORT_INVALID_ARGUMENT, "RefDev CreateTensorFromMemory: negative dimension");
    count *= (size_t)tensor_desc->shape[i];
  }
  size_t bytes = count * esize;
  size_t offset = h->base.descriptor.offset_bytes + tensor_desc->offset_bytes;
  if (fault != FAULT_IMPORT_NO_BOUNDS && (offset > h->base.descriptor.size_bytes || bytes > h->base.descriptor.size_bytes - offset)) {
    return refdev_make_status(ORT_INVALID_ARGUMENT,
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
  if (d == NULL) return refdev_make_status(ORT_FAIL, "RefDev CreateTensorFromMemory: out of memory");
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
      return refdev_make_status(ORT_FAIL, "RefDev CreateTensorFromMemory: out of memory");
    }
    memcpy(copy, data, bytes);
    refdev_reg_add_as(copy, bytes, f->import_host ? MEM_HOST : MEM_DEVICE, true);
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
  return refdev_make_status(ORT_NOT_IMPLEMENTED, "RefDev imports no semaphores (the device is synchronous)");
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
  return refdev_make_status(ORT_NOT_IMPLEMENTED, "RefDev imports no semaphores");
}
/* The importer is wiped before it is freed, so that a call through it after its release (a
 * use after free by its caller) meets NULL function pointers instead of working by chance. */
static void ORT_API_CALL importer_release(OrtExternalResourceImporterImpl* this_ptr) {
  memset(this_ptr, 0, sizeof(refdev_importer));
  free(this_ptr);
}

OrtStatus* ORT_API_CALL refdev_factory_create_importer(OrtEpFactory* this_ptr, const OrtEpDevice* ep_device,
                                                       OrtExternalResourceImporterImpl** out_importer) {
  refdev_factory* f = (refdev_factory*)this_ptr;
  *out_importer = NULL;
  /* importer-error: "unsupported" said with an error status, where the guide says OK and no importer */
  if (current_import_fault() == IMPORT_FAULT_IMPORTER_ERROR) {
    return refdev_make_status(ORT_FAIL, "RefDev: External resource importer is not supported (fault importer-error)");
  }
  refdev_importer* imp = (refdev_importer*)calloc(1, sizeof *imp);
  if (imp == NULL) return refdev_make_status(ORT_FAIL, "RefDev: out of memory");
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
