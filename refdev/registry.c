/* The registry of live RefDev allocations (imports included), and which memory a memory device is. */
#include "refdev.h"

/* ------------------------------------------------------------------------------------------ */
/* Registry of live allocations                                                                 */
/* ------------------------------------------------------------------------------------------ */

pthread_mutex_t g_reg_lock = PTHREAD_MUTEX_INITIALIZER;
alloc_entry* g_reg_head = NULL;

void refdev_reg_add_as(void* p, size_t size, mem_kind kind, bool plain) {
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

void refdev_reg_add(void* p, size_t size, mem_kind kind) { refdev_reg_add_as(p, size, kind, false); }

/* Removes p; returns false if p was not a live allocation. */
bool refdev_reg_remove(void* p) {
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
mem_kind refdev_reg_lookup(const void* p, size_t len, bool* out_of_bounds) {
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
bool refdev_reg_is_plain(const void* p, bool fault_misread) {
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
/* Memory classification                                                                        */
/* ------------------------------------------------------------------------------------------ */

mem_kind refdev_classify_device(const refdev_factory* f, const OrtMemoryDevice* d) {
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

const char* refdev_kind_name(mem_kind k) {
  switch (k) {
    case MEM_CPU: return "CPU";
    case MEM_DEVICE: return "RefDev";
    case MEM_HOST: return "RefDevHost";
    default: return "unknown";
  }
}
