/** Parameter units, hooks, initialisation, state dicts and the MoE route (see unit.ts). */
export { Unit, UnitSet, Parameter, NO_OP_HOOKS, enterUnit, leaveUnit, checkParamShape } from "./unit.ts";
export type { UnitKind, Phase, UnitHooks, ParamInit, ParamSpec, UnitOptions } from "./unit.ts";
export { initUnit, initValues } from "./init.ts";
export { writeParam, readParam, readGrad } from "./state-dict.ts";
export type { StateTensor, StateDict } from "./state-dict.ts";
export { LocalRoute, permutePlan } from "./moe-route.ts";
export type { MoERoute, RouteRequest, PermutePlan } from "./moe-route.ts";
