/*
 * ZeroMoE by-value shim for wgpu-native (webgpu.h + wgpu.h, wgpu-native 29.0.1.1).
 *
 * Compiled at run time by Bun's built-in TinyCC (`cc` from `bun:ffi`) against the headers that sit
 * beside libwgpu_native.so. webgpu.h passes WGPUStringView and the *CallbackInfo structs by value,
 * and its callbacks receive WGPUStringView by value; bun:ffi can do neither. Every function here
 * takes only scalars and pointers, builds the webgpu.h structs in C (so the C compiler, not
 * hand-written offsets, decides the layout), and calls the real function.
 *
 * Callbacks are C functions too: they never call into JavaScript. Each asynchronous operation gets a
 * heap "slot" (zm_slot) that its callback fills (status, handle, a copy of the message, done = 1);
 * JavaScript polls the slot after driving wgpu-native with wgpuInstanceProcessEvents/wgpuDevicePoll.
 * Uncaptured device errors are appended to a per-device queue (zm_errq) that JavaScript drains.
 */
#include "webgpu.h"
#include "wgpu.h"
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------- */
/* slots                                                                                           */

typedef struct zm_slot {
  int32_t done;
  int32_t status;
  int32_t type;
  int32_t reason;
  void *handle;
  char *message;
  size_t message_len;
  uint8_t *blob;
  size_t blob_len;
  struct zm_slot *next;
} zm_slot;

zm_slot *zm_slot_new(void) { return (zm_slot *)calloc(1, sizeof(zm_slot)); }

static void zm_slot_clear(zm_slot *s) {
  if (s->message) free(s->message);
  if (s->blob) free(s->blob);
  s->message = NULL; s->message_len = 0; s->blob = NULL; s->blob_len = 0;
  s->done = 0; s->status = 0; s->type = 0; s->reason = 0; s->handle = NULL;
}

void zm_slot_reset(zm_slot *s) { zm_slot_clear(s); }
void zm_slot_free(zm_slot *s) { if (s) { zm_slot_clear(s); free(s); } }
int32_t zm_slot_done(zm_slot *s) { return s->done; }
int32_t zm_slot_status(zm_slot *s) { return s->status; }
int32_t zm_slot_type(zm_slot *s) { return s->type; }
int32_t zm_slot_reason(zm_slot *s) { return s->reason; }
void *zm_slot_handle(zm_slot *s) { return s->handle; }
char *zm_slot_message(zm_slot *s) { return s->message; }
size_t zm_slot_message_len(zm_slot *s) { return s->message_len; }
uint8_t *zm_slot_blob(zm_slot *s) { return s->blob; }
size_t zm_slot_blob_len(zm_slot *s) { return s->blob_len; }

static void zm_set_message(zm_slot *s, WGPUStringView m) {
  size_t n = 0;
  if (m.data) n = (m.length == WGPU_STRLEN) ? strlen(m.data) : m.length;
  s->message = (char *)malloc(n + 1);
  if (n) memcpy(s->message, m.data, n);
  s->message[n] = 0;
  s->message_len = n;
}

static WGPUStringView zm_sv(const char *data, size_t len) {
  WGPUStringView v;
  v.data = data;
  v.length = data ? len : WGPU_STRLEN;
  return v;
}

/* ---------------------------------------------------------------------------------------------- */
/* error queue (uncaptured errors)                                                                 */

typedef struct zm_errq {
  int32_t count;
  int32_t pad;
  zm_slot *head;
  zm_slot *tail;
} zm_errq;

zm_errq *zm_errq_new(void) { return (zm_errq *)calloc(1, sizeof(zm_errq)); }
int32_t zm_errq_count(zm_errq *q) { return q->count; }
/* Pops the oldest error (caller frees it with zm_slot_free) or returns NULL. */
zm_slot *zm_errq_pop(zm_errq *q) {
  zm_slot *s = q->head;
  if (!s) return NULL;
  q->head = s->next;
  if (!q->head) q->tail = NULL;
  q->count--;
  s->next = NULL;
  return s;
}
void zm_errq_free(zm_errq *q) {
  zm_slot *s;
  if (!q) return;
  while ((s = zm_errq_pop(q))) zm_slot_free(s);
  free(q);
}

static void zm_on_uncaptured(WGPUDevice const *device, WGPUErrorType type, WGPUStringView message, void *u1, void *u2) {
  zm_errq *q = (zm_errq *)u1;
  zm_slot *s = zm_slot_new();
  (void)device; (void)u2;
  if (!q || !s) return;
  s->type = (int32_t)type;
  zm_set_message(s, message);
  s->done = 1;
  if (q->tail) q->tail->next = s; else q->head = s;
  q->tail = s;
  q->count++;
}

/* ---------------------------------------------------------------------------------------------- */
/* callbacks that fill slots                                                                       */

static void zm_on_request_adapter(WGPURequestAdapterStatus status, WGPUAdapter adapter, WGPUStringView message, void *u1, void *u2) {
  zm_slot *s = (zm_slot *)u1; (void)u2;
  s->status = (int32_t)status; s->handle = adapter; zm_set_message(s, message); s->done = 1;
}
static void zm_on_request_device(WGPURequestDeviceStatus status, WGPUDevice device, WGPUStringView message, void *u1, void *u2) {
  zm_slot *s = (zm_slot *)u1; (void)u2;
  s->status = (int32_t)status; s->handle = device; zm_set_message(s, message); s->done = 1;
}
static void zm_on_device_lost(WGPUDevice const *device, WGPUDeviceLostReason reason, WGPUStringView message, void *u1, void *u2) {
  zm_slot *s = (zm_slot *)u1; (void)u2; (void)device;
  if (!s || s->done) return;
  s->reason = (int32_t)reason; zm_set_message(s, message); s->done = 1;
}
static void zm_on_map(WGPUMapAsyncStatus status, WGPUStringView message, void *u1, void *u2) {
  zm_slot *s = (zm_slot *)u1; (void)u2;
  s->status = (int32_t)status; zm_set_message(s, message); s->done = 1;
}
static void zm_on_work_done(WGPUQueueWorkDoneStatus status, WGPUStringView message, void *u1, void *u2) {
  zm_slot *s = (zm_slot *)u1; (void)u2;
  s->status = (int32_t)status; zm_set_message(s, message); s->done = 1;
}
static void zm_on_pop_error_scope(WGPUPopErrorScopeStatus status, WGPUErrorType type, WGPUStringView message, void *u1, void *u2) {
  zm_slot *s = (zm_slot *)u1; (void)u2;
  s->status = (int32_t)status; s->type = (int32_t)type; zm_set_message(s, message); s->done = 1;
}

/* ---------------------------------------------------------------------------------------------- */
/* ABI self-test: proves the by-value path works (a struct built here, passed by value to a C      */
/* function that reads it back). Used by the shim's own test.                                      */

static size_t zm_sv_length_by_value(WGPUStringView v) { return v.length + (v.data ? (size_t)(unsigned char)v.data[0] : 0); }
size_t zm_abi_selftest(const char *data, size_t len) { return zm_sv_length_by_value(zm_sv(data, len)); }
/* The callback path: invokes zm_on_map as wgpu-native would, with a by-value WGPUStringView. */
void zm_abi_callback_selftest(zm_slot *s, int32_t status, const char *data, size_t len) {
  zm_on_map((WGPUMapAsyncStatus)status, zm_sv(data, len), s, NULL);
}

/* ---------------------------------------------------------------------------------------------- */
/* instance, adapters                                                                              */

WGPUInstance zm_create_instance(void) { return wgpuCreateInstance(NULL); }

uint64_t zm_request_adapter(WGPUInstance instance, uint32_t power, uint32_t force_fallback, uint32_t backend, zm_slot *slot) {
  WGPURequestAdapterOptions o;
  WGPURequestAdapterCallbackInfo cb;
  WGPUFuture f;
  memset(&o, 0, sizeof o); memset(&cb, 0, sizeof cb);
  o.featureLevel = WGPUFeatureLevel_Core;
  o.powerPreference = (WGPUPowerPreference)power;
  o.forceFallbackAdapter = force_fallback;
  o.backendType = (WGPUBackendType)backend;
  cb.mode = WGPUCallbackMode_AllowProcessEvents;
  cb.callback = zm_on_request_adapter;
  cb.userdata1 = slot;
  f = wgpuInstanceRequestAdapter(instance, &o, cb);
  return f.id;
}

size_t zm_enumerate_adapters(WGPUInstance instance, WGPUAdapter *out) {
  return wgpuInstanceEnumerateAdapters(instance, NULL, out);
}

/* nums[0..5] = backendType, adapterType, vendorID, deviceID, subgroupMinSize, subgroupMaxSize.
 * strs receives vendor, architecture, device, description as four NUL-terminated strings (each
 * truncated to fit cap/4 bytes). Returns the WGPUStatus. */
int32_t zm_adapter_info(WGPUAdapter adapter, WGPUDevice device, uint32_t *nums, char *strs, size_t cap) {
  WGPUAdapterInfo info;
  WGPUStatus st;
  WGPUStringView v[4];
  size_t each = cap / 4, i, n;
  memset(&info, 0, sizeof info);
  st = adapter ? wgpuAdapterGetInfo(adapter, &info) : wgpuDeviceGetAdapterInfo(device, &info);
  if (st != WGPUStatus_Success) return (int32_t)st;
  nums[0] = (uint32_t)info.backendType; nums[1] = (uint32_t)info.adapterType;
  nums[2] = info.vendorID; nums[3] = info.deviceID;
  nums[4] = info.subgroupMinSize; nums[5] = info.subgroupMaxSize;
  v[0] = info.vendor; v[1] = info.architecture; v[2] = info.device; v[3] = info.description;
  for (i = 0; i < 4; i++) {
    char *dst = strs + i * each;
    n = 0;
    if (v[i].data) n = (v[i].length == WGPU_STRLEN) ? strlen(v[i].data) : v[i].length;
    if (n > each - 1) n = each - 1;
    if (n) memcpy(dst, v[i].data, n);
    dst[n] = 0;
  }
  wgpuAdapterInfoFreeMembers(info);
  return (int32_t)st;
}

/* ---------------------------------------------------------------------------------------------- */
/* limits: one X-macro gives the order, the names and the widths, so JavaScript reads them from   */
/* here instead of duplicating the layout.                                                         */

#define ZM_LIMITS(X) \
  X(maxTextureDimension1D, 32) X(maxTextureDimension2D, 32) X(maxTextureDimension3D, 32) \
  X(maxTextureArrayLayers, 32) X(maxBindGroups, 32) X(maxBindGroupsPlusVertexBuffers, 32) \
  X(maxBindingsPerBindGroup, 32) X(maxDynamicUniformBuffersPerPipelineLayout, 32) \
  X(maxDynamicStorageBuffersPerPipelineLayout, 32) X(maxSampledTexturesPerShaderStage, 32) \
  X(maxSamplersPerShaderStage, 32) X(maxStorageBuffersPerShaderStage, 32) \
  X(maxStorageTexturesPerShaderStage, 32) X(maxUniformBuffersPerShaderStage, 32) \
  X(maxUniformBufferBindingSize, 64) X(maxStorageBufferBindingSize, 64) \
  X(minUniformBufferOffsetAlignment, 32) X(minStorageBufferOffsetAlignment, 32) \
  X(maxVertexBuffers, 32) X(maxBufferSize, 64) X(maxVertexAttributes, 32) \
  X(maxVertexBufferArrayStride, 32) X(maxInterStageShaderVariables, 32) \
  X(maxColorAttachments, 32) X(maxColorAttachmentBytesPerSample, 32) \
  X(maxComputeWorkgroupStorageSize, 32) X(maxComputeInvocationsPerWorkgroup, 32) \
  X(maxComputeWorkgroupSizeX, 32) X(maxComputeWorkgroupSizeY, 32) X(maxComputeWorkgroupSizeZ, 32) \
  X(maxComputeWorkgroupsPerDimension, 32) X(maxImmediateSize, 32)

#define ZM_COUNT(name, bits) + 1
#define ZM_NAME(name, bits) #name,
#define ZM_BITS(name, bits) bits,
static const char *zm_limit_names_tab[] = { ZM_LIMITS(ZM_NAME) };
static const int zm_limit_bits_tab[] = { ZM_LIMITS(ZM_BITS) };

int32_t zm_limit_count(void) { return 0 ZM_LIMITS(ZM_COUNT); }
const char *zm_limit_name(int32_t i) { return zm_limit_names_tab[i]; }
int32_t zm_limit_bits(int32_t i) { return zm_limit_bits_tab[i]; }

static void zm_limits_to_array(const WGPULimits *l, uint64_t *out) {
  int i = 0;
#define ZM_OUT(name, bits) out[i++] = (uint64_t)l->name;
  ZM_LIMITS(ZM_OUT)
#undef ZM_OUT
}

/* Values of UINT64_MAX mean "undefined" (use the default). */
static void zm_limits_from_array(WGPULimits *l, const uint64_t *in) {
  int i = 0;
#define ZM_IN(name, bits) \
  l->name = (bits == 32) ? (in[i] == UINT64_MAX ? WGPU_LIMIT_U32_UNDEFINED : (uint32_t)in[i]) : in[i]; i++;
  ZM_LIMITS(ZM_IN)
#undef ZM_IN
}

/* out must hold zm_limit_count() values. Either adapter or device is non-NULL. */
int32_t zm_get_limits(WGPUAdapter adapter, WGPUDevice device, uint64_t *out) {
  WGPULimits l;
  WGPUStatus st;
  memset(&l, 0, sizeof l);
  st = adapter ? wgpuAdapterGetLimits(adapter, &l) : wgpuDeviceGetLimits(device, &l);
  if (st == WGPUStatus_Success) zm_limits_to_array(&l, out);
  return (int32_t)st;
}

/* Writes up to cap feature ids into out; returns the total count. */
size_t zm_get_features(WGPUAdapter adapter, WGPUDevice device, uint32_t *out, size_t cap) {
  WGPUSupportedFeatures f;
  size_t i, n;
  memset(&f, 0, sizeof f);
  if (adapter) wgpuAdapterGetFeatures(adapter, &f); else wgpuDeviceGetFeatures(device, &f);
  n = f.featureCount;
  for (i = 0; i < n && i < cap; i++) out[i] = (uint32_t)f.features[i];
  wgpuSupportedFeaturesFreeMembers(f);
  return n;
}

/* ---------------------------------------------------------------------------------------------- */
/* device                                                                                          */

uint64_t zm_request_device(WGPUAdapter adapter, const uint32_t *features, size_t feature_count,
                           const uint64_t *limits, const char *label, size_t label_len,
                           zm_slot *slot, zm_slot *lost_slot, zm_errq *errq) {
  WGPUDeviceDescriptor d;
  WGPULimits l;
  WGPURequestDeviceCallbackInfo cb;
  WGPUFuture f;
  memset(&d, 0, sizeof d); memset(&l, 0, sizeof l); memset(&cb, 0, sizeof cb);
  d.label = zm_sv(label, label_len);
  d.requiredFeatureCount = feature_count;
  d.requiredFeatures = (const WGPUFeatureName *)features;
  if (limits) { zm_limits_from_array(&l, limits); d.requiredLimits = &l; }
  d.defaultQueue.label = zm_sv(NULL, 0);
  d.deviceLostCallbackInfo.mode = WGPUCallbackMode_AllowSpontaneous;
  d.deviceLostCallbackInfo.callback = zm_on_device_lost;
  d.deviceLostCallbackInfo.userdata1 = lost_slot;
  d.uncapturedErrorCallbackInfo.callback = zm_on_uncaptured;
  d.uncapturedErrorCallbackInfo.userdata1 = errq;
  cb.mode = WGPUCallbackMode_AllowProcessEvents;
  cb.callback = zm_on_request_device;
  cb.userdata1 = slot;
  f = wgpuAdapterRequestDevice(adapter, &d, cb);
  return f.id;
}

uint64_t zm_pop_error_scope(WGPUDevice device, zm_slot *slot) {
  WGPUPopErrorScopeCallbackInfo cb;
  WGPUFuture f;
  memset(&cb, 0, sizeof cb);
  cb.mode = WGPUCallbackMode_AllowProcessEvents;
  cb.callback = zm_on_pop_error_scope;
  cb.userdata1 = slot;
  f = wgpuDevicePopErrorScope(device, cb);
  return f.id;
}

/* ---------------------------------------------------------------------------------------------- */
/* buffers                                                                                         */

WGPUBuffer zm_create_buffer(WGPUDevice device, const char *label, size_t label_len, uint64_t usage, uint64_t size, uint32_t mapped) {
  WGPUBufferDescriptor d;
  memset(&d, 0, sizeof d);
  d.label = zm_sv(label, label_len);
  d.usage = usage;
  d.size = size;
  d.mappedAtCreation = mapped;
  return wgpuDeviceCreateBuffer(device, &d);
}

uint64_t zm_buffer_map_async(WGPUBuffer buffer, uint64_t mode, size_t offset, size_t size, zm_slot *slot) {
  WGPUBufferMapCallbackInfo cb;
  WGPUFuture f;
  memset(&cb, 0, sizeof cb);
  cb.mode = WGPUCallbackMode_AllowProcessEvents;
  cb.callback = zm_on_map;
  cb.userdata1 = slot;
  f = wgpuBufferMapAsync(buffer, mode, offset, size, cb);
  return f.id;
}

/* ---------------------------------------------------------------------------------------------- */
/* shaders, layouts, pipelines, bind groups                                                        */

WGPUShaderModule zm_create_shader_module_wgsl(WGPUDevice device, const char *code, size_t code_len, const char *label, size_t label_len) {
  WGPUShaderSourceWGSL src;
  WGPUShaderModuleDescriptor d;
  memset(&src, 0, sizeof src); memset(&d, 0, sizeof d);
  src.chain.sType = WGPUSType_ShaderSourceWGSL;
  src.code = zm_sv(code, code_len);
  d.nextInChain = &src.chain;
  d.label = zm_sv(label, label_len);
  return wgpuDeviceCreateShaderModule(device, &d);
}

/* wgpu.h's wgpuDeviceCreateShaderModuleTrusted: the same module with naga's runtime checks chosen by
 * `checks` (WGPUShaderRuntimeChecks bits: 1 bounds checks, 2 forced loop bounding; 0 = none). */
WGPUShaderModule zm_create_shader_module_wgsl_trusted(WGPUDevice device, const char *code, size_t code_len, const char *label, size_t label_len, uint32_t checks) {
  WGPUShaderSourceWGSL src;
  WGPUShaderModuleDescriptor d;
  memset(&src, 0, sizeof src); memset(&d, 0, sizeof d);
  src.chain.sType = WGPUSType_ShaderSourceWGSL;
  src.code = zm_sv(code, code_len);
  d.nextInChain = &src.chain;
  d.label = zm_sv(label, label_len);
  return wgpuDeviceCreateShaderModuleTrusted(device, &d, (WGPUShaderRuntimeChecks)checks);
}

/* entries: 5 uint64 per entry: binding, visibility, buffer binding type, hasDynamicOffset, minBindingSize. */
WGPUBindGroupLayout zm_create_bind_group_layout(WGPUDevice device, const uint64_t *entries, size_t count, const char *label, size_t label_len) {
  WGPUBindGroupLayoutDescriptor d;
  WGPUBindGroupLayoutEntry *e = (WGPUBindGroupLayoutEntry *)calloc(count ? count : 1, sizeof(WGPUBindGroupLayoutEntry));
  WGPUBindGroupLayout r;
  size_t i;
  for (i = 0; i < count; i++) {
    const uint64_t *x = entries + 5 * i;
    e[i].binding = (uint32_t)x[0];
    e[i].visibility = x[1];
    e[i].bindingArraySize = 0;
    e[i].buffer.type = (WGPUBufferBindingType)x[2];
    e[i].buffer.hasDynamicOffset = (WGPUBool)x[3];
    e[i].buffer.minBindingSize = x[4];
    e[i].sampler.type = WGPUSamplerBindingType_BindingNotUsed;
    e[i].texture.sampleType = WGPUTextureSampleType_BindingNotUsed;
    e[i].storageTexture.access = WGPUStorageTextureAccess_BindingNotUsed;
  }
  memset(&d, 0, sizeof d);
  d.label = zm_sv(label, label_len);
  d.entryCount = count;
  d.entries = e;
  r = wgpuDeviceCreateBindGroupLayout(device, &d);
  free(e);
  return r;
}

WGPUPipelineLayout zm_create_pipeline_layout(WGPUDevice device, const WGPUBindGroupLayout *layouts, size_t count, uint32_t immediate_size, const char *label, size_t label_len) {
  WGPUPipelineLayoutDescriptor d;
  memset(&d, 0, sizeof d);
  d.label = zm_sv(label, label_len);
  d.bindGroupLayoutCount = count;
  d.bindGroupLayouts = layouts;
  d.immediateSize = immediate_size;
  return wgpuDeviceCreatePipelineLayout(device, &d);
}

/* Compute pipeline. layout NULL = "auto". Constants: keys concatenated in key_bytes with
 * key_lens[i] bytes each, values[i] the doubles. */
WGPUComputePipeline zm_create_compute_pipeline(WGPUDevice device, WGPUPipelineLayout layout, WGPUShaderModule module,
                                               const char *entry, size_t entry_len,
                                               const char *key_bytes, const uint32_t *key_lens, const double *values, size_t constant_count,
                                               const char *label, size_t label_len) {
  WGPUComputePipelineDescriptor d;
  WGPUConstantEntry *c = (WGPUConstantEntry *)calloc(constant_count ? constant_count : 1, sizeof(WGPUConstantEntry));
  WGPUComputePipeline r;
  size_t i, off = 0;
  for (i = 0; i < constant_count; i++) {
    c[i].key = zm_sv(key_bytes + off, key_lens[i]);
    c[i].value = values[i];
    off += key_lens[i];
  }
  memset(&d, 0, sizeof d);
  d.label = zm_sv(label, label_len);
  d.layout = layout;
  d.compute.module = module;
  d.compute.entryPoint = zm_sv(entry, entry_len);
  d.compute.constantCount = constant_count;
  d.compute.constants = c;
  r = wgpuDeviceCreateComputePipeline(device, &d);
  free(c);
  return r;
}

/* entries: 4 uint64 per entry: binding, buffer handle, offset, size (UINT64_MAX = whole size). */
WGPUBindGroup zm_create_bind_group(WGPUDevice device, WGPUBindGroupLayout layout, const uint64_t *entries, size_t count, const char *label, size_t label_len) {
  WGPUBindGroupDescriptor d;
  WGPUBindGroupEntry *e = (WGPUBindGroupEntry *)calloc(count ? count : 1, sizeof(WGPUBindGroupEntry));
  WGPUBindGroup r;
  size_t i;
  for (i = 0; i < count; i++) {
    const uint64_t *x = entries + 4 * i;
    e[i].binding = (uint32_t)x[0];
    e[i].buffer = (WGPUBuffer)(uintptr_t)x[1];
    e[i].offset = x[2];
    e[i].size = x[3];
  }
  memset(&d, 0, sizeof d);
  d.label = zm_sv(label, label_len);
  d.layout = layout;
  d.entryCount = count;
  d.entries = e;
  r = wgpuDeviceCreateBindGroup(device, &d);
  free(e);
  return r;
}

/* ---------------------------------------------------------------------------------------------- */
/* commands, queue, queries                                                                        */

WGPUCommandEncoder zm_create_command_encoder(WGPUDevice device, const char *label, size_t label_len) {
  WGPUCommandEncoderDescriptor d;
  memset(&d, 0, sizeof d);
  d.label = zm_sv(label, label_len);
  return wgpuDeviceCreateCommandEncoder(device, &d);
}

/* query_set NULL: no timestamp writes. Indices UINT32_MAX = not written. */
WGPUComputePassEncoder zm_begin_compute_pass(WGPUCommandEncoder encoder, const char *label, size_t label_len,
                                             WGPUQuerySet query_set, uint32_t begin_index, uint32_t end_index) {
  WGPUComputePassDescriptor d;
  WGPUPassTimestampWrites t;
  memset(&d, 0, sizeof d); memset(&t, 0, sizeof t);
  d.label = zm_sv(label, label_len);
  if (query_set) {
    t.querySet = query_set;
    t.beginningOfPassWriteIndex = begin_index;
    t.endOfPassWriteIndex = end_index;
    d.timestampWrites = &t;
  }
  return wgpuCommandEncoderBeginComputePass(encoder, &d);
}

WGPUCommandBuffer zm_encoder_finish(WGPUCommandEncoder encoder, const char *label, size_t label_len) {
  WGPUCommandBufferDescriptor d;
  memset(&d, 0, sizeof d);
  d.label = zm_sv(label, label_len);
  return wgpuCommandEncoderFinish(encoder, &d);
}

uint64_t zm_queue_on_submitted_work_done(WGPUQueue queue, zm_slot *slot) {
  WGPUQueueWorkDoneCallbackInfo cb;
  WGPUFuture f;
  memset(&cb, 0, sizeof cb);
  cb.mode = WGPUCallbackMode_AllowProcessEvents;
  cb.callback = zm_on_work_done;
  cb.userdata1 = slot;
  f = wgpuQueueOnSubmittedWorkDone(queue, cb);
  return f.id;
}

WGPUQuerySet zm_create_query_set(WGPUDevice device, uint32_t type, uint32_t count, const char *label, size_t label_len) {
  WGPUQuerySetDescriptor d;
  memset(&d, 0, sizeof d);
  d.label = zm_sv(label, label_len);
  d.type = (WGPUQueryType)type;
  d.count = count;
  return wgpuDeviceCreateQuerySet(device, &d);
}

/* Returns 1 if the queue is empty after polling. submission_index 0 = poll everything. */
int32_t zm_device_poll(WGPUDevice device, int32_t wait, uint64_t submission_index) {
  WGPUSubmissionIndex idx = submission_index;
  return (int32_t)wgpuDevicePoll(device, (WGPUBool)wait, submission_index ? &idx : NULL);
}

/* Debug groups and markers (WGPUStringView by value). kind: 0 push, 1 insert marker; pass != 0
 * targets a compute pass encoder, else a command encoder. */
void zm_debug_label(void *encoder, int32_t is_pass, int32_t kind, const char *label, size_t label_len) {
  WGPUStringView v = zm_sv(label ? label : "", label ? label_len : 0);
  if (is_pass) {
    if (kind == 0) wgpuComputePassEncoderPushDebugGroup((WGPUComputePassEncoder)encoder, v);
    else wgpuComputePassEncoderInsertDebugMarker((WGPUComputePassEncoder)encoder, v);
  } else {
    if (kind == 0) wgpuCommandEncoderPushDebugGroup((WGPUCommandEncoder)encoder, v);
    else wgpuCommandEncoderInsertDebugMarker((WGPUCommandEncoder)encoder, v);
  }
}
