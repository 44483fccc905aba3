// Package layout checks the repository's architecture rules, so that they
// hold by test rather than by habit:
//
//   - imports go one way: cmd/switchyard → services → libs → gen; a service
//     never imports another service, libs never import services, gen
//     imports only gen, and the single binary reaches a service only
//     through its root package (its Spec), never its internals;
//   - every service is its own module with a tiny cmd/<name>/main.go, a
//     root package exporting Spec, an internal/ tree and a VERSION file;
//   - every module (tools included) names the go.work's go version;
//   - every module that requires a sibling has a replace directive for it,
//     so it builds alone (GOWORK=off; scripts/test.sh builds each one).
package layout

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const prefix = "switchyard.dev/"

var services = []string{"frontend", "router", "prefill", "decode", "kvbm-controller", "planner"}

func root(t *testing.T) string {
	t.Helper()
	r, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(r, "go.work")); err != nil {
		t.Fatalf("repository root not found at %s: %v", r, err)
	}
	return r
}

// imports returns, for every Go file under dir, the switchyard.dev imports.
func imports(t *testing.T, dir string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(path, prefix) {
				out[p] = append(out[p], strings.TrimPrefix(path, prefix))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestImportDirection(t *testing.T) {
	t.Parallel()
	r := root(t)
	check := func(area string, allowed func(imp string) bool) {
		for file, imps := range imports(t, filepath.Join(r, area)) {
			for _, imp := range imps {
				if !allowed(imp) {
					rel, _ := filepath.Rel(r, file)
					t.Errorf("%s imports %s%s: not allowed from %s", rel, prefix, imp, area)
				}
			}
		}
	}
	for _, svc := range services {
		own := "services/" + svc
		check(own, func(imp string) bool {
			return imp == own || strings.HasPrefix(imp, own+"/") ||
				strings.HasPrefix(imp, "libs/") || strings.HasPrefix(imp, "gen/")
		})
	}
	check("cmd", func(imp string) bool {
		if strings.HasPrefix(imp, "cmd/") || strings.HasPrefix(imp, "libs/") || strings.HasPrefix(imp, "gen/") {
			return true
		}
		svc, ok := strings.CutPrefix(imp, "services/")
		return ok && slices.Contains(services, svc)
	})
	check("libs", func(imp string) bool { return strings.HasPrefix(imp, "libs/") || strings.HasPrefix(imp, "gen/") })
	check("gen", func(imp string) bool { return strings.HasPrefix(imp, "gen/") })
	check("loadtest", func(imp string) bool {
		return strings.HasPrefix(imp, "loadtest") || strings.HasPrefix(imp, "libs/") || strings.HasPrefix(imp, "gen/")
	})
}

func TestServiceShape(t *testing.T) {
	t.Parallel()
	r := root(t)
	for _, svc := range services {
		dir := filepath.Join(r, "services", svc)
		root := strings.ReplaceAll(svc, "-", "") + ".go"
		for _, must := range []string{"go.mod", "VERSION", "internal", root, filepath.Join("cmd", svc, "main.go")} {
			if _, err := os.Stat(filepath.Join(dir, must)); err != nil {
				t.Errorf("services/%s lacks %s", svc, must)
			}
		}
		main, err := os.ReadFile(filepath.Join(dir, "cmd", svc, "main.go"))
		if err == nil && strings.Count(string(main), "\n") > 40 {
			t.Errorf("services/%s/cmd/%s/main.go has %d lines; keep main tiny, wiring in internal/", svc, svc, strings.Count(string(main), "\n"))
		}
		if src, err := os.ReadFile(filepath.Join(dir, root)); err == nil && !strings.Contains(string(src), "\nfunc Spec(") {
			t.Errorf("services/%s/%s does not export Spec, which its binary and cmd/switchyard run", svc, root)
		}
		v, err := os.ReadFile(filepath.Join(dir, "VERSION"))
		if err == nil && !validSemver(strings.TrimSpace(string(v))) {
			t.Errorf("services/%s/VERSION = %q; want MAJOR.MINOR.PATCH", svc, v)
		}
	}
}

func validSemver(v string) bool {
	parts := strings.Split(v, ".")
	if len(parts) != 3 {
		return false
	}
	for _, p := range parts {
		if _, err := strconv.Atoi(p); err != nil {
			return false
		}
	}
	return true
}

// Every switchyard.dev requirement of a module is replaced by a local path.
func TestModulesReplaceSiblings(t *testing.T) {
	t.Parallel()
	r := root(t)
	work, err := os.ReadFile(filepath.Join(r, "go.work"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(work), "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "./") {
			continue
		}
		gomod, err := os.ReadFile(filepath.Join(r, line, "go.mod"))
		if err != nil {
			t.Errorf("%s: %v", line, err)
			continue
		}
		for _, l := range strings.Split(string(gomod), "\n") {
			f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(l), "require "))
			if len(f) >= 2 && strings.HasPrefix(f[0], prefix) && !strings.Contains(l, "=>") &&
				!strings.Contains(string(gomod), f[0]+" => ") {
				t.Errorf("%s/go.mod requires %s without a replace directive", line, f[0])
			}
		}
	}
}

// Every module, the tools' included, builds with the go version go.work
// names, so no module silently asks for an older language.
func TestGoDirectives(t *testing.T) {
	t.Parallel()
	r := root(t)
	work, err := os.ReadFile(filepath.Join(r, "go.work"))
	if err != nil {
		t.Fatal(err)
	}
	want := goDirective(string(work))
	if want == "" {
		t.Fatal("go.work names no go version")
	}
	mods, err := filepath.Glob(filepath.Join(r, "*", "*", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	more, _ := filepath.Glob(filepath.Join(r, "*", "go.mod"))
	for _, m := range append(mods, more...) {
		b, err := os.ReadFile(m)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(r, m)
		if strings.HasPrefix(rel, "third_party") {
			continue
		}
		if got := goDirective(string(b)); got != want {
			t.Errorf("%s: go %s; want go %s as in go.work", rel, got, want)
		}
	}
}

func goDirective(mod string) string {
	for _, l := range strings.Split(mod, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "go "); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
