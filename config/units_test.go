package config

import (
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

func TestParseSize(t *testing.T) {
	ok := []struct {
		in   string
		want Size
	}{
		{"0", 0},
		{"1048576", MiB},
		{"4MiB", 4 * MiB},
		{"512KiB", 512 * KiB},
		{"512 KiB", 512 * KiB},
		{" 16MiB ", 16 * MiB},
		{"1GiB", GiB},
		{"2TiB", 2 * TiB},
		{"10B", 10},
		{"4mib", 4 * MiB},
	}
	for _, c := range ok {
		got, err := ParseSize(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
	bad := []struct{ in, msg string }{
		{"4MB", `"4MB" is not a size (use 4MiB)`},
		{"4M", `"4M" is not a size (use 4MiB)`},
		{"512kb", `"512kb" is not a size (use 512KiB)`},
		{"1G", `"1G" is not a size (use 1GiB)`},
		{"1.5MiB", `"1.5MiB" is not a size (use a whole number: 1536KiB)`},
		{"0.3B", `"0.3B" is not a size (use a whole number of bytes, KiB, MiB or GiB)`},
		{"MiB", `"MiB" is not a size (use bytes or a binary unit: 512KiB, 4MiB, 1GiB)`},
		{"", `"" is not a size`},
		{"-1", `"-1" is not a size`},
		{"4 parsecs", `"4 parsecs" is not a size (units: B, KiB, MiB, GiB, TiB)`},
		{"99999999999TiB", `"99999999999TiB" is too large`},
	}
	for _, c := range bad {
		_, err := ParseSize(c.in)
		if err == nil || !strings.HasPrefix(err.Error(), c.msg) {
			t.Errorf("ParseSize(%q) error = %v; want %q", c.in, err, c.msg)
		}
	}
}

func TestSizeStringRoundTrip(t *testing.T) {
	for _, s := range []Size{0, 1, 1000, 1536, 3 * KiB, 4 * MiB, 32 * MiB, GiB, 5 * TiB} {
		back, err := ParseSize(s.String())
		if err != nil || back != s {
			t.Errorf("%d -> %q -> %d, %v", s, s.String(), back, err)
		}
	}
	if got := (4 * MiB).String(); got != "4MiB" {
		t.Errorf("4MiB formats as %q", got)
	}
}

func TestSizeYAML(t *testing.T) {
	var v struct {
		A, B, C Size
	}
	if err := yaml.Unmarshal([]byte("a: 4096\nb: 4MiB\nc: 0x10\n"), &v); err != nil {
		t.Fatal(err)
	}
	if v.A != 4096 || v.B != 4*MiB || v.C != 16 {
		t.Errorf("decoded %+v", v)
	}
	for in, msg := range map[string]string{
		"a: -5\n":     "-5 is negative",
		"a: [1]\n":    "expected a size such as 4MiB, got a list",
		"a: 1.5GiB\n": `"1.5GiB" is not a size (use a whole number: 1536MiB)`,
		"a: true\n":   `"true" is not a size`,
	} {
		err := yaml.Unmarshal([]byte(in), &v)
		if err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%q: error %v; want %q", in, err, msg)
		}
	}
	out, err := yaml.Marshal(struct{ S Size }{4 * MiB})
	if err != nil || string(out) != "s: 4MiB\n" {
		t.Errorf("marshal: %q, %v", out, err)
	}
}

func TestParseDuration(t *testing.T) {
	ok := map[string]time.Duration{
		"0": 0, "10s": 10 * time.Second, "1m30s": 90 * time.Second, "250ms": 250 * time.Millisecond, " 1h ": time.Hour,
		"0s": 0,
	}
	for in, want := range ok {
		got, err := ParseDuration(in)
		if err != nil || time.Duration(got) != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	bad := map[string]string{
		"10":    `"10" is not a duration (use 10s)`,
		"1.5":   `"1.5" is not a duration (use 1.5s)`,
		"ten s": `"ten s" is not a duration (use a number and a unit: 250ms, 10s, 5m, 1h)`,
		"10 s":  `"10 s" is not a duration`,
		"":      `"" is not a duration`,
	}
	for in, msg := range bad {
		_, err := ParseDuration(in)
		if err == nil || !strings.HasPrefix(err.Error(), msg) {
			t.Errorf("ParseDuration(%q) error = %v; want %q", in, err, msg)
		}
	}
}

func TestDurationYAML(t *testing.T) {
	var v struct{ A, B Duration }
	if err := yaml.Unmarshal([]byte("a: 0\nb: 1m\n"), &v); err != nil {
		t.Fatal(err)
	}
	if v.A != 0 || time.Duration(v.B) != time.Minute {
		t.Errorf("decoded %+v", v)
	}
	if err := yaml.Unmarshal([]byte("a: {x: 1}\n"), &v); err == nil || !strings.Contains(err.Error(), "expected a duration such as 10s, got a mapping") {
		t.Errorf("mapping: %v", err)
	}
	out, err := yaml.Marshal(struct{ D Duration }{Duration(90 * time.Second)})
	if err != nil || string(out) != "d: 1m30s\n" {
		t.Errorf("marshal: %q, %v", out, err)
	}
}
