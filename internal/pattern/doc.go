// Package pattern matches tool names against the patterns of policies and
// of the MCP configuration's allow and deny lists, with one set of rules
// for both.
//
// A tool's name is a path of segments (tools.orders.refund is ["orders",
// "refund"]), and a segment is whatever its namespace or tool is called:
// an MCP tool named "files/read" or "v1.get" is one segment. A pattern is
// matched segment by segment, so a wildcard never reaches across a
// segment boundary and never stops inside one: "evil.*" covers
// evil["a/b"] and evil["x.y"] alike.
package pattern
