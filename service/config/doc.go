// Package config is the specification of every CLUSTERAPP_* environment
// variable: its default, its meaning, how it is parsed and what values are
// allowed.
//
// systemd hands a worker its settings through the environment
// (EnvironmentFile=/etc/clusterapp/clusterapp.env), so the environment is the
// only configuration source. Variables are read with envconfig from the Config
// struct tags; the same tags generate the operator-facing documentation (the
// commented environment file and the README table), so the docs cannot drift
// from the code. Validation collects every problem and names the variable, the
// value given and what is expected, so a worker that refuses to start says
// exactly why in one journal line.
//
// ParseEnvFile reads the KEY=value format that systemd's EnvironmentFile=
// accepts, so `clusterapp config --check FILE` validates a file exactly as the
// worker would see it, without starting anything.
package config
