// Structured memory: the project's tables with their schema, and one table's rows, filtered
// and a page at a time (schema and query_rows, as an agent reads them).

import { h, show } from "../dom.js";
import { field, pager, queryString } from "./parts.js";

const OPERATORS = ["=", "!=", "<", "<=", ">", ">=", "like", "in", "is_null"];

export async function render(ctx, table, query) {
  const schema = await ctx.tool("schema", {});
  if (!table) return overview(schema);
  const found = schema.tables.find((t) => t.name === table);
  if (!found) return h("section", {}, h("h2", {}, table), h("p", {}, `There is no table ${table} in this project.`));
  return rows(ctx, found, query);
}

function columnsTable(table) {
  return h(
    "table",
    { class: "schema" },
    h("thead", {}, h("tr", {}, ["Column", "Type", "Nullable", "Default"].map((label) => h("th", { scope: "col" }, label)))),
    h(
      "tbody",
      {},
      table.columns.map((c) => h("tr", {}, h("td", { class: "mono" }, c.name), h("td", {}, c.type), h("td", {}, c.nullable ? "yes" : "no"), h("td", {}, show(c.default)))),
    ),
  );
}

function overview(schema) {
  return h(
    "section",
    {},
    h("h2", {}, "Tables"),
    h("p", { class: "muted" }, "schema_hash ", h("code", { class: "token" }, schema.schema_hash)),
    schema.tables.length
      ? h(
          "div",
          { class: "grid" },
          schema.tables.map((table) =>
            h("article", { class: "card" }, h("h3", {}, h("a", { href: `#/tables/${encodeURIComponent(table.name)}` }, table.name)), h("p", { class: "muted" }, `${table.row_count} rows`), h("div", { class: "scroll" }, columnsTable(table))),
          ),
        )
      : h("p", { class: "muted" }, "No tables yet: agents create them with plan and apply."),
  );
}

// The filter's value as JSON where it parses (numbers, lists, true), else as text.
function filterValue(text) {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

function filterForm(ctx, table, query) {
  const column = h("select", { id: "filter-column" }, table.columns.map((c) => h("option", { value: c.name }, c.name)));
  column.value = query.get("column") || "id";
  const op = h("select", { id: "filter-op" }, OPERATORS.map((o) => h("option", { value: o }, o)));
  op.value = query.get("op") || "=";
  const value = h("input", { id: "filter-value", value: query.get("value") || "" });
  const form = h(
    "form",
    { class: "card", "aria-label": "Filter rows" },
    field("Where", column),
    field("is", op),
    field("value", value),
    h("button", { type: "submit" }, "Filter"),
    h("a", { href: `#/tables/${encodeURIComponent(table.name)}` }, "Clear"),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    ctx.go(`#/tables/${encodeURIComponent(table.name)}${queryString({ column: column.value, op: op.value, value: value.value })}`);
  });
  return form;
}

async function rows(ctx, table, query) {
  const cursor = query.get("cursor");
  const where = query.get("column") ? [{ column: query.get("column"), op: query.get("op") || "=", value: filterValue(query.get("value") || "") }] : [];
  const page = await ctx.tool("query_rows", { table: table.name, where, limit: 50, cursor: cursor || null });
  const names = table.columns.map((c) => c.name);
  const filter = { column: query.get("column"), op: query.get("op"), value: query.get("value") };
  return h(
    "section",
    {},
    h("h2", {}, `Table ${table.name}`),
    h("p", {}, h("a", { href: `#/history?target=${encodeURIComponent(table.name)}` }, "History of this table")),
    h("details", {}, h("summary", {}, "Schema"), h("div", { class: "scroll" }, columnsTable(table))),
    filterForm(ctx, table, query),
    h(
      "div",
      { class: "scroll" },
      h(
        "table",
        { id: "rows" },
        h("thead", {}, h("tr", {}, names.map((name) => h("th", { scope: "col" }, name)))),
        h("tbody", {}, page.rows.map((row) => h("tr", {}, names.map((name) => h("td", { class: "text" }, show(row[name])))))),
      ),
    ),
    pager(page.next_cursor, (next) => `#/tables/${encodeURIComponent(table.name)}${queryString({ ...filter, cursor: next })}`, !cursor),
  );
}
