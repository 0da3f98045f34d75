/**
 * `bun run report`: prints the environment report (Bun, wgpu-native, adapters with their backend,
 * type, features and key limits, a compute check per adapter, and what `backend: auto` picks) —
 * the counterpart of DeepSpeed's `ds_report`.
 *
 *   bun run report              text report
 *   bun run report --json       the same data as JSON
 *   bun run report --no-probe   skip the per-adapter compute check
 */
import { parseArgs } from "node:util";
import { collectReport, formatReport } from "@zeromoe/kernels";

/** Usage of `bun run report`. */
export const REPORT_USAGE = `usage: bun run report [--json] [--no-probe]

  --json        print the report as JSON
  --no-probe    do not run the compute check on each adapter
  -h, --help    show this help`;

/** Run the report command with `argv` (without the program name); returns the exit status. */
export async function main(argv: string[]): Promise<number> {
  let values: { json?: boolean; "no-probe"?: boolean; help?: boolean };
  try {
    ({ values } = parseArgs({
      args: argv,
      options: { json: { type: "boolean" }, "no-probe": { type: "boolean" }, help: { type: "boolean", short: "h" } },
      strict: true,
    }));
  } catch (e) {
    console.error(`${(e as Error).message}\n\n${REPORT_USAGE}`);
    return 2;
  }
  if (values.help) {
    console.log(REPORT_USAGE);
    return 0;
  }
  const report = await collectReport({ probe: !values["no-probe"] });
  console.log(values.json ? JSON.stringify(report, null, 2) : formatReport(report));
  return 0;
}

if (import.meta.main) process.exitCode = await main(process.argv.slice(2));
