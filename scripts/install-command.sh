#!/usr/bin/env bash
# Writes a `zeromoe` command (a shim running core/src/cli/zeromoe.ts of this checkout) into the
# folder given, default ~/.bun/bin (on the PATH of a bun install). Usage: bun run install-command [DIR]
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="${1:-$HOME/.bun/bin}"
mkdir -p "$dir"
cat > "$dir/zeromoe" <<SHIM
#!/bin/sh
exec bun "$repo/core/src/cli/zeromoe.ts" "\$@"
SHIM
chmod +x "$dir/zeromoe"
echo "zeromoe -> $repo/core/src/cli/zeromoe.ts written to $dir/zeromoe"
case ":$PATH:" in *":$dir:"*) ;; *) echo "note: $dir is not on PATH; add it, or run $dir/zeromoe";; esac
