package architecture

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// publicPackages are the packages an application, a client or generated
// code imports, relative to the module. Their API is recorded in api/.
var publicPackages = []string{
	".", "idemhttp", "idembackend", "idemcode", "idemctl", "idempartition",
	"idemschema", "idemgen", "idemdb", "idemdb/pgxdriver", "idemoutbox",
	"idemtest", "idemclient", "clients/js",
}

// example is the example application: importable, but not the library's.
var example = []string{"ent/...", "graph", "clients/js/test/..."}

// recordFile is the file of api/ that records the package rel.
func recordFile(rel string) string {
	name := "idem"
	if rel != "." {
		name = strings.ReplaceAll(rel, "/", "-")
	}
	return filepath.Join("../../api", name+".txt")
}

// The public API is recorded: api/<package>.txt is what go doc -all prints
// of each public package, and a change of the API fails here until the
// record changes with it, in the same commit, so that the surface grows only
// on purpose (and the CHANGELOG says so). UPDATE_API=1 go test
// ./internal/architecture rewrites the record.
func TestAPIRecord(t *testing.T) {
	update := os.Getenv("UPDATE_API") == "1"
	for _, rel := range publicPackages {
		cmd := exec.Command("go", "doc", "-all", "./"+strings.TrimPrefix(rel, "./"))
		cmd.Dir = "../.."
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		got, err := cmd.Output()
		if err != nil {
			t.Fatalf("go doc -all %s: %v\n%s", rel, err, stderr.Bytes())
		}
		file := recordFile(rel)
		if update {
			if err := os.WriteFile(file, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(file)
		if err != nil {
			t.Errorf("%s: no record (%v): run UPDATE_API=1 go test ./internal/architecture", rel, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("the API of %s is not its record %s: review the change, say it in CHANGELOG.md, and run UPDATE_API=1 go test ./internal/architecture\n%s",
				rel, filepath.Base(file), firstDifference(string(want), string(got)))
		}
	}
}

// firstDifference shows the first line where the record and the API part.
func firstDifference(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < max(len(w), len(g)); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return "line " + strconv.Itoa(i+1) + ":\n  recorded: " + wl + "\n  now:      " + gl
		}
	}
	return ""
}

// Every public package is recorded, and api/ records no other: a package
// outside internal/, the commands (package main) and the example is
// public.
func TestEveryPublicPackageIsRecorded(t *testing.T) {
	layers := []layer{{n: 0, patterns: append(append([]string{}, publicPackages...), example...)}}
	for _, p := range modulePackages(t) {
		r := rel(p.ImportPath)
		if p.Name == "main" || r == "internal" || strings.HasPrefix(r, "internal/") || strings.Contains(r, "/internal/") ||
			strings.HasPrefix(r, "cmd/") || strings.HasPrefix(r, "bench/") {
			continue
		}
		if _, ok := layerOf(layers, r); !ok {
			t.Errorf("%s is public and not recorded: add it to publicPackages (or, if it is the example's, to example)", r)
		}
	}
	files, err := filepath.Glob("../../api/*.txt")
	if err != nil {
		t.Fatal(err)
	}
	recorded := map[string]bool{}
	for _, rel := range publicPackages {
		recorded[filepath.Base(recordFile(rel))] = true
	}
	for _, f := range files {
		if !recorded[filepath.Base(f)] {
			t.Errorf("api/%s records no public package", filepath.Base(f))
		}
	}
}
