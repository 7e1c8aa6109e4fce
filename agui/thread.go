package agui

import (
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
)

// threadEncoding is the session ids' alphabet (lowercase base 32, no padding).
var threadEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// ThreadPrefix starts the id of every thread's session.
const ThreadPrefix = "agui-"

// SessionID is the session that subject's runs of agent on threadID
// continue: a name derived from the three (SHA-256, 128 bits), not a row
// of a table. Every node of a cluster, and the daemon after a restart,
// finds the same session for a thread without a lookup, and two runs that
// start a thread at once create one session (the second creation finds the
// id taken). Another subject's thread of the same name, or the same thread
// name on another agent, is another session: a threadId is its caller's
// alone.
func SessionID(subject, agent, threadID string) string {
	h := sha256.New()
	for _, s := range [...]string{subject, agent, threadID} {
		// Length-prefixed: ("a", "bc") and ("ab", "c") are different threads.
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	sum := h.Sum(nil)
	return ThreadPrefix + threadEncoding.EncodeToString(sum[:16])
}
