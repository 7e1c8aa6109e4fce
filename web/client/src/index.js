/*
 * @surfaced/client — the framework-agnostic browser client for a surfaced daemon.
 *
 * One source, two forms: this ES module is the npm package (`import {Client} from "@surfaced/client"`,
 * types in index.d.ts), and web/scripts/build.mjs bundles it with global.js into the classic script
 * the daemon serves as /surfaced.js, which defines `window.Surfaced` with the same names. No runtime
 * dependencies. The web UI served at "/" is built on it; any other page (React, Vue, plain DOM) can
 * use it too.
 *
 * Client (HTTP; the cookie of the start URL on the daemon's own origin, or a bearer token):
 *   const client = new Surfaced.Client({base = "", token?, fetch = window.fetch, EventSource = window.EventSource,
 *                                       XMLHttpRequest = window.XMLHttpRequest, withCredentials = false})
 *     token: sent as "Authorization: Bearer"; the session stream is then read with fetch (an
 *     EventSource cannot send headers) unless an EventSource is given.
 *   client.agents()                        → Promise<[{name, title, description}]>
 *   client.sessions()                      → Promise<[{sessionId, agent, title, status, createdAt, updatedAt}]> (all pages)
 *   client.sessionsPage({cursor, limit})   → Promise<{sessions, nextCursor?}>
 *   client.createSession({agent, cwd, title}) → Promise<{sessionId}>
 *   client.session(id)                     → Surfaced.Session
 *   Every method except Session.run rejects with a Surfaced.Error {code, message, status, fields?}.
 *
 * Session:
 *   session.subscribe(handlers, {lastEventId?}) → subscription {close()}
 *     Opens an EventSource on /api/sessions/{id}/events. handlers (all optional):
 *       open(), reconnecting(), state(frame, applied), session(frame), chat(chunk), uiRequest(req),
 *       artifact({event, artifact}), diagnostic(d), resync(d), end(d), error({code, message, fatal}),
 *       frame(kind, data, id)
 *     Resume: the browser resends Last-Event-ID itself when it reconnects on its own; when the stream
 *     is closed for good (an HTTP error, end{reason:"slow_consumer"}, or end{reason:"moved"}: the
 *     session went to another node of a cluster) the library reopens it with
 *     ?lastEventId=<last id seen>, with backoff. After any other `end` the stream stays closed; the
 *     next prompt/run/answer wakes it (resuming from the last id) unless the reason was "stopped",
 *     "crashed" or "deleted" (the session ended) or "revoked". A stream that cannot be reopened
 *     because the session ended gets the summary as a `session` frame, then end({reason:"stopped"}).
 *     A `resync` frame clears the state map; the sticky frames that follow rebuild it.
 *   session.lastEventId                    the id of the last frame seen ("<epoch>-<seq>")
 *   session.status                         the last `session` frame ({status, busy, queued, title, ...}),
 *       or the summary that told the client the session had ended (a stream it could not reopen)
 *   session.ended                          true once the session is known to have ended: a `session`
 *       frame or the summary said status "ended", or an `end` frame said stopped, crashed or
 *       deleted. It stays true: an ended session never takes commands or prompts again.
 *   session.onStatus(cb)                   cb(frame) on every `session` frame; → unsubscribe
 *   session.state(key)                     → {value, rev} | undefined (a deleted key is undefined)
 *   session.store                          the Surfaced.StateStore (rev(key) also knows tombstones)
 *   session.onState(key, cb)               cb(entry|undefined, key) on every applied change; → unsubscribe
 *   session.onAnyState(cb)                 cb(key, entry|undefined); → unsubscribe
 *   session.surface(domain)                → {domain, state, rev, available, known, commands, hosted}
 *       state: the `surface:<domain>` snapshot or null; rev: its rev or -1; available: the domain is
 *       listed (by the last `session` frame, or GET /api/sessions/{id}/surfaces) as taking commands
 *       now, and the session has not ended: once session.ended, every domain is read-only, whatever
 *       a frame or a list answered before said; known: the list has been loaded at least once.
 *   session.surfaces()                     → the last list [{domain, commands, hosted, rev?, available}]
 *   session.refreshSurfaces()              → Promise<list>; also done on subscribe, after a resync,
 *       and when a snapshot of an unlisted domain arrives (every `session` frame carries the list;
 *       an answer to a request sent before the last such frame is older than it and is dropped)
 *   session.onSurfaces(cb)                 cb(list) after every change of the list; → unsubscribe
 *   session.pendingDialogs()               → unanswered ui-request dialogs, in arrival order
 *   session.run(domain, action, args)      → Promise<{ok:true, data?} | {ok:false, error:{code, message}}>
 *       never rejects: a network failure is {ok:false, error:{code:"send_failed", message}}, an HTTP
 *       error answer is {ok:false, error:<its error object>}
 *   session.prompt(text, {images, attachmentIds}) → Promise<{accepted, queued}>
 *   session.abort()                        → Promise
 *   session.setPref(key, value)            → Promise<{ok, rev}>   (POST /state; key "<ns>.<pref>")
 *   session.deletePref(key)                → Promise<{ok, rev}>
 *   session.answer(uiRequestId, {value} | {confirmed} | {cancelled:true}) → Promise (POST /ui-response)
 *   session.messages()                     → Promise<[{role, text?, toolCallId?, ..., turnId, at}]>
 *   session.summary(), session.getState(), session.end() (DELETE), session.close() (stop streaming)
 *
 * The conversation bridge: session.bridge(domain, {conversation = true}) → Surfaced.Bridge
 *   conversation: true (ops go out as POST …/prompt), false (no conversation: mode "command" at
 *   best), or a function (text, {attachmentIds}) → Promise that sends the op as a user message
 *   through the page's own chat (e.g. useChat's sendMessage), so that the chat shows it
 *   bridge.mode        "prompt": the domain takes commands and the session takes prompts;
 *                      "command": the domain takes commands, the conversation is not available (the
 *                      bridge was made with conversation:false);
 *                      "unavailable": the domain is not registered, its agent is down, or the
 *                      session ended. A panel shows that it is read-only then, instead of failing.
 *   bridge.available   mode !== "unavailable"
 *   bridge.run(action, args)               → session.run(domain, action, args) (the control plane)
 *   bridge.prompt(op, {attachmentIds?})    renders the surface-op (renderSurfaceOp) and sends it as a
 *       user message, so it is in the history and later turns can refer to it. Never rejects:
 *       → {ok:true, channel:"prompt", accepted, queued}
 *       | {ok:true, channel:"command", result}   (mode "command" and op.fallback {action, args?})
 *       | {ok:false, error:{code:"unavailable"|"no_fallback"|<the HTTP error's code>, message}}
 *   bridge.onChange(cb)                    cb(bridge) when the mode may have changed; → unsubscribe
 *
 * Artifacts (large bytes by reference): session.artifacts → Surfaced.Artifacts
 *   artifacts.upload(file, {name?, mediaType?, derivedFrom?, meta?, onProgress?, signal?})
 *       → Promise<{artifact, url}>; file is a Blob/File (or bytes with mediaType). With
 *       XMLHttpRequest (browsers) onProgress({loaded, total}) follows the upload; otherwise fetch.
 *       Rejects with a Surfaced.Error (413 too_large, quota_exceeded, 409 session_ended, ...).
 *   artifacts.list({mediaType?, cursor?, limit?}) → Promise<{artifacts, nextCursor?}> newest first
 *   artifacts.listAll({mediaType?})        → Promise<[artifact]> (every page)
 *   artifacts.get(id)                      → Promise<{artifact, url}>
 *   artifacts.url(id)                      → Promise<string>: a signed URL (absolute when base is),
 *       cached until a minute before it expires; usable without a credential (<img src>, links)
 *   artifacts.contentUrl(id)               → the unsigned content URL (needs the cookie or token)
 *   artifacts.delete(id)                   → Promise<{ok:true}>
 *   artifacts.on(cb)                       cb({event:"added"|"deleted", artifact}) for every
 *       `artifact` frame of the session stream; → unsubscribe
 *
 * Surfaced.StateStore: apply({key, value?, rev, deleted?}) → bool. A frame whose rev is not above the
 *   known rev of its key is dropped; a delete keeps a tombstone {deleted:true, rev}, so a late frame
 *   with a lower rev never brings the key back. reset() forgets everything (used on resync).
 *
 * Surfaced.ChatAssembler: apply(chunk) turns AI SDK v5 UI message chunks into messages:
 *   {id, role:"user", promptId, text, via, queued, images, turnId?}
 *   {id, role:"assistant", turnId, promptIds, status:"streaming"|"done"|"error"|"aborted",
 *    stopReason?, error?, startSeen, parts:[
 *      {type:"text"|"reasoning", id, text, state:"streaming"|"done"},
 *      {type:"tool", toolCallId, toolName, input, output, preliminary, errorText,
 *       state:"input-streaming"|"input-available"|"output-available"|"output-error"}]}
 *   liveTurnIds() → Set of turn ids seen live; hasPrompt(promptId); message(id); userMessage(promptId);
 *   remove(id); clear().
 *   apply returns {message, unseenStart}: unseenStart is true when a `finish` closes a turn whose
 *   `start` this assembler never saw (a stream joined mid-turn); the caller should reload history.
 *
 * Surfaced.renderSurfaceOp({title, tool, params:[[k, v], ...], fence}) → string, byte-identical to the
 *   Go function surface.RenderOp:  <title>\n\n```<fence>\ntool: <tool>\n<k1>: <v1>\n...\n```
 *   Params in order; a param whose value is undefined, null or "" is skipped; fence defaults to
 *   "surface-op"; no trailing newline; no escaping or trimming.
 */


// The page's globals (a test may give the classic script a fake window).
const root = typeof window !== "undefined" ? window : globalThis;

const DEFAULT_FENCE = "surface-op";
const SURFACE_PREFIX = "surface:";
const FRAME_KINDS = ["state", "chat", "session", "ui-request", "artifact", "diagnostic", "resync", "end"];
const DIALOG_METHODS = new Set(["select", "confirm", "input", "editor"]);
// Reasons after which the server will not serve this session to this client again.
const FINAL_END_REASONS = new Set(["stopped", "crashed", "deleted", "revoked"]);
// Reasons that say the session itself ended (for every client).
const ENDED_REASONS = new Set(["stopped", "crashed", "deleted"]);
const REOPEN_MIN_MS = 500;
const REOPEN_MAX_MS = 15000;

function renderSurfaceOp(op) {
  const o = op || {};
  const lines = ["tool: " + str(o.tool)];
  const params = o.params || [];
  for (let i = 0; i < params.length; i++) {
    const k = params[i][0];
    const v = params[i][1];
    if (v === undefined || v === null || v === "") continue;
    lines.push(str(k) + ": " + String(v));
  }
  const fence = o.fence === undefined || o.fence === null || o.fence === "" ? DEFAULT_FENCE : String(o.fence);
  return str(o.title) + "\n\n```" + fence + "\n" + lines.join("\n") + "\n```";
}

function str(v) {
  return v === undefined || v === null ? "" : String(v);
}

class SurfacedError extends Error {
  constructor(code, message, status, fields) {
    super(message || code);
    this.name = "SurfacedError";
    this.code = code;
    this.status = status || 0;
    if (fields) this.fields = fields;
  }
}

// ---------------------------------------------------------------- state store

class StateStore {
  constructor() {
    this._entries = new Map(); // key → {value, rev} | {deleted:true, rev}
    this._keyListeners = new Map(); // key → Set<cb(entry, key)>
    this._anyListeners = new Set(); // cb(key, entry)
  }

  // apply takes a `state` frame and reports whether it changed the view.
  apply(frame) {
    if (!frame || typeof frame.key !== "string" || frame.key === "") return false;
    const rev = frame.rev;
    if (typeof rev !== "number" || !Number.isFinite(rev)) return false;
    const cur = this._entries.get(frame.key);
    if (cur !== undefined && rev <= cur.rev) return false;
    const entry = frame.deleted ? { deleted: true, rev: rev } : { value: frame.value, rev: rev };
    this._entries.set(frame.key, entry);
    this._emit(frame.key);
    return true;
  }

  // get returns {value, rev} for a live key and undefined for a missing or deleted one.
  get(key) {
    const e = this._entries.get(key);
    if (e === undefined || e.deleted) return undefined;
    return { value: e.value, rev: e.rev };
  }

  // rev returns the highest rev known for key, tombstones included, or undefined.
  rev(key) {
    const e = this._entries.get(key);
    return e === undefined ? undefined : e.rev;
  }

  // entry returns the raw record, a tombstone included.
  entry(key) {
    const e = this._entries.get(key);
    return e === undefined ? undefined : Object.assign({}, e);
  }

  keys() {
    const out = [];
    for (const [k, e] of this._entries) if (!e.deleted) out.push(k);
    return out;
  }

  reset() {
    const keys = Array.from(this._entries.keys());
    this._entries.clear();
    for (const k of keys) this._emit(k);
  }

  on(key, cb) {
    let set = this._keyListeners.get(key);
    if (!set) this._keyListeners.set(key, (set = new Set()));
    set.add(cb);
    return () => {
      set.delete(cb);
      if (set.size === 0 && this._keyListeners.get(key) === set) this._keyListeners.delete(key);
    };
  }

  onAny(cb) {
    this._anyListeners.add(cb);
    return () => this._anyListeners.delete(cb);
  }

  _emit(key) {
    const entry = this.get(key);
    const set = this._keyListeners.get(key);
    if (set) for (const cb of Array.from(set)) safeCall(cb, entry, key);
    for (const cb of Array.from(this._anyListeners)) safeCall(cb, key, entry);
  }
}

function safeCall(fn) {
  if (typeof fn !== "function") return undefined;
  try {
    return fn.apply(undefined, Array.prototype.slice.call(arguments, 1));
  } catch (e) {
    // A broken listener must not stop the stream or the other listeners.
    if (root.console && root.console.error) root.console.error("surfaced: listener failed", e);
    return undefined;
  }
}

// ---------------------------------------------------------------- client

class Client {
  constructor(opts) {
    const o = opts || {};
    this.base = (o.base || "").replace(/\/+$/, "");
    const f = o.fetch || root.fetch;
    // window.fetch throws "Illegal invocation" when called as a method of another object.
    this._fetch = f ? (url, init) => f.call(root, url, init) : null;
    this.token = o.token || "";
    // An EventSource cannot send an Authorization header: with a token the stream is read with fetch.
    this._EventSource = o.EventSource || (this.token ? FetchEventSource.for(this) : root.EventSource || null);
    this._XHR = o.XMLHttpRequest === undefined ? root.XMLHttpRequest || null : o.XMLHttpRequest;
    this._setTimeout = o.setTimeout || ((fn, ms) => root.setTimeout(fn, ms));
    this._clearTimeout = o.clearTimeout || ((t) => root.clearTimeout(t));
    this.withCredentials = !!o.withCredentials;
  }

  async request(method, path, body) {
    if (!this._fetch) throw new SurfacedError("send_failed", "fetch is not available");
    const init = {
      method: method,
      headers: this._headers({ Accept: "application/json" }),
      credentials: this._credentials(),
    };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      try {
        init.body = JSON.stringify(body);
      } catch (e) {
        throw new SurfacedError("invalid_args", "the request body is not JSON-serializable: " + errText(e));
      }
    }
    return this._answer(await this._send(path, init));
  }

  // _headers adds the bearer token, if any, to h.
  _headers(h) {
    if (this.token) h.Authorization = "Bearer " + this.token;
    return h;
  }

  _credentials() {
    if (this.token) return "omit";
    return this.withCredentials ? "include" : "same-origin";
  }

  async _send(path, init) {
    try {
      return await this._fetch(this.base + path, init);
    } catch (e) {
      if (e && e.name === "AbortError") throw e;
      throw new SurfacedError("send_failed", "the request could not be sent: " + errText(e));
    }
  }

  // _answer reads a JSON answer: its value, or a SurfacedError from the API's error object.
  async _answer(res) {
    let text = "";
    try {
      text = await res.text();
    } catch (e) {
      throw new SurfacedError("send_failed", "the answer could not be read: " + errText(e), res.status);
    }
    let data;
    if (text !== "") {
      try {
        data = JSON.parse(text);
      } catch (e) {
        data = undefined;
      }
    }
    if (!res.ok) {
      const err = data && typeof data === "object" && data.error && typeof data.error === "object" ? data.error : null;
      throw new SurfacedError(
        (err && err.code) || "http_" + res.status,
        (err && err.message) || "the server answered " + res.status + (res.statusText ? " " + res.statusText : ""),
        res.status,
        err && err.fields
      );
    }
    if (text !== "" && data === undefined) {
      throw new SurfacedError("invalid_result", "the server answered something that is not JSON", res.status);
    }
    return data;
  }

  async agents() {
    const data = await this.request("GET", "/api/agents");
    return (data && data.agents) || [];
  }

  async sessionsPage(opts) {
    const o = opts || {};
    const q = [];
    if (o.cursor) q.push("cursor=" + encodeURIComponent(o.cursor));
    if (o.limit) q.push("limit=" + encodeURIComponent(o.limit));
    const data = await this.request("GET", "/api/sessions" + (q.length ? "?" + q.join("&") : ""));
    return { sessions: (data && data.sessions) || [], nextCursor: data && data.nextCursor };
  }

  async sessions() {
    const all = [];
    let cursor;
    // Bounded so a server that keeps answering the same cursor cannot loop forever.
    for (let page = 0; page < 50; page++) {
      const p = await this.sessionsPage({ cursor: cursor });
      all.push.apply(all, p.sessions);
      if (!p.nextCursor || p.nextCursor === cursor) break;
      cursor = p.nextCursor;
    }
    return all;
  }

  async createSession(opts) {
    const o = opts || {};
    const body = {};
    if (o.agent) body.agent = o.agent;
    if (o.cwd) body.cwd = o.cwd;
    if (o.title) body.title = o.title;
    return this.request("POST", "/api/sessions", body);
  }

  session(id) {
    return new Session(this, id);
  }
}

function errText(e) {
  return e && e.message ? e.message : String(e);
}

// ---------------------------------------------------------------- session

class Session {
  constructor(client, id) {
    this.client = client;
    this.id = id;
    this.store = new StateStore();
    this.status = undefined;
    this._ended = false;
    this.lastEventId = undefined;
    this._sub = null;
    this._surfaces = new Map(); // domain → {domain, commands, hosted, rev}
    this._surfacesLoaded = false;
    this._framesListed = 0; // `session` frames that listed the surfaces (a GET sent before one is stale)
    this._surfaceListeners = new Set();
    this._refreshing = null;
    this._refreshAgain = false;
    this._unknownChecked = new Set(); // unlisted domains already refreshed for since the last ready
    this._dialogs = new Map();
    this._statusListeners = new Set();
    this._artifacts = null;
  }

  _path(suffix) {
    return "/api/sessions/" + encodeURIComponent(this.id) + (suffix || "");
  }

  // ---- streaming

  subscribe(handlers, opts) {
    if (this._sub) this._sub.close();
    const o = opts || {};
    if (o.lastEventId) this.lastEventId = o.lastEventId;
    const sub = new Subscription(this, handlers || {});
    this._sub = sub;
    sub._open();
    this.refreshSurfaces();
    return sub;
  }

  close() {
    if (this._sub) this._sub.close();
    this._sub = null;
  }

  // _wake reopens a stream that the server ended (idle, shutdown) when the user acts
  // again: the action restarts the agent and its frames must reach this page.
  _wake() {
    const sub = this._sub;
    if (sub && sub.ended && !FINAL_END_REASONS.has(sub.endReason)) sub._reopen(0);
  }

  _dispatch(sub, kind, data, id) {
    const h = sub.handlers;
    switch (kind) {
      case "state": {
        const applied = this.store.apply(data);
        if (applied && typeof data.key === "string" && data.key.startsWith(SURFACE_PREFIX)) {
          const domain = data.key.slice(SURFACE_PREFIX.length);
          if (!this._surfaces.has(domain) && !this._unknownChecked.has(domain)) {
            this._unknownChecked.add(domain);
            this.refreshSurfaces();
          }
        }
        safeCall(h.state, data, applied);
        break;
      }
      case "session":
        this._applyStatus(data);
        safeCall(h.session, data);
        break;
      case "resync":
        this.store.reset();
        this._dialogs.clear();
        safeCall(h.resync, data);
        this.refreshSurfaces();
        break;
      case "chat":
        safeCall(h.chat, data);
        break;
      case "ui-request":
        if (data && data.id !== undefined) {
          if (data.resolved) this._dialogs.delete(data.id);
          else if (DIALOG_METHODS.has(data.method)) this._dialogs.set(data.id, data);
        }
        safeCall(h.uiRequest, data);
        break;
      case "artifact":
        if (this._artifacts) this._artifacts._frame(data);
        safeCall(h.artifact, data);
        break;
      case "diagnostic":
        safeCall(h.diagnostic, data);
        break;
      case "end":
        if (data && ENDED_REASONS.has(data.reason)) this._markEnded();
        sub._ended(data && data.reason);
        safeCall(h.end, data);
        break;
    }
    safeCall(h.frame, kind, data, id);
  }

  pendingDialogs() {
    return Array.from(this._dialogs.values());
  }

  // ---- state

  state(key) {
    return this.store.get(key);
  }

  onState(key, cb) {
    return this.store.on(key, cb);
  }

  onAnyState(cb) {
    return this.store.onAny(cb);
  }

  onStatus(cb) {
    this._statusListeners.add(cb);
    return () => this._statusListeners.delete(cb);
  }

  // ended: the session is over for good (see _markEnded). It never goes back.
  get ended() {
    return this._ended;
  }

  // _applyStatus takes a `session` frame (or a summary, which has the same fields): the status,
  // and the domains with their availability (an agent-hosted domain is unavailable while its agent
  // is down; none is available once the session ended).
  _applyStatus(data) {
    const wasReady = this.status && this.status.status === "ready";
    this.status = data;
    if (data && data.status === "ended") this._ended = true;
    if (data && Array.isArray(data.surfaces)) {
      this._framesListed++;
      this._setSurfaces(data.surfaces);
    } else if (data && data.status === "ready" && !wasReady) {
      // A server that does not list the surfaces in its frames.
      this._unknownChecked.clear();
      this.refreshSurfaces();
    } else if (this._ended) {
      this._notifySurfaces();
    }
    for (const cb of Array.from(this._statusListeners)) safeCall(cb, data);
  }

  // _markEnded: an `end` frame said the session ended. Its `session` frame came first on a server
  // that sends one; the rule holds without it too: every domain is read-only from now on.
  _markEnded() {
    if (this._ended) return;
    this._ended = true;
    this._notifySurfaces();
    for (const cb of Array.from(this._statusListeners)) safeCall(cb, this.status);
  }

  // ---- surfaces

  surface(domain) {
    const e = this.store.get(SURFACE_PREFIX + domain);
    const info = this._surfaces.get(domain);
    return {
      domain: domain,
      state: e ? e.value : null,
      rev: e ? e.rev : -1,
      available: !this._ended && !!info && info.available !== false,
      known: this._surfacesLoaded,
      commands: info && Array.isArray(info.commands) ? info.commands.slice() : [],
      hosted: info ? info.hosted : undefined,
    };
  }

  surfaces() {
    return Array.from(this._surfaces.values());
  }

  onSurfaces(cb) {
    this._surfaceListeners.add(cb);
    return () => this._surfaceListeners.delete(cb);
  }

  _setSurfaces(list) {
    const next = new Map();
    for (const s of list) if (s && typeof s.domain === "string") next.set(s.domain, s);
    this._surfaces = next;
    this._surfacesLoaded = true;
    this._notifySurfaces();
  }

  _notifySurfaces() {
    for (const cb of Array.from(this._surfaceListeners)) safeCall(cb, this.surfaces());
  }

  // refreshSurfaces reloads the registered domains. Calls that arrive while a load runs are folded
  // into one more load after it, so the list always reflects a request sent after the trigger.
  refreshSurfaces() {
    if (this._refreshing) {
      this._refreshAgain = true;
      return this._refreshing;
    }
    const run = async () => {
      try {
        do {
          this._refreshAgain = false;
          const framesBefore = this._framesListed;
          try {
            const data = await this.client.request("GET", this._path("/surfaces"));
            // A `session` frame that listed the surfaces after the request was sent is newer.
            if (this._framesListed === framesBefore) this._setSurfaces((data && Array.isArray(data.surfaces) && data.surfaces) || []);
          } catch (e) {
            // Keep the last list: a transient failure must not make every panel read-only.
            if (root.console && root.console.warn) root.console.warn("surfaced: listing surfaces failed", e);
          }
        } while (this._refreshAgain);
        return this.surfaces();
      } finally {
        this._refreshing = null;
      }
    };
    this._refreshing = run();
    return this._refreshing;
  }

  // bridge is the conversation bridge of a domain (see Bridge).
  bridge(domain, opts) {
    return new Bridge(this, domain, opts);
  }

  // artifacts is the session's artifact API (see Artifacts); one per session.
  get artifacts() {
    if (!this._artifacts) this._artifacts = new Artifacts(this);
    return this._artifacts;
  }

  // ---- control plane

  async run(domain, action, args) {
    try {
      this._wake();
      const body = args === undefined ? {} : { args: args };
      const data = await this.client.request(
        "POST",
        this._path("/surfaces/" + encodeURIComponent(domain) + "/" + encodeURIComponent(action)),
        body
      );
      if (data && typeof data === "object" && typeof data.ok === "boolean") {
        if (data.ok || (data.error && typeof data.error === "object")) return data;
      }
      return { ok: false, error: { code: "invalid_result", message: "the command answer has no ok/error" } };
    } catch (e) {
      if (e instanceof SurfacedError) {
        const err = { code: e.code, message: e.message };
        if (e.fields) err.fields = e.fields;
        return { ok: false, error: err };
      }
      return { ok: false, error: { code: "send_failed", message: errText(e) } };
    }
  }

  async prompt(text, opts) {
    this._wake();
    const body = { message: text };
    if (opts && opts.images && opts.images.length) body.images = opts.images;
    if (opts && opts.attachmentIds && opts.attachmentIds.length) body.attachmentIds = opts.attachmentIds.slice();
    return this.client.request("POST", this._path("/prompt"), body);
  }

  async abort() {
    return this.client.request("POST", this._path("/abort"), {});
  }

  async setPref(key, value) {
    this._wake();
    return this.client.request("POST", this._path("/state"), { key: key, value: value, op: "set" });
  }

  async deletePref(key) {
    this._wake();
    return this.client.request("POST", this._path("/state"), { key: key, op: "delete" });
  }

  async answer(uiRequestId, response) {
    this._wake();
    const r = response || {};
    const body = { id: uiRequestId };
    if (r.cancelled) body.cancelled = true;
    else if (r.confirmed !== undefined) body.confirmed = !!r.confirmed;
    else if (r.value !== undefined) body.value = r.value;
    else body.cancelled = true;
    return this.client.request("POST", this._path("/ui-response"), body);
  }

  async messages() {
    const data = await this.client.request("GET", this._path("/messages"));
    return (data && data.messages) || [];
  }

  async summary() {
    return this.client.request("GET", this._path());
  }

  async getState() {
    const data = await this.client.request("GET", this._path("/state"));
    return (data && data.entries) || {};
  }

  async end() {
    return this.client.request("DELETE", this._path());
  }
}

// Subscription owns one logical stream; it may go through several EventSource objects.
class Subscription {
  constructor(session, handlers) {
    this.session = session;
    this.handlers = handlers;
    this.closed = false; // closed by the caller
    this.ended = false; // ended by the server
    this.endReason = undefined;
    this._es = null;
    this._timer = null;
    this._failures = 0;
  }

  close() {
    this.closed = true;
    this._teardown();
  }

  _teardown() {
    if (this._timer !== null) {
      this.session.client._clearTimeout(this._timer);
      this._timer = null;
    }
    if (this._es) {
      const es = this._es;
      this._es = null;
      try {
        es.close();
      } catch (e) {
        /* already closed */
      }
    }
  }

  _open() {
    const client = this.session.client;
    const ES = client._EventSource;
    if (!ES) {
      safeCall(this.handlers.error, { code: "unsupported", message: "EventSource is not available", fatal: true });
      return;
    }
    this.ended = false;
    this.endReason = undefined;
    let url = client.base + this.session._path("/events");
    if (this.session.lastEventId) url += "?lastEventId=" + encodeURIComponent(this.session.lastEventId);
    let es;
    try {
      es = new ES(url, { withCredentials: client.withCredentials });
    } catch (e) {
      safeCall(this.handlers.error, { code: "send_failed", message: errText(e), fatal: false });
      this._reopen();
      return;
    }
    this._es = es;
    es.onopen = () => {
      if (this._es !== es) return;
      this._failures = 0;
      safeCall(this.handlers.open);
    };
    es.onerror = () => {
      if (this._es !== es || this.closed) return;
      const CLOSED = typeof ES.CLOSED === "number" ? ES.CLOSED : 2;
      if (es.readyState === CLOSED) {
        // The browser gave up (an HTTP error or a refused connection); find out whether the
        // session still exists before trying again.
        this._es = null;
        this._probeAndReopen();
      } else {
        safeCall(this.handlers.reconnecting);
      }
    };
    for (const kind of FRAME_KINDS) {
      es.addEventListener(kind, (ev) => {
        if (this._es !== es || this.closed) return;
        if (ev.lastEventId) this.session.lastEventId = ev.lastEventId;
        let data;
        try {
          data = JSON.parse(ev.data);
        } catch (e) {
          safeCall(this.handlers.error, { code: "invalid_frame", message: "a " + kind + " frame is not JSON", fatal: false });
          return;
        }
        this.session._dispatch(this, kind, data, ev.lastEventId);
      });
    }
  }

  _ended(reason) {
    this.endReason = reason;
    this._teardown();
    // Cut for being behind, or the session moved to another node of a
    // cluster: reconnect at once, resuming (or resyncing) from the last id.
    if ((reason === "slow_consumer" || reason === "moved") && !this.closed) {
      this._open();
      return;
    }
    this.ended = true;
  }

  async _probeAndReopen() {
    try {
      const s = await this.session.summary();
      if (s && s.status === "ended") {
        // The session ended (a page opened on it, or the end frame was missed): take the
        // summary as its status, surfaces included, before telling the page.
        this.ended = true;
        this.endReason = "stopped";
        this.session._applyStatus(s);
        safeCall(this.handlers.session, s);
        safeCall(this.handlers.end, { reason: "stopped" });
        return;
      }
    } catch (e) {
      if (e instanceof SurfacedError && (e.status === 401 || e.status === 403 || e.status === 404)) {
        this.ended = true;
        this.endReason = "revoked";
        safeCall(this.handlers.error, { code: e.code, message: e.message, fatal: true });
        return;
      }
    }
    if (!this.closed) this._reopen();
  }

  _reopen(delayMs) {
    if (this.closed) return;
    this._teardown();
    let delay = delayMs;
    if (delay === undefined) {
      delay = Math.min(REOPEN_MAX_MS, REOPEN_MIN_MS * Math.pow(2, this._failures));
      delay = Math.round(delay * (0.75 + Math.random() * 0.5));
      this._failures++;
    }
    safeCall(this.handlers.reconnecting);
    if (delay <= 0) {
      this._open();
      return;
    }
    this._timer = this.session.client._setTimeout(() => {
      this._timer = null;
      if (!this.closed) this._open();
    }, delay);
  }
}

// ---------------------------------------------------------------- chat assembly

class ChatAssembler {
  constructor() {
    this.messages = [];
    this._byId = new Map();
    this._current = null; // the open assistant message
    this._liveTurns = new Set();
    this._userByPrompt = new Map();
    this._implicit = 0;
  }

  liveTurnIds() {
    return new Set(this._liveTurns);
  }

  hasPrompt(promptId) {
    return this._userByPrompt.has(promptId);
  }

  message(id) {
    return this._byId.get(id);
  }

  userMessage(promptId) {
    return this._userByPrompt.get(promptId);
  }

  remove(id) {
    const m = this._byId.get(id);
    if (!m) return;
    this._byId.delete(id);
    this.messages = this.messages.filter((x) => x !== m);
    if (m.turnId) this._liveTurns.delete(m.turnId);
    if (m.role === "user" && m.promptId) this._userByPrompt.delete(m.promptId);
    if (this._current === m) this._current = null;
  }

  clear() {
    this.messages = [];
    this._byId.clear();
    this._current = null;
    this._liveTurns.clear();
    this._userByPrompt.clear();
  }

  _add(m) {
    this.messages.push(m);
    this._byId.set(m.id, m);
    return m;
  }

  _open() {
    if (this._current) return this._current;
    this._implicit++;
    let id = "live-" + this._implicit;
    while (this._byId.has(id)) id = "live-" + ++this._implicit;
    this._current = this._add({
      id: id,
      role: "assistant",
      turnId: undefined,
      promptIds: [],
      status: "streaming",
      startSeen: false,
      parts: [],
    });
    return this._current;
  }

  _part(m, type, id) {
    for (const p of m.parts) if (p.type === type && p.id === id) return p;
    const p = { type: type, id: id, text: "", state: "streaming" };
    m.parts.push(p);
    return p;
  }

  _tool(m, toolCallId, toolName) {
    for (const p of m.parts) if (p.type === "tool" && p.toolCallId === toolCallId) return p;
    // Tool calls are looked up across messages too: output can outlive a missed turn boundary.
    for (let i = this.messages.length - 1; i >= 0; i--) {
      const other = this.messages[i];
      if (other.role !== "assistant") continue;
      for (const p of other.parts) if (p.type === "tool" && p.toolCallId === toolCallId) return p;
    }
    const p = {
      type: "tool",
      toolCallId: toolCallId,
      toolName: toolName || "tool",
      input: undefined,
      inputText: "",
      output: undefined,
      preliminary: false,
      errorText: undefined,
      state: "input-streaming",
    };
    m.parts.push(p);
    return p;
  }

  apply(chunk) {
    const r = { message: undefined, unseenStart: false };
    if (!chunk || typeof chunk.type !== "string") return r;
    const c = chunk;
    switch (c.type) {
      case "data-user-message": {
        const d = c.data || {};
        let m = d.promptId !== undefined ? this._userByPrompt.get(d.promptId) : undefined;
        if (!m) {
          m = this._add({
            id: d.promptId !== undefined ? "user-" + d.promptId : "user-" + ++this._implicit,
            role: "user",
            promptId: d.promptId,
            text: "",
            via: undefined,
            queued: false,
            images: undefined,
            turnId: undefined,
          });
          if (d.promptId !== undefined) this._userByPrompt.set(d.promptId, m);
        }
        m.text = str(d.text);
        m.via = d.via;
        m.queued = !!d.queued;
        m.images = d.images;
        r.message = m;
        return r;
      }
      case "start": {
        if (this._current) this._finishMessage(this._current, undefined);
        const meta = c.messageMetadata || {};
        let id = c.messageId || (meta.turnId ? "turn-" + meta.turnId : undefined);
        if (!id || this._byId.has(id)) id = "live-" + ++this._implicit;
        const m = this._add({
          id: id,
          role: "assistant",
          turnId: meta.turnId,
          promptIds: Array.isArray(meta.promptIds) ? meta.promptIds.slice() : [],
          status: "streaming",
          startSeen: true,
          parts: [],
        });
        if (m.turnId !== undefined) this._liveTurns.add(m.turnId);
        for (const pid of m.promptIds) {
          const u = this._userByPrompt.get(pid);
          if (u) {
            u.queued = false;
            u.turnId = m.turnId;
          }
        }
        this._current = m;
        r.message = m;
        return r;
      }
      case "finish": {
        const meta = c.messageMetadata || {};
        let m = this._current;
        if (m && m.startSeen && meta.turnId !== undefined && m.turnId !== undefined && m.turnId !== meta.turnId) {
          // The finish belongs to a turn we did not see begin; close ours as well.
          this._finishMessage(m, undefined);
          m = undefined;
        }
        if (!m || !m.startSeen) r.unseenStart = true;
        if (m) {
          if (m.turnId === undefined && meta.turnId !== undefined) {
            m.turnId = meta.turnId;
            this._liveTurns.add(m.turnId);
          }
          if (Array.isArray(meta.promptIds) && m.promptIds.length === 0) m.promptIds = meta.promptIds.slice();
          this._finishMessage(m, meta.stopReason);
        }
        this._current = null;
        r.message = m;
        return r;
      }
      case "abort": {
        const m = this._open();
        m.status = "aborted";
        r.message = m;
        return r;
      }
      case "error": {
        const m = this._open();
        m.status = "error";
        m.error = str(c.errorText) || "the turn failed";
        r.message = m;
        return r;
      }
      case "start-step":
      case "finish-step":
        r.message = this._open();
        return r;
      case "text-start":
      case "reasoning-start": {
        const m = this._open();
        this._part(m, c.type === "text-start" ? "text" : "reasoning", c.id);
        r.message = m;
        return r;
      }
      case "text-delta":
      case "reasoning-delta": {
        const m = this._open();
        const p = this._part(m, c.type === "text-delta" ? "text" : "reasoning", c.id);
        p.text += str(c.delta);
        p.state = "streaming";
        r.message = m;
        return r;
      }
      case "text-end":
      case "reasoning-end": {
        const m = this._open();
        this._part(m, c.type === "text-end" ? "text" : "reasoning", c.id).state = "done";
        r.message = m;
        return r;
      }
      case "tool-input-start": {
        const m = this._open();
        this._tool(m, c.toolCallId, c.toolName);
        r.message = m;
        return r;
      }
      case "tool-input-delta": {
        const m = this._open();
        const p = this._tool(m, c.toolCallId);
        p.inputText += str(c.inputTextDelta);
        r.message = this._owner(p) || m;
        return r;
      }
      case "tool-input-available": {
        const m = this._open();
        const p = this._tool(m, c.toolCallId, c.toolName);
        if (c.toolName) p.toolName = c.toolName;
        p.input = c.input;
        if (p.state === "input-streaming") p.state = "input-available";
        r.message = this._owner(p) || m;
        return r;
      }
      case "tool-output-available": {
        const m = this._open();
        const p = this._tool(m, c.toolCallId, c.toolName);
        p.output = c.output; // accumulated by the server: replace, never append
        p.preliminary = !!c.preliminary;
        p.errorText = undefined;
        p.state = "output-available";
        r.message = this._owner(p) || m;
        return r;
      }
      case "tool-output-error": {
        const m = this._open();
        const p = this._tool(m, c.toolCallId, c.toolName);
        p.errorText = str(c.errorText) || "the tool failed";
        p.preliminary = false;
        p.state = "output-error";
        r.message = this._owner(p) || m;
        return r;
      }
      default:
        // data-agent-event and chunk types this version does not know change no message.
        return r;
    }
  }

  _owner(part) {
    for (let i = this.messages.length - 1; i >= 0; i--) {
      const m = this.messages[i];
      if (m.parts && m.parts.indexOf(part) >= 0) return m;
    }
    return undefined;
  }

  _finishMessage(m, stopReason) {
    if (stopReason !== undefined) m.stopReason = stopReason;
    if (stopReason === "cancelled") m.status = "aborted";
    else if (stopReason === "error" && m.status !== "aborted") m.status = "error";
    else if (m.status === "streaming") m.status = "done";
    for (const p of m.parts) {
      if ((p.type === "text" || p.type === "reasoning") && p.state === "streaming") p.state = "done";
    }
  }
}


// ---------------------------------------------------------------- conversation bridge

// Bridge joins a surface and the conversation. Its mode is computed on every read from what the
// session knows (the registered domains and their availability, from the `session` frame's
// `surfaces` or GET …/surfaces, and the session's status), so it is never stale.
class Bridge {
  constructor(session, domain, opts) {
    this.session = session;
    this.domain = domain;
    const c = opts && opts.conversation;
    this._conversation = c !== false;
    // A page whose chat has its own sender (the AI SDK's useChat) passes it, so that the op shows
    // in that chat like any message it sends: conversation(text, {attachmentIds}).
    this._submit = typeof c === "function" ? c : null;
  }

  get mode() {
    // An ended session takes neither prompts nor commands: surface().available is false then.
    if (!this.session.surface(this.domain).available) return "unavailable";
    if (!this._conversation) return "command";
    return "prompt";
  }

  get available() {
    return this.mode !== "unavailable";
  }

  run(action, args) {
    return this.session.run(this.domain, action, args);
  }

  // prompt sends the rendered surface-op as a user message (mode "prompt"), or runs op.fallback on
  // the control plane (mode "command"). It never rejects.
  async prompt(op, opts) {
    const mode = this.mode;
    if (mode === "unavailable") {
      return { ok: false, error: { code: "unavailable", message: "the surface " + this.domain + " is unavailable (read-only)" } };
    }
    if (mode === "command") {
      const fb = op && op.fallback;
      if (!fb || !fb.action) {
        return { ok: false, error: { code: "no_fallback", message: "the conversation is not available and the op has no command fallback" } };
      }
      return { ok: true, channel: "command", result: await this.run(fb.action, fb.args) };
    }
    const o = opts || {};
    try {
      const text = renderSurfaceOp(op);
      if (this._submit) {
        await this._submit(text, { attachmentIds: o.attachmentIds });
        return { ok: true, channel: "prompt", accepted: true, queued: false };
      }
      const res = await this.session.prompt(text, { attachmentIds: o.attachmentIds });
      return { ok: true, channel: "prompt", accepted: !!(res && res.accepted !== false), queued: !!(res && res.queued) };
    } catch (e) {
      if (e instanceof SurfacedError) return { ok: false, error: { code: e.code, message: e.message } };
      return { ok: false, error: { code: "send_failed", message: errText(e) } };
    }
  }

  // onChange calls cb whenever the mode may have changed (the domain list or the session's status).
  onChange(cb) {
    const fire = () => safeCall(cb, this);
    const offSurfaces = this.session.onSurfaces(fire);
    const offStatus = this.session.onStatus(fire);
    return () => {
      offSurfaces();
      offStatus();
    };
  }
}

// ---------------------------------------------------------------- artifacts

const URL_MARGIN_MS = 60000; // a cached signed URL is renewed a minute before it expires

class Artifacts {
  constructor(session) {
    this.session = session;
    this._listeners = new Set();
    this._urls = new Map(); // id → {url, exp (ms)}
  }

  _path(suffix) {
    return this.session._path("/artifacts" + (suffix || ""));
  }

  on(cb) {
    this._listeners.add(cb);
    return () => this._listeners.delete(cb);
  }

  _frame(data) {
    if (!data || !data.artifact || typeof data.artifact.id !== "string") return;
    if (data.event === "deleted") this._urls.delete(data.artifact.id);
    for (const cb of Array.from(this._listeners)) safeCall(cb, data);
  }

  async list(opts) {
    const o = opts || {};
    const q = [];
    if (o.mediaType) q.push("mediaType=" + encodeURIComponent(o.mediaType));
    if (o.cursor) q.push("cursor=" + encodeURIComponent(o.cursor));
    if (o.limit) q.push("limit=" + encodeURIComponent(o.limit));
    const data = await this.session.client.request("GET", this._path(q.length ? "?" + q.join("&") : ""));
    const out = { artifacts: (data && Array.isArray(data.artifacts) && data.artifacts) || [] };
    if (data && data.nextCursor) out.nextCursor = data.nextCursor;
    return out;
  }

  async listAll(opts) {
    const o = opts || {};
    const all = [];
    let cursor;
    // Bounded so a server that keeps answering the same cursor cannot loop forever.
    for (let page = 0; page < 100; page++) {
      const p = await this.list({ mediaType: o.mediaType, cursor: cursor, limit: 500 });
      all.push.apply(all, p.artifacts);
      if (!p.nextCursor || p.nextCursor === cursor) break;
      cursor = p.nextCursor;
    }
    return all;
  }

  async get(id) {
    const data = await this.session.client.request("GET", this._path("/" + encodeURIComponent(id)));
    if (data && data.url) this._remember(id, data.url);
    return data;
  }

  async delete(id) {
    this._urls.delete(id);
    return this.session.client.request("DELETE", this._path("/" + encodeURIComponent(id)));
  }

  contentUrl(id) {
    return this.session.client.base + "/api/artifacts/" + encodeURIComponent(id) + "/content";
  }

  async url(id) {
    const c = this._urls.get(id);
    if (c && c.exp - URL_MARGIN_MS > Date.now()) return c.url;
    const data = await this.get(id);
    if (!data || typeof data.url !== "string") {
      throw new SurfacedError("invalid_result", "the artifact answer has no url");
    }
    return this._absolute(data.url);
  }

  _absolute(url) {
    return url.charAt(0) === "/" ? this.session.client.base + url : url;
  }

  _remember(id, url) {
    const m = /[?&]exp=(\d+)/.exec(url);
    if (m) this._urls.set(id, { url: this._absolute(url), exp: Number(m[1]) * 1000 });
  }

  // upload sends the bytes raw with their Content-Type; name, derivedFrom in the query, meta in
  // the Surfaced-Artifact-Meta header.
  async upload(file, opts) {
    const o = opts || {};
    const client = this.session.client;
    this.session._wake();
    const q = [];
    const name = o.name !== undefined ? o.name : file && typeof file.name === "string" ? file.name : "";
    if (name) q.push("name=" + encodeURIComponent(name));
    if (o.derivedFrom) q.push("derivedFrom=" + encodeURIComponent(o.derivedFrom));
    const path = this._path(q.length ? "?" + q.join("&") : "");
    const headers = client._headers({
      Accept: "application/json",
      "Content-Type": o.mediaType || (file && file.type) || "application/octet-stream",
    });
    if (o.meta !== undefined) {
      try {
        headers["Surfaced-Artifact-Meta"] = JSON.stringify(o.meta);
      } catch (e) {
        throw new SurfacedError("invalid_args", "meta is not JSON-serializable: " + errText(e));
      }
    }
    const data = client._XHR
      ? await this._xhr(path, headers, file, o)
      : await client._answer(await client._send(path, { method: "POST", headers: headers, body: file, credentials: client._credentials(), signal: o.signal }));
    if (data && data.artifact && data.url) this._remember(data.artifact.id, data.url);
    return data;
  }

  // _xhr uploads with XMLHttpRequest: fetch cannot report an upload's progress.
  _xhr(path, headers, body, o) {
    const client = this.session.client;
    return new Promise((resolve, reject) => {
      const xhr = new client._XHR();
      xhr.open("POST", client.base + path);
      for (const k of Object.keys(headers)) xhr.setRequestHeader(k, headers[k]);
      xhr.withCredentials = client._credentials() === "include";
      if (typeof o.onProgress === "function" && xhr.upload) {
        xhr.upload.onprogress = (ev) => safeCall(o.onProgress, { loaded: ev.loaded, total: ev.lengthComputable ? ev.total : undefined });
      }
      if (o.signal) {
        if (o.signal.aborted) {
          reject(new SurfacedError("aborted", "the upload was aborted"));
          return;
        }
        o.signal.addEventListener("abort", () => xhr.abort(), { once: true });
      }
      xhr.onload = () => {
        const text = xhr.responseText || "";
        const res = { ok: xhr.status >= 200 && xhr.status < 300, status: xhr.status, statusText: xhr.statusText, text: async () => text };
        client._answer(res).then(resolve, reject);
      };
      xhr.onerror = () => reject(new SurfacedError("send_failed", "the upload could not be sent"));
      xhr.onabort = () => reject(new SurfacedError("aborted", "the upload was aborted"));
      xhr.send(body);
    });
  }
}

// ---------------------------------------------------------------- fetch-based event source

// FetchEventSource reads a session stream with fetch, so that the request can carry the bearer
// token (an EventSource cannot send headers). It is the part of EventSource the Subscription uses:
// onopen, onerror, addEventListener(kind), readyState and close(). It does not reconnect by
// itself: when the stream ends or fails it turns CLOSED and calls onerror, and the Subscription
// resumes from the last event id as it does after an HTTP error.
class FetchEventSource {
  static for(client) {
    function Source(url) {
      return new FetchEventSource(client, url);
    }
    Source.CLOSED = 2;
    return Source;
  }

  constructor(client, url) {
    this.url = url;
    this.readyState = 0;
    this.onopen = null;
    this.onerror = null;
    this._client = client;
    this._listeners = new Map();
    this._closed = false;
    this._abort = typeof AbortController !== "undefined" ? new AbortController() : null;
    Promise.resolve().then(() => this._run());
  }

  addEventListener(kind, cb) {
    let set = this._listeners.get(kind);
    if (!set) this._listeners.set(kind, (set = new Set()));
    set.add(cb);
  }

  removeEventListener(kind, cb) {
    const set = this._listeners.get(kind);
    if (set) set.delete(cb);
  }

  close() {
    this.readyState = 2;
    this._closed = true;
    if (this._abort) this._abort.abort();
  }

  async _run() {
    if (this._closed) return;
    const c = this._client;
    try {
      const res = await c._fetch(this.url, {
        method: "GET",
        headers: c._headers({ Accept: "text/event-stream" }),
        credentials: c._credentials(),
        signal: this._abort ? this._abort.signal : undefined,
      });
      if (!res.ok || !res.body) throw new Error("the stream answered " + res.status);
      if (this._closed) return;
      this.readyState = 1;
      safeCall(this.onopen);
      await this._read(res.body);
    } catch (e) {
      // Closed by the caller, refused, or cut: the Subscription decides what comes next.
    }
    if (this._closed) return;
    this.readyState = 2;
    safeCall(this.onerror, { type: "error" });
  }

  async _read(body) {
    const reader = body.getReader();
    const decoder = new TextDecoder();
    let buf = "";
    let ev = { type: "", data: [], id: undefined };
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += decoder.decode(value, { stream: true });
      let nl;
      while ((nl = buf.search(/\r\n|\r|\n/)) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + (buf.charAt(nl) === "\r" && buf.charAt(nl + 1) === "\n" ? 2 : 1));
        if (line === "") {
          if (ev.data.length) this._emit(ev);
          ev = { type: "", data: [], id: ev.id };
          continue;
        }
        if (line.charAt(0) === ":") continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let val = colon < 0 ? "" : line.slice(colon + 1);
        if (val.charAt(0) === " ") val = val.slice(1);
        if (field === "event") ev.type = val;
        else if (field === "data") ev.data.push(val);
        else if (field === "id") ev.id = val;
      }
    }
  }

  _emit(ev) {
    if (this.readyState === 2) return;
    const set = this._listeners.get(ev.type || "message");
    if (!set) return;
    const e = { type: ev.type || "message", data: ev.data.join("\n"), lastEventId: ev.id || "" };
    for (const cb of Array.from(set)) safeCall(cb, e);
  }
}

const version = "1";

export {
  version,
  Client,
  Session,
  Subscription,
  StateStore,
  ChatAssembler,
  Bridge,
  Artifacts,
  FetchEventSource,
  SurfacedError,
  SurfacedError as Error,
  renderSurfaceOp,
  DEFAULT_FENCE,
};
