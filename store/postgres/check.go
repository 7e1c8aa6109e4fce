package postgres

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/surfaced/surfaced/internal/plainjson"
	"github.com/surfaced/surfaced/store"
)

// Arguments are checked before any statement runs, so that a bad one is
// refused whole and nothing of its call is written.

func fromMillis(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// millisOrNil is t in unix ms, or nil (SQL NULL: the server's now) for the
// zero time.
func millisOrNil(t time.Time) *int64 {
	if t.IsZero() {
		return nil
	}
	ms := t.UnixMilli()
	return &ms
}

// jsonOrNil is b for a bytea column, with empty JSON stored as NULL.
func jsonOrNil(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

// cursorVersion starts every cursor, so that a later format, or another
// store's, can be told apart.
const cursorVersion = "p1:"

func encodeCursor(updated int64, id string) string {
	return store.EncodeCursor(cursorVersion, updated, id)
}

func decodeCursor(c string) (updated int64, id string, err error) {
	return store.DecodeCursor(cursorVersion, c)
}

// idsOrNil is a transcript entry's attachment ids as their column holds
// them: a JSON array of strings, NULL when there are none.
func idsOrNil(ids []string) []byte {
	if len(ids) == 0 {
		return nil
	}
	b, _ := plainjson.Marshal(ids) // strings always marshal
	return b
}

// idsOf reads the attachment ids column back.
func idsOf(col []byte) ([]string, error) {
	if len(col) == 0 {
		return nil, nil
	}
	var ids []string
	if err := json.Unmarshal(col, &ids); err != nil {
		return nil, fmt.Errorf("attachment ids %q: %w", col, err)
	}
	return ids, nil
}
