// The commit history: every change to lessons and tables, newest first, a page at a time;
// one commit with its effects and a revert button (a CONFLICT comes back as its sentence).

import { h, when } from "../dom.js";
import { commitCard } from "./lesson.js";
import { describe, pager, queryString } from "./parts.js";

export async function render(ctx, param, query, name) {
  if (name === "commit") {
    const commit = await ctx.tool("get_commit", { commit_id: param });
    return h("section", {}, h("h2", {}, `Commit #${commit.seq}`), commitCard(ctx, commit, "h3"));
  }
  const target = query.get("target") || "";
  const cursor = query.get("cursor");
  const page = await ctx.tool("history", { target: target || null, limit: 25, cursor: cursor || null });
  const rows = page.commits.map((commit) =>
    h(
      "tr",
      { "data-commit": commit.id, "data-kind": commit.kind },
      h("td", {}, h("a", { href: `#/commit/${commit.id}` }, String(commit.seq))),
      h("td", { class: "text" }, describe(commit)),
      h("td", {}, commit.actor),
      h("td", {}, when(commit.created_at)),
    ),
  );
  return h(
    "section",
    {},
    h("h2", {}, target ? `History of ${target}` : "History"),
    h("p", { class: "muted" }, "Every change is a commit; open one to see its rows before and after, and to revert it."),
    h(
      "div",
      { class: "scroll" },
      h(
        "table",
        { id: "commits" },
        h("thead", {}, h("tr", {}, ["#", "Change", "Actor", "Time"].map((label) => h("th", { scope: "col" }, label)))),
        h("tbody", {}, rows),
      ),
    ),
    pager(page.next_cursor, (next) => `#/history${queryString({ target, cursor: next })}`, !cursor),
  );
}
