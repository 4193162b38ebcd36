package filter

import (
	"errors"
	"strings"
	"testing"
)

func mustCompile(t *testing.T, typ, expr string) *Filter {
	t.Helper()
	f, err := Compile(typ, expr)
	if err != nil {
		t.Fatalf("Compile(%q, %q): %v", typ, expr, err)
	}
	return f
}

func TestTagExpressions(t *testing.T) {
	cases := []struct {
		expr  string
		tag   string
		match bool
	}{
		{"*", "A", true},
		{"*", "", true},
		{"", "A", true},
		{"  *  ", "B", true},
		{"A", "A", true},
		{"A", "B", false},
		{"A", "", false},
		{"TagA || TagB", "TagA", true},
		{"TagA || TagB", "TagB", true},
		{"TagA || TagB", "TagC", false},
		{"TagA||TagB", "TagB", true},
		{" TagA ||  || TagB ", "TagB", true}, // empty parts are dropped, as RocketMQ does
		{"TagA", "taga", false},              // tags are case-sensitive
		{"Tag A", "Tag A", true},             // only the ends are trimmed
	}
	for _, c := range cases {
		f := mustCompile(t, "TAG", c.expr)
		if got := f.Match(c.tag, nil); got != c.match {
			t.Errorf("tag %q against %q: got %v, want %v", c.tag, c.expr, got, c.match)
		}
		if f.NeedsProperties() {
			t.Errorf("tag filter %q needs properties", c.expr)
		}
	}
	if f := mustCompile(t, "", "*"); f != nil {
		t.Errorf(`"*" compiled to %v, want nil (matches all)`, f)
	}
}

func TestTagErrors(t *testing.T) {
	cases := []struct{ expr, want string }{
		{"||", "names no tag"},
		{"  ||  ", "names no tag"},
		{"A || *", `position 6: "*" matches every tag`},
		{"A | B", "position 3: a single \"|\""},
		{strings.Repeat("a", MaxLen+1), "at most 4096"},
	}
	for _, c := range cases {
		_, err := Compile("tag", c.expr)
		var fe *Error
		if !errors.As(err, &fe) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Compile(tag, %q) = %v, want an *Error containing %q", c.expr, err, c.want)
		}
	}
	if _, err := Compile("XPATH", "a"); err == nil || !strings.Contains(err.Error(), "want TAG or SQL92") {
		t.Errorf("unknown type: %v", err)
	}
}

func TestSQLMatch(t *testing.T) {
	props := map[string]string{"a": "7", "b": "x", "c": "3.5", "flag": "true", "neg": "-2", "big": "9007199254740993", "s": "it's"}
	cases := []struct {
		expr  string
		match bool
	}{
		{"a > 5", true},
		{"a > 7", false},
		{"a >= 7", true},
		{"a < 10 AND b = 'x'", true},
		{"a > 5 AND b = 'y'", false},
		{"a > 50 OR b = 'x'", true},
		{"a = 7", true},
		{"a = 7.0", true},
		{"a <> 7", false},
		{"b <> 'x'", false},
		{"b <> 'y'", true},
		{"c > 3", true},
		{"c BETWEEN 3 AND 4", true},
		{"a BETWEEN 1 AND 6", false},
		{"a NOT BETWEEN 1 AND 6", true},
		{"neg < 0", true},
		{"neg = -2", true},
		{"b IN ('x', 'y')", true},
		{"b IN ('y', 'z')", false},
		{"b NOT IN ('y', 'z')", true},
		{"a IN (1, 7)", true},
		{"missing IS NULL", true},
		{"a IS NULL", false},
		{"a IS NOT NULL", true},
		{"missing IS NOT NULL", false},
		{"missing = 'x'", false},
		{"NOT missing = 'x'", false}, // unknown stays unknown
		{"missing = 'x' OR a = 7", true},
		{"NOT (missing = 'x' AND a = 8)", true}, // unknown AND false is false
		{"missing > 1 OR missing <= 1", false},
		{"b > 1", false}, // 'x' is not a number: unknown
		{"flag = TRUE", true},
		{"flag = FALSE", false},
		{"flag <> FALSE", true},
		{"TRUE", true},
		{"FALSE", false},
		{"NOT FALSE", true},
		{"((a > 1) AND (b = 'x'))", true},
		{"a > 1 and b = 'x'", true}, // keywords in any case
		{"TAGS = 'TagA'", true},
		{"TAGS IN ('TagB', 'TagA')", true},
		{"s = 'it''s'", true},
		{"big > 9007199254740992", true}, // exact integers, not float64
		{"1 = 1", true},
		{"a > 1e0", true},
		{"NOT NOT a = 7", true},
	}
	for _, c := range cases {
		f := mustCompile(t, "SQL92", c.expr)
		if !f.NeedsProperties() {
			t.Errorf("%q: a SQL92 filter must need properties", c.expr)
		}
		if got := f.Match("TagA", props); got != c.match {
			t.Errorf("%q: got %v, want %v", c.expr, got, c.match)
		}
	}
	// TAGS without a tag is the property, when set, else NULL.
	f := mustCompile(t, "sql92", "TAGS IS NULL")
	if !f.Match("", nil) || f.Match("A", nil) || f.Match("", map[string]string{"TAGS": "A"}) {
		t.Error("TAGS IS NULL: wrong on a message without a tag")
	}
}

func TestSQLErrors(t *testing.T) {
	cases := []struct{ expr, want string }{
		{"", "empty expression"},
		{"a >", "position 4: expected a value after '>'"},
		{"a > 5 AND", "position 10: expected a condition"},
		{"a 5", "position 3: expected a comparison (=, <>, <, <=, >, >=, BETWEEN, IN, IS NULL) after property a, found number 5"},
		{"(a > 5", "position 7: expected ')' to close the '(' at position 1"},
		{"a > 5)", "position 6: ')' without a matching '('"},
		{"a > 'x'", "position 5: '>' compares numbers; string 'x' is not a number"},
		{"a BETWEEN 'a' AND 3", "BETWEEN compares numbers"},
		{"a BETWEEN 1 3", "expected AND in BETWEEN"},
		{"b = 'x", "position 5: string literal is not closed"},
		{`b = "x"`, "single quotes"},
		{"a != 1", "write <> for not equal"},
		{"a = NULL", "IS NULL"},
		{"a IS 5", "expected NULL after IS"},
		{"a IN ('x' 'y')", "expected ',' or ')' in the IN list opened at position 3"},
		{"a IN (b)", "an IN list holds literals"},
		{"a IN 'x'", "expected '(' after IN"},
		{"a NOT LIKE 'x'", "expected BETWEEN or IN after NOT"},
		{"a = 5 b = 6", "expected AND, OR or the end of the expression, found property b"},
		{"a = 1x", "malformed number"},
		{"a = #", "unexpected character '#'"},
		{"'x' = 1", "cannot be compared"},
		{"a = - 'x'", "expected a number after '-'"},
		{"a = 1e999", "value out of range"},
		{strings.Repeat("(", MaxDepth+1) + "TRUE" + strings.Repeat(")", MaxDepth+1), "nested deeper than 64"},
		{strings.Repeat("NOT ", MaxDepth+1) + "TRUE", "nested deeper than 64"},
		{"a = \xff", "position 5: not valid UTF-8"},
	}
	for _, c := range cases {
		_, err := Compile("SQL92", c.expr)
		var fe *Error
		if !errors.As(err, &fe) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Compile(SQL92, %q) = %v, want an *Error containing %q", c.expr, err, c.want)
		}
	}
}

func TestNilFilterMatchesAll(t *testing.T) {
	var f *Filter
	if !f.Match("", nil) || f.NeedsProperties() {
		t.Error("a nil filter must match everything and need nothing")
	}
}
