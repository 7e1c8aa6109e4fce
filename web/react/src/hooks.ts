import { useCallback, useContext, useEffect, useMemo, useRef, useState, useSyncExternalStore } from "react";
import type {
  Artifact,
  ArtifactEvent,
  BridgeMode,
  BridgeOptions,
  CommandResult,
  Session,
  SessionStatus,
  SubmitOpResult,
  SurfaceOp,
  UploadOptions,
} from "@surfaced/client";
import { StreamContext, useSurfacedContext, type StreamInfo } from "./context.js";

/** The Session of the nearest SurfacedProvider (@surfaced/client's, for everything else it does). */
export function useSurfacedSession(): Session {
  return useSurfacedContext("useSurfacedSession").session;
}

/** The session stream's condition: connected, the last `session` frame, why it ended. */
export function useSessionStatus(): StreamInfo & { busy: boolean } {
  const info = useContext(StreamContext);
  const status: SessionStatus | undefined = info.status;
  return { ...info, busy: !!(status && status.busy) };
}

export interface SurfaceHandle<S> {
  /** The domain's snapshot, only ever from the state plane; undefined until the first one. */
  state: S | undefined;
  /** Its rev (-1 before the first snapshot); revs only rise. */
  rev: number;
  /** The domain is registered and takes commands now (its agent is up; never once the session ended). */
  available: boolean;
  /** Runs a command on the control plane; never rejects. Its effect arrives as a snapshot. */
  run: <T = unknown>(action: string, args?: unknown) => Promise<CommandResult<T>>;
}

interface SurfaceSnapshot {
  state: unknown;
  rev: number;
  available: boolean;
}

/** useSurface follows the domain's snapshot (`surface:<domain>`) and whether it takes commands. */
export function useSurface<S = unknown>(domain: string): SurfaceHandle<S> {
  const { session } = useSurfacedContext("useSurface");
  const cache = useRef<SurfaceSnapshot | null>(null);
  const subscribe = useCallback(
    (notify: () => void) => {
      const offState = session.onState("surface:" + domain, notify);
      const offSurfaces = session.onSurfaces(notify);
      return () => {
        offState();
        offSurfaces();
      };
    },
    [session, domain]
  );
  const getSnapshot = useCallback((): SurfaceSnapshot => {
    const v = session.surface(domain);
    const c = cache.current;
    const state = v.state === null ? undefined : v.state;
    if (c && c.rev === v.rev && c.available === v.available && c.state === state) return c;
    cache.current = { state, rev: v.rev, available: v.available };
    return cache.current;
  }, [session, domain]);
  const snap = useSyncExternalStore(subscribe, getSnapshot, getSnapshot);
  const run = useCallback(<T = unknown>(action: string, args?: unknown) => session.run<T>(domain, action, args), [session, domain]);
  return { state: snap.state as S | undefined, rev: snap.rev, available: snap.available, run };
}

export interface ConversationBridge {
  /**
   * "prompt": ops go through the conversation; "command": only the control plane is open (the
   * bridge was made without a conversation); "unavailable": the domain is not registered, its agent
   * is down, or the session ended, and the panel must show that it is read-only.
   */
  mode: BridgeMode;
  available: boolean;
  run: <T = unknown>(action: string, args?: unknown) => Promise<CommandResult<T>>;
  /** Renders the surface-op and sends it as a user message (or runs op.fallback in "command" mode). */
  prompt: (op: SurfaceOp, opts?: { attachmentIds?: string[] }) => Promise<SubmitOpResult>;
}

/**
 * useConversationBridge joins a domain and the conversation (session.bridge of @surfaced/client).
 * opts.conversation: false for a page without a conversation, or the chat's own sender, e.g.
 * `(text) => sendMessage({text})` of useChat, so that the op shows in that chat as it is sent.
 */
export function useConversationBridge(domain: string, opts?: BridgeOptions): ConversationBridge {
  const { session } = useSurfacedContext("useConversationBridge");
  const c = opts && opts.conversation;
  // The latest sender is called through a ref, so a new function each render does not remake the bridge.
  const submit = useRef(c);
  submit.current = c;
  const kind = typeof c === "function" ? "function" : c === false ? "off" : "on";
  const bridge = useMemo(
    () =>
      session.bridge(domain, {
        conversation:
          kind === "function"
            ? (text: string, o: { attachmentIds?: string[] }) => (submit.current as (t: string, o: { attachmentIds?: string[] }) => unknown)(text, o)
            : kind === "on",
      }),
    [session, domain, kind]
  );
  const subscribe = useCallback((notify: () => void) => bridge.onChange(notify), [bridge]);
  const getMode = useCallback(() => bridge.mode, [bridge]);
  const mode = useSyncExternalStore(subscribe, getMode, getMode);
  const run = useCallback(<T = unknown>(action: string, args?: unknown) => bridge.run<T>(action, args), [bridge]);
  const prompt = useCallback((op: SurfaceOp, o?: { attachmentIds?: string[] }) => bridge.prompt(op, o), [bridge]);
  return { mode, available: mode !== "unavailable", run, prompt };
}

/** An upload in progress. */
export interface Upload {
  key: number;
  name: string;
  loaded: number;
  total?: number;
}

export interface ArtifactsHandle {
  /** The session's artifacts (of mediaType, when given), newest first, live. */
  artifacts: Artifact[];
  loading: boolean;
  error: Error | undefined;
  uploads: Upload[];
  upload: (file: Blob, opts?: UploadOptions) => Promise<{ artifact: Artifact; url: string }>;
  remove: (id: string) => Promise<void>;
  /** A signed URL, usable without a credential (<img src>, links). */
  url: (id: string) => Promise<string>;
  /** The content URL that the page's cookie or token opens. */
  contentUrl: (id: string) => string;
  refresh: () => void;
}

/** matchesMediaType: "image/*" matches image/png; parameters of the stored type do not matter. */
export function matchesMediaType(pattern: string | undefined, mediaType: string): boolean {
  if (!pattern) return true;
  const t = mediaType.split(";")[0].trim().toLowerCase();
  const p = pattern.trim().toLowerCase();
  if (p.endsWith("/*")) return t.startsWith(p.slice(0, -1));
  return t === p;
}

/** useArtifacts lists the session's artifacts and keeps the list live from `artifact` frames. */
export function useArtifacts(opts?: { mediaType?: string }): ArtifactsHandle {
  const { session } = useSurfacedContext("useArtifacts");
  const { generation } = useContext(StreamContext);
  const mediaType = opts && opts.mediaType;
  const [artifacts, setArtifacts] = useState<Artifact[]>([]);
  const [loading, setLoading] = useState(true);
  const [error, setError] = useState<Error | undefined>(undefined);
  const [uploads, setUploads] = useState<Upload[]>([]);
  const [reload, setReload] = useState(0);
  const nextKey = useRef(0);

  useEffect(() => {
    const api = session.artifacts;
    let cancelled = false;
    // Frames that arrive while the list loads are applied to it once it is in.
    const early: ArtifactEvent[] = [];
    let listed = false;
    const apply = (list: Artifact[], ev: ArtifactEvent) => {
      const rest = list.filter((a) => a.id !== ev.artifact.id);
      if (ev.event === "deleted" || !matchesMediaType(mediaType, ev.artifact.mediaType)) return rest;
      return [ev.artifact, ...rest];
    };
    const off = api.on((ev) => {
      if (!listed) early.push(ev);
      else setArtifacts((list) => apply(list, ev));
    });
    setLoading(true);
    api.listAll({ mediaType }).then(
      (list) => {
        if (cancelled) return;
        listed = true;
        setArtifacts(early.reduce(apply, list));
        setError(undefined);
        setLoading(false);
      },
      (e: Error) => {
        if (cancelled) return;
        listed = true;
        setError(e);
        setLoading(false);
      }
    );
    return () => {
      cancelled = true;
      off();
    };
  }, [session, mediaType, generation, reload]);

  const upload = useCallback(
    async (file: Blob, o?: UploadOptions) => {
      const key = ++nextKey.current;
      const name = (o && o.name) || (file as File).name || "upload";
      setUploads((u) => [...u, { key, name, loaded: 0, total: file.size }]);
      try {
        return await session.artifacts.upload(file, {
          ...o,
          onProgress: (p) => {
            setUploads((u) => u.map((x) => (x.key === key ? { ...x, loaded: p.loaded, total: p.total } : x)));
            if (o && o.onProgress) o.onProgress(p);
          },
        });
      } finally {
        setUploads((u) => u.filter((x) => x.key !== key));
      }
    },
    [session]
  );
  const remove = useCallback(
    async (id: string) => {
      await session.artifacts.delete(id);
    },
    [session]
  );
  const url = useCallback((id: string) => session.artifacts.url(id), [session]);
  const contentUrl = useCallback((id: string) => session.artifacts.contentUrl(id), [session]);
  const refresh = useCallback(() => setReload((n) => n + 1), []);
  return { artifacts, loading, error, uploads, upload, remove, url, contentUrl, refresh };
}
