package postgres

import (
	"encoding/json"
	"fmt"
	"math"
	"time"

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

func checkSession(s store.Session) error {
	if err := store.CheckSessionID(s.ID); err != nil {
		return err
	}
	if s.Owner == "" {
		return fmt.Errorf("%w: session %q has no owner", store.ErrInvalid, s.ID)
	}
	return nil
}

func checkQuery(q store.ListQuery) (limit int, err error) {
	if q.Owner == "" {
		return 0, fmt.Errorf("%w: list query has no owner", store.ErrInvalid)
	}
	switch {
	case q.Limit < 0:
		return 0, fmt.Errorf("%w: negative list limit %d", store.ErrInvalid, q.Limit)
	case q.Limit == 0:
		return store.DefaultListLimit, nil
	case q.Limit > store.MaxListLimit:
		return store.MaxListLimit, nil
	}
	return q.Limit, nil
}

func checkEntries(entries []store.Entry) error {
	for i, e := range entries {
		if len(e.ToolArgs) > 0 && !json.Valid(e.ToolArgs) {
			return fmt.Errorf("%w: entry %d: tool args are not JSON", store.ErrInvalid, i)
		}
		if len(e.ToolResult) > 0 && !json.Valid(e.ToolResult) {
			return fmt.Errorf("%w: entry %d: tool result is not JSON", store.ErrInvalid, i)
		}
		if e.TurnID > math.MaxInt64 || e.PromptID > math.MaxInt64 {
			return fmt.Errorf("%w: entry %d: turn id %d or prompt id %d is above %d", store.ErrInvalid, i, e.TurnID, e.PromptID, int64(math.MaxInt64))
		}
	}
	return nil
}

func checkKV(entries []store.KV) error {
	for i, e := range entries {
		switch {
		case e.Key == "":
			return fmt.Errorf("%w: kv entry %d has no key", store.ErrInvalid, i)
		case e.Rev > math.MaxInt64:
			return fmt.Errorf("%w: kv %q: rev %d is above %d", store.ErrInvalid, e.Key, e.Rev, int64(math.MaxInt64))
		case !e.Deleted && !json.Valid(e.Value):
			return fmt.Errorf("%w: kv %q: value is not JSON", store.ErrInvalid, e.Key)
		}
	}
	return nil
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
