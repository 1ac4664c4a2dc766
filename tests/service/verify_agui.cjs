// Reads one SSE response body on stdin and runs its events through @ag-ui/client's own
// verifier (the check HttpAgent applies). Exit 0: accepted; 1: the verifier's message.
// Run from any directory: the package is resolved from web/node_modules.
const path = require("node:path");
const { createRequire } = require("node:module");

const web = createRequire(path.join(__dirname, "..", "..", "web", "package.json"));
const { verifyEvents } = web("@ag-ui/client");
const { from, lastValueFrom, toArray } = web("rxjs");

let body = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => (body += chunk));
process.stdin.on("end", async () => {
  const events = body
    .split(/\r?\n\r?\n/)
    .map((frame) => frame.split(/\r?\n/).filter((line) => line.startsWith("data:")))
    .filter((data) => data.length > 0)
    .map((data) => JSON.parse(data.map((line) => line.slice(5).trimStart()).join("\n")));
  try {
    const checked = await lastValueFrom(from(events).pipe(verifyEvents(false), toArray()));
    process.stdout.write(`accepted ${checked.length} events\n`);
  } catch (error) {
    process.stdout.write(`rejected: ${error.message}\n`);
    process.exit(1);
  }
});
