"use strict";
// The memory browser. Every call is one of memory_chain's documented endpoints:
//   GET /v1/me, GET /v1/conversations, GET /v1/conversations/{id},
//   GET /v1/conversations/{id}/turns, POST /v1/conversations/{id}/search,
//   POST /v1/conversations/{id}/context (what the model will see), GET /v1/models,
//   DELETE /v1/conversations/{id} (archive; ?purge=true removes it from every tier),
//   GET /v1/facts (?include=superseded&include=dismissed: the history), POST /v1/facts,
//   PATCH /v1/facts/{id} (edit: the old text stays as a superseded copy),
//   DELETE /v1/facts/{id} (dismiss: kept in the history).
// The key is kept in this tab's sessionStorage only. Text from memory is always set as
// textContent, never parsed as HTML.

const $ = (selector) => document.querySelector(selector);
const state = { conversation: null, nextAfter: null, factsLoad: 0 };

// A fact's kinds (the API's FactKindName) and what its origins mean.
const FACT_KINDS = ["preference", "biography", "relationship", "plan", "other"];
const FACT_ORIGINS = {
  extracted: "learnt from a conversation",
  explicit: "asked to be remembered",
  api: "added or edited by hand",
};

function credentials() {
  return {
    key: sessionStorage.getItem("memory_chain.key") || "",
    user: sessionStorage.getItem("memory_chain.user") || "",
  };
}

// The API's errors carry a "detail": a sentence, or FastAPI's list of field errors.
function describe(detail) {
  if (typeof detail === "string") return detail;
  if (Array.isArray(detail)) {
    return detail.map((e) => `${(e.loc || []).slice(1).join(".") || "request"}: ${e.msg}`).join("; ");
  }
  return JSON.stringify(detail);
}

async function api(method, path, body) {
  const { key, user } = credentials();
  const headers = { Accept: "application/json" };
  if (key) headers.Authorization = `Bearer ${key}`;
  if (user) headers["X-User-Id"] = user;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const data = await response.json().catch(() => ({}));
  if (!response.ok) {
    const error = new Error(`${response.status}: ${describe(data.detail ?? response.statusText)}`);
    error.status = response.status;
    throw error;
  }
  return data;
}

function showError(error) {
  const box = $("#error");
  box.textContent = error ? String(error.message || error) : "";
  box.hidden = !error;
}

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

const when = (iso) => (iso ? new Date(iso).toLocaleString() : "–");

async function connect() {
  showError(null);
  // Busy until the caller's conversations, facts and models are all shown.
  document.body.setAttribute("aria-busy", "true");
  try {
    const me = await api("GET", "/v1/me");
    $("#whoami").textContent = `signed in as ${me.user_id}` + (me.keys_required ? "" : " (no keys)");
    $("#facts-status").textContent = "";
    await Promise.all([loadConversations(), loadFacts(), loadModels()]);
  } finally {
    document.body.removeAttribute("aria-busy");
  }
}

async function loadModels() {
  const select = $("#preview-model");
  select.replaceChildren();
  let models = [];
  try {
    models = (await api("GET", "/v1/models")).data;
  } catch (error) {
    // The preview then uses the configured model.
  }
  select.append(element("option", "", "configured model"));
  select.lastChild.value = "";
  for (const model of models) {
    const option = element("option", "", model.id);
    option.value = model.id;
    select.append(option);
  }
}

// The prompt the chat would send for a message: its sections, their tokens, the budget.
async function preview(message) {
  showError(null);
  const id = state.conversation;
  const body = { message };
  if ($("#preview-model").value) body.model = $("#preview-model").value;
  const seen = await api("POST", `/v1/conversations/${encodeURIComponent(id)}/context`, body);
  const budget = seen.budget;
  $("#preview-budget").textContent =
    `${seen.model}: ${seen.prompt_tokens} of ${budget.prompt} prompt tokens used ` +
    `(window ${budget.window}, ${budget.reserve} kept for the reply; counted with ` +
    `${seen.counted_with === "tokenizer" ? "the model's tokenizer" : "an estimate that counts high"})` +
    (seen.degraded.length ? ` · not searched: ${seen.degraded.join("; ")}` : "");
  $("#preview-budget").hidden = false;
  const list = $("#preview-sections");
  list.replaceChildren();
  for (const section of seen.sections) {
    const item = element("li", "section");
    item.dataset.section = section.name;
    item.append(element("div", "meta", `${section.name} · ${section.tokens} tokens` +
      (section.name === "instructions" || section.name === "message" ? "" : ` of ${section.room}`)));
    if (!section.entries.length) item.append(element("div", "note", "nothing"));
    for (const entry of section.entries) {
      const line = element("div", entry.cut ? "text cut" : "text", entry.text);
      line.title = `${entry.tokens} tokens${entry.cut ? " (an excerpt)" : ""}`;
      item.append(line);
    }
    list.append(item);
  }
}

async function loadConversations() {
  const status = $("#status-filter").value;
  const query = status ? `?status=${encodeURIComponent(status)}&limit=200` : "?limit=200";
  const conversations = await api("GET", `/v1/conversations${query}`);
  const list = $("#conversations");
  list.replaceChildren();
  if (!conversations.length) list.append(element("li", "note", "No conversations."));
  for (const c of conversations) {
    const item = element("li");
    item.dataset.id = c.conversation_id;
    item.classList.toggle("selected", c.conversation_id === state.conversation);
    // An imported chat keeps the title it had where it came from.
    item.append(element("div", "id", c.title ? `${c.title} (${c.conversation_id})` : c.conversation_id));
    const meta = element("div", "meta");
    meta.append(element("span", `badge ${c.status}`, c.status), ` ${c.turn_count} turns · ${c.total_tokens} tokens · ${when(c.last_message_at)}`);
    item.append(meta);
    item.addEventListener("click", () => openConversation(c.conversation_id).catch(showError));
    list.append(item);
  }
}

// -- the remembered facts ---------------------------------------------------------------------

function fillKinds(select, selected) {
  select.replaceChildren();
  for (const kind of FACT_KINDS) {
    const option = element("option", "", kind);
    option.value = kind;
    select.append(option);
  }
  select.value = selected;
  return select;
}

function factSource(fact) {
  if (!fact.conversation_id) return "no conversation";
  if (!fact.turns) return `from ${fact.conversation_id}`;
  const [first, last] = fact.turns;
  return `from ${fact.conversation_id} #${first === last ? first : `${first}\u2013${last}`}`;
}

// One fact: its text, kind, origin, source and dates; past ones marked with their status,
// when they stopped holding and (superseded ones) the listed fact that replaced them.
function factItem(fact, byId) {
  const current = fact.status === "current";
  const item = element("li", current ? "fact" : `fact past ${fact.status}`);
  item.dataset.id = fact.id;
  item.dataset.status = fact.status;
  item.append(element("div", "text", fact.text));
  const meta = element("div", "meta");
  if (!current) meta.append(element("span", `badge ${fact.status}`, fact.status), " ");
  const origin = element("span", "origin", fact.origin);
  origin.title = FACT_ORIGINS[fact.origin] || "";
  meta.append(
    element("span", "kind", fact.kind), " · ", origin, " · ",
    element("span", "source", factSource(fact)), " · ",
    element("span", "since", `${current ? "since" : "from"} ${when(fact.valid_from)}`),
  );
  if (!current) meta.append(" · ", element("span", "until", `until ${when(fact.invalidated_at)}`));
  item.append(meta);
  if (fact.status === "superseded") {
    const newer = byId.get(fact.superseded_by);
    item.append(element("div", "replaced-by", newer ? `replaced by: ${newer.text}` : "replaced by a newer fact"));
  }
  if (current) {
    const actions = element("div", "actions");
    const edit = element("button", "edit", "Edit");
    edit.type = "button";
    edit.setAttribute("aria-label", `Edit "${fact.text}"`);
    edit.addEventListener("click", () => editFact(item, fact));
    const remove = element("button", "delete", "Delete");
    remove.type = "button";
    remove.setAttribute("aria-label", `Delete "${fact.text}"`);
    remove.addEventListener("click", () => dismissFact(fact).catch(showError));
    actions.append(edit, remove);
    item.append(actions);
  }
  return item;
}

async function loadFacts() {
  const ticket = ++state.factsLoad;
  const history = $("#facts-history").checked;
  const query = history ? "?include=superseded&include=dismissed&limit=1000" : "?limit=200";
  const list = $("#facts");
  let facts;
  try {
    facts = (await api("GET", `/v1/facts${query}`)).facts;
  } catch (error) {
    if (ticket === state.factsLoad) {
      list.replaceChildren(element("li", "note", `Facts unavailable: ${error.message}`));
    }
    return;
  }
  if (ticket !== state.factsLoad) return; // a newer load (another toggle, a change) wins
  const byId = new Map(facts.map((fact) => [fact.id, fact]));
  const current = facts.filter((fact) => fact.status === "current");
  const past = facts.filter((fact) => fact.status !== "current");
  // A fact open in its edit form keeps its item (and what was typed) across a reload.
  const editing = new Map(Array.from(list.querySelectorAll("li.editing"), (li) => [li.dataset.id, li]));
  list.replaceChildren();
  if (!current.length) {
    list.append(element("li", "note", 'Nothing yet: say "remember this" in a chat, or add a fact above.'));
  }
  for (const fact of current) list.append(editing.get(fact.id) || factItem(fact, byId));
  if (history) {
    list.append(element("li", "divider note", past.length ? "History: no longer held" : "No history."));
    for (const fact of past) list.append(factItem(fact, byId));
  }
}

async function addFact(text, kind) {
  showError(null);
  const added = await api("POST", "/v1/facts", { text, kind });
  $("#facts-status").textContent =
    added.action === "same" || added.action === "filled" ? `Already known: ${added.fact.text}`
      : added.replaced ? `Added; it replaces: ${added.replaced.text}`
        : `Added: ${added.fact.text}`;
  $("#fact-text").value = "";
  await loadFacts();
}

// Edit in place: the item becomes a form (text and kind) until it is saved or cancelled.
function editFact(item, fact) {
  showError(null);
  const form = element("form", "edit-fact");
  form.setAttribute("aria-label", "Edit fact");
  const text = element("textarea");
  text.value = fact.text;
  text.rows = 2;
  text.maxLength = 2000;
  text.required = true;
  text.setAttribute("aria-label", "Fact text");
  const kind = fillKinds(element("select"), fact.kind);
  kind.setAttribute("aria-label", "Fact kind");
  const save = element("button", "", "Save");
  save.type = "submit";
  const cancel = element("button", "", "Cancel");
  cancel.type = "button";
  form.append(text, kind, save, cancel);
  const view = Array.from(item.childNodes);
  item.classList.add("editing");
  item.replaceChildren(form);
  const close = () => {
    item.classList.remove("editing");
    item.replaceChildren(...view);
    item.querySelector("button.edit").focus();
  };
  cancel.addEventListener("click", close);
  form.addEventListener("keydown", (event) => {
    if (event.key === "Escape") {
      event.preventDefault();
      close();
    }
  });
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    save.disabled = true;
    saveFact(fact, text.value.trim(), kind.value, item, close)
      .catch(showError)
      .finally(() => { save.disabled = false; });
  });
  text.focus();
}

async function saveFact(fact, text, kind, item, close) {
  showError(null);
  if (!text) throw new Error("A fact needs some text (or Cancel).");
  const change = {};
  if (text !== fact.text) change.text = text;
  if (kind !== fact.kind) change.kind = kind;
  if (!Object.keys(change).length) {
    close();
    return;
  }
  const edited = await api("PATCH", `/v1/facts/${encodeURIComponent(fact.id)}`, change);
  item.classList.remove("editing"); // saved: the reload shows the fact as it now reads
  $("#facts-status").textContent = `Saved: ${edited.text}`;
  await loadFacts();
}

async function dismissFact(fact) {
  showError(null);
  const question = `Delete the fact "${fact.text}"? It leaves every prompt; the history keeps it, marked dismissed.`;
  if (!(await confirmAction(question))) return;
  await api("DELETE", `/v1/facts/${encodeURIComponent(fact.id)}`);
  $("#facts-status").textContent = `Deleted: ${fact.text}`;
  await loadFacts();
}

async function openConversation(id) {
  showError(null);
  const detail = await api("GET", `/v1/conversations/${encodeURIComponent(id)}`);
  state.conversation = id;
  state.nextAfter = 0;
  for (const li of document.querySelectorAll("#conversations li")) {
    li.classList.toggle("selected", li.dataset.id === id);
  }
  $("#placeholder").hidden = true;
  $("#conversation").hidden = false;
  $("#conversation-title").textContent = detail.title ? `${detail.title} (${detail.conversation_id})` : detail.conversation_id;
  // How far consolidation has come (imported history is consolidated in the background).
  const through = Math.max(0, ...detail.summaries.map((s) => s.turn_range_end));
  $("#conversation-meta").textContent =
    `${detail.status} · ${detail.turn_count} turns · ${through} of ${detail.turn_count} consolidated · ${detail.total_tokens} tokens · created ${when(detail.created_at)}`;
  $("#archive-button").disabled = detail.status === "archived";
  $("#running-summary").textContent = detail.summary || "No summary yet (it is written when the conversation is consolidated).";
  const summaries = $("#summaries");
  summaries.replaceChildren();
  if (!detail.summaries.length) summaries.append(element("li", "note", "None yet."));
  for (const s of detail.summaries) {
    const item = element("li");
    item.append(element("div", "meta", `turns ${s.turn_range_start}–${s.turn_range_end} · ${when(s.created_at)}`));
    item.append(element("div", "text", s.summary_text));
    summaries.append(item);
  }
  $("#search-query").value = "";
  $("#preview-sections").replaceChildren();
  $("#preview-budget").hidden = true;
  $("#results").hidden = true;
  $("#degraded").hidden = true;
  $("#turns").replaceChildren();
  await loadTurns();
}

async function loadTurns() {
  const id = state.conversation;
  const page = await api("GET", `/v1/conversations/${encodeURIComponent(id)}/turns?after=${state.nextAfter}&limit=100`);
  for (const turn of page.turns) {
    const item = element("li");
    item.append(element("span", "meta", `#${turn.turn_number}`), element("span", "role", turn.role), element("span", "text", turn.content));
    $("#turns").append(item);
  }
  state.nextAfter = page.next_after;
  $("#more-turns").hidden = page.next_after === null;
}

async function search(query) {
  showError(null);
  const id = state.conversation;
  const found = await api("POST", `/v1/conversations/${encodeURIComponent(id)}/search`, { query, k: 10 });
  const body = $("#results tbody");
  body.replaceChildren();
  for (const hit of found.results) {
    const row = element("tr");
    const turn = hit.turn_number ?? (hit.turn_range ? hit.turn_range.join("–") : "");
    row.append(
      element("td", "tier", hit.tier),
      element("td", "sources", hit.sources.join(", ")),
      element("td", "score", hit.score.toFixed(4)),
      element("td", "turn", String(turn)),
      element("td", "text", hit.content),
    );
    body.append(row);
  }
  if (!found.results.length) {
    const row = element("tr");
    const cell = element("td", "note", "No match.");
    cell.colSpan = 5;
    row.append(cell);
    body.append(row);
  }
  $("#results").hidden = false;
  $("#degraded").textContent = found.degraded.length ? `Not searched: ${found.degraded.join("; ")}` : "";
  $("#degraded").hidden = !found.degraded.length;
}

// Resolves true when the person confirms.
function confirmAction(text) {
  const dialog = $("#confirm");
  $("#confirm-text").textContent = text;
  dialog.returnValue = "";
  dialog.showModal();
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
  });
}

async function remove(purge) {
  const id = state.conversation;
  const question = purge
    ? `Purge "${id}"? Its turns, summaries and vectors are removed from every tier. This cannot be undone.`
    : `Archive "${id}"? It stays stored and searchable, marked archived.`;
  if (!(await confirmAction(question))) return;
  await api("DELETE", `/v1/conversations/${encodeURIComponent(id)}${purge ? "?purge=true" : ""}`);
  if (purge) {
    state.conversation = null;
    $("#conversation").hidden = true;
    $("#placeholder").hidden = false;
    await Promise.all([loadConversations(), loadFacts()]);
  } else {
    await loadConversations();
    await openConversation(id);
  }
}

function init() {
  const { key, user } = credentials();
  $("#api-key").value = key;
  $("#user-id").value = user;
  $("#connect").addEventListener("submit", (event) => {
    event.preventDefault();
    sessionStorage.setItem("memory_chain.key", $("#api-key").value.trim());
    sessionStorage.setItem("memory_chain.user", $("#user-id").value.trim());
    connect().catch((error) => {
      $("#whoami").textContent = "";
      showError(error.status === 401 ? new Error(`${error.message} (enter an API key above)`) : error);
    });
  });
  $("#status-filter").addEventListener("change", () => loadConversations().catch(showError));
  fillKinds($("#fact-kind"), "other");
  $("#facts-history").addEventListener("change", () => loadFacts().catch(showError));
  $("#add-fact").addEventListener("submit", (event) => {
    event.preventDefault();
    const text = $("#fact-text").value.trim();
    if (text) addFact(text, $("#fact-kind").value).catch(showError);
  });
  $("#search").addEventListener("submit", (event) => {
    event.preventDefault();
    const query = $("#search-query").value.trim();
    if (query) search(query).catch(showError);
  });
  $("#preview").addEventListener("submit", (event) => {
    event.preventDefault();
    const message = $("#preview-message").value.trim();
    if (message) preview(message).catch(showError);
  });
  $("#more-turns").addEventListener("click", () => loadTurns().catch(showError));
  $("#archive-button").addEventListener("click", () => remove(false).catch(showError));
  $("#purge-button").addEventListener("click", () => remove(true).catch(showError));
  connect().catch((error) => {
    if (error.status === 401) {
      $("#whoami").textContent = "This server needs an API key.";
      $("#api-key").focus();
    } else {
      showError(error);
    }
  });
}

init();
