//! Small helpers: a panic guard for `extern "C"` entry points, C array and handle helpers, and a
//! `block_on` for wgpu futures.
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::pin;
use std::task::{Context, Poll, RawWaker, RawWakerVTable, Waker};

/// Run `f`; a Rust panic (which must never unwind into C) is printed and turned into `fallback`.
pub fn guard<T>(fallback: T, f: impl FnOnce() -> T) -> T {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => v,
        Err(e) => {
            let msg = e.downcast_ref::<String>().cloned().or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default();
            eprintln!("zm_wgpu: internal panic caught at the C boundary: {msg}");
            fallback
        }
    }
}

/// The C array `(ptr, count)` as a slice; empty when `count` is 0 or `ptr` is null (webgpu.h allows a
/// null array with a zero count).
pub unsafe fn c_slice<'a, T>(ptr: *const T, count: usize) -> &'a [T] {
    if count == 0 || ptr.is_null() {
        &[]
    } else {
        std::slice::from_raw_parts(ptr, count)
    }
}

/// Drop the boxed `T` behind a webgpu.h handle (a `*Release` call); a null handle is ignored and a
/// panic in `T`'s destructor is caught at the C boundary.
pub unsafe fn release<T>(h: *mut std::ffi::c_void) {
    if !h.is_null() {
        guard((), || drop(Box::from_raw(h as *mut T)));
    }
}

fn noop_raw() -> RawWaker {
    fn clone(_: *const ()) -> RawWaker {
        noop_raw()
    }
    fn noop(_: *const ()) {}
    static VT: RawWakerVTable = RawWakerVTable::new(clone, noop, noop, noop);
    RawWaker::new(std::ptr::null(), &VT)
}

/// Poll a future to completion on this thread. wgpu-core's futures (adapter/device requests, error
/// scope pops) are ready on their first poll on native, so this does not spin in practice.
pub fn block_on<F: Future>(f: F) -> F::Output {
    let waker = unsafe { Waker::from_raw(noop_raw()) };
    let mut cx = Context::from_waker(&waker);
    let mut f = pin!(f);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::yield_now();
    }
}
