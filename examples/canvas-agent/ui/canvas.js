// The Canvas workbench: the panel of the domain "canvas" (docs/panels.md describes mount and api).
//
// The snapshot is the gallery: {items:[{id, derivedFrom?, params?, createdAt, name?}], current,
// livePreview?:{stage, progress, artifact?, task?}, hidden?}. It holds artifact ids only; the
// pictures come from signed URLs (session.artifacts.url), uploads go to the artifact API and are
// then registered, edits are commands, and "Ask about it" sends a surface-op through the
// conversation bridge with the image attached.

const EDITS = [
  { key: "rotl", group: "transform", short: "Left", label: "Rotate left", icon: "↺", action: "rotate", args: () => ({ degrees: -90 }) },
  { key: "rotr", group: "transform", short: "Right", label: "Rotate right", icon: "↻", action: "rotate", args: () => ({ degrees: 90 }) },
  { key: "fliph", group: "transform", short: "Flip ↔", label: "Flip horizontally", icon: "⇋", action: "flip", args: () => ({ axis: "horizontal" }) },
  { key: "flipv", group: "transform", short: "Flip ↕", label: "Flip vertically", icon: "⇅", action: "flip", args: () => ({ axis: "vertical" }) },
  { key: "crop", group: "transform", short: "Crop", label: "Crop to the centre", icon: "⊡", action: "crop", args: (dim) => centreCrop(dim) },
  { key: "resize", group: "transform", short: "Half", label: "Half size", icon: "½", action: "resize", args: () => ({ scale: 0.5 }) },
  { key: "invert", group: "transform", short: "Invert", label: "Invert", icon: "◩", action: "invert", args: () => ({}) },
  { key: "gray", group: "adjust", short: "B&W", label: "Black and white", icon: "◐", action: "grayscale", args: () => ({}) },
  { key: "bright", group: "adjust", short: "Brighter", label: "Brighter", icon: "☀", action: "adjust", args: () => ({ brightness: 15 }) },
  { key: "dark", group: "adjust", short: "Darker", label: "Darker", icon: "☾", action: "adjust", args: () => ({ brightness: -15 }) },
  { key: "contrast", group: "adjust", short: "Contrast", label: "More contrast", icon: "◑", action: "adjust", args: () => ({ contrast: 20 }) },
  { key: "blur", group: "adjust", short: "Blur", label: "Blur", icon: "◌", action: "blur", args: () => ({ sigma: 2 }) },
  { key: "sharpen", group: "adjust", short: "Sharpen", label: "Sharpen", icon: "◇", action: "sharpen", args: () => ({ sigma: 1.2 }) },
];

const OP_LABELS = {
  rotate: (p) => "Rotated " + fmtNum(p.degrees) + "°",
  flip: (p) => "Flipped " + (p.axis || ""),
  crop: (p) => "Cropped to " + p.w + "×" + p.h,
  resize: (p) => "Resized to " + p.width + "×" + p.height,
  grayscale: () => "Black and white",
  adjust: (p) => capitalize(["brightness", "contrast", "saturation"].filter((k) => p[k] !== undefined).map((k) => k + " " + signed(p[k])).join(", ")) || "Adjusted",
  blur: (p) => "Blurred (σ " + fmtNum(p.sigma) + ")",
  sharpen: (p) => "Sharpened (σ " + fmtNum(p.sigma) + ")",
  invert: () => "Inverted",
  generate: (p) => "Generated: “" + (p.prompt || "") + "”",
  edit: (p) => (Array.isArray(p.steps) ? p.steps.map(describeParams).join(", then ") : "Edited"),
};

function fmtNum(n) {
  return typeof n === "number" ? String(Math.round(n * 100) / 100) : String(n);
}
function capitalize(s) {
  return s ? s[0].toUpperCase() + s.slice(1) : s;
}
function signed(n) {
  return (n > 0 ? "+" : "") + fmtNum(n);
}
function describeParams(p) {
  if (!p || typeof p !== "object") return "";
  const f = OP_LABELS[p.op];
  return f ? f(p) : p.op ? String(p.op) : "";
}
function centreCrop(dim) {
  if (!dim) return null;
  const w = Math.max(1, Math.round(dim.w * 0.8));
  const h = Math.max(1, Math.round(dim.h * 0.8));
  return { x: Math.floor((dim.w - w) / 2), y: Math.floor((dim.h - h) / 2), w, h };
}
function shortId(id) {
  return typeof id === "string" && id.length > 14 ? id.slice(0, 8) + "…" + id.slice(-4) : String(id || "");
}
function timeAgo(iso) {
  const t = Date.parse(iso);
  if (!Number.isFinite(t)) return "";
  const s = Math.max(0, (Date.now() - t) / 1000);
  if (s < 45) return "just now";
  if (s < 3600) return Math.round(s / 60) + " min ago";
  if (s < 86400) return Math.round(s / 3600) + " h ago";
  return new Date(t).toLocaleDateString();
}

// el builds an element; text is always textContent, never HTML.
function el(tag, props, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "text") node.textContent = String(v);
    else if (k === "class") node.className = v;
    else if (k.startsWith("on") && typeof v === "function") node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  node.append(...children.filter((c) => c !== null && c !== undefined && c !== false));
  return node;
}

export function mount(root, api) {
  const session = api.session;
  const arts = session && session.artifacts ? session.artifacts : null; // /surfaced.js: upload, url, on
  const tid = (s) => "canvas-" + s;

  // ------------------------------------------------------------ signed URLs
  const urls = new Map(); // id → Promise<string>
  function urlOf(id) {
    if (!urls.has(id)) {
      const p = arts && typeof arts.url === "function"
        ? arts.url(id)
        : Promise.resolve((session.client && session.client.base ? session.client.base : "") + "/api/artifacts/" + encodeURIComponent(id) + "/content");
      p.catch(() => urls.delete(id)); // try again next render
      urls.set(id, p);
    }
    return urls.get(id);
  }
  // setImage points img at an artifact once its URL is known; a stale answer is ignored.
  function setImage(img, id) {
    if (img.dataset.att === id) return;
    img.dataset.att = id;
    img.removeAttribute("src");
    img.classList.remove("is-broken");
    urlOf(id).then((u) => {
      if (img.dataset.att === id && !api.signal.aborted) img.src = u;
    }, () => img.classList.add("is-broken"));
  }

  // ------------------------------------------------------------ structure
  root.append(el("link", { rel: "stylesheet", href: new URL("canvas.css", import.meta.url).href }));
  // The frame's heading names the workbench; the panel's own top row keeps the status and actions.
  const framed = typeof api.setTitle === "function";
  if (framed) api.setTitle("Canvas");
  const fileInput = el("input", { type: "file", accept: "image/*", multiple: true, hidden: true, "data-testid": tid("file") });
  const uploadBtn = el("button", { type: "button", class: "cv-btn cv-btn-primary", "data-testid": tid("upload"), title: "Upload images (or drop them on the canvas)" },
    el("span", { class: "cv-ico", "aria-hidden": "true", text: "⤒" }), el("span", { text: "Upload" }));
  const syncBtn = el("button", { type: "button", class: "cv-btn cv-btn-ghost", "data-testid": tid("sync"), title: "Rebuild the gallery from the session's images", "aria-label": "Refresh the gallery" },
    el("span", { class: "cv-ico", "aria-hidden": "true", text: "⟳" }));
  const status = el("span", { class: "cv-status", "data-testid": tid("status"), role: "status" });
  const toolbar = el("div", { class: "cv-top" },
    el("div", { class: "cv-brand" }, el("span", { class: "cv-logo", "aria-hidden": "true" }), framed ? null : el("span", { class: "cv-title", text: "Canvas" }), status),
    el("div", { class: "cv-top-actions" }, syncBtn, uploadBtn, fileInput));

  const notice = el("div", { class: "cv-notice", role: "alert", "data-testid": tid("unavailable"), hidden: true });
  const errorBar = el("div", { class: "cv-error", role: "alert", "data-testid": tid("error"), hidden: true });

  const stageImg = el("img", { class: "cv-stage-img", alt: "", "data-testid": tid("stage-image"), draggable: "false" });
  const previewImg = el("img", { class: "cv-preview-img", alt: "Live preview", "data-testid": tid("preview-image") });
  const previewStage = el("span", { class: "cv-preview-stage", "data-testid": tid("preview-stage") });
  const previewTask = el("span", { class: "cv-preview-task" });
  const previewBar = el("span", { class: "cv-progress-bar" });
  const preview = el("div", { class: "cv-preview", "data-testid": tid("live-preview"), hidden: true, "aria-live": "polite" },
    previewImg,
    el("div", { class: "cv-preview-info" },
      el("div", { class: "cv-preview-head" }, el("span", { class: "cv-pulse", "aria-hidden": "true" }), previewStage, previewTask),
      el("span", { class: "cv-progress" }, previewBar)));
  const empty = el("div", { class: "cv-empty", "data-testid": tid("empty") },
    el("div", { class: "cv-empty-art", "aria-hidden": "true" }),
    el("p", { class: "cv-empty-title", text: "Your canvas is empty" }),
    el("p", { class: "cv-empty-text", text: "Drop an image here, upload one, or ask the chat to “draw a sunset over the sea”." }));
  const dropHint = el("div", { class: "cv-drop", "aria-hidden": "true" }, el("span", { text: "Drop images to add them" }));
  const stage = el("div", { class: "cv-stage", "data-testid": tid("stage") }, stageImg, empty, preview, dropHint);

  const infoTitle = el("h3", { class: "cv-info-title", "data-testid": tid("stage-title") });
  const infoMeta = el("p", { class: "cv-info-meta", "data-testid": tid("stage-meta") });
  const lineage = el("div", { class: "cv-lineage", "data-testid": tid("lineage") });
  const askBtn = el("button", { type: "button", class: "cv-btn cv-btn-accent", "data-testid": tid("ask"), title: "Send this image to the chat" },
    el("span", { class: "cv-ico", "aria-hidden": "true", text: "❝" }), el("span", { text: "Ask about it" }));
  const deleteBtn = el("button", { type: "button", class: "cv-btn cv-btn-ghost cv-danger", "data-testid": tid("delete"), title: "Remove from the gallery", "aria-label": "Remove from the gallery" },
    el("span", { class: "cv-ico", "aria-hidden": "true", text: "✕" }));
  const info = el("div", { class: "cv-info" },
    el("div", { class: "cv-info-text" }, infoTitle, infoMeta, lineage),
    el("div", { class: "cv-info-actions" }, askBtn, deleteBtn));

  const editButtons = EDITS.map((e) =>
    el("button", { type: "button", class: "cv-tool", "data-testid": tid("edit-" + e.key), "data-action": e.action, title: e.label, "aria-label": e.label },
      el("span", { class: "cv-tool-ico", "aria-hidden": "true", text: e.icon }), el("span", { class: "cv-tool-label", text: e.short })));
  const toolGroup = (name, label) => el("div", { class: "cv-tool-group", role: "group", "aria-label": label },
    el("span", { class: "cv-tool-group-label", "aria-hidden": "true", text: label }),
    ...editButtons.filter((_, i) => EDITS[i].group === name));
  const tools = el("div", { class: "cv-tools", role: "toolbar", "aria-label": "Edit the image" }, toolGroup("transform", "Transform"), toolGroup("adjust", "Adjust"));

  const galleryCount = el("span", { class: "cv-count", "data-testid": tid("count") });
  const gallery = el("ul", { class: "cv-gallery", "data-testid": tid("gallery"), "aria-label": "Images" });
  const galleryWrap = el("section", { class: "cv-gallery-wrap" }, el("div", { class: "cv-gallery-head" }, el("h3", { text: "Gallery" }), galleryCount), gallery);

  const uploads = el("div", { class: "cv-uploads", "data-testid": tid("uploads"), "aria-live": "polite" });
  const body = el("div", { class: "cv-root", "data-testid": tid("root") }, toolbar, notice, errorBar, el("div", { class: "cv-main" }, el("div", { class: "cv-work" }, stage, info, tools), galleryWrap), uploads);
  root.append(body);

  // ------------------------------------------------------------ state
  let pending = null; // the action running, for busy states
  let lastError = "";
  let dims = new Map(); // id → {w, h} (natural size, learned from the loaded image)

  function view() {
    const sf = api.surface();
    const st = sf.state && typeof sf.state === "object" ? sf.state : {};
    const items = Array.isArray(st.items) ? st.items.filter((it) => it && typeof it.id === "string") : [];
    const current = items.find((it) => it.id === st.current) || items[items.length - 1] || null;
    const lp = st.livePreview && typeof st.livePreview === "object" ? st.livePreview : null;
    return { sf, items, current, lp };
  }

  function setError(msg) {
    lastError = msg || "";
    errorBar.textContent = lastError;
    errorBar.hidden = !lastError;
  }

  async function run(action, args, label) {
    if (pending) return null;
    pending = label || action;
    setError("");
    render();
    let r;
    try {
      r = await api.run(action, args);
    } catch (e) {
      r = { ok: false, error: e };
    }
    pending = null;
    if (api.signal.aborted) return r;
    if (!r.ok) setError((label || action) + " failed: " + api.errorMessage(r.error));
    render();
    return r;
  }

  // ------------------------------------------------------------ uploads
  async function upload(files) {
    const list = Array.from(files || []).filter((f) => f && /^image\//.test(f.type));
    if (!list.length) {
      if (files && files.length) setError("Only images can go on the canvas.");
      return;
    }
    if (!arts || typeof arts.upload !== "function") {
      setError("Uploading needs the artifact API, which this page does not have.");
      return;
    }
    if (!view().sf.available) {
      setError("The canvas is read-only right now.");
      return;
    }
    setError("");
    for (const file of list) {
      const row = el("div", { class: "cv-upload" }, el("span", { class: "cv-upload-name", text: file.name || "image" }), el("span", { class: "cv-progress" }, el("span", { class: "cv-progress-bar" })));
      const bar = row.querySelector(".cv-progress-bar");
      uploads.append(row);
      try {
        const res = await arts.upload(file, {
          name: file.name || undefined,
          meta: { canvas: { role: "image" } },
          signal: api.signal,
          onProgress: (p) => {
            if (p.total) bar.style.width = Math.round((100 * p.loaded) / p.total) + "%";
          },
        });
        bar.style.width = "100%";
        const r = await api.run("register", { attachmentId: res.artifact.id });
        if (!r.ok) setError("Adding " + (file.name || "the image") + " failed: " + api.errorMessage(r.error));
      } catch (e) {
        if (!api.signal.aborted) setError("Uploading " + (file.name || "the image") + " failed: " + api.errorMessage(e));
      } finally {
        row.remove();
      }
    }
    if (!api.signal.aborted) render();
  }

  uploadBtn.addEventListener("click", () => fileInput.click());
  fileInput.addEventListener("change", () => {
    const files = Array.from(fileInput.files || []);
    fileInput.value = "";
    upload(files);
  });
  let dragDepth = 0;
  const hasFiles = (ev) => ev.dataTransfer && Array.from(ev.dataTransfer.types || []).includes("Files");
  body.addEventListener("dragenter", (ev) => {
    if (!hasFiles(ev)) return;
    ev.preventDefault();
    dragDepth++;
    body.classList.add("is-dragging");
  });
  body.addEventListener("dragover", (ev) => {
    if (!hasFiles(ev)) return;
    ev.preventDefault();
    ev.dataTransfer.dropEffect = view().sf.available ? "copy" : "none";
  });
  body.addEventListener("dragleave", () => {
    dragDepth = Math.max(0, dragDepth - 1);
    if (!dragDepth) body.classList.remove("is-dragging");
  });
  body.addEventListener("drop", (ev) => {
    if (!hasFiles(ev)) return;
    ev.preventDefault();
    dragDepth = 0;
    body.classList.remove("is-dragging");
    upload(ev.dataTransfer.files);
  });

  // ------------------------------------------------------------ actions
  syncBtn.addEventListener("click", () => run("sync", undefined, "Refresh"));
  editButtons.forEach((b, i) => {
    b.addEventListener("click", () => {
      const { current } = view();
      if (!current) return;
      const e = EDITS[i];
      const args = e.args(dims.get(current.id));
      if (!args) {
        setError("Wait for the image to load, then crop.");
        return;
      }
      run(e.action, Object.assign({ attachmentId: current.id }, args), e.label);
    });
  });
  deleteBtn.addEventListener("click", () => {
    const { current } = view();
    if (current) run("delete", { attachmentId: current.id }, "Remove");
  });
  askBtn.addEventListener("click", async () => {
    const { current } = view();
    if (!current || pending) return;
    const bridge = api.bridge();
    if (!bridge) {
      setError("This page has no conversation bridge.");
      return;
    }
    pending = "Ask";
    setError("");
    render();
    const op = {
      title: "Let's talk about this image" + (current.name ? " (" + current.name + ")" : "") + ".",
      tool: "canvas.discuss",
      params: [["attachmentId", current.id], ["derivedFrom", current.derivedFrom], ["edit", describeParams(current.params)]],
      fallback: { action: "select", args: { attachmentId: current.id } },
    };
    const r = await bridge.prompt(op, { attachmentIds: [current.id] });
    pending = null;
    if (api.signal.aborted) return;
    if (!r.ok) setError("Could not send it to the chat: " + api.errorMessage(r.error));
    else if (r.channel === "prompt" && typeof api.toast === "function") api.toast("Sent to the chat" + (r.queued ? " (queued)" : ""));
    render();
  });
  stageImg.addEventListener("load", () => {
    const id = stageImg.dataset.att;
    if (id) dims.set(id, { w: stageImg.naturalWidth, h: stageImg.naturalHeight });
    stage.classList.add("has-image");
    renderInfo();
  });
  stageImg.addEventListener("error", () => stageImg.classList.add("is-broken"));

  // ------------------------------------------------------------ rendering
  function thumb(it, items, current) {
    let li = gallery.querySelector('li[data-id="' + CSS.escape(it.id) + '"]');
    if (!li) {
      const img = el("img", { alt: "", loading: "lazy", draggable: "false" });
      img.addEventListener("error", () => img.classList.add("is-broken"));
      const btn = el("button", { type: "button", class: "cv-thumb", "data-testid": tid("thumb"), "data-id": it.id }, img, el("span", { class: "cv-thumb-badge" }));
      btn.addEventListener("click", () => {
        if (view().current && view().current.id === it.id) return;
        run("select", { attachmentId: it.id }, "Select");
      });
      li = el("li", { "data-id": it.id }, btn);
      setImage(img, it.id);
    }
    const btn = li.firstChild;
    const selected = current && current.id === it.id;
    btn.classList.toggle("is-current", !!selected);
    btn.setAttribute("aria-pressed", selected ? "true" : "false");
    const label = describeParams(it.params) || it.name || "Uploaded image";
    btn.title = label;
    btn.setAttribute("aria-label", label + (selected ? " (on the canvas)" : ""));
    const badge = btn.querySelector(".cv-thumb-badge");
    badge.textContent = it.params && it.params.op === "generate" ? "AI" : it.derivedFrom ? "edit" : "";
    badge.hidden = !badge.textContent;
    return li;
  }

  function renderInfo() {
    const { items, current } = view();
    if (!current) {
      infoTitle.textContent = "";
      infoMeta.textContent = "";
      lineage.replaceChildren();
      return;
    }
    infoTitle.textContent = describeParams(current.params) || current.name || "Uploaded image";
    const d = dims.get(current.id);
    const bits = [];
    if (current.name) bits.push(current.name);
    if (d) bits.push(d.w + " × " + d.h);
    const ago = timeAgo(current.createdAt);
    if (ago) bits.push(ago);
    infoMeta.textContent = bits.join(" · ");
    // Lineage: the chain of sources, newest first, as far as the gallery knows them.
    const chain = [];
    let src = current.derivedFrom;
    const seen = new Set([current.id]);
    while (src && !seen.has(src) && chain.length < 6) {
      seen.add(src);
      const parent = items.find((x) => x.id === src);
      chain.push({ id: src, item: parent });
      src = parent ? parent.derivedFrom : "";
    }
    const nodes = [];
    if (chain.length) {
      nodes.push(el("span", { class: "cv-lineage-label", text: "Derived from" }));
      chain.forEach((c, i) => {
        if (i) nodes.push(el("span", { class: "cv-lineage-sep", "aria-hidden": "true", text: "←" }));
        const label = c.item ? describeParams(c.item.params) || c.item.name || shortId(c.id) : shortId(c.id) + " (not in the gallery)";
        const chip = el("button", { type: "button", class: "cv-chip", "data-testid": tid("lineage-link"), "data-id": c.id, title: c.id, disabled: !c.item }, el("img", { alt: "" }), el("span", { text: label }));
        setImage(chip.querySelector("img"), c.id);
        if (c.item) chip.addEventListener("click", () => run("select", { attachmentId: c.id }, "Select"));
        nodes.push(chip);
      });
    } else {
      nodes.push(el("span", { class: "cv-lineage-label", text: current.params && current.params.op === "generate" ? "Generated from a prompt" : "Original" }));
    }
    if (current.params && typeof current.params === "object") {
      const p = Object.entries(current.params).filter(([k]) => k !== "op" && k !== "steps");
      if (p.length) {
        nodes.push(el("dl", { class: "cv-params", "data-testid": tid("params") }, ...p.flatMap(([k, v]) => [el("dt", { text: k }), el("dd", { text: typeof v === "object" ? JSON.stringify(v) : String(v) })])));
      }
    }
    lineage.replaceChildren(...nodes);
  }

  // reveal scrolls the gallery (a film strip or a grid) so that li shows, without moving the page.
  let shownCurrent = "";
  function reveal(li) {
    const g = gallery.getBoundingClientRect();
    const r = li.getBoundingClientRect();
    if (r.left < g.left) gallery.scrollLeft -= g.left - r.left + 4;
    else if (r.right > g.right) gallery.scrollLeft += r.right - g.right + 4;
    if (r.top < g.top) gallery.scrollTop -= g.top - r.top + 4;
    else if (r.bottom > g.bottom) gallery.scrollTop += r.bottom - g.bottom + 4;
  }

  function render() {
    const { sf, items, current, lp } = view();
    const available = !!sf.available;
    const hasSnapshot = sf.rev >= 0;
    body.classList.toggle("is-readonly", !available);
    body.dataset.available = available ? "true" : "false";
    if (!available) {
      notice.textContent = sf.settling
        ? "Connecting to the canvas agent…"
        : sf.ended
          ? "The session has ended: the canvas is read-only; the gallery is shown as it was."
          : "surface unavailable: read-only. The canvas agent is not running; the gallery is shown as it was.";
      notice.classList.toggle("is-settling", !!sf.settling);
    }
    notice.hidden = available;
    status.textContent = available ? (lp ? "working" : pending ? "saving" : "live") : sf.settling ? "connecting" : "read-only";
    status.className = "cv-status " + (available ? (lp || pending ? "is-busy" : "is-live") : "is-off");

    // Gallery.
    galleryCount.textContent = items.length ? String(items.length) : "";
    const lis = items.slice().reverse().map((it) => thumb(it, items, current));
    const kids = Array.from(gallery.children);
    if (kids.length !== lis.length || kids.some((c, i) => c !== lis[i])) gallery.replaceChildren(...lis);
    galleryWrap.classList.toggle("is-empty", !items.length);
    if (current && current.id !== shownCurrent) {
      shownCurrent = current.id;
      const li = lis.find((x) => x.dataset.id === current.id);
      if (li) requestAnimationFrame(() => reveal(li));
    }

    // Stage.
    if (current) {
      if (stageImg.dataset.att !== current.id) stage.classList.remove("has-image");
      setImage(stageImg, current.id);
      stageImg.alt = describeParams(current.params) || current.name || "The current image";
      stageImg.hidden = false;
      empty.hidden = true;
    } else {
      delete stageImg.dataset.att;
      stageImg.removeAttribute("src");
      stageImg.hidden = true;
      stage.classList.remove("has-image");
      empty.hidden = !hasSnapshot && !available;
    }
    stage.dataset.current = current ? current.id : "";

    // Live preview.
    preview.hidden = !lp;
    stage.classList.toggle("is-working", !!lp);
    stage.classList.toggle("has-preview", !!(lp && lp.artifact));
    if (lp) {
      previewStage.textContent = String(lp.stage || "working");
      previewTask.textContent = lp.task ? "· " + lp.task : "";
      previewBar.style.width = Math.round(Math.max(0, Math.min(1, Number(lp.progress) || 0)) * 100) + "%";
      if (lp.artifact) {
        previewImg.hidden = false;
        setImage(previewImg, lp.artifact);
      } else {
        previewImg.hidden = true;
      }
      preview.dataset.stage = String(lp.stage || "");
    }

    // Controls.
    const canEdit = available && !!current && !pending;
    editButtons.forEach((b) => (b.disabled = !canEdit));
    deleteBtn.disabled = !canEdit;
    askBtn.disabled = !current || !!pending || !available;
    uploadBtn.disabled = !available || !arts;
    syncBtn.disabled = !available || !!pending;
    body.setAttribute("aria-busy", pending ? "true" : "false");
    info.hidden = !current;
    tools.hidden = !current;
    renderInfo();
  }

  render();
  const off = api.onChange(render);
  // Artifacts added elsewhere (another tab, the chat) show after the agent registers them; a
  // deleted one drops its cached URL.
  const offArts = arts && typeof arts.on === "function" ? arts.on((ev) => {
    if (ev && ev.event === "deleted" && ev.artifact) urls.delete(ev.artifact.id);
  }) : null;
  // Relative times age.
  const timer = setInterval(() => renderInfo(), 30000);
  return () => {
    off();
    if (typeof offArts === "function") offArts();
    clearInterval(timer);
    if (framed) api.setTitle("");
    root.replaceChildren();
  };
}
