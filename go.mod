module github.com/clusterapp/clusterapp

go 1.26.8

require (
	github.com/coreos/go-systemd/v22 v22.7.0
	github.com/kelseyhightower/envconfig v1.4.0
	github.com/sirupsen/logrus v1.10.2
	golang.org/x/sys v0.50.0
)
