// The overview: a project's counts and plots (lessons over time, by tag, most and least voted),
// all from one read of lore://overview/{project}, which sums every live lesson on the server.

import { h } from "../dom.js";
import { bars, columns } from "../plot.js";
import { overviewCards } from "./activity.js";

// Lessons saved per day, from the first day to the last, days without a lesson at 0.
function perDay(days) {
  const counts = new Map(days.map((d) => [d.day, d.lessons]));
  if (!days.length) return [];
  const points = [];
  for (let day = new Date(`${days[0].day}T00:00:00Z`); day <= new Date(`${days[days.length - 1].day}T00:00:00Z`); day.setUTCDate(day.getUTCDate() + 1)) {
    const key = day.toISOString().slice(0, 10);
    points.push({ label: key, value: counts.get(key) || 0 });
  }
  return points;
}

function byTag(tags) {
  return tags.map((t) => ({ label: t.tag, value: t.lessons, href: `#/lessons?tags=${encodeURIComponent(t.tag)}` }));
}

function byVotes(lessons) {
  return lessons.map((lesson) => ({ label: lesson.problem, value: lesson.net_votes, href: `#/lesson/${lesson.id}` }));
}

function plotCard(title, points, plot) {
  return h("article", { class: "card" }, h("h3", {}, title), points.length ? plot : h("p", { class: "muted" }, "Nothing to plot yet."));
}

export async function render(ctx) {
  // One read for the counts and the plots (lore://overview/{project}); the log's cards beside it.
  const project = ctx.project || ctx.home;
  const [stats, cards] = await Promise.all([ctx.resource(`lore://overview/${encodeURIComponent(project)}`), overviewCards(ctx)]);
  const counts = [["lessons", stats.lessons], ["tables", stats.tables], ["rows", stats.rows], ["commits", stats.commits]];
  const days = perDay(stats.per_day);
  const tags = byTag(stats.tags);
  const most = byVotes(stats.most_voted);
  const least = byVotes(stats.least_voted);
  return h(
    "section",
    {},
    h("h2", {}, `Overview of ${ctx.project || (stats && stats.project) || "this project"}`),
    h("div", { class: "counts", id: "counts" }, counts.map(([label, value]) => h("div", { class: "card" }, h("div", { class: "stat" }, String(value)), h("div", { class: "muted" }, label)))),
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
