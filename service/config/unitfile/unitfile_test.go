package unitfile

import (
	"strings"
	"testing"
)

func TestEscaping(t *testing.T) {
	f := New("header line\nsecond\r line").Section("Socket").
		Set("ListenStream", "").
		Set("ListenStream", "[fe80::1]:80%lo").
		Set("Backlog", "100").
		Section("Service").
		Set("MemoryMax", "50%").
		SetEnv("A", `say "hi" \ 100%`)
	got, err := f.String()
	if err != nil {
		t.Fatal(err)
	}
	want := "# header line\n# second\\r line\n[Socket]\nListenStream=\nListenStream=[fe80::1]:80%%lo\nBacklog=100\n[Service]\nMemoryMax=50%\n" +
		`Environment="A=say \"hi\" \\ 100%%"` + "\n"
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

func TestRefusesWhatAUnitCannotHold(t *testing.T) {
	for _, v := range []string{"8080\rExecStartPre=/bin/true", "a\nb", "nul\x00", "tab\there", " lead", "trail ", `cont\`, "\x1b[0m"} {
		for name, f := range map[string]*File{
			"Set":    New("").Section("Socket").Set("ListenStream", v),
			"SetEnv": New("").Section("Service").SetEnv("A", v),
		} {
			if out, err := f.String(); err == nil {
				t.Errorf("%s(%q) wrote %q", name, v, out)
			} else if !strings.Contains(err.Error(), "unit file:") {
				t.Errorf("%s(%q): %v", name, v, err)
			}
		}
	}
}

// A comment holds one line whatever its text, and never ends in a
// backslash.
func TestCommentIsOneLine(t *testing.T) {
	got, _ := New("").Comment("a\rExecStart=/bin/sh\nb \\").String()
	if strings.Count(got, "\n") != 1 || !strings.HasPrefix(got, "# ") || strings.HasSuffix(strings.TrimSuffix(got, "\n"), `\`) {
		t.Fatalf("comment %q", got)
	}
}

// UnsetEnv quotes the exact assignment as SetEnv does; a value a unit file
// cannot hold unsets the name whatever its value, and is never an error
// (the generator must always write its files).
func TestUnsetEnv(t *testing.T) {
	got, err := New("").Section("Service").
		UnsetEnv("GOMEMLIMIT", `5"%MiB\`+"x").
		UnsetEnv("GOMEMLIMIT", "5\nMiB").
		UnsetEnv("GOMEMLIMIT", " 5MiB").
		String()
	if err != nil {
		t.Fatal(err)
	}
	want := "[Service]\n" + `UnsetEnvironment="GOMEMLIMIT=5\"%%MiB\\x"` + "\n" +
		`UnsetEnvironment="GOMEMLIMIT"` + "\n" + `UnsetEnvironment="GOMEMLIMIT"` + "\n"
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}
