// This browser's calls (the runner's), kept in this tab's sessionStorage so Activity can list and replay them.

const KEY = "tooldock.ui.calls";
const MAX = 100;

export function calls() {
  try { return JSON.parse(window.sessionStorage.getItem(KEY) || "[]"); } catch { return []; }
}

/** Keep a call: {namespace, tool, args, status, ms, request_id}; the newest first, at most MAX. */
export function remember(call) {
  const kept = [{ id: `${Date.now()}-${Math.random().toString(16).slice(2, 8)}`, time: new Date().toISOString(), ...call },
    ...calls()].slice(0, MAX);
  window.sessionStorage.setItem(KEY, JSON.stringify(kept));
  return kept[0];
}

export const find = (id) => calls().find((c) => c.id === id) || null;
export const forget = () => window.sessionStorage.removeItem(KEY);

/** A request id for a call, sent as X-Request-Id: the audit log's line carries it. */
export function newRequestId() {
  const bytes = new Uint8Array(12);
  window.crypto.getRandomValues(bytes);
  return `ui-${Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("")}`;
}
