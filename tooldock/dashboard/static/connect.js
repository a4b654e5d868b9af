// Connect: a namespace's ready-to-paste set-up for each client, with this gateway's real URL and the token
// left as a placeholder (the shapes `tooldock install` writes: tooldock/cli/install.py).

import { api, root } from "./api.js";
import { alertBox, h, pretty, uid } from "./dom.js";
import { request } from "./mcp.js";

const VAR = "TOOLDOCK_BEARER_TOKEN";
const PLACEHOLDER = "<your token or API key>";

const quote = (text) => `'${text.replace(/'/g, "'\\''")}'`;

/** tools/list over MCP, with the envelope and headers the dashboard's own calls send. */
function curl(url) {
  const { body, headers } = request("", {});
  delete headers["Mcp-Name"];
  delete body.params._meta.progressToken;
  headers["Mcp-Method"] = "tools/list";
  const listing = { jsonrpc: "2.0", id: 1, method: "tools/list", params: { _meta: body.params._meta } };
  return [`curl -s -X POST ${quote(url)}`, `  -H "Authorization: Bearer $${VAR}"`,
    ...Object.entries(headers).map(([k, v]) => `  -H ${quote(`${k}: ${v}`)}`), `  -d ${quote(JSON.stringify(listing))}`].join(" \\\n");
}

export function snippets(base, namespace) {
  const url = `${base}/ns/${encodeURIComponent(namespace)}/mcp`;
  const name = `tooldock-${namespace}`;
  return [
    ["Claude Desktop", "claude_desktop_config.json (through the mcp-remote bridge; Desktop cannot read your environment)", pretty({ mcpServers: { [name]: {
      command: "npx", args: ["-y", "mcp-remote", url, "--header", "Authorization:${TOOLDOCK_AUTHORIZATION}"],
      env: { TOOLDOCK_AUTHORIZATION: `Bearer ${PLACEHOLDER}` } } } })],
    ["Cursor", `~/.cursor/mcp.json (reads ${VAR} from its environment)`, pretty({ mcpServers: { [name]: {
      url, headers: { Authorization: `Bearer \${env:${VAR}}` } } } })],
    ["VS Code", "mcp.json (VS Code asks for the key once and keeps it in its secret storage)", pretty({
      servers: { [name]: { type: "http", url, headers: { Authorization: "Bearer ${input:tooldock-key}" } } },
      inputs: [{ type: "promptString", id: "tooldock-key", description: "ToolDock gateway key", password: true }] })],
    ["LiteLLM", "config.yaml", [
      "mcp_servers:", `  ${namespace.replace(/[^A-Za-z0-9_]/g, "_")}:`, `    url: "${url}"`, '    transport: "http"',
      '    auth_type: "bearer_token"', `    auth_value: "os.environ/${VAR}"`].join("\n")],
    ["Open WebUI", "Admin Settings, External Tools: add an MCP (Streamable HTTP) connection", [
      `URL:  ${url}`, `Auth: Bearer, key ${PLACEHOLDER}`, "",
      "Or as an OpenAPI tool server (REST):", `URL:  ${base}/ns/${encodeURIComponent(namespace)}`, "OpenAPI path: openapi.json",
      `Auth: Bearer, key ${PLACEHOLDER}`].join("\n")],
    ["curl", `a shell with ${VAR} set: lists the tools`, curl(url)],
  ];
}

export default async function connect(main, { params, navigate }) {
  main.append(h("h1", { tabindex: "-1" }, "Connect a client"));
  let listed;
  try {
    listed = (await api("/namespaces")).namespaces.map((ns) => ns.name);
  } catch (error) {
    if (error.status !== 401) main.append(alertBox(`Cannot list the namespaces: ${error.message}`));
    return null;
  }
  if (!listed.length) { main.append(h("p", {}, "No namespace to connect to.")); return null; }
  const namespace = listed.includes(params[0]) ? params[0] : listed[0];
  const id = uid("ns");
  const choice = h("select", { id, onchange: () => navigate(`/connect/${encodeURIComponent(choice.value)}`) },
    listed.map((ns) => h("option", { value: ns, selected: ns === namespace }, ns)));
  const base = new URL(root || "/", window.location.href).href.replace(/\/$/, "");
  main.append(h("div", { class: "field" }, h("label", { for: id }, "Namespace"), choice),
    h("p", {}, "Replace the placeholder with the gateway's bearer token or an API key (Keys makes one). Nothing here holds your token."));
  for (const [client, where, text] of snippets(base, namespace)) {
    const box = h("pre", { class: "snippet", "data-client": client, tabindex: "0", "aria-label": `${client} set-up` }, text);
    const copy = h("button", { type: "button", "aria-label": `Copy the ${client} set-up` }, "Copy");
    copy.addEventListener("click", async () => {
      try { await navigator.clipboard.writeText(text); copy.textContent = "Copied"; }
      catch { copy.textContent = "Select the text to copy it"; }
    });
    main.append(h("section", { "aria-label": client }, h("h2", {}, client), h("p", { class: "muted" }, where), box, copy));
  }
  return null;
}
