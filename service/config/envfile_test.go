package config

import (
	"strings"
	"testing"
)

func TestParseEnvFile(t *testing.T) {
	in := `# comment
; another comment

CLUSTERAPP_WORKERS=3
  CLUSTERAPP_LISTEN = 0.0.0.0:80
CLUSTERAPP_INSTANCE="a \"b\" \$c"
CLUSTERAPP_LOG_LEVEL='debug # not a comment'
CLUSTERAPP_FIB_MAX_N=4\
0
CLUSTERAPP_WORKERS=4
`
	got, err := ParseEnvFile(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"CLUSTERAPP_WORKERS":   "4",
		"CLUSTERAPP_LISTEN":    "0.0.0.0:80",
		"CLUSTERAPP_INSTANCE":  `a "b" $c`,
		"CLUSTERAPP_LOG_LEVEL": "debug # not a comment",
		"CLUSTERAPP_FIB_MAX_N": "40",
	}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
}

func TestParseEnvFileErrors(t *testing.T) {
	for in, want := range map[string]string{
		"A=1\nnot an assignment\n": "line 2",
		"1A=x\n":                   "not a valid variable name",
		"A=\"open\n":               "no closing",
	} {
		_, err := ParseEnvFile(strings.NewReader(in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseEnvFile(%q) = %v, want error containing %q", in, err, want)
		}
	}
}

func TestUnknownSuggests(t *testing.T) {
	got := Unknown([]string{"CLUSTERAPP_WORKER", "CLUSTERAPP_WORKERS", "PATH", "CLUSTERAPP_ZZZZZZZZZZ"})
	if len(got) != 2 || !strings.Contains(got[0], "did you mean CLUSTERAPP_WORKERS?") || strings.Contains(got[1], "did you mean") {
		t.Fatalf("Unknown = %q", got)
	}
}

func TestEnvTemplateParsesToNothing(t *testing.T) {
	var b strings.Builder
	if err := WriteEnvTemplate(&b); err != nil {
		t.Fatal(err)
	}
	vars, err := ParseEnvFile(strings.NewReader(b.String()))
	if err != nil || len(vars) != 0 {
		t.Fatalf("template must be all comments: %v %v", vars, err)
	}
	for _, v := range Vars() {
		if !strings.Contains(b.String(), "#"+v.Key+"="+v.Default+"\n") {
			t.Errorf("template lacks %s", v.Key)
		}
	}
}
