/** Public surface of the launcher (docs/comm.md). */
export { launch, LaunchError, type LaunchOptions, type RankEntry, type RankFailure } from "./launch.ts";
