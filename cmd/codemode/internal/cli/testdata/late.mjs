// A stdio MCP server that fails until the file named by its first
// argument exists, then serves as the everything server (the module its
// second argument names) does: one whose dependency comes up later.
import { existsSync } from "node:fs";
import { pathToFileURL } from "node:url";

const [marker, everything] = process.argv.slice(2);
if (!existsSync(marker)) {
  console.error(`late: not ready: ${marker} does not exist yet`);
  process.exit(1);
}
process.argv.length = 2; // the everything server reads its transport from argv
await import(pathToFileURL(everything).href);
