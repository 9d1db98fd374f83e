// Package spoof finds the characters that let one name pass for another,
// or hide part of itself, when a person or a model reads it: invisible
// and format characters (zero-width spaces and joiners, the soft hyphen,
// the byte-order mark, the bidirectional controls that reorder what
// follows them, Unicode's other default-ignorable characters and
// variation selectors), control characters, line and paragraph
// separators, spaces other than U+0020, unassigned and private-use code
// points, and sequences that NFKC normalization changes: fullwidth and
// other compatibility forms (ｒｅｆｕｎｄ, ﬁ, ²) and decomposed accents
// beside their precomposed twins. [Find] reports them, [Escape] spells
// them out for messages, and [Quote] for JavaScript and JSON string
// literals, so that what is shown is what the string holds.
//
// Cross-script look-alikes (Cyrillic "а" for Latin "a") are not in the
// set: telling them apart needs Unicode's confusables data and a policy
// on mixing scripts, and names in one non-Latin script are legitimate.
package spoof
