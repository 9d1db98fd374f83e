package typescript

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits on a program's shape. [Check] enforces them before any parser
// sees the program: esbuild's parser recurses on the Go stack with no
// guard, so a deep enough program overflows it and takes the process down
// (a fatal error, not a recoverable panic), and its cost grows with size
// times nesting. RATIONALE.md ("Why a structural pre-scan?") has the
// measurements behind the numbers.
const (
	// MaxProgramBytes bounds every program.
	MaxProgramBytes = 1 << 20
	// MaxTranspileBytes bounds the programs esbuild transforms: TypeScript
	// (and JavaScript that does not compile as written, for its message).
	// Larger programs must be plain JavaScript.
	MaxTranspileBytes = 128 << 10
	// MaxNesting bounds how deeply brackets and operator chains nest.
	MaxNesting = 256
	// MaxBlockNesting bounds how deeply blocks, functions, arrow functions
	// and statements such as if and for nest.
	MaxBlockNesting = 64
	// maxReadings bounds the readings of an ambiguous program followed at
	// once (see Check).
	maxReadings = 32
)

// Check scans a program for shapes no parser is given: more than
// MaxProgramBytes, nesting past MaxNesting or MaxBlockNesting, and a
// closing bracket that closes the wrapper the program runs in (a program
// is the body of a function; `})(); ...` would escape it). It returns nil
// when the program may be compiled; a program with other syntax errors
// passes, for the parsers to describe.
//
// Check tokenizes as JavaScript and TypeScript do, with one difficulty: a
// slash is a division or starts a regular expression depending on the
// grammar. Check decides from the previous token where that is certain and
// otherwise follows both readings (they rejoin or die within a line), so
// whatever a parser makes of the program, its nesting was measured. The
// nesting measure is an upper bound of a parser's recursion: brackets,
// prefix operators, right-associative operators, member and call chains,
// and statements nested without braces each count a level.
func Check(code string) *Error {
	_, err := check(code)
	return err
}

func check(code string) (*scanner, *Error) {
	if len(code) > MaxProgramBytes {
		return nil, &Error{Message: fmt.Sprintf("the program is %d bytes; the limit is %d bytes (1 MiB): keep data out of the program and fetch it with tools", len(code), MaxProgramBytes)}
	}
	s := &scanner{src: code, broke: -1}
	readings := []*reading{{prev: clsStart, nl: true}}
	for len(readings) > 0 {
		// Advance the reading furthest behind, so readings that reach the
		// same place in the same state can be merged.
		r := readings[0]
		for _, o := range readings[1:] {
			if o.pos < r.pos {
				r = o
			}
		}
		fork := s.step(r)
		if s.failed != nil {
			return s, s.failed
		}
		if fork != nil {
			readings = append(readings, fork)
		}
		readings = prune(readings)
		if len(readings) > maxReadings {
			return s, s.errorAt(r.pos, "the program is too ambiguous to check: simplify how it mixes division and regular expressions")
		}
	}
	if s.broke >= 0 {
		return s, s.errorAt(s.broke, "this bracket closes a bracket the program never opened: a program is the body of a function and cannot close it")
	}
	return s, nil
}

// prune drops finished and dead readings and merges readings at the same
// place in the same state, keeping the larger nesting counts.
func prune(rs []*reading) []*reading {
	out := rs[:0]
next:
	for _, r := range rs {
		if r.done {
			continue
		}
		for _, o := range out {
			if o.pos == r.pos && o.top == r.top && o.prev == r.prev && o.nl == r.nl && o.kw == r.kw && o.kw2 == r.kw2 && o.afterDot == r.afterDot {
				o.chain = max(o.chain, r.chain)
				o.blocks = max(o.blocks, r.blocks)
				continue next
			}
		}
		out = append(out, r)
	}
	return out
}

// class is what the previous token says about the next slash (and about
// prefix versus postfix operators).
type class uint8

const (
	clsStart     class = iota // an expression may start: a slash starts a regular expression
	clsOperand                // an operand ended: a slash divides
	clsParen                  // a ) that is not a statement's head: as clsOperand
	clsCtrl                   // the ) of if/while/for/with (...): a statement follows
	clsBlockEnd               // a } closing a block: a statement follows
	clsObjectEnd              // a } closing an object literal: as clsOperand
	clsBrace                  // another } (a function or class body): either may follow
	clsAmbig                  // a word or > whose role depends on the grammar: either may follow
)

// frame is an open bracket. Frames are immutable once pushed, so readings
// share them.
type frame struct {
	up   *frame
	open byte // ( [ { or ` for a template substitution
	ctrl bool // the ( of a statement head: if, while, for, with
	// kind says what a { opened: 'b' a block (or an arrow function's
	// body), 'o' an object literal, '?' either (a function or class body,
	// whose function may be an expression, or a { after a colon).
	kind byte
	pos  int
	// chain and blocks are the enclosing level's counts when the frame
	// opened, restored when it closes.
	chain, blocks int
	// depth and blockDepth are the nesting of the frame's contents.
	depth, blockDepth int
}

// reading is one way of tokenizing the program.
type reading struct {
	pos      int
	top      *frame
	prev     class
	kw, kw2  string // the previous token and the one before, when keywords or punctuators
	afterDot bool   // the previous token was . or ?. (a keyword is a property name)
	nl       bool   // a line terminator since the previous token
	// chain and blocks count nesting at the current level since it last
	// reset (at ; and , and where a statement starts).
	chain, blocks int
	done          bool
}

type scanner struct {
	src    string
	failed *Error
	broke  int // where a reading closed the wrapper; -1 when none did
	// The deepest nesting seen, for tests and measurements.
	maxDepth, maxBlocks int
}

func (s *scanner) errorAt(pos int, msg string) *Error {
	line := 1 + strings.Count(s.src[:pos], "\n")
	start := strings.LastIndexByte(s.src[:pos], '\n') + 1
	return &Error{Message: msg, Line: line, Column: utf8.RuneCountInString(s.src[start:pos]) + 1}
}

// level returns the nesting at r's current position.
func (r *reading) level() (depth, blocks int) {
	if r.top != nil {
		depth, blocks = r.top.depth, r.top.blockDepth
	}
	return depth + r.chain, blocks + r.blocks
}

// count adds one level of nesting at the current level.
func (s *scanner) count(r *reading, at int, block bool) {
	r.chain++
	if block {
		r.blocks++
	}
	s.checkLevel(r, at)
}

func (s *scanner) checkLevel(r *reading, at int) {
	d, b := r.level()
	s.maxDepth, s.maxBlocks = max(s.maxDepth, d), max(s.maxBlocks, b)
	switch {
	case d > MaxNesting:
		s.failed = s.errorAt(at, fmt.Sprintf("the program nests more than %d levels deep here (brackets, operators and calls inside each other): flatten it into separate statements", MaxNesting))
	case b > MaxBlockNesting:
		s.failed = s.errorAt(at, fmt.Sprintf("the program nests more than %d blocks or functions deep here: flatten it into separate functions", MaxBlockNesting))
	}
}

func (s *scanner) push(r *reading, open byte, at int, ctrl, block bool, kind byte) {
	depth, blocks := r.level()
	f := &frame{up: r.top, open: open, ctrl: ctrl, kind: kind, pos: at, chain: r.chain, blocks: r.blocks, depth: depth + 1, blockDepth: blocks}
	if block {
		f.blockDepth++
	}
	r.top, r.chain, r.blocks = f, 0, 0
	s.checkLevel(r, at)
}

// pop closes the top frame with close; it reports false (and ends the
// reading) when close does not match it.
func (s *scanner) pop(r *reading, close byte, at int) (*frame, bool) {
	f := r.top
	if f == nil {
		if s.broke < 0 {
			s.broke = at
		}
		r.done = true
		return nil, false
	}
	want := byte('}')
	switch f.open {
	case '(':
		want = ')'
	case '[':
		want = ']'
	}
	if close != want {
		r.done = true // a syntax error: parsers stop here too
		return nil, false
	}
	r.top, r.chain, r.blocks = f.up, f.chain, f.blocks
	return f, true
}

// The keywords that matter to the scan.
var (
	// A slash after these starts a regular expression.
	// (Reserved words only: a word that may also be a name, such as as or
	// type, is read as a name, which its keyword use never contradicts.)
	exprKeywords = set("return", "typeof", "instanceof", "in", "new", "delete", "void", "throw", "case", "do",
		"else", "extends", "break", "continue", "debugger", "default", "var", "const")
	// Prefix operators: each nests an expression.
	prefixKeywords = set("typeof", "void", "delete", "await", "new", "yield")
	// Statements whose body may be a statement without braces.
	headKeywords = set("if", "else", "while", "for", "do", "with")
	// Words that are keywords in some places and names in others, where
	// the keyword may be followed by an expression.
	ambiguousWords = set("await", "yield", "of")
	// Words that continue a statement after a } or a line end.
	continuing = set("else", "catch", "finally", "in", "instanceof", "of", "as", "satisfies", "extends", "implements")
	// Operand keywords.
	operandKeywords = set("this", "super", "null", "true", "false")
)

func set(words ...string) map[string]bool {
	m := make(map[string]bool, len(words))
	for _, w := range words {
		m[w] = true
	}
	return m
}

// step reads one token of r (skipping space and comments before it) and
// returns a second reading when the token is ambiguous.
func (s *scanner) step(r *reading) *reading {
	if !s.skipSpace(r) {
		r.done = true // an unterminated comment: a syntax error
		return nil
	}
	if r.pos >= len(s.src) {
		r.done = true
		return nil
	}
	start := r.pos
	c := s.src[start]
	switch {
	case c == '\'' || c == '"':
		if !s.skipString(r, c) {
			r.done = true
			return nil
		}
		s.startsStatement(r)
		s.token(r, clsOperand, "")
	case c == '`':
		if r.prev == clsOperand || r.prev == clsParen {
			s.count(r, start, false) // a tagged template
		}
		r.pos++
		s.template(r)
	case isDigit(c) || (c == '.' && start+1 < len(s.src) && isDigit(s.src[start+1])):
		s.skipNumber(r)
		s.startsStatement(r)
		s.token(r, clsOperand, "")
	case isIdentStart(s.src, start) || c == '#':
		return s.word(r)
	case c == '/':
		return s.slash(r)
	default:
		s.punct(r)
	}
	return nil
}

// token records the token just read.
func (s *scanner) token(r *reading, cls class, kw string) {
	r.kw2, r.kw = r.kw, kw
	r.prev = cls
	r.nl = false
	r.afterDot = false
}

// startsStatement resets the current level's counts when the token at
// r.pos begins a new statement: after a } (a block or a function body
// ended), or after a line end where an operand ended and the token cannot
// continue it (automatic semicolon insertion). Without this, programs
// written without semicolons would add up every statement's operators.
func (s *scanner) startsStatement(r *reading) {
	if isBrace(r.prev) || (r.nl && (r.prev == clsOperand || r.prev == clsParen)) {
		r.chain, r.blocks = 0, 0
	}
}

func (s *scanner) word(r *reading) *reading {
	start := r.pos
	if s.src[start] == '#' {
		r.pos++
	}
	escaped := false
	for r.pos < len(s.src) {
		c := s.src[r.pos]
		if c == '\\' {
			escaped = true
			r.pos++
			continue
		}
		if c < utf8.RuneSelf {
			if !isIdentPart(c) {
				break
			}
			r.pos++
			continue
		}
		ch, n := utf8.DecodeRuneInString(s.src[r.pos:])
		if isSpaceRune(ch) || isLineTerminator(ch) {
			break
		}
		r.pos += n
	}
	w := s.src[start:r.pos]
	if strings.HasPrefix(w, "\\u") || escaped {
		// An escaped word is never a keyword, but parsers differ on what
		// they make of it; let the slash after it be read both ways.
		s.startsStatement(r)
		s.token(r, clsAmbig, "")
		return nil
	}
	if r.afterDot || w[0] == '#' {
		s.token(r, clsOperand, "") // a property name
		return nil
	}
	if !continuing[w] {
		s.startsStatement(r)
	}
	cls := clsOperand
	switch {
	case exprKeywords[w] || headKeywords[w] || prefixKeywords[w]:
		cls = clsStart
	case operandKeywords[w]:
		cls = clsOperand
	}
	if ambiguousWords[w] {
		cls = clsAmbig
	}
	if prefixKeywords[w] {
		s.count(r, start, false)
	}
	if headKeywords[w] && !(w == "if" && r.kw == "else") {
		s.count(r, start, w != "else")
	}
	s.token(r, cls, w)
	return nil
}

// slash reads a / that is not a comment: a division, or a regular
// expression, or both (a fork) when the previous token does not say.
func (s *scanner) slash(r *reading) *reading {
	regex := false
	var fork *reading
	switch r.prev {
	case clsStart, clsCtrl, clsBlockEnd:
		regex = true
	case clsOperand, clsParen, clsObjectEnd:
		if r.nl {
			// A line end may have ended the statement (after a type, a
			// label of break or continue, ...): read it both ways.
			fork = s.regexCopy(r)
		}
	default:
		fork = s.regexCopy(r)
	}
	if regex {
		s.regex(r)
		return nil
	}
	// Division, or /=.
	r.pos++
	if r.pos < len(s.src) && s.src[r.pos] == '=' {
		r.pos++
		s.count(r, r.pos-2, false)
	}
	s.token(r, clsStart, "/")
	return fork
}

func (s *scanner) regexCopy(r *reading) *reading {
	c := *r
	s.regex(&c)
	if c.done {
		return nil
	}
	return &c
}

// regex reads a regular expression literal; one that does not end on its
// line ends the reading (it is a syntax error).
func (s *scanner) regex(r *reading) {
	s.startsStatement(r)
	r.pos++
	inClass := false
	for {
		if r.pos >= len(s.src) {
			r.done = true
			return
		}
		ch, n := utf8.DecodeRuneInString(s.src[r.pos:])
		if isLineTerminator(ch) {
			r.done = true
			return
		}
		r.pos += n
		switch ch {
		case '\\':
			if r.pos >= len(s.src) {
				r.done = true
				return
			}
			e, n := utf8.DecodeRuneInString(s.src[r.pos:])
			if isLineTerminator(e) {
				r.done = true
				return
			}
			r.pos += n
		case '[':
			inClass = true
		case ']':
			inClass = false
		case '/':
			if !inClass {
				for r.pos < len(s.src) && (isIdentPart(s.src[r.pos]) || s.src[r.pos] >= utf8.RuneSelf) {
					r.pos++ // flags
				}
				s.token(r, clsOperand, "")
				return
			}
		}
	}
}

// template reads template text after a ` or a substitution's }, up to the
// closing ` or the next ${.
func (s *scanner) template(r *reading) {
	for r.pos < len(s.src) {
		switch s.src[r.pos] {
		case '\\':
			r.pos += 2
		case '`':
			r.pos++
			s.token(r, clsOperand, "")
			return
		case '$':
			if r.pos+1 < len(s.src) && s.src[r.pos+1] == '{' {
				at := r.pos
				r.pos += 2
				s.push(r, '`', at, false, false, 0)
				s.token(r, clsStart, "${")
				return
			}
			r.pos++
		default:
			r.pos++
		}
	}
	r.done = true // unterminated: a syntax error
}

// punctuators, longest first.
var punctuators = []string{
	">>>=", "...", "===", "!==", "**=", "<<=", ">>=", ">>>", "&&=", "||=", "??=",
	"=>", "==", "!=", "<=", ">=", "&&", "||", "??", "?.", "++", "--", "+=", "-=", "*=", "%=", "&=", "|=", "^=", "**", "<<", ">>",
}

func (s *scanner) punct(r *reading) {
	start := r.pos
	src := s.src[start:]
	p := src[:1]
	for _, q := range punctuators {
		if strings.HasPrefix(src, q) {
			p = q
			break
		}
	}
	if p == "?." && len(src) > 2 && isDigit(src[2]) {
		p = "?" // a ? b?.5:1 is a conditional
	}
	r.pos += len(p)
	operand := r.prev == clsOperand || r.prev == clsParen || r.prev == clsObjectEnd
	switch p {
	case "(", "[":
		if operand {
			s.count(r, start, false) // a call or an index
		}
		ctrl := p == "(" && r.kw != "" && !r.afterDot &&
			(r.kw == "if" || r.kw == "while" || r.kw == "for" || r.kw == "with" || (r.kw == "await" && r.kw2 == "for"))
		s.push(r, p[0], start, ctrl, false, 0)
		s.token(r, clsStart, p)
	case "{":
		s.startsStatement(r)
		// A block level, unless it is the body a statement head or an
		// arrow already counted.
		block := !(r.prev == clsCtrl || r.kw == "else" || r.kw == "do" || r.kw == "=>")
		s.push(r, '{', start, false, block, braceKind(r))
		s.token(r, clsStart, p)
	case ")":
		f, ok := s.pop(r, ')', start)
		if !ok {
			return
		}
		if f.ctrl {
			s.token(r, clsCtrl, p)
		} else {
			s.token(r, clsParen, p)
		}
	case "]":
		if _, ok := s.pop(r, ']', start); ok {
			s.token(r, clsOperand, p)
		}
	case "}":
		if r.top != nil && r.top.open == '`' {
			if _, ok := s.pop(r, '}', start); ok {
				s.template(r)
			}
			return
		}
		if f, ok := s.pop(r, '}', start); ok {
			switch f.kind {
			case 'b':
				s.token(r, clsBlockEnd, p)
			case 'o':
				s.token(r, clsObjectEnd, p)
			default:
				s.token(r, clsBrace, p)
			}
		}
	case ";", ",":
		r.chain, r.blocks = 0, 0
		s.token(r, clsStart, p)
	case "!", "~":
		if p == "!" && operand && !r.nl {
			s.token(r, r.prev, p) // TypeScript's non-null assertion x!
			return
		}
		s.startsStatement(r)
		s.count(r, start, false)
		s.token(r, clsStart, p)
	case "++", "--":
		if operand && !r.nl {
			s.token(r, clsOperand, p) // postfix
			return
		}
		s.startsStatement(r)
		s.count(r, start, false)
		if isBrace(r.prev) || r.prev == clsAmbig {
			s.token(r, clsAmbig, p)
		} else {
			s.token(r, clsStart, p)
		}
	case "+", "-":
		if !operand {
			s.count(r, start, false)
		}
		s.token(r, clsStart, p)
	case ".", "?.":
		s.count(r, start, false)
		s.token(r, clsStart, p)
		r.afterDot = true
	case "=>":
		s.count(r, start, true)
		s.token(r, clsStart, p)
	case "=", "+=", "-=", "*=", "%=", "**=", "<<=", ">>=", ">>>=", "&=", "|=", "^=", "&&=", "||=", "??=",
		"**", "?", ":", "<":
		s.count(r, start, false)
		s.token(r, clsStart, p)
	case ">", ">>", ">>>":
		// A comparison, or the end of TypeScript type arguments (f<T>),
		// after which either may follow.
		s.token(r, clsAmbig, p)
	case "@":
		s.startsStatement(r)
		s.token(r, clsStart, p)
	default:
		s.token(r, clsStart, p)
	}
}

func isBrace(c class) bool { return c == clsBlockEnd || c == clsObjectEnd || c == clsBrace }

// braceKind says what the { about to be read at r opens (see frame.kind).
func braceKind(r *reading) byte {
	switch {
	case r.prev == clsCtrl || isBrace(r.prev) || (r.prev == clsStart && r.kw == ""):
		return 'b' // after if (...), another block, or at the program's start
	case r.nl && (r.prev == clsOperand || r.prev == clsParen):
		return 'b' // a line end ended the statement before
	}
	switch r.kw {
	case ";", "{", "else", "do", "try", "finally", "=>":
		return 'b'
	case "return", "yield":
		if r.nl {
			return 'b' // return; {
		}
		return 'o'
	case ":":
		return '?' // a label's block, or a property's or a conditional's object
	}
	if r.prev == clsStart {
		return 'o' // after an operator, a bracket, a comma or a keyword taking an expression
	}
	return '?'
}

// skipSpace skips white space and comments, noting line ends. It reports
// false for an unterminated block comment.
func (s *scanner) skipSpace(r *reading) bool {
	src := s.src
	for r.pos < len(src) {
		c := src[r.pos]
		switch {
		case c == '\n' || c == '\r':
			r.nl = true
			r.pos++
		case c == ' ' || c == '\t' || c == '\v' || c == '\f':
			r.pos++
		case c == '/' && r.pos+1 < len(src) && src[r.pos+1] == '/':
			s.skipLine(r)
		case c == '/' && r.pos+1 < len(src) && src[r.pos+1] == '*':
			end := strings.Index(src[r.pos+2:], "*/")
			if end < 0 {
				r.pos = len(src)
				return false
			}
			body := src[r.pos+2 : r.pos+2+end]
			if strings.ContainsAny(body, "\n\r\u2028\u2029") {
				r.nl = true
			}
			r.pos += end + 4
		case c == '<' && strings.HasPrefix(src[r.pos:], "<!--"):
			// An HTML-like comment (Annex B), in both parsers.
			s.skipLine(r)
		case c == '-' && r.nl && strings.HasPrefix(src[r.pos:], "-->"):
			s.skipLine(r)
		case c >= utf8.RuneSelf:
			ch, n := utf8.DecodeRuneInString(src[r.pos:])
			switch {
			case isLineTerminator(ch):
				r.nl = true
			case isSpaceRune(ch):
			default:
				return true
			}
			r.pos += n
		default:
			return true
		}
	}
	return true
}

// skipLine skips to the next line terminator (not past it).
func (s *scanner) skipLine(r *reading) {
	for r.pos < len(s.src) {
		c := s.src[r.pos]
		if c == '\n' || c == '\r' {
			return
		}
		if c >= utf8.RuneSelf {
			ch, n := utf8.DecodeRuneInString(s.src[r.pos:])
			if isLineTerminator(ch) {
				return
			}
			r.pos += n
			continue
		}
		r.pos++
	}
}

// skipString reads a string literal; it reports false when the string
// does not end on its line (line continuations aside).
func (s *scanner) skipString(r *reading, q byte) bool {
	r.pos++
	for r.pos < len(s.src) {
		c := s.src[r.pos]
		switch c {
		case q:
			r.pos++
			return true
		case '\\':
			r.pos++
			if r.pos < len(s.src) && s.src[r.pos] == '\r' && r.pos+1 < len(s.src) && s.src[r.pos+1] == '\n' {
				r.pos++
			}
			if r.pos < len(s.src) {
				_, n := utf8.DecodeRuneInString(s.src[r.pos:])
				r.pos += n
			}
		case '\n', '\r':
			return false
		default:
			r.pos++
		}
	}
	return false
}

func (s *scanner) skipNumber(r *reading) {
	start := r.pos
	hex := strings.HasPrefix(s.src[start:], "0x") || strings.HasPrefix(s.src[start:], "0X")
	for r.pos < len(s.src) {
		c := s.src[r.pos]
		switch {
		case isIdentPart(c) || c == '.':
			r.pos++
		case (c == '+' || c == '-') && !hex && r.pos > start && (s.src[r.pos-1] == 'e' || s.src[r.pos-1] == 'E'):
			r.pos++
		default:
			return
		}
	}
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isIdentPart(c byte) bool {
	return c == '$' || c == '_' || isDigit(c) || (c|0x20 >= 'a' && c|0x20 <= 'z')
}

func isIdentStart(src string, i int) bool {
	c := src[i]
	if c < utf8.RuneSelf {
		return c == '$' || c == '_' || c == '\\' || (c|0x20 >= 'a' && c|0x20 <= 'z')
	}
	ch, _ := utf8.DecodeRuneInString(src[i:])
	return !isSpaceRune(ch) && !isLineTerminator(ch)
}

func isLineTerminator(ch rune) bool {
	return ch == '\n' || ch == '\r' || ch == '\u2028' || ch == '\u2029'
}

func isSpaceRune(ch rune) bool {
	return ch == '\uFEFF' || ch == '\u00A0' || (ch > 0x7f && unicode.Is(unicode.Zs, ch))
}
