// The panel of the domain "demo": the count, an increment button, an echo box and the log.
// The web UI imports this module and calls mount(element, api) (docs/panels.md); everything
// here goes through api: the snapshot ({count, log}), the commands increment and echo.

// el builds an element; text is always textContent, never HTML.
function el(tag, props, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "text") node.textContent = String(v);
    else if (k === "class") node.className = v;
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  node.append(...children);
  return node;
}

export function mount(root, api) {
  const css = el("link", { rel: "stylesheet", href: new URL("demo.css", import.meta.url).href });
  const waiting = el("p", { class: "notice muted", "data-testid": "surface-demo-waiting", text: "Waiting for the agent…" });
  const degraded = el("p", { class: "notice", "data-testid": "surface-demo-degraded", text: "demo surface unavailable (read-only)" });
  const count = el("p", { class: "demo-count", "data-testid": "surface-demo-count", "aria-live": "polite" });
  const increment = el("button", { type: "button", class: "primary", "data-testid": "surface-demo-increment", text: "increment" });
  const echoInput = el("input", { type: "text", "data-testid": "surface-demo-echo-input", placeholder: "Text for the log", "aria-label": "Text to echo", maxlength: "500" });
  const echoButton = el("button", { type: "submit", "data-testid": "surface-demo-echo", text: "echo" });
  const echoForm = el("form", { class: "demo-echo", "data-testid": "surface-demo-echo-form" }, echoInput, echoButton);
  const error = el("p", { class: "error", role: "alert", "data-testid": "surface-demo-error" });
  const logHeading = el("h3", { class: "small-heading", text: "Log" });
  const log = el("ul", { class: "demo-log", "data-testid": "surface-demo-log", "aria-label": "demo log" });
  const logEmpty = el("p", { class: "muted small", text: "The log is empty." });
  const body = el("div", { class: "demo" });
  root.append(css, body);

  let pending = false;
  let lastError = "";

  async function run(action, args) {
    if (pending) return false;
    pending = true;
    lastError = "";
    render();
    const r = await api.run(action, args);
    pending = false;
    lastError = r.ok ? "" : api.errorMessage(r.error);
    if (!api.signal.aborted) render();
    return r.ok;
  }

  increment.addEventListener("click", () => run("increment"));
  echoForm.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const text = echoInput.value.trim();
    if (!text) {
      echoInput.focus();
      return;
    }
    if (await run("echo", { text })) echoInput.value = "";
  });

  function render() {
    const sf = api.surface();
    const hasSnapshot = sf.rev >= 0;
    const st = sf.state && typeof sf.state === "object" ? sf.state : {};
    const nodes = [];
    if (!sf.available) {
      degraded.textContent = sf.ended ? "The session has ended: demo is read-only." : "demo surface unavailable (read-only)";
      nodes.push(sf.settling ? waiting : degraded);
    }
    if (sf.available || hasSnapshot) {
      count.textContent = "count: " + (hasSnapshot && st.count !== undefined ? String(st.count) : "—");
      nodes.push(count);
    }
    if (sf.available) {
      increment.disabled = echoButton.disabled = pending;
      increment.setAttribute("aria-busy", pending ? "true" : "false");
      nodes.push(increment, echoForm);
    }
    if (lastError) {
      error.textContent = lastError;
      nodes.push(error);
    }
    if (sf.available || hasSnapshot) {
      const entries = Array.isArray(st.log) ? st.log : [];
      const texts = entries.map((e) => (typeof e === "string" ? e : JSON.stringify(e)));
      if (texts.length !== log.children.length || texts.some((t, i) => log.children[i].textContent !== t)) {
        log.replaceChildren(...texts.map((t) => el("li", { text: t })));
      }
      nodes.push(logHeading, log);
      if (!texts.length) nodes.push(logEmpty);
    }
    // Replace children only when the set changed, so focus in the echo box survives updates.
    const kids = Array.from(body.children);
    if (kids.length !== nodes.length || kids.some((c, i) => c !== nodes[i])) body.replaceChildren(...nodes);
  }

  render();
  const off = api.onChange(render);
  return () => {
    off();
    root.replaceChildren();
  };
}
