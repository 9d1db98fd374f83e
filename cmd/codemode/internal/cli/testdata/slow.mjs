// A stdio MCP server that takes its time to start: it says nothing until
// the file named by its first argument exists, then serves as the
// everything server (the module its second argument names) does. One
// that downloads itself first, say, with the test deciding when it is
// done.
import { existsSync } from "node:fs";
import { pathToFileURL } from "node:url";

const [marker, everything] = process.argv.slice(2);
console.error("slow: starting up");
while (!existsSync(marker)) {
  await new Promise((resolve) => setTimeout(resolve, 50));
}
process.argv.length = 2; // the everything server reads its transport from argv
await import(pathToFileURL(everything).href);
