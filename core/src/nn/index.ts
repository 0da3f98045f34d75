/** Parameter units, hooks, initialisation, state dicts and the MoE layer (see unit.ts, moe/layer.ts). */
export { Unit, UnitSet, Parameter, NO_OP_HOOKS, enterUnit, leaveUnit, checkParamShape } from "./unit.ts";
export type { UnitKind, Phase, UnitHooks, ParamInit, ParamSpec, ParamWindow, UnitOptions } from "./unit.ts";
export { initUnit, initValues } from "./init.ts";
export { writeParam, readParam, readGrad } from "./state-dict.ts";
export type { StateTensor, StateDict } from "./state-dict.ts";
export * from "./moe/index.ts";
