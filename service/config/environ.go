package config

import (
	"os"
	"strings"
)

// EnvironKeys are the names of the process's environment variables, for
// Unknown.
func EnvironKeys() []string {
	var keys []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		keys = append(keys, k)
	}
	return keys
}
