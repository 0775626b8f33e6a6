package envfile

import (
	"errors"
	"maps"
	"strings"
	"testing"
)

// The cases of systemd's own src/test/test-env-file.c (v252), with the
// values it asserts. The differential test against the real systemd
// (systemd/envfile_diff_test.go) covers many more.
func TestSystemdTestCases(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     map[string]string
	}{
		{"env_file_1", "a=a\na=b\na=b\na=a\nb=b\\\nc\nd= d\\\ne  \\\nf  \ng=g\\ \nh= ąęół\\ śćńźżμ \ni=i\\",
			map[string]string{"a": "a", "b": "bc", "d": "de  f", "g": "g ", "h": "ąęół śćńźżμ", "i": "i"}},
		{"env_file_2", "a=a\\\n", map[string]string{"a": "a"}},
		{"env_file_3", "#SPAMD_ARGS=\"-d --socketpath=/var/lib/bulwark/spamd \\\n#--nouser-config                                     \\\n#--max-children=2                                     \\\n#\"\n",
			map[string]string{}},
		{"env_file_4", "# Generated\n\nHWMON_MODULES=\"coretemp f71882fg\"\n\n# For compatibility reasons\n\nMODULE_0=coretemp\nMODULE_1=f71882fg",
			map[string]string{"HWMON_MODULES": "coretemp f71882fg", "MODULE_0": "coretemp", "MODULE_1": "f71882fg"}},
		{"env_file_5", "a=\nb=", map[string]string{"a": "", "b": ""}},
		{"env_file_6", "a=\\ \\n \\t \\x \\y \\' \nb= \\$'  \nc= ' \\n\\t\\$\\`\\\\\n'   \nd= \" \\n\\t\\$\\`\\\\\n\"   \n",
			map[string]string{"a": " n t x y '", "b": "$'", "c": " \\n\\t\\$\\`\\\\\n", "d": " \\n\\t$`\\\n"}},
	} {
		f, err := Parse([]byte(tc.in))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if got := f.Vars(); !maps.Equal(got, tc.want) {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}

// The disagreements issue 11 found between the old parser and systemd 252.
func TestIssueCases(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want map[string]string
		warn string
	}{
		{"CLUSTERAPP_LISTEN=127.0.0.1:29000\nexport GODEBUG=madvdontneed=1\nCLUSTERAPP_WORKERS=1\n",
			map[string]string{"CLUSTERAPP_LISTEN": "127.0.0.1:29000", "CLUSTERAPP_WORKERS": "1"}, "line 2: systemd skips this line: `export` is shell syntax"},
		{`X=back\slash`, map[string]string{"X": "backslash"}, ""},
		{`X=\"1\"`, map[string]string{"X": `"1"`}, ""},
		{"X=con\\\ntinued\n", map[string]string{"X": "continued"}, ""},
		{"X=\"two\nlines\"\nY=1\n", map[string]string{"X": "two\nlines", "Y": "1"}, ""},
		{"X=1\r\nY=2\r\n", map[string]string{"X": "1", "Y": "2"}, ""},
		{"X=1 # not a comment\n", map[string]string{"X": "1 # not a comment"}, ""},
		{"# comment \\\nX=swallowed by the comment\nY=1\n", map[string]string{"Y": "1"}, ""},
		{"no equals sign\nX=1\n", map[string]string{"X": "1"}, "line 1: systemd skips this line: it has no '='"},
		{"\ufeffX=1\nY=2\n", map[string]string{"Y": "2"}, "line 1: systemd skips this line: the file starts with a byte-order mark"},
		{"X=\"open\nY=2\n", map[string]string{"X": "open\nY=2\n"}, "line 1: a quote opened here is never closed"},
		{"1X=a\n", map[string]string{}, `line 1: systemd skips this line: "1X" is not a valid variable name`},
		{" X = 'a b' \"c\"d \n", map[string]string{"X": "a bcd"}, ""},
	} {
		f, err := Parse([]byte(tc.in))
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		if got := f.Vars(); !maps.Equal(got, tc.want) {
			t.Errorf("%q: got %q, want %q", tc.in, got, tc.want)
		}
		var warnings []string
		for _, w := range f.Warnings {
			warnings = append(warnings, w.String())
		}
		if all := strings.Join(warnings, "\n"); (tc.warn == "") != (all == "") || !strings.Contains(all, tc.warn) {
			t.Errorf("%q: warnings %q, want one containing %q", tc.in, all, tc.warn)
		}
	}
}

func TestRefused(t *testing.T) {
	for in, want := range map[string]string{
		"X=1\nY=a\x00b\n":     "line 2: a NUL byte",
		"X=1\nY=\xff\n":       "line 2: invalid UTF-8 in the value of Y",
		"X=1\n\xffY=1\n":      "line 2: invalid UTF-8 in a variable name",
		"X='\xc3\x28'\nY=1\n": "line 1: invalid UTF-8 in the value of X",
	} {
		_, err := Parse([]byte(in))
		if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want a refusal containing %q", in, err, want)
		}
	}
}

func TestSpans(t *testing.T) {
	in := "# c\nA=1\n  B = 'x\ny' \nC=con\\\ntinued\nA=2"
	f, err := Parse([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"A=1", "B = 'x\ny' ", "C=con\\\ntinued", "A=2"}
	lines := []int{2, 3, 5, 7}
	if len(f.Assignments) != len(want) {
		t.Fatalf("assignments %+v", f.Assignments)
	}
	for i, a := range f.Assignments {
		if got := in[a.Start:a.End]; got != want[i] || a.Line != lines[i] {
			t.Errorf("assignment %d: span %q line %d, want %q line %d", i, got, a.Line, want[i], lines[i])
		}
	}
	if a, ok := f.Last("A"); !ok || a.Value != "2" {
		t.Errorf("Last(A) = %+v %v", a, ok)
	}
}

func TestQuoteRoundTrips(t *testing.T) {
	for _, v := range []string{"", "plain", "127.0.0.1:8080", "a b", ` lead`, "trail ", `"q"`, `'s'`, `back\slash`, `end\`, "$HOME", "`cmd`",
		"two\nlines", "cr\rhere", "#hash", ";semi", "tab\there", "ünïcødé", "a=b", "%i"} {
		line, err := Line("K", v)
		if err != nil {
			t.Fatalf("Line(%q): %v", v, err)
		}
		f, err := Parse([]byte("X=1\n" + line + "\nY=2\n"))
		if err != nil {
			t.Fatalf("%q written as %q: %v", v, line, err)
		}
		if got := f.Vars(); got["K"] != v || got["X"] != "1" || got["Y"] != "2" || len(got) != 3 {
			t.Errorf("%q written as %q reads back as %q", v, line, got)
		}
	}
	for _, v := range []string{"nul\x00", "\xff"} {
		if _, err := Quote(v); err == nil {
			t.Errorf("Quote(%q) accepted a value no environment file can hold", v)
		}
	}
}
