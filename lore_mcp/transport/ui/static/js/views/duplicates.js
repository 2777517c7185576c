// Near-duplicates to review: for each of the newest lessons, its closest neighbours as
// recall_lessons finds them, side by side, with "keep both", "merge into" (an update of the
// one kept, then a delete of the other: two commits, each revertible) and "delete".

import { h, button } from "../dom.js";
import { field, tagList } from "./parts.js";

const KEPT = "lore.kept";
// Each lesson scanned costs one recall; 20 stay well inside a key's calls per minute.
const SCAN = 20;
// Recall's scores are relative to the lessons it weighs (a lesson recalls itself at about 0.75,
// an unrelated one near 0, a restatement anywhere between), so a pair is each lesson's closest
// other lesson, kept from this score up; pairs that are each other's closest come first.
const MIN_SCORE = 0.1;

function kept() {
  return new Set(JSON.parse(sessionStorage.getItem(KEPT) || "[]"));
}

function keep(pair) {
  sessionStorage.setItem(KEPT, JSON.stringify([...kept(), pair]));
}

async function pairs(ctx, threshold) {
  const page = await ctx.tool("list_lessons", { limit: SCAN, verbose: true });
  const found = new Map();
  const skip = kept();
  for (const lesson of page.lessons) {
    const recalled = await ctx.tool("recall_lessons", { query: `${lesson.problem}\n${lesson.resolution}`, limit: 3, verbose: true });
    const other = recalled.lessons.find((candidate) => candidate.id !== lesson.id);
    if (!other || other.score < threshold) continue;
    const key = [lesson.id, other.id].sort().join("|");
    if (skip.has(key)) continue;
    const pair = found.get(key);
    if (pair) {
      pair.mutual = true;
      pair.score = Math.max(pair.score, other.score);
    } else {
      found.set(key, { key, a: lesson, b: other, score: other.score, mutual: false });
    }
  }
  return [...found.values()].sort((x, y) => Number(y.mutual) - Number(x.mutual) || y.score - x.score);
}

// The text of `into` with what `from` adds: its resolution and context where they differ, its tags.
function merged(from, into) {
  const join = (a, b) => (!b || (a || "").includes(b) ? a : a ? `${a}\n\n${b}` : b);
  return {
    resolution: join(into.resolution, from.resolution),
    context: join(into.context || "", from.context || ""),
    tags: [...new Set([...into.tags, ...from.tags])],
  };
}

function side(ctx, lesson, other, pair) {
  const mergeInto = ctx.act("Merge the other lesson into this one and delete the other? Both are commits you can revert.", async () => {
    await ctx.tool("update_lesson", { id: lesson.id, ...merged(other, lesson) });
    await ctx.tool("delete_lesson", { id: other.id });
    ctx.go("#/duplicates", "Merged. History holds the update and the delete, each revertible.");
  });
  const remove = ctx.act("Delete this lesson? Its delete commit in History can restore it.", async () => {
    await ctx.tool("delete_lesson", { id: lesson.id });
    ctx.go("#/duplicates", "Deleted; revert its commit in History to restore it.");
  });
  return h(
    "article",
    { class: "card" },
    h("h3", {}, h("a", { href: `#/lesson/${lesson.id}`, class: "text" }, lesson.problem)),
    h("p", { class: "text" }, lesson.resolution),
    tagList(lesson.tags),
    h("p", { class: "meta" }, `▲ ${lesson.upvotes} ▼ ${lesson.downvotes} · confidence ${lesson.confidence}`),
    h("div", { class: "actions" }, button("Merge the other into this", mergeInto), button("Delete", remove, { class: "danger" })),
  );
}

export async function render(ctx, param, query) {
  const threshold = Number(query.get("min") || MIN_SCORE);
  const found = await pairs(ctx, threshold);
  const min = h("input", { id: "dup-min", type: "number", min: 0, max: 1, step: "any", value: threshold });
  const form = h("form", { class: "card" }, field("Minimum score", min), h("button", { type: "submit" }, "Look again"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    ctx.go(`#/duplicates?min=${encodeURIComponent(min.value)}`);
  });
  return h(
    "section",
    {},
    h("h2", {}, "Near-duplicates"),
    h("p", { class: "muted" }, `Each of the newest ${SCAN} lessons beside the other lesson it recalls first, from this score up.`),
    form,
    found.length
      ? found.map((pair) =>
          h(
            "div",
            { class: "dup", "data-pair": pair.key },
            h("h3", {}, `Score ${pair.score.toFixed(3)}${pair.mutual ? ", each the other's closest" : ""}`),
            h("div", { class: "pair" }, side(ctx, pair.a, pair.b, pair), side(ctx, pair.b, pair.a, pair)),
            h("div", { class: "actions" }, button("Keep both", async () => { keep(pair.key); ctx.refresh(); })),
          ),
        )
      : h("p", { class: "muted", id: "no-duplicates" }, "No near-duplicates above this score."),
  );
}
