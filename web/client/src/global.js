// The entry of the classic script the daemon serves as /surfaced.js: the ES module's exports as
// window.Surfaced (web/scripts/build.mjs bundles this file into gateway/internal/webui/static).
import {
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
  renderSurfaceOp,
  DEFAULT_FENCE,
} from "./index.js";

(typeof window !== "undefined" ? window : globalThis).Surfaced = {
  version: version,
  Client: Client,
  Session: Session,
  Subscription: Subscription,
  StateStore: StateStore,
  ChatAssembler: ChatAssembler,
  Bridge: Bridge,
  Artifacts: Artifacts,
  FetchEventSource: FetchEventSource,
  Error: SurfacedError,
  renderSurfaceOp: renderSurfaceOp,
  DEFAULT_FENCE: DEFAULT_FENCE,
};
