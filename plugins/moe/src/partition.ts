/**
 * Balanced graph partitioning of the expert graph (used by the `co_occurrence` and `topology`
 * placements, placement.ts / topology.ts).
 *
 * Problem: n nodes (experts), a symmetric non-negative weight matrix W (W[u·n+v] = how often
 * experts u and v were chosen for the same token), P parts of exactly n/P nodes each. Minimise the
 * cut: Σ over pairs {u, v} in different parts of W[u,v] (the token copies that cross parts when a
 * token is sent once per destination part). Optionally each node has a load (tokens routed to it)
 * and no part may exceed (1 + loadTolerance) · mean part load, unless the start already did (then
 * no swap makes the heaviest affected part heavier).
 *
 * Algorithm (written here; the idea is Kernighan and Lin's 1970 swap heuristic on top of a greedy
 * start, as in multilevel partitioners' refinement phase):
 * 1. Starts: (a) greedy region growing, `starts` times (default 8) — for part 0..P−2 in turn,
 *    seed part 0 with node ⌊i·n/starts⌋ (start i) and later parts with the free node of largest
 *    total weight, then repeatedly add the free node most connected to the part (ties to the
 *    lower index) until the part is full; the last part takes the rest; (b) the contiguous and the round-robin split;
 *    (c) with loads, the LPT split (heaviest node to the lightest part with a free slot).
 * 2. Refinement of each start by Kernighan–Lin passes: all nodes unlocked; repeatedly apply the
 *    admissible swap (u in part a, v in part b ≠ a, both unlocked) of largest gain
 *    g = (D_u[b] − D_u[a]) + (D_v[a] − D_v[b]) − 2·W[u,v], where D_x[p] = Σ_{y in p} W[x,y],
 *    even when g < 0, and lock u and v; after the pass keep the prefix of swaps with the largest
 *    cumulative gain (undo the rest). Passes repeat while that best prefix gains > 0 (at most
 *    `maxPasses`). Swaps keep every part's size, so the equal-size constraint always holds.
 * 3. The refined start with the smallest cut wins (ties: the earlier start), so the result is never
 *    worse than the contiguous split.
 * Cost of all starts: (starts + 2 [+1]) refinements.
 * Cost: O(n²) per swap choice, n/2 swaps per pass → O(n³) per pass (n = experts per layer, ≤ a few
 * hundred). Deterministic: every tie goes to the lower index.
 */

/** Options of {@link partitionBalanced}. */
export interface PartitionOptions {
  /** Per-node load (length n, finite, ≥ 0); omitted = no load constraint. */
  load?: ArrayLike<number>;
  /** Allowed excess of a part's load over the mean, as a fraction (default 0.05). */
  loadTolerance?: number;
  /** Greedy starts (each seeded from a different node, evenly spaced; default 8). */
  starts?: number;
  /** Kernighan–Lin passes at most (default 20). */
  maxPasses?: number;
}

/** Check W (n×n, symmetric, finite, ≥ 0) and n % parts. @throws naming what is wrong. */
function checkGraph(w: ArrayLike<number>, n: number, parts: number): void {
  if (!Number.isInteger(n) || n < 1) throw new Error(`partition: node count must be a positive integer, got ${n}`);
  if (!Number.isInteger(parts) || parts < 1 || n % parts !== 0) throw new Error(`partition: ${n} nodes cannot be split into ${parts} equal parts`);
  if (w.length !== n * n) throw new Error(`partition: weight matrix has ${w.length} entries, expected ${n}×${n} = ${n * n}`);
  for (let u = 0; u < n; u++) {
    for (let v = 0; v < n; v++) {
      const x = w[u * n + v]!;
      if (!Number.isFinite(x) || x < 0) throw new Error(`partition: weight[${u}][${v}] = ${x} must be finite and ≥ 0`);
      if (x !== w[v * n + u]!) throw new Error(`partition: weight matrix is not symmetric at [${u}][${v}]`);
    }
  }
}

/** Cut weight of an assignment: Σ_{u<v, part[u]≠part[v]} W[u,v]. `part` has length n. */
export function cutWeight(w: ArrayLike<number>, part: ArrayLike<number>): number {
  const n = part.length;
  let s = 0;
  for (let u = 0; u < n; u++) for (let v = u + 1; v < n; v++) if (part[u] !== part[v]) s += w[u * n + v]!;
  return s;
}

function greedyStart(w: ArrayLike<number>, n: number, parts: number, firstSeed: number): Int32Array {
  const per = n / parts;
  const part = new Int32Array(n).fill(-1);
  const deg = new Float64Array(n);
  for (let u = 0; u < n; u++) for (let v = 0; v < n; v++) if (u !== v) deg[u]! += w[u * n + v]!;
  for (let p = 0; p < parts - 1; p++) {
    const conn = new Float64Array(n);
    for (let size = 0; size < per; size++) {
      let best = -1;
      for (let u = 0; u < n; u++) {
        if (part[u] !== -1) continue;
        if (best < 0) best = u;
        else if (p === 0 && size === 0) best = firstSeed;
        else if (size === 0 ? deg[u]! > deg[best]! : conn[u]! > conn[best]! || (conn[u] === conn[best] && deg[u]! > deg[best]!)) best = u;
      }
      part[best] = p;
      for (let v = 0; v < n; v++) conn[v]! += w[best * n + v]!;
    }
  }
  for (let u = 0; u < n; u++) if (part[u] === -1) part[u] = parts - 1;
  return part;
}

function lptStart(load: ArrayLike<number>, n: number, parts: number): Int32Array {
  const per = n / parts;
  const order = Array.from({ length: n }, (_, e) => e).sort((a, b) => load[b]! - load[a]! || a - b);
  const tot = new Float64Array(parts);
  const used = new Int32Array(parts);
  const part = new Int32Array(n);
  for (const e of order) {
    let best = -1;
    for (let j = 0; j < parts; j++) if (used[j]! < per && (best < 0 || tot[j]! < tot[best]!)) best = j;
    part[e] = best;
    used[best]!++;
    tot[best]! += load[e]!;
  }
  return part;
}

/** Kernighan–Lin refinement in place (see the module comment). */
function refine(w: ArrayLike<number>, part: Int32Array, parts: number, load: ArrayLike<number> | undefined, cap: number, maxPasses: number): void {
  const n = part.length;
  // D[x·parts + p] = Σ_{y in p, y≠x} W[x,y]
  const D = new Float64Array(n * parts);
  const rebuild = (): void => {
    D.fill(0);
    for (let x = 0; x < n; x++) for (let y = 0; y < n; y++) if (x !== y) D[x * parts + part[y]!]! += w[x * n + y]!;
  };
  const pl = new Float64Array(parts);
  if (load) for (let x = 0; x < n; x++) pl[part[x]!]! += load[x]!;
  const swap = (u: number, v: number): void => {
    const a = part[u]!;
    const b = part[v]!;
    for (let x = 0; x < n; x++) {
      const wu = x === u ? 0 : w[x * n + u]!;
      const wv = x === v ? 0 : w[x * n + v]!;
      D[x * parts + a]! += wv - wu;
      D[x * parts + b]! += wu - wv;
    }
    part[u] = b;
    part[v] = a;
    if (load) {
      pl[a]! += load[v]! - load[u]!;
      pl[b]! += load[u]! - load[v]!;
    }
  };
  rebuild();
  const locked = new Uint8Array(n);
  for (let pass = 0; pass < maxPasses; pass++) {
    locked.fill(0);
    const done: [number, number][] = [];
    let cum = 0;
    let bestCum = 0;
    let bestLen = 0;
    for (;;) {
      let bu = -1;
      let bv = -1;
      let bg = -Infinity;
      for (let u = 0; u < n; u++) {
        if (locked[u]) continue;
        const a = part[u]!;
        for (let v = u + 1; v < n; v++) {
          if (locked[v]) continue;
          const b = part[v]!;
          if (a === b) continue;
          if (load) {
            const na = pl[a]! - load[u]! + load[v]!;
            const nb = pl[b]! - load[v]! + load[u]!;
            if (Math.max(na, nb) > Math.max(cap, pl[a]!, pl[b]!) + 1e-9 * cap) continue;
          }
          const g = D[u * parts + b]! - D[u * parts + a]! + D[v * parts + a]! - D[v * parts + b]! - 2 * w[u * n + v]!;
          if (g > bg) {
            bg = g;
            bu = u;
            bv = v;
          }
        }
      }
      if (bu < 0) break;
      swap(bu, bv);
      locked[bu] = locked[bv] = 1;
      done.push([bu, bv]);
      cum += bg;
      if (cum > bestCum + 1e-9) {
        bestCum = cum;
        bestLen = done.length;
      }
    }
    for (let i = done.length - 1; i >= bestLen; i--) swap(done[i]![0], done[i]![1]); // undo past the best prefix
    if (bestLen === 0) break;
  }
}

/**
 * Partition n nodes into `parts` parts of n/parts nodes each, minimising the cut weight of W
 * (row-major n×n, symmetric, finite, ≥ 0; the diagonal is ignored) — see the module comment.
 * @returns part[u] ∈ [0, parts) for every node (Int32Array of length n).
 * @throws when n % parts ≠ 0, W has the wrong size, is not symmetric or has a negative/non-finite
 * entry, or `load` is invalid.
 */
export function partitionBalanced(w: ArrayLike<number>, n: number, parts: number, opts: PartitionOptions = {}): Int32Array {
  checkGraph(w, n, parts);
  const load = opts.load;
  if (load) {
    if (load.length !== n) throw new Error(`partition: load has ${load.length} entries, expected ${n}`);
    for (let u = 0; u < n; u++) if (!Number.isFinite(load[u]!) || load[u]! < 0) throw new Error(`partition: load[${u}] = ${load[u]} must be finite and ≥ 0`);
  }
  const tol = opts.loadTolerance ?? 0.05;
  let total = 0;
  if (load) for (let u = 0; u < n; u++) total += load[u]!;
  const cap = load ? (total / parts) * (1 + tol) : Infinity;
  const per = n / parts;
  if (parts === 1) return new Int32Array(n);
  const starts: Int32Array[] = [Int32Array.from({ length: n }, (_, e) => Math.floor(e / per)), Int32Array.from({ length: n }, (_, e) => e % parts)];
  const nSeeds = Math.min(n, opts.starts ?? 8);
  for (let i = 0; i < nSeeds; i++) starts.push(greedyStart(w, n, parts, Math.floor((i * n) / nSeeds)));
  if (load) starts.push(lptStart(load, n, parts));
  let best: Int32Array | null = null;
  let bestKey = Infinity;
  let bestOver = Infinity;
  for (const s of starts) {
    refine(w, s, parts, load, cap, opts.maxPasses ?? 20);
    const cut = cutWeight(w, s);
    let over = 0;
    if (load) {
      const pl = new Float64Array(parts);
      for (let u = 0; u < n; u++) pl[s[u]!]! += load[u]!;
      over = Math.max(0, Math.max(...pl) - cap);
    }
    // a start within the load cap beats one past it; then the smaller cut
    if (over < bestOver - 1e-9 || (Math.abs(over - bestOver) <= 1e-9 && cut < bestKey - 1e-9)) {
      best = s;
      bestKey = cut;
      bestOver = over;
    }
  }
  return best!;
}
