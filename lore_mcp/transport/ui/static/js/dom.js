// Building the page from data without HTML strings: every stored text becomes a text node,
// so a lesson containing markup or <script> is shown as the characters it is, never parsed.

const SVG = "http://www.w3.org/2000/svg";

function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function setAttributes(node, attrs) {
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on")) {
      // Handlers are functions only: an on… attribute would be inline script (and CSP blocks it).
      if (typeof value !== "function") throw new TypeError(`${name} must be a function`);
      node.addEventListener(name.slice(2), value);
    } else {
      node.setAttribute(name, value === true ? "" : String(value));
    }
  }
}

// An HTML element: h("a", {href: "#/x", onclick: fn}, "text", child, ...).
export function h(tag, attrs, ...children) {
  const node = document.createElement(tag);
  setAttributes(node, attrs);
  return append(node, children);
}

// An SVG element, for the overview's plots.
export function svg(tag, attrs, ...children) {
  const node = document.createElementNS(SVG, tag);
  setAttributes(node, attrs);
  return append(node, children);
}

export function clear(node, ...children) {
  node.replaceChildren();
  return append(node, children);
}

// A short date and time in the person's locale.
export function when(iso) {
  if (!iso) return "";
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? String(iso) : date.toLocaleString();
}

// A value of any JSON type as text (objects and lists as JSON).
export function show(value) {
  if (value === null || value === undefined) return "—";
  if (typeof value === "object") return JSON.stringify(value);
  return String(value);
}

// A button that runs `action` and shows its failure, disabled while it runs.
export function button(label, action, attrs = {}) {
  const node = h("button", { type: "button", ...attrs }, label);
  node.addEventListener("click", async () => {
    node.disabled = true;
    try {
      await action();
    } finally {
      node.disabled = false;
    }
  });
  return node;
}
