// Near-duplicates to review: every pair of the project's lessons whose vectors' cosine
// similarity is from the threshold up, most similar first, as the server finds them in one call
// (find_duplicates), side by side, with "keep both" (stored on the server, for every curator),
// "merge into" (one merge commit that keeps both lessons' votes, previewed first) and "delete".

import { h, button } from "../dom.js";
import { field, tagList } from "./parts.js";

// Cosine similarity from which a pair is listed (find_duplicates' own default).
const MIN_SCORE = 0.8;

async function pairs(ctx, threshold, cursor) {
  const page = await ctx.tool("find_duplicates", { threshold, limit: 20, cursor: cursor || null });
  return { ...page, pairs: page.pairs.map((p) => ({ key: [p.a.id, p.b.id].join("|"), a: p.a, b: p.b, score: p.similarity })) };
}

const HOW = { kept: "this lesson's", other: "the other's", both: "both joined" };

function side(ctx, lesson, other, pair) {
  const mergeInto = ctx.act(null, async () => {
    const preview = await ctx.tool("merge_lessons", { keep: lesson.id, other: other.id, dry_run: true });
    const how = Object.entries(preview.combined).map(([field, way]) => `${field}: ${HOW[way]}`).join("; ");
    const votes = `▲ ${preview.lesson.upvotes} ▼ ${preview.lesson.downvotes}`;
    if (!ctx.confirm(`Merge the other lesson into this one (${how}; votes ${votes})?\n\n${preview.lesson.resolution}\n\nOne commit you can revert.`)) return;
    await ctx.tool("merge_lessons", { keep: lesson.id, other: other.id });
    ctx.go("#/duplicates", `Merged in one commit: ${how}; votes ${votes}.`);
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
  const found = await pairs(ctx, threshold, query.get("cursor"));
  const min = h("input", { id: "dup-min", type: "number", min: 0, max: 1, step: "any", value: threshold });
  const form = h("form", { class: "card" }, field("Minimum similarity (cosine)", min), h("button", { type: "submit" }, "Look again"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    ctx.go(`#/duplicates?min=${encodeURIComponent(min.value)}`);
  });
  return h(
    "section",
    {},
    h("h2", {}, "Near-duplicates"),
    h("p", { class: "muted" }, `${found.total} pairs of lessons from this similarity up, most similar first.`),
    form,
    found.pairs.length
      ? found.pairs.map((pair) =>
          h(
            "div",
            { class: "dup", "data-pair": pair.key },
            h("h3", {}, `Similarity ${pair.score.toFixed(3)}`),
            h("div", { class: "pair" }, side(ctx, pair.a, pair.b, pair), side(ctx, pair.b, pair.a, pair)),
            h("div", { class: "actions" }, button("Keep both", ctx.act(null, async () => { await ctx.tool("keep_both", { a: pair.a.id, b: pair.b.id }); ctx.refresh(); }))),
          ),
        )
      : h("p", { class: "muted", id: "no-duplicates" }, "No near-duplicates from this similarity up."),
    found.next_cursor ? h("a", { href: `#/duplicates?min=${threshold}&cursor=${found.next_cursor}` }, "More pairs") : null,
  );
}
