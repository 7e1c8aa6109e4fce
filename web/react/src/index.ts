// @surfaced/react: React hooks for a surfaced session and the AI SDK's useChat (see README.md).
export { SurfacedProvider, type SurfacedProviderProps } from "./provider.js";
export {
  useSurface,
  useConversationBridge,
  useArtifacts,
  useSessionStatus,
  useSurfacedSession,
  matchesMediaType,
  type SurfaceHandle,
  type ConversationBridge,
  type ArtifactsHandle,
  type Upload,
} from "./hooks.js";
export { surfacedChatTransport, useSurfacedChatTransport, type SurfacedChatTransportOptions } from "./transport.js";
export { transcriptToUIMessages, useChatHistory } from "./history.js";
export type { StreamInfo } from "./context.js";
export { renderSurfaceOp } from "@surfaced/client";
export type {
  Artifact,
  ArtifactEvent,
  BridgeMode,
  BridgeOptions,
  CommandResult,
  SessionStatus,
  SubmitOpResult,
  SurfaceOp,
  UploadOptions,
} from "@surfaced/client";
