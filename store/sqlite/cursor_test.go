package sqlite

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"strings"
	"testing"

	"github.com/surfaced/surfaced/store"
)

func TestCursorRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		updated int64
		id      string
	}{
		{0, "a"}, {1_750_000_000_123, "with:colons:in:it"}, {-62135596800000, strings.Repeat("é", 64)},
	} {
		updated, id, err := decodeCursor(encodeCursor(tc.updated, tc.id))
		if err != nil || updated != tc.updated || id != tc.id {
			t.Errorf("round trip of (%d, %q) = (%d, %q, %v)", tc.updated, tc.id, updated, id, err)
		}
	}
}

// TestCursorBadContent checks what the checksum cannot: cursors with a
// correct checksum around contents this format does not allow.
func TestCursorBadContent(t *testing.T) {
	sealed := func(payload string) string {
		p := []byte(payload)
		return base64.RawURLEncoding.EncodeToString(binary.BigEndian.AppendUint32(p, crc32.ChecksumIEEE(p)))
	}
	for name, c := range map[string]string{
		"empty":          "",
		"short":          base64.RawURLEncoding.EncodeToString([]byte("ab")),
		"other version":  sealed("s9:1:a"),
		"memstore":       sealed("m1:1:a"),
		"no id":          sealed("s1:123"),
		"empty id":       sealed("s1:123:"),
		"bad time":       sealed("s1:12x:a"),
		"time overflow":  sealed("s1:99999999999999999999:a"),
		"id too long":    sealed("s1:1:" + strings.Repeat("x", store.MaxSessionIDLen+1)),
		"id not utf8":    sealed("s1:1:\xff"),
		"checksum wrong": sealed("s1:1:a")[:10] + "AAAA",
	} {
		if _, _, err := decodeCursor(c); !errors.Is(err, store.ErrBadCursor) {
			t.Errorf("%s: err = %v, want ErrBadCursor", name, err)
		}
	}
}
