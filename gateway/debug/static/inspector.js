// surfaced mailbox inspector: a live table of /debug/actors/stream.
// Plain JavaScript, no dependencies. Every value from the daemon goes into
// the page as text (textContent), never as HTML: session ids and domain
// names come from agents.
(function () {
  "use strict";

  const $ = (id) => document.getElementById(id);
  const rows = $("rows");
  const statusEl = $("status");
  const kindEl = $("kind");
  const sessionEl = $("session");
  const sortEl = $("sort");
  const pauseEl = $("pause");
  let source = null;
  let last = null;

  function setStatus(text, cls) {
    statusEl.textContent = text;
    statusEl.className = "status " + (cls || "");
  }

  // Filters live in the page's query string, so a view can be shared.
  function readFilters() {
    const q = new URLSearchParams(location.search);
    kindEl.value = q.get("kind") || "";
    sessionEl.value = q.get("session") || "";
    sortEl.value = q.get("sort") || "";
  }

  function query() {
    const q = new URLSearchParams();
    if (kindEl.value) q.set("kind", kindEl.value);
    if (sessionEl.value.trim()) q.set("session", sessionEl.value.trim());
    if (sortEl.value) q.set("sort", sortEl.value);
    return q.toString();
  }

  function connect() {
    if (source) source.close();
    const qs = query();
    history.replaceState(null, "", qs ? "?" + qs : location.pathname);
    setStatus("connecting…");
    source = new EventSource("actors/stream" + (qs ? "?" + qs : ""));
    source.addEventListener("actors", (ev) => {
      setStatus("live", "live");
      last = JSON.parse(ev.data);
      if (!pauseEl.checked) render(last);
    });
    source.addEventListener("end", (ev) => {
      let reason = "ended";
      try { reason = JSON.parse(ev.data).reason; } catch (e) { /* keep default */ }
      source.close();
      setStatus("stream ended: " + reason, "down");
    });
    source.onerror = () => {
      if (source.readyState === EventSource.CLOSED) {
        setStatus("disconnected (the daemon refused the stream; is it in --dev mode, and are you signed in?)", "down");
      } else {
        setStatus("reconnecting…", "down");
      }
    };
  }

  function fmtUS(us) {
    if (!us) return "–";
    if (us < 1000) return us + "µs";
    if (us < 1e6) return (us / 1000).toFixed(us < 10000 ? 2 : 1) + "ms";
    return (us / 1e6).toFixed(2) + "s";
  }

  function fmtMS(ms) {
    if (ms == null) return "";
    if (ms === 0) return "<1ms";
    return fmtUS(ms * 1000);
  }

  function fmtAge(started) {
    const s = Math.max(0, Math.floor((Date.now() - Date.parse(started)) / 1000));
    if (s < 60) return s + "s";
    if (s < 3600) return Math.floor(s / 60) + "m" + String(s % 60).padStart(2, "0") + "s";
    return Math.floor(s / 3600) + "h" + String(Math.floor(s / 60) % 60).padStart(2, "0") + "m";
  }

  function cell(tr, text, cls, col) {
    const td = document.createElement("td");
    td.textContent = text;
    if (cls) td.className = cls;
    td.dataset.col = col;
    tr.appendChild(td);
    return td;
  }

  function render(report) {
    $("node").textContent = "node " + report.node;
    const actors = report.actors || [];
    $("count").textContent = actors.length + (actors.length === 1 ? " actor" : " actors");
    $("empty").hidden = actors.length > 0;
    const maxDepth = actors.reduce((m, a) => Math.max(m, a.depth), 0);
    const frag = document.createDocumentFragment();
    for (const a of actors) {
      const tr = document.createElement("tr");
      tr.dataset.testid = "actor-row";
      tr.dataset.id = a.id;
      tr.dataset.kind = a.kind;
      tr.dataset.domain = a.domain || "";
      if (a.current_for_ms != null && a.current_for_ms > 1000) tr.className = "stuck";
      else if (a.depth > 0) tr.className = "busy";
      cell(tr, a.kind, "", "kind");
      const s = cell(tr, a.session, "session", "session");
      s.title = a.session;
      cell(tr, a.domain || "", "", "domain");
      const d = cell(tr, "", "num", "depth");
      const wrap = document.createElement("span");
      wrap.className = "depth";
      if (a.depth > 0) {
        const bar = document.createElement("span");
        bar.className = "bar";
        // Log scale: 1 and 1000 both stay visible.
        bar.style.width = Math.max(2, Math.round(60 * Math.log1p(a.depth) / Math.log1p(maxDepth))) + "px";
        wrap.appendChild(bar);
      }
      const n = document.createElement("span");
      n.textContent = String(a.depth);
      n.dataset.testid = "depth";
      wrap.appendChild(n);
      d.appendChild(wrap);
      cell(tr, String(a.posted), "num", "posted");
      cell(tr, String(a.processed), "num", "processed");
      // 0 with a non-zero p99 is a median under 1 µs, not an empty window.
      cell(tr, a.p50_us === 0 && a.p99_us > 0 ? "<1µs" : fmtUS(a.p50_us), "num", "p50");
      cell(tr, fmtUS(a.p99_us), "num", "p99");
      cell(tr, a.current || "", "", "current");
      cell(tr, fmtMS(a.current_for_ms), "num", "for");
      cell(tr, fmtAge(a.started), "num", "up");
      const id = cell(tr, a.id, "id", "id");
      id.title = a.id;
      frag.appendChild(tr);
    }
    rows.replaceChildren(frag);
  }

  readFilters();
  let typing = null;
  kindEl.addEventListener("change", connect);
  sortEl.addEventListener("change", connect);
  sessionEl.addEventListener("input", () => {
    clearTimeout(typing);
    typing = setTimeout(connect, 300);
  });
  pauseEl.addEventListener("change", () => {
    if (!pauseEl.checked && last) render(last);
  });
  $("filters").addEventListener("submit", (ev) => ev.preventDefault());
  connect();
})();
