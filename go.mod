module github.com/clusterapp/clusterapp

go 1.26.8

require (
	github.com/kelseyhightower/envconfig v1.4.0
	github.com/sirupsen/logrus v1.10.2
)

require golang.org/x/sys v0.48.0 // indirect
