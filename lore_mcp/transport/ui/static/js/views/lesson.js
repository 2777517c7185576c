// One lesson: its fields and votes; edit, vote and delete it; and every commit that touched
// it with its before/after, each revertible. Destructive actions ask first.

import { h, button, when } from "../dom.js";
import { describe, effectsTable, tagList, splitTags } from "./parts.js";
import { lessonActivity } from "./activity.js";

const EDITABLE = ["problem", "resolution", "context", "source"];

export async function render(ctx, id) {
  const lesson = await ctx.tool("get_lesson", { id });
  ctx.saw(lesson.project);
  return h(
    "section",
    { class: "lesson-page", "data-id": lesson.id },
    h("h2", {}, "Lesson"),
    fields(lesson),
    await lessonActivity(ctx, lesson.id),
    actions(ctx, lesson),
    h("h3", {}, "History"),
    await commits(ctx, lesson.id),
  );
}

function fields(lesson) {
  const row = (label, value, cls) => h("tr", {}, h("th", { scope: "row" }, label), h("td", { class: cls || "text", id: `field-${label}` }, value));
  return h(
    "div",
    { class: "scroll" },
    h(
      "table",
      { class: "fields" },
      h(
        "tbody",
        {},
        row("problem", lesson.problem),
        row("resolution", lesson.resolution),
        row("context", lesson.context ?? "—"),
        row("tags", tagList(lesson.tags), "plain"),
        row("confidence", String(lesson.confidence)),
        row("votes", `▲ ${lesson.upvotes}  ▼ ${lesson.downvotes}`),
        row("source", lesson.source ?? "—"),
        row("project", lesson.project),
        row("created", when(lesson.created_at)),
        row("updated", when(lesson.updated_at)),
        row("expires", lesson.expires_at ? when(lesson.expires_at) : "never"),
        row("id", lesson.id, "mono"),
      ),
    ),
  );
}

function actions(ctx, lesson) {
  const editor = editForm(ctx, lesson);
  editor.hidden = true;
  const vote = (up) =>
    ctx.act(null, async () => {
      const result = await ctx.tool(up ? "upvote_lesson" : "downvote_lesson", { id: lesson.id });
      await ctx.refresh();
      ctx.say(`Voted: ▲ ${result.upvotes} ▼ ${result.downvotes}.`);
    });
  const remove = ctx.act("Delete this lesson? Its delete commit in History can restore it.", async () => {
    await ctx.tool("delete_lesson", { id: lesson.id });
    ctx.go("#/history", "Deleted. Revert its delete commit (open it below) to bring the lesson back.");
  });
  return h(
    "div",
    {},
    h(
      "div",
      { class: "actions" },
      button("Upvote", vote(true), { id: "upvote" }),
      button("Downvote", vote(false), { id: "downvote" }),
      button("Edit", async () => {
        editor.hidden = !editor.hidden;
        if (!editor.hidden) editor.querySelector("textarea").focus();
      }, { id: "edit" }),
      button("Delete", remove, { id: "delete", class: "danger" }),
    ),
    editor,
  );
}

function editForm(ctx, lesson) {
  const inputs = {};
  for (const field of EDITABLE) {
    inputs[field] = h("textarea", { id: `edit-${field}`, name: field, rows: field === "source" ? 1 : 4 });
    inputs[field].value = lesson[field] ?? "";
  }
  inputs.tags = h("input", { id: "edit-tags", name: "tags", value: lesson.tags.join(", ") });
  inputs.confidence = h("input", { id: "edit-confidence", name: "confidence", type: "number", min: 0, max: 1, step: "any", value: lesson.confidence });
  const form = h(
    "form",
    { class: "card edit", "aria-label": "Edit the lesson" },
    Object.entries(inputs).map(([name, input]) => [h("label", { for: input.id }, name), input]),
    h("div", { class: "actions" }, h("button", { type: "submit", class: "primary", id: "save-edit" }, "Save changes")),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const changes = {};
    for (const field of EDITABLE) {
      if (inputs[field].value !== (lesson[field] ?? "")) changes[field] = inputs[field].value;
    }
    const tags = splitTags(inputs.tags.value);
    if (tags.join("\n") !== lesson.tags.join("\n")) changes.tags = tags;
    if (Number(inputs.confidence.value) !== lesson.confidence) changes.confidence = Number(inputs.confidence.value);
    if (!Object.keys(changes).length) return ctx.say("Nothing changed.");
    const question = `Change ${Object.keys(changes).join(", ")}? The edit is a commit you can revert.`;
    await ctx.act(question, async () => {
      await ctx.tool("update_lesson", { id: lesson.id, ...changes });
      await ctx.refresh();
      ctx.say("Saved. The change is in the history below.");
    })();
  });
  return form;
}

// The commits that touched the lesson, newest first, each with its diff and a revert button.
// The newest ten, each in full, in one call.
export async function commits(ctx, target) {
  const page = await ctx.tool("history", { target, limit: 10, effects: true });
  if (!page.commits.length) return h("p", { class: "muted" }, "No commits.");
  const full = page.commits;
  return h(
    "div",
    {},
    h("ol", { class: "commits" }, full.map((commit) => h("li", {}, commitCard(ctx, commit)))),
    page.next_cursor ? h("a", { href: `#/history?target=${encodeURIComponent(target)}` }, "All of its history") : null,
  );
}

// `level`: the heading's tag, one below the section it sits in.
export function commitCard(ctx, commit, level = "h4") {
  const revert = ctx.act(`Revert commit ${commit.seq} (${commit.kind})? The revert is itself a commit.`, async () => {
    const result = await ctx.tool("revert_commit", { commit_id: commit.id });
    await ctx.refresh();
    ctx.say(`Reverted commit ${commit.seq}${result && result.seq ? ` as commit ${result.seq}` : ""}.`);
  });
  return h(
    "article",
    { class: "card commit", "data-commit": commit.id, "data-kind": commit.kind },
    h(level, {}, h("a", { href: `#/commit/${commit.id}` }, `#${commit.seq}`), " ", h("span", { class: "text" }, describe(commit))),
    h("p", { class: "meta" }, h("span", {}, commit.actor), h("span", {}, when(commit.created_at))),
    effectsTable(commit.effects),
    h("div", { class: "actions" }, button("Revert", revert, { class: "danger revert" })),
  );
}
