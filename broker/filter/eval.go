package filter

import "strings"

// tri is SQL's three-valued truth.
type tri int8

const (
	triUnknown tri = iota
	triFalse
	triTrue
)

func triOf(b bool) tri {
	if b {
		return triTrue
	}
	return triFalse
}

func (t tri) not() tri {
	switch t {
	case triTrue:
		return triFalse
	case triFalse:
		return triTrue
	}
	return triUnknown
}

type env struct {
	tag   string
	props map[string]string
}

func (e *env) property(name string) (string, bool) {
	if name == TagsProperty && e.tag != "" {
		return e.tag, true
	}
	v, ok := e.props[name]
	return v, ok
}

type valKind int8

const (
	kindNull valKind = iota
	kindStr
	kindNum
	kindBool
)

type value struct {
	kind  valKind
	isInt bool
	i     int64
	f     float64
	s     string
	b     bool
}

func strVal(s string) value  { return value{kind: kindStr, s: s} }
func boolVal(b bool) value   { return value{kind: kindBool, b: b} }
func nullVal() value         { return value{} }
func (v value) isNull() bool { return v.kind == kindNull }

// asNum reads v as a number: a property's string is parsed.
func (v value) asNum() (value, bool) {
	switch v.kind {
	case kindNum:
		return v, true
	case kindStr:
		n, err := parseNumber(strings.TrimSpace(v.s))
		return n, err == nil
	}
	return value{}, false
}

func (v value) asBool() (bool, bool) {
	switch v.kind {
	case kindBool:
		return v.b, true
	case kindStr:
		switch t := strings.TrimSpace(v.s); {
		case strings.EqualFold(t, "true"):
			return true, true
		case strings.EqualFold(t, "false"):
			return false, true
		}
	}
	return false, false
}

// cmpNum orders two numbers: exactly when both are integers.
func cmpNum(a, b value) int {
	if a.isInt && b.isInt {
		switch {
		case a.i < b.i:
			return -1
		case a.i > b.i:
			return 1
		}
		return 0
	}
	switch {
	case a.f < b.f:
		return -1
	case a.f > b.f:
		return 1
	}
	return 0
}

// compare applies op to l and r: numbers when either side is a number (the
// other read as one), booleans when either is a boolean, else strings
// (equality only; properties compared with < are read as numbers).
func compare(op string, l, r value) tri {
	if l.isNull() || r.isNull() {
		return triUnknown
	}
	if l.kind == kindBool || r.kind == kindBool {
		lb, ok1 := l.asBool()
		rb, ok2 := r.asBool()
		if !ok1 || !ok2 {
			return triUnknown
		}
		switch op {
		case "=":
			return triOf(lb == rb)
		case "<>":
			return triOf(lb != rb)
		}
		return triUnknown
	}
	if l.kind == kindNum || r.kind == kindNum || isOrdering(op) {
		ln, ok1 := l.asNum()
		rn, ok2 := r.asNum()
		if !ok1 || !ok2 {
			return triUnknown
		}
		c := cmpNum(ln, rn)
		switch op {
		case "=":
			return triOf(c == 0)
		case "<>":
			return triOf(c != 0)
		case "<":
			return triOf(c < 0)
		case "<=":
			return triOf(c <= 0)
		case ">":
			return triOf(c > 0)
		case ">=":
			return triOf(c >= 0)
		}
		return triUnknown
	}
	switch op {
	case "=":
		return triOf(l.s == r.s)
	case "<>":
		return triOf(l.s != r.s)
	}
	return triUnknown
}

type valueNode interface{ value(*env) value }

type propNode string

func (p propNode) value(e *env) value {
	if s, ok := e.property(string(p)); ok {
		return strVal(s)
	}
	return nullVal()
}

type litNode struct{ v value }

func (l litNode) value(*env) value { return l.v }

type boolNode interface{ eval(*env) tri }

type constNode bool

func (c constNode) eval(*env) tri { return triOf(bool(c)) }

type andNode struct{ l, r boolNode }

func (n *andNode) eval(e *env) tri {
	l := n.l.eval(e)
	if l == triFalse {
		return triFalse
	}
	r := n.r.eval(e)
	switch {
	case r == triFalse:
		return triFalse
	case l == triTrue && r == triTrue:
		return triTrue
	}
	return triUnknown
}

type orNode struct{ l, r boolNode }

func (n *orNode) eval(e *env) tri {
	l := n.l.eval(e)
	if l == triTrue {
		return triTrue
	}
	r := n.r.eval(e)
	switch {
	case r == triTrue:
		return triTrue
	case l == triFalse && r == triFalse:
		return triFalse
	}
	return triUnknown
}

type notNode struct{ x boolNode }

func (n *notNode) eval(e *env) tri { return n.x.eval(e).not() }

type cmpNode struct {
	op   string
	l, r valueNode
}

func (n *cmpNode) eval(e *env) tri { return compare(n.op, n.l.value(e), n.r.value(e)) }

type isNullNode struct {
	v   valueNode
	not bool
}

func (n *isNullNode) eval(e *env) tri { return triOf(n.v.value(e).isNull() != n.not) }

type inNode struct {
	v    valueNode
	list []value
}

func (n *inNode) eval(e *env) tri {
	v := n.v.value(e)
	out := triFalse
	for _, w := range n.list {
		switch compare("=", v, w) {
		case triTrue:
			return triTrue
		case triUnknown:
			out = triUnknown
		}
	}
	return out
}
