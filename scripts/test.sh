#!/usr/bin/env bash
# `bun run test`: the whole test run, in three parts, each under a header line:
#   1. type-check (tsc --noEmit -p tsconfig.json); stops here when it fails;
#   2. every test (`bun test --timeout 300000 --parallel=N`) on the default library (prebuilt
#      wgpu-native); N test files at once in separate worker processes (each file isolated), N =
#      ZEROMOE_TEST_JOBS or the number of CPU cores (2 cores: 3m52 instead of 8m56 for
#      core/test/checkpoint on a busy machine);
#   3. the kernel conformance suite a second time on our own wgpu library (native/wgpu-coop,
#      selected with ZEROMOE_WGPU=coop; docs/wgpu-coop.md): kernels/test/ffi and kernels/test/webgpu.
#      The library is what scripts/setup.sh built: the checkout's cargo output
#      (native/wgpu-coop/target/release/libzm_wgpu.so), else set-up's cached copy
#      ($ZEROMOE_CACHE/zm-wgpu/libzm_wgpu.so). When neither exists the pass is reported SKIPPED with
#      the reason (ZEROMOE_WITH_COOP=0, cargo missing, or the library never built) — except in CI
#      (CI=true) with cargo present and ZEROMOE_WITH_COOP unset, where set-up builds it, so a
#      missing library fails the run.
# Exit status: 0 when every part passed (or part 3 was skipped with its reason), else 1; a bad
# argument exits 2.
#   bash scripts/test.sh           all three parts (`bun run test`)
#   bash scripts/test.sh --coop    part 3 only (`bun run test:coop`)
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

# The files of the conformance pass on our library: the ffi binding and every webgpu kernel suite
# (kernels/test/webgpu/ops.test.ts runs the kernels/test/ops conformance cases against the cpu
# reference). Deno's smoke test is left out: Deno ships its own wgpu.
COOP_TESTS=(kernels/test/ffi kernels/test/webgpu)

mode=all
case "${1:-}" in
  "") ;;
  --coop) mode=coop ;;
  *)
    echo "scripts/test.sh: unknown argument '$1': expected nothing (all tests) or --coop (the conformance pass on native/wgpu-coop only)" >&2
    exit 2
    ;;
esac
if [ "$#" -gt 1 ]; then
  echo "scripts/test.sh: one argument at most (--coop); got $#" >&2
  exit 2
fi

# test files run at once (bun test --parallel): ZEROMOE_TEST_JOBS, else the CPU count
jobs=${ZEROMOE_TEST_JOBS:-$(nproc 2>/dev/null || echo 2)}
case "$jobs" in ''|*[!0-9]*|0) echo "scripts/test.sh: ZEROMOE_TEST_JOBS=\"$jobs\": expected a positive integer (test files run at once)" >&2; exit 2 ;; esac

header() { printf '\n======== %s ========\n' "$*"; }

# Part 3. Prints its own header and a one-line verdict; returns bun's status (0 when skipped).
coop_pass() {
  local cache=${ZEROMOE_CACHE:-$HOME/.cache/zeromoe}
  local build=native/wgpu-coop/target/release/libzm_wgpu.so
  local cached=$cache/zm-wgpu/libzm_wgpu.so
  local lib=""
  if [ -f "$build" ]; then lib=$root/$build; elif [ -f "$cached" ]; then lib=$cached; fi
  header "kernel conformance on our wgpu library (native/wgpu-coop, ZEROMOE_WGPU=coop): ${COOP_TESTS[*]}"
  if [ -z "$lib" ]; then
    local reason
    # scripts/setup.sh also finds a rustup cargo that is not on PATH
    if [ "${ZEROMOE_WITH_COOP:-}" = 0 ]; then
      reason="ZEROMOE_WITH_COOP=0 (scripts/setup.sh was told not to build native/wgpu-coop; no $build, no $cached)"
    elif ! command -v cargo >/dev/null 2>&1 && [ ! -x "${CARGO_HOME:-$HOME/.cargo}/bin/cargo" ]; then
      reason="cargo (Rust) is not on PATH, so scripts/setup.sh could not build native/wgpu-coop (no $build, no $cached); install Rust (rustup) and rerun bash scripts/setup.sh"
    else
      reason="libzm_wgpu.so was never built (no $build, no $cached); build it with ZEROMOE_WITH_COOP=1 bash scripts/setup.sh"
      if [ "${CI:-}" = true ]; then
        echo "[test] FAIL: in CI with cargo present scripts/setup.sh builds native/wgpu-coop, but $reason" >&2
        return 1
      fi
    fi
    echo "[test] kernel conformance on native/wgpu-coop: SKIPPED: $reason"
    return 0
  fi
  echo "[test] library: $lib (built $(date -u -r "$lib" '+%Y-%m-%d %H:%M UTC'))"
  local log start rc
  log=$(mktemp)
  start=$(date +%s)
  # WGPU_NATIVE_LIB would win over ZEROMOE_WGPU (kernels/src/ffi/library.ts): unset it so this pass
  # runs on our library whatever the caller's environment selects.
  env -u WGPU_NATIVE_LIB ZEROMOE_WGPU=coop bun test --timeout 300000 --parallel="$jobs" "${COOP_TESTS[@]}" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  # bun's totals (" 250 pass", " 3 skip", " 0 fail") and the tensor-core tests' own skip reasons,
  # repeated here so they are not lost in the log.
  local totals
  totals=$(grep -E '^ *[0-9]+ (pass|skip|todo|fail)$' "$log" | tr -s ' ' | tr '\n' ',' | sed 's/^ //; s/,$//')
  grep -E 'tests skipped: ' "$log" | sed 's/^/[test] /'
  rm -f "$log"
  if [ "$rc" = 0 ]; then
    echo "[test] kernel conformance on native/wgpu-coop: passed (${totals:-no totals}) in $(( $(date +%s) - start )) s"
  else
    echo "[test] kernel conformance on native/wgpu-coop: FAILED (exit $rc; ${totals:-no totals}) in $(( $(date +%s) - start )) s" >&2
  fi
  return "$rc"
}

if [ "$mode" = coop ]; then
  coop_pass
  exit $(( $? == 0 ? 0 : 1 ))
fi

header "type-check (tsc --noEmit -p tsconfig.json)"
"$root/node_modules/.bin/tsc" --noEmit -p tsconfig.json || exit 1

header "every test (bun test --timeout 300000 --parallel=$jobs)"
bun test --timeout 300000 --parallel="$jobs"
main_rc=$?

coop_pass
coop_rc=$?

if [ "$main_rc" != 0 ] || [ "$coop_rc" != 0 ]; then
  echo "[test] FAILED: every test exit $main_rc, conformance on native/wgpu-coop exit $coop_rc" >&2
  exit 1
fi
echo "[test] all passed"
