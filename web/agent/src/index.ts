// @surfaced/agent: agents for a surfaced daemon in TypeScript (docs/agents-typescript.md).
//
// Inside pi (an extension; pi runs unmodified, `pi --mode rpc -e ./my-extension.ts`):
//   createSurface(pi, {domain, initialState, commands, data?, hydrate?, onTurnEnd?})
//   runCommand(domain, action, args), getSurface(domain), getSessionState(), getArtifacts()
// A standalone Node agent:
//   defineAgent({name, model?, tools, surfaces: [defineSurface({...})]}).run()
export { createSurface, connectPi, isPiRPC } from "./pi";
export type { PiExtensionAPI, PiAgentOptions, SurfaceHandle } from "./pi";
export { getSessionState, runCommand, getSurface, getArtifacts } from "./api";
export type { Artifacts, PutOptions, ListQuery, SessionState, SurfaceSnapshot } from "./host";
export { SurfaceCommandError, HYDRATE_ACTION, TURN_END_ACTION, normalize } from "./surface";
export type { SurfaceOptions, SurfaceCtx, CommandHandler, CommandSpec, DataHandler, DataRequest, DataCtx, Page, SurfaceHook } from "./surface";
export { defineAgent, defineSurface, defineTool, Agent } from "./agent";
export type { AgentOptions, Tool, ToolCtx, ToolOutput, NoticeRequest } from "./agent";
export { scriptedModel, openAIModel, modelFromEnv, SCRIPTED_PREFIX } from "./model";
export type {
  Model,
  ModelDelta,
  ModelRequest,
  ModelMessage,
  ModelToolCall,
  ModelInfo,
  ToolSpec,
  StopReason,
  DialogRequest,
  DialogAnswer,
  Dialogs,
  ImageContent,
  ScriptedModelOptions,
  OpenAIModelOptions,
} from "./model";
export { PROTOCOL, Codes } from "./protocol";
export { parseTraceparent } from "./trace";
export type { TraceContext } from "./trace";
export type { CommandResult, ErrorBody, Artifact, JSONSchema, StateChange, SurfaceDecl } from "./protocol";
