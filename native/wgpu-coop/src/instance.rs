//! Instance and adapter functions of webgpu.h/wgpu.h on the wgpu crate (Vulkan backend only).
use crate::abi::{self, Handle, StringView};
use crate::convert;
use crate::device::Dev;
use crate::util::{block_on, guard, release};
use std::ffi::c_void;

/// WGPUInstance.
pub struct Inst {
    pub instance: wgpu::Instance,
}

/// WGPUAdapter.
pub struct Adap {
    pub adapter: wgpu::Adapter,
}

/// The version of this library as wgpu-native encodes it: 30.0.2 (the wgpu crate it is built on).
#[no_mangle]
pub extern "C" fn wgpuGetVersion() -> u32 {
    (30 << 24) | (0 << 16) | (2 << 8)
}

#[no_mangle]
pub unsafe extern "C" fn wgpuCreateInstance(_desc: *const c_void) -> Handle {
    guard(std::ptr::null_mut(), || {
        let mut d = wgpu::InstanceDescriptor::new_without_display_handle_from_env();
        d.backends = wgpu::Backends::VULKAN;
        Box::into_raw(Box::new(Inst { instance: wgpu::Instance::new(d) })) as Handle
    })
}

#[no_mangle]
pub unsafe extern "C" fn wgpuInstanceRelease(i: Handle) {
    release::<Inst>(i);
}

/// Drives every device of the instance once without blocking (callbacks of finished work run here).
#[no_mangle]
pub unsafe extern "C" fn wgpuInstanceProcessEvents(i: Handle) {
    if i.is_null() {
        return;
    }
    guard((), || {
        let _ = (*(i as *mut Inst)).instance.poll_all(false);
    })
}

#[no_mangle]
pub unsafe extern "C" fn wgpuInstanceRequestAdapter(
    i: Handle,
    options: *const abi::RequestAdapterOptions,
    cb: abi::CallbackInfo<abi::RequestAdapterCallback>,
) -> abi::Future {
    let inst = &*(i as *mut Inst);
    let (power, fallback, backend) = if options.is_null() { (0, 0, 0) } else { ((*options).powerPreference, (*options).forceFallbackAdapter, (*options).backendType) };
    // WGPUBackendType: 0 undefined (any), 6 Vulkan; this library has no other backend.
    if backend != 0 && backend != 6 {
        if let Some(f) = cb.callback {
            let m = format!("no adapter of WGPUBackendType {backend}: zm_wgpu is built with the Vulkan backend only");
            f(abi::REQUEST_ADAPTER_UNAVAILABLE, std::ptr::null_mut(), StringView::of(&m), cb.userdata1, cb.userdata2);
        }
        return abi::Future { id: 1 };
    }
    let opts = wgpu::RequestAdapterOptions {
        power_preference: match power {
            1 => wgpu::PowerPreference::LowPower,
            2 => wgpu::PowerPreference::HighPerformance,
            _ => wgpu::PowerPreference::None,
        },
        force_fallback_adapter: fallback != 0,
        compatible_surface: None,
        apply_limit_buckets: false,
    };
    let result = guard(Err("wgpu panicked while requesting an adapter".to_string()), || {
        block_on(inst.instance.request_adapter(&opts)).map_err(|e| e.to_string())
    });
    if let Some(f) = cb.callback {
        match result {
            Ok(a) => f(abi::CB_SUCCESS, Box::into_raw(Box::new(Adap { adapter: a })) as Handle, StringView::NULL, cb.userdata1, cb.userdata2),
            Err(m) => f(abi::REQUEST_ADAPTER_UNAVAILABLE, std::ptr::null_mut(), StringView::of(&m), cb.userdata1, cb.userdata2),
        }
    }
    abi::Future { id: 1 }
}

/// Writes the adapters into `out` (when not NULL) and returns their count; each is a new reference.
#[no_mangle]
pub unsafe extern "C" fn wgpuInstanceEnumerateAdapters(i: Handle, _options: *const c_void, out: *mut Handle) -> usize {
    let inst = &*(i as *mut Inst);
    let list = guard(Vec::new(), || block_on(inst.instance.enumerate_adapters(wgpu::Backends::VULKAN)));
    if !out.is_null() {
        for (k, a) in list.iter().enumerate() {
            *out.add(k) = Box::into_raw(Box::new(Adap { adapter: a.clone() })) as Handle;
        }
    }
    list.len()
}

#[no_mangle]
pub unsafe extern "C" fn wgpuAdapterRelease(a: Handle) {
    release::<Adap>(a);
}

#[no_mangle]
pub unsafe extern "C" fn wgpuAdapterGetInfo(a: Handle, info: *mut abi::AdapterInfo) -> u32 {
    convert::write_adapter_info(&(*(a as *mut Adap)).adapter.get_info(), &mut *info);
    abi::STATUS_SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn wgpuDeviceGetAdapterInfo(d: Handle, info: *mut abi::AdapterInfo) -> u32 {
    convert::write_adapter_info(&(*(d as *mut Dev)).device.adapter_info(), &mut *info);
    abi::STATUS_SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn wgpuAdapterInfoFreeMembers(info: abi::AdapterInfo) {
    convert::free_string(info.vendor);
    convert::free_string(info.architecture);
    convert::free_string(info.device);
    convert::free_string(info.description);
}

#[no_mangle]
pub unsafe extern "C" fn wgpuAdapterGetLimits(a: Handle, out: *mut abi::Limits) -> u32 {
    convert::write_limits(&(*(a as *mut Adap)).adapter.limits(), &mut *out);
    abi::STATUS_SUCCESS
}

pub unsafe fn write_features(f: wgpu::Features, out: *mut abi::SupportedFeatures) {
    let ids = convert::feature_ids(f).into_boxed_slice();
    (*out).featureCount = ids.len();
    (*out).features = Box::into_raw(ids) as *const u32;
}

#[no_mangle]
pub unsafe extern "C" fn wgpuAdapterGetFeatures(a: Handle, out: *mut abi::SupportedFeatures) {
    write_features((*(a as *mut Adap)).adapter.features(), out)
}

#[no_mangle]
pub unsafe extern "C" fn wgpuSupportedFeaturesFreeMembers(f: abi::SupportedFeatures) {
    if !f.features.is_null() {
        drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(f.features as *mut u32, f.featureCount)));
    }
}

#[no_mangle]
pub unsafe extern "C" fn wgpuAdapterHasFeature(a: Handle, id: u32) -> u32 {
    match convert::feature_flag(id) {
        Ok(flag) => (*(a as *mut Adap)).adapter.features().contains(flag) as u32,
        Err(_) => 0,
    }
}

/// ZeroMoE extension (not in webgpu.h): the adapter's cooperative-matrix configurations, 6 u32 per
/// entry (M, N, K, AB type, CR type, saturating; types 0 f32, 1 f16, 2 i32, 3 u32). Writes at most
/// `cap` entries into `out` (may be NULL) and returns the total count.
#[no_mangle]
pub unsafe extern "C" fn zmAdapterCooperativeMatrixProperties(a: Handle, out: *mut u32, cap: usize) -> usize {
    let props = guard(Vec::new(), || (*(a as *mut Adap)).adapter.cooperative_matrix_properties());
    let ty = |t: wgpu::CooperativeScalarType| match t {
        wgpu::CooperativeScalarType::F32 => 0u32,
        wgpu::CooperativeScalarType::F16 => 1,
        wgpu::CooperativeScalarType::I32 => 2,
        wgpu::CooperativeScalarType::U32 => 3,
    };
    if !out.is_null() {
        for (k, p) in props.iter().take(cap).enumerate() {
            let row = [p.m_size, p.n_size, p.k_size, ty(p.ab_type), ty(p.cr_type), p.saturating_accumulation as u32];
            std::ptr::copy_nonoverlapping(row.as_ptr(), out.add(6 * k), 6);
        }
    }
    props.len()
}
