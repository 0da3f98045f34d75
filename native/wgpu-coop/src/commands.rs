//! Command encoders, compute passes, command buffers, the queue and query sets (webgpu.h/wgpu.h).
use crate::abi::{self, Handle, StringView};
use crate::device::{dev, Qu, SUBMISSIONS};
use crate::resources::{wbuf, Bg, Cp};
use crate::util::{c_slice, guard, release};
use std::cell::RefCell;
use std::ffi::c_void;

/// WGPUCommandEncoder (the wgpu encoder until finished).
pub struct Enc(RefCell<Option<wgpu::CommandEncoder>>);
/// WGPUComputePassEncoder (the wgpu pass until ended).
pub struct Pass(RefCell<Option<wgpu::ComputePass<'static>>>);
/// WGPUCommandBuffer (until submitted).
pub struct Cmd(RefCell<Option<wgpu::CommandBuffer>>);
/// WGPUQuerySet.
pub struct Qs(pub wgpu::QuerySet);

unsafe fn with_enc(e: Handle, f: impl FnOnce(&mut wgpu::CommandEncoder)) {
    guard((), || {
        if let Some(enc) = (*(e as *mut Enc)).0.borrow_mut().as_mut() {
            f(enc)
        }
    })
}
unsafe fn with_pass(p: Handle, f: impl FnOnce(&mut wgpu::ComputePass<'static>)) {
    guard((), || {
        if let Some(pass) = (*(p as *mut Pass)).0.borrow_mut().as_mut() {
            f(pass)
        }
    })
}
unsafe fn qs<'a>(h: Handle) -> &'a wgpu::QuerySet {
    &(*(h as *mut Qs)).0
}
unsafe fn text(v: StringView) -> String {
    v.to_string().unwrap_or_default()
}

#[no_mangle]
pub unsafe extern "C" fn wgpuDeviceCreateCommandEncoder(d: Handle, desc: *const abi::LabelDescriptor) -> Handle {
    let l = if desc.is_null() { None } else { (*desc).label.to_string() };
    guard(std::ptr::null_mut(), || {
        let e = dev(d).device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: l.as_deref() });
        Box::into_raw(Box::new(Enc(RefCell::new(Some(e))))) as Handle
    })
}

#[no_mangle]
pub unsafe extern "C" fn wgpuCommandEncoderRelease(h: Handle) {
    release::<Enc>(h);
}

#[no_mangle]
pub unsafe extern "C" fn wgpuCommandEncoderFinish(h: Handle, desc: *const abi::LabelDescriptor) -> Handle {
    let _ = desc;
    guard(std::ptr::null_mut(), || {
        let enc = (*(h as *mut Enc)).0.borrow_mut().take();
        match enc {
            Some(e) => Box::into_raw(Box::new(Cmd(RefCell::new(Some(e.finish()))))) as Handle,
            None => std::ptr::null_mut(),
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn wgpuCommandBufferRelease(h: Handle) {
    release::<Cmd>(h);
}

#[no_mangle]
pub unsafe extern "C" fn wgpuCommandEncoderBeginComputePass(h: Handle, desc: *const abi::ComputePassDescriptor) -> Handle {
    let mut pass = None;
    with_enc(h, |enc| {
        let (l, tw) = if desc.is_null() { (None, std::ptr::null()) } else { ((*desc).label.to_string(), (*desc).timestampWrites) };
        let timestamp_writes = if tw.is_null() {
            None
        } else {
            let t = &*tw;
            let idx = |i: u32| if i == abi::QUERY_SET_INDEX_UNDEFINED { None } else { Some(i) };
            Some(wgpu::ComputePassTimestampWrites { query_set: qs(t.querySet), beginning_of_pass_write_index: idx(t.beginningOfPassWriteIndex), end_of_pass_write_index: idx(t.endOfPassWriteIndex) })
        };
        pass = Some(enc.begin_compute_pass(&wgpu::ComputePassDescriptor { label: l.as_deref(), timestamp_writes }).forget_lifetime());
    });
    Box::into_raw(Box::new(Pass(RefCell::new(pass)))) as Handle
}

#[no_mangle]
pub unsafe extern "C" fn wgpuComputePassEncoderEnd(p: Handle) {
    guard((), || drop((*(p as *mut Pass)).0.borrow_mut().take()));
}

#[no_mangle]
pub unsafe extern "C" fn wgpuComputePassEncoderRelease(p: Handle) {
    release::<Pass>(p);
}

#[no_mangle]
pub unsafe extern "C" fn wgpuComputePassEncoderSetPipeline(p: Handle, pipe: Handle) {
    with_pass(p, |pass| pass.set_pipeline(&(*(pipe as *mut Cp)).0));
}

#[no_mangle]
pub unsafe extern "C" fn wgpuComputePassEncoderSetBindGroup(p: Handle, index: u32, group: Handle, count: usize, offsets: *const u32) {
    let offs = c_slice(offsets, count);
    let g = if group.is_null() { None } else { Some(&(*(group as *mut Bg)).0) };
    with_pass(p, |pass| pass.set_bind_group(index, g, offs));
}

#[no_mangle]
pub unsafe extern "C" fn wgpuComputePassEncoderDispatchWorkgroups(p: Handle, x: u32, y: u32, z: u32) {
    with_pass(p, |pass| pass.dispatch_workgroups(x, y, z));
}

#[no_mangle]
pub unsafe extern "C" fn wgpuComputePassEncoderDispatchWorkgroupsIndirect(p: Handle, b: Handle, offset: u64) {
    with_pass(p, |pass| pass.dispatch_workgroups_indirect(wbuf(b), offset));
}

#[no_mangle]
pub unsafe extern "C" fn wgpuComputePassEncoderSetImmediates(p: Handle, offset: u32, data: *const c_void, size: usize) {
    let bytes = c_slice(data as *const u8, size);
    with_pass(p, |pass| pass.set_immediates(offset, bytes));
}

#[no_mangle]
pub unsafe extern "C" fn wgpuComputePassEncoderPushDebugGroup(p: Handle, l: StringView) {
    let s = text(l);
    with_pass(p, |pass| pass.push_debug_group(&s));
}
#[no_mangle]
pub unsafe extern "C" fn wgpuComputePassEncoderPopDebugGroup(p: Handle) {
    with_pass(p, |pass| pass.pop_debug_group());
}
#[no_mangle]
pub unsafe extern "C" fn wgpuComputePassEncoderInsertDebugMarker(p: Handle, l: StringView) {
    let s = text(l);
    with_pass(p, |pass| pass.insert_debug_marker(&s));
}
#[no_mangle]
pub unsafe extern "C" fn wgpuCommandEncoderPushDebugGroup(e: Handle, l: StringView) {
    let s = text(l);
    with_enc(e, |enc| enc.push_debug_group(&s));
}
#[no_mangle]
pub unsafe extern "C" fn wgpuCommandEncoderPopDebugGroup(e: Handle) {
    with_enc(e, |enc| enc.pop_debug_group());
}
#[no_mangle]
pub unsafe extern "C" fn wgpuCommandEncoderInsertDebugMarker(e: Handle, l: StringView) {
    let s = text(l);
    with_enc(e, |enc| enc.insert_debug_marker(&s));
}

#[no_mangle]
pub unsafe extern "C" fn wgpuCommandEncoderCopyBufferToBuffer(e: Handle, src: Handle, so: u64, dst: Handle, doff: u64, size: u64) {
    let sz = if size == abi::WHOLE_SIZE { None } else { Some(size) };
    with_enc(e, |enc| enc.copy_buffer_to_buffer(wbuf(src), so, wbuf(dst), doff, sz));
}

#[no_mangle]
pub unsafe extern "C" fn wgpuCommandEncoderClearBuffer(e: Handle, b: Handle, offset: u64, size: u64) {
    let sz = if size == abi::WHOLE_SIZE { None } else { Some(size) };
    with_enc(e, |enc| enc.clear_buffer(wbuf(b), offset, sz));
}

#[no_mangle]
pub unsafe extern "C" fn wgpuCommandEncoderResolveQuerySet(e: Handle, q: Handle, first: u32, count: u32, dst: Handle, offset: u64) {
    with_enc(e, |enc| enc.resolve_query_set(qs(q), first..first.saturating_add(count), wbuf(dst), offset));
}

#[no_mangle]
pub unsafe extern "C" fn wgpuCommandEncoderWriteTimestamp(e: Handle, q: Handle, index: u32) {
    with_enc(e, |enc| enc.write_timestamp(qs(q), index));
}

#[no_mangle]
pub unsafe extern "C" fn wgpuDeviceCreateQuerySet(d: Handle, desc: *const abi::QuerySetDescriptor) -> Handle {
    let ds = &*desc;
    let ty = if ds.type_ == abi::QUERY_TYPE_OCCLUSION { wgpu::QueryType::Occlusion } else { wgpu::QueryType::Timestamp };
    let l = ds.label.to_string();
    guard(std::ptr::null_mut(), || Box::into_raw(Box::new(Qs(dev(d).device.create_query_set(&wgpu::QuerySetDescriptor { label: l.as_deref(), ty, count: ds.count })))) as Handle)
}

#[no_mangle]
pub unsafe extern "C" fn wgpuQuerySetRelease(h: Handle) {
    release::<Qs>(h);
}

#[no_mangle]
pub unsafe extern "C" fn wgpuQuerySetDestroy(h: Handle) {
    guard((), || qs(h).destroy());
}

/// Submits the command buffers (each may be submitted once) and returns a submission index for
/// wgpuDevicePoll.
#[no_mangle]
pub unsafe extern "C" fn wgpuQueueSubmitForIndex(q: Handle, count: usize, cmds: *const Handle) -> u64 {
    let queue = &(*(q as *mut Qu));
    let list = c_slice(cmds, count);
    let mut bufs = Vec::with_capacity(list.len());
    for h in list {
        match (*(*h as *mut Cmd)).0.borrow_mut().take() {
            Some(c) => bufs.push(c),
            None => queue.sink.report(abi::ERROR_TYPE_VALIDATION, "queue.submit: a command buffer was already submitted"),
        }
    }
    guard(0, || {
        let sub = queue.queue.submit(bufs);
        SUBMISSIONS.with(|s| {
            let mut s = s.borrow_mut();
            s.0 += 1;
            let id = s.0;
            s.1.insert(id, sub);
            // Keep the table small: older indices fall back to "wait for the latest".
            if s.1.len() > 4096 {
                s.1.retain(|k, _| *k + 1024 > id);
            }
            id
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn wgpuQueueWriteBuffer(q: Handle, b: Handle, offset: u64, data: *const c_void, size: usize) {
    let bytes = c_slice(data as *const u8, size);
    guard((), || (*(q as *mut Qu)).queue.write_buffer(wbuf(b), offset, bytes));
}

#[no_mangle]
pub unsafe extern "C" fn wgpuQueueGetTimestampPeriod(q: Handle) -> f32 {
    (*(q as *mut Qu)).queue.get_timestamp_period()
}

struct DoneCb {
    f: usize,
    u1: usize,
    u2: usize,
}

/// The callback runs from a later poll (wgpuInstanceProcessEvents / wgpuDevicePoll) once all
/// work submitted so far is done.
#[no_mangle]
pub unsafe extern "C" fn wgpuQueueOnSubmittedWorkDone(q: Handle, cb: abi::CallbackInfo<abi::QueueWorkDoneCallback>) -> abi::Future {
    let c = DoneCb { f: cb.callback.map(|f| f as usize).unwrap_or(0), u1: cb.userdata1 as usize, u2: cb.userdata2 as usize };
    guard((), || {
        (*(q as *mut Qu)).queue.on_submitted_work_done(move || {
            if c.f != 0 {
                let f: abi::QueueWorkDoneCallback = unsafe { std::mem::transmute(c.f) };
                unsafe { f(abi::CB_SUCCESS, StringView::NULL, c.u1 as *mut c_void, c.u2 as *mut c_void) };
            }
        })
    });
    abi::Future { id: 5 }
}
