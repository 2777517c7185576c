// Small plots as inline SVG, built node by node (no HTML strings, no library).

import { svg } from "./dom.js";

// Horizontal bars, one per {label, value}: readable at any width, labels never overlap.
export function bars(points, { title, signed = false } = {}) {
  const rowHeight = 22;
  const labelWidth = 180;
  const width = 520;
  const height = Math.max(1, points.length) * rowHeight + 8;
  const largest = Math.max(1, ...points.map((p) => Math.abs(p.value)));
  const room = width - labelWidth - 40;
  const chart = svg("svg", { class: "plot", viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": title });
  chart.append(svg("title", {}, title));
  points.forEach((point, index) => {
    const y = 4 + index * rowHeight;
    const length = Math.max(1, (Math.abs(point.value) / largest) * room);
    const label = point.label.length > 28 ? `${point.label.slice(0, 27)}…` : point.label;
    chart.append(
      svg("text", { x: labelWidth - 6, y: y + 14, "text-anchor": "end" }, label),
      svg("rect", { x: labelWidth, y: y + 3, width: length, height: rowHeight - 8, class: signed && point.value < 0 ? "down" : "" }, svg("title", {}, `${point.label}: ${point.value}`)),
      svg("text", { x: labelWidth + length + 4, y: y + 14 }, String(point.value)),
    );
  });
  return chart;
}

// Columns over time, one per {label, value}, with the first and last label under the axis.
export function columns(points, { title } = {}) {
  const width = 520;
  const height = 160;
  const bottom = 130;
  const largest = Math.max(1, ...points.map((p) => p.value));
  const step = (width - 20) / Math.max(1, points.length);
  const chart = svg("svg", { class: "plot", viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": title });
  chart.append(svg("title", {}, title), svg("line", { x1: 10, x2: width - 10, y1: bottom, y2: bottom, stroke: "currentColor", "stroke-opacity": 0.3 }));
  points.forEach((point, index) => {
    const barHeight = (point.value / largest) * (bottom - 20);
    chart.append(
      svg("rect", { x: 10 + index * step + 1, y: bottom - barHeight, width: Math.max(1, step - 2), height: barHeight }, svg("title", {}, `${point.label}: ${point.value}`)),
    );
  });
  if (points.length) {
    chart.append(
      svg("text", { x: 10, y: bottom + 16 }, points[0].label),
      svg("text", { x: width - 10, y: bottom + 16, "text-anchor": "end" }, points[points.length - 1].label),
      svg("text", { x: 10, y: 12 }, `max ${largest} a day`),
    );
  }
  return chart;
}
