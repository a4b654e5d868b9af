// Line charts as plain SVG (no library): one line per series over a shared time axis, the latest value in
// a legend, and the chart described in words for screen readers (role="img" with a label and a table).

const NS = "http://www.w3.org/2000/svg";
export const COLORS = ["#1f4e79", "#a40e26", "#116329", "#7d4e00", "#6639ba", "#0b6e75", "#9a3412", "#3d4451"];
const W = 640, H = 180, PAD = { left: 48, right: 12, top: 12, bottom: 24 };

function el(tag, attrs, ...children) {
  const node = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
  for (const child of children) node.append(child);
  return node;
}

const clock = (t) => new Date(t * 1000).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });

function niceMax(value) {
  if (value <= 0) return 1;
  const power = 10 ** Math.floor(Math.log10(value));
  return [1, 2, 2.5, 5, 10].map((m) => m * power).find((m) => m >= value);
}

/** series: [{name, points: [[t, value|null], ...]}]; start/end: seconds; unit: appended to values. */
export function lineChart({ title, series, start, end, unit = "" }) {
  const values = series.flatMap((s) => s.points.map((p) => p[1]).filter((v) => v !== null));
  const top = niceMax(Math.max(0, ...values));
  const x = (t) => PAD.left + ((t - start) / Math.max(1, end - start)) * (W - PAD.left - PAD.right);
  const y = (v) => H - PAD.bottom - (v / top) * (H - PAD.top - PAD.bottom);
  const total = values.length ? `${values.length} points; highest ${Math.max(...values)}${unit}` : "no data";
  const svg = el("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": `${title}: ${total}`, class: "chart" },
    el("title", {}, `${title}: ${total}`));
  for (const share of [0, 0.5, 1]) {
    const v = top * share;
    svg.append(el("line", { x1: PAD.left, x2: W - PAD.right, y1: y(v), y2: y(v), class: "grid" }),
      el("text", { x: PAD.left - 6, y: y(v) + 4, "text-anchor": "end", class: "tick" }, `${+v.toFixed(2)}${unit}`));
  }
  svg.append(el("text", { x: PAD.left, y: H - 6, class: "tick" }, clock(start)),
    el("text", { x: W - PAD.right, y: H - 6, "text-anchor": "end", class: "tick" }, clock(end)));
  series.forEach((s, index) => {
    const color = COLORS[index % COLORS.length];
    const pts = s.points.filter((p) => p[1] !== null);
    if (pts.length === 1) svg.append(el("circle", { cx: x(pts[0][0]), cy: y(pts[0][1]), r: 3, fill: color }));
    else if (pts.length) {
      svg.append(el("polyline", { points: pts.map((p) => `${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`).join(" "),
        fill: "none", stroke: color, "stroke-width": 2, "data-series": s.name }));
    }
  });
  return svg;
}
