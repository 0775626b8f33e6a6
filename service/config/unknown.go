package config

import "strings"

// retired are variables no longer read, with what replaced them.
var retired = map[string]string{
	// EnvironmentFile= wins over the unit's Environment=, so an operator's
	// file could give every worker one name: one X-Worker for all, and no
	// balancing (issue 11).
	Prefix + "_INSTANCE": "a worker's name is its unit instance (%i), passed by systemd as `clusterapp-worker --instance %i`; an environment file cannot set it",
}

// Unknown returns the CLUSTERAPP_* names in keys that are not part of the
// specification, each with a suggestion when a known name is close (a typo
// such as CLUSTERAPP_WORKER for CLUSTERAPP_WORKERS would otherwise be
// silently ignored), and the names an operator may mean as a setting but
// that are not read: a setting's name without the prefix (LISTEN), and one
// in the wrong case (clusterapp_workers).
func Unknown(keys []string) []string {
	var out []string
	for _, k := range keys {
		if why, ok := retired[k]; ok {
			out = append(out, k+" is not read: "+why)
			continue
		}
		if known(Prefix + "_" + k) {
			out = append(out, k+" is not read: the setting is "+Prefix+"_"+k)
			continue
		}
		if up := strings.ToUpper(k); up != k && strings.HasPrefix(up, Prefix+"_") {
			msg := k + " is not read: names are upper case"
			if known(up) {
				msg += " (did you mean " + up + "?)"
			}
			out = append(out, msg)
			continue
		}
		if !strings.HasPrefix(k, Prefix+"_") || known(k) {
			continue
		}
		msg := "unknown variable " + k
		if s := closest(k); s != "" {
			msg += " (did you mean " + s + "?)"
		}
		out = append(out, msg+": ignored")
	}
	return out
}

func known(key string) bool {
	_, ok := varIndex()[key]
	return ok
}

func closest(key string) string {
	best, bestDist := "", 4
	for _, v := range specVars() {
		if d := editDistance(key, v.Key); d < bestDist {
			best, bestDist = v.Key, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
