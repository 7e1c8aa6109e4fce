// Package daemon starts a real daemon in the test's process for the tests
// of gateway, acpgw, gateway/debug and cmd/surfaced: the runtime on a memory
// store with the fake agent, the browser gateway with the ACP mount (and,
// in dev mode, the inspector) behind the real guard on 127.0.0.1:0, and
// clients for it: HTTP requests with a token, SSE, WebSocket and ACP's
// Streamable HTTP.
package daemon
