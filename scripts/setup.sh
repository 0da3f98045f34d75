#!/usr/bin/env bash
# ZeroMoE set-up on a fresh Debian/Ubuntu machine. Idempotent; safe to re-run.
#   1. Bun (from the npm registry) when missing.
#   2. JavaScript packages (`bun install`, exact versions from bun.lock).
#   3. wgpu-native: the prebuilt library inside PyPI's `wgpu` wheel, pinned and checksum-verified,
#      cached outside the source tree in $ZEROMOE_CACHE (default ~/.cache/zeromoe).
#   4. Mesa's lavapipe (a CPU Vulkan driver) when no Vulkan driver is present and we may install
#      system packages (root, or ZEROMOE_INSTALL_SYSTEM=1 with sudo).
#   5. Open MPI (openmpi-bin, libopenmpi-dev: the `mpi` transport, docs/comm.md) when asked:
#      ZEROMOE_WITH_MPI=1, or in CI (CI=true) as root, so CI runs the mpi transport's tests.
#      ZEROMOE_WITH_MPI=0 skips it even in CI.
#   6. Our own wgpu library (native/wgpu-coop: webgpu.h on the wgpu 30 crate with experimental
#      features, for the tensor-core matmul; selected at run time by ZEROMOE_WGPU=coop) when asked,
#      ZEROMOE_WITH_COOP=1, or in CI (CI=true), so `bun run test` runs the kernel conformance suite
#      on it too (scripts/test.sh). ZEROMOE_WITH_COOP=0 skips it even in CI. Needs cargo: asked
#      for and missing is an error; in CI, missing is one loud line and the conformance pass
#      reports itself skipped. Opt-in elsewhere because a clean build compiles wgpu/naga (about
#      2.5 min of CPU, crates from crates.io pinned by Cargo.lock; docs/wgpu-coop.md); cached in
#      $ZEROMOE_CACHE/zm-wgpu by a hash of Cargo.lock, Cargo.toml and the sources.
# Nothing is downloaded at training time; everything needed is fetched here.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

BUN_VERSION=1.4.5
WGPU_PY_VERSION=0.32.0                 # PyPI wheel `wgpu`, ships wgpu-native 29.0.1.1
WGPU_NATIVE_VERSION=29.0.1.1
WGPU_WHEEL=wgpu-0.32.0-py3-none-manylinux_2_28_x86_64.whl
WGPU_WHEEL_SHA256=6499a31b5a29a10b4f1089fea4a0806411f42605fa86b6c0b543a07ca0de8568
cache=${ZEROMOE_CACHE:-$HOME/.cache/zeromoe}

say() { printf '[setup] %s\n' "$*"; }

# 1. Bun
if ! command -v bun >/dev/null 2>&1; then
  say "installing bun@$BUN_VERSION from npm"
  npm install -g --silent "bun@$BUN_VERSION"
fi
say "bun $(bun --version)"

# 2. packages
bun install --frozen-lockfile

# 3. wgpu-native
dest="$cache/wgpu-native/$WGPU_NATIVE_VERSION"
if [ ! -f "$dest/libwgpu_native.so" ]; then
  say "fetching wgpu-native $WGPU_NATIVE_VERSION (PyPI wgpu==$WGPU_PY_VERSION)"
  tmp=$(mktemp -d)
  python3 -m pip download --quiet --no-deps --only-binary=:all: \
    --platform manylinux_2_28_x86_64 --python-version 3.11 \
    "wgpu==$WGPU_PY_VERSION" -d "$tmp"
  got=$(sha256sum "$tmp/$WGPU_WHEEL" | cut -d' ' -f1)
  if [ "$got" != "$WGPU_WHEEL_SHA256" ]; then
    echo "[setup] checksum mismatch for $WGPU_WHEEL: expected $WGPU_WHEEL_SHA256, got $got" >&2
    exit 1
  fi
  mkdir -p "$dest"
  python3 - "$tmp/$WGPU_WHEEL" "$dest" <<'PY'
import sys, zipfile, os
whl, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(whl) as z:
    for name, out in [("wgpu/resources/libwgpu_native-release.so", "libwgpu_native.so"),
                      ("wgpu/resources/webgpu.h", "webgpu.h"), ("wgpu/resources/wgpu.h", "wgpu.h")]:
        with z.open(name) as src, open(os.path.join(dest, out), "wb") as dst:
            dst.write(src.read())
PY
  echo "$WGPU_NATIVE_VERSION" > "$dest/VERSION"
  rm -rf "$tmp"
fi
say "wgpu-native at $dest/libwgpu_native.so"

# 4. a Vulkan driver
have_icd=0
for d in /usr/share/vulkan/icd.d /etc/vulkan/icd.d /usr/local/share/vulkan/icd.d; do
  ls "$d"/*.json >/dev/null 2>&1 && have_icd=1
done
if [ "$have_icd" = 0 ] || ! ldconfig -p | grep -q 'libvulkan.so.1'; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "no Vulkan driver found: installing Mesa's lavapipe (mesa-vulkan-drivers)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq mesa-vulkan-drivers libvulkan1 >/dev/null
  else
    say "no Vulkan driver found and not root: the webgpu backend will be unavailable; the cpu backend is used"
  fi
fi
# 5. Open MPI, when asked
with_mpi=${ZEROMOE_WITH_MPI:-}
if [ -z "$with_mpi" ] && [ "${CI:-}" = true ] && [ "$(id -u)" = 0 ]; then with_mpi=1; fi
if [ "$with_mpi" = 1 ]; then
  if command -v mpirun >/dev/null 2>&1 && ldconfig -p | grep -q 'libmpi.so'; then
    say "Open MPI present: $(mpirun --version 2>/dev/null | head -1)"
  elif command -v apt-get >/dev/null 2>&1 && { [ "$(id -u)" = 0 ] || command -v sudo >/dev/null 2>&1; }; then
    say "installing Open MPI (openmpi-bin, libopenmpi-dev) for the mpi transport"
    sudo_=""; [ "$(id -u)" = 0 ] || sudo_=sudo
    export DEBIAN_FRONTEND=noninteractive
    $sudo_ apt-get update -qq >/dev/null
    $sudo_ apt-get install -y -qq openmpi-bin libopenmpi-dev >/dev/null
    say "Open MPI: $(mpirun --version 2>/dev/null | head -1)"
  else
    say "ZEROMOE_WITH_MPI=1 but cannot install system packages here: install Open MPI yourself (openmpi-bin, libopenmpi-dev)"
    exit 1
  fi
fi
# 6. our own wgpu library (native/wgpu-coop), when asked or in CI
with_coop=${ZEROMOE_WITH_COOP:-}
case "$with_coop" in
  "" | 0 | 1) ;;
  *) echo "[setup] ZEROMOE_WITH_COOP=\"$with_coop\": expected 1 (build native/wgpu-coop) or 0 (skip it, even in CI)" >&2; exit 2 ;;
esac
if [ -z "$with_coop" ] && [ "${CI:-}" = true ]; then with_coop=ci; fi
# rustup installs cargo in $CARGO_HOME/bin and adds it to PATH only in login shells' profiles
cargo_bin="${CARGO_HOME:-$HOME/.cargo}/bin"
if ! command -v cargo >/dev/null 2>&1 && [ -x "$cargo_bin/cargo" ]; then export PATH="$cargo_bin:$PATH"; fi
if [ "$with_coop" = ci ] && ! command -v cargo >/dev/null 2>&1; then
  echo "[setup] WARNING: cargo (Rust) not found (PATH, $cargo_bin): native/wgpu-coop is NOT built, so bun run test skips the kernel conformance pass on it; install Rust (rustup) to run it" >&2
  with_coop=0
fi
if [ "$with_coop" = 1 ] || [ "$with_coop" = ci ]; then
  if ! command -v cargo >/dev/null 2>&1; then
    echo "[setup] ZEROMOE_WITH_COOP=1 needs cargo (Rust) to build native/wgpu-coop; install rustup/cargo or unset it" >&2
    exit 1
  fi
  coop_key=$(cat native/wgpu-coop/Cargo.lock native/wgpu-coop/Cargo.toml native/wgpu-coop/src/*.rs | sha256sum | cut -c1-16)
  coop_dest="$cache/zm-wgpu"
  if [ ! -f "$coop_dest/libzm_wgpu.so" ] || [ "$(cat "$coop_dest/KEY" 2>/dev/null)" != "$coop_key" ]; then
    say "building native/wgpu-coop (cargo build --release --locked; a clean build takes 1.5-7 min on 2 cores, docs/wgpu-coop.md)"
    coop_start=$(date +%s)
    (cd native/wgpu-coop && cargo build --release --locked --quiet)
    mkdir -p "$coop_dest"
    cp native/wgpu-coop/target/release/libzm_wgpu.so "$coop_dest/libzm_wgpu.so.tmp"
    mv "$coop_dest/libzm_wgpu.so.tmp" "$coop_dest/libzm_wgpu.so"
    echo "$coop_key" > "$coop_dest/KEY"
    say "native/wgpu-coop built in $(( $(date +%s) - coop_start )) s"
  fi
  say "zm-wgpu at $coop_dest/libzm_wgpu.so (select it with ZEROMOE_WGPU=coop)"
fi
say "done"
