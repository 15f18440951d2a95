// A TypeScript-SDK `McpServer` (npm @modelcontextprotocol/sdk 1.x) on stdio whose resource
// reads resolve the URI the way the SDK does (`new URL(uri)`: dot segments, `%2e%2e`, scheme
// case and backslashes all resolved), so a gateway that forwards a dotted URI gets the
// resource the dots lead to. Records the raw `params.uri` of every `resources/read`,
// `resources/subscribe` and `resources/unsubscribe` it receives; the tool `seen_<role>`
// returns them, and `touch_files {uri}` sends `notifications/resources/updated` naming `uri`
// exactly as given.
//
// Roles (first argument):
//   files     - file:///public/readme, file:///private/key and the template file:///{+path}
//               (declares resources.subscribe)
//   lister    - lists notes://shared/1
//   templater - the template notes://shared/{id}
import { McpServer, ResourceTemplate } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { SubscribeRequestSchema, UnsubscribeRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";

const role = process.argv[2] ?? "files";
const seen = { reads: [], subscribes: [], unsubscribes: [] };
const server = new McpServer(
  { name: `resolving-${role}`, version: "1.0.0" },
  { capabilities: { resources: { subscribe: role === "files", listChanged: true }, tools: {} } },
);

const text = (body) => async (uri) => ({ contents: [{ uri: uri.href, mimeType: "text/plain", text: body }] });

if (role === "files") {
  server.registerResource("readme", "file:///public/readme", { mimeType: "text/plain" }, text("public readme"));
  server.registerResource("key", "file:///private/key", { mimeType: "text/plain" }, text("PRIVATE-KEY-CONTENTS"));
  server.registerResource(
    "any-file",
    new ResourceTemplate("file:///{+path}", { list: undefined }),
    { mimeType: "text/plain" },
    async (uri, { path }) => ({ contents: [{ uri: uri.href, text: `no such file: ${path}` }] }),
  );
  server.server.setRequestHandler(SubscribeRequestSchema, async () => ({}));
  server.server.setRequestHandler(UnsubscribeRequestSchema, async () => ({}));
  server.registerTool(
    "touch_files",
    { description: "Say a resource changed", inputSchema: { uri: z.string() } },
    async ({ uri }) => {
      await server.server.sendResourceUpdated({ uri });
      return { content: [{ type: "text", text: "sent" }] };
    },
  );
} else if (role === "lister") {
  server.registerResource("shared", "notes://shared/1", { mimeType: "text/plain" }, text("the lister's note"));
} else {
  server.registerResource(
    "shared-notes",
    new ResourceTemplate("notes://shared/{id}", { list: undefined }),
    { mimeType: "text/plain" },
    async (uri, { id }) => ({ contents: [{ uri: uri.href, text: `the templater's note ${id}` }] }),
  );
}

server.registerTool(`seen_${role}`, { description: "What this server was asked" }, async () => ({
  content: [{ type: "text", text: JSON.stringify(seen) }],
}));

const transport = new StdioServerTransport();
await server.connect(transport);
const deliver = transport.onmessage;
transport.onmessage = (message, extra) => {
  if (message.method === "resources/read") seen.reads.push(message.params?.uri);
  if (message.method === "resources/subscribe") seen.subscribes.push(message.params?.uri);
  if (message.method === "resources/unsubscribe") seen.unsubscribes.push(message.params?.uri);
  deliver(message, extra);
};
