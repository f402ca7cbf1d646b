package ui_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"testing"
)

// Every browser of the tests is started by newBrowser, which skips the
// test naming the binaries it looked for when there is no Chromium, and
// every test or benchmark that starts one checks for Chromium first,
// before it starts a server.
func TestBrowserTestsSkipWithoutChromium(t *testing.T) {
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	browsers := 0
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			calls := map[string]bool{}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				switch x := n.(type) {
				case *ast.SelectorExpr:
					if pkg, ok := x.X.(*ast.Ident); ok && pkg.Name == "chromedp" {
						calls["chromedp."+x.Sel.Name] = true
					}
				case *ast.CallExpr:
					if id, ok := x.Fun.(*ast.Ident); ok {
						calls[id.Name] = true
					}
				}
				return true
			})
			at := fset.Position(fn.Pos())
			if fn.Name.Name == "newBrowser" {
				if !calls["chromePath"] {
					t.Errorf("%s: newBrowser does not check for Chromium with chromePath", at)
				}
				continue
			}
			if calls["chromedp.NewExecAllocator"] || calls["chromedp.NewContext"] {
				t.Errorf("%s: %s starts a browser itself; newBrowser skips without Chromium", at, fn.Name.Name)
			}
			if !calls["newBrowser"] {
				continue
			}
			browsers++
			if !firstCallsChromePath(fn.Body) {
				t.Errorf("%s: %s starts a browser but does not call chromePath first", at, fn.Name.Name)
			}
		}
	}
	if browsers == 0 {
		t.Fatal("no test starts a browser: the check saw nothing")
	}
}

// firstCallsChromePath reports whether body's first statement calls
// chromePath.
func firstCallsChromePath(body *ast.BlockStmt) bool {
	if len(body.List) == 0 {
		return false
	}
	found := false
	ast.Inspect(body.List[0], func(n ast.Node) bool {
		if c, ok := n.(*ast.CallExpr); ok {
			if id, ok := c.Fun.(*ast.Ident); ok && id.Name == "chromePath" {
				found = true
			}
		}
		return !found
	})
	return found
}
