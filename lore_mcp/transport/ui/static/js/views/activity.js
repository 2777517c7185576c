// The activity log's place on the page. Lore lists the tool `recent_activity` (group
// `activity`) where the server keeps the log; until then this module adds nothing. Once it
// does, the timeline is the view below and `staleCard` fills the overview's "stale" plot.

import { h, when, show } from "../dom.js";

const TOOL = "recent_activity";

async function render(ctx, param, query) {
  const filters = {};
  for (const name of ["kind", "lesson_id", "caller"]) if (query.get(name)) filters[name] = query.get(name);
  const page = await ctx.tool(TOOL, { ...filters, limit: 50 });
  const entries = page.entries || page.activity || [];
  return h(
    "section",
    {},
    h("h2", {}, "Activity"),
    h(
      "ol",
      { id: "activity" },
      entries.map((entry) => h("li", { class: "card" }, h("strong", {}, show(entry.kind)), " ", when(entry.at || entry.created_at), " ", h("span", { class: "muted mono" }, show(entry)))),
    ),
  );
}

// Views this module adds to the shell, each shown only when the server lists its tool.
export const views = { activity: { module: { render }, nav: "Activity", needs: TOOL } };

// The overview's card of stale lessons (old and never recalled), or nothing without the log.
export async function staleCard(ctx) {
  if (!ctx.has(TOOL)) return null;
  return h("article", { class: "card" }, h("h3", {}, "Stale"), h("p", { class: "muted" }, "Open Activity for recall counts."));
}
