// The gateway's JSON API with the signed-in token: kept in this tab's sessionStorage, sent as an
// Authorization header only (never a cookie, never in a URL).

const KEY = "tooldock.ui.token";
export const root = document.querySelector('meta[name="tooldock-root"]').content;
const hooks = { unauthorized: () => {} };

export const token = () => window.sessionStorage.getItem(KEY);
export const setToken = (value) => window.sessionStorage.setItem(KEY, value);
export const clearToken = () => window.sessionStorage.removeItem(KEY);
export const onUnauthorized = (fn) => { hooks.unauthorized = fn; };

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** The error an answer that is not 2xx carries: ToolDock's {"error": {...}}, a JSON-RPC error, or its text. */
export function errorOf(status, text) {
  let data = null;
  try { data = JSON.parse(text); } catch { /* not JSON */ }
  const err = (data && data.error) || {};
  return new ApiError(status, err.code || "http_error", err.message || text || `HTTP ${status}`);
}

export function authHeaders(presented) {
  return { Authorization: `Bearer ${presented ?? token()}` };
}

/** fetch + JSON both ways. `as`: a token to try instead of the stored one (sign-in). A 401 with the
 *  stored token signs out (the hook shows the sign-in form with the reason). */
export async function api(path, { method = "GET", body, signal, as } = {}) {
  const headers = authHeaders(as);
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let reply;
  try {
    reply = await fetch(root + path, {
      method, headers, signal, credentials: "omit", cache: "no-store",
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (error) {
    if (error.name === "AbortError") throw error;
    throw new ApiError(0, "network", `The gateway cannot be reached (${error.message}).`);
  }
  const text = await reply.text();
  if (!reply.ok) {
    const error = errorOf(reply.status, text);
    if (reply.status === 401 && as === undefined) hooks.unauthorized(error);
    throw error;
  }
  return text ? JSON.parse(text) : null;
}

/** A path segment, or a tool name whose "/" stay path separators (the REST routes take them). */
export const seg = (value) => encodeURIComponent(value);
export const toolPath = (name) => name.split("/").map(encodeURIComponent).join("/");
