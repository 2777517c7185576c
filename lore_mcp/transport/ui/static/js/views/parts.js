// Pieces several views share: a lesson's card, a commit's before/after table, a pager.

import { h, show, when } from "../dom.js";

// A lesson named for people: its problem, cut at a word after `max` characters.
export function cut(text, max = 80) {
  const flat = String(text || "").replace(/\s+/g, " ").trim();
  if (flat.length <= max) return flat;
  const head = flat.slice(0, max);
  return `${head.slice(0, head.lastIndexOf(" ") > max / 2 ? head.lastIndexOf(" ") : max)}…`;
}

// A link to a lesson, by its title where known (else its id).
export function lessonLink(id, title) {
  return title ? h("a", { href: `#/lesson/${id}`, class: "text", title: id }, cut(title)) : h("a", { href: `#/lesson/${id}`, class: "mono" }, id);
}

// A label above its own input, kept together when a form's row wraps.
export function field(label, input) {
  return h("span", { class: "field" }, h("label", { for: input.id }, label), input);
}

const VOTES = { upvotes: "▲", downvotes: "▼" };

// What a commit did, in words: "vote ▲ on “title”", "edit of “title”: resolution".
export function describe(commit) {
  const rows = commit.changed || [];
  const names = rows.map((row) => (row.title ? `“${cut(row.title, 60)}”` : `${row.table} ${row.id}`)).join(", ");
  const fields = [...new Set(rows.flatMap((row) => row.fields))];
  const message = commit.message && commit.message !== commit.kind && commit.kind !== "revert" ? commit.message : "";
  if (commit.kind === "vote") return `vote ${fields.map((f) => VOTES[f] || f).join(" ")} on ${names}`;
  if (commit.kind === "update") return `edit of ${names}: ${fields.join(", ")}`;
  if (commit.kind === "apply") return `apply: ${message}`;
  return [commit.kind, names ? ` of ${names}` : "", message ? `: ${message}` : ""].join("");
}

export function tagList(tags) {
  return h("ul", { class: "tags", "aria-label": "Tags" }, (tags || []).map((tag) => h("li", {}, tag)));
}

// One lesson in a list: its problem as a link to its page, its resolution, tags and numbers.
export function lessonCard(lesson) {
  return h(
    "article",
    { class: "card lesson", "data-id": lesson.id },
    h("h3", {}, h("a", { href: `#/lesson/${lesson.id}`, class: "problem text" }, lesson.problem)),
    h("p", { class: "resolution text" }, lesson.resolution),
    tagList(lesson.tags),
    h(
      "p",
      { class: "meta" },
      lesson.score !== undefined ? h("span", { class: "score" }, `score ${lesson.score.toFixed(3)}`) : null,
      h("span", {}, `confidence ${lesson.confidence}`),
      h("span", {}, `▲ ${lesson.upvotes} ▼ ${lesson.downvotes}`),
      h("span", {}, `project ${lesson.project}`),
      lesson.updated_at ? h("span", {}, `updated ${when(lesson.updated_at)}`) : null,
    ),
  );
}

// Fields every change touches: showing them only hides what changed.
const HIDDEN_FIELDS = new Set(["embedding", "updated_at"]);

// The rows a commit changed, each field that differs with its value before and after.
export function effectsTable(effects) {
  const rows = (effects && effects.rows) || [];
  const parts = rows.map((row) => {
    const before = row.before || {};
    const after = row.after || {};
    const fields = [...new Set([...Object.keys(before), ...Object.keys(after)])].filter(
      (field) => !HIDDEN_FIELDS.has(field) && show(before[field]) !== show(after[field]),
    );
    const change = !row.before ? "created" : !row.after ? "deleted" : "changed";
    return h(
      "div",
      { class: "scroll" },
      h(
        "table",
        { class: "diff" },
        h("caption", {}, (before.problem || after.problem) ? `Lesson “${cut(after.problem || before.problem)}”: ${change}` : `${row.table} ${row.id}: ${change}`),
        h("thead", {}, h("tr", {}, h("th", {}, "Field"), h("th", {}, "Before"), h("th", {}, "After"))),
        h(
          "tbody",
          {},
          fields.map((field) =>
            h(
              "tr",
              { "data-field": field },
              h("th", { scope: "row" }, field),
              h("td", { class: "before" }, row.before ? show(before[field]) : "—"),
              h("td", { class: "after" }, row.after ? show(after[field]) : "—"),
            ),
          ),
        ),
      ),
    );
  });
  const schema = (effects && effects.schema) || [];
  if (schema.length) {
    parts.push(h("h4", {}, "Schema changes"), h("ul", {}, schema.map((change) => h("li", { class: "mono" }, show(change)))));
  }
  return parts.length ? h("div", { class: "effects" }, parts) : h("p", { class: "muted" }, "No row or schema changes.");
}

// Links to the first page and the next one; `hashFor(cursor)` makes the link.
export function pager(nextCursor, hashFor, onFirst) {
  return h(
    "nav",
    { class: "pager", "aria-label": "Pages" },
    onFirst ? null : h("a", { href: hashFor(null) }, "First page"),
    nextCursor ? h("a", { href: hashFor(nextCursor), rel: "next" }, "Next page") : h("span", { class: "muted" }, "Last page"),
  );
}

// A query string from the values that are set.
export function queryString(values) {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(values)) {
    if (value !== null && value !== undefined && value !== "") params.set(name, value);
  }
  const text = params.toString();
  return text ? `?${text}` : "";
}

export function splitTags(text) {
  return (text || "")
    .split(",")
    .map((tag) => tag.trim())
    .filter(Boolean);
}
