// Package surfacedv1 holds every message that crosses an actor boundary
// which may cross nodes (protobuf: protoactor drops other values between
// nodes), generated from session.proto by `make proto`, plus a few
// hand-written helpers (pid.go, event.go). The generated code is committed.
package surfacedv1
