package systemd_test

import (
	"encoding/base64"
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/clusterapp/clusterapp/service/config/envfile"
	"github.com/clusterapp/clusterapp/service/lab/sandbox"
)

// envCorpus is the differential test's corpus: environment files that are
// easy to read wrongly. Names are lower case so they never meet a variable
// systemd sets itself.
var envCorpus = []struct{ name, body string }{
	{"plain", "a=1\nb=two words\n"},
	{"export line (issue 11)", "CLUSTERAPP_LISTEN=127.0.0.1:29000\nCLUSTERAPP_WORKERS=1\nexport GODEBUG=madvdontneed=1\n"},
	{"backslash inside an unquoted value", `a=back\slash`},
	{"escaped quotes unquoted", `a=\"1\"`},
	{"continuation line", "a=con\\\ntinued\nb=2\n"},
	{"backslash at end of file", "a=end\\"},
	{"double quotes over two lines", "a=\"line1\nline2\"\nb=2\n"},
	{"single quotes over two lines", "a='line1\nline2'\nb=2\n"},
	{"double-quote escapes", `a="q\"d\\b\$d` + "\\`t\\n\\x\"\n"},
	{"single quotes keep backslashes", `a='a\b\"c'` + "\n"},
	{"CRLF", "a=1\r\nb=2\r\n"},
	{"CR only", "a=1\rb=2\r"},
	{"continuation before CRLF", "a=x\\\r\ny\r\nb=2\r\n"},
	{"byte-order mark", "\ufeffa=1\nb=2\n"},
	{"byte-order mark before a comment", "\ufeff# c\na=1\n"},
	{"empty values", "a=\nb=\"\"\nc=''\nd=   \n"},
	{"comment after a value", "a=1 # c\nb='x' # c\nc=\"y\";c\n"},
	{"semicolon and indented comments", "; c\na=1\n  # indented\n\t; tab\nb=2\n"},
	{"comment continued by a backslash", "# c \\\na=1\nb=2\n"},
	{"comment escaping a backslash", "# c \\\\\na=1\n"},
	{"spaces around key and value", "  a  =  1  \n"},
	{"tabs around key and value", "a\t=\t1\t\n"},
	{"invalid names", "1a=1\na-b=2\na.b=3\nc=4\n\"q\"=5\n"},
	{"empty name", "=novalue\na=1\n==x\n"},
	{"value starting with =", "a==b\n"},
	{"line without =", "garbage\na=1\nmore garbage here\n"},
	{"unterminated double quote", "a=\"open\nb=2\n"},
	{"unterminated single quote at end", "a='open"},
	{"mixed quoting", "a='a'\"b\"c\n"},
	{"quotes after text are literal", "a=a'b'c\"d\"\n"},
	{"quoted parts separated by spaces", "a= 'x y'  \"z\"  w  \n"},
	{"double-quote continuation", "a=\"a\\\nb\"\n"},
	{"double-quote backslash CR", "a=\"a\\\rb\"\n"},
	{"double-quote backslash quote", "a=\"\\'\"\n"},
	{"repeated keys", "a=1\na=2\nb=1\na=3\n"},
	{"lower case and underscores", "_a=1\nabc_DEF9=2\n"},
	{"invalid UTF-8 in a value", "a=1\nb=\xff\n"},
	{"invalid UTF-8 in a quoted value", "a=1\nb='\xc3\x28'\n"},
	{"invalid UTF-8 in a name", "a=1\n\xffb=1\n"},
	{"invalid UTF-8 in a comment", "# \xff\na=1\n"},
	{"NUL byte", "a=1\nb=x\x00y\n"},
	{"very long value", "a=" + strings.Repeat("x", 100_000) + "\nb=2\n"},
	{"very long comment", "# " + strings.Repeat("c", 1<<20) + "\na=1\n"},
	{"many variables", manyVars(500)},
	{"unicode", "a=ąęół śćńźżμ\nb=\"日本\"\n"},
	{"control characters", "a=a\x01b\x7f\nb=\"\x1b[0m\"\n"},
	{"tab inside a value", "a=a\tb\n"},
	{"no expansion", "a=$HOME/x\nb=${a}\n"},
	{"escaped trailing space", "a=g\\ \nb=h\\  \n"},
	{"lone backslash", "a=\\\nb=2\n"},
	{"escape at the start", "a=\\#x\nb=\\ y\n"},
	{"blank lines", "\n\n   \n\t\na=1\n\n"},
	{"no final newline", "a=1"},
	{"name only at end", "a=1\nb"},
	{"CR inside an unquoted value", "a=a\rb\nc=1\n"},
	{"CR injection (issue 11)", "CLUSTERAPP_LISTEN=\"29001\rExecStartPre=/bin/sh -c 'id > /tmp/x'\rListenStream=127.0.0.1:29000\"\n"},
	{"percent and specifiers", "a=%i %H %%\n"},
}

func manyVars(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "v%d=value %d\n", i, i)
	}
	return b.String()
}

// The parser every clusterapp command uses (service/config/envfile) against the
// real systemd: each corpus file is the EnvironmentFile= of a unit that
// prints its environment. Both must agree on every variable, and on which
// files systemd refuses as a whole.
func TestEnvFileParserAgreesWithSystemd(t *testing.T) {
	if len(envCorpus) < 40 {
		t.Fatalf("the corpus has %d files; the issue asks for at least 40", len(envCorpus))
	}
	b := sandbox.New(t, sandbox.Options{Bare: true})
	b.WriteFile("/etc/systemd/system/envprobe@.service", `[Service]
Type=oneshot
EnvironmentFile=-/run/envcorpus/%i.env
ExecStart=/usr/bin/env -0
StandardOutput=file:/run/envout/%i
`)
	// Without the "-": a file systemd refuses fails the unit.
	b.WriteFile("/etc/systemd/system/envstrict@.service", `[Service]
Type=oneshot
EnvironmentFile=/run/envcorpus/%i.env
ExecStart=/bin/true
`)
	b.Must("mkdir", "-p", "/run/envout", "/run/envcorpus")
	for i, c := range envCorpus {
		b.WriteFile(fmt.Sprintf("/run/envcorpus/%d.env", i+1), c.body)
	}
	b.Must("systemctl", "daemon-reload")
	units := []string{"envprobe@0.service"} // 0: no file, the baseline
	for i := range envCorpus {
		units = append(units, fmt.Sprintf("envprobe@%d.service", i+1))
	}
	b.Must(append([]string{"systemctl", "start"}, units...)...)
	baseline := boxEnv(t, b, 0)

	for i, c := range envCorpus {
		got := boxEnv(t, b, i+1)
		for k, v := range baseline {
			if got[k] == v || k == "INVOCATION_ID" || k == "SYSTEMD_EXEC_PID" {
				delete(got, k)
			}
		}
		_, strictErr := b.Run("systemctl", "start", fmt.Sprintf("envstrict@%d.service", i+1))
		f, err := envfile.Parse([]byte(c.body))
		want := map[string]string{}
		if err == nil {
			want = f.Vars()
		}
		if !maps.Equal(got, want) {
			t.Errorf("%s (%q):\n  systemd: %q\n  parser:  %q (err %v)", c.name, short(c.body), got, want, err)
		}
		if (strictErr != nil) != (err != nil) {
			t.Errorf("%s: systemd refuses the file: %v; the parser: %v", c.name, strictErr != nil, err)
		}
	}
}

// boxEnv reads what envprobe@N printed (env -0).
func boxEnv(t *testing.T, b *sandbox.Box, n int) map[string]string {
	t.Helper()
	out := b.Must("base64", "-w0", fmt.Sprintf("/run/envout/%d", n))
	raw, err := base64.StdEncoding.DecodeString(out)
	if err != nil {
		t.Fatalf("envprobe@%d output: %v", n, err)
	}
	env := map[string]string{}
	for _, kv := range strings.Split(strings.TrimSuffix(string(raw), "\x00"), "\x00") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	return env
}

func short(s string) string {
	if len(s) > 120 {
		return s[:120] + "..."
	}
	return s
}
