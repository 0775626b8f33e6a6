package envfile

import (
	"maps"
	"strings"
	"testing"
)

// FuzzParse: Parse never panics; what it accepts has sane spans, and every
// variable it reads, written back by Line (the writer `clusterapp scale`
// uses), reads back unchanged, alone and in a whole file.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"A=1\n", "A='x\ny'\n", "A=\"q\\\"\\$\\\\\"\n", "A=b\\\nc", "# c\\\nB=2", "\ufeffA=1", "export A=1\n",
		"A=1\r\nB=2\r\n", "A=\"open", " A = x y  \n", "=x\n", "A==\n", ";c\nA=\\", "A=\"\\\n\"",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse(data)
		if err != nil {
			return
		}
		var all strings.Builder
		for _, a := range file.Assignments {
			if a.Start < 0 || a.Start >= a.End || a.End > len(data) || !strings.HasPrefix(string(data[a.Start:a.End]), a.Key) {
				t.Fatalf("assignment %+v has a bad span in %q", a, data)
			}
		}
		vars := file.Vars()
		for k, v := range vars {
			line, err := Line(k, v)
			if err != nil {
				t.Fatalf("Line(%q, %q): %v", k, v, err)
			}
			back, err := Parse([]byte(line))
			if err != nil || !maps.Equal(back.Vars(), map[string]string{k: v}) {
				t.Fatalf("%s=%q written as %q reads back as %v, %v", k, v, line, back, err)
			}
			all.WriteString(line + "\n")
		}
		back, err := Parse([]byte(all.String()))
		if err != nil || !maps.Equal(back.Vars(), vars) {
			t.Fatalf("%q rewritten as %q reads back as %v, %v", data, all.String(), back, err)
		}
	})
}
