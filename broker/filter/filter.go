package filter

import (
	"fmt"
	"strings"
)

// Types of expression, as RocketMQ's ExpressionType names them.
const (
	TypeTag = "TAG"
	TypeSQL = "SQL92"
)

// Limits of an expression: longer or deeper ones are refused, so that a
// consumer cannot make a node spend unbounded time or stack on one.
const (
	MaxLen   = 4096
	MaxDepth = 64
)

// TagsProperty is the property name under which SQL92 expressions see the
// message's tag (RocketMQ's MessageConst.PROPERTY_TAGS).
const TagsProperty = "TAGS"

// Error is a bad expression: what was expected where (Pos counts bytes of
// the expression from 1; 0 when the expression as a whole is wrong).
type Error struct {
	Type string
	Expr string
	Pos  int
	Msg  string
}

func (e *Error) Error() string {
	shown := e.Expr
	if len(shown) > 120 {
		shown = shown[:117] + "..."
	}
	if e.Pos == 0 {
		return fmt.Sprintf("%s expression %q: %s", e.Type, shown, e.Msg)
	}
	return fmt.Sprintf("%s expression %q: at position %d: %s", e.Type, shown, e.Pos, e.Msg)
}

// Filter is a compiled subscription expression. A nil *Filter matches
// everything. It is safe for concurrent use.
type Filter struct {
	typ  string
	expr string
	all  bool
	tags map[string]struct{}
	sql  boolNode
}

// Compile parses an expression of type typ ("TAG", "SQL92"; "" is TAG,
// case is ignored). It returns nil, nil for an expression that matches
// everything ("*" or empty tags), so callers can skip matching.
func Compile(typ, expr string) (*Filter, error) {
	switch strings.ToUpper(strings.TrimSpace(typ)) {
	case "", TypeTag:
		return compileTags(expr)
	case TypeSQL:
		return compileSQL(expr)
	}
	return nil, &Error{Type: "filter", Expr: typ, Msg: "unknown filter type: want TAG or SQL92"}
}

// Type is TAG or SQL92.
func (f *Filter) Type() string { return f.typ }

// String is the expression as given.
func (f *Filter) String() string { return f.expr }

// NeedsProperties reports whether Match reads properties (SQL92); a tag
// filter reads only the tag, so callers need not decode properties for it.
func (f *Filter) NeedsProperties() bool { return f != nil && f.sql != nil }

// Match reports whether a message with this tag and these properties passes
// the filter. A SQL92 expression that is unknown for the message (it reads a
// property the message lacks, or one that is not a number where a number is
// compared) does not match, as in SQL's WHERE.
func (f *Filter) Match(tag string, props map[string]string) bool {
	switch {
	case f == nil || f.all:
		return true
	case f.sql != nil:
		return f.sql.eval(&env{tag: tag, props: props}) == triTrue
	default:
		_, ok := f.tags[tag]
		return ok && tag != ""
	}
}

// compileTags parses RocketMQ's tag expression: split on "||", trim each
// part, drop empty parts (SubscriptionData.buildSubscriptionData).
func compileTags(expr string) (*Filter, error) {
	if len(expr) > MaxLen {
		return nil, &Error{Type: "tag", Expr: expr, Msg: fmt.Sprintf("%d bytes, at most %d", len(expr), MaxLen)}
	}
	trimmed := strings.TrimSpace(expr)
	if trimmed == "" || trimmed == "*" {
		return nil, nil
	}
	f := &Filter{typ: TypeTag, expr: expr, tags: map[string]struct{}{}}
	pos := 0
	for _, part := range strings.Split(expr, "||") {
		start := pos + len(part) - len(strings.TrimLeft(part, " \t\r\n"))
		pos += len(part) + 2
		tag := strings.TrimSpace(part)
		switch {
		case tag == "":
			continue
		case tag == "*":
			return nil, &Error{Type: "tag", Expr: expr, Pos: start + 1, Msg: `"*" matches every tag and cannot be joined with other tags`}
		case strings.Contains(tag, "|"):
			return nil, &Error{Type: "tag", Expr: expr, Pos: start + strings.Index(tag, "|") + 1, Msg: `a single "|" inside a tag: tags are joined by "||"`}
		}
		f.tags[tag] = struct{}{}
	}
	if len(f.tags) == 0 {
		return nil, &Error{Type: "tag", Expr: expr, Msg: `names no tag: want "*" or tags joined by "||", e.g. "TagA || TagB"`}
	}
	return f, nil
}

func compileSQL(expr string) (*Filter, error) {
	if len(expr) > MaxLen {
		return nil, &Error{Type: TypeSQL, Expr: expr, Msg: fmt.Sprintf("%d bytes, at most %d", len(expr), MaxLen)}
	}
	if strings.TrimSpace(expr) == "" {
		return nil, &Error{Type: TypeSQL, Expr: expr, Msg: "empty expression: want a condition over properties, e.g. a > 5 AND b = 'x'"}
	}
	p := &parser{expr: expr}
	if err := p.lex(); err != nil {
		return nil, err
	}
	n, err := p.parse()
	if err != nil {
		return nil, err
	}
	return &Filter{typ: TypeSQL, expr: expr, sql: n}, nil
}
