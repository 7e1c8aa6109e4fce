package sqlite

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/surfaced/surfaced/internal/plainjson"
	"github.com/surfaced/surfaced/store"
)

// Arguments are checked before any statement runs, so that a bad one is
// refused whole and nothing of its call is written.

// now is the current time as the store keeps it: milliseconds, UTC.
func now() time.Time { return fromMillis(time.Now().UnixMilli()) }

func fromMillis(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

func checkSession(s store.Session) (store.Session, error) {
	if err := store.CheckSession(s); err != nil {
		return s, err
	}
	if s.Created.IsZero() {
		s.Created = now()
	}
	if s.Updated.IsZero() {
		s.Updated = s.Created
	}
	return s, nil
}

// jsonOrNil is b for a blob column, with empty JSON stored as NULL.
func jsonOrNil(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return b
}

// cursorVersion starts every cursor, so that a later format can be told apart.
const cursorVersion = "s1:"

func encodeCursor(updated int64, id string) string {
	return store.EncodeCursor(cursorVersion, updated, id)
}

func decodeCursor(c string) (updated int64, id string, err error) {
	return store.DecodeCursor(cursorVersion, c)
}

// idsOrNil is a transcript entry's attachment ids as their column holds
// them: a JSON array of strings, NULL when there are none.
func idsOrNil(ids []string) any {
	if len(ids) == 0 {
		return nil
	}
	b, _ := plainjson.Marshal(ids) // strings always marshal
	return string(b)
}

// idsOf reads the attachment ids column back.
func idsOf(col sql.NullString) ([]string, error) {
	if !col.Valid || col.String == "" {
		return nil, nil
	}
	var ids []string
	if err := json.Unmarshal([]byte(col.String), &ids); err != nil {
		return nil, fmt.Errorf("attachment ids %q: %w", col.String, err)
	}
	return ids, nil
}
