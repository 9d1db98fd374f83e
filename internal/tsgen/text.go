package tsgen

import (
	"html"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Bounds on free text in JSDoc, in bytes: documents paste whole guides
// into descriptions, and a signature is read whole every time.
const (
	// maxToolDoc bounds a tool's or a declared type's description.
	maxToolDoc = 1200
	// maxFieldDoc bounds a property's description.
	maxFieldDoc = 400
)

// cutMarker ends a description that was cut.
const cutMarker = " …(cut)"

var (
	htmlBreak   = regexp.MustCompile(`(?i)<\s*(br|/p|p|/div|div|/li|/h[1-6]|h[1-6]|/tr|/ul|/ol|hr)\b[^>]*>`)
	htmlItem    = regexp.MustCompile(`(?i)<\s*li\b[^>]*>`)
	htmlTag     = regexp.MustCompile(`</?[a-zA-Z][a-zA-Z0-9-]*(\s[^<>]*)?/?>|<!--[\s\S]*?-->`)
	mdLink      = regexp.MustCompile(`!?\[([^\]\n]*)\]\(([^)\s]*)(\s+"[^"]*")?\)`)
	mdEmphasis  = regexp.MustCompile(`(\*\*|__)([^*_\n]+)(\*\*|__)`)
	mdHeading   = regexp.MustCompile(`(?m)^\s{0,3}#{1,6}\s+`)
	mdRule      = regexp.MustCompile(`(?m)^\s*([-*_]\s*){3,}$`)
	spaceRun    = regexp.MustCompile(`[ \t]{2,}`)
	blankRun    = regexp.MustCompile(`\n{3,}`)
	looksMarkup = regexp.MustCompile(`<[a-zA-Z/!]|&[a-zA-Z#][a-zA-Z0-9]*;|\]\(|\*\*|__|(?m)^\s{0,3}#`)
)

// plainText reduces HTML and Markdown to the text a reader needs: tags
// go (block elements become line breaks, list items "- "), entities are
// decoded, links keep their text and address, emphasis and heading marks
// go. Then it is cut at max bytes, on a word boundary, with a marker.
func plainText(s string, max int) string {
	if looksMarkup.MatchString(s) {
		s = htmlItem.ReplaceAllString(s, "\n- ")
		s = htmlBreak.ReplaceAllString(s, "\n")
		s = htmlTag.ReplaceAllString(s, "")
		s = html.UnescapeString(s)
		s = mdLink.ReplaceAllStringFunc(s, func(m string) string {
			sub := mdLink.FindStringSubmatch(m)
			text, url := strings.TrimSpace(sub[1]), sub[2]
			switch {
			case text == "":
				return url
			case url == "" || strings.HasPrefix(url, "#") || text == url:
				return text
			}
			return text + " (" + url + ")"
		})
		s = mdEmphasis.ReplaceAllString(s, "$2")
		s = mdHeading.ReplaceAllString(s, "")
		s = mdRule.ReplaceAllString(s, "")
		s = spaceRun.ReplaceAllString(s, " ")
		s = blankRun.ReplaceAllString(s, "\n\n")
	}
	// Leading spaces on the first line may be indentation the author
	// meant; docText trims the rest.
	s = strings.TrimLeft(strings.TrimRight(s, " \t\r\n"), "\r\n")
	if max > 0 && len(s) > max {
		cut := max - len(cutMarker)
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		if i := strings.LastIndexAny(s[:cut], " \n"); i > cut/2 {
			cut = i
		}
		s = strings.TrimRight(s[:cut], " \n.,;:") + cutMarker
	}
	return s
}
