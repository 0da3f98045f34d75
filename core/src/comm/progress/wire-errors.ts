/**
 * Errors across the progress thread's message boundary: a structured clone keeps neither an
 * error's class nor its fields, so the thread sends a plain record and the rank's side rebuilds the
 * same class (CommTimeoutError, CommAbortedError, CommPeerFinishedError, CommMismatchError, or a
 * plain Error with the original name) with the same message and fields.
 */

import { CommAbortedError, CommMismatchError, CommPeerFinishedError, CommTimeoutError } from "../errors.ts";

/** An error as it crosses the boundary. `fields` are the own enumerable fields (op, group, ...). */
export interface WireError {
  name: string;
  message: string;
  stack: string;
  fields: Record<string, unknown>;
}

const CLASSES: Record<string, { prototype: Error }> = {
  CommTimeoutError,
  CommAbortedError,
  CommPeerFinishedError,
  CommMismatchError,
  TypeError,
  RangeError,
};

/** The record of `e` (anything thrown). */
export function toWireError(e: unknown): WireError {
  if (!(e instanceof Error)) return { name: "Error", message: String(e), stack: String(e), fields: {} };
  const fields: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(e)) if (k !== "name" && k !== "message" && k !== "stack") fields[k] = v;
  return { name: e.name, message: e.message, stack: e.stack ?? `${e.name}: ${e.message}`, fields };
}

/** The error `w` describes, of its original class where it is one of the transports' errors. */
export function fromWireError(w: WireError): Error {
  const cls = CLASSES[w.name];
  const e: Error = cls ? (Object.create(cls.prototype) as Error) : new Error(w.message);
  Object.assign(e, w.fields);
  Object.defineProperty(e, "message", { value: w.message, writable: true, configurable: true });
  Object.defineProperty(e, "stack", { value: w.stack, writable: true, configurable: true });
  Object.defineProperty(e, "name", { value: w.name, writable: true, configurable: true, enumerable: true });
  return e;
}
