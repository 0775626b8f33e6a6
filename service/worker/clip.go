package worker

import "unicode/utf8"

// MaxClip is the most of a client's own input (a path, a method, a
// parameter's value) that an answer or a log line quotes back. A request
// line may be as long as CLUSTERAPP_MAX_HEADER_BYTES allows (64 KiB by
// default, and net/http reads 4 KiB more for it): quoted whole, a client
// could make the worker reflect kilobytes into every answer and journal
// line.
const MaxClip = 256

// Clip returns s, or, when it is longer than MaxClip bytes, its first
// MaxClip bytes or fewer, ending before a character rather than inside one
// so the quote stays valid UTF-8 wherever s was, followed by "…". A
// service's routes quote their clients' input through it too.
func Clip(s string) string {
	if len(s) <= MaxClip {
		return s
	}
	cut := MaxClip
	// Back off to the start of the character the cut falls in; at most
	// UTFMax-1 bytes, so a run of stray continuation bytes (invalid UTF-8,
	// which the JSON encoder and the log formatters escape) is cut as bytes.
	for i := 0; i < utf8.UTFMax-1 && !utf8.RuneStart(s[cut]); i++ {
		cut--
	}
	return s[:cut] + "…"
}
