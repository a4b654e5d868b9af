// Metrics: calls, errors and latency (p50, p95) per namespace and tool over time, from the audit log
// (GET /audit/stats), drawn by chart.js; read again every 10 s.

import { api } from "./api.js";
import { COLORS, lineChart } from "./chart.js";
import { alertBox, h, uid } from "./dom.js";

const EVERY_MS = 10000;
const WINDOWS = [["15", "Last 15 minutes", 30], ["60", "Last hour", 60], ["360", "Last 6 hours", 600], ["1440", "Last day", 1800]];
const TOP = 8;

export default async function metrics(main) {
  const id = uid("window");
  const choice = h("select", { id }, WINDOWS.map(([value, text]) => h("option", { value }, text)));
  choice.value = new URLSearchParams(window.location.search).get("minutes") || "60";
  const charts = h("div", { class: "charts" });
  const legend = h("div");
  const failure = h("div");
  const summary = h("p", { class: "muted", "aria-live": "polite", id: "metrics-summary" });

  async function refresh() {
    const [minutes, , step] = WINDOWS.find((w) => w[0] === choice.value) || WINDOWS[1];
    let data;
    try {
      data = await api(`/audit/stats?minutes=${minutes}&step=${step}`);
    } catch (error) {
      if (error.status !== 401) failure.replaceChildren(alertBox(`Cannot read the metrics: ${error.message}`));
      return;
    }
    failure.replaceChildren(data.enabled ? [] : alertBox("This gateway keeps no audit log (TOOLDOCK_LOG_DIR), which the charts are drawn from."));
    const top = data.series.slice(0, TOP);
    const name = (s) => `${s.namespace}/${s.tool}`;
    const line = (field) => top.map((s) => ({ name: name(s), points: s.points.map((p) => [p.t + data.step / 2, p[field]]) }));
    const span = { start: data.start, end: data.end };
    charts.replaceChildren(
      h("figure", {}, h("figcaption", {}, "Calls per step"), lineChart({ title: "Calls", series: line("calls"), ...span })),
      h("figure", {}, h("figcaption", {}, "Errors per step"), lineChart({ title: "Errors", series: line("errors"), ...span })),
      h("figure", {}, h("figcaption", {}, "Latency p50 (ms)"), lineChart({ title: "Latency p50", series: line("p50"), unit: " ms", ...span })),
      h("figure", {}, h("figcaption", {}, "Latency p95 (ms)"), lineChart({ title: "Latency p95", series: line("p95"), unit: " ms", ...span })));
    const worst = (s, field) => Math.max(0, ...s.points.map((p) => p[field] ?? 0));
    legend.replaceChildren(h("table", { class: "series", "aria-label": "Tools in the charts" },
      h("thead", {}, h("tr", {}, ["", "Tool", "Calls", "Errors", "Highest p50", "Highest p95"].map((t) => h("th", { scope: "col" }, t)))),
      h("tbody", {}, data.series.map((s, index) => h("tr", { "data-series": name(s) },
        h("td", {}, index < TOP ? h("span", { class: "swatch", style: null, "data-color": index, "aria-hidden": "true" }, "\u25a0") : ""),
        h("th", { scope: "row" }, name(s)), h("td", {}, String(s.calls)), h("td", {}, String(s.errors)),
        h("td", {}, `${worst(s, "p50")} ms`), h("td", {}, `${worst(s, "p95")} ms`))))));
    legend.querySelectorAll(".swatch").forEach((node) => { node.style.color = COLORS[Number(node.dataset.color) % COLORS.length]; });
    const calls = data.series.reduce((n, s) => n + s.calls, 0);
    const errors = data.series.reduce((n, s) => n + s.errors, 0);
    summary.textContent = `${calls} calls, ${errors} errors, ${data.series.length} tools; updated ${new Date().toLocaleTimeString()}`;
  }

  choice.addEventListener("change", () => {
    window.history.replaceState(null, "", `${window.location.pathname}?minutes=${choice.value}`);
    refresh();
  });
  main.append(h("h1", { tabindex: "-1" }, "Metrics"),
    h("p", {}, "Tool calls from the audit log, per namespace and tool (the eight busiest drawn). Prometheus can scrape ",
      h("code", {}, "/metrics"), " for the same counts."),
    h("div", { class: "field" }, h("label", { for: id }, "Window"), choice), failure, summary, charts, legend);
  await refresh();
  const timer = window.setInterval(refresh, EVERY_MS);
  return () => window.clearInterval(timer);
}
