package spoof

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestFind: each class of character that does not show as itself is
// found, where it is; names in any script that show as what they hold are
// not.
func TestFind(t *testing.T) {
	for _, tc := range []struct {
		name, s string
		part    string // the first part found; "" for none
	}{
		{"plain", "lookup", ""},
		{"punctuation and space", "weird/name.x with-space_$", ""},
		{"CJK", "名前", ""},
		{"precomposed accent", "café", ""},
		{"Greek", "Ελληνικά", ""},
		{"Devanagari with marks", "नमस्ते", ""},
		{"Arabic", "استرداد", ""},
		{"emoji", "ship 🚀", ""},
		{"zero-width space", "ref\u200bund", "\u200b"},
		{"zero-width joiner", "ref\u200dund", "\u200d"},
		{"right-to-left override", "refund\u202etxt.exe", "\u202e"},
		{"left-to-right isolate", "\u2066refund\u2069", "\u2066"},
		{"pop directional isolate", "refund\u2069", "\u2069"},
		{"left-to-right mark", "refund\u200e", "\u200e"},
		{"right-to-left mark", "refund\u200f", "\u200f"},
		{"Arabic letter mark", "refund\u061c", "\u061c"},
		{"byte-order mark", "\ufeffrefund", "\ufeff"},
		{"soft hyphen", "ref\u00adund", "\u00ad"},
		{"word joiner", "ref\u2060und", "\u2060"},
		{"tag character", "refund\U000E0041", "\U000E0041"},
		{"bell", "refund\a", "\a"},
		{"newline", "refund\nnow", "\n"},
		{"delete", "refund\x7f", "\x7f"},
		{"C1 next line", "refund\u0085", "\u0085"},
		{"line separator", "refund\u2028", "\u2028"},
		{"paragraph separator", "refund\u2029", "\u2029"},
		{"no-break space", "re fund\u00a0", "\u00a0"},
		{"ideographic space", "re\u3000fund", "\u3000"},
		{"fullwidth", "ｒｅｆｕｎｄ", "ｒ"},
		{"fullwidth inside", "refｕnd", "ｕ"},
		{"ligature", "\ufb01le", "\ufb01"},
		{"superscript", "x²", "²"},
		{"mathematical bold", "\U0001d42bfund", "\U0001d42b"},
		{"decomposed accent", "cafe\u0301", "e\u0301"},
		{"variation selector", "refund\ufe0f", "\ufe0f"},
		{"Hangul filler", "ref\u3164und", "\u3164"},
		{"Hangul choseong filler", "ref\u115fund", "\u115f"},
		{"combining grapheme joiner", "ref\u034fund", "\u034f"},
		{"private use", "ref\ue000und", "\ue000"},
		{"unassigned", "ref\u0378und", "\u0378"},
		{"not UTF-8", "ref\xffund", "\xff"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			i, j := Find(tc.s)
			if tc.part == "" {
				if i >= 0 {
					t.Errorf("Find(%q) found %q, want nothing", tc.s, tc.s[i:j])
				}
				if got := Escape(tc.s); got != tc.s {
					t.Errorf("Escape(%q) = %q, want it unchanged", tc.s, got)
				}
				return
			}
			if i < 0 || tc.s[i:j] != tc.part {
				t.Fatalf("Find(%q) = %d, %d, want the part %q", tc.s, i, j, tc.part)
			}
			esc := Escape(tc.s)
			if f, _ := Find(esc); f >= 0 || !utf8.ValidString(esc) {
				t.Errorf("Escape(%q) = %q, which still holds what it should spell out", tc.s, esc)
			}
			if !strings.Contains(esc, `\u`) && !strings.ContainsAny(esc, "\\") {
				t.Errorf("Escape(%q) = %q, want an escape", tc.s, esc)
			}
		})
	}
}

func TestEscapeAndQuote(t *testing.T) {
	for _, tc := range []struct {
		in, escaped, quoted string
	}{
		{"lookup", "lookup", `"lookup"`},
		{`say "hi" \ bye`, `say "hi" \ bye`, `"say \"hi\" \\ bye"`},
		{"ref\u200bund", `ref\u200bund`, `"ref\u200bund"`},
		{"ｒｅｆｕｎｄ", `\uff52\uff45\uff46\uff55\uff4e\uff44`, `"\uff52\uff45\uff46\uff55\uff4e\uff44"`},
		{"cafe\u0301", `caf\u0065\u0301`, `"caf\u0065\u0301"`},
		{"a\tb\nc\rd\be\ff\x01", `a\tb\nc\rd\be\ff\u0001`, `"a\tb\nc\rd\be\ff\u0001"`},
		{"\U0001d42b", `\ud835\udc2b`, `"\ud835\udc2b"`},
		{"\u2066x\u2069", `\u2066x\u2069`, `"\u2066x\u2069"`},
		{"bad\xff", `bad\ufffd`, `"bad\ufffd"`},
		{"名前 <&>", "名前 <&>", `"名前 <&>"`},
	} {
		if got := Escape(tc.in); got != tc.escaped {
			t.Errorf("Escape(%q) = %s, want %s", tc.in, got, tc.escaped)
		}
		if got := Quote(tc.in); got != tc.quoted {
			t.Errorf("Quote(%q) = %s, want %s", tc.in, got, tc.quoted)
		}
	}
}

func TestRunes(t *testing.T) {
	if got := Runes("e\u0301"); got != "U+0065 U+0301" {
		t.Errorf("got %s, want U+0065 U+0301", got)
	}
	if got := Runes("\U000E0041"); got != "U+E0041" {
		t.Errorf("got %s, want U+E0041", got)
	}
}

// FuzzQuote: a quoted string is JSON that decodes to the string (bytes
// that are not UTF-8 as U+FFFD), shows nothing Find reports, and is what
// encoding/json writes whenever there was nothing to escape.
func FuzzQuote(f *testing.F) {
	for _, s := range []string{"", "lookup", "ref\u200bund", "ｒｅｆｕｎｄ", "cafe\u0301", "\xff\xfe", "\"\\", "a\u2028b", "\U0001d42b", "\u0301"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q := Quote(s)
		var back string
		if err := json.Unmarshal([]byte(q), &back); err != nil {
			t.Fatalf("Quote(%q) = %s, not JSON: %v", s, q, err)
		}
		if want := strings.ToValidUTF8(s, "\ufffd"); back != want && utf8.ValidString(s) {
			t.Fatalf("Quote(%q) = %s, which decodes to %q", s, q, back)
		}
		if i, _ := Find(q); i >= 0 {
			t.Fatalf("Quote(%q) = %s, which still holds %q", s, q, q[i:])
		}
		if i, _ := Find(s); i < 0 {
			var b bytes.Buffer
			enc := json.NewEncoder(&b)
			enc.SetEscapeHTML(false)
			_ = enc.Encode(s)
			if want := strings.TrimSuffix(b.String(), "\n"); q != want {
				t.Fatalf("Quote(%q) = %s, want %s as encoding/json writes it", s, q, want)
			}
		}
	})
}
