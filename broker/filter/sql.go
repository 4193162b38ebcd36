package filter

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The SQL92 subset of RocketMQ's filter module (its SelectorParser):
//
//	expr      = and { OR and }
//	and       = not { AND not }
//	not       = NOT not | predicate
//	predicate = "(" expr ")" | TRUE | FALSE
//	          | value ( cmp value
//	                  | [NOT] BETWEEN value AND value
//	                  | [NOT] IN "(" literal { "," literal } ")"
//	                  | IS [NOT] NULL )
//	cmp       = "=" | "<>" | "<" | "<=" | ">" | ">="
//	value     = property | literal
//	literal   = 'string' | [-]integer | [-]decimal | TRUE | FALSE
//
// Keywords are case-insensitive, property names are not. Properties are
// strings; compared with a number a property is read as a number, with TRUE
// or FALSE as a boolean. Logic is SQL's three-valued one: a comparison with a
// missing property is unknown, NOT unknown is unknown, and only true matches.

type tokKind int

const (
	tokEOF tokKind = iota
	tokIdent
	tokString
	tokNumber
	tokOp     // = <> < <= > >=
	tokLParen // (
	tokRParen // )
	tokComma
	tokMinus
	tokKeyword // AND OR NOT BETWEEN IN IS NULL TRUE FALSE (text upper-cased)
)

type token struct {
	kind tokKind
	text string // identifier, keyword (upper case), operator, string contents, number
	pos  int    // 1-based byte offset
}

var keywords = map[string]bool{"AND": true, "OR": true, "NOT": true, "BETWEEN": true, "IN": true, "IS": true, "NULL": true, "TRUE": true, "FALSE": true}

func (t token) describe() string {
	switch t.kind {
	case tokEOF:
		return "end of expression"
	case tokIdent:
		return "property " + t.text
	case tokString:
		return "string '" + strings.ReplaceAll(t.text, "'", "''") + "'"
	case tokNumber:
		return "number " + t.text
	case tokKeyword:
		return t.text
	default:
		return "'" + t.text + "'"
	}
}

type parser struct {
	expr  string
	toks  []token
	i     int
	depth int
}

func (p *parser) errAt(pos int, format string, args ...any) error {
	return &Error{Type: TypeSQL, Expr: p.expr, Pos: pos, Msg: fmt.Sprintf(format, args...)}
}

func isIdentStart(r rune) bool { return r == '_' || r == '$' || unicode.IsLetter(r) }
func isIdentPart(r rune) bool  { return isIdentStart(r) || r == '.' || unicode.IsDigit(r) }

func (p *parser) lex() error {
	s := p.expr
	for i := 0; i < len(s); {
		r, w := utf8.DecodeRuneInString(s[i:])
		start := i
		switch {
		case r == utf8.RuneError && w <= 1:
			return p.errAt(start+1, "not valid UTF-8")
		case unicode.IsSpace(r):
			i += w
		case r == '(':
			p.toks = append(p.toks, token{tokLParen, "(", start + 1})
			i++
		case r == ')':
			p.toks = append(p.toks, token{tokRParen, ")", start + 1})
			i++
		case r == ',':
			p.toks = append(p.toks, token{tokComma, ",", start + 1})
			i++
		case r == '-':
			p.toks = append(p.toks, token{tokMinus, "-", start + 1})
			i++
		case r == '=':
			p.toks = append(p.toks, token{tokOp, "=", start + 1})
			i++
		case r == '<' || r == '>':
			op := string(r)
			if i+1 < len(s) && (s[i+1] == '=' || (r == '<' && s[i+1] == '>')) {
				op += string(s[i+1])
			}
			p.toks = append(p.toks, token{tokOp, op, start + 1})
			i += len(op)
		case r == '!':
			return p.errAt(start+1, "unexpected '!': write <> for not equal, NOT for negation")
		case r == '\'':
			var b strings.Builder
			i++
			for {
				if i >= len(s) {
					return p.errAt(start+1, "string literal is not closed: expected a ' before the end of the expression")
				}
				if s[i] == '\'' {
					if i+1 < len(s) && s[i+1] == '\'' {
						b.WriteByte('\'')
						i += 2
						continue
					}
					i++
					break
				}
				b.WriteByte(s[i])
				i++
			}
			p.toks = append(p.toks, token{tokString, b.String(), start + 1})
		case r == '"':
			return p.errAt(start+1, `strings are written in single quotes: 'text', not "text"`)
		case r >= '0' && r <= '9' || r == '.' && i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9':
			j := i
			for j < len(s) && s[j] >= '0' && s[j] <= '9' {
				j++
			}
			if j < len(s) && s[j] == '.' {
				j++
				for j < len(s) && s[j] >= '0' && s[j] <= '9' {
					j++
				}
			}
			if j < len(s) && (s[j] == 'e' || s[j] == 'E') {
				k := j + 1
				if k < len(s) && (s[k] == '+' || s[k] == '-') {
					k++
				}
				if k < len(s) && s[k] >= '0' && s[k] <= '9' {
					for k < len(s) && s[k] >= '0' && s[k] <= '9' {
						k++
					}
					j = k
				}
			}
			if j < len(s) {
				if r2, _ := utf8.DecodeRuneInString(s[j:]); isIdentPart(r2) {
					return p.errAt(start+1, "malformed number %q", s[i:j+1])
				}
			}
			p.toks = append(p.toks, token{tokNumber, s[i:j], start + 1})
			i = j
		case isIdentStart(r):
			j := i + w
			for j < len(s) {
				r2, w2 := utf8.DecodeRuneInString(s[j:])
				if !isIdentPart(r2) {
					break
				}
				j += w2
			}
			word := s[i:j]
			if up := strings.ToUpper(word); keywords[up] {
				p.toks = append(p.toks, token{tokKeyword, up, start + 1})
			} else {
				p.toks = append(p.toks, token{tokIdent, word, start + 1})
			}
			i = j
		default:
			return p.errAt(start+1, "unexpected character %q", r)
		}
	}
	p.toks = append(p.toks, token{tokEOF, "", len(s) + 1})
	return nil
}

func (p *parser) peek() token { return p.toks[p.i] }

func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tokEOF {
		p.i++
	}
	return t
}

func (p *parser) isKeyword(word string) bool {
	t := p.peek()
	return t.kind == tokKeyword && t.text == word
}

func (p *parser) parse() (boolNode, error) {
	n, err := p.parseOr()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tokEOF {
		if t.kind == tokRParen {
			return nil, p.errAt(t.pos, "')' without a matching '('")
		}
		return nil, p.errAt(t.pos, "expected AND, OR or the end of the expression, found %s", t.describe())
	}
	return n, nil
}

func (p *parser) enter(pos int) error {
	p.depth++
	if p.depth > MaxDepth {
		return p.errAt(pos, "nested deeper than %d levels", MaxDepth)
	}
	return nil
}

func (p *parser) parseOr() (boolNode, error) {
	l, err := p.parseAnd()
	if err != nil {
		return nil, err
	}
	for p.isKeyword("OR") {
		p.next()
		r, err := p.parseAnd()
		if err != nil {
			return nil, err
		}
		l = &orNode{l, r}
	}
	return l, nil
}

func (p *parser) parseAnd() (boolNode, error) {
	l, err := p.parseNot()
	if err != nil {
		return nil, err
	}
	for p.isKeyword("AND") {
		p.next()
		r, err := p.parseNot()
		if err != nil {
			return nil, err
		}
		l = &andNode{l, r}
	}
	return l, nil
}

func (p *parser) parseNot() (boolNode, error) {
	if p.isKeyword("NOT") {
		t := p.next()
		if err := p.enter(t.pos); err != nil {
			return nil, err
		}
		x, err := p.parseNot()
		p.depth--
		if err != nil {
			return nil, err
		}
		return &notNode{x}, nil
	}
	return p.parsePredicate()
}

// startsTail reports whether t begins the rest of a comparison.
func startsTail(t token) bool {
	return t.kind == tokOp || t.kind == tokKeyword && (t.text == "BETWEEN" || t.text == "IN" || t.text == "IS" || t.text == "NOT")
}

func (p *parser) parsePredicate() (boolNode, error) {
	t := p.peek()
	if t.kind == tokLParen {
		p.next()
		if err := p.enter(t.pos); err != nil {
			return nil, err
		}
		n, err := p.parseOr()
		p.depth--
		if err != nil {
			return nil, err
		}
		if c := p.peek(); c.kind != tokRParen {
			return nil, p.errAt(c.pos, "expected ')' to close the '(' at position %d, found %s", t.pos, c.describe())
		}
		p.next()
		return n, nil
	}
	if t.kind == tokKeyword && (t.text == "TRUE" || t.text == "FALSE") && !startsTail(p.toks[p.i+1]) {
		p.next()
		return constNode(t.text == "TRUE"), nil
	}
	v, vt, err := p.parseValue("a condition")
	if err != nil {
		return nil, err
	}
	op := p.next()
	switch {
	case op.kind == tokOp:
		r, rt, err := p.parseValue("a value after '" + op.text + "'")
		if err != nil {
			return nil, err
		}
		if err := p.checkCompare(op, v, vt, r, rt); err != nil {
			return nil, err
		}
		return &cmpNode{op: op.text, l: v, r: r}, nil
	case op.kind == tokKeyword && op.text == "IS":
		not := false
		if p.isKeyword("NOT") {
			p.next()
			not = true
		}
		if n := p.next(); n.kind != tokKeyword || n.text != "NULL" {
			return nil, p.errAt(n.pos, "expected NULL after IS%s, found %s", map[bool]string{true: " NOT"}[not], n.describe())
		}
		return &isNullNode{v: v, not: not}, nil
	case op.kind == tokKeyword && op.text == "NOT":
		k := p.next()
		switch {
		case k.kind == tokKeyword && k.text == "BETWEEN":
			return p.parseBetween(k, v, vt, true)
		case k.kind == tokKeyword && k.text == "IN":
			return p.parseIn(k, v, true)
		}
		return nil, p.errAt(k.pos, "expected BETWEEN or IN after NOT, found %s", k.describe())
	case op.kind == tokKeyword && op.text == "BETWEEN":
		return p.parseBetween(op, v, vt, false)
	case op.kind == tokKeyword && op.text == "IN":
		return p.parseIn(op, v, false)
	}
	what := "value"
	if _, ok := v.(propNode); ok {
		what = vt.describe()
	}
	return nil, p.errAt(op.pos, "expected a comparison (=, <>, <, <=, >, >=, BETWEEN, IN, IS NULL) after %s, found %s", what, op.describe())
}

// parseValue reads a property or a literal; want says what was expected,
// for the error.
func (p *parser) parseValue(want string) (valueNode, token, error) {
	t := p.next()
	switch t.kind {
	case tokIdent:
		return propNode(t.text), t, nil
	case tokString:
		return litNode{v: strVal(t.text)}, t, nil
	case tokNumber:
		n, err := parseNumber(t.text)
		if err != nil {
			return nil, t, p.errAt(t.pos, "number %s: %v", t.text, err)
		}
		return litNode{v: n}, t, nil
	case tokMinus:
		n := p.next()
		if n.kind != tokNumber {
			return nil, t, p.errAt(n.pos, "expected a number after '-', found %s", n.describe())
		}
		v, err := parseNumber("-" + n.text)
		if err != nil {
			return nil, t, p.errAt(t.pos, "number -%s: %v", n.text, err)
		}
		return litNode{v: v}, t, nil
	case tokKeyword:
		switch t.text {
		case "TRUE", "FALSE":
			return litNode{v: boolVal(t.text == "TRUE")}, t, nil
		case "NULL":
			return nil, t, p.errAt(t.pos, "NULL is only tested with IS NULL or IS NOT NULL (a comparison with NULL is never true)")
		}
	}
	return nil, t, p.errAt(t.pos, "expected %s (a property, 'string', number, TRUE or FALSE), found %s", want, t.describe())
}

func isOrdering(op string) bool { return op == "<" || op == "<=" || op == ">" || op == ">=" }

// checkCompare refuses comparisons that can never hold a meaning: ordering
// of strings or booleans (RocketMQ orders numbers only), and comparing a
// string literal with a number or boolean literal.
func (p *parser) checkCompare(op token, l valueNode, lt token, r valueNode, rt token) error {
	for _, side := range []struct {
		v valueNode
		t token
	}{{l, lt}, {r, rt}} {
		lit, ok := side.v.(litNode)
		if !ok {
			continue
		}
		if isOrdering(op.text) && lit.v.kind != kindNum {
			return p.errAt(side.t.pos, "'%s' compares numbers; %s is not a number", op.text, side.t.describe())
		}
	}
	ll, lok := l.(litNode)
	rl, rok := r.(litNode)
	if lok && rok && ll.v.kind != rl.v.kind {
		return p.errAt(rt.pos, "%s and %s cannot be compared", lt.describe(), rt.describe())
	}
	return nil
}

func (p *parser) parseBetween(_ token, v valueNode, vt token, not bool) (boolNode, error) {
	lo, lot, err := p.parseValue("a number after BETWEEN")
	if err != nil {
		return nil, err
	}
	if a := p.next(); a.kind != tokKeyword || a.text != "AND" {
		return nil, p.errAt(a.pos, "expected AND in BETWEEN ... AND ..., found %s", a.describe())
	}
	hi, hit, err := p.parseValue("a number after BETWEEN ... AND")
	if err != nil {
		return nil, err
	}
	for _, side := range []struct {
		v valueNode
		t token
	}{{v, vt}, {lo, lot}, {hi, hit}} {
		if lit, ok := side.v.(litNode); ok && lit.v.kind != kindNum {
			return nil, p.errAt(side.t.pos, "BETWEEN compares numbers; %s is not a number", side.t.describe())
		}
	}
	var n boolNode = &andNode{&cmpNode{op: ">=", l: v, r: lo}, &cmpNode{op: "<=", l: v, r: hi}}
	if not {
		n = &notNode{n}
	}
	return n, nil
}

func (p *parser) parseIn(kw token, v valueNode, not bool) (boolNode, error) {
	if t := p.next(); t.kind != tokLParen {
		return nil, p.errAt(t.pos, "expected '(' after IN, found %s", t.describe())
	}
	n := &inNode{v: v}
	for {
		lv, lt, err := p.parseValue("a literal in the IN list")
		if err != nil {
			return nil, err
		}
		lit, ok := lv.(litNode)
		if !ok {
			return nil, p.errAt(lt.pos, "an IN list holds literals ('string', number, TRUE, FALSE), found %s", lt.describe())
		}
		n.list = append(n.list, lit.v)
		t := p.next()
		if t.kind == tokRParen {
			break
		}
		if t.kind != tokComma {
			return nil, p.errAt(t.pos, "expected ',' or ')' in the IN list opened at position %d, found %s", kw.pos, t.describe())
		}
	}
	if not {
		return &notNode{n}, nil
	}
	return n, nil
}

func parseNumber(s string) (value, error) {
	if !strings.ContainsAny(s, ".eE") {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return value{kind: kindNum, isInt: true, i: i, f: float64(i)}, nil
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok {
			return value{}, ne.Err
		}
		return value{}, err
	}
	return value{kind: kindNum, f: f}, nil
}
