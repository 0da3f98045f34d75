/**
 * Static plugin-set checks (core/src/hooks/plugin.ts `checkPluginSet`, `claims`): conflicts are found
 * from the plugins' declarations alone, before any `setup` runs, and a plugin may claim only the
 * hooks it declares — so the static check sees every claim composition would make.
 */
import { describe, expect, test } from "bun:test";
import { checkPluginSet, composePlugins, definePlugin, HOOK_NAMES, PluginConflictError, type HookName, type Plugin } from "../../src/hooks/plugin.ts";

type H = Record<HookName, (x: string) => string>;
const id = (tag: string) => (x: string) => `${x}>${tag}`;
const defaults: H = { partition: id("dp"), gather: id("noop"), reduce: id("allreduce"), route: id("local"), offload: id("device"), checkpoint: id("rank0") };

/** A plugin whose setup must never run (the static check may not call it). */
function inert(name: string, extra: Partial<Plugin<H, object>> = {}): Plugin<H, object> {
  return definePlugin<H, object>({
    name,
    setup: () => {
      throw new Error(`setup of ${name} ran`);
    },
    ...extra,
  });
}

function problems(plugins: Plugin<H, object>[]): string {
  try {
    checkPluginSet(plugins);
    return "";
  } catch (e) {
    expect(e).toBeInstanceOf(PluginConflictError);
    return (e as Error).message;
  }
}

describe("checkPluginSet: from declarations, no setup", () => {
  test("two plugins declaring a claim of one hook: an error naming both and the hook", () => {
    for (const hook of HOOK_NAMES) {
      const msg = problems([inert("zero2", { claims: ["partition", hook] }), inert("acme-x", { claims: [hook] })]);
      expect(msg).toContain(`plugins "zero2" and "acme-x" both claim the "${hook}" hook`);
    }
  });

  test("the later plugin (set-up order) may take over by listing the earlier one in overrides — not the other way round", () => {
    expect(problems([inert("zero2", { claims: ["reduce"] }), inert("zero3", { claims: ["reduce"], overrides: ["zero2"] })])).toBe("");
    // requires puts zero2 first even when listed second
    expect(problems([inert("zero3", { claims: ["reduce"], overrides: ["zero2"], requires: ["zero2"] }), inert("zero2", { claims: ["reduce"] })])).toBe("");
    // an override declared by the earlier plugin does not let the later one claim
    const msg = problems([inert("zero2", { claims: ["reduce"], overrides: ["zero3"] }), inert("zero3", { claims: ["reduce"] })]);
    expect(msg).toContain(`plugins "zero2" and "zero3" both claim the "reduce" hook`);
  });

  test("three claimers: each later one must override the previous owner", () => {
    const a = inert("a", { claims: ["gather"] });
    const b = inert("b", { claims: ["gather"], overrides: ["a"] });
    const c = inert("c", { claims: ["gather"], overrides: ["a"] });
    expect(problems([a, b])).toBe("");
    expect(problems([a, b, c])).toContain(`plugins "b" and "c" both claim the "gather" hook`);
  });

  test("wrapping plugins and disjoint claims compose", () => {
    expect(problems([inert("zero3", { claims: ["partition", "gather", "reduce"] }), inert("moe", { claims: ["route"] }), inert("grad-noise")])).toBe("");
    expect(problems([])).toBe("");
  });

  test("declared conflicts (once per pair), missing requirements and duplicates: every problem reported", () => {
    const msg = problems([
      inert("zero1", { conflicts: ["zero2", "zero3"] }),
      inert("zero2", { conflicts: ["zero1", "zero3"] }),
      inert("acme", { requires: ["acme-base"] }),
      inert("dup"),
      inert("dup"),
    ]);
    const lines = msg.split("\n");
    expect(lines.filter((l) => /"zero1" and "zero2" cannot be combined|"zero2" and "zero1" cannot be combined/.test(l)).length).toBe(1);
    expect(msg).toContain(`plugin "acme" requires plugin "acme-base", which is not in this job`);
    expect(msg).toContain(`plugin "dup" is listed twice`);
    expect(lines.length).toBe(3);
  });

  test("a requirement cycle and a claim of something that is not a hook are errors", () => {
    expect(problems([inert("a", { requires: ["b"] }), inert("b", { requires: ["a"] })])).toMatch(/cycle/);
    const bogus = { name: "bad", claims: ["reduse" as HookName], setup: () => {} };
    expect(problems([bogus])).toContain(`"reduse", which is not a hook`);
    expect(() => definePlugin(bogus)).toThrow(/"reduse", which is not a hook/);
  });
});

describe("composePlugins enforces the declarations", () => {
  test("claiming a hook that is not declared in claims is an error naming the plugin and the hook", async () => {
    const sneaky = definePlugin<H, object>({ name: "sneaky", claims: ["gather"], setup: (ctx) => ctx.claim("reduce", id("x")) });
    const err = await composePlugins(defaults, [sneaky], null).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PluginConflictError);
    expect((err as Error).message).toContain(`plugin "sneaky" claims the "reduce" hook without declaring it`);
  });

  test("a statically conflicting set fails before any setup runs", async () => {
    let ran = 0;
    const mk = (name: string) => definePlugin<H, object>({ name, claims: ["reduce"], setup: (ctx) => { ran++; ctx.claim("reduce", id(name)); } });
    const err = await composePlugins(defaults, [mk("p"), mk("q")], null).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PluginConflictError);
    expect(ran).toBe(0);
  });

  test("declared claims that are used compose as before", async () => {
    const z = definePlugin<H, object>({ name: "z", claims: ["reduce", "gather"], setup: (ctx) => ctx.claim("reduce", id("rs")) });
    const c = await composePlugins(defaults, [z], null);
    expect(c.hooks.reduce("g")).toBe("g>rs");
    expect(c.owners.gather).toBe("core");
  });
});
