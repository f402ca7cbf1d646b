// The operator console. Every call goes to the public REST API with the
// key the operator signed in with, kept in this tab's sessionStorage only.
// Pages re-read their data every 2 s while the tab is visible.

import { describeCron } from "./cron.js";

const POLL_MS = 2000;
const ss = window.sessionStorage;
const state = {
  key: ss.getItem("sd.key") || "",
  admin: ss.getItem("sd.admin") || "",
  tenant: ss.getItem("sd.tenant") || "",
  caps: null,
};
let refresh = null; // the current page's poll function
let generation = 0; // bumped on every navigation: late answers of an old page are dropped

// ---------- DOM and formatting helpers ----------

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "dataset") Object.assign(el.dataset, v);
    else if (k === "style") el.style.cssText = v; // through the CSSOM: the CSP forbids inline style attributes
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

let ids = 0;
// field builds a labelled input or select; the label wraps the control.
function field(label, control) {
  if (!control.id) control.id = "f" + ++ids;
  return h("label", { for: control.id }, label, control);
}

const utc = (t) => (t ? new Date(t).toISOString().replace(".000Z", "Z") : "");
const local = (t) => (t ? new Date(t).toLocaleString(undefined, { dateStyle: "medium", timeStyle: "medium" }) : "");
const badge = (s) => h("span", { class: "badge " + s }, s.replaceAll("_", " "));
const enc = encodeURIComponent;

function toast(msg) {
  const p = h("p", {}, msg);
  document.getElementById("toast").append(p);
  setTimeout(() => p.remove(), 4000);
}

// confirmAction asks to confirm text; extra, if given, are form fields
// shown with it (read them after it resolves true).
function confirmAction(text, extra) {
  const d = document.getElementById("confirm");
  document.getElementById("confirm-text").textContent = text;
  document.getElementById("confirm-extra").replaceChildren(...(extra || []));
  d.returnValue = "";
  d.showModal();
  document.getElementById("confirm-cancel").focus();
  return new Promise((resolve) => d.addEventListener("close", () => resolve(d.returnValue === "ok"), { once: true }));
}

function problemText(err) {
  if (!(err instanceof APIError)) return String(err.message || err);
  const p = err.problem;
  if (p && typeof p === "object") {
    if (Array.isArray(p.errors) && p.errors.length) return p.errors.map((e) => `${e.field}: ${e.reason}`).join("; ");
    return p.detail || p.title || `HTTP ${err.status}`;
  }
  return `HTTP ${err.status}`;
}

// unchanged reports whether data is what the last call with the same memo
// saw. Pages redraw only what changed, so that a poll does not take the
// keyboard focus away from a row's button.
function unchanged(memo, data) {
  const sig = JSON.stringify(data);
  if (memo.sig === sig) return true;
  memo.sig = sig;
  return false;
}

const errorBox = (err) => h("p", { class: "error", role: "alert" }, problemText(err));

// ---------- the API ----------

class APIError extends Error {
  constructor(status, problem) {
    super(`HTTP ${status}`);
    this.status = status;
    this.problem = problem;
  }
}

async function api(method, path, body, opts = {}) {
  const headers = { Authorization: `Bearer ${opts.key || state.key}`, ...(opts.headers || {}) };
  let payload;
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    payload = JSON.stringify(body);
  }
  const r = await fetch(path, { method, headers, body: payload });
  if (r.status === 204) return null;
  const ct = r.headers.get("Content-Type") || "";
  const data = ct.includes("json") ? await r.json() : await r.text();
  if (!r.ok) {
    if (r.status === 401 && !opts.key) signOut("The key was refused (unknown or revoked). Sign in again.");
    throw new APIError(r.status, data);
  }
  return data;
}

const query = (o) => {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(o)) if (v !== undefined && v !== null && v !== "") q.set(k, v);
  const s = q.toString();
  return s ? "?" + s : "";
};

// hasOperation reads the served OpenAPI document: an operation the server
// does not describe is one it does not serve, and its control is hidden.
function hasOperation(spec, path, method) {
  const lines = spec.split("\n");
  const start = lines.indexOf(`  ${path}:`);
  if (start < 0) return false;
  for (let i = start + 1; i < lines.length && !/^ {2}\S/.test(lines[i]); i++) {
    if (lines[i].startsWith(`    ${method}:`)) return true;
  }
  return false;
}

async function capabilities() {
  if (state.caps) return state.caps;
  let spec = "";
  try {
    const r = await fetch("/openapi.yaml");
    if (r.ok) spec = await r.text();
  } catch (_) { /* no spec: every optional control stays hidden */ }
  state.caps = {
    listTenants: hasOperation(spec, "/v1/tenants", "get"),
    bulkRedrive: hasOperation(spec, "/v1/events/redrive", "post"),
    cancelFire: hasOperation(spec, "/v1/fires/{id}/cancel", "post"),
    summary: hasOperation(spec, "/v1/summary", "get"),
    audit: hasOperation(spec, "/v1/audit", "get"),
    versions: hasOperation(spec, "/v1/schedules/{id}/versions", "get"),
  };
  return state.caps;
}

// ---------- sign-in and the header ----------

function signOut(reason) {
  for (const k of ["sd.key", "sd.admin", "sd.tenant"]) ss.removeItem(k);
  state.key = state.admin = state.tenant = "";
  location.hash = "#/signin";
  if (reason) toast(reason);
}

async function signIn(key) {
  try {
    await api("GET", "/v1/schedules?limit=1", undefined, { key });
    state.key = key;
    state.admin = "";
    ss.setItem("sd.key", key);
    ss.removeItem("sd.admin");
    return null;
  } catch (err) {
    if (!(err instanceof APIError) || err.status !== 403) return err;
  }
  // 403 on a tenant operation: the admin key.
  state.admin = key;
  ss.setItem("sd.admin", key);
  state.key = "";
  ss.removeItem("sd.key");
  return null;
}

async function tenantKey(tenantId) {
  // One console key per tenant and day: the idempotency key makes a second
  // switch the same day replay the first answer instead of minting a key.
  const day = new Date().toISOString().slice(0, 10);
  const k = await api("POST", `/v1/tenants/${enc(tenantId)}/keys`, undefined,
    { key: state.admin, headers: { "Idempotency-Key": `console-${tenantId}-${day}` } });
  state.key = k.key;
  state.tenant = tenantId;
  ss.setItem("sd.key", k.key);
  ss.setItem("sd.tenant", tenantId);
}

async function renderHeader() {
  const signed = !!(state.key || state.admin);
  document.getElementById("nav").hidden = !state.key;
  document.getElementById("signout").hidden = !signed;
  const box = document.getElementById("tenant");
  box.replaceChildren();
  if (!state.admin) {
    if (state.key) box.append(h("span", { class: "muted" }, "tenant key"));
    return;
  }
  const caps = await capabilities();
  if (!caps.listTenants) {
    box.append(h("span", { class: "muted" }, "admin"));
    return;
  }
  try {
    const list = await api("GET", "/v1/tenants?limit=1000", undefined, { key: state.admin });
    const sel = h("select", { id: "tenant-switch" },
      h("option", { value: "" }, "choose a tenant…"),
      (list.items || []).map((t) => h("option", { value: t.id, selected: t.id === state.tenant }, `${t.name} (${t.id})`)));
    sel.addEventListener("change", async () => {
      if (!sel.value) return;
      try {
        await tenantKey(sel.value);
        if (location.hash.startsWith("#/tenants")) location.hash = "#/schedules";
        else route();
      } catch (err) {
        toast(problemText(err));
      }
    });
    box.append(field("Tenant", sel));
  } catch (err) {
    box.append(h("span", { class: "error" }, problemText(err)));
  }
}

function pageSignIn(main) {
  const input = h("input", { type: "password", autocomplete: "off", required: true, placeholder: "sk_… or the admin key" });
  const msg = h("div", {});
  const form = h("form", {
    onsubmit: async (e) => {
      e.preventDefault();
      msg.replaceChildren();
      const err = await signIn(input.value.trim());
      if (err) {
        msg.append(errorBox(err.status === 401 ? new Error("Unknown or revoked key.") : err));
        return;
      }
      location.hash = state.key ? "#/schedules" : "#/tenants";
    },
  }, field("API key", input), h("button", { type: "submit", class: "primary" }, "Sign in"), msg);
  main.append(h("section", { class: "signin" }, h("h1", {}, "Sign in"),
    h("p", { class: "muted" }, "A tenant key, or the admin key (which lets you switch between tenants). The key stays in this tab only."),
    form));
  input.focus();
}

async function pageTenants(main) {
  const caps = await capabilities();
  main.append(h("h1", {}, "Choose a tenant"));
  if (!caps.listTenants) {
    main.append(h("p", { class: "notice", id: "tenants-unavailable" },
      "This server does not list tenants (GET /v1/tenants is not available). Sign in with a tenant key instead."));
    return;
  }
  main.append(h("p", { class: "muted" }, "Pick one in the tenant switcher above. Switching creates one console key for the tenant per day."));
}

// ---------- schedules ----------

function scheduleForm(policies, onCreated) {
  const tz = Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
  const f = {
    name: h("input", { name: "name", required: true }),
    kind: h("select", { name: "kind", id: "kind-in" },
      h("option", { value: "cron" }, "a cron expression"),
      h("option", { value: "crons" }, "several crons (separated by ;)"),
      h("option", { value: "interval" }, "an interval (e.g. 90m)"),
      h("option", { value: "after" }, "after another schedule's fires (its id)"),
      h("option", { value: "after-succeeded" }, "after another schedule's fires that succeeded (its id)")),
    cron: h("input", { name: "cron", required: true, value: "*/5 * * * *" }),
    timezone: h("input", { name: "timezone", value: tz }),
    eventCount: h("input", { name: "eventCount", type: "number", min: 1, value: 1 }),
    maxAttempts: h("input", { name: "maxAttempts", type: "number", min: 1, max: 100, value: 5 }),
    policyId: h("select", { name: "policyId" }, h("option", { value: "" }, "none"),
      policies.map((p) => h("option", { value: p.id }, p.name))),
    url: h("input", { name: "target.url", type: "url", required: true, placeholder: "https://…" }),
    window: h("input", { name: "window", placeholder: "e.g. 10m" }),
    jitter: h("input", { name: "jitter", placeholder: "e.g. 15m" }),
    deadline: h("input", { name: "deadline", placeholder: "e.g. 45m (default: the window's end)" }),
    onDeadline: h("select", { name: "onDeadline" }, [["record", "record the miss"], ["expire", "expire what still waits"]].map(([v, t]) => h("option", { value: v }, t))),
    overlap: h("select", { name: "overlap" }, ["allow", "skip", "cancel"].map((o) => h("option", { value: o }, o))),
    spread: h("input", { name: "spread", type: "checkbox" }),
    labels: h("input", { name: "labels", placeholder: "team=billing, tier=gold" }),
    notify: h("input", { name: "notify", type: "url", placeholder: "https://… (optional)" }),
    notifyOn: h("input", { name: "notifyOn", value: "fire.finished, fire.has_dead, fire.deadline_missed" }),
  };
  const words = h("small", { id: "cron-words", "aria-live": "polite" });
  const explain = () => {
    const v = f.cron.value;
    if (f.kind.value === "interval") { words.textContent = v ? `every ${v} of elapsed time` : ""; return; }
    if (f.kind.value.startsWith("after")) { words.textContent = v ? `once after each ${f.kind.value === "after" ? "finished" : "succeeded"} fire of ${v}` : ""; return; }
    try {
      words.textContent = f.kind.value === "crons" ? splitCrons(v).map(describeCron).join("; and ") : describeCron(v);
    } catch (e) { words.textContent = e.message; }
  };
  f.cron.addEventListener("input", explain);
  f.kind.addEventListener("change", explain);
  explain();
  const msg = h("div", { class: "span" });
  const form = h("form", {
    class: "grid", id: "new-schedule",
    onsubmit: async (e) => {
      e.preventDefault();
      msg.replaceChildren();
      for (const el of form.querySelectorAll("[aria-invalid]")) el.removeAttribute("aria-invalid");
      const body = {
        name: f.name.value, cron: f.cron.value, timezone: f.timezone.value || "UTC",
        eventCount: Number(f.eventCount.value), maxAttempts: Number(f.maxAttempts.value),
        overlap: f.overlap.value, spread: f.spread.checked, target: { type: "http", url: f.url.value },
      };
      if (f.policyId.value) body.policyId = f.policyId.value;
      if (f.window.value) body.window = f.window.value;
      if (f.jitter.value) body.jitter = f.jitter.value;
      if (f.deadline.value) body.deadline = f.deadline.value;
      if (f.onDeadline.value === "expire") body.onDeadline = "expire";
      if (f.kind.value !== "cron") {
        delete body.cron;
        if (f.kind.value === "crons") body.crons = splitCrons(f.cron.value);
        else if (f.kind.value.startsWith("after")) {
          body.after = { scheduleId: f.cron.value.trim(), when: f.kind.value === "after" ? "finished" : "succeeded" };
          delete body.timezone;
        } else body.interval = f.cron.value;
      }
      if (f.notify.value) {
        body.notify = [{ url: f.notify.value, on: f.notifyOn.value.split(",").map((k) => k.trim()).filter(Boolean) }];
      }
      const labels = parseLabels(f.labels.value);
      if (labels) body.labels = labels;
      try {
        const s = await api("POST", "/v1/schedules", body, { headers: { "Idempotency-Key": crypto.randomUUID() } });
        toast(`Created ${s.name}`);
        form.reset();
        explain();
        onCreated(s);
      } catch (err) {
        for (const fe of (err.problem && err.problem.errors) || []) {
          // labels.<key> is the labels field too; crons, crons[i] and
          // interval are the when field.
          // after and after.scheduleId are the when field too; notify[0].…
          // the notify field.
          const name = fe.field.startsWith("labels.") ? "labels"
            : /^(crons|interval|after)\b/.test(fe.field) ? "cron"
            : /^notify\[0\]\.on/.test(fe.field) ? "notifyOn" : /^notify\b/.test(fe.field) ? "notify" : fe.field;
          const el = form.querySelector(`[name="${CSS.escape(name)}"]`);
          if (el) el.setAttribute("aria-invalid", "true");
        }
        msg.append(errorBox(err));
      }
    },
  },
  field("Name", f.name), field("Fires on", f.kind), h("label", { for: "cron-in" }, "When", Object.assign(f.cron, { id: "cron-in" }), words),
  field("Time zone", f.timezone), field("Events per fire", f.eventCount),
  field("Max attempts", f.maxAttempts), field("Policy", f.policyId), field("Target URL", f.url),
  field("Window", f.window), field("Jitter (launch up to this much later)", f.jitter),
  field("Deadline (a fire must finish this long after its time)", f.deadline), field("On a missed deadline", f.onDeadline), field("Overlap", f.overlap), field("Labels (key=value, comma separated)", f.labels),
  field("Notify URL", f.notify), field("Notify on (comma separated)", f.notifyOn),
  h("label", { class: "inline", for: "spread-in" },
    Object.assign(f.spread, { id: "spread-in" }), " spread over the window"),
  h("div", {}, h("button", { type: "submit", class: "primary", id: "create-schedule" }, "Create schedule")), msg);
  return form;
}

async function scheduleAction(s, action, after) {
  const verbs = { pause: "Pause", resume: "Resume", trigger: "Trigger", delete: "Delete" };
  const warn = {
    pause: "Waiting events of future fires are cancelled.",
    trigger: `It fires its ${s.eventCount} event(s) now.`,
    delete: "This cannot be undone.",
  };
  // A pause takes an optional note and a time it resumes by itself.
  const note = h("input", { id: "pause-note", name: "note", maxlength: 1000, placeholder: "why (optional)" });
  const until = h("input", { id: "pause-until", name: "until", type: "datetime-local" });
  const extra = action === "pause" ? [field("Note", note), field("Resume by itself at (local time)", until)] : null;
  if (!(await confirmAction(`${verbs[action]} schedule “${s.name}”? ${warn[action] || ""}`, extra))) return;
  try {
    if (action === "delete") await api("DELETE", `/v1/schedules/${enc(s.id)}`);
    else if (action === "pause") {
      const body = {};
      if (note.value) body.note = note.value;
      if (until.value) body.until = new Date(until.value).toISOString();
      await api("POST", `/v1/schedules/${enc(s.id)}/pause`, body);
    } else await api("POST", `/v1/schedules/${enc(s.id)}/${action}`);
    toast(`${verbs[action]}: ${s.name}`);
    after(action);
  } catch (err) {
    toast(problemText(err));
  }
}

function actionButtons(s, after) {
  const b = (action, label, cls) => h("button", {
    type: "button", class: cls, dataset: { action, schedule: s.id }, "aria-label": `${label} ${s.name}`,
    onclick: () => scheduleAction(s, action, after),
  }, label);
  return h("div", { class: "actions" },
    s.state === "active" ? b("pause", "Pause") : s.state === "paused" ? b("resume", "Resume") : null,
    s.state !== "completed" ? b("trigger", "Trigger") : null,
    b("delete", "Delete", "danger"));
}

// splitCrons reads "0 9 * * 1-5; 30 12 * * 6" into its expressions.
function splitCrons(v) {
  return v.split(";").map((e) => e.trim()).filter(Boolean);
}

// whenCode is a schedule's cron, crons or interval as written.
function whenCode(s) {
  if (s.after) return `after ${s.after.scheduleId}`;
  if (s.crons) return s.crons.join("; ");
  if (s.interval) return `every ${s.interval}`;
  return s.cron || "one-off";
}

function cronWords(s) {
  if (s.after) return `once after each ${s.after.when || "finished"} fire of ${s.after.scheduleId}`;
  if (s.interval) return `every ${s.interval} of elapsed time${s.startAt ? `, from ${utc(s.startAt)}` : ""}`;
  if (s.crons) {
    try { return s.crons.map(describeCron).join("; and "); } catch (e) { return s.crons.join("; "); }
  }
  if (!s.cron) return s.runAt ? `Once, at ${utc(s.runAt)}` : "";
  try { return describeCron(s.cron); } catch (e) { return s.cron; }
}

// parseLabels reads "team=billing, tier=gold" into an object; undefined for
// none. The server checks keys and values.
function parseLabels(text) {
  const out = {};
  for (const part of text.split(",").map((p) => p.trim()).filter(Boolean)) {
    const i = part.indexOf("=");
    if (i < 0) out[part] = "";
    else out[part.slice(0, i).trim()] = part.slice(i + 1).trim();
  }
  return Object.keys(out).length ? out : undefined;
}

// labelChips shows a schedule's or policy's labels.
function labelChips(labels) {
  const keys = Object.keys(labels || {}).sort();
  if (!keys.length) return h("span", { class: "muted" }, "—");
  return h("span", { class: "labels" }, keys.map((k) => h("span", { class: "chip" }, labels[k] === "" ? k : `${k}=${labels[k]}`)));
}

// labelQuery is the list's label selectors ("team=billing, tier") as
// repeated label= parameters.
function labelQuery(text) {
  const q = new URLSearchParams();
  for (const part of text.split(",").map((p) => p.trim()).filter(Boolean)) q.append("label", part);
  const s = q.toString();
  return s ? "&" + s : "";
}

async function pageSchedules(main, params) {
  const gen = generation;
  const filters = { namePrefix: params.get("namePrefix") || "", state: params.get("state") || "", label: params.get("label") || "", cursor: params.get("cursor") || "" };
  let policies = [];
  try { policies = (await api("GET", "/v1/policies")).items || []; } catch (_) { /* the form works without */ }
  if (gen !== generation) return;
  const tbody = h("tbody", { id: "schedule-rows" });
  const more = h("div", { class: "actions" });
  const status = h("div", {});
  const prefix = h("input", { type: "search", name: "namePrefix", value: filters.namePrefix });
  const labelIn = h("input", { type: "search", name: "label", value: filters.label, placeholder: "team=billing, tier" });
  // The multi-select: ids chosen on this page, kept across polls.
  const selected = new Set();
  const bulkButtons = {};
  const selCount = h("span", { id: "selected-count", "aria-live": "polite" }, "0 selected");
  const allBox = h("input", { type: "checkbox", id: "select-all", "aria-label": "select every schedule on this page" });
  const syncBulk = () => {
    selCount.textContent = `${selected.size} selected`;
    for (const b of Object.values(bulkButtons)) b.disabled = selected.size === 0;
    const boxes = [...tbody.querySelectorAll("input[data-select]")];
    for (const cb of boxes) cb.checked = selected.has(cb.dataset.select); // rows a poll did not redraw
    allBox.checked = boxes.length > 0 && boxes.every((cb) => cb.checked);
  };
  allBox.addEventListener("change", () => {
    for (const cb of tbody.querySelectorAll("input[data-select]")) {
      cb.checked = allBox.checked;
      allBox.checked ? selected.add(cb.dataset.select) : selected.delete(cb.dataset.select);
    }
    syncBulk();
  });
  const stateSel = h("select", { name: "state" }, ["", "active", "paused", "completed"].map((v) =>
    h("option", { value: v, selected: v === filters.state }, v || "any")));
  const memo = {};
  const load = async () => {
    try {
      const page = await api("GET", "/v1/schedules" + query({ limit: 100, namePrefix: filters.namePrefix, state: filters.state, cursor: filters.cursor }) + labelQuery(filters.label));
      if (gen !== generation) return;
      status.replaceChildren();
      if (unchanged(memo, page)) return;
      const present = new Set(page.items.map((s) => s.id));
      for (const id of [...selected]) if (!present.has(id)) selected.delete(id);
      tbody.replaceChildren(...page.items.map((s) => h("tr", { dataset: { id: s.id, state: s.state } },
        h("td", {}, h("input", {
          type: "checkbox", "aria-label": `select ${s.name}`, checked: selected.has(s.id), dataset: { select: s.id },
          onchange: (ev) => { ev.target.checked ? selected.add(s.id) : selected.delete(s.id); syncBulk(); },
        })),
        h("td", {}, h("a", { href: `#/schedules/${enc(s.id)}` }, s.name), h("br"), h("small", {}, s.id)),
        h("td", {}, badge(s.state), s.state === "paused" && (s.pausedNote || s.resumeAt)
          ? [h("br"), h("small", { class: "pause-info" }, [s.pausedNote, s.resumeAt ? `until ${utc(s.resumeAt)}` : ""].filter(Boolean).join(" · "))]
          : null),
        h("td", {}, h("code", {}, whenCode(s)), h("br"), h("small", {}, cronWords(s))),
        h("td", { class: "next" }, s.nextFireTimes && s.nextFireTimes.length
          ? [h("span", {}, local(s.nextFireTimes[0])), h("br"), h("small", {}, utc(s.nextFireTimes[0]))]
          : h("span", { class: "muted" }, "none")),
        h("td", {}, s.policyId ? h("small", {}, s.policyId) : h("span", { class: "muted" }, "—")),
        h("td", { class: "labels-cell" }, labelChips(s.labels)),
        h("td", {}, actionButtons(s, load)))));
      if (!page.items.length) tbody.append(h("tr", {}, h("td", { colspan: 8, class: "muted" }, "No schedules match.")));
      syncBulk();
      more.replaceChildren(page.nextCursor ? h("a", {
        href: "#/schedules" + query({ ...filters, cursor: page.nextCursor }), id: "next-page",
      }, "Next page →") : "");
    } catch (err) {
      status.replaceChildren(errorBox(err));
    }
  };
  // A bulk action over the selection: one POST /v1/schedules/actions
  // (the selection is at most a page of 100, within one call's 1,000).
  const bulk = async (action) => {
    const verbs = { pause: "Pause", resume: "Resume", trigger: "Trigger", delete: "Delete" };
    const ids = [...selected];
    const warn = { pause: "Waiting events of their future fires are cancelled.", trigger: "Each fires its events now.", delete: "This cannot be undone." };
    if (!(await confirmAction(`${verbs[action]} ${ids.length} selected schedule(s)? ${warn[action] || ""}`))) return;
    try {
      const r = await api("POST", "/v1/schedules/actions", { action, selector: { ids } });
      const failed = r.failed || [];
      toast(`${verbs[action]}: ${r.changed} of ${r.matched} changed` + (failed.length ? `; failed: ${failed.map((f) => `${f.id} (${f.detail})`).join(", ")}` : ""));
      for (const id of ids) if (!failed.some((f) => f.id === id)) selected.delete(id);
    } catch (err) {
      toast(problemText(err));
    }
    await load();
    syncBulk();
  };
  for (const [action, label, cls] of [["pause", "Pause"], ["resume", "Resume"], ["trigger", "Trigger"], ["delete", "Delete", "danger"]]) {
    bulkButtons[action] = h("button", { type: "button", class: cls, id: `bulk-${action}`, disabled: true, onclick: () => bulk(action) }, `${label} selected`);
  }
  main.append(h("h1", {}, "Schedules"),
    h("details", {}, h("summary", {}, "New schedule"), scheduleForm(policies, load)),
    h("form", {
      class: "bar", role: "search",
      onsubmit: (e) => {
        e.preventDefault();
        location.hash = "#/schedules" + query({ namePrefix: prefix.value, state: stateSel.value, label: labelIn.value });
      },
    }, field("Name starts with", prefix), field("State", stateSel), field("Labels (key=value or key)", labelIn), h("button", { type: "submit" }, "Filter")),
    h("div", { class: "bar", id: "bulk-bar", role: "group", "aria-label": "Actions on the selected schedules" }, selCount, Object.values(bulkButtons)),
    status,
    h("table", { "aria-label": "Schedules" }, h("thead", {}, h("tr", {},
      h("th", { scope: "col" }, allBox),
      ["Name", "State", "Cron", "Next fire (local / UTC)", "Policy", "Labels", "Actions"].map((t) => h("th", { scope: "col" }, t)))), tbody),
    more);
  await load();
  return load;
}

// DST_MARKS explain a previewed fire's dst mark.
const DST_MARKS = {
  skipped: "the wall time did not exist (spring forward): fires at the end of the gap",
  repeated: "the wall time occurs twice (fall back)",
};

async function pageSchedule(main, id) {
  const gen = generation;
  let s;
  try {
    s = await api("GET", `/v1/schedules/${enc(id)}`);
  } catch (err) {
    main.append(h("h1", {}, "Schedule"), errorBox(err));
    return null;
  }
  if (gen !== generation) return null;
  const countSel = h("select", { id: "preview-count" }, [24, 100, 500, 1000].map((n) => h("option", { value: n }, n)));
  const preview = h("tbody", { id: "preview-rows" });
  const dst = h("p", { id: "dst-note", class: "muted" });
  const loadPreview = async () => {
    if (s.state !== "active") {
      preview.replaceChildren(h("tr", {}, h("td", { colspan: 4, class: "muted" }, `No upcoming fires: the schedule is ${s.state}.`)));
      return;
    }
    try {
      const p = await api("GET", `/v1/schedules/${enc(id)}/preview?count=${countSel.value}`);
      const offset = (l) => (l.match(/([+-]\d\d:\d\d|Z)$/) || [""])[0];
      let prev = null;
      const changes = [];
      preview.replaceChildren(...p.fireTimes.map((ft) => {
        const off = offset(ft.local);
        const changed = prev !== null && off !== prev;
        if (changed) changes.push(`${prev} → ${off} before ${ft.local}`);
        prev = off;
        const notes = [];
        if (ft.skipped) notes.push("skipped");
        if (changed) notes.push("UTC offset changed (daylight saving)");
        if (ft.dst) notes.push(DST_MARKS[ft.dst] || ft.dst);
        return h("tr", { class: changed ? "dst" : null, dataset: { skipped: ft.skipped ? "true" : "false", ...(ft.dst ? { dst: ft.dst } : {}) } }, h("td", {}, ft.local), h("td", {}, ft.utc),
          h("td", { class: "launch" }, ft.launchAt ? [utc(ft.launchAt), h("br"), h("small", {}, `+${ft.jitter}`)] : h("span", { class: "muted" }, "at the fire time")),
          h("td", {}, notes.join("; ")));
      }));
      dst.textContent = changes.length
        ? `Offset changes in this preview: ${changes.join("; ")}.`
        : `No daylight-saving change within these ${p.fireTimes.length} fires of ${p.timezone}; show more to reach the next one.`;
    } catch (err) {
      preview.replaceChildren(h("tr", {}, h("td", { colspan: 4 }, errorBox(err))));
    }
  };
  countSel.addEventListener("change", loadPreview);
  const after = (action) => (action === "delete" ? (location.hash = "#/schedules") : route());
  main.append(h("h1", {}, s.name, " ", badge(s.state)),
    actionButtons(s, after),
    h("h2", {}, "Definition"),
    h("dl", { class: "kv" },
      h("dt", {}, "id"), h("dd", {}, s.id),
      h("dt", {}, "when"), h("dd", { id: "cron-explained" }, cronWords(s)),
      h("dt", {}, s.interval ? "interval" : s.crons ? "crons" : s.after ? "after" : "cron"), h("dd", { id: "when-code" }, s.after
        ? [h("a", { href: `#/schedules/${enc(s.after.scheduleId)}` }, s.after.scheduleId), ` (${s.after.when || "finished"})`]
        : [h("code", {}, s.runAt ? "—" : whenCode(s)), " in ", s.timezone]),
      h("dt", {}, "events per fire"), h("dd", {}, s.eventCount),
      h("dt", {}, "window"), h("dd", {}, s.window || "none", s.spread ? " (launches spread over it)" : ""),
      h("dt", {}, "jitter"), h("dd", { id: "jitter" }, s.jitter
        ? `each fire launches up to ${s.jitter} after its time, by a fixed offset per fire (before the window)`
        : "none"),
      h("dt", {}, "deadline"), h("dd", { id: "deadline" }, s.deadline || s.window
        ? `each fire must finish ${s.deadline || s.window} after its launch${s.deadline ? "" : " (the window's end)"}; a miss is ${s.onDeadline === "expire" ? "recorded and what still waits expires" : "recorded"}`
        : "none"),
      h("dt", {}, "max event age"), h("dd", { id: "max-event-age" }, s.maxEventAge
        ? `an event not delivered ${s.maxEventAge} after its launch expires` : "none"),
      h("dt", {}, "overlap / misfire"), h("dd", {}, `${s.overlap} / ${s.misfire}`),
      h("dt", {}, "policy"), h("dd", {}, s.policyId || "none"),
      h("dt", {}, "calendars"), h("dd", { id: "schedule-calendars" }, s.excludeCalendars
        ? [...s.excludeCalendars.flatMap((c) => [h("a", { href: `#/calendars/${enc(c)}` }, c), " "]), `(excluded fires: ${s.onExcluded})`]
        : "none"),
      h("dt", {}, "target"), h("dd", {}, s.target.url || s.target.queueUrl),
      h("dt", {}, "notify"), h("dd", { id: "schedule-notify" }, s.notify
        ? s.notify.map((n) => h("div", {}, h("code", {}, n.url || n.queueUrl), " on ", n.on.join(", ")))
        : "none"),
      h("dt", {}, "max attempts"), h("dd", {}, s.maxAttempts),
      h("dt", {}, "labels"), h("dd", { id: "schedule-labels" }, labelChips(s.labels)),
      h("dt", {}, "version"), h("dd", {}, s.version),
      ...(s.state === "paused" ? [
        h("dt", {}, "paused"), h("dd", { id: "paused-by" }, s.pausedAt ? `${utc(s.pausedAt)}${s.pausedBy ? ` by ${s.pausedBy}` : ""}` : "—"),
        h("dt", {}, "pause note"), h("dd", { id: "paused-note" }, s.pausedNote || "—"),
        h("dt", {}, "resumes"), h("dd", { id: "resume-at" }, s.resumeAt ? `by itself at ${utc(s.resumeAt)}` : "when resumed"),
      ] : []),
      ...(s.skipUntil ? [h("dt", {}, "skipped"), h("dd", { id: "skip-until" }, `fires before ${utc(s.skipUntil)}`)] : [])),
    h("p", {}, h("a", { href: `#/fires/${enc(s.id)}` }, "Fires timeline →"), " ",
      h("a", { href: `#/events?scheduleId=${enc(s.id)}` }, "Events →")),
    ...(s.state === "active" && !s.runAt && !s.after ? [backfillForm(s)] : []),
    h("h2", {}, "Next fires"), h("div", { class: "bar" }, field("How many", countSel)), dst,
    h("table", { "aria-label": "Preview" }, h("thead", {}, h("tr", {},
      h("th", { scope: "col" }, `Local (${s.timezone})`), h("th", { scope: "col" }, "UTC"), h("th", { scope: "col" }, "Launch (UTC)"),
      h("th", { scope: "col" }, ""))), preview));
  await loadPreview();
  if ((await capabilities()).versions && gen === generation) main.append(...await scheduleVersions(s.id));
  return null;
}

// VERSION_SKIP are the members a version's changes leave out: they move
// with every version or are of the moment.
const VERSION_SKIP = new Set(["version", "updatedAt", "createdAt", "nextFireTimes", "children"]);

// changedMembers lists the members of a that differ from b (a schedule's
// version and the one before it).
function changedMembers(a, b) {
  if (!b) return [];
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  return [...keys].filter((k) => !VERSION_SKIP.has(k) && JSON.stringify(a[k]) !== JSON.stringify(b[k])).sort();
}

// scheduleVersions is the schedule's versions table, newest first, each
// with what changed from the one before it and who stored it.
async function scheduleVersions(id) {
  const tbody = h("tbody", { id: "version-rows" });
  try {
    const page = await api("GET", `/v1/schedules/${enc(id)}/versions?limit=100`);
    const items = page.items;
    tbody.replaceChildren(...items.map((v, i) => {
      const changed = changedMembers(v.schedule, items[i + 1] && items[i + 1].schedule);
      return h("tr", { dataset: { version: v.version } },
        h("td", { class: "num" }, v.version, v.current ? h("small", {}, " (current)") : ""),
        h("td", {}, utc(v.at)),
        h("td", {}, v.action || "—", v.keyPrefix ? h("small", {}, ` by ${v.keyPrefix}`) : ""),
        h("td", { class: "changed" }, i + 1 < items.length ? changed.join(", ") || "—" : "first kept version"),
        h("td", {}, v.note || ""));
    }));
  } catch (err) {
    tbody.replaceChildren(h("tr", {}, h("td", { colspan: 5 }, errorBox(err))));
  }
  return [h("h2", {}, "Versions"),
    h("p", { class: "muted" }, h("a", { href: `#/audit?objectId=${enc(id)}` }, "Audit records of this schedule →")),
    h("table", { "aria-label": "Versions" }, h("thead", {}, h("tr", {},
      ["Version", "Stored (UTC)", "By", "Changed", "Note"].map((t) => h("th", { scope: "col" }, t)))), tbody)];
}

// diffText shows an audit record's diff: each member, before → after.
function diffText(diff) {
  if (!diff) return "";
  const show = (v) => (v === undefined ? "∅" : JSON.stringify(v));
  return Object.entries(diff).map(([k, c]) => `${k}: ${show(c.before)} → ${show(c.after)}`).join("; ");
}

// pageAudit lists the tenant's audit records, oldest first, a page of 100
// at a time, narrowed to one object.
async function pageAudit(main, params) {
  const objectId = h("input", { name: "objectId", value: params.get("objectId") || "", placeholder: "sch_…, pol_…" });
  const tbody = h("tbody", { id: "audit-rows" });
  const status = h("div", {});
  const more = h("button", { type: "button", id: "audit-more", hidden: true }, "More");
  let cursor = null;
  const load = async (append) => {
    try {
      const page = await api("GET", "/v1/audit" + query({ objectId: objectId.value.trim(), limit: 100, cursor: append ? cursor : "" }));
      status.replaceChildren();
      const rows = page.items.map((r) => h("tr", { dataset: { id: r.id, action: r.action } },
        h("td", {}, utc(r.at)),
        h("td", {}, r.action),
        h("td", {}, r.objectId
          ? (r.objectId.startsWith("sch_") ? h("a", { href: `#/schedules/${enc(r.objectId)}` }, r.objectId) : r.objectId)
          : "—", r.version ? h("small", {}, ` v${r.version}`) : ""),
        h("td", {}, r.keyPrefix || ""),
        h("td", { class: "diff" }, diffText(r.diff)),
        h("td", {}, r.note || "", r.requestId ? [h("br"), h("small", {}, r.requestId)] : "")));
      if (append) tbody.append(...rows);
      else tbody.replaceChildren(...rows);
      if (!append && !rows.length) tbody.append(h("tr", {}, h("td", { colspan: 6, class: "muted" }, "No records.")));
      cursor = page.nextCursor || null;
      more.hidden = !cursor;
    } catch (err) {
      status.replaceChildren(errorBox(err));
    }
  };
  more.addEventListener("click", () => load(true));
  const form = h("form", { class: "bar", onsubmit: (e) => { e.preventDefault(); location.hash = "#/audit" + query({ objectId: objectId.value.trim() }); } },
    field("Object id", objectId), h("button", { type: "submit" }, "Filter"));
  main.append(h("h1", {}, "Audit"),
    h("p", { class: "muted" }, "Every change made through the API, oldest first: who (the key's prefix), what, the members changed. Releases and extends are not recorded."),
    form, status,
    h("table", { "aria-label": "Audit records" }, h("thead", {}, h("tr", {},
      ["At (UTC)", "Action", "Object", "Key", "Changes", "Note / request"].map((t) => h("th", { scope: "col" }, t)))), tbody), more);
  await load(false);
  return null;
}

// backfillForm fires the schedule's past instants in [from, to) now
// (POST /backfill); the times are the browser's local time.
function backfillForm(s) {
  const from = h("input", { name: "from", type: "datetime-local", required: true });
  const to = h("input", { name: "to", type: "datetime-local", required: true });
  const maxFires = h("input", { name: "maxFires", type: "number", min: 1, max: 10000, placeholder: "1000" });
  const result = h("p", { id: "backfill-result", "aria-live": "polite" });
  const form = h("form", {
    class: "bar", id: "backfill",
    onsubmit: async (e) => {
      e.preventDefault();
      result.replaceChildren();
      for (const el of form.querySelectorAll("[aria-invalid]")) el.removeAttribute("aria-invalid");
      const body = { from: new Date(from.value).toISOString(), to: new Date(to.value).toISOString() };
      if (maxFires.value) body.maxFires = Number(maxFires.value);
      if (!(await confirmAction(`Backfill “${s.name}” from ${body.from} to ${body.to}? Each instant without a fire fires its ${s.eventCount} event(s) now, through the schedule's policy.`))) return;
      try {
        const r = await api("POST", `/v1/schedules/${enc(s.id)}/backfill`, body);
        result.textContent = `${r.instants} instants: ${r.fires} fired, ${r.skipped} skipped by a calendar, ${r.existing} already had a fire; ` +
          `${r.events} events written${r.eventsPending ? `, ${r.eventsPending} being written in the background` : ""}.`;
        toast(`Backfilled ${s.name}: ${r.fires} fires`);
      } catch (err) {
        for (const fe of (err.problem && err.problem.errors) || []) {
          const el = form.querySelector(`[name="${CSS.escape(fe.field)}"]`);
          if (el) el.setAttribute("aria-invalid", "true");
        }
        result.append(errorBox(err));
      }
    },
  }, field("From (local time)", from), field("To (local time, not after now)", to), field("Max fires", maxFires),
  h("button", { type: "submit", id: "backfill-submit" }, "Backfill"));
  return h("section", { "aria-labelledby": "backfill-h" }, h("h2", { id: "backfill-h" }, "Backfill"),
    h("p", { class: "muted" }, "Fire the instants the schedule would have fired in a past range, once each; instants that already have a fire are left out."),
    form, result);
}

// ---------- fires ----------

const STATES = ["waiting", "inFlight", "delivered", "released", "retrying", "dead", "cancelled", "expired"];
const COLOURS = { inFlight: "inflight" };

function legend() {
  return h("div", { class: "legend", "aria-hidden": "true" }, STATES.map((k) =>
    h("span", {}, h("i", { style: `background: var(--${COLOURS[k] || k})` }), k)));
}

function countsBar(f) {
  const total = Math.max(f.n, 1);
  return h("div", { class: "bar-stack", role: "img", "aria-label": STATES.map((k) => `${k} ${f.counts[k]}`).join(", ") },
    STATES.filter((k) => f.counts[k] > 0).map((k) =>
      h("span", { style: `width: ${(100 * f.counts[k]) / total}%; background: var(--${COLOURS[k] || k})` })));
}

// fireDeadline says when the fire must finish, whether it missed, and
// while it runs when it is expected to finish.
function fireDeadline(f) {
  if (f.deadlineMissed) {
    return h("div", {}, h("small", { class: "deadline missed" },
      `deadline missed ${utc(f.deadlineMissed.at)}: ${f.deadlineMissed.remaining} unfinished${f.onDeadline === "expire" ? ", waiting ones expired" : ""}`));
  }
  const parts = [];
  if (f.deadline) parts.push(`deadline ${utc(f.deadline)}${f.onDeadline === "expire" ? " (expire)" : ""}`);
  if (f.eta) parts.push(`expected ${utc(f.eta)}${f.atRisk ? " — at risk" : ""}`);
  return parts.length ? h("div", {}, h("small", { class: f.atRisk ? "deadline at-risk" : "deadline" }, parts.join(" · "))) : null;
}

function parseDuration(d) {
  let ms = 0;
  for (const [, n, u] of String(d || "").matchAll(/([\d.]+)(h|ms|m|s)/g)) {
    ms += Number(n) * { h: 3600e3, m: 60e3, s: 1e3, ms: 1 }[u];
  }
  return ms;
}

// windowBar draws the fire's batch window: the fire time at the left, the
// window's end at the right, and with spread one tick per event launch.
function windowBar(s, f) {
  const w = parseDuration(s.window);
  if (!w) return h("small", { class: "muted" }, "no window: all at the fire time");
  const ticks = s.spread ? Math.min(f.n, 40) : 1;
  return h("span", { title: `window ${s.window}${s.spread ? ", spread" : ""}` },
    h("span", { class: "window", role: "img", "aria-label": `window ${s.window}${s.spread ? ", launches spread" : ", launches at the start"}` },
      h("b", { style: "left: 0; width: 100%" }),
      Array.from({ length: ticks }, (_, i) => h("i", { style: `left: ${ticks === 1 ? 0 : (98 * i) / (ticks - 1)}%` }))),
    " ", h("small", {}, `${s.window}${s.spread ? " spread" : ""}`));
}

async function pageFires(main, id) {
  const gen = generation;
  main.append(h("h1", {}, "Fires"));
  if (!id) {
    const sel = h("input", { name: "scheduleId", required: true, list: "schedule-list" });
    const dl = h("datalist", { id: "schedule-list" });
    main.append(h("form", {
      class: "bar", onsubmit: (e) => { e.preventDefault(); location.hash = `#/fires/${enc(sel.value.trim())}`; },
    }, field("Schedule id", sel), dl, h("button", { type: "submit" }, "Show timeline")));
    try {
      const page = await api("GET", "/v1/schedules?limit=100");
      dl.replaceChildren(...page.items.map((s) => h("option", { value: s.id }, s.name)));
      main.append(h("ul", {}, page.items.map((s) => h("li", {}, h("a", { href: `#/fires/${enc(s.id)}` }, s.name), " ", h("small", {}, s.id)))));
    } catch (err) {
      main.append(errorBox(err));
    }
    return null;
  }
  const caps = await capabilities();
  let s;
  try {
    s = await api("GET", `/v1/schedules/${enc(id)}`);
  } catch (err) {
    main.append(errorBox(err));
    return null;
  }
  if (gen !== generation) return null;
  const tbody = h("tbody", { id: "fire-rows" });
  const status = h("div", {});
  const memo = {};
  const load = async () => {
    try {
      const page = await api("GET", `/v1/schedules/${enc(id)}/fires?limit=25`);
      if (gen !== generation) return;
      status.replaceChildren();
      if (unchanged(memo, page)) return;
      tbody.replaceChildren(...page.items.map((f) => h("tr", { dataset: { fire: f.id, ...Object.fromEntries(STATES.map((k) => [k, f.counts[k]])) } },
        h("td", {}, local(f.fireTime), h("br"), h("small", {}, utc(f.fireTime)),
          f.jitter ? h("div", {}, h("small", { class: "jitter" }, `launch ${utc(f.launchAt)} (jitter +${f.jitter})`)) : null),
        h("td", {}, badge(f.decision), f.note ? h("div", {}, h("small", { class: "note" }, f.note)) : null, fireDeadline(f)),
        h("td", { class: "num" }, f.n, f.emitting ? h("div", {}, h("small", {}, `emitting: ${f.emitted || 0}`)) : null),
        h("td", {}, countsBar(f), h("div", { class: "counts" }, STATES.map((k) => `${k} ${f.counts[k]}`).join(" · "))),
        h("td", {}, windowBar(s, f)),
        h("td", {}, h("a", { href: `#/events?fireId=${enc(f.id)}` }, "events"), " ",
          caps.cancelFire && f.counts.waiting + f.counts.retrying > 0 ? h("button", {
            type: "button", class: "danger", dataset: { cancel: f.id },
            onclick: async () => {
              if (!(await confirmAction(`Cancel the waiting events of the fire at ${utc(f.fireTime)}? Events in flight finish.`))) return;
              try { await api("POST", `/v1/fires/${enc(f.id)}/cancel`); load(); } catch (err) { toast(problemText(err)); }
            },
          }, "Cancel waiting") : null))));
      if (!page.items.length) tbody.append(h("tr", {}, h("td", { colspan: 6, class: "muted" }, "No fires yet.")));
    } catch (err) {
      status.replaceChildren(errorBox(err));
    }
  };
  main.append(h("p", {}, h("a", { href: `#/schedules/${enc(id)}` }, s.name), " ", h("small", {}, cronWords(s)),
    " · overlap ", h("strong", {}, s.overlap)),
  legend(), status,
  h("table", { "aria-label": "Fires" }, h("thead", {}, h("tr", {}, ["Fire time (local / UTC)", "Decision", "Events", "Counts", "Window", ""].map((t) => h("th", { scope: "col" }, t)))), tbody));
  await load();
  return load;
}

// ---------- events ----------

const EVENT_STATUSES = ["", "pending", "scheduled", "delivering", "delivered", "released", "retrying", "dead", "cancelled", "expired"];

function toRFC3339(v) {
  return v ? new Date(v).toISOString() : "";
}

async function pageEvents(main, params) {
  const gen = generation;
  const caps = await capabilities();
  const filters = Object.fromEntries(["status", "scheduleId", "fireId", "from", "to", "cursor"].map((k) => [k, params.get(k) || ""]));
  const f = {
    status: h("select", { name: "status" }, EVENT_STATUSES.map((v) => h("option", { value: v, selected: v === filters.status }, v || "any"))),
    scheduleId: h("input", { name: "scheduleId", value: filters.scheduleId }),
    fireId: h("input", { name: "fireId", value: filters.fireId }),
    from: h("input", { name: "from", type: "datetime-local", step: 1, value: filters.from ? filters.from.slice(0, 19) : "" }),
    to: h("input", { name: "to", type: "datetime-local", step: 1, value: filters.to ? filters.to.slice(0, 19) : "" }),
  };
  const tbody = h("tbody", { id: "event-rows" });
  const detail = h("section", { id: "event-detail", "aria-live": "polite" });
  const status = h("div", {});
  const more = h("div", {});
  const selected = new Set();
  const redriveSel = h("button", { type: "button", id: "redrive-selected", disabled: true }, "Redrive selected");
  const showDetail = async (id) => {
    try {
      const e = await api("GET", `/v1/events/${enc(id)}`);
      detail.replaceChildren(h("h2", {}, "Event ", h("code", {}, e.id)), h("dl", { class: "kv" },
        h("dt", {}, "status"), h("dd", {}, badge(e.status)),
        h("dt", {}, "attempts"), h("dd", { id: "event-attempts" }, `${e.attempts} of ${e.maxAttempts}`),
        h("dt", {}, "last error"), h("dd", { id: "event-last-error" }, e.lastError || h("span", { class: "muted" }, "none")),
        h("dt", {}, "launch"), h("dd", {}, `${local(e.launchAt)} (${utc(e.launchAt)})`),
        h("dt", {}, "delivered"), h("dd", {}, e.deliveredAt ? utc(e.deliveredAt) : "—"),
        h("dt", {}, "finished"), h("dd", {}, e.finishedAt ? utc(e.finishedAt) : "—"),
        h("dt", {}, "token"), h("dd", {}, e.tokenTimedOut ? "timed out (not released in time)" : e.tokenExpiresAt ? `expires ${utc(e.tokenExpiresAt)}` : "—"),
        h("dt", {}, "fire"), h("dd", {}, h("a", { href: `#/events?fireId=${enc(e.fireId)}` }, e.fireId), ` (event ${e.index + 1} of ${e.count})`),
        h("dt", {}, "target"), h("dd", {}, e.target.url || e.target.queueUrl)),
      ...(e.payload !== undefined && e.payload !== null ? [h("pre", {}, JSON.stringify(e.payload, null, 2))] : []));
    } catch (err) {
      detail.replaceChildren(errorBox(err));
    }
  };
  const memo = {};
  const load = async () => {
    try {
      const page = await api("GET", "/v1/events" + query({ limit: 100, ...filters }));
      if (gen !== generation) return;
      status.replaceChildren();
      if (unchanged(memo, page)) return;
      const present = new Set(page.items.map((e) => e.id));
      for (const id of [...selected]) if (!present.has(id)) selected.delete(id);
      redriveSel.disabled = selected.size === 0;
      tbody.replaceChildren(...page.items.map((e) => h("tr", { dataset: { id: e.id, status: e.status } },
        h("td", {}, e.status === "dead" ? h("input", {
          type: "checkbox", "aria-label": `select ${e.id}`, checked: selected.has(e.id), dataset: { select: e.id },
          onchange: (ev) => { ev.target.checked ? selected.add(e.id) : selected.delete(e.id); redriveSel.disabled = selected.size === 0; },
        }) : null),
        h("td", {}, h("button", { type: "button", class: "link", onclick: () => showDetail(e.id) }, e.id)),
        h("td", {}, badge(e.status)),
        h("td", { class: "num" }, `${e.attempts}/${e.maxAttempts}`),
        h("td", {}, local(e.launchAt), h("br"), h("small", {}, utc(e.launchAt))),
        h("td", {}, h("small", {}, e.lastError || "")))));
      if (!page.items.length) tbody.append(h("tr", {}, h("td", { colspan: 6, class: "muted" }, "No events match.")));
      more.replaceChildren(page.nextCursor ? h("a", { href: "#/events" + query({ ...filters, cursor: page.nextCursor }) }, "Next page →") : "");
    } catch (err) {
      status.replaceChildren(errorBox(err));
    }
  };
  redriveSel.addEventListener("click", async () => {
    const list = [...selected];
    if (!(await confirmAction(`Redrive ${list.length} dead event(s)? They are sent again with their attempts reset.`))) return;
    let ok = 0;
    const failed = [];
    for (const id of list) {
      try { await api("POST", `/v1/events/${enc(id)}/redrive`); ok++; selected.delete(id); } catch (err) { failed.push(`${id}: ${problemText(err)}`); }
    }
    toast(`Redriven: ${ok}${failed.length ? `; failed: ${failed.length}` : ""}`);
    if (failed.length) status.replaceChildren(h("p", { class: "error", role: "alert" }, failed.join("; ")));
    load();
  });
  const selectAll = h("button", {
    type: "button", id: "select-dead",
    onclick: () => {
      for (const cb of tbody.querySelectorAll("input[data-select]")) { cb.checked = true; selected.add(cb.dataset.select); }
      redriveSel.disabled = selected.size === 0;
    },
  }, "Select all dead on this page");
  let bulk = null;
  if (caps.bulkRedrive) {
    bulk = h("button", {
      type: "button", id: "redrive-matching", class: "danger",
      onclick: async () => {
        const body = {};
        for (const k of ["scheduleId", "fireId", "from", "to"]) if (filters[k]) body[k] = filters[k];
        const scope = Object.keys(body).length ? Object.entries(body).map(([k, v]) => `${k} ${v}`).join(", ") : "ALL of the tenant's dead events";
        if (!Object.keys(body).length) body.all = true;
        if (!(await confirmAction(`Redrive every dead event matching: ${scope}?`))) return;
        try {
          const r = await api("POST", "/v1/events/redrive", body);
          toast(`Redriven: ${r.count}${r.more ? " (more match: run it again)" : ""}`);
          load();
        } catch (err) { toast(problemText(err)); }
      },
    }, "Redrive all matching dead events");
  }
  main.append(h("h1", {}, "Events"),
    h("form", {
      class: "bar", role: "search",
      onsubmit: (e) => {
        e.preventDefault();
        location.hash = "#/events" + query({
          status: f.status.value, scheduleId: f.scheduleId.value.trim(), fireId: f.fireId.value.trim(),
          from: toRFC3339(f.from.value), to: toRFC3339(f.to.value),
        });
      },
    }, field("Status", f.status), field("Schedule id", f.scheduleId), field("Fire id", f.fireId),
    field("Launch from", f.from), field("Launch before", f.to), h("button", { type: "submit" }, "Filter"),
    h("a", { href: "#/events?status=dead", id: "dead-letters" }, "Dead letters")),
    filters.status === "dead" ? h("div", { class: "actions", id: "dead-actions" }, selectAll, redriveSel, bulk,
      caps.bulkRedrive ? null : h("small", { class: "muted", id: "bulk-unavailable" }, "Redrive by filter is not available on this server; selected events are redriven one by one.")) : null,
    status,
    h("table", { "aria-label": "Events" }, h("thead", {}, h("tr", {}, ["", "Event", "Status", "Attempts", "Launch (local / UTC)", "Last error"].map((t) => h("th", { scope: "col" }, t)))), tbody),
    more, detail);
  await load();
  return load;
}

// ---------- policies ----------

// limitSourceText says in words where a policy's effective limit comes from.
const limitSourceText = (src) => src === "hold" ? "held by its consumer" : src === "adaptive" ? "adaptive"
  : src && src.startsWith("limits[") ? `time-of-day rule ${src.slice(7, -1)}` : "maxInFlight";

// effectiveLimitCell shows the limit a policy applies now and why: its
// maxInFlight, adaptive limit, limit schedule rule or its consumer's hold.
function effectiveLimitCell(p) {
  const limit = p.effectiveLimit ?? p.maxInFlight;
  const src = p.limitSource || "policy";
  return h("td", { class: "effective-limit", dataset: { limit, source: src } },
    h("strong", {}, String(limit)), " ", h("small", {}, limitSourceText(src)),
    p.hold ? h("small", { class: "hold" }, h("br"), `until ${new Date(p.hold.until).toISOString()}`) : "");
}

async function pagePolicies(main) {
  const gen = generation;
  const tbody = h("tbody", { id: "policy-rows" });
  const status = h("div", {});
  const memo = {};
  const load = async () => {
    try {
      const page = await api("GET", "/v1/policies");
      if (gen !== generation) return;
      status.replaceChildren();
      if (unchanged(memo, page)) return;
      tbody.replaceChildren(...page.items.map((p) => h("tr", { dataset: { id: p.id, inUse: p.tokensInUse, waiting: p.waiting } },
        h("td", {}, p.name, h("br"), h("small", {}, p.id)),
        h("td", {}, h("meter", { min: 0, max: p.maxInFlight, value: p.tokensInUse, "aria-label": `${p.name} tokens in use` }),
          " ", `${p.tokensInUse} / ${p.maxInFlight}`),
        effectiveLimitCell(p),
        h("td", { class: "num" }, p.waiting),
        h("td", { class: "num" }, p.tokenTimeouts),
        h("td", {}, p.tokenTimeout, p.autoRelease ? " (auto release)" : ""),
        h("td", {}, labelChips(p.labels)))));
      if (!page.items.length) tbody.append(h("tr", {}, h("td", { colspan: 7, class: "muted" }, "No policies.")));
    } catch (err) {
      status.replaceChildren(errorBox(err));
    }
  };
  main.append(h("h1", {}, "Policies"), status,
    h("table", { "aria-label": "Policies" }, h("thead", {}, h("tr", {}, ["Policy", "Tokens in use / maxInFlight", "Effective limit", "Waiting", "Token timeouts", "Token timeout", "Labels"].map((t) => h("th", { scope: "col" }, t)))), tbody));
  await load();
  return load;
}

// ---------- calendars ----------

const weeklyText = (w) => `${w.days.join(", ")}: ${w.from || w.to ? `${w.from || "00:00"}–${w.to || "24:00"}` : "all day"}`;

async function pageCalendars(main) {
  const gen = generation;
  const tbody = h("tbody", { id: "calendar-rows" });
  const status = h("div", {});
  const memo = {};
  const load = async () => {
    try {
      const page = await api("GET", "/v1/calendars?limit=1000");
      if (gen !== generation) return;
      status.replaceChildren();
      if (unchanged(memo, page)) return;
      tbody.replaceChildren(...page.items.map((c) => h("tr", { dataset: { id: c.id } },
        h("td", {}, h("a", { href: `#/calendars/${enc(c.id)}` }, c.name), h("br"), h("small", {}, c.id)),
        h("td", {}, c.timezone),
        h("td", { class: "num" }, c.dates.length), h("td", { class: "num" }, c.ranges.length),
        h("td", {}, c.weekly.map(weeklyText).join("; ") || "—"))));
      if (!page.items.length) tbody.append(h("tr", {}, h("td", { colspan: 5, class: "muted" }, "No calendars.")));
    } catch (err) {
      status.replaceChildren(errorBox(err));
    }
  };
  main.append(h("h1", {}, "Calendars"),
    h("p", { class: "muted" }, "Times in which the schedules that name a calendar (excludeCalendars) do not fire, judged in the calendar's own time zone."),
    h("details", {}, h("summary", {}, "New calendar"), calendarForm(load)), status,
    h("table", { "aria-label": "Calendars" }, h("thead", {}, h("tr", {},
      ["Calendar", "Time zone", "Dates", "Ranges", "Weekly"].map((t) => h("th", { scope: "col" }, t)))), tbody));
  await load();
  return load;
}

function calendarForm(onCreated) {
  const f = {
    name: h("input", { name: "name", required: true }),
    timezone: h("input", { name: "timezone", required: true, value: Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC" }),
    dates: h("input", { name: "dates", placeholder: "2027-12-25, 2027-12-26" }),
    days: h("input", { name: "weekly", placeholder: "sat, sun" }),
  };
  const msg = h("div", { class: "span" });
  const form = h("form", {
    class: "grid", id: "new-calendar",
    onsubmit: async (e) => {
      e.preventDefault();
      msg.replaceChildren();
      for (const el of form.querySelectorAll("[aria-invalid]")) el.removeAttribute("aria-invalid");
      const list = (v) => v.split(",").map((x) => x.trim()).filter(Boolean);
      const body = { name: f.name.value, timezone: f.timezone.value, dates: list(f.dates.value) };
      if (list(f.days.value).length) body.weekly = [{ days: list(f.days.value) }];
      try {
        const c = await api("POST", "/v1/calendars", body, { headers: { "Idempotency-Key": crypto.randomUUID() } });
        toast(`Created ${c.name}`);
        form.reset();
        onCreated(c);
      } catch (err) {
        for (const fe of (err.problem && err.problem.errors) || []) {
          const el = form.querySelector(`[name="${CSS.escape(fe.field.replace(/\[.*$/, ""))}"]`);
          if (el) el.setAttribute("aria-invalid", "true");
        }
        msg.append(errorBox(err));
      }
    },
  }, field("Name", f.name), field("Time zone", f.timezone), field("Excluded dates", f.dates),
  field("Excluded weekdays (all day)", f.days),
  h("div", {}, h("button", { type: "submit", class: "primary", id: "create-calendar" }, "Create calendar")), msg);
  return form;
}

async function pageCalendar(main, id) {
  let c;
  try {
    c = await api("GET", `/v1/calendars/${enc(id)}`);
  } catch (err) {
    main.append(h("h1", {}, "Calendar"), errorBox(err));
    return null;
  }
  const del = h("button", { type: "button", class: "danger", id: "delete-calendar", onclick: async () => {
    if (!(await confirmAction(`Delete the calendar ${c.name}? Refused while a schedule names it.`))) return;
    try {
      await api("DELETE", `/v1/calendars/${enc(id)}`);
      toast(`Deleted ${c.name}`);
      location.hash = "#/calendars";
    } catch (err) {
      main.append(errorBox(err));
    }
  } }, "Delete");
  const items = (xs, text) => (xs.length ? h("ul", {}, xs.map((x) => h("li", {}, text(x)))) : h("span", { class: "muted" }, "none"));
  main.append(h("h1", {}, c.name), h("div", { class: "bar" }, del),
    h("dl", { class: "kv", id: "calendar-rules" },
      h("dt", {}, "id"), h("dd", {}, c.id),
      h("dt", {}, "time zone"), h("dd", {}, c.timezone),
      h("dt", {}, "dates"), h("dd", { id: "calendar-dates" }, items(c.dates, (d) => d)),
      h("dt", {}, "ranges"), h("dd", {}, items(c.ranges, (r) => `${r.from} – ${r.to}`)),
      h("dt", {}, "weekly"), h("dd", { id: "calendar-weekly" }, items(c.weekly, weeklyText)),
      h("dt", {}, "version"), h("dd", {}, c.version)),
    h("p", { class: "muted" }, "An edit applies from the next window the emitter has not emitted yet."));
  return null;
}

// ---------- health ----------

const SERIES_MAX = 150; // five minutes at one sample per 2 s
const health = { samples: [], last: null };

function sparkline(points, label) {
  const w = 600, ht = 80;
  const max = Math.max(1e-9, ...points.flat().filter(Number.isFinite));
  const path = (vals) => vals.map((v, i) => `${i ? "L" : "M"}${(w * i) / Math.max(1, SERIES_MAX - 1)},${ht - (ht - 6) * (v / max) - 3}`).join(" ");
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("class", "chart");
  svg.setAttribute("viewBox", `0 0 ${w} ${ht}`);
  svg.setAttribute("preserveAspectRatio", "none");
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", label);
  const colours = ["#2456c8", "#e0a526", "#c8323c"];
  const lines = points.length && Array.isArray(points[0]) ? points[0].map((_, j) => points.map((p) => p[j])) : [points];
  lines.forEach((vals, j) => {
    const p = document.createElementNS("http://www.w3.org/2000/svg", "path");
    p.setAttribute("d", path(vals.map((v) => (Number.isFinite(v) ? v : 0))));
    p.setAttribute("fill", "none");
    p.setAttribute("stroke", colours[j % colours.length]);
    p.setAttribute("stroke-width", "2");
    p.setAttribute("vector-effect", "non-scaling-stroke");
    svg.append(p);
  });
  return svg;
}

// metricsSample reads the whole instance's counters and the lateness
// histogram from /metrics, for servers without GET /v1/summary.
async function metricsSample() {
  const r = await fetch("/metrics");
  if (!r.ok) throw new Error(`/metrics answered ${r.status}`);
  const text = await r.text();
  const sum = (name) => text.split("\n").filter((l) => l.startsWith(name + " ") || l.startsWith(name + "{"))
    .reduce((a, l) => a + Number(l.slice(l.lastIndexOf(" ") + 1)), 0);
  const buckets = new Map();
  for (const l of text.split("\n")) {
    const m = l.match(/^schedulerd_delivery_lateness_seconds_bucket\{.*le="([^"]+)".*\} (\S+)$/);
    if (m) buckets.set(m[1] === "+Inf" ? Infinity : Number(m[1]), (buckets.get(m[1] === "+Inf" ? Infinity : Number(m[1])) || 0) + Number(m[2]));
  }
  return { delivered: sum("schedulerd_events_delivered_total"), dead: sum("schedulerd_events_dead_total"), buckets };
}

function quantile(buckets, prev, q) {
  const les = [...buckets.keys()].sort((a, b) => a - b);
  const counts = les.map((le) => buckets.get(le) - ((prev && prev.get(le)) || 0));
  const total = counts[counts.length - 1] || 0;
  if (!total) return NaN;
  const rank = q * total;
  for (let i = 0; i < les.length; i++) if (counts[i] >= rank) return Number.isFinite(les[i]) ? les[i] : les[i - 1];
  return NaN;
}

async function pageHealth(main) {
  const gen = generation;
  const caps = await capabilities();
  const cards = h("div", { class: "cards", id: "health-cards" });
  const charts = h("div", { id: "health-charts" });
  const status = h("div", {});
  const source = caps.summary ? "GET /v1/summary (this tenant)" : "/metrics (the whole instance: GET /v1/summary is not available on this server)";
  const load = async () => {
    try {
      const now = Date.now();
      let sample;
      if (caps.summary) {
        const s = await api("GET", "/v1/summary");
        const finished = s.counts.delivered + s.counts.released;
        sample = { t: now, finished, dead: s.counts.dead, p: [s.lateness.p50, s.lateness.p90, s.lateness.p99], summary: s };
      } else {
        const m = await metricsSample();
        sample = { t: now, finished: m.delivered, dead: m.dead, buckets: m.buckets,
          p: [0.5, 0.9, 0.99].map((q) => quantile(m.buckets, null, q)) };
      }
      if (gen !== generation) return;
      const prev = health.last;
      sample.rate = prev ? Math.max(0, (sample.finished - prev.finished) / ((now - prev.t) / 1000)) : 0;
      sample.deadPerMin = prev ? Math.max(0, ((sample.dead - prev.dead) * 60000) / (now - prev.t)) : 0;
      health.last = sample;
      health.samples.push(sample);
      if (health.samples.length > SERIES_MAX) health.samples.shift();
      const fmt = (v) => (Number.isFinite(v) ? `${v.toFixed(v < 10 ? 2 : 0)} s` : "—");
      const s = sample.summary;
      cards.replaceChildren(...[
        h("div", { class: "card" }, h("div", { class: "muted" }, "Lateness p50 / p90 / p99"), h("div", { class: "big", id: "lateness" }, sample.p.map(fmt).join(" / "))),
        h("div", { class: "card" }, h("div", { class: "muted" }, "Deliveries per second"), h("div", { class: "big", id: "rate" }, sample.rate.toFixed(1))),
        h("div", { class: "card" }, h("div", { class: "muted" }, "Dead per minute"), h("div", { class: "big", id: "dead-rate" }, sample.deadPerMin.toFixed(1))),
        s ? h("div", { class: "card" }, h("div", { class: "muted" }, "Events now"), h("div", {}, STATES.map((k) => `${k} ${s.counts[k] ?? 0}`).join(" · "))) : null,
        s ? h("div", { class: "card" }, h("div", { class: "muted" }, "Schedules"), h("div", {}, `${s.schedules.active} active · ${s.schedules.paused} paused`)) : null,
      ].filter(Boolean));
      const xs = health.samples;
      charts.dataset.samples = xs.length;
      charts.replaceChildren(
        h("h2", {}, `Lateness${caps.summary ? "" : " since the process started"} (p50 blue, p90 amber, p99 red)`), sparkline(xs.map((x) => x.p), "lateness percentiles over time"),
        h("h2", {}, "Deliveries per second"), sparkline(xs.map((x) => x.rate), "deliveries per second over time"),
        h("h2", {}, "Dead per minute"), sparkline(xs.map((x) => x.deadPerMin), "dead events per minute over time"));
      status.replaceChildren();
    } catch (err) {
      status.replaceChildren(errorBox(err));
    }
  };
  main.append(h("h1", {}, "Health"), h("p", { class: "muted" }, `Sampled every 2 s from ${source}; the last five minutes.`), status, cards, charts);
  await load();
  return load;
}

// ---------- routing ----------

async function route() {
  generation++;
  const gen = generation;
  refresh = null;
  const [path, qs] = (location.hash.slice(1) || "/schedules").split("?");
  const params = new URLSearchParams(qs || "");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  const main = document.getElementById("main");
  main.replaceChildren();
  await renderHeader();
  if (gen !== generation) return;
  if (!state.key && !state.admin) parts.splice(0, parts.length, "signin");
  else if (!state.key && parts[0] !== "signin") parts.splice(0, parts.length, "tenants");
  for (const a of document.querySelectorAll("#nav a")) {
    if (a.getAttribute("href") === `#/${parts[0]}`) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  const pages = {
    signin: () => pageSignIn(main),
    tenants: () => pageTenants(main),
    schedules: () => (parts[1] ? pageSchedule(main, parts[1]) : pageSchedules(main, params)),
    fires: () => pageFires(main, parts[1]),
    events: () => pageEvents(main, params),
    policies: () => pagePolicies(main),
    calendars: () => (parts[1] ? pageCalendar(main, parts[1]) : pageCalendars(main)),
    health: () => pageHealth(main),
    audit: () => pageAudit(main, params),
  };
  const page = pages[parts[0]] || pages.schedules;
  const poll = await page();
  if (gen === generation) {
    refresh = poll || null;
    document.body.dataset.page = parts[0];
    document.body.dataset.ready = String(gen);
  }
}

function poll() {
  if (document.visibilityState === "visible" && refresh && !document.getElementById("confirm").open) refresh();
}

document.getElementById("signout").addEventListener("click", () => signOut("Signed out."));
window.addEventListener("hashchange", route);
setInterval(poll, POLL_MS);
route();
