// Package mcp connects codemode to the Model Context Protocol, in both
// directions, on the official Go SDK (github.com/modelcontextprotocol/go-sdk).
//
// # Client: MCP servers as tools
//
// [Connect] starts or reaches the servers of a [Config] (the mcpServers
// file desktop clients use) and offers their tools as a codemode tool
// tree, one namespace per server:
//
//	cfg, err := mcp.LoadConfig("servers.json")
//	up, err := mcp.Connect(ctx, cfg, mcp.ClientOptions{Logger: logger})
//	defer up.Close()
//	rt, err := codemode.New(codemode.Options{Tools: up.Tools()})
//	// a program calls: await tools.files.read_text_file({ path: "/srv/a.txt" })
//
// [LoadConfig] reads the files MCP clients write (Claude Desktop, Claude
// Code, Cursor, Windsurf, Cline, Roo Code, Gemini CLI, VS Code): their
// aliases are understood, disabled servers left out, fields it does not
// use reported as [ConfigWarning]s rather than errors, and ${NAME}
// references expanded from the host's environment; [ParseConfig] has the
// details.
//
// By default Connect fails when any server cannot be started, with an
// error that says why in terms a person can act on: a stdio server's exit
// status and last stderr lines, the timeout that ran out, the variable
// that is not set. A long-running host sets ClientOptions.Lenient: Connect
// then serves the servers that started, logs each failure at error level,
// lists the others in [Upstreams.Unavailable] (which [Server.SetTools]
// turns into a note in the execute description) and retries them in the
// background, announcing each arrival on [Upstreams.Changed].
// ClientOptions.Background goes further, for a host that must answer its
// own clients at once: Connect returns before any server has answered,
// and [Upstreams.Unavailable] lists the servers still connecting.
//
// [SessionTools] does the same for a session the host already holds (a
// go-sdk ClientSession connected any way), without reconnecting:
//
//	tools, err := mcp.SessionTools(ctx, session, mcp.SessionOptions{})
//	rt, err := codemode.New(codemode.Options{Tools: codemode.Tools{"github": tools}})
//
// A tool's name is used as is, whatever script it is in:
// tools.server["weird/name.x"]({...}) calls the tool "weird/name.x". Only
// "then" and "toJSON", which a program's tools proxy keeps for itself,
// are renamed "then_" and "toJSON_". A tool whose name holds a character
// that does not show as itself (see codemode.CheckName: a zero-width or
// bidirectional control character, a control character, a fullwidth or
// other compatibility look-alike) is left out, with a warning that spells
// the name out: it would read as another name, or as the name of the
// tool beside it, and leaving it out keeps the server's other tools. The
// input schema becomes the tool's
// signature but is not enforced (the server validates its arguments); a
// schema that cannot be decoded is dropped with a log record and the tool
// kept.
//
// A call's result becomes a program value:
//
//   - structuredContent, when present, as it is;
//   - otherwise the content blocks: none gives null, one gives its value,
//     several give an array of their values;
//   - a text block is its string, or the JSON it holds when that is an
//     object or an array (servers that predate structuredContent return
//     data that way; a bare number stays a string, so ids keep their
//     digits);
//   - an image or audio block is {type, mimeType, size, data}, where
//     size is the byte count and data the base64 bytes, present only up to
//     ClientOptions.MaxInlineBytes (64 KiB by default);
//   - an embedded resource is {type: "resource", uri, mimeType?, text} or,
//     for binary contents, {type: "resource", uri, mimeType?, size, blob?};
//   - a resource link is {type: "resource_link", uri, name, title?,
//     description?, mimeType?, size?}.
//
// A result with isError, and a JSON-RPC error, reject the call with a
// ToolError carrying the server's text: at most 2,000 characters, with
// escape sequences and control characters (other than newline and tab)
// removed. A server that dies or drops its connection during a call fails
// that call with a ToolError saying so; the next call reconnects (after a
// failed reconnect, attempts back off from one second to thirty). When a
// run ends, its calls' contexts are cancelled and the SDK sends the server
// notifications/cancelled. ClientOptions.CallTimeout bounds each call.
//
// The credentials of a server's config (its header values, the values of
// its environment variables whose names suggest a credential, the value
// of every variable it inherits through EnvInherit, the password of any
// URL in its command, arguments, env values, cwd, url or headers — or
// the user name when a URL has no password, as in https://<token>@host/ —
// and its URL's credential-named query parameters) are redacted from
// everything the server sends back to a program — results, tool errors,
// JSON-RPC errors — and from the errors Connect and Refresh return and
// the log records (the SDK's and the stdio server's stderr included).
// Like the openapi package, they are replaced by [REDACTED] raw and in
// the forms a server may echo them in: JSON-, JavaScript- or HTML-escaped,
// percent-encoded, hex and base64. Headers go to the URL's origin only,
// and a redirect to another origin is refused with an error naming it.
//
// A server that announces notifications/tools/list_changed is listed
// again; [Upstreams.Changed] signals it, and the next [Upstreams.Tools]
// snapshot has the new tools. Servers speaking protocol versions from
// 2024-11-05 on are supported.
//
// # Server: execute over MCP
//
// [NewServer] offers one tool, execute, whose description is the
// runtime's instructions (the catalog of tools included) and whose input
// is {code: string}. The result is the run's [codemode.Result] as JSON
// text and as structuredContent; isError is set when the run failed. When
// a call carries a progress token, each finished tool call of the run
// sends notifications/progress. [Server.SetTools] swaps the tools (after
// an upstream's list changed, or a server arrived late) without
// disturbing runs in flight, and notifies clients with
// notifications/tools/list_changed.
package mcp
