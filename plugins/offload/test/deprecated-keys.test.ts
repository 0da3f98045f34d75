/**
 * DeepSpeed's deprecated offload keys in `zero_optimization` (its zero config lists `cpu_offload`,
 * `cpu_offload_param` and `cpu_offload_use_pin_memory` as deprecated): `true` is refused naming the
 * key and the current key to use; `false` is accepted (it asks for nothing). Before,
 * `cpu_offload_param` was "unknown key; did you mean cpu_offload" — pointing at another deprecated key.
 */
import { expect, test } from "@zeromoe/kernels/runtime/bdd";
import { ConfigError, DEFAULT_JOB, resolveJobConfig } from "@zeromoe/core/config";

function issues(zero: Record<string, unknown>): { path: string; message: string }[] {
  try {
    resolveJobConfig({ ...DEFAULT_JOB, zero_optimization: { stage: 3, ...zero } });
    return [];
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    return e.issues.map((i) => ({ path: i.path, message: i.message }));
  }
}

test("deprecated offload keys: true refused with the new key, false accepted", () => {
  expect(issues({ cpu_offload: true })).toEqual([{ path: "zero_optimization.cpu_offload", message: expect.stringContaining('"offload_optimizer": {"device": "cpu"}') }]);
  expect(issues({ cpu_offload_param: true })).toEqual([{ path: "zero_optimization.cpu_offload_param", message: expect.stringContaining('"offload_param": {"device": "cpu"}') }]);
  expect(issues({ cpu_offload_use_pin_memory: true })).toEqual([{ path: "zero_optimization.cpu_offload_use_pin_memory", message: expect.stringContaining("pin_memory") }]);
  expect(issues({ cpu_offload: false, cpu_offload_param: false, cpu_offload_use_pin_memory: false })).toEqual([]);
  // the misspelling DeepSpeed's own comment uses points at the key
  expect(issues({ cpu_offload_params: true })[0]!.message).toContain('did you mean "cpu_offload_param"');
});
