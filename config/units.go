package config

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Size is a number of bytes. In the file it is a plain integer (bytes) or a
// whole number with a binary unit: 512KiB, 4MiB, 1GiB (B, KiB, MiB, GiB,
// TiB; the unit is case-insensitive, a space before it is allowed). Decimal
// units (KB, MB, GB) and bare letters (K, M, G) are refused rather than
// guessed, because 4MB and 4MiB differ by 5% and a limit should mean what it
// says.
type Size int64

// Binary size units.
const (
	KiB Size = 1 << 10
	MiB Size = 1 << 20
	GiB Size = 1 << 30
	TiB Size = 1 << 40
)

var sizeUnits = []struct {
	name string
	mult Size
}{{"TiB", TiB}, {"GiB", GiB}, {"MiB", MiB}, {"KiB", KiB}, {"B", 1}}

// decimalUnits map an ambiguous unit to the binary unit we suggest instead.
var decimalUnits = map[string]string{
	"k": "KiB", "kb": "KiB", "m": "MiB", "mb": "MiB", "g": "GiB", "gb": "GiB", "t": "TiB", "tb": "TiB",
	"ki": "KiB", "mi": "MiB", "gi": "GiB", "ti": "TiB",
}

// ParseSize parses a size such as "4MiB", "512 KiB" or "1048576".
func ParseSize(s string) (Size, error) {
	in := strings.TrimSpace(s)
	i := 0
	for i < len(in) && (in[i] >= '0' && in[i] <= '9' || in[i] == '.') {
		i++
	}
	num, unit := in[:i], strings.TrimSpace(in[i:])
	if num == "" {
		return 0, fmt.Errorf("%q is not a size (use bytes or a binary unit: 512KiB, 4MiB, 1GiB)", s)
	}
	mult := Size(0)
	for _, u := range sizeUnits {
		if strings.EqualFold(unit, u.name) {
			mult = u.mult
		}
	}
	if unit == "" {
		mult = 1
	}
	if mult == 0 {
		if bin, ok := decimalUnits[strings.ToLower(unit)]; ok {
			return 0, fmt.Errorf("%q is not a size (use %s%s)", s, num, bin)
		}
		return 0, fmt.Errorf("%q is not a size (units: B, KiB, MiB, GiB, TiB)", s)
	}
	if strings.Contains(num, ".") {
		// A fraction is refused, but if it names a whole number of bytes we
		// can say which one.
		f, err := strconv.ParseFloat(num, 64)
		if err == nil {
			b := f * float64(mult)
			if b == math.Trunc(b) && b < math.MaxInt64 {
				return 0, fmt.Errorf("%q is not a size (use a whole number: %s)", s, Size(b))
			}
		}
		return 0, fmt.Errorf("%q is not a size (use a whole number of bytes, KiB, MiB or GiB)", s)
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n > math.MaxInt64/int64(mult) {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return Size(n) * mult, nil
}

// String formats s with the largest binary unit that divides it exactly
// (4194304 is "4MiB", 1536 is "1536", 3072 is "3KiB"), so the text reads
// back as the same size.
func (s Size) String() string {
	if s == 0 {
		return "0"
	}
	for _, u := range sizeUnits {
		if u.mult > 1 && s%u.mult == 0 {
			return strconv.FormatInt(int64(s/u.mult), 10) + u.name
		}
	}
	return strconv.FormatInt(int64(s), 10)
}

// UnmarshalYAML accepts an integer (bytes) or a string ParseSize accepts.
func (s *Size) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return errors.New("expected a size such as 4MiB, got " + nodeKindName(n))
	}
	switch n.ShortTag() {
	case "!!int":
		v, err := strconv.ParseInt(n.Value, 0, 64)
		if err != nil {
			return fmt.Errorf("%q is not a size", n.Value)
		}
		if v < 0 {
			return fmt.Errorf("%d is negative", v)
		}
		*s = Size(v)
		return nil
	case "!!str", "!!float":
		v, err := ParseSize(n.Value)
		if err != nil {
			return err
		}
		*s = v
		return nil
	}
	return fmt.Errorf("%q is not a size (use bytes or a binary unit: 512KiB, 4MiB, 1GiB)", n.Value)
}

// MarshalYAML writes the String form, which UnmarshalYAML reads back.
func (s Size) MarshalYAML() (any, error) { return s.String(), nil }

// Duration is a time.Duration written as Go writes durations: 10s, 1m30s,
// 250ms. A bare 0 means zero; any other bare number is refused because its
// unit would be a guess.
type Duration time.Duration

// ParseDuration parses a duration such as "10s" or "0".
func ParseDuration(s string) (Duration, error) {
	in := strings.TrimSpace(s)
	if in == "0" {
		return 0, nil
	}
	if _, err := strconv.ParseFloat(in, 64); err == nil {
		return 0, fmt.Errorf("%q is not a duration (use %ss)", s, in)
	}
	d, err := time.ParseDuration(in)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration (use a number and a unit: 250ms, 10s, 5m, 1h)", s)
	}
	return Duration(d), nil
}

// String formats d as time.Duration does.
func (d Duration) String() string { return time.Duration(d).String() }

// UnmarshalYAML accepts a string ParseDuration accepts, or the integer 0.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return errors.New("expected a duration such as 10s, got " + nodeKindName(n))
	}
	v, err := ParseDuration(n.Value)
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// MarshalYAML writes the String form, which UnmarshalYAML reads back.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// nodeKindName describes a node for error messages.
func nodeKindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.ShortTag() == "!!null" {
			return "nothing"
		}
		return strconv.Quote(n.Value)
	}
	return "something else"
}
