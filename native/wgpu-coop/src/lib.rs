//! zm_wgpu: ZeroMoE's own implementation of the subset of webgpu.h/wgpu.h (wgpu-native 29.0.1.1
//! ABI) that kernels/src/ffi uses, built on the `wgpu` 30 crate with experimental features enabled
//! so that `wgpu-cooperative-matrix` (WGSL `enable wgpu_cooperative_matrix;`) can be requested.
//! Plus one extension: `zmAdapterCooperativeMatrixProperties` lists the driver's configurations.
//! Vulkan only; buffer bindings only (the engine uses no textures or samplers).
mod abi;
mod commands;
mod convert;
mod device;
mod instance;
mod resources;
mod util;
mod validate;
