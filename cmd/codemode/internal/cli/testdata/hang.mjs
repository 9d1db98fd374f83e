// A stdio MCP server that never answers: it says it is starting, then
// waits forever, ignoring its input.
console.error("hang: starting up");
setInterval(() => {}, 1000);
