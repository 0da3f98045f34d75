//! `#[repr(C)]` mirrors of the webgpu.h structs (wgpu-native 29.0.1.1 headers) that our binding's
//! shim (kernels/src/ffi/shim.c) passes in, plus the enum values it uses. Sizes are checked at
//! compile time against the C compiler's `sizeof` on x86-64 Linux (see the `const` asserts below).
#![allow(non_snake_case, non_camel_case_types, dead_code)]

use std::ffi::c_void;

pub type WGPUBool = u32;
pub type Handle = *mut c_void;

/// `WGPUStringView`: `data == NULL` with `length == WGPU_STRLEN` is "no string".
#[repr(C)]
#[derive(Clone, Copy)]
pub struct StringView {
    pub data: *const u8,
    pub length: usize,
}
pub const WGPU_STRLEN: usize = usize::MAX;

impl StringView {
    /// The bytes as a Rust string (lossy UTF-8); `None` for the null view.
    pub unsafe fn to_string(&self) -> Option<String> {
        if self.data.is_null() {
            return None;
        }
        let n = if self.length == WGPU_STRLEN { std::ffi::CStr::from_ptr(self.data as *const i8).to_bytes().len() } else { self.length };
        Some(String::from_utf8_lossy(std::slice::from_raw_parts(self.data, n)).into_owned())
    }
    /// A view of `s` (valid while `s` lives).
    pub fn of(s: &str) -> StringView {
        StringView { data: s.as_ptr(), length: s.len() }
    }
    pub const NULL: StringView = StringView { data: std::ptr::null(), length: WGPU_STRLEN };
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct Future {
    pub id: u64,
}

#[repr(C)]
pub struct ChainedStruct {
    pub next: *const ChainedStruct,
    pub sType: u32,
}

/// Generic `*CallbackInfo` with a mode (request adapter/device, map, work done, pop error scope, device lost).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct CallbackInfo<F: Copy> {
    pub nextInChain: *const ChainedStruct,
    pub mode: u32,
    pub callback: Option<F>,
    pub userdata1: *mut c_void,
    pub userdata2: *mut c_void,
}

pub type RequestAdapterCallback = unsafe extern "C" fn(u32, Handle, StringView, *mut c_void, *mut c_void);
pub type RequestDeviceCallback = unsafe extern "C" fn(u32, Handle, StringView, *mut c_void, *mut c_void);
pub type BufferMapCallback = unsafe extern "C" fn(u32, StringView, *mut c_void, *mut c_void);
pub type QueueWorkDoneCallback = unsafe extern "C" fn(u32, StringView, *mut c_void, *mut c_void);
pub type PopErrorScopeCallback = unsafe extern "C" fn(u32, u32, StringView, *mut c_void, *mut c_void);
pub type DeviceLostCallback = unsafe extern "C" fn(*const Handle, u32, StringView, *mut c_void, *mut c_void);
pub type UncapturedErrorCallback = unsafe extern "C" fn(*const Handle, u32, StringView, *mut c_void, *mut c_void);

#[repr(C)]
#[derive(Clone, Copy)]
pub struct UncapturedErrorCallbackInfo {
    pub nextInChain: *const ChainedStruct,
    pub callback: Option<UncapturedErrorCallback>,
    pub userdata1: *mut c_void,
    pub userdata2: *mut c_void,
}

#[repr(C)]
pub struct RequestAdapterOptions {
    pub nextInChain: *const ChainedStruct,
    pub featureLevel: u32,
    pub powerPreference: u32,
    pub forceFallbackAdapter: WGPUBool,
    pub backendType: u32,
    pub compatibleSurface: Handle,
}

#[repr(C)]
pub struct AdapterInfo {
    pub nextInChain: *const ChainedStruct,
    pub vendor: StringView,
    pub architecture: StringView,
    pub device: StringView,
    pub description: StringView,
    pub backendType: u32,
    pub adapterType: u32,
    pub vendorID: u32,
    pub deviceID: u32,
    pub subgroupMinSize: u32,
    pub subgroupMaxSize: u32,
}

#[repr(C)]
pub struct SupportedFeatures {
    pub featureCount: usize,
    pub features: *const u32,
}

#[repr(C)]
pub struct Limits {
    pub nextInChain: *const ChainedStruct,
    pub maxTextureDimension1D: u32,
    pub maxTextureDimension2D: u32,
    pub maxTextureDimension3D: u32,
    pub maxTextureArrayLayers: u32,
    pub maxBindGroups: u32,
    pub maxBindGroupsPlusVertexBuffers: u32,
    pub maxBindingsPerBindGroup: u32,
    pub maxDynamicUniformBuffersPerPipelineLayout: u32,
    pub maxDynamicStorageBuffersPerPipelineLayout: u32,
    pub maxSampledTexturesPerShaderStage: u32,
    pub maxSamplersPerShaderStage: u32,
    pub maxStorageBuffersPerShaderStage: u32,
    pub maxStorageTexturesPerShaderStage: u32,
    pub maxUniformBuffersPerShaderStage: u32,
    pub maxUniformBufferBindingSize: u64,
    pub maxStorageBufferBindingSize: u64,
    pub minUniformBufferOffsetAlignment: u32,
    pub minStorageBufferOffsetAlignment: u32,
    pub maxVertexBuffers: u32,
    pub maxBufferSize: u64,
    pub maxVertexAttributes: u32,
    pub maxVertexBufferArrayStride: u32,
    pub maxInterStageShaderVariables: u32,
    pub maxColorAttachments: u32,
    pub maxColorAttachmentBytesPerSample: u32,
    pub maxComputeWorkgroupStorageSize: u32,
    pub maxComputeInvocationsPerWorkgroup: u32,
    pub maxComputeWorkgroupSizeX: u32,
    pub maxComputeWorkgroupSizeY: u32,
    pub maxComputeWorkgroupSizeZ: u32,
    pub maxComputeWorkgroupsPerDimension: u32,
    pub maxImmediateSize: u32,
}

#[repr(C)]
pub struct QueueDescriptor {
    pub nextInChain: *const ChainedStruct,
    pub label: StringView,
}

#[repr(C)]
pub struct DeviceDescriptor {
    pub nextInChain: *const ChainedStruct,
    pub label: StringView,
    pub requiredFeatureCount: usize,
    pub requiredFeatures: *const u32,
    pub requiredLimits: *const Limits,
    pub defaultQueue: QueueDescriptor,
    pub deviceLostCallbackInfo: CallbackInfo<DeviceLostCallback>,
    pub uncapturedErrorCallbackInfo: UncapturedErrorCallbackInfo,
}

#[repr(C)]
pub struct BufferDescriptor {
    pub nextInChain: *const ChainedStruct,
    pub label: StringView,
    pub usage: u64,
    pub size: u64,
    pub mappedAtCreation: WGPUBool,
}

#[repr(C)]
pub struct ShaderModuleDescriptor {
    pub nextInChain: *const ChainedStruct,
    pub label: StringView,
}

#[repr(C)]
pub struct ShaderSourceWGSL {
    pub chain: ChainedStruct,
    pub code: StringView,
}
pub const STYPE_SHADER_SOURCE_WGSL: u32 = 2;

#[repr(C)]
pub struct BufferBindingLayout {
    pub nextInChain: *const ChainedStruct,
    pub type_: u32,
    pub hasDynamicOffset: WGPUBool,
    pub minBindingSize: u64,
}
#[repr(C)]
pub struct SamplerBindingLayout {
    pub nextInChain: *const ChainedStruct,
    pub type_: u32,
}
#[repr(C)]
pub struct TextureBindingLayout {
    pub nextInChain: *const ChainedStruct,
    pub sampleType: u32,
    pub viewDimension: u32,
    pub multisampled: WGPUBool,
}
#[repr(C)]
pub struct StorageTextureBindingLayout {
    pub nextInChain: *const ChainedStruct,
    pub access: u32,
    pub format: u32,
    pub viewDimension: u32,
}
#[repr(C)]
pub struct BindGroupLayoutEntry {
    pub nextInChain: *const ChainedStruct,
    pub binding: u32,
    pub visibility: u64,
    pub bindingArraySize: u32,
    pub buffer: BufferBindingLayout,
    pub sampler: SamplerBindingLayout,
    pub texture: TextureBindingLayout,
    pub storageTexture: StorageTextureBindingLayout,
}
#[repr(C)]
pub struct BindGroupLayoutDescriptor {
    pub nextInChain: *const ChainedStruct,
    pub label: StringView,
    pub entryCount: usize,
    pub entries: *const BindGroupLayoutEntry,
}
#[repr(C)]
pub struct PipelineLayoutDescriptor {
    pub nextInChain: *const ChainedStruct,
    pub label: StringView,
    pub bindGroupLayoutCount: usize,
    pub bindGroupLayouts: *const Handle,
    pub immediateSize: u32,
}
#[repr(C)]
pub struct ConstantEntry {
    pub nextInChain: *const ChainedStruct,
    pub key: StringView,
    pub value: f64,
}
#[repr(C)]
pub struct ComputeState {
    pub nextInChain: *const ChainedStruct,
    pub module: Handle,
    pub entryPoint: StringView,
    pub constantCount: usize,
    pub constants: *const ConstantEntry,
}
#[repr(C)]
pub struct ComputePipelineDescriptor {
    pub nextInChain: *const ChainedStruct,
    pub label: StringView,
    pub layout: Handle,
    pub compute: ComputeState,
}
#[repr(C)]
pub struct BindGroupEntry {
    pub nextInChain: *const ChainedStruct,
    pub binding: u32,
    pub buffer: Handle,
    pub offset: u64,
    pub size: u64,
    pub sampler: Handle,
    pub textureView: Handle,
}
#[repr(C)]
pub struct BindGroupDescriptor {
    pub nextInChain: *const ChainedStruct,
    pub label: StringView,
    pub layout: Handle,
    pub entryCount: usize,
    pub entries: *const BindGroupEntry,
}
#[repr(C)]
pub struct LabelDescriptor {
    pub nextInChain: *const ChainedStruct,
    pub label: StringView,
}
#[repr(C)]
pub struct PassTimestampWrites {
    pub nextInChain: *const ChainedStruct,
    pub querySet: Handle,
    pub beginningOfPassWriteIndex: u32,
    pub endOfPassWriteIndex: u32,
}
#[repr(C)]
pub struct ComputePassDescriptor {
    pub nextInChain: *const ChainedStruct,
    pub label: StringView,
    pub timestampWrites: *const PassTimestampWrites,
}
#[repr(C)]
pub struct QuerySetDescriptor {
    pub nextInChain: *const ChainedStruct,
    pub label: StringView,
    pub type_: u32,
    pub count: u32,
}

// Sizes from gcc `sizeof` on x86-64 Linux against webgpu.h of wgpu-native 29.0.1.1.
const _: () = assert!(std::mem::size_of::<StringView>() == 16);
const _: () = assert!(std::mem::size_of::<CallbackInfo<BufferMapCallback>>() == 40);
const _: () = assert!(std::mem::size_of::<UncapturedErrorCallbackInfo>() == 32);
const _: () = assert!(std::mem::size_of::<RequestAdapterOptions>() == 32);
const _: () = assert!(std::mem::size_of::<AdapterInfo>() == 96);
const _: () = assert!(std::mem::size_of::<Limits>() == 152);
const _: () = assert!(std::mem::size_of::<DeviceDescriptor>() == 144);
const _: () = assert!(std::mem::size_of::<BufferDescriptor>() == 48);
const _: () = assert!(std::mem::size_of::<BindGroupLayoutEntry>() == 120);
const _: () = assert!(std::mem::size_of::<PipelineLayoutDescriptor>() == 48);
const _: () = assert!(std::mem::size_of::<ComputePipelineDescriptor>() == 80);
const _: () = assert!(std::mem::size_of::<BindGroupEntry>() == 56);
const _: () = assert!(std::mem::size_of::<BindGroupDescriptor>() == 48);
const _: () = assert!(std::mem::size_of::<ComputePassDescriptor>() == 32);
const _: () = assert!(std::mem::size_of::<PassTimestampWrites>() == 24);
const _: () = assert!(std::mem::size_of::<QuerySetDescriptor>() == 32);
const _: () = assert!(std::mem::size_of::<ConstantEntry>() == 32);

// Enum values (webgpu.h).
pub const STATUS_SUCCESS: u32 = 1;
pub const STATUS_ERROR: u32 = 2;
pub const ERROR_TYPE_NO_ERROR: u32 = 1;
pub const ERROR_TYPE_VALIDATION: u32 = 2;
pub const ERROR_TYPE_OUT_OF_MEMORY: u32 = 3;
pub const ERROR_TYPE_INTERNAL: u32 = 4;
pub const ERROR_FILTER_VALIDATION: u32 = 1;
pub const ERROR_FILTER_OUT_OF_MEMORY: u32 = 2;
pub const ERROR_FILTER_INTERNAL: u32 = 3;
pub const CB_SUCCESS: u32 = 1; // *Status_Success for request/map/work-done/pop
pub const CB_ERROR_MAP: u32 = 3; // WGPUMapAsyncStatus_Error
pub const CB_ABORTED_MAP: u32 = 4; // WGPUMapAsyncStatus_Aborted
pub const REQUEST_ADAPTER_UNAVAILABLE: u32 = 3;
pub const REQUEST_DEVICE_ERROR: u32 = 3;
pub const POP_ERROR_SCOPE_ERROR: u32 = 3;
pub const DEVICE_LOST_UNKNOWN: u32 = 1;
pub const DEVICE_LOST_DESTROYED: u32 = 2;
pub const BUFFER_BINDING_UNIFORM: u32 = 2;
pub const BUFFER_BINDING_STORAGE: u32 = 3;
pub const BUFFER_BINDING_READ_ONLY_STORAGE: u32 = 4;
pub const QUERY_TYPE_OCCLUSION: u32 = 1;
pub const QUERY_TYPE_TIMESTAMP: u32 = 2;
pub const LIMIT_U32_UNDEFINED: u32 = u32::MAX;
pub const LIMIT_U64_UNDEFINED: u64 = u64::MAX;
pub const WHOLE_SIZE: u64 = u64::MAX;
pub const QUERY_SET_INDEX_UNDEFINED: u32 = u32::MAX;
