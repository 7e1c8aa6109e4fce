// Command composecheck loads a compose file as docker compose and podman
// compose load it (the Compose Specification's own loader, with its
// schema, interpolation and checks), offline, and fails on what they would
// refuse.
//
//	go run ./composecheck -env SURFACED_TOKEN=x ../compose/compose.yaml
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
)

type envFlag map[string]string

func (e envFlag) String() string { return fmt.Sprint(map[string]string(e)) }
func (e envFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok {
		return fmt.Errorf("%q is not NAME=value", s)
	}
	e[k] = v
	return nil
}

func main() {
	env := envFlag{}
	flag.Var(env, "env", "NAME=value the file interpolates (repeatable)")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: composecheck [-env NAME=value ...] compose.yaml")
		os.Exit(2)
	}
	if err := check(flag.Arg(0), env); err != nil {
		fmt.Fprintln(os.Stderr, "composecheck:", err)
		os.Exit(1)
	}
}

func check(path string, env map[string]string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	b, err := os.ReadFile(abs)
	if err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	details := types.ConfigDetails{
		WorkingDir:  filepath.Dir(abs),
		ConfigFiles: []types.ConfigFile{{Filename: abs, Content: b}},
		Environment: env,
	}
	p, err := loader.LoadWithContext(context.Background(), details)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	fmt.Printf("composecheck: %s: project %s, services %s\n", path, p.Name, strings.Join(p.ServiceNames(), " "))
	return nil
}
