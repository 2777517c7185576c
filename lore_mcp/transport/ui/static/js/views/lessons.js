// Search (lessons as recall_lessons ranks them, with scores, tags and filters) and the
// newest-first list (list_lessons, a page at a time).

import { h } from "../dom.js";
import { field, lessonCard, pager, queryString, splitTags } from "./parts.js";

export async function render(ctx, param, query, name) {
  return name === "search" ? search(ctx, query) : list(ctx, query);
}

function searchForm(ctx, query) {
  const q = h("input", { id: "search-query", type: "search", name: "q", value: query.get("q") || "", required: true });
  const tags = h("input", { id: "search-tags", name: "tags", value: query.get("tags") || "", placeholder: "tag, tag" });
  const min = h("input", { id: "search-min", name: "min", type: "number", min: 0, max: 1, step: "any", value: query.get("min") || "0" });
  const limit = h("input", { id: "search-limit", name: "limit", type: "number", min: 1, max: 50, value: query.get("limit") || "10" });
  const form = h(
    "form",
    { role: "search", class: "card" },
    field("Problem", q),
    field("Tags", tags),
    field("Min confidence", min),
    field("Results", limit),
    h("button", { type: "submit", class: "primary", id: "search-button" }, "Search"),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    ctx.go(`#/search${queryString({ q: q.value.trim(), tags: tags.value.trim(), min: min.value, limit: limit.value })}`);
  });
  return form;
}

async function search(ctx, query) {
  const heading = h("h2", {}, "Search lessons");
  const form = searchForm(ctx, query);
  const text = (query.get("q") || "").trim();
  if (!text) return h("section", {}, heading, form, h("p", { class: "muted" }, "Describe a problem; lessons come back as recall_lessons ranks them for agents."));
  const found = await ctx.tool("recall_lessons", {
    query: text,
    tags: splitTags(query.get("tags")),
    min_confidence: Number(query.get("min") || 0),
    limit: Number(query.get("limit") || 10),
    verbose: true,
  });
  found.lessons.forEach((lesson) => ctx.saw(lesson.project));
  return h(
    "section",
    {},
    heading,
    form,
    h("p", { class: "muted", id: "result-count" }, `${found.lessons.length} lessons, best first.`),
    h("div", { id: "results" }, found.lessons.map(lessonCard)),
  );
}

async function list(ctx, query) {
  const cursor = query.get("cursor");
  const tags = query.get("tags") || "";
  const page = await ctx.tool("list_lessons", { limit: 20, cursor: cursor || null, tags: splitTags(tags), verbose: true });
  page.lessons.forEach((lesson) => ctx.saw(lesson.project));
  const tagInput = h("input", { id: "list-tags", value: tags, placeholder: "tag, tag" });
  const filter = h("form", { class: "card" }, field("Only with tags", tagInput), h("button", { type: "submit" }, "Filter"));
  filter.addEventListener("submit", (event) => {
    event.preventDefault();
    ctx.go(`#/lessons${queryString({ tags: tagInput.value.trim() })}`);
  });
  return h(
    "section",
    {},
    h("h2", {}, "Lessons, newest first"),
    filter,
    page.lessons.length ? h("div", { id: "results" }, page.lessons.map(lessonCard)) : h("p", { class: "muted" }, "No lessons here yet."),
    pager(page.next_cursor, (next) => `#/lessons${queryString({ tags, cursor: next })}`, !cursor),
  );
}
