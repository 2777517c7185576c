// Small plots built node by node (no HTML strings, no library): bars as HTML, so their labels
// are body text that wraps and links; columns over time as inline SVG.

import { h, svg } from "./dom.js";

// Horizontal bars, one per {label, value, href}: the label in full (a link where `href` is
// given), the bar's length set through the style object (the page's CSP allows no inline style).
export function bars(points, { title, signed = false } = {}) {
  const largest = Math.max(1, ...points.map((p) => Math.abs(p.value)));
  return h(
    "figure",
    { class: "bars" },
    h("figcaption", { class: "muted" }, title),
    h(
      "ul",
      {},
      points.map((point) => {
        const fill = h("span", { class: signed && point.value < 0 ? "fill down" : "fill" });
        fill.style.width = `${Math.max(1, (Math.abs(point.value) / largest) * 100)}%`;
        return h(
          "li",
          {},
          point.href ? h("a", { href: point.href, class: "label text" }, point.label) : h("span", { class: "label text" }, point.label),
          h("span", { class: "track" }, fill, h("span", { class: "value" }, String(point.value))),
        );
      }),
    ),
  );
}

// Columns over time, one per {label, value}, with the first and last day and the largest count below.
export function columns(points, { title } = {}) {
  const width = 520;
  const height = 130;
  const bottom = 126;
  const largest = Math.max(1, ...points.map((p) => p.value));
  const step = (width - 20) / Math.max(1, points.length);
  const chart = svg("svg", { class: "plot", viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": title });
  chart.append(svg("title", {}, title), svg("line", { x1: 10, x2: width - 10, y1: bottom, y2: bottom, stroke: "currentColor", "stroke-opacity": 0.3 }));
  points.forEach((point, index) => {
    const barHeight = (point.value / largest) * (bottom - 10);
    chart.append(
      svg("rect", { x: 10 + index * step + 1, y: bottom - barHeight, width: Math.max(1, step - 2), height: barHeight }, svg("title", {}, `${point.label}: ${point.value}`)),
    );
  });
  const axis = points.length
    ? h("p", { class: "axis muted" }, h("span", {}, points[0].label), h("span", {}, `max ${largest} a day`), h("span", {}, points[points.length - 1].label))
    : null;
  return h("figure", { class: "columns" }, chart, axis);
}
