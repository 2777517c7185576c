// The overview: counts from lore://stats and plots over the project's lessons (read with
// export_lessons, a page at a time): lessons over time, by tag, most and least voted.

import { h } from "../dom.js";
import { bars, columns } from "../plot.js";
import { overviewCards } from "./activity.js";

// The overview reads at most this many lessons (pages of 100), so a large project stays quick.
const MAX_LESSONS = 2000;

async function allLessons(ctx) {
  const lessons = [];
  let cursor = null;
  do {
    const page = await ctx.tool("export_lessons", { limit: 100, cursor });
    lessons.push(...page.lessons);
    cursor = page.next_cursor;
  } while (cursor && lessons.length < MAX_LESSONS);
  return { lessons, partial: Boolean(cursor) };
}

function perDay(lessons) {
  const counts = new Map();
  for (const lesson of lessons) {
    const day = String(lesson.created_at).slice(0, 10);
    counts.set(day, (counts.get(day) || 0) + 1);
  }
  const days = [...counts.keys()].sort();
  if (!days.length) return [];
  const points = [];
  for (let day = new Date(`${days[0]}T00:00:00Z`); day <= new Date(`${days[days.length - 1]}T00:00:00Z`); day.setUTCDate(day.getUTCDate() + 1)) {
    const key = day.toISOString().slice(0, 10);
    points.push({ label: key, value: counts.get(key) || 0 });
  }
  return points;
}

function byTag(lessons) {
  const counts = new Map();
  for (const lesson of lessons) for (const tag of lesson.tags) counts.set(tag, (counts.get(tag) || 0) + 1);
  return [...counts].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0])).slice(0, 10).map(([label, value]) => ({ label, value, href: `#/lessons?tags=${encodeURIComponent(label)}` }));
}

function byVotes(lessons, most) {
  const scored = lessons.map((lesson) => ({ label: lesson.problem, value: lesson.upvotes - lesson.downvotes, href: `#/lesson/${lesson.id}` }));
  scored.sort((a, b) => (most ? b.value - a.value : a.value - b.value));
  return scored.slice(0, 5);
}

function plotCard(title, points, plot) {
  return h("article", { class: "card" }, h("h3", {}, title), points.length ? plot : h("p", { class: "muted" }, "Nothing to plot yet."));
}

// lore://stats counts the key's default project; a chosen one is counted from its schema and
// its newest commit's sequence number.
async function projectStats(ctx) {
  if (!ctx.project) return ctx.resource("lore://stats");
  const [schema, history] = await Promise.all([ctx.tool("schema", {}), ctx.tool("history", { limit: 1 })]);
  const rows = schema.tables.reduce((sum, table) => sum + table.row_count, 0);
  return { project: ctx.project, tables: schema.tables.length, rows, commits: history.commits.length ? history.commits[0].seq : 0 };
}

export async function render(ctx) {
  // The log's cards need nothing from the lessons: all three are read at once.
  const [stats, { lessons, partial }, cards] = await Promise.all([projectStats(ctx), allLessons(ctx), overviewCards(ctx)]);
  const counts = [["lessons", stats.lessons ?? lessons.length], ["tables", stats.tables], ["rows", stats.rows], ["commits", stats.commits]];
  const days = perDay(lessons);
  const tags = byTag(lessons);
  const most = byVotes(lessons, true);
  const least = byVotes(lessons, false);
  return h(
    "section",
    {},
    h("h2", {}, `Overview of ${ctx.project || (stats && stats.project) || "this project"}`),
    h("div", { class: "counts", id: "counts" }, counts.map(([label, value]) => h("div", { class: "card" }, h("div", { class: "stat" }, String(value)), h("div", { class: "muted" }, label)))),
    partial ? h("p", { class: "muted" }, `Plots use the newest ${lessons.length} lessons.`) : null,
    h(
      "div",
      { class: "grid" },
      plotCard("Lessons over time", days, columns(days, { title: "Lessons saved per day" })),
      plotCard("By tag", tags, bars(tags, { title: "Lessons per tag (top 10)" })),
      plotCard("Most voted", most, bars(most, { title: "Net votes, highest", signed: true })),
      plotCard("Least voted", least, bars(least, { title: "Net votes, lowest", signed: true })),
      cards,
    ),
  );
}
