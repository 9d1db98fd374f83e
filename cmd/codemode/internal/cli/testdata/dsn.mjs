// A stdio MCP server that dies at start after printing its connection
// strings, as one that cannot reach its database does: its first
// argument and DATABASE_URL, whole and as the password alone.
const urls = [process.argv[2], process.env.DATABASE_URL];
for (const u of urls) {
  console.error(`dsn: cannot connect to ${u} (password ${new URL(u).password})`);
}
process.exit(1);
