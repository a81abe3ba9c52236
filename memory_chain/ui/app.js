"use strict";
// The memory browser. Every call is one of memory_chain's documented endpoints:
//   GET /v1/me, GET /v1/conversations, GET /v1/conversations/{id},
//   GET /v1/conversations/{id}/turns, POST /v1/conversations/{id}/search, GET /v1/facts,
//   POST /v1/conversations/{id}/context (what the model will see), GET /v1/models,
//   DELETE /v1/conversations/{id} (archive; ?purge=true removes it from every tier).
// The key is kept in this tab's sessionStorage only. Text from memory is always set as
// textContent, never parsed as HTML.

const $ = (selector) => document.querySelector(selector);
const state = { conversation: null, nextAfter: null };

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
  const me = await api("GET", "/v1/me");
  $("#whoami").textContent = `signed in as ${me.user_id}` + (me.keys_required ? "" : " (no keys)");
  await Promise.all([loadConversations(), loadFacts(), loadModels()]);
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
    item.append(element("div", "id", c.conversation_id));
    const meta = element("div", "meta");
    meta.append(element("span", `badge ${c.status}`, c.status), ` ${c.turn_count} turns · ${c.total_tokens} tokens · ${when(c.last_message_at)}`);
    item.append(meta);
    item.addEventListener("click", () => openConversation(c.conversation_id).catch(showError));
    list.append(item);
  }
}

async function loadFacts() {
  const list = $("#facts");
  list.replaceChildren();
  let facts;
  try {
    facts = (await api("GET", "/v1/facts?limit=100")).facts;
  } catch (error) {
    list.append(element("li", "note", `Facts unavailable: ${error.message}`));
    return;
  }
  if (!facts.length) list.append(element("li", "note", 'Nothing yet: say "remember this" in a chat.'));
  for (const fact of facts) {
    const item = element("li");
    item.append(element("div", "text", fact.content));
    item.append(element("div", "meta", `${fact.conversation_id} #${fact.turn_number} · ${when(fact.timestamp)}`));
    list.append(item);
  }
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
  $("#conversation-title").textContent = detail.conversation_id;
  $("#conversation-meta").textContent =
    `${detail.status} · ${detail.turn_count} turns · ${detail.total_tokens} tokens · created ${when(detail.created_at)}`;
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
