import { philoxFill } from "@zeromoe/kernels";
import { normalFill } from "./src/tensor/random.ts";
const a = new Float32Array(4_000_000);
for (let r = 0; r < 2; r++) {
  let t0 = performance.now(); philoxFill(a, { dist: "normal", key: [1, 2], start: 0, std: 0.02 }); const t1 = performance.now();
  normalFill(a, [1, 2], 0, 0.02); const t2 = performance.now();
  console.log(`integer ${((t1 - t0) / 4e6 * 1e6).toFixed(0)} ns/elem, f64 ${((t2 - t1) / 4e6 * 1e6).toFixed(0)} ns/elem`);
}
