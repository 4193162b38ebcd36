package filter

import (
	"errors"
	"testing"
)

var sqlSeeds = []string{
	"a > 5 AND b = 'x'",
	"a BETWEEN 1 AND 3",
	"b IN ('x', 'y') OR c IS NULL",
	"NOT (a <> 1) AND TAGS = 'TagA'",
	"a >= -1.5e3 OR flag = TRUE",
	"((a))",
	"a = 'it''s'",
	"a NOT IN (1, 2, 3)",
	"x IS NOT NULL",
}

// FuzzCompileSQL: any input either compiles to a filter that evaluates
// without panicking, or fails with an *Error that names a position inside
// the expression (or none).
func FuzzCompileSQL(f *testing.F) {
	for _, s := range sqlSeeds {
		f.Add(s, "7", "x")
	}
	f.Fuzz(func(t *testing.T, expr, a, b string) {
		flt, err := Compile(TypeSQL, expr)
		if err != nil {
			var fe *Error
			if !errors.As(err, &fe) {
				t.Fatalf("error is %T, want *Error: %v", err, err)
			}
			if fe.Pos < 0 || fe.Pos > len(expr)+1 {
				t.Fatalf("position %d outside an expression of %d bytes", fe.Pos, len(expr))
			}
			return
		}
		flt.Match(a, map[string]string{"a": a, "b": b, "c": a + b, "TAGS": b})
		flt.Match("", nil)
	})
}

// FuzzCompileTag: tag expressions never panic, and a compiled one matches
// exactly the tags it names.
func FuzzCompileTag(f *testing.F) {
	for _, s := range []string{"*", "", "TagA || TagB", " A ||| B", "||", "A || *"} {
		f.Add(s, "TagA")
	}
	f.Fuzz(func(t *testing.T, expr, tag string) {
		flt, err := Compile(TypeTag, expr)
		if err != nil {
			var fe *Error
			if !errors.As(err, &fe) {
				t.Fatalf("error is %T, want *Error: %v", err, err)
			}
			return
		}
		got := flt.Match(tag, nil)
		if flt == nil {
			if !got {
				t.Fatal("match-all filter refused a tag")
			}
			return
		}
		_, named := flt.tags[tag]
		if got != (named && tag != "") {
			t.Fatalf("tag %q against %q: got %v", tag, expr, got)
		}
	})
}
