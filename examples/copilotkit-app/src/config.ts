// The agent the app talks to: the daemon serves it at /ag-ui/<name>.
export const AGENT = "demo";
