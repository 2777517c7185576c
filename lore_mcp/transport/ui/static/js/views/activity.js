// The activity log Lore keeps (tool `recent_activity`, group `activity`; resource
// `lore://activity`; recall counts on `lore://lessons/{id}`). Everything here shows only where
// the server lists the tool, so the page works the same on a server without the log.

import { h, when } from "../dom.js";
import { bars } from "../plot.js";
import { field, lessonLink, pager, queryString } from "./parts.js";

const TOOL = "recent_activity";
// The last three are what reached agents unasked (the hooks): lessons injected, asks to save.
const KINDS = ["save", "update", "merge", "vote", "delete", "recall", "apply", "revert", "import", "key", "inject", "ask", "would_ask"];
const FILTERS = ["lesson_id", "key_id", "client_name"];
// Lessons older than this that no recall returned are "stale" on the overview.
const STALE_DAYS = 30;

// One entry; `titles` name its lessons (by id, from the same page of the log).
function entryItem(entry, titles) {
  const lesson = (id) => lessonLink(id, titles[id]);
  return h(
    "li",
    { class: "card entry", "data-kind": entry.kind },
    h(
      "p",
      { class: "meta" },
      h("strong", {}, entry.kind),
      h("span", {}, when(entry.at)),
      entry.key_id ? h("a", { href: `#/activity${queryString({ key_id: entry.key_id })}` }, `key ${entry.key_id}`) : h("span", {}, "local"),
      entry.client ? h("a", { href: `#/activity${queryString({ client_name: entry.client })}` }, entry.client) : null,
      entry.commit_id ? h("a", { href: `#/commit/${entry.commit_id}` }, "commit") : null,
      entry.error ? h("span", { class: "error" }, `failed: ${entry.error}`) : null,
      entry.session ? h("span", { class: "mono" }, `session ${entry.session}`) : null,
      entry.bytes != null ? h("span", {}, `${entry.bytes} bytes`) : null,
    ),
    entry.query ? h("p", { class: "text query" }, `“${entry.query}”`) : null,
    entry.lesson_ids.length ? h("p", {}, "Lessons: ", entry.lesson_ids.map((id) => [lesson(id), " "])) : null,
    entry.tables.length ? h("p", {}, "Tables: ", entry.tables.map((name) => [h("a", { href: `#/tables/${encodeURIComponent(name)}` }, name), " "])) : null,
    entry.target ? h("p", { class: "mono" }, entry.target) : null,
    entry.results.length
      ? h("ol", { class: "results" }, entry.results.map((r) => h("li", {}, lesson(r.id), ` score ${r.score.toFixed(3)}`)))
      : null,
  );
}

function filterForm(ctx, query) {
  const kind = h("select", { id: "activity-kind" }, h("option", { value: "" }, "any"), KINDS.map((k) => h("option", { value: k }, k)));
  kind.value = query.get("kind") || "";
  const inputs = Object.fromEntries(FILTERS.map((name) => [name, h("input", { id: `activity-${name}`, value: query.get(name) || "" })]));
  // Agents only: leave out what people did on this page (the server knows them by credential).
  const agents = h("input", { id: "activity-agents", type: "checkbox" });
  agents.checked = query.get("agents") === "1";
  const since = h("select", { id: "activity-since" }, [["", "any time"], ["today", "today"], ["7d", "last 7 days"]].map(([v, label]) => h("option", { value: v }, label)));
  since.value = query.get("since") || "";
  const form = h(
    "form",
    { class: "card", "aria-label": "Filter activity" },
    field("Kind", kind),
    FILTERS.map((name) => field(name.replace("_", " "), inputs[name])),
    field("When", since),
    field("Agents only", agents),
    h("button", { type: "submit" }, "Filter"),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const values = Object.fromEntries(FILTERS.map((name) => [name, inputs[name].value.trim()]));
    ctx.go(`#/activity${queryString({ kind: kind.value, ...values, since: since.value, agents: agents.checked ? "1" : "" })}`);
  });
  return form;
}

async function render(ctx, param, query) {
  const args = { limit: 50 };
  if (query.get("kind")) args.kinds = [query.get("kind")];
  for (const name of [...FILTERS, "cursor"]) if (query.get(name)) args[name] = query.get(name);
  if (query.get("agents") === "1") args.agents_only = true;
  const start = new Date();
  if (query.get("since") === "today") args.since = new Date(start.getFullYear(), start.getMonth(), start.getDate()).toISOString();
  if (query.get("since") === "7d") args.since = new Date(start.getTime() - 7 * 86400000).toISOString();
  const page = await ctx.tool(TOOL, args);
  const kept = Object.fromEntries([...query].filter(([name]) => name !== "cursor"));
  return h(
    "section",
    {},
    h("h2", {}, "Activity"),
    h("p", { class: "muted" }, "What was done to this project's memory, newest first, as Lore logged it."),
    filterForm(ctx, query),
    page.entries.length ? h("ol", { id: "activity" }, page.entries.map((entry) => entryItem(entry, page.titles || {}))) : h("p", { class: "muted" }, "Nothing logged."),
    pager(page.next_cursor, (next) => `#/activity${queryString({ ...kept, cursor: next })}`, !query.get("cursor")),
  );
}

// Views this module adds to the shell, each shown only when the server lists its tool.
export const views = { activity: { module: { render }, nav: "Activity", needs: TOOL } };

// The overview's cards from the log: the lessons the latest recalls returned most, and the
// stale ones (old, and returned by no recall the log kept), named by the log's own titles.
export async function overviewCards(ctx) {
  if (!ctx.has(TOOL)) return [];
  const [recalls, stale] = await Promise.all([
    ctx.tool(TOOL, { kinds: ["recall"], agents_only: true, limit: 100 }),
    ctx.tool(TOOL, { stale_days: STALE_DAYS, limit: 10 }),
  ]);
  const counts = new Map();
  for (const entry of recalls.entries) for (const r of entry.results) counts.set(r.id, (counts.get(r.id) || 0) + 1);
  const most = [...counts].sort((a, b) => b[1] - a[1]).slice(0, 5).map(([id, value]) => ({ label: (recalls.titles || {})[id] || id, value, href: `#/lesson/${id}` }));
  return [
    h(
      "article",
      { class: "card", id: "most-recalled" },
      h("h3", {}, "Most recalled lately"),
      most.length ? bars(most, { title: "Times returned by the latest 100 recalls" }) : h("p", { class: "muted" }, "No recalls logged."),
    ),
    h(
      "article",
      { class: "card", id: "stale" },
      h("h3", {}, `Stale: older than ${STALE_DAYS} days, never recalled`),
      stale.stale_lessons.length
        ? h("ul", {}, stale.stale_lessons.map((lesson) => h("li", {}, h("a", { href: `#/lesson/${lesson.id}`, class: "text" }, lesson.problem), ` (${when(lesson.created_at)})`)))
        : h("p", { class: "muted" }, "None."),
    ),
  ];
}

// A lesson's recalls (from lore://lessons/{id}, in the key's default project) and a link to
// its activity; nothing without the log.
export async function lessonActivity(ctx, id) {
  if (!ctx.has(TOOL)) return null;
  const link = h("a", { href: `#/activity${queryString({ lesson_id: id })}` }, "Its activity");
  if (ctx.project) return h("p", {}, link);
  const lesson = await ctx.resource(`lore://lessons/${id}`);
  const last = lesson.last_recalled_at ? `, last ${when(lesson.last_recalled_at)}` : "";
  return h("p", { id: "recalls" }, `Recalled ${lesson.recalls} times${last}. `, link);
}
