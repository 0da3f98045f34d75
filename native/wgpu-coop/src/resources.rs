//! Buffers (creation, mapping), shader modules, bind group layouts, pipeline layouts, compute
//! pipelines and bind groups (webgpu.h) on the wgpu crate.
use crate::abi::{self, Handle, StringView};
use crate::device::{dev, ErrSink};
use crate::util::{c_slice, guard, release};
use std::cell::RefCell;
use std::ffi::c_void;
use std::num::NonZeroU64;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

enum View {
    Read(wgpu::BufferView),
    Write(wgpu::BufferViewMut),
}

struct MapState {
    offset: u64,
    size: u64,
    write: bool,
    pending: bool,
    view: Option<View>,
    aborted: Arc<AtomicBool>,
}

/// WGPUBuffer. The mapped range is viewed once, whole, on the first wgpuBufferGetMappedRange; later
/// calls return pointers into that view (wgpu forbids overlapping views; WebGPU allows repeated calls).
pub struct Buf {
    pub buffer: wgpu::Buffer,
    sink: Arc<ErrSink>,
    st: RefCell<MapState>,
}

unsafe fn buf<'a>(b: Handle) -> &'a Buf {
    &*(b as *mut Buf)
}
/// The wgpu buffer behind a WGPUBuffer handle.
pub unsafe fn wbuf<'a>(b: Handle) -> &'a wgpu::Buffer {
    &buf(b).buffer
}

fn label(v: &StringView) -> Option<String> {
    unsafe { v.to_string() }
}

#[no_mangle]
pub unsafe extern "C" fn wgpuDeviceCreateBuffer(d: Handle, desc: *const abi::BufferDescriptor) -> Handle {
    let dv = dev(d);
    let ds = &*desc;
    guard(std::ptr::null_mut(), || {
        let l = label(&ds.label);
        let buffer = dv.device.create_buffer(&wgpu::BufferDescriptor {
            label: l.as_deref(),
            size: ds.size,
            usage: wgpu::BufferUsages::from_bits_truncate(ds.usage as u32),
            mapped_at_creation: ds.mappedAtCreation != 0,
        });
        let mapped = ds.mappedAtCreation != 0;
        let st = MapState { offset: 0, size: if mapped { ds.size } else { 0 }, write: true, pending: false, view: None, aborted: Arc::new(AtomicBool::new(false)) };
        Box::into_raw(Box::new(Buf { buffer, sink: dv.sink.clone(), st: RefCell::new(st) })) as Handle
    })
}

#[no_mangle]
pub unsafe extern "C" fn wgpuBufferRelease(b: Handle) {
    release::<Buf>(b);
}

#[no_mangle]
pub unsafe extern "C" fn wgpuBufferDestroy(b: Handle) {
    let bf = buf(b);
    guard((), || {
        let mut st = bf.st.borrow_mut();
        st.view = None;
        if st.pending {
            st.aborted.store(true, Ordering::SeqCst);
        }
        st.pending = false;
        drop(st);
        bf.buffer.destroy();
    })
}

#[no_mangle]
pub unsafe extern "C" fn wgpuBufferUnmap(b: Handle) {
    let bf = buf(b);
    guard((), || {
        let mut st = bf.st.borrow_mut();
        st.view = None;
        if st.pending {
            st.aborted.store(true, Ordering::SeqCst);
        }
        st.pending = false;
        st.size = 0;
        drop(st);
        bf.buffer.unmap();
    })
}

struct MapCb {
    f: usize,
    u1: usize,
    u2: usize,
}

#[no_mangle]
pub unsafe extern "C" fn wgpuBufferMapAsync(b: Handle, mode: u64, offset: usize, size: usize, cb: abi::CallbackInfo<abi::BufferMapCallback>) -> abi::Future {
    let bf = buf(b);
    let total = bf.buffer.size();
    let size = if size == usize::MAX { total.saturating_sub(offset as u64) } else { size as u64 };
    let offset = offset as u64;
    let call = MapCb { f: cb.callback.map(|f| f as usize).unwrap_or(0), u1: cb.userdata1 as usize, u2: cb.userdata2 as usize };
    let fire = |c: &MapCb, status: u32, msg: &str| {
        if c.f != 0 {
            let f: abi::BufferMapCallback = std::mem::transmute(c.f);
            f(status, StringView::of(msg), c.u1 as *mut c_void, c.u2 as *mut c_void);
        }
    };
    if offset.checked_add(size).map_or(true, |e| e > total) || size == 0 || offset % 8 != 0 || size % 4 != 0 {
        let m = format!("mapAsync: range offset {offset}, size {size} is invalid for a buffer of {total} bytes");
        bf.sink.report(abi::ERROR_TYPE_VALIDATION, &m);
        fire(&call, abi::CB_ERROR_MAP, &m);
        return abi::Future { id: 4 };
    }
    let aborted = Arc::new(AtomicBool::new(false));
    {
        let mut st = bf.st.borrow_mut();
        *st = MapState { offset, size, write: mode & 2 != 0, pending: true, view: None, aborted: aborted.clone() };
    }
    let m = if mode & 2 != 0 { wgpu::MapMode::Write } else { wgpu::MapMode::Read };
    let ok = guard(false, || {
        bf.buffer.map_async(m, offset..offset + size, move |r| {
            let status = match r {
                Ok(()) => abi::CB_SUCCESS,
                Err(_) if aborted.load(Ordering::SeqCst) => abi::CB_ABORTED_MAP,
                Err(_) => abi::CB_ERROR_MAP,
            };
            let msg = match status {
                abi::CB_SUCCESS => "",
                abi::CB_ABORTED_MAP => "mapping aborted: the buffer was unmapped or destroyed first",
                _ => "mapping failed (see the device's validation error)",
            };
            fire(&call, status, msg);
        });
        true
    });
    if !ok {
        bf.st.borrow_mut().pending = false;
    }
    abi::Future { id: 4 }
}

unsafe fn mapped_range(b: Handle, offset: usize, size: usize) -> *mut c_void {
    let bf = buf(b);
    guard(std::ptr::null_mut(), || {
        let mut st = bf.st.borrow_mut();
        if st.size == 0 {
            return std::ptr::null_mut();
        }
        let (o, s) = (offset as u64, if size == usize::MAX { st.offset + st.size - offset as u64 } else { size as u64 });
        if o < st.offset || o + s > st.offset + st.size {
            return std::ptr::null_mut();
        }
        st.pending = false;
        if st.view.is_none() {
            let slice = bf.buffer.slice(st.offset..st.offset + st.size);
            let v = if st.write { slice.get_mapped_range_mut().map(View::Write) } else { slice.get_mapped_range().map(View::Read) };
            match v {
                Ok(v) => st.view = Some(v),
                Err(e) => {
                    drop(st);
                    bf.sink.report(abi::ERROR_TYPE_VALIDATION, &format!("getMappedRange: {e}"));
                    return std::ptr::null_mut();
                }
            }
        }
        let base: *mut u8 = match st.view.as_mut().unwrap() {
            View::Read(v) => v.as_ptr() as *mut u8,
            View::Write(v) => v.slice(..).as_raw_element_ptr().as_ptr(),
        };
        base.add((o - st.offset) as usize) as *mut c_void
    })
}

#[no_mangle]
pub unsafe extern "C" fn wgpuBufferGetMappedRange(b: Handle, offset: usize, size: usize) -> *mut c_void {
    mapped_range(b, offset, size)
}

#[no_mangle]
pub unsafe extern "C" fn wgpuBufferGetConstMappedRange(b: Handle, offset: usize, size: usize) -> *const c_void {
    mapped_range(b, offset, size)
}

/// WGPUShaderModule.
pub struct Module(pub wgpu::ShaderModule);

unsafe fn create_module(d: Handle, desc: *const abi::ShaderModuleDescriptor, checks: Option<wgpu::ShaderRuntimeChecks>) -> Handle {
    let dv = dev(d);
    let ds = &*desc;
    let mut chain = ds.nextInChain;
    let mut code: Option<String> = None;
    while !chain.is_null() {
        if (*chain).sType == abi::STYPE_SHADER_SOURCE_WGSL {
            code = (*(chain as *const abi::ShaderSourceWGSL)).code.to_string();
        }
        chain = (*chain).next;
    }
    let Some(code) = code else {
        dv.sink.report(abi::ERROR_TYPE_VALIDATION, "createShaderModule: only WGSL sources (WGPUShaderSourceWGSL) are supported by zm_wgpu");
        return std::ptr::null_mut();
    };
    guard(std::ptr::null_mut(), || {
        let l = label(&ds.label);
        let md = wgpu::ShaderModuleDescriptor { label: l.as_deref(), source: wgpu::ShaderSource::Wgsl(code.into()) };
        let m = match checks {
            None => dv.device.create_shader_module(md),
            // SAFETY: the caller (wgpuDeviceCreateShaderModuleTrusted) vouches for the shader.
            Some(c) => unsafe { dv.device.create_shader_module_trusted(md, c) },
        };
        Box::into_raw(Box::new(Module(m))) as Handle
    })
}

/// A WGSL module with naga's runtime checks (bounds checks, loop bounding).
#[no_mangle]
pub unsafe extern "C" fn wgpuDeviceCreateShaderModule(d: Handle, desc: *const abi::ShaderModuleDescriptor) -> Handle {
    create_module(d, desc, None)
}

/// wgpu.h: a WGSL module with only the runtime checks in `checks` (bit 1 bounds checks, bit 2
/// forced loop bounding; other bits concern ray queries and mesh shaders, which compute kernels lack).
#[no_mangle]
pub unsafe extern "C" fn wgpuDeviceCreateShaderModuleTrusted(d: Handle, desc: *const abi::ShaderModuleDescriptor, checks: u64) -> Handle {
    let mut c = wgpu::ShaderRuntimeChecks::unchecked();
    c.bounds_checks = checks & 1 != 0;
    c.force_loop_bounding = checks & 2 != 0;
    c.int_div_checks = true; // not a flag of wgpu.h 29: kept on (division by zero stays defined)
    create_module(d, desc, Some(c))
}

#[no_mangle]
pub unsafe extern "C" fn wgpuShaderModuleRelease(m: Handle) {
    release::<Module>(m);
}

/// WGPUBindGroupLayout.
pub struct Bgl(pub wgpu::BindGroupLayout);
/// WGPUPipelineLayout.
pub struct Pl(pub wgpu::PipelineLayout);
/// WGPUComputePipeline.
pub struct Cp(pub wgpu::ComputePipeline);
/// WGPUBindGroup.
pub struct Bg(pub wgpu::BindGroup);

#[no_mangle]
pub unsafe extern "C" fn wgpuDeviceCreateBindGroupLayout(d: Handle, desc: *const abi::BindGroupLayoutDescriptor) -> Handle {
    let dv = dev(d);
    let ds = &*desc;
    let raw = c_slice(ds.entries, ds.entryCount);
    let mut entries = Vec::with_capacity(raw.len());
    for e in raw {
        let ty = match e.buffer.type_ {
            1 | abi::BUFFER_BINDING_UNIFORM => wgpu::BufferBindingType::Uniform,
            abi::BUFFER_BINDING_STORAGE => wgpu::BufferBindingType::Storage { read_only: false },
            abi::BUFFER_BINDING_READ_ONLY_STORAGE => wgpu::BufferBindingType::Storage { read_only: true },
            t => {
                dv.sink.report(abi::ERROR_TYPE_VALIDATION, &format!("createBindGroupLayout: binding {} is not a buffer binding (type {t}); zm_wgpu supports buffer bindings only", e.binding));
                continue;
            }
        };
        entries.push(wgpu::BindGroupLayoutEntry {
            binding: e.binding,
            visibility: wgpu::ShaderStages::from_bits_truncate(e.visibility as u32),
            ty: wgpu::BindingType::Buffer { ty, has_dynamic_offset: e.buffer.hasDynamicOffset != 0, min_binding_size: NonZeroU64::new(e.buffer.minBindingSize) },
            count: None,
        });
    }
    guard(std::ptr::null_mut(), || {
        let l = label(&ds.label);
        Box::into_raw(Box::new(Bgl(dv.device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor { label: l.as_deref(), entries: &entries })))) as Handle
    })
}

#[no_mangle]
pub unsafe extern "C" fn wgpuBindGroupLayoutRelease(h: Handle) {
    release::<Bgl>(h);
}

#[no_mangle]
pub unsafe extern "C" fn wgpuDeviceCreatePipelineLayout(d: Handle, desc: *const abi::PipelineLayoutDescriptor) -> Handle {
    let dv = dev(d);
    let ds = &*desc;
    let raw = c_slice(ds.bindGroupLayouts, ds.bindGroupLayoutCount);
    let layouts: Vec<Option<&wgpu::BindGroupLayout>> = raw.iter().map(|h| if h.is_null() { None } else { Some(&(*(*h as *mut Bgl)).0) }).collect();
    guard(std::ptr::null_mut(), || {
        let l = label(&ds.label);
        let pl = dv.device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor { label: l.as_deref(), bind_group_layouts: &layouts, immediate_size: ds.immediateSize });
        Box::into_raw(Box::new(Pl(pl))) as Handle
    })
}

#[no_mangle]
pub unsafe extern "C" fn wgpuPipelineLayoutRelease(h: Handle) {
    release::<Pl>(h);
}

#[no_mangle]
pub unsafe extern "C" fn wgpuDeviceCreateComputePipeline(d: Handle, desc: *const abi::ComputePipelineDescriptor) -> Handle {
    let dv = dev(d);
    let ds = &*desc;
    let cs = &ds.compute;
    let raw = c_slice(cs.constants, cs.constantCount);
    let keys: Vec<(String, f64)> = raw.iter().map(|c| (c.key.to_string().unwrap_or_default(), c.value)).collect();
    let consts: Vec<(&str, f64)> = keys.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    let entry = cs.entryPoint.to_string();
    let layout = if ds.layout.is_null() { None } else { Some(&(*(ds.layout as *mut Pl)).0) };
    let module = &(*(cs.module as *mut Module)).0;
    guard(std::ptr::null_mut(), || {
        let l = label(&ds.label);
        let p = dv.device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: l.as_deref(),
            layout,
            module,
            entry_point: entry.as_deref(),
            compilation_options: wgpu::PipelineCompilationOptions { constants: &consts, zero_initialize_workgroup_memory: true },
            cache: None,
        });
        Box::into_raw(Box::new(Cp(p))) as Handle
    })
}

#[no_mangle]
pub unsafe extern "C" fn wgpuComputePipelineRelease(h: Handle) {
    release::<Cp>(h);
}

#[no_mangle]
pub unsafe extern "C" fn wgpuComputePipelineGetBindGroupLayout(p: Handle, index: u32) -> Handle {
    guard(std::ptr::null_mut(), || Box::into_raw(Box::new(Bgl((*(p as *mut Cp)).0.get_bind_group_layout(index)))) as Handle)
}

#[no_mangle]
pub unsafe extern "C" fn wgpuDeviceCreateBindGroup(d: Handle, desc: *const abi::BindGroupDescriptor) -> Handle {
    let dv = dev(d);
    let ds = &*desc;
    let raw = c_slice(ds.entries, ds.entryCount);
    let mut entries = Vec::with_capacity(raw.len());
    for e in raw {
        if e.buffer.is_null() {
            dv.sink.report(abi::ERROR_TYPE_VALIDATION, &format!("createBindGroup: binding {} has no buffer; zm_wgpu supports buffer bindings only", e.binding));
            continue;
        }
        let size = if e.size == abi::WHOLE_SIZE { None } else { NonZeroU64::new(e.size) };
        entries.push(wgpu::BindGroupEntry {
            binding: e.binding,
            resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding { buffer: wbuf(e.buffer), offset: e.offset, size }),
        });
    }
    let layout = &(*(ds.layout as *mut Bgl)).0;
    guard(std::ptr::null_mut(), || {
        let l = label(&ds.label);
        Box::into_raw(Box::new(Bg(dv.device.create_bind_group(&wgpu::BindGroupDescriptor { label: l.as_deref(), layout, entries: &entries })))) as Handle
    })
}

#[no_mangle]
pub unsafe extern "C" fn wgpuBindGroupRelease(h: Handle) {
    release::<Bg>(h);
}
