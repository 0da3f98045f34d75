//! Conversions between webgpu.h values (feature ids, WGPULimits, adapter info) and wgpu's types.
use crate::abi;
use wgpu::Features;

/// WGPUFeatureName (webgpu.h) / WGPUNativeFeature (wgpu.h 29) id ↔ wgpu feature flag. Only the
/// features a compute engine can use are listed; others are neither reported nor requestable.
pub const FEATURES: &[(u32, Features)] = &[
    (0x02, Features::DEPTH_CLIP_CONTROL),
    (0x03, Features::DEPTH32FLOAT_STENCIL8),
    (0x04, Features::TEXTURE_COMPRESSION_BC),
    (0x09, Features::TIMESTAMP_QUERY),
    (0x0a, Features::INDIRECT_FIRST_INSTANCE),
    (0x0b, Features::SHADER_F16),
    (0x0c, Features::RG11B10UFLOAT_RENDERABLE),
    (0x0d, Features::BGRA8UNORM_STORAGE),
    (0x0e, Features::FLOAT32_FILTERABLE),
    (0x10, Features::CLIP_DISTANCES),
    (0x11, Features::DUAL_SOURCE_BLENDING),
    (0x15, Features::PRIMITIVE_INDEX),
    (0x30001, Features::IMMEDIATES),
    (0x3000e, Features::MAPPABLE_PRIMARY_BUFFERS),
    (0x3001d, Features::SHADER_F64),
    (0x3001e, Features::SHADER_I16),
    (0x30021, Features::SUBGROUP),
    (0x30023, Features::SUBGROUP_BARRIER),
    (0x30024, Features::TIMESTAMP_QUERY_INSIDE_ENCODERS),
    (0x30025, Features::TIMESTAMP_QUERY_INSIDE_PASSES),
    (0x30026, Features::SHADER_INT64),
    (0x30027, Features::SHADER_FLOAT32_ATOMIC),
    (0x3002b, Features::PIPELINE_CACHE),
    (0x3003b, Features::EXPERIMENTAL_COOPERATIVE_MATRIX),
];

/// WGPUFeatureName_CoreFeaturesAndLimits: every wgpu device is a core (not compatibility) device.
pub const CORE_FEATURES_AND_LIMITS: u32 = 0x01;
/// WGPUFeatureName_Subgroups (standard id): granted as wgpu's SUBGROUP.
pub const SUBGROUPS_STANDARD: u32 = 0x12;

/// Feature ids for `f`, core-features-and-limits first.
pub fn feature_ids(f: Features) -> Vec<u32> {
    let mut out = vec![CORE_FEATURES_AND_LIMITS];
    for (id, flag) in FEATURES {
        if f.contains(*flag) {
            out.push(*id);
            if *flag == Features::SUBGROUP {
                out.push(SUBGROUPS_STANDARD);
            }
        }
    }
    out
}

/// The wgpu flag of a feature id; `Ok(empty)` for core-features-and-limits, `Err(id)` when unknown.
pub fn feature_flag(id: u32) -> Result<Features, u32> {
    if id == CORE_FEATURES_AND_LIMITS {
        return Ok(Features::empty());
    }
    if id == SUBGROUPS_STANDARD {
        return Ok(Features::SUBGROUP);
    }
    FEATURES.iter().find(|(i, _)| *i == id).map(|(_, f)| *f).ok_or(id)
}

/// Fill a WGPULimits from wgpu's limits (nextInChain left as is).
pub fn write_limits(l: &wgpu::Limits, o: &mut abi::Limits) {
    o.maxTextureDimension1D = l.max_texture_dimension_1d;
    o.maxTextureDimension2D = l.max_texture_dimension_2d;
    o.maxTextureDimension3D = l.max_texture_dimension_3d;
    o.maxTextureArrayLayers = l.max_texture_array_layers;
    o.maxBindGroups = l.max_bind_groups;
    o.maxBindGroupsPlusVertexBuffers = l.max_bind_groups_plus_vertex_buffers;
    o.maxBindingsPerBindGroup = l.max_bindings_per_bind_group;
    o.maxDynamicUniformBuffersPerPipelineLayout = l.max_dynamic_uniform_buffers_per_pipeline_layout;
    o.maxDynamicStorageBuffersPerPipelineLayout = l.max_dynamic_storage_buffers_per_pipeline_layout;
    o.maxSampledTexturesPerShaderStage = l.max_sampled_textures_per_shader_stage;
    o.maxSamplersPerShaderStage = l.max_samplers_per_shader_stage;
    o.maxStorageBuffersPerShaderStage = l.max_storage_buffers_per_shader_stage;
    o.maxStorageTexturesPerShaderStage = l.max_storage_textures_per_shader_stage;
    o.maxUniformBuffersPerShaderStage = l.max_uniform_buffers_per_shader_stage;
    o.maxUniformBufferBindingSize = l.max_uniform_buffer_binding_size;
    o.maxStorageBufferBindingSize = l.max_storage_buffer_binding_size;
    o.minUniformBufferOffsetAlignment = l.min_uniform_buffer_offset_alignment;
    o.minStorageBufferOffsetAlignment = l.min_storage_buffer_offset_alignment;
    o.maxVertexBuffers = l.max_vertex_buffers;
    o.maxBufferSize = l.max_buffer_size;
    o.maxVertexAttributes = l.max_vertex_attributes;
    o.maxVertexBufferArrayStride = l.max_vertex_buffer_array_stride;
    o.maxInterStageShaderVariables = l.max_inter_stage_shader_variables;
    o.maxColorAttachments = l.max_color_attachments;
    o.maxColorAttachmentBytesPerSample = l.max_color_attachment_bytes_per_sample;
    o.maxComputeWorkgroupStorageSize = l.max_compute_workgroup_storage_size;
    o.maxComputeInvocationsPerWorkgroup = l.max_compute_invocations_per_workgroup;
    o.maxComputeWorkgroupSizeX = l.max_compute_workgroup_size_x;
    o.maxComputeWorkgroupSizeY = l.max_compute_workgroup_size_y;
    o.maxComputeWorkgroupSizeZ = l.max_compute_workgroup_size_z;
    o.maxComputeWorkgroupsPerDimension = l.max_compute_workgroups_per_dimension;
    o.maxImmediateSize = l.max_immediate_size;
}

/// wgpu limits for a device request: WebGPU's defaults, overridden by every defined field of `r`.
pub fn read_limits(r: &abi::Limits) -> wgpu::Limits {
    let mut l = wgpu::Limits::default();
    macro_rules! set32 {
        ($c:ident, $w:ident) => {
            if r.$c != abi::LIMIT_U32_UNDEFINED {
                l.$w = r.$c;
            }
        };
    }
    macro_rules! set64 {
        ($c:ident, $w:ident) => {
            if r.$c != abi::LIMIT_U64_UNDEFINED {
                l.$w = r.$c;
            }
        };
    }
    set32!(maxTextureDimension1D, max_texture_dimension_1d);
    set32!(maxTextureDimension2D, max_texture_dimension_2d);
    set32!(maxTextureDimension3D, max_texture_dimension_3d);
    set32!(maxTextureArrayLayers, max_texture_array_layers);
    set32!(maxBindGroups, max_bind_groups);
    set32!(maxBindGroupsPlusVertexBuffers, max_bind_groups_plus_vertex_buffers);
    set32!(maxBindingsPerBindGroup, max_bindings_per_bind_group);
    set32!(maxDynamicUniformBuffersPerPipelineLayout, max_dynamic_uniform_buffers_per_pipeline_layout);
    set32!(maxDynamicStorageBuffersPerPipelineLayout, max_dynamic_storage_buffers_per_pipeline_layout);
    set32!(maxSampledTexturesPerShaderStage, max_sampled_textures_per_shader_stage);
    set32!(maxSamplersPerShaderStage, max_samplers_per_shader_stage);
    set32!(maxStorageBuffersPerShaderStage, max_storage_buffers_per_shader_stage);
    set32!(maxStorageTexturesPerShaderStage, max_storage_textures_per_shader_stage);
    set32!(maxUniformBuffersPerShaderStage, max_uniform_buffers_per_shader_stage);
    set64!(maxUniformBufferBindingSize, max_uniform_buffer_binding_size);
    set64!(maxStorageBufferBindingSize, max_storage_buffer_binding_size);
    set32!(minUniformBufferOffsetAlignment, min_uniform_buffer_offset_alignment);
    set32!(minStorageBufferOffsetAlignment, min_storage_buffer_offset_alignment);
    set32!(maxVertexBuffers, max_vertex_buffers);
    set64!(maxBufferSize, max_buffer_size);
    set32!(maxVertexAttributes, max_vertex_attributes);
    set32!(maxVertexBufferArrayStride, max_vertex_buffer_array_stride);
    set32!(maxInterStageShaderVariables, max_inter_stage_shader_variables);
    set32!(maxColorAttachments, max_color_attachments);
    set32!(maxColorAttachmentBytesPerSample, max_color_attachment_bytes_per_sample);
    set32!(maxComputeWorkgroupStorageSize, max_compute_workgroup_storage_size);
    set32!(maxComputeInvocationsPerWorkgroup, max_compute_invocations_per_workgroup);
    set32!(maxComputeWorkgroupSizeX, max_compute_workgroup_size_x);
    set32!(maxComputeWorkgroupSizeY, max_compute_workgroup_size_y);
    set32!(maxComputeWorkgroupSizeZ, max_compute_workgroup_size_z);
    set32!(maxComputeWorkgroupsPerDimension, max_compute_workgroups_per_dimension);
    set32!(maxImmediateSize, max_immediate_size);
    l
}

/// A heap copy of `s` as a WGPUStringView (freed by [`free_string`]).
pub fn owned_string(s: &str) -> abi::StringView {
    let b: Box<[u8]> = s.as_bytes().to_vec().into_boxed_slice();
    let length = b.len();
    abi::StringView { data: Box::into_raw(b) as *const u8, length }
}

/// Free a view made by [`owned_string`].
pub unsafe fn free_string(v: abi::StringView) {
    if !v.data.is_null() && v.length != abi::WGPU_STRLEN {
        drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(v.data as *mut u8, v.length)));
    }
}

/// Fill a WGPUAdapterInfo (strings are heap copies freed by wgpuAdapterInfoFreeMembers).
pub fn write_adapter_info(i: &wgpu::AdapterInfo, o: &mut abi::AdapterInfo) {
    o.vendor = owned_string(&vendor_name(i.vendor));
    o.architecture = owned_string("");
    o.device = owned_string(&i.name);
    let desc = if i.driver_info.is_empty() { i.driver.clone() } else { format!("{} {}", i.driver, i.driver_info) };
    o.description = owned_string(&desc);
    o.backendType = match i.backend {
        wgpu::Backend::Noop => 1,
        wgpu::Backend::Vulkan => 6,
        #[allow(unreachable_patterns)]
        _ => 0,
    };
    o.adapterType = match i.device_type {
        wgpu::DeviceType::DiscreteGpu => 1,
        wgpu::DeviceType::IntegratedGpu => 2,
        wgpu::DeviceType::Cpu => 3,
        _ => 4,
    };
    o.vendorID = i.vendor;
    o.deviceID = i.device;
    o.subgroupMinSize = i.subgroup_min_size;
    o.subgroupMaxSize = i.subgroup_max_size;
}

fn vendor_name(id: u32) -> String {
    match id {
        0x10de => "nvidia".into(),
        0x1002 => "amd".into(),
        0x8086 => "intel".into(),
        0x10005 => "mesa".into(),
        _ => format!("0x{id:x}"),
    }
}
