package config

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func ptr[T any](v T) *T { return &v }

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestPrecedence(t *testing.T) {
	dir := t.TempDir()
	tokens := writeFile(t, dir, "tokens.json", `{"tokens":[]}`)
	cfg := writeFile(t, dir, "surfaced.yaml", "addr: 127.0.0.1:1111\ndata_dir: file-data\ntoken: file-token\nlog_level: warn\n")
	t.Chdir(t.TempDir())
	wd := mustAbs(t, ".")

	cases := []struct {
		name  string
		path  string
		env   map[string]string
		flags Flags
		check func(t *testing.T, f *File)
	}{
		{"default", "", map[string]string{"HOME": "/h"}, Flags{}, func(t *testing.T, f *File) {
			expect(t, "addr", f.Addr, DefaultAddr)
			expect(t, "data_dir", f.DataDir, "/h/.local/share/surfaced")
			expect(t, "token", f.Token, "")
		}},
		{"env over default", "", map[string]string{"HOME": "/h", EnvDataDir: "rel", EnvToken: "env-token"}, Flags{}, func(t *testing.T, f *File) {
			expect(t, "data_dir", f.DataDir, filepath.Join(wd, "rel"))
			expect(t, "token", f.Token, "env-token")
		}},
		{"file over default", cfg, nil, Flags{}, func(t *testing.T, f *File) {
			expect(t, "addr", f.Addr, "127.0.0.1:1111")
			expect(t, "data_dir", f.DataDir, filepath.Join(dir, "file-data"))
			expect(t, "token", f.Token, "file-token")
			expect(t, "log_level", f.LogLevel, "warn")
		}},
		{"env over file", cfg, map[string]string{EnvDataDir: "/env-data", EnvToken: "env-token"}, Flags{}, func(t *testing.T, f *File) {
			expect(t, "data_dir", f.DataDir, "/env-data")
			expect(t, "token", f.Token, "env-token")
		}},
		{"flag over env over file", cfg, map[string]string{EnvDataDir: "/env-data", EnvToken: "env-token"},
			Flags{Addr: ptr("127.0.0.1:2222"), DataDir: ptr("flag-data"), Token: ptr("flag-token"), LogLevel: ptr("debug"),
				LogFormat: ptr("json"), Dev: ptr(true), Store: ptr("postgres://h/db"), PprofAddr: ptr("127.0.0.1:6060")},
			func(t *testing.T, f *File) {
				expect(t, "addr", f.Addr, "127.0.0.1:2222")
				expect(t, "data_dir", f.DataDir, filepath.Join(wd, "flag-data"))
				expect(t, "token", f.Token, "flag-token")
				expect(t, "log_level", f.LogLevel, "debug")
				expect(t, "log_format", f.LogFormat, "json")
				expect(t, "store", string(f.StoreKind()), string(StorePostgres))
				expect(t, "pprof_addr", f.PprofAddr, "127.0.0.1:6060")
				if !f.Dev {
					t.Error("dev not set")
				}
			}},
		{"--tokens-file replaces the file's token", cfg, nil, Flags{TokensFile: ptr(tokens)}, func(t *testing.T, f *File) {
			expect(t, "token", f.Token, "")
			expect(t, "tokens_file", f.TokensFile, tokens)
		}},
		{"--no-auth replaces the env token", cfg, map[string]string{EnvToken: "env-token"}, Flags{NoAuth: ptr(true)}, func(t *testing.T, f *File) {
			expect(t, "token", f.Token, "")
			if !f.NoAuth {
				t.Error("no_auth not set")
			}
		}},
		{"--no-auth=false and an empty --token change nothing", cfg, nil, Flags{NoAuth: ptr(false), Token: ptr("")}, func(t *testing.T, f *File) {
			expect(t, "token", f.Token, "file-token")
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := Resolve(c.path, c.flags, envOf(c.env))
			if err != nil {
				t.Fatal(err)
			}
			c.check(t, f)
		})
	}
}

func TestEnvTokenReplacesFileAuth(t *testing.T) {
	f := Default()
	f.NoAuth = true
	f.ApplyEnv(envOf(map[string]string{EnvToken: "t"}))
	if f.NoAuth || f.Token != "t" {
		t.Errorf("%+v", f)
	}
}

func TestResolveErrors(t *testing.T) {
	dir := t.TempDir()
	t.Run("two auth flags", func(t *testing.T) {
		_, err := Resolve("", Flags{Token: ptr("a"), NoAuth: ptr(true)}, envOf(nil))
		wantErr(t, err, "--token and --no-auth exclude each other; give one")
	})
	t.Run("missing file", func(t *testing.T) {
		_, err := Resolve(filepath.Join(dir, "nope.yaml"), Flags{}, envOf(nil))
		wantErr(t, err, "config: open "+filepath.Join(dir, "nope.yaml"))
	})
	t.Run("flag value invalid", func(t *testing.T) {
		_, err := Resolve("", Flags{PprofAddr: ptr("0.0.0.0:6060")}, envOf(map[string]string{"HOME": "/h"}))
		wantErr(t, err, "pprof_addr: must be a loopback address")
	})
	t.Run("decode error", func(t *testing.T) {
		p := writeFile(t, dir, "bad.yaml", "adr: x\n")
		_, err := Resolve(p, Flags{}, envOf(nil))
		wantErr(t, err, p+":1: adr: unknown key (did you mean addr?)")
	})
	t.Run("web root without an index.html", func(t *testing.T) {
		_, err := Resolve("", Flags{WebRoot: ptr(dir)}, envOf(map[string]string{"HOME": "/h"}))
		wantErr(t, err, "web_root: "+strconv.Quote(dir)+" has no index.html")
	})
	t.Run("a flag fixes the file", func(t *testing.T) {
		// The file names a tokens file that does not exist; --token decides
		// authentication instead, so the merged configuration is valid.
		p := writeFile(t, dir, "gone.yaml", "tokens_file: gone.json\n")
		if _, err := Load(p); err == nil {
			t.Fatal("the file alone must not validate")
		}
		f, err := Resolve(p, Flags{Token: ptr("t")}, envOf(map[string]string{"HOME": "/h"}))
		if err != nil || f.Token != "t" || f.TokensFile != "" {
			t.Fatalf("%+v, %v", f, err)
		}
	})
}

func TestResolveWebRoot(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "index.html", "<!doctype html>")
	t.Chdir(filepath.Dir(dir))
	f, err := Resolve("", Flags{WebRoot: ptr(filepath.Base(dir))}, envOf(map[string]string{"HOME": "/h"}))
	if err != nil {
		t.Fatal(err)
	}
	if f.WebRoot != dir {
		t.Fatalf("web_root %q, want the absolute %q", f.WebRoot, dir)
	}
	// In a file, relative to the file.
	p := writeFile(t, dir, "surfaced.yaml", "web_root: .\n")
	if f, err = Resolve(p, Flags{}, envOf(map[string]string{"HOME": "/h"})); err != nil || f.WebRoot != dir {
		t.Fatalf("%q, %v", f.WebRoot, err)
	}
}

func TestClassifyStore(t *testing.T) {
	for in, want := range map[string]StoreKind{
		"": StoreSQLite, "postgres://u:p@h:5432/db": StorePostgres, "postgresql://h/db?sslmode=disable": StorePostgres,
		"POSTGRES://h/db": StorePostgres, "postgres:///db?host=/var/run/postgresql": StorePostgres,
	} {
		got, err := ClassifyStore(in)
		if err != nil || got != want {
			t.Errorf("ClassifyStore(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"sqlite:///x.db", "user=u password=hunter2", "postgres://u:hunter2@h:xx/db", "mysql://u:hunter2@h/db"} {
		_, err := ClassifyStore(in)
		if err == nil {
			t.Errorf("ClassifyStore(%q) accepted", in)
		} else if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("ClassifyStore(%q) leaks the password: %v", in, err)
		}
	}
}

func TestNewLogger(t *testing.T) {
	f := Default()
	f.LogFormat, f.LogLevel = "json", "warn"
	var buf bytes.Buffer
	log := f.NewLogger(&buf)
	log.Info("dropped")
	log.Warn("kept", "k", 1)
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil || rec["msg"] != "kept" {
		t.Errorf("log output %q (%v)", buf.String(), err)
	}
	f.LogFormat, f.LogLevel = "text", "debug"
	buf.Reset()
	f.NewLogger(&buf).Debug("hello")
	if !strings.Contains(buf.String(), "level=DEBUG msg=hello") {
		t.Errorf("text output %q", buf.String())
	}
	for lvl, want := range map[string]string{"debug": "DEBUG", "info": "INFO", "warn": "WARN", "error": "ERROR"} {
		f.LogLevel = lvl
		if got := f.SlogLevel().String(); got != want {
			t.Errorf("%s: %s", lvl, got)
		}
	}
}

func expect(t *testing.T, what, got, want string) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %q, want %q", what, got, want)
	}
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
