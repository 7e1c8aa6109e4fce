// Command k8sschema writes the JSON schemas kubeconform validates the
// Kubernetes manifests of deploy/k8s against, from the Kubernetes API's
// OpenAPI (Swagger 2.0) document, offline.
//
// The document is the one k8s.io/kube-openapi ships as test data (the
// Kubernetes 1.27 API, pinned by deploy/tools/go.mod, so it is in the module
// cache once the tools are). Each top-level kind becomes one standalone
// schema, named as kubeconform's default schema location names it
// (deployment-apps-v1.json, service-v1.json), made strict the way
// kubeconform's own schema converter makes its -strict schemas: an object
// with declared properties admits no other, an int-or-string admits both,
// a quantity admits a number.
//
//	go run ./k8sschema -swagger <kube-openapi>/pkg/schemaconv/testdata/swagger.json -out DIR
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	swagger := flag.String("swagger", "", "the Kubernetes OpenAPI (Swagger 2.0) document")
	out := flag.String("out", "", "the directory to write the schemas to")
	flag.Parse()
	if *swagger == "" || *out == "" {
		fmt.Fprintln(os.Stderr, "usage: k8sschema -swagger swagger.json -out DIR")
		os.Exit(2)
	}
	n, err := run(*swagger, *out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "k8sschema:", err)
		os.Exit(1)
	}
	fmt.Printf("k8sschema: %d schemas in %s\n", n, *out)
}

type gvk struct {
	Group   string `json:"group"`
	Version string `json:"version"`
	Kind    string `json:"kind"`
}

func run(swaggerPath, out string) (int, error) {
	raw, err := os.ReadFile(swaggerPath)
	if err != nil {
		return 0, fmt.Errorf("reading the OpenAPI document: %w", err)
	}
	var doc struct {
		Definitions map[string]map[string]any `json:"definitions"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return 0, fmt.Errorf("parsing %s: %w", swaggerPath, err)
	}
	if len(doc.Definitions) == 0 {
		return 0, fmt.Errorf("%s has no definitions", swaggerPath)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return 0, fmt.Errorf("making %s: %w", out, err)
	}
	names := make([]string, 0, len(doc.Definitions))
	for name := range doc.Definitions {
		names = append(names, name)
	}
	sort.Strings(names)
	n := 0
	for _, name := range names {
		def := doc.Definitions[name]
		kinds, err := kindsOf(def)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", name, err)
		}
		// A definition shared by many kinds (DeleteOptions, WatchEvent) is
		// not a resource a manifest holds.
		if len(kinds) != 1 {
			continue
		}
		schema, err := standalone(doc.Definitions, name)
		if err != nil {
			return 0, err
		}
		b, err := json.MarshalIndent(schema, "", " ")
		if err != nil {
			return 0, fmt.Errorf("%s: %w", name, err)
		}
		path := filepath.Join(out, fileName(kinds[0]))
		if err := os.WriteFile(path, b, 0o644); err != nil {
			return 0, fmt.Errorf("writing %s: %w", path, err)
		}
		n++
	}
	return n, nil
}

func kindsOf(def map[string]any) ([]gvk, error) {
	x, ok := def["x-kubernetes-group-version-kind"]
	if !ok {
		return nil, nil
	}
	b, err := json.Marshal(x)
	if err != nil {
		return nil, err
	}
	var kinds []gvk
	if err := json.Unmarshal(b, &kinds); err != nil {
		return nil, fmt.Errorf("x-kubernetes-group-version-kind: %w", err)
	}
	return kinds, nil
}

// fileName is kubeconform's {{.ResourceKind}}{{.KindSuffix}}.json: the kind
// in lower case, the group's first label (none for the core group), the
// version.
func fileName(k gvk) string {
	suffix := "-" + k.Version
	if k.Group != "" {
		suffix = "-" + strings.ToLower(strings.Split(k.Group, ".")[0]) + suffix
	}
	return strings.ToLower(k.Kind) + suffix + ".json"
}

const refPrefix = "#/definitions/"

// quantity is a resource quantity: "500m", "1Gi", or a bare number.
const quantity = "io.k8s.apimachinery.pkg.api.resource.Quantity"

// standalone is the definition name with every $ref it reaches inlined and
// made strict (the Kubernetes API has no recursive types among the kinds a
// manifest holds; a cycle is reported, not followed).
func standalone(defs map[string]map[string]any, name string) (map[string]any, error) {
	v, err := inline(defs, defs[name], map[string]bool{name: true})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	schema := v.(map[string]any)
	schema["$schema"] = "http://json-schema.org/schema#"
	return schema, nil
}

func inline(defs map[string]map[string]any, v any, path map[string]bool) (any, error) {
	switch t := v.(type) {
	case map[string]any:
		if ref, ok := t["$ref"].(string); ok {
			name := strings.TrimPrefix(ref, refPrefix)
			def, ok := defs[name]
			if !ok || name == ref {
				return nil, fmt.Errorf("unresolved $ref %q", ref)
			}
			if path[name] {
				// A recursive type (JSONSchemaProps): admit anything below.
				return map[string]any{}, nil
			}
			path[name] = true
			defer delete(path, name)
			if name == quantity {
				return map[string]any{"oneOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "number"}}}, nil
			}
			resolved, err := inline(defs, def, path)
			if err != nil {
				return nil, err
			}
			// The referring schema's own description wins.
			out := resolved.(map[string]any)
			if d, ok := t["description"]; ok {
				out["description"] = d
			}
			return out, nil
		}
		out := make(map[string]any, len(t)+1)
		for k, e := range t {
			switch k {
			case "properties", "patternProperties":
				// Maps of names to schemas: keep the names, inline the schemas.
				m, _ := e.(map[string]any)
				props := make(map[string]any, len(m))
				for name, ps := range m {
					r, err := inline(defs, ps, path)
					if err != nil {
						return nil, err
					}
					props[name] = r
				}
				out[k] = props
			case "items", "additionalProperties", "allOf", "anyOf", "oneOf", "not":
				r, err := inline(defs, e, path)
				if err != nil {
					return nil, err
				}
				out[k] = r
			default:
				out[k] = e
			}
		}
		return strict(out), nil
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			r, err := inline(defs, e, path)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	default:
		return v, nil
	}
}

// strict is kubeconform's -strict conversion of one schema object.
func strict(s map[string]any) map[string]any {
	if f, _ := s["format"].(string); f == "int-or-string" {
		delete(s, "type")
		delete(s, "format")
		s["oneOf"] = []any{map[string]any{"type": "string"}, map[string]any{"type": "integer"}}
		return s
	}
	// Formats (int32, date-time, byte) describe encodings the API server
	// checks; the schema validator need not assert them.
	delete(s, "format")
	if _, ok := s["properties"].(map[string]any); ok && s["type"] == "object" {
		if _, ok := s["additionalProperties"]; !ok {
			s["additionalProperties"] = false
		}
	}
	return s
}
