package artifact

import "testing"

func TestIDOfURL(t *testing.T) {
	id := NewID()
	for _, c := range []struct {
		raw  string
		want string
		ok   bool
	}{
		{"/api/artifacts/" + id + "/content", id, true},
		{"http://127.0.0.1:7800/api/artifacts/" + id + "/content?exp=1&sig=ab", id, true},
		{"https://example.test/api/sessions/s1/artifacts/" + id, id, true},
		{"/api/sessions/s2/artifacts/" + id, "", false}, // another session's path
		{"ftp://h/api/artifacts/" + id + "/content", "", false},
		{"/api/artifacts/" + id, "", false},
		{"/api/artifacts/att_/content", "", false},
		{"/api/artifacts/att_a%2Fb/content", "", false},
		{"/api/artifacts/notatt/content", "", false},
		{"%zz", "", false},
	} {
		got, ok := IDOfURL(c.raw, "s1")
		if got != c.want || ok != c.ok {
			t.Errorf("IDOfURL(%q) = %q, %v; want %q, %v", c.raw, got, ok, c.want, c.ok)
		}
	}
}

func TestReference(t *testing.T) {
	long := IDPrefix
	for len(long) <= maxReferenceLen {
		long += "a"
	}
	for id, ok := range map[string]bool{
		NewID(): true, "att_A-b_9": true,
		"att_": false, "att": false, "xatt_a": false, "att_a.b": false, "att_é": false, long: false,
	} {
		if _, got := Reference(id); got != ok {
			t.Errorf("Reference(%q) = %v, want %v", id, got, ok)
		}
	}
}
