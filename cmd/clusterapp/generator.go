package main

import (
	"fmt"
	"io"
	"runtime"

	"github.com/clusterapp/clusterapp/service/generator"
)

// generatorName is the name the binary is installed under in
// /usr/lib/systemd/system-generators (a symlink to /usr/bin/clusterapp):
// invoked by that name it runs as the generator.
const generatorName = "clusterapp-generator"

// runGenerator implements the systemd generator protocol: three output
// directories (normal, early, late); clusterapp writes to the normal one.
func runGenerator(args []string, stderr io.Writer) error {
	if len(args) != 1 && len(args) != 3 {
		return usageError{fmt.Sprintf("generator takes the output directories systemd passes (normal [early late]), got %d arguments", len(args))}
	}
	return generator.Run(generator.EnvFile, args[0], runtime.NumCPU(), stderr)
}
