/**
 * `@zeromoe/core/testing` — what a plugin's own tests need: launching ranks, tiny jobs and models,
 * micro-batches and gathering full parameters for comparison. See docs/plugins.md.
 */
export { launch, LaunchError, type LaunchOptions, type RankEntry, type RankFailure } from "./launch/index.ts";
