// A small stdio MCP server built on an old, pinned TypeScript SDK, for the
// tests of codemode's MCP client against servers that speak only an older
// protocol version. MCP_SDK names the SDK package (default
// "mcp-sdk-2025-03-26", @modelcontextprotocol/sdk@1.12.1, whose newest
// protocol version is 2025-03-26); the package.json of the repository pins
// it.
const sdk = process.env.MCP_SDK || "mcp-sdk-2025-03-26";
const { Server } = await import(`${sdk}/server/index.js`);
const { StdioServerTransport } = await import(`${sdk}/server/stdio.js`);
const { ListToolsRequestSchema, CallToolRequestSchema, LATEST_PROTOCOL_VERSION } = await import(`${sdk}/types.js`);

const server = new Server({ name: "legacy", version: "1.0.0" }, { capabilities: { tools: {} } });

const tools = [
  {
    name: "stats",
    description: "Sum and mean of numbers.",
    inputSchema: { type: "object", properties: { values: { type: "array", items: { type: "number" } } }, required: ["values"] },
  },
  {
    name: "protocol",
    description: "The newest protocol version this server's SDK speaks.",
    inputSchema: { type: "object", properties: {} },
  },
];

server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools }));
server.setRequestHandler(CallToolRequestSchema, async (request) => {
  const args = request.params.arguments ?? {};
  switch (request.params.name) {
    case "stats": {
      const values = args.values ?? [];
      if (!Array.isArray(values) || values.length === 0) {
        return { isError: true, content: [{ type: "text", text: "values must be a non-empty array of numbers" }] };
      }
      const sum = values.reduce((a, b) => a + b, 0);
      // Before structuredContent (2025-06-18), data came back as JSON text.
      return { content: [{ type: "text", text: JSON.stringify({ sum, mean: sum / values.length }) }] };
    }
    case "protocol":
      return { content: [{ type: "text", text: LATEST_PROTOCOL_VERSION }] };
  }
  throw new Error(`unknown tool ${request.params.name}`);
});

await server.connect(new StdioServerTransport());
console.error(`legacy server (${sdk}, protocol ${LATEST_PROTOCOL_VERSION}) running on stdio`);
