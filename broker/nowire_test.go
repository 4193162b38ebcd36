package broker_test

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

const (
	module  = "github.com/raftmq/raftmq"
	wirePkg = module + "/api"
)

// adapters are the directories under broker/ that present the broker to
// the outside (gRPC, RocketMQ remoting, the web console's HTTP) and the
// node assembly: they may speak a wire protocol and import the facade;
// everything else under broker/ is the core.
var adapters = map[string]bool{"grpcapi": true, "remoting": true, "server": true, "console": true}

// The broker core reaches no generated wire code, directly or through the
// raftmq packages it imports (shared names come from package mq).
func TestCoreImportsNoWireCode(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	core := corePackages(t)

	// from[p] is the package that first led to p, to print the chain.
	from := map[string]string{}
	queue := append([]string(nil), core...)
	for _, p := range core {
		from[p] = ""
	}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		imports, err := packageImports(filepath.Join(root, strings.TrimPrefix(p, module)))
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		for _, imp := range imports {
			if imp != module && !strings.HasPrefix(imp, module+"/") {
				continue
			}
			if _, seen := from[imp]; seen {
				continue
			}
			from[imp] = p
			if imp == wirePkg {
				chain := []string{imp}
				for q := p; q != ""; q = from[q] {
					chain = append(chain, q)
				}
				slices.Reverse(chain)
				t.Errorf("the broker core imports generated wire code: %s", strings.Join(chain, " -> "))
				continue
			}
			queue = append(queue, imp)
		}
	}
}

// The facade's subpackages are the concepts it coordinates: none of them
// imports the facade, directly or through another raftmq package.
func TestSubpackagesDoNotImportTheFacade(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	facade := module + "/broker"
	for _, sub := range corePackages(t) {
		if sub == facade {
			continue
		}
		seen := map[string]bool{sub: true}
		queue := []string{sub}
		for len(queue) > 0 {
			p := queue[0]
			queue = queue[1:]
			imports, err := packageImports(filepath.Join(root, strings.TrimPrefix(p, module)))
			if err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			for _, imp := range imports {
				if imp == facade {
					t.Errorf("%s imports the facade %s (through %s)", sub, facade, p)
					continue
				}
				if seen[imp] || (imp != module && !strings.HasPrefix(imp, module+"/")) {
					continue
				}
				seen[imp] = true
				queue = append(queue, imp)
			}
		}
	}
}

// corePackages lists the facade and every package under broker/ but the
// adapters: each new subpackage counts as core without being named here.
func corePackages(t *testing.T) []string {
	t.Helper()
	var core []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if adapters[path] || d.Name() == "testdata" {
			return filepath.SkipDir
		}
		if path == "." {
			core = append(core, module+"/broker")
		} else {
			core = append(core, module+"/broker/"+filepath.ToSlash(path))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(core) < 4 {
		t.Fatalf("found only %v under broker/: the walk is broken", core)
	}
	return core
}

// packageImports lists the imports of the non-test Go files in dir.
func packageImports(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	fset := token.NewFileSet()
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.ImportsOnly)
		if err != nil {
			return nil, err
		}
		for _, s := range f.Imports {
			p, err := strconv.Unquote(s.Path.Value)
			if err != nil {
				return nil, err
			}
			out = append(out, p)
		}
	}
	return out, nil
}
