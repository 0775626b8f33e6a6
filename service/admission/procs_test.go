package admission

import "testing"

func TestServingProcs(t *testing.T) {
	for _, c := range []struct {
		name           string
		current, slots int
		explicit       bool
		procs          int
		change, tooFew bool
	}{
		{"default: as many slots as Ps gets one P more", 2, 2, false, 3, true, false},
		{"one CPU (affinity or quota), one slot", 1, 1, false, 2, true, false},
		{"already a spare P", 2, 1, false, 2, false, false},
		{"operator's value is kept, with a warning", 1, 1, true, 1, false, true},
		{"operator's value with a spare P", 4, 2, true, 4, false, false},
		{"admission as good as off: one P more, not 65537", 1, 65536, false, 2, true, false},
	} {
		procs, change, tooFew := ServingProcs(c.current, c.slots, c.explicit)
		if procs != c.procs || change != c.change || tooFew != c.tooFew {
			t.Errorf("%s: ServingProcs(%d, %d, %v) = %d, %v, %v; want %d, %v, %v",
				c.name, c.current, c.slots, c.explicit, procs, change, tooFew, c.procs, c.change, c.tooFew)
		}
	}
}
