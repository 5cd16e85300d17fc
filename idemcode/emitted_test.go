package idemcode_test

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/goovo/idem/idemcode"
	"github.com/goovo/idem/idemcode/internal/jscodes"
)

// Every code the server can answer with is classified: the test reads the
// source of this module and of gqlgen, finds each extensions.code they can
// set, and fails on any that idemcode does not list. It finds:
//
//   - constants of type Code (idem's are defined from idemcode's);
//   - "code": value in map literals, ["code"] = value assignments, and
//     gqlgen's errcode.Set(err, value), where the value is a string
//     literal or a constant;
//   - string literals passed to a parameter named code, such as the
//     example's finalError(code, message).
//
// An application's own codes (the example's ORDER_ALREADY_PAID) are not
// idemcode's: they pass when the function that sets them marks its error
// idem.Final, so that clients rightly treat them as final.
//
// The JavaScript client classifies as idemcode does: the test fails when
// its generated list (clients/js/src/codes.ts), or the compiled copy the
// package ships (dist/codes.js), is stale, and when its header and outcome
// names (clients/js/src/wire.ts) are.
func TestEveryEmittedCodeIsClassified(t *testing.T) {
	checkJavaScriptCodes(t)

	gqlgen, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/99designs/gqlgen").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	found := map[string][]string{} // code -> where
	finalOnly := map[string]bool{} // set only through functions that mark it final
	scan(t, "..", found, finalOnly, func(path string) bool {
		return strings.Contains(path, "/internal/testapp") || strings.Contains(path, "/cmd/loadtest") || strings.Contains(path, "/testdata/")
	})
	scan(t, filepath.Join(strings.TrimSpace(string(gqlgen)), "graphql"), found, finalOnly, func(path string) bool {
		return strings.Contains(path, "/testdata/") || strings.Contains(path, "/_examples/")
	})
	for _, want := range []idemcode.Code{idemcode.ValidationFailed, idemcode.ParseFailed, idemcode.ComplexityLimitExceeded, idemcode.KeyInvalid, idemcode.InternalServerError} {
		if _, ok := found[string(want)]; !ok {
			t.Errorf("the scan did not find %s: it misses codes", want)
		}
	}
	for code, where := range found {
		switch {
		case idemcode.Code(code).Known():
		case finalOnly[code]:
			t.Logf("%s: an application code, always final (%s)", code, where[0])
		default:
			t.Errorf("%s is emitted but not classified in idemcode (%s)", code, strings.Join(where, ", "))
		}
	}
	for _, c := range idemcode.All() {
		if _, ok := found[string(c)]; !ok {
			t.Logf("%s is classified; this source does not set it (gqlgen's APQ, say)", c)
		}
	}
}

// checkJavaScriptCodes fails t when the JavaScript client's codes module
// is not what go generate makes of idemcode.go, or when it or its compiled
// copy lists other codes, or classifies them otherwise, than idemcode.
func checkJavaScriptCodes(t *testing.T) {
	t.Helper()
	src, err := os.ReadFile("idemcode.go")
	if err != nil {
		t.Fatal(err)
	}
	want, err := jscodes.Render(src)
	if err != nil {
		t.Fatal(err)
	}
	module, err := os.ReadFile(filepath.Join("..", jscodes.Module))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(module, want) {
		t.Errorf("%s is stale: run go generate ./idemcode, then npm run build in clients/js", jscodes.Module)
	}
	wireSrc, err := os.ReadFile("wire.go")
	if err != nil {
		t.Fatal(err)
	}
	if want, err = jscodes.RenderWire(wireSrc); err != nil {
		t.Fatal(err)
	}
	if module, err = os.ReadFile(filepath.Join("..", jscodes.WireModule)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(module, want) {
		t.Errorf("%s is stale: run go generate ./idemcode, then npm run build in clients/js", jscodes.WireModule)
	}
	var retryable []idemcode.Code
	for _, c := range idemcode.All() {
		if c.Retryable() {
			retryable = append(retryable, c)
		}
	}
	for _, file := range []string{jscodes.Module, jscodes.Dist} {
		b, err := os.ReadFile(filepath.Join("..", file))
		if err != nil {
			t.Fatal(err)
		}
		all, retry, err := jscodes.Lists(b)
		switch {
		case err != nil:
			t.Errorf("%s: %v", file, err)
		case !slices.Equal(all, idemcode.All()):
			t.Errorf("%s lists the codes %v; idemcode lists %v: run go generate ./idemcode, then npm run build in clients/js", file, all, idemcode.All())
		case !slices.Equal(retry, retryable):
			t.Errorf("%s retries %v; idemcode's retryable codes are %v: run go generate ./idemcode, then npm run build in clients/js", file, retry, retryable)
		}
	}
}

// scan parses the Go files under dir (tests and skipped paths aside) and
// records the codes they set.
func scan(t *testing.T, dir string, found map[string][]string, finalOnly map[string]bool, skip func(string) bool) {
	t.Helper()
	fset := token.NewFileSet()
	pkgs := map[string][]*ast.File{} // by directory
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "node_modules" {
			return filepath.SkipDir // the JavaScript client's npm dependencies
		}
		abs, _ := filepath.Abs(path)
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || skip(filepath.ToSlash(abs)) {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		pkgs[filepath.Dir(path)] = append(pkgs[filepath.Dir(path)], f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Constants of every package, by package name and by name, to resolve
	// identifiers such as idemcode.KeyMissing or errComplexityLimit.
	consts := map[string]map[string]ast.Expr{}
	for _, files := range pkgs {
		for _, f := range files {
			m := consts[f.Name.Name]
			if m == nil {
				m = map[string]ast.Expr{}
				consts[f.Name.Name] = m
			}
			for _, decl := range f.Decls {
				if gd, ok := decl.(*ast.GenDecl); ok && gd.Tok == token.CONST {
					for _, spec := range gd.Specs {
						vs := spec.(*ast.ValueSpec)
						for i, name := range vs.Names {
							if i < len(vs.Values) {
								m[name.Name] = vs.Values[i]
							}
						}
					}
				}
			}
		}
	}
	var resolve func(pkg string, e ast.Expr, depth int) (string, bool)
	resolve = func(pkg string, e ast.Expr, depth int) (string, bool) {
		if depth > 5 {
			return "", false
		}
		switch e := e.(type) {
		case *ast.BasicLit:
			if e.Kind == token.STRING {
				s, err := strconv.Unquote(e.Value)
				return s, err == nil
			}
		case *ast.Ident:
			if v, ok := consts[pkg][e.Name]; ok {
				return resolve(pkg, v, depth+1)
			}
		case *ast.SelectorExpr:
			if x, ok := e.X.(*ast.Ident); ok {
				if v, ok := consts[x.Name][e.Sel.Name]; ok {
					return resolve(x.Name, v, depth+1)
				}
			}
		case *ast.CallExpr: // string(CodeX)
			if id, ok := e.Fun.(*ast.Ident); ok && id.Name == "string" && len(e.Args) == 1 {
				return resolve(pkg, e.Args[0], depth+1)
			}
		}
		return "", false
	}
	for _, files := range pkgs {
		// Functions of the package with a parameter named code, and whether
		// they mark their error final.
		codeParam := map[string]int{}
		marksFinal := map[string]bool{}
		for _, f := range files {
			for _, decl := range f.Decls {
				fd, ok := decl.(*ast.FuncDecl)
				if !ok || fd.Recv != nil {
					continue
				}
				i := 0
				for _, field := range fd.Type.Params.List {
					for _, name := range field.Names {
						if name.Name == "code" {
							codeParam[fd.Name.Name] = i
						}
						i++
					}
				}
				ast.Inspect(fd, func(n ast.Node) bool {
					if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == "Final" {
						marksFinal[fd.Name.Name] = true
					}
					return true
				})
			}
		}
		for _, f := range files {
			pkg := f.Name.Name
			add := func(e ast.Expr, final bool) {
				code, ok := resolve(pkg, e, 0)
				if !ok || code == "" {
					return
				}
				where := fset.Position(e.Pos()).String()
				if len(found[code]) == 0 {
					finalOnly[code] = final
				} else {
					finalOnly[code] = finalOnly[code] && final
				}
				found[code] = append(found[code], where)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.ValueSpec: // const X Code = "..."
					if typ := exprString(n.Type); typ == "Code" || typ == "idemcode.Code" {
						for _, v := range n.Values {
							add(v, false)
						}
					}
				case *ast.KeyValueExpr: // "code": v
					if k, ok := n.Key.(*ast.BasicLit); ok && k.Value == `"code"` {
						add(n.Value, false)
					}
				case *ast.AssignStmt: // ext["code"] = v
					for i, lhs := range n.Lhs {
						if ix, ok := lhs.(*ast.IndexExpr); ok && i < len(n.Rhs) {
							if k, ok := ix.Index.(*ast.BasicLit); ok && k.Value == `"code"` {
								add(n.Rhs[i], false)
							}
						}
					}
				case *ast.CallExpr:
					switch fun := n.Fun.(type) {
					case *ast.SelectorExpr: // errcode.Set(err, v)
						if x, ok := fun.X.(*ast.Ident); ok && x.Name == "errcode" && fun.Sel.Name == "Set" && len(n.Args) == 2 {
							add(n.Args[1], false)
						}
					case *ast.Ident: // finalError("CODE", ...)
						if i, ok := codeParam[fun.Name]; ok && i < len(n.Args) {
							add(n.Args[i], marksFinal[fun.Name])
						}
					}
				}
				return true
			})
		}
	}
}

func exprString(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return exprString(e.X) + "." + e.Sel.Name
	}
	return ""
}

// The list is the list: no code twice, each final or retryable.
func TestAllIsAList(t *testing.T) {
	all := idemcode.All()
	seen := map[idemcode.Code]bool{}
	for _, c := range all {
		if seen[c] || !c.Known() || c.Final() == c.Retryable() {
			t.Errorf("%s: seen twice, unknown, or neither final nor retryable", c)
		}
		seen[c] = true
	}
	retryable := slices.DeleteFunc(slices.Clone(all), func(c idemcode.Code) bool { return !c.Retryable() })
	if !slices.Equal(retryable, []idemcode.Code{idemcode.InProgress, idemcode.Unavailable, idemcode.InternalServerError}) {
		t.Errorf("retryable codes %v", retryable)
	}
	if idemcode.Code("ORDER_ALREADY_PAID").Known() || idemcode.Code("ORDER_ALREADY_PAID").Final() || idemcode.Code("").Retryable() {
		t.Error("an unknown code is classified")
	}
}
