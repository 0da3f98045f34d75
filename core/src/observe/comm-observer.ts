/**
 * A Communicator that observes every collective of the one it wraps, for the communication logger
 * (comms-logger.ts), the per-step communication time by op (summary history, the plots' comm
 * share), and the phase timer's all_to_all attribution (phase-timer.ts). Every member is the
 * wrapped communicator's own; only the timing and bookkeeping around the collectives are added,
 * so results, ordering, handles and byte counters are unchanged. A collective is timed from issue to
 * completion.
 */
import type { CollectiveName, CommArray, Communicator, Group, Work } from "../comm/communicator.ts";
import { CommWork } from "../comm/work.ts";
import type { CommsLogger } from "./comms-logger.ts";
import type { Phase, PhaseTimer } from "./phase-timer.ts";

/** What the observer feeds. */
export interface CommObserverSinks {
  /** The communication logger (null: none). */
  logger: CommsLogger | null;
  /** The phase timer (null: no wall-clock breakdown). */
  timer: PhaseTimer | null;
  /** Called after every collective with its op, latency (ms) and nominal bytes sent. */
  onOp?: (op: CollectiveName, ms: number, sentBytes: number) => void;
}

const METHODS: Readonly<Record<string, CollectiveName>> = {
  allReduce: "all_reduce",
  reduceScatter: "reduce_scatter",
  allGather: "all_gather",
  allToAllV: "all_to_all_v",
  broadcast: "broadcast",
  gather: "gather",
  scatter: "scatter",
  barrier: "barrier",
};

/** The options argument's index per method (for its `group`). */
const OPTS_INDEX: Readonly<Record<string, number>> = { allReduce: 1, reduceScatter: 2, allGather: 2, allToAllV: 4, broadcast: 2, gather: 3, scatter: 3, barrier: 0 };

/** Message size in bytes of a call (comms-logger.ts module comment). */
function messageBytes(method: string, args: unknown[], n: number): number {
  const a = args[0] as CommArray | null | undefined;
  switch (method) {
    case "allGather":
      return (a?.byteLength ?? 0) * n;
    case "scatter": {
      const out = args[1] as CommArray;
      return out.byteLength * n;
    }
    case "barrier":
      return 0;
    default:
      return a?.byteLength ?? 0;
  }
}

/** The name of the function that called the collective (comms_logger.debug), from the stack. */
function callerName(): string {
  const lines = (new Error().stack ?? "").split("\n").slice(1);
  for (const l of lines) {
    const m = /at (?:async )?([^\s(]+)/.exec(l.trim());
    const name = m?.[1];
    if (!name || /comm-observer|Proxy|<anonymous>/.test(l) || name.startsWith("Local") || name.startsWith("Mpi")) continue;
    return name;
  }
  return "?";
}

/**
 * Wrap `inner` (see the module comment). The result is a Proxy: `instanceof`, `rank`, `world`,
 * `newGroup`, `stats()` … are the wrapped object's.
 */
export function observeCommunicator(inner: Communicator, sinks: CommObserverSinks): Communicator {
  const bound = new Map<PropertyKey, unknown>();
  return new Proxy(inner, {
    get(target, prop) {
      const v = Reflect.get(target, prop, target);
      if (typeof v !== "function") return v;
      let f = bound.get(prop);
      if (f) return f;
      const op = typeof prop === "string" ? METHODS[prop] : undefined;
      const fn = (v as (...a: unknown[]) => unknown).bind(target);
      if (!op) f = fn;
      else {
        const method = prop as string;
        f = (...args: unknown[]) => {
          const opts = args[OPTS_INDEX[method]!] as { group?: Group } | undefined;
          const n = opts?.group?.size ?? target.worldSize;
          const timer = sinks.timer;
          // all_to_all of MoE rows: forward calls inside the dispatcher's dispatch/combine leave
          // their label for the backward's reverse exchange (the tape runs in reverse order)
          let tok = 0;
          if (timer?.running && method === "allToAllV" && args[0] instanceof Float32Array) {
            const cur = timer.current;
            if (cur === "a2a_dispatch" || cur === "a2a_combine") timer.a2aLabels.push(cur);
            else {
              const label: Phase = timer.a2aLabels.pop() ?? "a2a_dispatch";
              tok = timer.enter(label);
            }
          }
          const caller = sinks.logger?.config.debug ? callerName() : undefined;
          const t0 = performance.now();
          // the handle goes back to the caller unwaited (issue now, wait later); the bookkeeping
          // runs when it completes, with the bytes the collective itself counted
          const work = fn(...args) as Work<unknown>;
          const record = () => {
            const ms = performance.now() - t0;
            if (tok) timer!.exit(tok);
            const sent = work instanceof CommWork ? work.sentBytes : 0;
            sinks.logger?.record(op, messageBytes(method, args, n), n, sent, ms, caller);
            sinks.onOp?.(op, ms, sent);
          };
          work.wait().then(record, record);
          return work;
        };
      }
      bound.set(prop, f);
      return f;
    },
  });
}
