package surfacedv1

import "github.com/asynkron/protoactor-go/actor"

// PidOf converts an actor PID into the wire Pid (nil stays nil).
func PidOf(p *actor.PID) *Pid {
	if p == nil {
		return nil
	}
	return &Pid{Address: p.Address, Id: p.Id}
}

// Actor converts the wire Pid back into an actor PID (nil stays nil).
func (p *Pid) Actor() *actor.PID {
	if p == nil || p.Id == "" {
		return nil
	}
	return actor.NewPID(p.Address, p.Id)
}

// Err builds an Error.
func Err(code, message string) *Error { return &Error{Code: code, Message: message} }
