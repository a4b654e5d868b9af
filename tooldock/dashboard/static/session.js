// A tool call over an MCP 2025-11-25 session, so that the tool's questions are answered while it runs:
// initialize (declaring elicitation and sampling), then tools/call, whose event stream carries the progress,
// the log lines and the server's requests (elicitation/create, sampling/createMessage). Each request is
// put to the person (`onAsk`, the runner's dialogs) and answered by a POST of its JSON-RPC response on the
// session; a rejected one is answered with an error, which the tool sees. Cancel sends
// notifications/cancelled; the session is deleted when the call ends. The tool runs once: no retry from its
// start, as the stateless protocol's input_required rounds need (mcp.js, the fallback).

import { authHeaders, root, seg } from "./api.js";
import { CAPABILITIES, Refused, TransportError, exchange } from "./mcp.js";

export const SESSION_VERSION = "2025-11-25";
const CLIENT = { name: "tooldock-dashboard", version: "1" };

/** Raised when the gateway would not open a session: the caller falls back to the stateless call. */
export class NoSession extends Error {}

function post(url, headers, message, keepalive = false) {
  return fetch(url, { method: "POST", headers: { ...headers, ...authHeaders() }, body: JSON.stringify(message),
    credentials: "omit", cache: "no-store", keepalive });
}

export async function callInSession(namespace, name, args, { signal, onProgress, onLog, onAsk, requestId }) {
  const url = `${root}/ns/${seg(namespace)}/mcp`;
  const base = { "Content-Type": "application/json", Accept: "application/json, text/event-stream" };
  let session = null;
  try {
    await exchange(namespace, { jsonrpc: "2.0", id: 0, method: "initialize",
      params: { protocolVersion: SESSION_VERSION, capabilities: CAPABILITIES, clientInfo: CLIENT } }, base,
    { signal, onHeaders: (headers) => { session = headers.get("mcp-session-id"); } });
  } catch (error) {
    if (error.name === "AbortError") throw error;
    throw new NoSession(error.message);
  }
  if (!session) throw new NoSession("the gateway opened no session");
  const headers = { ...base, "Mcp-Session-Id": session, "MCP-Protocol-Version": SESSION_VERSION };
  const send = (message, keepalive) => post(url, headers, message, keepalive).catch(() => null);
  const callId = 2;
  const cancelled = () => send({ jsonrpc: "2.0", method: "notifications/cancelled",
    params: { requestId: callId, reason: "Cancelled in the dashboard" } }, true);
  try {
    await send({ jsonrpc: "2.0", method: "notifications/initialized" });
    await exchange(namespace, { jsonrpc: "2.0", id: 1, method: "logging/setLevel", params: { level: "info" } }, headers, { signal });
    signal.addEventListener("abort", cancelled, { once: true });
    const answer = async (message) => {
      let reply;
      try {
        const answers = await onAsk({ [String(message.id)]: { method: message.method, params: message.params } });
        reply = { jsonrpc: "2.0", id: message.id, result: answers[String(message.id)] };
      } catch (error) {
        if (error.name === "AbortError") return;
        const text = error instanceof Refused ? error.message : `The dashboard could not answer: ${error.message}`;
        reply = { jsonrpc: "2.0", id: message.id, error: { code: -1, message: text } };
      }
      await send(reply);
    };
    const body = { jsonrpc: "2.0", id: callId, method: "tools/call",
      params: { name, arguments: args, _meta: { progressToken: `ui-${Date.now()}` } } };
    return await exchange(namespace, body, headers, { signal, onProgress, onLog, requestId, onRequest: answer });
  } catch (error) {
    if (error.name === "AbortError" || error instanceof TransportError) throw error;
    throw new TransportError(String(error.message || error));
  } finally {
    signal.removeEventListener("abort", cancelled);
    fetch(url, { method: "DELETE", headers: { "Mcp-Session-Id": session, "MCP-Protocol-Version": SESSION_VERSION, ...authHeaders() },
      credentials: "omit", keepalive: true }).catch(() => {});
  }
}
