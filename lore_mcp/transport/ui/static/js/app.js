// The page's shell: sign-in, the project switcher, navigation and the router. Each view is a
// module exporting `render(ctx, param, query)` that returns a node; the shell shows it, or the
// tool's own error sentence when it fails.

import { McpClient, McpError } from "./mcp.js";
import * as oauth from "./oauth.js";
import { h, clear } from "./dom.js";
import * as overview from "./views/overview.js";
import * as lessons from "./views/lessons.js";
import * as lesson from "./views/lesson.js";
import * as duplicates from "./views/duplicates.js";
import * as tables from "./views/tables.js";
import * as commits from "./views/history.js";
import * as activity from "./views/activity.js";

const KEY = "lore.key";
const PROJECT = "lore.project";
const ENDPOINT = new URL("../mcp", window.location.href).href;

// Views by the first part of the hash (#/name/param?query); `nav` ones get a link.
const VIEWS = {
  overview: { module: overview, nav: "Overview" },
  search: { module: lessons, nav: "Search" },
  lessons: { module: lessons, nav: "Lessons" },
  lesson: { module: lesson },
  duplicates: { module: duplicates, nav: "Duplicates", needs: "find_duplicates" },
  tables: { module: tables, nav: "Tables" },
  history: { module: commits, nav: "History" },
  commit: { module: commits },
  ...activity.views,
};

const state = { pending: null, client: null, session: null, project: sessionStorage.getItem(PROJECT) || "", tools: new Set(), projects: new Set() };

const ctx = {
  // A tool call in the chosen project; the tool's error comes back as McpError.
  tool(name, args = {}) {
    const withProject = state.project ? { project: state.project, ...args } : args;
    return state.client.tool(name, withProject);
  },
  resource: (uri) => state.client.resource(uri),
  has: (tool) => state.tools.has(tool),
  get project() {
    return state.project;
  },
  // The project a call naming none acts on (the key's own, or the server's default).
  get home() {
    return state.home;
  },
  // Projects seen so far, offered by the switcher.
  saw(project) {
    if (project && !state.projects.has(project)) {
      state.projects.add(project);
      fillProjects();
    }
  },
  // Show another view; `notice` is said once it is there.
  go(hash, notice) {
    state.pending = notice || null;
    if (window.location.hash === hash) route();
    else window.location.hash = hash;
  },
  confirm: (question) => window.confirm(question),
  say(text) {
    clear(document.getElementById("notice"), text);
  },
  fail(error) {
    const sentence = error instanceof McpError ? error.message : `ERROR: ${error.message || error}`;
    // Commits a sentence names as history numbers them (#12) link to their page.
    const parts = sentence.split(/(#\d+)/).map((part, i) => (i % 2 ? h("a", { href: `#/commit/${part.slice(1)}` }, part) : part));
    clear(document.getElementById("error"), parts);
  },
  refresh: () => route(),
  // A button's action: asks `question` first (when given, for anything destructive), then runs
  // `work`; a tool's error is shown as its own sentence.
  act(question, work) {
    return async (...args) => {
      if (question && !ctx.confirm(question)) return;
      try {
        await work(...args);
      } catch (error) {
        ctx.fail(error);
      }
    };
  },
};

function fillProjects() {
  const list = document.getElementById("projects");
  clear(list, [...state.projects].sort().map((name) => h("option", { value: name })));
}

function parseHash() {
  const hash = window.location.hash.replace(/^#\/?/, "");
  const [path, search = ""] = hash.split("?");
  const [name, ...rest] = path.split("/");
  return { name: name || "overview", param: rest.map(decodeURIComponent).join("/"), query: new URLSearchParams(search) };
}

// Each route() call counts; a slower, older render never replaces a newer one.
let routes = 0;

async function route() {
  const view = document.getElementById("view");
  const current = ++routes;
  clear(document.getElementById("error"));
  clear(document.getElementById("notice"), state.pending || "");
  state.pending = null;
  if (!state.client) return;
  const hash = window.location.hash;
  const { name, param, query } = parseHash();
  const entry = VIEWS[name] || VIEWS.overview;
  for (const link of document.querySelectorAll("#nav a")) {
    link.toggleAttribute("aria-current", link.dataset.view === name);
  }
  delete view.dataset.shown;
  clear(view, h("p", { class: "muted" }, "Loading…"));
  let node;
  try {
    node = await entry.module.render(ctx, param, query, name);
  } catch (error) {
    if (current !== routes) return;
    node = h("p", { class: "muted" }, "This view could not be shown.");
    ctx.fail(error);
  }
  if (current !== routes) return;
  clear(view, node);
  // What is on screen now, for people's assistive tools (focus) and for tests (data-shown).
  view.dataset.shown = hash;
  const heading = view.querySelector("h2");
  if (heading) {
    heading.tabIndex = -1;
    heading.focus({ preventScroll: true });
  }
}

// Sign in with an API key, or with an OAuth session (`key` then unused).
async function signIn(key, session = null) {
  const client = new McpClient(ENDPOINT, key, session);
  if (session) session.onEnded = (error) => signedOut(error);
  let tools;
  try {
    tools = await client.toolNames();
  } catch (error) {
    // The server's sentence is written for protocol clients; a person needs only this.
    if (error.code === "UNAUTHORIZED" && !session) throw new McpError("UNAUTHORIZED: Lore does not accept this API key; check it and try again.");
    throw error;
  }
  state.client = client;
  state.session = session;
  state.tools = tools;
  if (session) sessionStorage.removeItem(KEY);
  else {
    sessionStorage.setItem(KEY, key);
    oauth.OAuthSession.discard();
  }
  try {
    const stats = await client.resource("lore://stats");
    state.home = stats.project;
    ctx.saw(stats.project);
    (stats.projects || []).forEach((name) => ctx.saw(name));
    if (!state.project) document.getElementById("project").placeholder = stats.project;
  } catch (error) {
    ctx.fail(error);
  }
  showSignedIn(true);
  route();
}

function showSignedIn(signedIn) {
  document.getElementById("signin").hidden = signedIn;
  document.getElementById("app").hidden = !signedIn;
  const nav = document.getElementById("nav");
  clear(
    nav,
    Object.entries(VIEWS)
      .filter(([, entry]) => entry.nav && (!entry.needs || state.tools.has(entry.needs)))
      .map(([name, entry]) => h("a", { href: `#/${name}`, "data-view": name }, entry.nav)),
  );
}

// Back to the sign-in screen, forgetting the key or tokens; `error` says why, if anything went wrong.
function signedOut(error) {
  sessionStorage.removeItem(KEY);
  if (state.session) state.session.forget();
  state.client = null;
  state.session = null;
  showSignedIn(false);
  clear(document.getElementById("view"));
  if (error) ctx.fail(error);
}

// Offer "Sign in with OAuth" where the server has its OAuth flow and can return to this page.
async function offerOAuth() {
  const offer = document.getElementById("oauth-signin");
  const metadata = await oauth.discover();
  // Whether the server was asked, and what it said (for people's tools and for tests).
  offer.dataset.offered = metadata ? "yes" : "no";
  if (!metadata) return;
  const button = document.getElementById("oauth-button");
  button.addEventListener("click", () => {
    button.disabled = true;
    oauth.begin(metadata).catch((error) => {
      button.disabled = false;
      ctx.fail(error);
    });
  });
  offer.hidden = false;
}

function wire() {
  document.getElementById("signin-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const input = document.getElementById("api-key");
    try {
      await signIn(input.value.trim());
      input.value = "";
    } catch (error) {
      ctx.fail(error);
    }
  });
  document.getElementById("signout").addEventListener("click", async () => {
    const session = state.session;
    state.session = null;
    signedOut(null);
    if (session) await session.signOut(); // revoked at the server, and forgotten here
  });
  const project = document.getElementById("project");
  project.value = state.project;
  document.getElementById("project-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const name = project.value.trim();
    if (name && !state.projects.has(name)) {
      clear(document.getElementById("notice"));
      ctx.fail(new McpError(`NOT_FOUND: ${name} is not one of this key's projects; pick one from the list.`));
      return;
    }
    state.project = name;
    sessionStorage.setItem(PROJECT, state.project);
    state.pending = state.project ? `Showing project ${state.project}.` : "Showing the key's default project.";
    route();
  });
  window.addEventListener("hashchange", route);
  // The hash is the router's: the skip link moves the focus without changing it.
  document.querySelector(".skip").addEventListener("click", (event) => {
    event.preventDefault();
    document.getElementById("view").focus();
  });
}

async function start() {
  wire();
  // `lore-memory ui` opens the page with its one-time key in the fragment, which never reaches
  // a server or a log; it moves to this tab's sessionStorage and leaves the address bar.
  const fragment = /^#key=([A-Za-z0-9_]+)/.exec(window.location.hash);
  if (fragment) {
    sessionStorage.setItem(KEY, fragment[1]);
    window.history.replaceState(null, "", `${window.location.pathname}#/overview`);
  }
  offerOAuth();
  let session;
  try {
    // Coming back from the consent page: the answer leaves the address bar before anything else.
    session = (await oauth.finish()) || oauth.OAuthSession.load();
  } catch (error) {
    signedOut(error);
    return;
  }
  const key = sessionStorage.getItem(KEY);
  if (!session && !key) {
    showSignedIn(false);
    return;
  }
  signIn(key, session).catch((error) => {
    showSignedIn(false);
    ctx.fail(error);
  });
}

start();
