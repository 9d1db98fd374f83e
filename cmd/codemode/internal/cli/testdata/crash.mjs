// A stdio MCP server that dies at start, as one missing its credentials
// does: one line on stderr, exit status 1.
console.error("crash: FATAL: the environment variable WIDGET_API_KEY is required");
process.exit(1);
