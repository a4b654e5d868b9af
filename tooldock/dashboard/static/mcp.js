// One tool call over MCP 2026-07-28: a stateless POST to the namespace's endpoint that asks for progress and
// log lines, read as they come (an event stream); aborting the request (closing the stream) cancels the
// call. A JSON-RPC error or an HTTP failure is a TransportError; a tool's own failure is a result with isError.
// The dashboard declares elicitation and sampling: a tool's questions come back as an `input_required` answer
// (2026-07-28 has no session to ask over), the person answers them (`onAsk`), and the same call is sent again
// with the answers and the server's requestState; the tool runs again from the start with them recorded.

import { authHeaders, errorOf, root, seg } from "./api.js";

export const VERSION = "2026-07-28";
let next = 0;

export const CAPABILITIES = { elicitation: { form: {} }, sampling: {} };
const MAX_ROUNDS = 20;

export class TransportError extends Error {}

/** The person turned a question down (a sampling request rejected): the call ends without an answer. */
export class Refused extends Error {}

/** The JSON-RPC request and headers of a call (also what "copy as curl" shows). */
export function request(name, args, progressToken, capabilities = {}) {
  next += 1;
  const meta = {
    "io.modelcontextprotocol/protocolVersion": VERSION,
    "io.modelcontextprotocol/clientCapabilities": capabilities,
    "io.modelcontextprotocol/clientInfo": { name: "tooldock-dashboard", version: "1" },
    "io.modelcontextprotocol/logLevel": "info",
  };
  if (progressToken) meta.progressToken = progressToken;
  const body = { jsonrpc: "2.0", id: next, method: "tools/call", params: { name, arguments: args, _meta: meta } };
  const headers = {
    "Content-Type": "application/json", Accept: "application/json, text/event-stream",
    "MCP-Protocol-Version": VERSION, "Mcp-Method": "tools/call", "Mcp-Name": name,
  };
  return { body, headers };
}

export const endpoint = (namespace) => `${root}/ns/${seg(namespace)}/mcp`;

function answer(message) {
  if (message.error) throw new TransportError(`JSON-RPC error ${message.error.code}: ${message.error.message}`);
  return message.result;
}

/** Calls the tool; `onProgress(params)` and `onLog(params)` hear the notifications; `onAsk(inputRequests)`
 *  resolves to the answers ({key: result}) or rejects with Refused. Resolves to the tool's result; rejects
 *  with TransportError, Refused, or an AbortError when `signal` aborts. */
export async function callTool(namespace, name, args, { signal, onProgress, onLog, onAsk, requestId }) {
  let extra = {};
  for (let round = 0; round < MAX_ROUNDS; round += 1) {
    const { body, headers } = request(name, args, `ui-${Date.now()}-${next + 1}`, onAsk ? CAPABILITIES : {});
    Object.assign(body.params, extra);
    const result = await exchange(namespace, body, headers, { signal, onProgress, onLog, requestId });
    if (!result || result.resultType !== "input_required" || !onAsk) return result;
    const inputResponses = await onAsk(result.inputRequests || {});
    if (signal && signal.aborted) throw new DOMException("The call was cancelled", "AbortError");
    extra = { inputResponses, ...(result.requestState !== undefined ? { requestState: result.requestState } : {}) };
  }
  throw new TransportError(`The tool still asked for input after ${MAX_ROUNDS} rounds`);
}

/** tools/list (every page of it): the tools this caller sees in the namespace. */
export async function listTools(namespace) {
  const found = [];
  let cursor;
  do {
    const { body, headers } = request("", {});
    delete headers["Mcp-Name"];
    headers["Mcp-Method"] = "tools/list";
    const params = { _meta: body.params._meta, ...(cursor ? { cursor } : {}) };
    const page = await exchange(namespace, { ...body, method: "tools/list", params }, headers, {});
    found.push(...(page.tools || []));
    cursor = page.nextCursor;
  } while (cursor);
  return found;
}

/** POSTs one JSON-RPC message; resolves to the response's result, reading an event stream as it comes:
 *  notifications go to onProgress/onLog, the server's own requests (a session's questions) to onRequest.
 *  onHeaders(headers) sees the answer's headers (a session's id). */
export async function exchange(namespace, body, headers, { signal, onProgress = () => {}, onLog = () => {}, requestId, onRequest, onHeaders }) {
  let reply;
  try {
    const extra = requestId ? { "X-Request-Id": requestId } : {};
    reply = await fetch(endpoint(namespace), { method: "POST", headers: { ...headers, ...extra, ...authHeaders() },
      body: JSON.stringify(body), signal, credentials: "omit", cache: "no-store" });
  } catch (error) {
    if (error.name === "AbortError") throw error;
    throw new TransportError(`The gateway cannot be reached (${error.message})`);
  }
  if (!reply.ok) {
    const error = errorOf(reply.status, await reply.text());
    throw new TransportError(`HTTP ${reply.status}: ${error.message}`);
  }
  if (onHeaders) onHeaders(reply.headers);
  if (!(reply.headers.get("content-type") || "").startsWith("text/event-stream")) return answer(await reply.json());
  const reader = reply.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value.replace(/\r\n/g, "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = event.split("\n").filter((line) => line.startsWith("data:")).map((line) => line.slice(5).trimStart()).join("\n");
      if (!data) continue;
      const message = JSON.parse(data);
      if (message.method === "notifications/progress") onProgress(message.params);
      else if (message.method === "notifications/message") onLog(message.params);
      else if (message.method && message.id !== undefined && onRequest) onRequest(message);
      else if (message.id === body.id) {
        reader.cancel().catch(() => {});
        return answer(message);
      }
    }
  }
  throw new TransportError("The gateway's event stream ended without an answer");
}
