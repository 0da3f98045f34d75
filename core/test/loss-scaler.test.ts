// Loss-scaler transitions traced by hand from DeepSpeed's DynamicLossScaler.update_scale.
import { describe, expect, test } from "bun:test";
import { createLossScaler, DynamicLossScaler, LossScaleError, StaticLossScaler } from "../src/optim/loss-scaler.ts";

describe("DynamicLossScaler", () => {
  test("doubles after `window` clean steps, counted from the last overflow", () => {
    const s = new DynamicLossScaler({ initScale: 2 ** 5, scaleWindow: 3, minScale: 1, delayedShift: 1 });
    // iter 0,1 clean: (0-(-1))%3=1, (1+1)%3=2 → no change; iter 2: (2+1)%3=0 → double
    s.update(false); s.update(false);
    expect(s.lossScale).toBe(32);
    s.update(false);
    expect(s.lossScale).toBe(64);
    // iter 3 overflow: hysteresis 1 → halve; last_overflow = 3
    s.update(true);
    expect(s.lossScale).toBe(32);
    // iters 4,5 clean: (4-3)%3, (5-3)%3 ≠ 0; iter 6: (6-3)%3 = 0 → double
    s.update(false); s.update(false);
    expect(s.lossScale).toBe(32);
    s.update(false);
    expect(s.lossScale).toBe(64);
    expect(s.overflowCount).toBe(1);
  });

  test("hysteresis 3: two overflows only use up hysteresis, the third halves", () => {
    const s = new DynamicLossScaler({ initScale: 1024, scaleWindow: 1000, minScale: 1, delayedShift: 3 });
    s.update(true);
    expect([s.lossScale, s.hysteresis]).toEqual([1024, 2]);
    s.update(true);
    expect([s.lossScale, s.hysteresis]).toEqual([1024, 1]);
    s.update(true);
    expect([s.lossScale, s.hysteresis]).toEqual([512, 1]);
    s.update(false); // not consecutive: a clean step does not refill hysteresis before the window
    expect(s.hysteresis).toBe(1);
    s.update(true);
    expect(s.lossScale).toBe(256);
    expect(s.overflowCount).toBe(4);
  });

  test("consecutive_hysteresis refills on every clean step", () => {
    const s = new DynamicLossScaler({ initScale: 64, scaleWindow: 100, minScale: 1, delayedShift: 2, consecutiveHysteresis: true });
    s.update(true);
    expect(s.hysteresis).toBe(1);
    s.update(false);
    expect(s.hysteresis).toBe(2);
    s.update(true);
    expect(s.lossScale).toBe(64);
  });

  test("floors at min_loss_scale, then overflow at the floor throws", () => {
    const s = new DynamicLossScaler({ initScale: 8, scaleWindow: 10, minScale: 3, delayedShift: 1 });
    s.update(true);
    expect(s.lossScale).toBe(4);
    s.update(true);
    expect(s.lossScale).toBe(3); // max(4/2, 3)
    expect(() => s.update(true)).toThrow(LossScaleError);
    const lenient = new DynamicLossScaler({ initScale: 2, scaleWindow: 10, minScale: 2, delayedShift: 1, raiseErrorAtMinScale: false });
    lenient.update(true);
    expect(lenient.lossScale).toBe(2);
  });

  test("state round trip continues identically", () => {
    const a = new DynamicLossScaler({ initScale: 2 ** 7, scaleWindow: 4, minScale: 1, delayedShift: 2 });
    const pattern = [false, true, false, false, true, true, false, false, false, false, false, true, false];
    for (const o of pattern.slice(0, 6)) a.update(o);
    const b = new DynamicLossScaler({ initScale: 1, scaleWindow: 4, minScale: 1, delayedShift: 2 });
    b.loadStateDict(JSON.parse(JSON.stringify(a.stateDict())));
    for (const o of pattern.slice(6)) {
      a.update(o);
      b.update(o);
      expect(b.stateDict()).toEqual(a.stateDict());
    }
    expect(() => b.loadStateDict({ ...a.stateDict(), cur_scale: -1 })).toThrow(/malformed/);
  });
});

describe("createLossScaler", () => {
  const base = { enabled: true, loss_scale: 0, initial_scale_power: 11, loss_scale_window: 1000, hysteresis: 2, consecutive_hysteresis: false, min_loss_scale: 1 };
  test("dynamic at 2^initial_scale_power", () => {
    const s = createLossScaler(base);
    expect(s.dynamic).toBe(true);
    expect(s.lossScale).toBe(2048);
  });
  test("static when loss_scale > 0: overflows counted, scale unchanged", () => {
    const s = createLossScaler({ ...base, loss_scale: 96 });
    expect(s).toBeInstanceOf(StaticLossScaler);
    s.update(true); s.update(false);
    expect([s.lossScale, s.overflowCount]).toEqual([96, 1]);
  });
  test("fp16 off → scale 1", () => {
    expect(createLossScaler({ ...base, enabled: false }).lossScale).toBe(1);
  });
});
