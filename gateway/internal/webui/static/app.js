/*
 * The surfaced web UI: session list, chat, agent dialogs and surface panels.
 * Plain DOM on top of surfaced.js (window.Surfaced); every piece of server text goes through
 * textContent, never innerHTML.
 */
(function () {
  "use strict";

  const S = window.Surfaced;
  const client = new S.Client();
  const SURFACE_PREFIX = "surface:";

  const el = {};
  for (const id of [
    "new-session-form", "agent-field", "agent-select", "new-session-title", "new-session-cwd",
    "new-session-button", "no-agents", "session-list", "session-list-empty", "session-title",
    "end-session", "session-status", "session-queued", "session-activity", "status-chips",
    "empty-state", "chat-log", "chat-history", "chat-live", "widgets", "dialogs", "composer",
    "composer-input", "abort", "send", "surface-panels", "toasts", "chat", "attachments", "attach-input",
    "attach", "drop-zone", "lightbox", "lightbox-name", "lightbox-open", "lightbox-img",
    "account", "account-avatar", "account-name", "account-via", "sign-out",
  ]) {
    el[id.replace(/-([a-z])/g, (_, c) => c.toUpperCase())] = document.getElementById(id);
  }

  const app = {
    agents: [],
    sessions: [],
    current: null, // see openSession
    creating: false,
    me: null, // GET /auth/me: who this browser is signed in as, and how it signs in and out
  };

  // ------------------------------------------------------------------ DOM helpers

  // h builds an element: attrs maps names to values (on* → listeners, text → textContent,
  // false/null/undefined → omitted); children are nodes or strings.
  function h(tag, attrs) {
    const node = document.createElement(tag);
    if (attrs) {
      for (const name of Object.keys(attrs)) {
        const v = attrs[name];
        if (v === undefined || v === null || v === false) continue;
        if (name === "text") node.textContent = String(v);
        else if (name === "class") node.className = v;
        else if (name.startsWith("on") && typeof v === "function") node.addEventListener(name.slice(2), v);
        else if (name in node && typeof v !== "string") node[name] = v;
        else node.setAttribute(name, v === true ? "" : String(v));
      }
    }
    for (let i = 2; i < arguments.length; i++) append(node, arguments[i]);
    return node;
  }

  function append(node, child) {
    if (child === undefined || child === null || child === false) return;
    if (Array.isArray(child)) {
      for (const c of child) append(node, c);
      return;
    }
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }

  function show(node, visible) {
    node.hidden = !visible;
  }

  function pretty(v) {
    if (v === undefined) return "";
    if (typeof v === "string") return v;
    try {
      return JSON.stringify(v, null, 2);
    } catch (e) {
      return String(v);
    }
  }

  // toolText shows a pi tool result ({content:[{type:"text",text}], details}) as its text, anything
  // else as JSON.
  function toolText(v) {
    if (v && typeof v === "object" && Array.isArray(v.content)) {
      const parts = v.content.map((b) => (b && b.type === "text" ? String(b.text) : b && b.type === "image" ? "[image]" : pretty(b)));
      return parts.join("\n");
    }
    return pretty(v);
  }

  function errorMessage(e) {
    if (!e) return "unknown error";
    if (e.code && e.message && e.message !== e.code) return e.message + " (" + e.code + ")";
    return e.message || e.code || String(e);
  }

  function toast(text, kind) {
    const k = kind || "info";
    const node = h("div", { class: "toast " + k, role: k === "error" ? "alert" : "status", "data-testid": "toast-" + k },
      h("span", { text: text }),
      h("button", { type: "button", class: "ghost small", "aria-label": "Dismiss", text: "×", onclick: () => node.remove() }));
    el.toasts.append(node);
    setTimeout(() => node.remove(), k === "error" ? 12000 : 6000);
  }

  // nextFrame runs fn on the next animation frame, or after a short timer in a hidden tab
  // (browsers pause animation frames there, and another tab of the same session must still update).
  function nextFrame(fn) {
    let done = false;
    const run = () => {
      if (done) return;
      done = true;
      fn();
    };
    requestAnimationFrame(run);
    setTimeout(run, 100);
    return 1;
  }

  function relTime(iso) {
    const t = Date.parse(iso);
    if (!Number.isFinite(t)) return "";
    const s = Math.round((Date.now() - t) / 1000);
    if (s < 60) return "just now";
    if (s < 3600) return Math.floor(s / 60) + " min ago";
    if (s < 86400) return Math.floor(s / 3600) + " h ago";
    return new Date(t).toLocaleDateString();
  }

  // ------------------------------------------------------------------ routing

  function hashSessionId() {
    const m = /^#\/s\/(.+)$/.exec(location.hash);
    if (!m) return null;
    try {
      return decodeURIComponent(m[1]);
    } catch (e) {
      return null;
    }
  }

  function sessionHash(id) {
    return "#/s/" + encodeURIComponent(id);
  }

  // The start URL carries ?token=; the server has set the cookie by now, so the token should not
  // stay in the address bar, the history or a bookmark.
  function dropTokenFromURL() {
    const params = new URLSearchParams(location.search);
    if (!params.has("token")) return;
    params.delete("token");
    const q = params.toString();
    history.replaceState(null, "", location.pathname + (q ? "?" + q : "") + location.hash);
  }

  async function route(initial) {
    const id = hashSessionId();
    if (id) {
      openSession(id);
      return;
    }
    if (!initial) {
      closeSession();
      return;
    }
    if (app.sessions.length === 1) {
      const only = app.sessions[0].sessionId;
      history.replaceState(null, "", sessionHash(only));
      openSession(only);
      return;
    }
    if (app.sessions.length === 0 && app.agents.length === 1) {
      await createSession({ agent: app.agents[0].name }, true);
      return;
    }
    closeSession();
  }

  // ------------------------------------------------------------------ sessions sidebar

  function renderAgents() {
    const agents = app.agents;
    el.agentSelect.replaceChildren(...agents.map((a) =>
      h("option", { value: a.name, text: a.title ? a.title + " (" + a.name + ")" : a.name, title: a.description || "" })));
    show(el.agentField, agents.length > 1);
    show(el.noAgents, agents.length === 0);
    el.newSessionButton.disabled = agents.length === 0;
  }

  function renderSessionList() {
    const cur = app.current && app.current.id;
    const items = app.sessions.map((s) => {
      const status = s.status || "unknown";
      const label = s.title || s.agent || s.sessionId;
      return h("li", null,
        h("a", {
          href: sessionHash(s.sessionId),
          class: "session-item",
          "data-testid": "session-item",
          "data-session-id": s.sessionId,
          "aria-current": s.sessionId === cur ? "page" : null,
        },
          h("span", { class: "session-label", text: label }),
          h("span", { class: "session-meta" },
            h("span", { class: "badge status-" + status, "data-testid": "session-item-status", text: status }),
            s.title && s.agent ? h("span", { class: "muted", text: s.agent }) : null,
            h("time", { class: "muted", datetime: s.updatedAt || "", text: relTime(s.updatedAt || s.createdAt) }))));
    });
    el.sessionList.replaceChildren(...items);
    show(el.sessionListEmpty, app.sessions.length === 0);
  }

  async function refreshSessions() {
    try {
      app.sessions = await client.sessions();
      renderSessionList();
    } catch (e) {
      if (e.status === 401) showSignedOut();
    }
  }

  // patchListedSession keeps the sidebar badge of the open session in step with its stream.
  function patchListedSession(id, patch) {
    const s = app.sessions.find((x) => x.sessionId === id);
    if (!s) return;
    let changed = false;
    for (const k of Object.keys(patch)) {
      if (patch[k] !== undefined && s[k] !== patch[k]) {
        s[k] = patch[k];
        changed = true;
      }
    }
    if (changed) renderSessionList();
  }

  async function createSession(opts, replaceHash) {
    if (app.creating) return;
    app.creating = true;
    el.newSessionButton.disabled = true;
    try {
      const res = await client.createSession(opts);
      const id = res && res.sessionId;
      if (!id) throw new S.Error("invalid_result", "the server did not return a session id");
      await refreshSessions();
      if (replaceHash) {
        history.replaceState(null, "", sessionHash(id));
        openSession(id);
      } else {
        location.hash = sessionHash(id); // hashchange opens it
      }
    } catch (e) {
      if (e.status === 401) showSignedOut();
      else toast("Could not create a session: " + errorMessage(e), "error");
    } finally {
      app.creating = false;
      el.newSessionButton.disabled = app.agents.length === 0;
    }
  }

  el.newSessionForm.addEventListener("submit", (ev) => {
    ev.preventDefault();
    createSession({
      agent: app.agents.length > 1 ? el.agentSelect.value : undefined,
      title: el.newSessionTitle.value.trim() || undefined,
      cwd: el.newSessionCwd.value.trim() || undefined,
    }, false).then(() => {
      el.newSessionTitle.value = "";
    });
  });

  // ------------------------------------------------------------------ open / close a session

  function closeSession() {
    const cur = app.current;
    if (cur) {
      cur.closed = true;
      for (const panel of cur.panels.values()) panel.dispose();
      cur.panels.clear();
      for (const off of cur.disposers) off();
      clearDrafts(cur);
      cur.session.close();
    }
    app.current = null;
    renderDrafts(null);
    el.chatHistory.replaceChildren();
    el.chatLive.replaceChildren();
    el.dialogs.replaceChildren();
    el.widgets.replaceChildren();
    el.statusChips.replaceChildren();
    el.surfacePanels.replaceChildren();
    el.sessionActivity.textContent = "";
    show(el.chatLog, false);
    show(el.composer, false);
    show(el.endSession, false);
    show(el.emptyState, true);
    el.sessionTitle.textContent = "surfaced";
    document.title = "surfaced";
    setStatusLine("no session", "none");
    show(el.sessionQueued, false);
    renderSessionList();
  }

  function openSession(id) {
    if (app.current && app.current.id === id) return;
    closeSession();
    const session = client.session(id);
    const cur = {
      id: id,
      session: session,
      assembler: new S.ChatAssembler(),
      msgEls: new Map(), // live message id → element
      historyByTurn: new Map(), // turnId → [elements]
      historyByPrompt: new Map(), // promptId → element
      historySeq: 0,
      openDetails: new Set(), // keys of <details> the user opened
      dirty: new Set(),
      frame: 0,
      surfaceFrame: 0,
      panels: new Map(), // domain → {root, update, dispose, url?}
      failedPanels: new Map(), // domain → why its agent's panel module did not mount
      noSurfaces: null,
      dialogs: new Map(),
      widgets: new Map(),
      chips: new Map(),
      status: undefined,
      summary: undefined,
      agentTitle: undefined,
      streamNote: "",
      ended: false,
      disposers: [],
      closed: false,
      drafts: [], // files attached in the composer, see addFiles
      artifacts: new Map(), // artifact id → Promise of {artifact, url} (see artifactInfo)
    };
    app.current = cur;
    show(el.emptyState, false);
    show(el.chatLog, true);
    show(el.composer, true);
    show(el.endSession, true);
    renderSessionList();
    renderHeader(cur);

    cur.disposers.push(session.onAnyState((key) => {
      if (key.startsWith(SURFACE_PREFIX)) scheduleSurfaces(cur);
    }));
    cur.disposers.push(session.onSurfaces(() => scheduleSurfaces(cur)));

    // Subscribe first, then read history: a turn that starts in between is live, and history
    // entries of live turns are skipped, so nothing is lost and nothing shows twice.
    session.subscribe({
      open: () => live(cur) && setStreamNote(cur, ""),
      reconnecting: () => live(cur) && setStreamNote(cur, "reconnecting…"),
      session: (f) => live(cur) && onSessionFrame(cur, f),
      chat: (c) => live(cur) && onChat(cur, c),
      uiRequest: (r) => live(cur) && onUiRequest(cur, r),
      diagnostic: (d) => live(cur) && toast("Agent diagnostic: " + (d.message || d.code) + (d.code ? " (" + d.code + ")" : ""), "warning"),
      resync: () => live(cur) && onResync(cur),
      end: (d) => live(cur) && onEnd(cur, d),
      error: (e) => {
        if (!live(cur)) return;
        if (e.fatal) {
          setStreamNote(cur, "");
          if (e.code === "not_found" || e.code === "http_404") showNotFound(cur);
          else toast("The event stream stopped: " + errorMessage(e), "error");
        }
      },
    });
    loadHistory(cur);
    session.summary().then((s) => {
      if (!live(cur)) return;
      cur.summary = s;
      renderHeader(cur);
      scheduleSurfaces(cur); // the agent is known now, and so are its panels
    }, (e) => {
      if (!live(cur)) return;
      if (e.status === 404) showNotFound(cur);
      else if (e.status === 401) showSignedOut();
    });
    renderSurfaces(cur);
  }

  function live(cur) {
    return app.current === cur && !cur.closed;
  }

  function showNotFound(cur) {
    setStatusLine("session not found", "error");
    show(el.composer, false);
    show(el.endSession, false);
    el.chatHistory.replaceChildren(h("p", { class: "notice error", role: "alert", "data-testid": "session-not-found",
      text: "This session does not exist (or belongs to someone else)." }));
    cur.ended = true;
    cur.session.close();
  }

  // ------------------------------------------------------------------ who is signed in

  // A person who signed out is not sent straight back to the identity provider (which would sign
  // them in again at once); this tab remembers it until they sign in.
  const SIGNED_OUT = "surfaced.signedOut";

  async function loadMe() {
    try {
      const res = await fetch("/auth/me", { credentials: "same-origin", headers: { Accept: "application/json" } });
      app.me = res.ok ? await res.json() : null;
    } catch (e) {
      app.me = null;
    }
  }

  function signInURL() {
    return app.me.signIn + "?next=" + encodeURIComponent(location.pathname + location.search + location.hash);
  }

  // accountName splits a subject: "<issuer>#<value>" shows the value, and the issuer's host as how.
  function accountName(me) {
    const cut = me.subject.lastIndexOf("#");
    if (cut > 0 && /^https?:\/\//.test(me.subject)) {
      let host = me.subject.slice(0, cut);
      try {
        host = new URL(host).host;
      } catch (e) {
        // keep the issuer as written
      }
      return { name: me.name || me.subject.slice(cut + 1), via: "via " + host };
    }
    const via = { token: "with a token", proxy: "via the proxy", none: "authentication off" }[me.via] || "";
    return { name: me.name || me.subject, via: via };
  }

  function renderAccount() {
    const me = app.me;
    if (!me || !me.signedIn) {
      show(el.account, false);
      return;
    }
    const who = accountName(me);
    el.accountName.textContent = who.name;
    el.accountName.title = me.subject + (me.groups && me.groups.length ? " (" + me.groups.join(", ") + ")" : "");
    el.accountVia.textContent = who.via;
    el.accountAvatar.textContent = (who.name.match(/[\p{L}\p{N}]/u) || ["?"])[0].toUpperCase();
    show(el.signOut, Boolean(me.signOut));
    show(el.account, true);
  }

  el.signOut.addEventListener("click", async () => {
    if (!app.me || !app.me.signOut) return;
    try {
      const res = await fetch(app.me.signOut, { method: "POST", credentials: "same-origin" });
      if (!res.ok && res.status !== 204) throw new Error("the daemon answered " + res.status);
    } catch (e) {
      toast("Could not sign out: " + errorMessage(e), "error");
      return;
    }
    sessionStorage.setItem(SIGNED_OUT, "1");
    app.me = { signedIn: false, signIn: app.me.signIn };
    app.sessions = [];
    app.agents = [];
    renderAgents();
    renderSessionList();
    renderAccount();
    showSignedOut(true);
  });

  function showSignedOut(justNow) {
    closeSession();
    // Nothing of the daemon is the signed-out person's: no form, no list.
    document.getElementById("app").classList.add("is-signed-out");
    if (app.me && app.me.signIn) {
      el.emptyState.replaceChildren(h("div", { class: "signed-out", role: "status", "data-testid": "signed-out" },
        h("p", { text: justNow ? "You signed out." : "You are not signed in." }),
        h("a", { class: "button primary", href: signInURL(), "data-testid": "sign-in", text: "Sign in" })));
      return;
    }
    el.emptyState.replaceChildren(h("p", { class: "notice error", role: "alert", "data-testid": "signed-out" },
      "You are not signed in. Open the start URL that surfaced printed (it ends in ",
      h("code", { text: "?token=…" }), ") once in this browser."));
  }

  el.endSession.addEventListener("click", async () => {
    const cur = app.current;
    if (!cur || !window.confirm("End this session? The agent is stopped; the transcript stays readable.")) return;
    try {
      await cur.session.end();
      refreshSessions();
    } catch (e) {
      toast("Could not end the session: " + errorMessage(e), "error");
    }
  });

  // ------------------------------------------------------------------ header and status

  const composerPlaceholder = el.composerInput.placeholder;

  function setStatusLine(text, kind) {
    el.sessionStatus.textContent = text;
    el.sessionStatus.className = "status status-" + kind;
  }

  function setStreamNote(cur, note) {
    cur.streamNote = note;
    renderHeader(cur);
  }

  function renderHeader(cur) {
    if (!live(cur)) return;
    const st = cur.status;
    const title = (st && st.title) || cur.agentTitle || (cur.summary && (cur.summary.title || cur.summary.agent)) || "Session " + cur.id;
    el.sessionTitle.textContent = title;
    document.title = title + " · surfaced";
    let text;
    let kind;
    if (cur.ended || cur.session.ended) {
      text = cur.endNote || "ended";
      if (cur.session.ended && st && st.status === "ended" && st.detail) text = "ended — " + st.detail;
      kind = "ended";
    } else if (!st) {
      text = "connecting…";
      kind = "starting";
    } else {
      kind = st.status;
      text = st.status;
      if (st.status === "ready" && st.busy) {
        text = "ready · working…";
        kind = "busy";
      }
      if (st.status === "error") {
        text = "error" + (st.code ? ": " + st.code : "") + (st.detail ? " — " + st.detail : "");
      }
    }
    if (cur.streamNote) text += " (" + cur.streamNote + ")";
    setStatusLine(text, kind);
    const queued = st && st.queued ? st.queued : 0;
    el.sessionQueued.textContent = queued + " queued";
    show(el.sessionQueued, queued > 0);
    const busy = !!(st && st.busy) && !cur.ended;
    show(el.abort, busy);
    // An ended session (DELETE, the agent done, its restarts spent) takes nothing any more; a
    // session asleep or on a daemon going down wakes at the next message.
    const closedForGood = cur.session.ended || (cur.ended && cur.endReason !== "idle" && cur.endReason !== "shutdown");
    el.composerInput.disabled = closedForGood;
    el.composerInput.placeholder = cur.session.ended ? "This session has ended: start a new session to go on" : composerPlaceholder;
    el.send.disabled = closedForGood;
    el.attach.disabled = closedForGood;
    if (cur.session.ended) show(el.endSession, false); // nothing left to end
  }

  function onSessionFrame(cur, f) {
    cur.status = f;
    if (f.status !== "ended" && cur.ended && !cur.session.ended) {
      cur.ended = false; // the stream was woken again
      cur.endNote = "";
    }
    if (f.status === "ended") {
      cur.ended = true;
      cur.endReason = "stopped";
      cur.endNote = "ended";
    }
    renderHeader(cur);
    patchListedSession(cur.id, { status: f.status, title: f.title });
    scheduleSurfaces(cur);
  }

  function onEnd(cur, d) {
    const reason = (d && d.reason) || "stopped";
    if (reason === "slow_consumer" || reason === "moved") return; // the library reconnects at once
    cur.ended = true;
    cur.endReason = reason;
    cur.endNote = {
      stopped: "ended",
      idle: "asleep — send a message to wake it",
      crashed: "ended — the agent crashed too often",
      shutdown: "the daemon is shutting down",
      revoked: "access revoked",
    }[reason] || "stream ended (" + reason + ")";
    renderHeader(cur);
    patchListedSession(cur.id, { status: reason === "idle" ? "idle" : reason === "stopped" ? "ended" : undefined });
    scheduleSurfaces(cur);
  }

  function onResync(cur) {
    for (const card of cur.dialogs.values()) card.remove();
    cur.dialogs.clear();
    for (const w of cur.widgets.values()) w.remove();
    cur.widgets.clear();
    for (const c of cur.chips.values()) c.remove();
    cur.chips.clear();
    // Frames were missed, the chat among them: rebuild it from the transcript.
    cur.assembler.clear();
    cur.msgEls.clear();
    el.chatLive.replaceChildren();
    loadHistory(cur);
    scheduleSurfaces(cur);
  }

  // ------------------------------------------------------------------ chat

  const AGENT_EVENT_TEXT = {
    auto_retry_start: "retrying the model call…",
    auto_retry_end: "",
    compaction_start: "compacting the context…",
    auto_compaction_start: "compacting the context…",
    compaction_end: "",
    auto_compaction_end: "",
  };

  function onChat(cur, chunk) {
    if (chunk && chunk.type === "data-agent-event") {
      const d = chunk.data || {};
      if (d.type === "extension_error") {
        toast("Agent extension error: " + (d.error || d.message || pretty(d)), "error");
        return;
      }
      if (d.type in AGENT_EVENT_TEXT) {
        el.sessionActivity.textContent = AGENT_EVENT_TEXT[d.type];
      }
      return;
    }
    const r = cur.assembler.apply(chunk);
    if (r.unseenStart) {
      // This turn began before we subscribed: what we saw of it is partial. The transcript has it whole.
      if (r.message) {
        cur.assembler.remove(r.message.id);
        markDirty(cur, r.message.id);
      }
      loadHistory(cur);
      return;
    }
    const m = r.message;
    if (!m) return;
    if (chunk.type === "data-user-message") {
      const ids = chunk.data && chunk.data.attachmentIds;
      m.attachmentIds = Array.isArray(ids) ? ids.filter((x) => typeof x === "string") : undefined;
    }
    markDirty(cur, m.id);
    if (m.role === "user" && m.promptId !== undefined) dropHistoryPrompt(cur, m.promptId);
    if (chunk.type === "start") {
      el.sessionActivity.textContent = "";
      if (m.turnId !== undefined) dropHistoryTurn(cur, m.turnId);
      for (const pid of m.promptIds) {
        const u = cur.assembler.userMessage(pid);
        if (u) markDirty(cur, u.id);
      }
    }
    if (chunk.type === "finish") el.sessionActivity.textContent = "";
  }

  function dropHistoryTurn(cur, turnId) {
    const els = cur.historyByTurn.get(turnId);
    if (!els) return;
    for (const e of els) e.remove();
    cur.historyByTurn.delete(turnId);
  }

  function dropHistoryPrompt(cur, promptId) {
    const e = cur.historyByPrompt.get(promptId);
    if (!e) return;
    e.remove();
    cur.historyByPrompt.delete(promptId);
  }

  // Streaming deltas arrive faster than the screen refreshes; render each message once per frame.
  function markDirty(cur, id) {
    cur.dirty.add(id);
    if (cur.frame) return;
    cur.frame = nextFrame(() => {
      cur.frame = 0;
      if (!live(cur)) return;
      const stick = nearBottom();
      for (const mid of cur.dirty) {
        const m = cur.assembler.message(mid);
        const old = cur.msgEls.get(mid);
        if (!m) {
          if (old) old.remove();
          cur.msgEls.delete(mid);
          continue;
        }
        const node = renderMessage(cur, m);
        if (old) old.replaceWith(node);
        else el.chatLive.append(node);
        cur.msgEls.set(mid, node);
      }
      cur.dirty.clear();
      if (stick) scrollToBottom();
    });
  }

  function nearBottom() {
    const log = el.chatLog;
    return log.scrollHeight - log.scrollTop - log.clientHeight < 80;
  }

  function scrollToBottom() {
    el.chatLog.scrollTop = el.chatLog.scrollHeight;
  }

  async function loadHistory(cur) {
    const seq = ++cur.historySeq;
    let entries;
    try {
      entries = await cur.session.messages();
    } catch (e) {
      if (!live(cur) || seq !== cur.historySeq) return;
      if (e.status === 404) return; // reported by the summary request
      el.chatHistory.replaceChildren(h("p", { class: "notice error", role: "alert", text: "Could not load the history: " + errorMessage(e) }));
      return;
    }
    if (!live(cur) || seq !== cur.historySeq) return;
    const liveTurns = cur.assembler.liveTurnIds();
    const kept = entries.filter((e) => {
      if (!e || typeof e !== "object") return false;
      if (e.role === "user") return !(e.promptId !== undefined && cur.assembler.hasPrompt(e.promptId));
      return !(e.turnId !== undefined && liveTurns.has(e.turnId));
    });
    cur.historyByTurn.clear();
    cur.historyByPrompt.clear();
    const nodes = [];
    for (const m of historyToMessages(kept)) {
      const node = renderMessage(cur, m);
      nodes.push(node);
      if (m.role === "user" && m.promptId !== undefined) cur.historyByPrompt.set(m.promptId, node);
      else if (m.turnId !== undefined) {
        if (!cur.historyByTurn.has(m.turnId)) cur.historyByTurn.set(m.turnId, []);
        cur.historyByTurn.get(m.turnId).push(node);
      }
    }
    el.chatHistory.replaceChildren(...nodes);
    scrollToBottom();
  }

  // historyToMessages groups transcript entries into the message shape the assembler produces, so
  // one renderer draws history and live turns alike.
  function historyToMessages(entries) {
    const out = [];
    let last = null;
    entries.forEach((e, i) => {
      if (e.role === "user") {
        out.push({ id: "h-" + i, role: "user", promptId: e.promptId, text: e.text || "", via: e.via, queued: false, turnId: e.turnId, at: e.at,
          attachmentIds: Array.isArray(e.attachmentIds) ? e.attachmentIds.filter((x) => typeof x === "string") : undefined });
        last = null;
        return;
      }
      if (!last || last.turnId !== e.turnId) {
        last = { id: "h-" + i, role: "assistant", turnId: e.turnId, promptIds: [], status: "done", startSeen: true, parts: [], at: e.at };
        out.push(last);
      }
      if (e.role === "assistant") {
        last.parts.push({ type: "text", id: "h-" + i, text: e.text || "", state: "done" });
      } else if (e.role === "thinking") {
        last.parts.push({ type: "reasoning", id: "h-" + i, text: e.text || "", state: "done" });
      } else if (e.role === "tool") {
        let p = e.toolCallId !== undefined ? last.parts.find((x) => x.type === "tool" && x.toolCallId === e.toolCallId) : undefined;
        if (!p) {
          p = { type: "tool", toolCallId: e.toolCallId !== undefined ? e.toolCallId : "h-" + i, toolName: e.toolName || "tool", input: undefined, output: undefined, preliminary: false, errorText: undefined, state: "input-available" };
          last.parts.push(p);
        }
        if (e.toolName) p.toolName = e.toolName;
        if (e.args !== undefined) p.input = e.args;
        if (e.result !== undefined) {
          if (e.isError) {
            p.errorText = toolText(e.result);
            p.state = "output-error";
          } else {
            p.output = e.result;
            p.state = "output-available";
          }
        } else if (e.isError) {
          p.errorText = e.text || "the tool failed";
          p.state = "output-error";
        }
      }
    });
    return out;
  }

  function detailsFor(cur, key, cls, summary, body, defaultOpen) {
    const d = h("details", { class: cls, "data-key": key }, h("summary", null, summary), body);
    d.open = cur.openDetails.has(key) || (defaultOpen && !cur.openDetails.has("closed:" + key));
    d.addEventListener("toggle", () => {
      if (d.open) {
        cur.openDetails.add(key);
        cur.openDetails.delete("closed:" + key);
      } else {
        cur.openDetails.delete(key);
        cur.openDetails.add("closed:" + key);
      }
    });
    return d;
  }

  function renderMessage(cur, m) {
    if (m.role === "user") {
      return h("article", { class: "msg user", "data-testid": "chat-message-user", "data-prompt-id": m.promptId, title: m.at || null },
        h("div", { class: "msg-meta" },
          h("span", { class: "who", text: "You" }),
          m.via && m.via !== "browser" ? h("span", { class: "badge", text: "via " + m.via }) : null,
          m.queued ? h("span", { class: "badge queued", "data-testid": "chat-queued", text: "queued" }) : null,
          m.images ? h("span", { class: "badge", text: m.images + " image" + (m.images > 1 ? "s" : "") }) : null),
        m.attachmentIds && m.attachmentIds.length ? h("div", { class: "msg-attachments", "data-testid": "chat-attachments" },
          m.attachmentIds.map((id) => artifactView(cur, id, "chat-attachment"))) : null,
        m.text ? h("div", { class: "text", text: m.text }) : null);
    }
    const key = m.turnId !== undefined ? "t:" + m.turnId : m.id;
    const parts = m.parts.map((p, i) => {
      if (p.type === "text") return h("div", { class: "text", "data-testid": "chat-text", text: p.text });
      if (p.type === "reasoning") {
        return detailsFor(cur, key + ":r:" + (p.id !== undefined ? p.id : i), "thinking",
          [h("span", { text: p.state === "streaming" ? "Thinking…" : "Thinking" })],
          h("div", { class: "text", text: p.text }), false);
      }
      if (p.type === "tool") {
        const running = m.status === "streaming" ? "running…" : "no result";
        const state = p.state === "output-error" ? "failed" : p.state === "output-available" ? (p.preliminary ? running : "done") : running;
        const body = [
          h("div", { class: "tool-section" }, h("div", { class: "label", text: "Input" }),
            h("pre", { "data-testid": "tool-input", text: p.input !== undefined ? pretty(p.input) : p.inputText || "" })),
        ];
        if (p.state === "output-error") {
          body.push(h("div", { class: "tool-section" }, h("div", { class: "label", text: "Error" }),
            h("pre", { class: "error", "data-testid": "tool-error", text: p.errorText || "" })));
        } else if (p.output !== undefined) {
          body.push(h("div", { class: "tool-section" }, h("div", { class: "label", text: p.preliminary ? "Output so far" : "Output" }),
            h("pre", { "data-testid": "tool-output", text: toolText(p.output) })));
        }
        return h("div", { class: "tool tool-" + p.state, "data-testid": "chat-tool", "data-tool-call-id": p.toolCallId },
          detailsFor(cur, key + ":tool:" + p.toolCallId, "tool-details",
            [h("span", { class: "tool-name", text: p.toolName }), " ", h("span", { class: "badge tool-state", text: state })],
            body, false));
      }
      return null;
    });
    const footer = [];
    if (m.status === "streaming") footer.push(h("span", { class: "typing", "aria-label": "the agent is writing", text: "…" }));
    if (m.stopReason === "max_tokens") footer.push(h("div", { class: "notice", text: "The reply stopped at the length limit." }));
    if (m.status === "aborted") footer.push(h("div", { class: "notice", "data-testid": "chat-aborted", text: "Stopped." }));
    if (m.status === "error") footer.push(h("div", { class: "notice error", role: "alert", "data-testid": "chat-error", text: m.error || "The turn failed." }));
    return h("article", {
      class: "msg assistant status-" + m.status,
      "data-testid": "chat-message-assistant",
      "data-turn-id": m.turnId,
      "aria-busy": m.status === "streaming" ? "true" : null,
      title: m.at || null,
    }, h("div", { class: "msg-meta" }, h("span", { class: "who", text: "Agent" })), parts, footer);
  }

  // ---- composer

  async function sendPrompt() {
    const cur = app.current;
    const text = el.composerInput.value;
    if (!cur || el.send.disabled) return;
    if (text.trim() === "" && cur.drafts.length === 0) return;
    if (cur.drafts.some((d) => d.state === "error")) {
      toast("Remove the attachments that failed to upload, then send again.", "error");
      return;
    }
    el.send.disabled = true;
    try {
      // A prompt waits for its attachments: they are uploading already, their chips show how far.
      const drafts = cur.drafts.slice();
      if (drafts.some((d) => d.state === "uploading")) {
        el.send.textContent = "Uploading…";
        await Promise.allSettled(drafts.map((d) => d.done));
        el.send.textContent = "Send";
        if (!live(cur)) return;
        if (drafts.some((d) => d.state !== "done" && cur.drafts.includes(d))) {
          toast("An attachment did not upload; remove it or try again.", "error");
          return;
        }
      }
      const sent = drafts.filter((d) => d.state === "done" && cur.drafts.includes(d));
      if (text.trim() === "" && sent.length === 0) return;
      const ids = sent.map((d) => d.artifact.id);
      await cur.session.prompt(text, ids.length ? { attachmentIds: ids } : undefined);
      if (el.composerInput.value === text) el.composerInput.value = "";
      for (const d of sent) removeDraft(cur, d, true);
      autoSize();
    } catch (e) {
      toast("The message was not sent: " + errorMessage(e), "error");
    } finally {
      el.send.textContent = "Send";
      if (live(cur)) renderHeader(cur);
      el.send.disabled = el.composerInput.disabled;
      el.composerInput.focus();
    }
  }

  // ---- attachments: files attached in the composer upload at once (session.artifacts.upload),
  // each with its chip showing progress; the prompt names them by id (attachmentIds).

  const MAX_ATTACHMENTS = 32; // the daemon's limit per prompt
  let draftSeq = 0;

  function addFiles(files) {
    const cur = app.current;
    if (!cur || cur.closed || el.composerInput.disabled) return;
    const list = Array.from(files || []).filter((f) => f && typeof f.size === "number");
    for (const file of list) {
      if (cur.drafts.length >= MAX_ATTACHMENTS) {
        toast("A message takes at most " + MAX_ATTACHMENTS + " attachments.", "warning");
        break;
      }
      const d = {
        key: "d" + ++draftSeq,
        file: file,
        name: file.name || "file",
        size: file.size,
        type: file.type || "application/octet-stream",
        state: "uploading",
        loaded: 0,
        artifact: null,
        error: null,
        preview: isImageType(file.type) ? URL.createObjectURL(file) : null,
        controller: new AbortController(),
        node: null,
      };
      cur.drafts.push(d);
      d.done = cur.session.artifacts.upload(file, {
        name: d.name,
        signal: d.controller.signal,
        onProgress: (p) => {
          d.loaded = p.loaded;
          if (p.total) d.size = p.total;
          updateDraft(d);
        },
      }).then((res) => {
        if (!res || !res.artifact) throw new S.Error("invalid_result", "the daemon did not answer the artifact");
        d.state = "done";
        d.loaded = d.size;
        d.artifact = res.artifact;
        if (res.url) rememberArtifact(cur, res.artifact, res.url);
        updateDraft(d);
      }, (e) => {
        if (e && e.code === "aborted") return;
        d.state = "error";
        d.error = e;
        updateDraft(d);
        if (live(cur)) toast(d.name + " was not attached: " + uploadError(e).title, "error");
      });
    }
    renderDrafts(cur);
  }

  // uploadError words the daemon's refusals of an upload for people.
  function uploadError(e) {
    const code = e && e.code;
    const detail = e && e.message && e.message !== code ? e.message : "";
    const title = {
      too_large: "the file is too large",
      quota_exceeded: "this session's storage is full",
      session_ended: "the session has ended",
      send_failed: "the upload was interrupted",
      not_found: "the session no longer exists",
    }[code] || (detail || code || "the upload failed");
    return { title: title, detail: title === detail ? "" : detail };
  }

  function removeDraft(cur, d, sent) {
    const i = cur.drafts.indexOf(d);
    if (i < 0) return;
    cur.drafts.splice(i, 1);
    if (d.state === "uploading") d.controller.abort();
    if (d.preview) URL.revokeObjectURL(d.preview);
    // An uploaded file that was removed unsent is not needed any more.
    if (!sent && d.state === "done" && d.artifact) cur.session.artifacts.delete(d.artifact.id).catch(() => {});
    renderDrafts(cur);
  }

  function clearDrafts(cur) {
    for (const d of cur.drafts) {
      if (d.state === "uploading") d.controller.abort();
      if (d.preview) URL.revokeObjectURL(d.preview);
    }
    cur.drafts = [];
  }

  function renderDrafts(cur) {
    const drafts = cur ? cur.drafts : [];
    el.attachments.replaceChildren(...drafts.map((d) => d.node || (d.node = draftNode(cur, d))));
    for (const d of drafts) updateDraft(d);
    show(el.attachments, drafts.length > 0);
  }

  function draftNode(cur, d) {
    const icon = d.preview
      ? h("img", { class: "draft-thumb", src: d.preview, alt: "" })
      : h("span", { class: "file-icon", "aria-hidden": "true", text: extension(d.name) });
    const bar = h("span", { class: "draft-bar" });
    const progress = h("span", { class: "draft-progress", role: "progressbar", "aria-label": "Uploading " + d.name, "aria-valuemin": "0", "aria-valuemax": "100" }, bar);
    const status = h("span", { class: "draft-status" });
    const node = h("li", { class: "draft", "data-testid": "composer-attachment", "data-name": d.name },
      icon,
      h("span", { class: "draft-text" },
        h("span", { class: "draft-name", text: d.name, title: d.name }),
        status, progress),
      h("button", { type: "button", class: "ghost small draft-remove", "data-testid": "composer-attachment-remove",
        "aria-label": "Remove " + d.name, title: "Remove", text: "×", onclick: () => removeDraft(cur, d, false) }));
    node._parts = { bar: bar, progress: progress, status: status };
    return node;
  }

  function updateDraft(d) {
    const node = d.node;
    if (!node) return;
    const p = node._parts;
    const pct = d.size > 0 ? Math.min(100, Math.round((d.loaded / d.size) * 100)) : d.state === "done" ? 100 : 0;
    node.dataset.state = d.state;
    node.dataset.progress = String(pct);
    if (d.artifact) node.dataset.artifactId = d.artifact.id;
    p.bar.style.width = pct + "%";
    p.progress.setAttribute("aria-valuenow", String(pct));
    p.progress.hidden = d.state !== "uploading";
    if (d.state === "uploading") p.status.textContent = pct + "% of " + formatSize(d.size);
    else if (d.state === "done") p.status.textContent = formatSize(d.size);
    else {
      const why = uploadError(d.error);
      p.status.textContent = why.title.charAt(0).toUpperCase() + why.title.slice(1);
      p.status.title = why.detail;
    }
    p.status.className = "draft-status" + (d.state === "error" ? " error" : "");
    if (d.state === "error") node.setAttribute("title", uploadError(d.error).detail || "");
  }

  function formatSize(n) {
    if (!(n >= 0)) return "";
    if (n < 1024) return n + " B";
    if (n < 1024 * 1024) return (n / 1024).toFixed(n < 10 * 1024 ? 1 : 0) + " KB";
    if (n < 1024 * 1024 * 1024) return (n / (1024 * 1024)).toFixed(1) + " MB";
    return (n / (1024 * 1024 * 1024)).toFixed(1) + " GB";
  }

  function extension(name) {
    const m = /\.([A-Za-z0-9]{1,4})$/.exec(name || "");
    return m ? m[1].toUpperCase() : "FILE";
  }

  function isImageType(t) {
    return typeof t === "string" && /^image\/(png|jpe?g|gif|webp|avif|bmp|svg\+xml|x-icon|vnd\.microsoft\.icon)(;|$)/i.test(t);
  }

  el.attach.addEventListener("click", () => el.attachInput.click());
  el.attachInput.addEventListener("change", () => {
    addFiles(el.attachInput.files);
    el.attachInput.value = ""; // the same file can be chosen again
  });
  el.composerInput.addEventListener("paste", (ev) => {
    const files = ev.clipboardData && ev.clipboardData.files;
    if (files && files.length) {
      ev.preventDefault();
      addFiles(files);
    }
  });

  // Files dropped on the chat or the composer are attached; a drop anywhere else does nothing
  // (rather than the browser leaving the app to show the file).
  function carriesFiles(ev) {
    const types = ev.dataTransfer && ev.dataTransfer.types;
    return !!types && Array.from(types).includes("Files");
  }
  function canDrop() {
    return !!app.current && !el.composer.hidden && !el.composerInput.disabled;
  }
  let dragDepth = 0;
  el.chat.addEventListener("dragenter", (ev) => {
    if (!carriesFiles(ev) || !canDrop()) return;
    ev.preventDefault();
    dragDepth++;
    show(el.dropZone, true);
  });
  el.chat.addEventListener("dragover", (ev) => {
    if (!carriesFiles(ev) || !canDrop()) return;
    ev.preventDefault();
    ev.dataTransfer.dropEffect = "copy";
  });
  el.chat.addEventListener("dragleave", () => {
    dragDepth = Math.max(0, dragDepth - 1);
    if (dragDepth === 0) show(el.dropZone, false);
  });
  el.chat.addEventListener("drop", (ev) => {
    dragDepth = 0;
    show(el.dropZone, false);
    if (!carriesFiles(ev)) return;
    ev.preventDefault();
    if (canDrop()) addFiles(ev.dataTransfer.files);
  });
  for (const kind of ["dragover", "drop"]) {
    window.addEventListener(kind, (ev) => {
      if (carriesFiles(ev)) ev.preventDefault();
    });
  }

  // ---- artifacts shown in the chat and in generic panels

  function rememberArtifact(cur, artifact, url) {
    cur.artifacts.set(artifact.id, Promise.resolve({ artifact: artifact, url: url }));
  }

  // artifactInfo is the artifact's metadata and a signed URL, asked once per open session; a
  // URL that is about to expire is renewed by the client's url(id).
  function artifactInfo(cur, id) {
    let p = cur.artifacts.get(id);
    if (!p) {
      p = cur.session.artifacts.get(id).then((res) => {
        if (!res || !res.artifact) throw new S.Error("invalid_result", "the daemon did not answer the artifact");
        return { artifact: res.artifact };
      });
      p.catch(() => cur.artifacts.delete(id)); // asked again the next time it is drawn
      cur.artifacts.set(id, p);
    }
    return p.then((info) => cur.session.artifacts.url(id).then((url) => ({ artifact: info.artifact, url: url })));
  }

  // artifactView is an artifact as people see it: an image as a thumbnail that opens in the
  // lightbox, anything else as a file chip linking to it. It renders at once and fills in when the
  // artifact's metadata arrives.
  function artifactView(cur, id, testid) {
    const node = h("a", { class: "artifact loading", "data-testid": testid, "data-artifact-id": id, target: "_blank", rel: "noopener",
      title: id },
    h("span", { class: "file-icon", "aria-hidden": "true", text: "…" }),
    h("span", { class: "artifact-name", text: "loading…" }));
    artifactInfo(cur, id).then(({ artifact, url }) => {
      const name = artifact.name || id;
      node.href = url;
      node.title = name + " · " + formatSize(artifact.size);
      node.dataset.mediaType = artifact.mediaType || "";
      if (isImageType(artifact.mediaType)) {
        const img = h("img", { src: url, alt: name, loading: "lazy", decoding: "async" });
        node.className = "artifact thumb";
        node.dataset.kind = "image";
        node.replaceChildren(img);
        node.addEventListener("click", (ev) => {
          if (ev.button !== 0 || ev.metaKey || ev.ctrlKey || ev.shiftKey || ev.altKey) return; // new tab, as asked
          ev.preventDefault();
          openLightbox(cur, id, name);
        });
      } else {
        node.className = "artifact file";
        node.dataset.kind = "file";
        node.replaceChildren(
          h("span", { class: "file-icon", "aria-hidden": "true", text: extension(artifact.name || "") }),
          h("span", { class: "artifact-text" },
            h("span", { class: "artifact-name", text: name }),
            h("span", { class: "artifact-size muted", text: formatSize(artifact.size) })));
      }
    }, (e) => {
      node.className = "artifact file missing";
      node.dataset.kind = "missing";
      node.removeAttribute("href");
      node.title = id + ": " + errorMessage(e);
      node.replaceChildren(
        h("span", { class: "file-icon", "aria-hidden": "true", text: "?" }),
        h("span", { class: "artifact-text" },
          h("span", { class: "artifact-name", text: e && e.status === 404 ? "unavailable" : "not loaded" }),
          h("span", { class: "artifact-size muted", text: id })));
    });
    return node;
  }

  function openLightbox(cur, id, name) {
    artifactInfo(cur, id).then(({ url }) => {
      el.lightboxImg.src = url;
      el.lightboxImg.alt = name;
      el.lightboxName.textContent = name;
      el.lightboxOpen.href = url;
      el.lightbox.dataset.artifactId = id;
      if (!el.lightbox.open) el.lightbox.showModal();
    }, (e) => toast("Could not open the image: " + errorMessage(e), "error"));
  }
  el.lightbox.addEventListener("click", (ev) => {
    if (ev.target === el.lightbox) el.lightbox.close(); // the backdrop
  });
  el.lightbox.addEventListener("close", () => {
    el.lightboxImg.removeAttribute("src");
  });

  function autoSize() {
    const t = el.composerInput;
    t.style.height = "auto";
    t.style.height = Math.min(t.scrollHeight, 240) + "px";
  }

  el.composer.addEventListener("submit", (ev) => {
    ev.preventDefault();
    sendPrompt();
  });
  el.composerInput.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing && !ev.altKey && !ev.ctrlKey && !ev.metaKey) {
      ev.preventDefault();
      sendPrompt();
    }
  });
  el.composerInput.addEventListener("input", autoSize);
  document.querySelector(".skip-link").addEventListener("click", (ev) => {
    ev.preventDefault();
    if (!el.composer.hidden) el.composerInput.focus();
  });
  el.abort.addEventListener("click", async () => {
    const cur = app.current;
    if (!cur) return;
    el.abort.disabled = true;
    try {
      await cur.session.abort();
    } catch (e) {
      toast("Could not stop the turn: " + errorMessage(e), "error");
    } finally {
      el.abort.disabled = false;
    }
  });

  // ------------------------------------------------------------------ agent dialogs and notices

  function onUiRequest(cur, r) {
    if (!r || typeof r !== "object") return;
    if (r.resolved) {
      const card = cur.dialogs.get(r.id);
      if (card) card.remove();
      cur.dialogs.delete(r.id);
      return;
    }
    switch (r.method) {
      case "select":
      case "confirm":
      case "input":
      case "editor":
        showDialog(cur, r);
        break;
      case "notify":
        toast(r.message || r.title || "", r.notifyType === "error" ? "error" : r.notifyType === "warning" ? "warning" : "info");
        break;
      case "setStatus": {
        const key = r.statusKey || "";
        const old = cur.chips.get(key);
        if (old) old.remove();
        cur.chips.delete(key);
        if (r.statusText) {
          const chip = h("span", { class: "chip", "data-status-key": key, text: r.statusText });
          cur.chips.set(key, chip);
          el.statusChips.append(chip);
        }
        break;
      }
      case "setWidget": {
        const key = r.widgetKey || "";
        const old = cur.widgets.get(key);
        if (old) old.remove();
        cur.widgets.delete(key);
        if (Array.isArray(r.widgetLines) && r.widgetLines.length) {
          const w = h("pre", { class: "widget", "data-widget-key": key, "data-testid": "agent-widget", text: r.widgetLines.join("\n") });
          cur.widgets.set(key, w);
          el.widgets.append(w);
        }
        break;
      }
      case "setTitle":
        cur.agentTitle = r.title;
        renderHeader(cur);
        break;
      case "set_editor_text":
        el.composerInput.value = r.text || "";
        autoSize();
        break;
    }
  }

  function showDialog(cur, r) {
    const old = cur.dialogs.get(r.id);
    if (old) old.remove();
    const headingId = "dlg-" + String(r.id).replace(/[^A-Za-z0-9_-]/g, "_");
    const status = h("p", { class: "error", role: "alert", hidden: true });
    const card = h("section", {
      class: "dialog-card",
      "data-testid": "ui-request",
      "data-request-id": r.id,
      "data-method": r.method,
      "aria-labelledby": headingId,
    }, h("h3", { id: headingId, text: r.title || (r.method === "confirm" ? "Please confirm" : "The agent asks") }),
      r.message ? h("p", { class: "dialog-message", text: r.message }) : null);

    const answer = async (resp) => {
      for (const b of card.querySelectorAll("button, input, textarea")) b.disabled = true;
      status.hidden = true;
      try {
        await cur.session.answer(r.id, resp);
        card.remove();
        cur.dialogs.delete(r.id);
      } catch (e) {
        if (e.status === 409) {
          card.remove(); // someone else answered it, or the turn was cancelled
          cur.dialogs.delete(r.id);
          return;
        }
        status.textContent = "The answer was not sent: " + errorMessage(e);
        status.hidden = false;
        for (const b of card.querySelectorAll("button, input, textarea")) b.disabled = false;
      }
    };
    const cancel = h("button", { type: "button", class: "ghost", "data-testid": "ui-request-cancel", text: "Cancel", onclick: () => answer({ cancelled: true }) });

    if (r.method === "select") {
      const opts = Array.isArray(r.options) ? r.options : [];
      card.append(h("div", { class: "dialog-options", role: "group" },
        opts.map((o) => h("button", { type: "button", class: "option", "data-testid": "ui-request-option", text: String(o), onclick: () => answer({ value: o }) }))),
      h("div", { class: "dialog-actions" }, cancel));
    } else if (r.method === "confirm") {
      card.append(h("div", { class: "dialog-actions" },
        h("button", { type: "button", class: "primary", "data-testid": "ui-request-yes", text: "Yes", onclick: () => answer({ confirmed: true }) }),
        h("button", { type: "button", "data-testid": "ui-request-no", text: "No", onclick: () => answer({ confirmed: false }) })));
    } else {
      const field = r.method === "editor"
        ? h("textarea", { rows: 8, "data-testid": "ui-request-value", "aria-label": r.title || "Answer" })
        : h("input", { type: "text", "data-testid": "ui-request-value", "aria-label": r.title || "Answer", placeholder: r.placeholder || "" });
      field.value = r.prefill || "";
      const form = h("form", { class: "dialog-form" }, field,
        h("div", { class: "dialog-actions" },
          h("button", { type: "submit", class: "primary", "data-testid": "ui-request-submit", text: "Submit" }), cancel));
      form.addEventListener("submit", (ev) => {
        ev.preventDefault();
        answer({ value: field.value });
      });
      if (r.method === "input") {
        field.addEventListener("keydown", (ev) => {
          if (ev.key === "Escape") answer({ cancelled: true });
        });
      }
      card.append(form);
    }
    card.append(status);
    cur.dialogs.set(r.id, card);
    el.dialogs.append(card);
  }

  // ------------------------------------------------------------------ surfaces

  function scheduleSurfaces(cur) {
    if (cur.surfaceFrame) return;
    cur.surfaceFrame = nextFrame(() => {
      cur.surfaceFrame = 0;
      if (live(cur)) renderSurfaces(cur);
    });
  }

  // agentSettling: the surface list is not final while the agent is still starting.
  function agentSettling(cur, domain) {
    if (cur.session.ended) return false; // read-only for good, not waiting for anything
    if (!cur.session.surface(domain).known) return true;
    return !cur.status || cur.status.status === "starting";
  }

  // panelModules is the domain → module URL map of the session's agent (GET /api/agents), or null
  // while the session's agent is not known yet.
  function panelModules(cur) {
    const summary = cur.summary;
    const listed = app.sessions.find((x) => x.sessionId === cur.id);
    const name = (summary && summary.agent) || (listed && listed.agent);
    if (!name) return summary ? {} : null;
    const agent = app.agents.find((a) => a.name === name);
    return (agent && agent.panels) || {};
  }

  function renderSurfaces(cur) {
    const s = cur.session;
    const modules = panelModules(cur);
    if (!modules) return; // which panels to mount is known once the session's agent is
    // The agent's panels come first, in its order, shown even before their domains register (then
    // as waiting or unavailable); other domains follow, each while it is listed or has a snapshot.
    const declared = Object.keys(modules);
    const others = new Set();
    for (const x of s.surfaces()) others.add(x.domain);
    for (const k of s.store.keys()) if (k.startsWith(SURFACE_PREFIX)) others.add(k.slice(SURFACE_PREFIX.length));
    for (const d of declared) others.delete(d);
    const order = declared.concat(Array.from(others).sort());
    const nodes = [];
    for (const d of order) {
      const url = cur.failedPanels.has(d) ? undefined : modules[d];
      let panel = cur.panels.get(d);
      if (panel && panel.url !== url) {
        panel.dispose();
        panel.root.remove();
        panel = undefined;
      }
      if (!panel) {
        panel = url ? makeModulePanel(cur, d, url) : makeGenericPanel(cur, d);
        cur.panels.set(d, panel);
      }
      panel.update();
      nodes.push(panel.root);
    }
    for (const [d, panel] of cur.panels) {
      if (!order.includes(d)) {
        panel.dispose();
        panel.root.remove();
        cur.panels.delete(d);
      }
    }
    if (!nodes.length && !agentSettling(cur, "")) {
      nodes.push(cur.noSurfaces || (cur.noSurfaces = h("p", { class: "muted small", "data-testid": "surfaces-empty", text: "This agent has no surfaces." })));
    }
    // Reorder only when needed so focus inside a panel survives updates.
    const children = Array.from(el.surfacePanels.children);
    if (children.length !== nodes.length || children.some((c, i) => c !== nodes[i])) el.surfacePanels.replaceChildren(...nodes);
  }

  // panelShell is the frame every panel sits in: a heading with the domain and its rev, and the
  // body a panel renders into.
  function panelShell(domain, kind) {
    const tid = "surface-" + domain;
    const headingId = "panel-h-" + domain.replace(/[^A-Za-z0-9_-]/g, "_");
    const title = h("h2", { id: headingId, text: domain });
    const rev = h("span", { class: "rev muted", "data-testid": tid + "-rev" });
    const hosted = h("span", { class: "badge", hidden: true });
    const body = h("div", { class: "panel-body" });
    const root = h("section", { class: "panel " + kind, "data-testid": tid, "data-domain": domain, "aria-labelledby": headingId },
      h("header", { class: "panel-header" }, title, hosted, rev), body);
    return { root: root, title: title, rev: rev, hosted: hosted, body: body, tid: tid };
  }

  // makeModulePanel mounts the agent's panel module for domain: import(url), then
  // mount(element, api). The api is documented in docs/panels.md. A module that does not load or
  // whose mount throws is replaced by the generic panel, with a notice saying why.
  function makeModulePanel(cur, domain, url) {
    const s = cur.session;
    const shell = panelShell(domain, "module");
    const mountEl = h("div", { class: "panel-mount", "data-testid": shell.tid + "-mount" });
    shell.body.append(mountEl);
    shell.root.dataset.panel = "module";
    shell.root.setAttribute("aria-busy", "true");
    const listeners = new Set();
    const controller = new AbortController();
    let unmount = null;
    let disposed = false;
    let lastKey = "";

    const view = () => {
      const sf = s.surface(domain);
      return {
        domain: sf.domain,
        state: sf.state,
        rev: sf.rev,
        available: sf.available,
        known: sf.known,
        commands: sf.commands.filter((c) => typeof c === "string" && !c.startsWith(SURFACE_PREFIX)),
        hosted: sf.hosted,
        settling: !sf.available && agentSettling(cur, domain),
        ended: s.ended,
      };
    };
    const api = Object.freeze({
      domain: domain,
      session: s,
      base: new URL(".", new URL(url, location.href)).href,
      surface: view,
      run: (action, args) => s.run(domain, action, args),
      onChange: (cb) => {
        listeners.add(cb);
        return () => listeners.delete(cb);
      },
      bridge: () => (typeof s.bridge === "function" ? s.bridge(domain) : null),
      setTitle: (text) => {
        shell.title.textContent = text ? String(text) : domain;
      },
      h: h,
      errorMessage: errorMessage,
      toast: toast,
      signal: controller.signal,
    });

    function fail(what, e) {
      if (disposed) return;
      cur.failedPanels.set(domain, what + ": " + errorMessage(e));
      console.error("surfaced: the " + domain + " panel (" + url + ") " + what, e);
      scheduleSurfaces(cur);
    }

    import(url).then((mod) => {
      if (disposed || !live(cur)) return;
      if (!mod || typeof mod.mount !== "function") throw new TypeError("the module does not export mount(element, api)");
      let out;
      try {
        out = mod.mount(mountEl, api);
      } catch (e) {
        fail("failed to mount", e);
        return;
      }
      return Promise.resolve(out).then((r) => {
        if (typeof r === "function") unmount = r;
        else if (r && typeof r.unmount === "function") unmount = () => r.unmount();
        if (disposed) runUnmount();
        shell.root.removeAttribute("aria-busy");
        shell.root.dataset.mounted = "true";
      }, (e) => fail("failed to mount", e));
    }).catch((e) => fail("did not load", e));

    function runUnmount() {
      const f = unmount;
      unmount = null;
      if (!f) return;
      try {
        f();
      } catch (e) {
        console.error("surfaced: the " + domain + " panel's unmount threw", e);
      }
    }

    function update() {
      const v = view();
      shell.rev.textContent = v.rev >= 0 ? "rev " + v.rev : "";
      shell.hosted.textContent = v.hosted || "";
      shell.hosted.hidden = true;
      shell.root.dataset.available = v.available ? "true" : "false";
      const key = [v.rev, v.available, v.settling, v.ended, v.known, v.commands.join("\u0000")].join("|");
      if (key === lastKey) return;
      lastKey = key;
      for (const cb of Array.from(listeners)) {
        try {
          cb(v);
        } catch (e) {
          console.error("surfaced: a " + domain + " panel listener threw", e);
        }
      }
    }

    function dispose() {
      if (disposed) return;
      disposed = true;
      controller.abort();
      listeners.clear();
      runUnmount();
    }

    return { root: shell.root, update: update, dispose: dispose, url: url };
  }

  const ATT_REF = /\batt_[a-z2-7]{26}\b/g;
  const MAX_GALLERY = 24;

  // artifactRefs lists the artifact ids a snapshot mentions (in string values, alone or inside a
  // longer string such as a URL), in the order they first appear.
  function artifactRefs(state) {
    const seen = new Set();
    const walk = (v, depth) => {
      if (depth > 64 || seen.size >= 1000) return;
      if (typeof v === "string") {
        if (v.includes("att_")) for (const m of v.match(ATT_REF) || []) seen.add(m);
      } else if (Array.isArray(v)) {
        for (const x of v) walk(x, depth + 1);
      } else if (v && typeof v === "object") {
        for (const k of Object.keys(v)) walk(v[k], depth + 1);
      }
    };
    walk(state, 0);
    return Array.from(seen);
  }

  function makeGenericPanel(cur, domain) {
    const s = cur.session;
    const shell = panelShell(domain, "generic");
    const tid = shell.tid;
    const rev = shell.rev;
    const hosted = shell.hosted;
    const failed = cur.failedPanels.get(domain);
    const failedNote = failed ? h("p", { class: "notice error", role: "alert", "data-testid": tid + "-panel-failed",
      text: "The agent's " + domain + " panel " + failed + ". Showing the snapshot instead." }) : null;
    const unavailable = h("p", { class: "notice", "data-testid": tid + "-unavailable" });
    const snapshot = h("pre", { class: "snapshot", "data-testid": tid + "-state", tabindex: "0", "aria-label": domain + " snapshot" });
    const gallery = h("div", { class: "artifact-gallery", "data-testid": tid + "-artifacts", "aria-label": "Artifacts in the " + domain + " snapshot" });
    let galleryKey = "";
    const action = h("select", { "data-testid": tid + "-action" });
    const args = h("textarea", { rows: 3, spellcheck: "false", placeholder: "{ }", "data-testid": tid + "-args" });
    const run = h("button", { type: "submit", class: "primary", "data-testid": tid + "-run", text: "Run" });
    const result = h("pre", { class: "result", "data-testid": tid + "-result", role: "status", hidden: true });
    const form = h("form", { class: "command-form", "data-testid": tid + "-form" },
      h("label", { class: "field" }, h("span", { text: "Command" }), action),
      h("label", { class: "field" }, h("span", { text: "Args (JSON, optional)" }), args),
      h("div", { class: "form-actions" }, run),
      result);
    let pending = false;
    let commandsKey = "";

    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      if (pending || !action.value) return;
      let parsed;
      const raw = args.value.trim();
      if (raw !== "") {
        try {
          parsed = JSON.parse(raw);
        } catch (e) {
          showResult(false, "The args are not valid JSON: " + e.message);
          return;
        }
      }
      pending = true;
      run.disabled = true;
      const r = await s.run(domain, action.value, parsed);
      pending = false;
      if (!live(cur)) return;
      if (r.ok) showResult(true, r.data === undefined ? "ok" : pretty(r.data));
      else showResult(false, errorMessage(r.error));
      update();
    });

    function showResult(ok, text) {
      result.hidden = false;
      result.className = "result " + (ok ? "ok" : "error");
      result.dataset.ok = ok ? "true" : "false";
      result.textContent = (ok ? "ok: " : "error: ") + text;
    }

    const root = shell.root;
    const body = shell.body;

    function update() {
      const sf = s.surface(domain);
      const commands = sf.commands.filter((c) => typeof c === "string" && !c.startsWith(SURFACE_PREFIX));
      const key = commands.join("\u0000");
      if (key !== commandsKey) {
        const prev = action.value;
        action.replaceChildren(...commands.map((c) => h("option", { value: c, text: c })));
        if (commands.includes(prev)) action.value = prev;
        commandsKey = key;
      }
      hosted.textContent = sf.hosted || "";
      hosted.hidden = !sf.hosted;
      rev.textContent = sf.rev >= 0 ? "rev " + sf.rev : "no snapshot";
      snapshot.textContent = sf.rev >= 0 ? pretty(sf.state) : "—";
      run.disabled = pending || commands.length === 0;
      const ids = sf.rev >= 0 ? artifactRefs(sf.state) : [];
      const refsKey = ids.join(" ");
      if (refsKey !== galleryKey) {
        galleryKey = refsKey;
        const shown = ids.slice(0, MAX_GALLERY);
        const more = ids.length > shown.length ? [h("span", { class: "muted small", text: "+" + (ids.length - shown.length) + " more" })] : [];
        gallery.replaceChildren(...shown.map((id) => artifactView(cur, id, tid + "-artifact")), ...more);
      }
      const nodes = [];
      if (failedNote) nodes.push(failedNote);
      if (!sf.available) {
        unavailable.textContent = s.ended ? "The session has ended: " + domain + " is read-only." : domain + " surface unavailable (read-only)";
        nodes.push(unavailable);
      }
      nodes.push(snapshot);
      if (ids.length) nodes.push(gallery);
      if (sf.available) nodes.push(form);
      const kids = Array.from(body.children);
      if (kids.length !== nodes.length || kids.some((c, i) => c !== nodes[i])) body.replaceChildren(...nodes);
    }

    return { root: root, update: update, dispose: () => {} };
  }

  // ------------------------------------------------------------------ boot

  async function boot() {
    dropTokenFromURL();
    await loadMe();
    if (app.me && !app.me.signedIn && app.me.signIn) {
      if (!sessionStorage.getItem(SIGNED_OUT)) {
        location.assign(signInURL()); // the identity provider signs this browser in
        return;
      }
      showSignedOut(true);
      return;
    }
    if (app.me && app.me.signedIn) sessionStorage.removeItem(SIGNED_OUT);
    renderAccount();
    try {
      const [agents, sessions] = await Promise.all([client.agents(), client.sessions()]);
      app.agents = agents;
      app.sessions = sessions;
    } catch (e) {
      if (e.status === 401) {
        showSignedOut();
        return;
      }
      el.emptyState.replaceChildren(h("p", { class: "notice error", role: "alert", text: "surfaced is not reachable: " + errorMessage(e) }));
      return;
    }
    renderAgents();
    renderSessionList();
    // Only "#/..." hashes are routes; an in-page anchor must not close the open session.
    window.addEventListener("hashchange", () => {
      if (location.hash === "" || location.hash.startsWith("#/")) route(false);
    });
    window.addEventListener("focus", refreshSessions);
    await route(true);
  }

  boot();
})();
