package systemd_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/clusterapp/clusterapp/service/lab/sandbox"
)

func TestMain(m *testing.M) {
	wd, _ := os.Getwd()
	sandbox.Main(m, filepath.Dir(wd))
}
