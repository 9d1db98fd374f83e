#!/bin/sh
# A client for the MCP conformance suite's auth scenarios
# (@modelcontextprotocol/conformance): codemode login with curl as the
# "browser" (the scenarios' authorization server approves at once), then
# codemode run calling each of the server's tools; when a call says to log
# in again (403 insufficient_scope), it does, and runs again. From the
# repository, after go build -o /tmp/codemode ./cmd/codemode:
#
#   CODEMODE=/tmp/codemode node node_modules/@modelcontextprotocol/conformance/dist/index.js \
#     client --command "$PWD/scripts/conformance-auth-client.sh" --scenario auth/metadata-default
#
# The suite appends the server's URL; MCP_CONFORMANCE_CONTEXT carries a
# pre-registered client for the scenarios that have one.
codemode="${CODEMODE:-codemode}"
url="$1"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export CODEMODE_CONFIG_DIR="$dir/cfg"
cfg="$dir/servers.json"
node -e '
const ctx = process.env.MCP_CONFORMANCE_CONTEXT ? JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT) : {};
const s = {url: process.argv[1], type: "http"};
if (ctx.client_id) { s.oauth = {clientId: ctx.client_id}; if (ctx.client_secret) s.oauth.clientSecret = ctx.client_secret; }
require("fs").writeFileSync(process.argv[2], JSON.stringify({mcpServers: {s}}));
' "$url" "$cfg"
BROWSER="curl -sSL -o /dev/null" "$codemode" login s --config "$cfg" --wait 20s --log-level info || exit 1
prog='const hits = await tools.$codemode.search({ query: "", limit: 100 }); const out = []; for (const h of hits.items) { const m = h.path.match(/^tools\.s(?:\.(\w+)|\["(.+)"\])$/); if (!m) continue; try { out.push(await tools.s[m[1] ?? m[2]]({})); } catch (e) { out.push(String(e)); } } return out'
out=$(echo "$prog" | "$codemode" run --config "$cfg" --require-all --log-level info -)
echo "$out"
# The documented step-up: a call that needs more scope says to log in again.
case "$out" in *"codemode login"*)
  BROWSER="curl -sSL -o /dev/null" "$codemode" login s --config "$cfg" --wait 20s || exit 1
  echo "$prog" | "$codemode" run --config "$cfg" --require-all --log-level info - ;;
esac
