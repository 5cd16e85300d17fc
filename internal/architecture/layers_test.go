package architecture

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/goovo/idem"

// layer is a row of docs/architecture.md's layering table: its number and
// the packages (or, with /..., package trees) in it, relative to the module.
type layer struct {
	n        int
	patterns []string
}

// layerTable reads the table under "## Layers" in docs/architecture.md:
// | layer | packages | … |, packages in backquotes.
func layerTable(t *testing.T) []layer {
	t.Helper()
	f, err := os.Open("../../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var layers []layer
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case l == "## Layers":
			in = true
		case in && strings.HasPrefix(l, "## "):
			in = false
		case in && strings.HasPrefix(l, "| ") && !strings.HasPrefix(l, "| layer"):
			cells := strings.Split(l, "|")
			n, err := strconv.Atoi(strings.TrimSpace(cells[1]))
			if err != nil {
				t.Fatalf("docs/architecture.md: a layer that is not a number: %s", l)
			}
			// The pieces between backquotes are the packages.
			var pats []string
			parts := strings.Split(cells[2], "`")
			for i := 1; i < len(parts); i += 2 {
				pats = append(pats, parts[i])
			}
			layers = append(layers, layer{n: n, patterns: pats})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(layers) == 0 {
		t.Fatal(`docs/architecture.md has no table under "## Layers"`)
	}
	return layers
}

// layerOf returns the layer of the package rel ("." for the root), by the
// longest pattern that matches it; ok is false when none does.
func layerOf(layers []layer, rel string) (n int, ok bool) {
	best := -1
	for _, l := range layers {
		for _, p := range l.patterns {
			tree, isTree := strings.CutSuffix(p, "/...")
			match := p == rel || (isTree && (rel == tree || strings.HasPrefix(rel, tree+"/")))
			if match && len(p) > best {
				best, n, ok = len(p), l.n, true
			}
		}
	}
	return n, ok
}

type pkg struct {
	ImportPath string
	Name       string
	Imports    []string
}

// modulePackages lists the module's packages and what each imports (not
// its tests).
func modulePackages(t *testing.T) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Name,Imports", "./...")
	cmd.Dir = "../.."
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

func rel(importPath string) string {
	if importPath == module {
		return "."
	}
	return strings.TrimPrefix(importPath, module+"/")
}

// The packages layer as docs/architecture.md says: each is in a layer of
// its table, and imports only packages of strictly lower layers (the top
// layer, applications and tests, imports anything, each other included).
// So nothing below the hook imports the hook, the pgx driver's seam with
// the record store is internal, and the operator's tools sit above the
// hook. A new
// package fails here until the table names its layer.
func TestLayersDoNotClimb(t *testing.T) {
	layers := layerTable(t)
	top := 0
	for _, l := range layers {
		top = max(top, l.n)
	}
	var problems []string
	for _, p := range modulePackages(t) {
		from := rel(p.ImportPath)
		lf, ok := layerOf(layers, from)
		if !ok {
			problems = append(problems, from+": in no layer of docs/architecture.md")
			continue
		}
		if lf == top {
			continue
		}
		for _, imp := range p.Imports {
			if imp != module && !strings.HasPrefix(imp, module+"/") {
				continue
			}
			to := rel(imp)
			lt, ok := layerOf(layers, to)
			if !ok || lt >= lf {
				problems = append(problems, from+" (layer "+strconv.Itoa(lf)+") imports "+to+" (layer "+strconv.Itoa(lt)+")")
			}
		}
	}
	sort.Strings(problems)
	for _, p := range problems {
		t.Error(p)
	}
}
