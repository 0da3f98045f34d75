//! Device, error scopes, uncaptured errors, device loss and polling (webgpu.h + wgpu.h) on the wgpu crate.
//!
//! Errors: every wgpu error of a device reaches one handler ([`ErrSink::report`]), which implements
//! WebGPU's error scopes itself (innermost scope whose filter matches keeps the first error) and
//! hands the rest to the uncaptured-error callback of the device descriptor. Errors this library
//! detects itself (unsupported binding kinds, …) go through the same sink.
use crate::abi::{self, Handle, StringView};
use crate::convert;
use crate::instance::{write_features, Adap};
use crate::util::{block_on, guard, release};
use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Arc, Mutex};

struct Scope {
    filter: u32,
    error: Option<(u32, String)>,
}

/// Raw C callback data; the C side guarantees it outlives the device.
#[derive(Clone, Copy)]
struct RawCb {
    f: Option<abi::UncapturedErrorCallback>,
    u1: *mut c_void,
    u2: *mut c_void,
}
unsafe impl Send for RawCb {}
unsafe impl Sync for RawCb {}

/// Where a device's errors go: the error-scope stack, else the uncaptured-error callback.
pub struct ErrSink {
    scopes: Mutex<Vec<Scope>>,
    uncaptured: RawCb,
}

static NULL_DEVICE: usize = 0;

impl ErrSink {
    /// Route one error (WGPUErrorType `ty`, message `msg`).
    pub fn report(&self, ty: u32, msg: &str) {
        let filter = match ty {
            abi::ERROR_TYPE_VALIDATION => abi::ERROR_FILTER_VALIDATION,
            abi::ERROR_TYPE_OUT_OF_MEMORY => abi::ERROR_FILTER_OUT_OF_MEMORY,
            _ => abi::ERROR_FILTER_INTERNAL,
        };
        {
            let mut scopes = self.scopes.lock().unwrap();
            if let Some(s) = scopes.iter_mut().rev().find(|s| s.filter == filter) {
                if s.error.is_none() {
                    s.error = Some((ty, msg.to_string()));
                }
                return;
            }
        }
        if let Some(f) = self.uncaptured.f {
            unsafe { f(&NULL_DEVICE as *const usize as *const Handle, ty, StringView::of(msg), self.uncaptured.u1, self.uncaptured.u2) };
        }
    }

    fn report_wgpu(&self, e: wgpu::Error) {
        let ty = match &e {
            wgpu::Error::OutOfMemory { .. } => abi::ERROR_TYPE_OUT_OF_MEMORY,
            wgpu::Error::Validation { .. } => abi::ERROR_TYPE_VALIDATION,
            wgpu::Error::Internal { .. } => abi::ERROR_TYPE_INTERNAL,
        };
        self.report(ty, &full_message(&e));
    }
}

/// The error's message followed by its chain of sources (as wgpu-native prints them).
fn full_message(e: &wgpu::Error) -> String {
    let mut s = e.to_string();
    if let wgpu::Error::Validation { source, .. } | wgpu::Error::OutOfMemory { source, .. } = e {
        let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(source.as_ref());
        while let Some(c) = cur {
            let t = c.to_string();
            if !s.contains(&t) {
                s.push_str("\n  ");
                s.push_str(&t);
            }
            cur = c.source();
        }
    }
    s
}

/// WGPUDevice.
pub struct Dev {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub sink: Arc<ErrSink>,
}

/// WGPUQueue.
pub struct Qu {
    pub queue: wgpu::Queue,
    pub sink: Arc<ErrSink>,
}

thread_local! {
    /// Submission indices handed out by wgpuQueueSubmitForIndex → wgpu's opaque SubmissionIndex.
    pub static SUBMISSIONS: RefCell<(u64, HashMap<u64, wgpu::SubmissionIndex>)> = RefCell::new((0, HashMap::new()));
}

/// A device pointer's wrapper.
pub unsafe fn dev<'a>(d: Handle) -> &'a Dev {
    &*(d as *mut Dev)
}

#[no_mangle]
pub unsafe extern "C" fn wgpuAdapterRequestDevice(
    a: Handle,
    desc: *const abi::DeviceDescriptor,
    cb: abi::CallbackInfo<abi::RequestDeviceCallback>,
) -> abi::Future {
    let adapter = &(*(a as *mut Adap)).adapter;
    let result: Result<Dev, String> = guard(Err("wgpu panicked while requesting a device".into()), || {
        let mut features = wgpu::Features::empty();
        let mut limits = wgpu::Limits::default();
        let mut label = None;
        let mut uncaptured = RawCb { f: None, u1: std::ptr::null_mut(), u2: std::ptr::null_mut() };
        let mut lost: Option<abi::CallbackInfo<abi::DeviceLostCallback>> = None;
        if !desc.is_null() {
            let d = &*desc;
            for k in 0..d.requiredFeatureCount {
                let id = *d.requiredFeatures.add(k);
                match convert::feature_flag(id) {
                    Ok(f) => features |= f,
                    Err(id) => return Err(format!("requested feature 0x{id:x} is not supported by this library (zm_wgpu)")),
                }
            }
            if !d.requiredLimits.is_null() {
                limits = convert::read_limits(&*d.requiredLimits);
            }
            label = d.label.to_string();
            uncaptured = RawCb { f: d.uncapturedErrorCallbackInfo.callback, u1: d.uncapturedErrorCallbackInfo.userdata1, u2: d.uncapturedErrorCallbackInfo.userdata2 };
            lost = Some(d.deviceLostCallbackInfo);
        }
        let wd = wgpu::DeviceDescriptor {
            label: label.as_deref(),
            required_features: features,
            required_limits: limits,
            // SAFETY: experimental features (cooperative matrix) are what this library exists for;
            // the engine's kernels that use them are tested against references.
            experimental_features: unsafe { wgpu::ExperimentalFeatures::enabled() },
            memory_hints: wgpu::MemoryHints::Performance,
            trace: wgpu::Trace::Off,
        };
        let (device, queue) = block_on(adapter.request_device(&wd)).map_err(|e| e.to_string())?;
        let sink = Arc::new(ErrSink { scopes: Mutex::new(Vec::new()), uncaptured });
        let s2 = sink.clone();
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| s2.report_wgpu(e)));
        if let Some(l) = lost {
            if let Some(f) = l.callback {
                let raw = RawCb { f: None, u1: l.userdata1, u2: l.userdata2 };
                let fp = f as usize;
                device.set_device_lost_callback(move |reason, msg| {
                    let raw = raw;
                    let f: abi::DeviceLostCallback = unsafe { std::mem::transmute(fp) };
                    let r = match reason {
                        wgpu::DeviceLostReason::Destroyed => abi::DEVICE_LOST_DESTROYED,
                        _ => abi::DEVICE_LOST_UNKNOWN,
                    };
                    unsafe { f(&NULL_DEVICE as *const usize as *const Handle, r, StringView::of(&msg), raw.u1, raw.u2) };
                });
            }
        }
        Ok(Dev { device, queue, sink })
    });
    if let Some(f) = cb.callback {
        match result {
            Ok(d) => f(abi::CB_SUCCESS, Box::into_raw(Box::new(d)) as Handle, StringView::NULL, cb.userdata1, cb.userdata2),
            Err(m) => f(abi::REQUEST_DEVICE_ERROR, std::ptr::null_mut(), StringView::of(&m), cb.userdata1, cb.userdata2),
        }
    }
    abi::Future { id: 2 }
}

#[no_mangle]
pub unsafe extern "C" fn wgpuDeviceRelease(d: Handle) {
    release::<Dev>(d);
}

#[no_mangle]
pub unsafe extern "C" fn wgpuDeviceDestroy(d: Handle) {
    guard((), || dev(d).device.destroy());
}

#[no_mangle]
pub unsafe extern "C" fn wgpuDeviceGetLimits(d: Handle, out: *mut abi::Limits) -> u32 {
    convert::write_limits(&dev(d).device.limits(), &mut *out);
    abi::STATUS_SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn wgpuDeviceGetFeatures(d: Handle, out: *mut abi::SupportedFeatures) {
    write_features(dev(d).device.features(), out)
}

/// A new reference to the device's queue.
#[no_mangle]
pub unsafe extern "C" fn wgpuDeviceGetQueue(d: Handle) -> Handle {
    let dv = dev(d);
    Box::into_raw(Box::new(Qu { queue: dv.queue.clone(), sink: dv.sink.clone() })) as Handle
}

#[no_mangle]
pub unsafe extern "C" fn wgpuQueueRelease(q: Handle) {
    release::<Qu>(q);
}

#[no_mangle]
pub unsafe extern "C" fn wgpuDevicePushErrorScope(d: Handle, filter: u32) {
    dev(d).sink.scopes.lock().unwrap().push(Scope { filter, error: None });
}

/// Pops the innermost error scope; the callback runs before this returns.
#[no_mangle]
pub unsafe extern "C" fn wgpuDevicePopErrorScope(d: Handle, cb: abi::CallbackInfo<abi::PopErrorScopeCallback>) -> abi::Future {
    let popped = dev(d).sink.scopes.lock().unwrap().pop();
    if let Some(f) = cb.callback {
        match popped {
            None => f(abi::POP_ERROR_SCOPE_ERROR, abi::ERROR_TYPE_NO_ERROR, StringView::of("popErrorScope: the error scope stack is empty"), cb.userdata1, cb.userdata2),
            Some(Scope { error: None, .. }) => f(abi::CB_SUCCESS, abi::ERROR_TYPE_NO_ERROR, StringView::NULL, cb.userdata1, cb.userdata2),
            Some(Scope { error: Some((ty, m)), .. }) => f(abi::CB_SUCCESS, ty, StringView::of(&m), cb.userdata1, cb.userdata2),
        }
    }
    abi::Future { id: 3 }
}

/// Polls the device: `wait` blocks until the given submission (or, when NULL, the latest) is done.
/// Returns 1 when the queue is empty afterwards (also when the device is lost or the index unknown).
#[no_mangle]
pub unsafe extern "C" fn wgpuDevicePoll(d: Handle, wait: u32, index: *const u64) -> u32 {
    let dv = dev(d);
    guard(1, || {
        let poll = if wait != 0 {
            let sub = if index.is_null() { None } else { SUBMISSIONS.with(|s| s.borrow().1.get(&*index).cloned()) };
            wgpu::PollType::Wait { submission_index: sub, timeout: None }
        } else {
            wgpu::PollType::Poll
        };
        match dv.device.poll(poll) {
            Ok(st) => st.is_queue_empty() as u32,
            Err(_) => 1,
        }
    })
}
