// Package redact takes secrets out of text that goes back to a program, a
// model or a log: response bodies, error messages, log records.
//
// Finding the raw secret is not enough, because an upstream echoes what it
// was sent in whatever encoding its output uses. A [Redactor] looks for
// every secret
//
//   - raw;
//   - behind up to three layers of escaping, in any mix: JSON and
//     JavaScript backslash escapes ("\/", "\u00XX", "\uD83D\uDE00",
//     "\x2F", "\"", "\\"), percent-encoding in either case ("%2F", "%2f",
//     also "%252F" twice over), "+" for a space, and HTML character
//     references ("&#x2F;", "&#47;", "&quot;", "&amp;");
//   - as hexadecimal, either case;
//   - as base64, standard or URL-safe, with or without padding, alone or
//     inside a longer base64 string at any byte offset (base64("user:" +
//     password), a token inside a base64 JSON blob).
//
// What it replaces becomes [Mark]. A secret shorter than four bytes is not
// looked for raw (it would match ordinary words), and an encoded form
// shorter than eight characters is not looked for at all; longer secrets
// that contain a short one still are. What no redactor can catch is a
// secret the upstream transformed otherwise (hashed, reversed, split, cut
// short), so callers still must not send a secret where the program can
// choose what is echoed.
//
// The package is shared by the openapi and mcp packages so that both apply
// one set of rules.
package redact
