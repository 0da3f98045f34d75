//! `zm_naga_validate_wgsl`: WGSL through naga's front end and validator without a device, with
//! every capability on (cooperative matrix, f16, subgroups) and every validation flag on (the
//! control-flow uniformity analysis included), as wgpu does when it creates a shader module. A
//! machine whose driver lacks VK_KHR_cooperative_matrix (CI's lavapipe) can still check that the
//! tensor-core kernels compile: naga rejects, for example, a cooperative-matrix load after a
//! `return` whose condition it cannot prove workgroup-uniform.

/// Validate the UTF-8 WGSL `code[0..len]`. Writes the diagnostic (empty when the module is valid)
/// into `out[0..cap]` (truncated to `cap` bytes) and returns its full length in bytes: 0 means
/// valid. Safety: `code` points to `len` readable bytes and `out` to `cap` writable bytes (either
/// may be null when its length is 0).
#[no_mangle]
pub unsafe extern "C" fn zm_naga_validate_wgsl(code: *const u8, len: usize, out: *mut u8, cap: usize) -> usize {
    let src: &[u8] = if len == 0 { &[] } else { std::slice::from_raw_parts(code, len) };
    let msg = match std::str::from_utf8(src) {
        Err(e) => format!("WGSL is not UTF-8: {e}"),
        Ok(text) => match wgpu::naga::front::wgsl::parse_str(text) {
            Err(e) => e.emit_to_string(text),
            Ok(module) => {
                let mut v = wgpu::naga::valid::Validator::new(wgpu::naga::valid::ValidationFlags::all(), wgpu::naga::valid::Capabilities::all());
                match v.validate(&module) {
                    Ok(_) => String::new(),
                    Err(e) => e.emit_to_string(text),
                }
            }
        },
    };
    let b = msg.as_bytes();
    let n = b.len().min(cap);
    if n > 0 {
        std::ptr::copy_nonoverlapping(b.as_ptr(), out, n);
    }
    b.len()
}
