import { describe, expect, test } from "bun:test";
import { composePlugins, definePlugin, PluginConflictError, type HookName } from "../../src/hooks/plugin.ts";

type H = Record<HookName, (x: string) => string>;
const id = (tag: string) => (x: string) => `${x}>${tag}`;
const defaults: H = { partition: id("dp"), gather: id("noop"), reduce: id("allreduce"), route: id("local"), offload: id("device"), checkpoint: id("rank0") };

describe("plugin composition", () => {
  test("claims replace defaults and record owners", async () => {
    const z = definePlugin<H, object>({ name: "zero2", claims: ["reduce", "partition"], setup: (ctx) => { ctx.claim("reduce", id("rs")); ctx.claim("partition", id("shard")); } });
    const c = await composePlugins(defaults, [z], null);
    expect(c.hooks.reduce("g")).toBe("g>rs");
    expect(c.hooks.gather("g")).toBe("g>noop");
    expect(c.owners.reduce).toBe("zero2");
    expect(c.owners.gather).toBe("core");
  });

  test("two claims of one hook is an error naming both plugins", async () => {
    const a = definePlugin<H, object>({ name: "zero2", claims: ["reduce"], setup: (ctx) => ctx.claim("reduce", id("a")) });
    const b = definePlugin<H, object>({ name: "myreduce", claims: ["reduce"], setup: (ctx) => ctx.claim("reduce", id("b")) });
    const err = await composePlugins(defaults, [a, b], null).catch((e) => e);
    expect(err).toBeInstanceOf(PluginConflictError);
    expect(String(err.message)).toContain("zero2");
    expect(String(err.message)).toContain("myreduce");
    expect(String(err.message)).toContain("reduce");
  });

  test("overrides and wraps compose; requires orders set-up", async () => {
    const seen: string[] = [];
    const zero3 = definePlugin<H, object>({ name: "zero3", requires: ["zero2"], overrides: ["zero2"], claims: ["gather", "reduce"], setup: (ctx) => { seen.push("zero3"); ctx.claim("gather", id("ag")); ctx.claim("reduce", id("rs3")); } });
    const zero2 = definePlugin<H, object>({ name: "zero2", claims: ["reduce"], setup: (ctx) => { seen.push("zero2"); ctx.claim("reduce", id("rs")); } });
    const off = definePlugin<H, object>({ name: "offload", setup: (ctx) => ctx.wrap("reduce", (prev) => (x) => prev(x) + ">host") });
    const c = await composePlugins(defaults, [zero3, zero2, off], null);
    expect(seen).toEqual(["zero2", "zero3"]);
    expect(c.hooks.reduce("g")).toBe("g>rs3>host");
    expect(c.owners.reduce).toBe("zero3+offload");
    expect(c.order).toEqual(["zero2", "zero3", "offload"]);
  });

  test("missing requirement, declared conflict, cycles and duplicates are errors", async () => {
    const mk = (name: string, extra: object = {}) => definePlugin<H, object>({ name, setup: () => {}, ...extra });
    await expect(composePlugins(defaults, [mk("zero3", { requires: ["zero2"] })], null)).rejects.toThrow(/requires plugin "zero2"/);
    await expect(composePlugins(defaults, [mk("moe", { conflicts: ["autoep"] }), mk("autoep")], null)).rejects.toThrow(/"moe" and "autoep" cannot be combined/);
    await expect(composePlugins(defaults, [mk("a", { requires: ["b"] }), mk("b", { requires: ["a"] })], null)).rejects.toThrow(/cycle/);
    await expect(composePlugins(defaults, [mk("a"), mk("a")], null)).rejects.toThrow(/twice/);
    expect(() => definePlugin({ name: "", setup: () => {} })).toThrow(/name/);
  });
});
