// Fakes of the browser's network objects for the client's and the hooks' tests: a routed fetch
// that records its requests, an EventSource the test drives, and an XMLHttpRequest.
export function response(status, body, { raw, headers } = {}) {
  const text = raw !== undefined ? raw : body === undefined ? "" : JSON.stringify(body);
  return new Response(status === 204 ? null : text, { status, headers: headers || { "Content-Type": "application/json" } });
}

export class FakeEventSource {
  static CLOSED = 2;
  static all = [];
  constructor(url, opts) {
    this.url = url;
    this.opts = opts;
    this.readyState = 0;
    this.listeners = new Map();
    FakeEventSource.all.push(this);
  }
  addEventListener(kind, fn) {
    if (!this.listeners.has(kind)) this.listeners.set(kind, []);
    this.listeners.get(kind).push(fn);
  }
  close() {
    this.readyState = 2;
  }
  open() {
    this.readyState = 1;
    this.onopen && this.onopen({});
  }
  emit(kind, id, data) {
    for (const fn of this.listeners.get(kind) || []) fn({ data: JSON.stringify(data), lastEventId: id });
  }
}

export class FakeXHR {
  static all = [];
  static answer = { status: 201, body: {} };
  constructor() {
    this.headers = {};
    this.upload = {};
    FakeXHR.all.push(this);
  }
  open(method, url) {
    this.method = method;
    this.url = url;
  }
  setRequestHeader(k, v) {
    this.headers[k] = v;
  }
  abort() {
    this.onabort && this.onabort();
  }
  send(body) {
    this.body = body;
    const size = body && body.size !== undefined ? body.size : 0;
    queueMicrotask(() => {
      this.upload.onprogress && this.upload.onprogress({ loaded: Math.floor(size / 2), total: size, lengthComputable: true });
      this.upload.onprogress && this.upload.onprogress({ loaded: size, total: size, lengthComputable: true });
      this.status = FakeXHR.answer.status;
      this.statusText = "";
      this.responseText = JSON.stringify(FakeXHR.answer.body);
      this.onload && this.onload();
    });
  }
}

// fakeFetch answers by "METHOD path" (the path with its query), a Response or a function of
// (init, url) giving one; everything else is a 404.
export function fakeFetch(routes = {}) {
  const requests = [];
  const fetch = async (url, init = {}) => {
    const u = new URL(url, "http://daemon.test");
    const key = (init.method || "GET") + " " + u.pathname + u.search;
    requests.push({ url, key, init, body: typeof init.body === "string" ? safeJSON(init.body) : init.body });
    const r = routes[key];
    if (typeof r === "function") return r(init, url);
    if (r) return r.clone();
    return response(404, { error: { code: "not_found", message: "no route " + key } });
  };
  return { fetch, requests };
}

function safeJSON(s) {
  try {
    return JSON.parse(s);
  } catch {
    return s;
  }
}

export const tick = () => new Promise((r) => setImmediate(r));
