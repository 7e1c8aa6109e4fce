package store

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
)

// EncodeCursor is a store's cursor for the page after the session at
// (updated, id): base64 of the store's version prefix (e.g. "s1:"), the position and a CRC-32 of both, so that a cursor
// that was cut, extended or made up is refused rather than read as another
// position.
func EncodeCursor(version string, updated int64, id string) string {
	payload := []byte(version + strconv.FormatInt(updated, 10) + ":" + id)
	return base64.RawURLEncoding.EncodeToString(binary.BigEndian.AppendUint32(payload, crc32.ChecksumIEEE(payload)))
}

// DecodeCursor reads a cursor of EncodeCursor with the same version; any
// other text is ErrBadCursor.
func DecodeCursor(version, c string) (updated int64, id string, err error) {
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return 0, "", fmt.Errorf("%w: not base64: %v", ErrBadCursor, err)
	}
	if len(raw) < 4 {
		return 0, "", fmt.Errorf("%w: too short", ErrBadCursor)
	}
	payload, sum := raw[:len(raw)-4], binary.BigEndian.Uint32(raw[len(raw)-4:])
	if crc32.ChecksumIEEE(payload) != sum {
		return 0, "", fmt.Errorf("%w: checksum mismatch (cut, altered or from another store)", ErrBadCursor)
	}
	rest, ok := strings.CutPrefix(string(payload), version)
	if !ok {
		return 0, "", fmt.Errorf("%w: unknown format", ErrBadCursor)
	}
	ts, id, ok := strings.Cut(rest, ":")
	if !ok {
		return 0, "", fmt.Errorf("%w: no session id", ErrBadCursor)
	}
	updated, err = strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return 0, "", fmt.Errorf("%w: bad time: %v", ErrBadCursor, err)
	}
	if err := CheckSessionID(id); err != nil {
		return 0, "", fmt.Errorf("%w: %v", ErrBadCursor, err)
	}
	return updated, id, nil
}
