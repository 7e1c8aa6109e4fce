package store

import (
	"encoding/json"
	"fmt"
	"math"
)

// The argument checks every Store makes before it writes anything, so that
// a bad call is refused whole, with the same error from every store.

// CheckListQuery returns the page size q asks for (DefaultListLimit when 0,
// at most MaxListLimit), or an error wrapping ErrInvalid when q has no owner
// or a negative limit.
func CheckListQuery(q ListQuery) (limit int, err error) {
	if q.Owner == "" {
		return 0, fmt.Errorf("%w: list query has no owner", ErrInvalid)
	}
	switch {
	case q.Limit < 0:
		return 0, fmt.Errorf("%w: negative list limit %d", ErrInvalid, q.Limit)
	case q.Limit == 0:
		return DefaultListLimit, nil
	case q.Limit > MaxListLimit:
		return MaxListLimit, nil
	}
	return q.Limit, nil
}

// CheckSession returns an error wrapping ErrInvalid unless s is a session a
// store creates: a valid id, an owner, and IDsReserved that fits an int64
// (SQL's BIGINT).
func CheckSession(s Session) error {
	if err := CheckSessionID(s.ID); err != nil {
		return err
	}
	if s.Owner == "" {
		return fmt.Errorf("%w: session %q has no owner", ErrInvalid, s.ID)
	}
	if s.IDsReserved > math.MaxInt64 {
		return fmt.Errorf("%w: session %q: reserved ids %d are above %d", ErrInvalid, s.ID, s.IDsReserved, int64(math.MaxInt64))
	}
	return nil
}

// CheckSessionUpdate returns an error wrapping ErrInvalid when u's
// IDsReserved does not fit an int64.
func CheckSessionUpdate(u SessionUpdate) error {
	if u.IDsReserved != nil && *u.IDsReserved > math.MaxInt64 {
		return fmt.Errorf("%w: reserved ids %d are above %d", ErrInvalid, *u.IDsReserved, int64(math.MaxInt64))
	}
	return nil
}

// CheckCountQuery returns an error wrapping ErrInvalid when q has no owner.
func CheckCountQuery(q CountQuery) error {
	if q.Owner == "" {
		return fmt.Errorf("%w: count query has no owner", ErrInvalid)
	}
	return nil
}

// CheckEntries returns an error wrapping ErrInvalid for the first entry whose
// tool args or result are not JSON, whose turn or prompt id does not fit
// an int64 (SQL's BIGINT), or with an attachment id a store refuses.
func CheckEntries(entries []Entry) error {
	for i, e := range entries {
		if len(e.ToolArgs) > 0 && !json.Valid(e.ToolArgs) {
			return fmt.Errorf("%w: entry %d: tool args are not JSON", ErrInvalid, i)
		}
		if len(e.ToolResult) > 0 && !json.Valid(e.ToolResult) {
			return fmt.Errorf("%w: entry %d: tool result is not JSON", ErrInvalid, i)
		}
		if e.TurnID > math.MaxInt64 || e.PromptID > math.MaxInt64 {
			return fmt.Errorf("%w: entry %d: turn id %d or prompt id %d is above %d", ErrInvalid, i, e.TurnID, e.PromptID, int64(math.MaxInt64))
		}
		for _, id := range e.AttachmentIDs {
			if err := CheckArtifactID(id); err != nil {
				return fmt.Errorf("entry %d: attachment: %w", i, err)
			}
		}
	}
	return nil
}

// CheckKV returns an error wrapping ErrInvalid for the first entry with no
// key, a rev that does not fit an int64, or (unless it is a tombstone) a
// value that is not JSON.
func CheckKV(entries []KV) error {
	for i, e := range entries {
		switch {
		case e.Key == "":
			return fmt.Errorf("%w: kv entry %d has no key", ErrInvalid, i)
		case e.Rev > math.MaxInt64:
			return fmt.Errorf("%w: kv %q: rev %d is above %d", ErrInvalid, e.Key, e.Rev, int64(math.MaxInt64))
		case !e.Deleted && !json.Valid(e.Value):
			return fmt.Errorf("%w: kv %q: value is not JSON", ErrInvalid, e.Key)
		}
	}
	return nil
}

// CheckEndedQuery returns the number of ids EndedSessions returns for limit
// (DefaultListLimit when 0, at most MaxListLimit), or an error wrapping
// ErrInvalid for a negative limit.
func CheckEndedQuery(limit int) (int, error) {
	return CheckListQuery(ListQuery{Owner: "-", Limit: limit})
}
