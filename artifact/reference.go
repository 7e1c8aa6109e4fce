package artifact

import (
	"net/url"
	"strings"
)

// maxReferenceLen bounds an id a client names: longer is never an artifact.
const maxReferenceLen = 128

// Reference reports whether id has the shape of an artifact id a client may
// name (att_ and letters, digits, '_' or '-'): the check a transport makes
// before it asks the store, which says whether the artifact exists and is
// the session's. It is looser than ParseID on purpose, so that an id of
// another form is answered by the store as missing, not as malformed.
func Reference(id string) (string, bool) {
	rest, ok := strings.CutPrefix(id, IDPrefix)
	if !ok || rest == "" || len(id) > maxReferenceLen {
		return "", false
	}
	for _, r := range rest {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return "", false
		}
	}
	return id, true
}

// IDOfURL reads the artifact id of a URL the daemon gives out for an
// artifact of session sessionID: /api/sessions/{id}/artifacts/{att} or the
// content URL /api/artifacts/{att}/content (signed or not), relative or
// absolute. Whether the artifact is the session's is the store's to say.
// The chat route and AG-UI both read attachments this way.
func IDOfURL(raw, sessionID string) (string, bool) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "" && u.Scheme != "http" && u.Scheme != "https") {
		return "", false
	}
	segs := strings.Split(strings.Trim(u.Path, "/"), "/")
	switch {
	case len(segs) == 4 && segs[0] == "api" && segs[1] == "artifacts" && segs[3] == "content":
		return Reference(segs[2])
	case len(segs) == 5 && segs[0] == "api" && segs[1] == "sessions" && segs[2] == sessionID && segs[3] == "artifacts":
		return Reference(segs[4])
	}
	return "", false
}
