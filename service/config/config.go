package config

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/kelseyhightower/envconfig"
)

// Prefix is the prefix of every variable, without the trailing underscore.
const Prefix = "CLUSTERAPP"

// Config holds every setting of a clusterapp worker and of the units around it.
// The struct tags are the single source of truth: `envconfig` names the
// variable (after Prefix), `default` is used when it is unset, `desc` is the
// one-line description shown by `clusterapp config` and written into the
// shipped environment file, and `scope` says who applies it (see Scope),
// which decides what an invalid value does.
type Config struct {
	Listen        string `envconfig:"LISTEN" default:"127.0.0.1:8080" scope:"listen" desc:"where to listen, in ListenStream= syntax: PORT (every address), IPV4:PORT, [IPV6]:PORT or [IPV6]:PORT%IFACE; under systemd the generator makes it clusterapp.socket's ListenStream= (the shipped socket listens on 127.0.0.1:8080 too: loopback until the operator opens it, e.g. with 8080 for every address), standalone the worker binds it"`
	MetricsListen string `envconfig:"METRICS_LISTEN" default:"127.0.0.1:9180" scope:"listen" desc:"where the metrics listener serves GET /metrics (every live worker's numbers, labelled worker=N), in the syntax of CLUSTERAPP_LISTEN; under systemd the generator makes it clusterapp-metrics.socket's ListenStream=, standalone the worker binds it; it shows the service's internals, so keep it on loopback or a private network"`
	Backlog       int    `envconfig:"BACKLOG" default:"4096" scope:"units" desc:"listen backlog of clusterapp.socket (Backlog=); keep net.core.somaxconn at least this large"`
	Workers       int    `envconfig:"WORKERS" default:"0" scope:"units" desc:"number of clusterapp-worker@N units the generator starts; 0 means one per CPU"`

	WatchdogSec time.Duration `envconfig:"WATCHDOG_SEC" default:"10s" scope:"units" desc:"the workers' WatchdogSec=: a worker whose health probe fails this long is killed (SIGABRT, stacks in the journal) and restarted"`
	LimitNOFILE int           `envconfig:"LIMIT_NOFILE" default:"65536" scope:"units" desc:"the workers' LimitNOFILE= (open files, so client connections, per worker); limits.conf does not apply to services"`
	MemoryHigh  string        `envconfig:"MEMORY_HIGH" default:"" scope:"units" desc:"the workers' MemoryHigh= (throttling threshold), e.g. 512M, 1.5G or 40%, as systemd reads it; empty means none (not 0, which systemd ignores; refused under 32M or 1%)"`
	MemoryMax   string        `envconfig:"MEMORY_MAX" default:"" scope:"units" desc:"the workers' MemoryMax= (hard limit, OOM kill above it), e.g. 768M, 1.5G or 50%, as systemd reads it; empty means none (not 0, which systemd ignores; refused under 32M or 1%)"`

	FibMaxN int `envconfig:"FIB_MAX_N" default:"45" desc:"largest n accepted by /fib (recursive Fibonacci; n=45 costs seconds of CPU)"`

	ReadHeaderTimeout time.Duration `envconfig:"READ_HEADER_TIMEOUT" default:"5s" desc:"time a client has to send its request headers (slowloris guard)"`
	ReadTimeout       time.Duration `envconfig:"READ_TIMEOUT" default:"30s" desc:"time a client has to send a whole request, body included; 0 disables"`
	WriteTimeout      time.Duration `envconfig:"WRITE_TIMEOUT" default:"1m" desc:"time to compute and write a response, from the end of the headers; 0 disables"`
	IdleTimeout       time.Duration `envconfig:"IDLE_TIMEOUT" default:"1m" desc:"how long an idle keep-alive connection is kept open"`
	MaxHeaderBytes    Size          `envconfig:"MAX_HEADER_BYTES" default:"64KiB" desc:"largest request header block (net/http reads up to 4 KiB more, for the request line); larger requests get 431"`
	MaxBodyBytes      Size          `envconfig:"MAX_BODY_BYTES" default:"1MiB" desc:"largest request body: a larger Content-Length gets 413 before the body is read; a body of unknown length (chunked) is cut there, and a route that reads it gets *http.MaxBytesError (answer 413)"`

	RequestTimeout time.Duration `envconfig:"REQUEST_TIMEOUT" default:"30s" desc:"a request still computing after this long is cancelled (the computation stops) and answered 503"`

	MaxInFlight   int           `envconfig:"MAX_IN_FLIGHT" default:"0" desc:"requests a worker runs at once (admission control); 0 means GOMAXPROCS; under systemd the generator sets CPUs/workers (at least 1), one request per CPU for the pool; health, readiness and metrics are never limited"`
	AdmissionWait time.Duration `envconfig:"ADMISSION_WAIT" default:"250ms" desc:"how long a request may wait for a free slot before it is answered 503 with Retry-After"`

	RateLimit           float64           `envconfig:"RATE_LIMIT" default:"0" desc:"requests per second each client may send to the whole service (all workers together); 0 disables"`
	RateBurst           int               `envconfig:"RATE_BURST" default:"20" desc:"requests a client may send at once above RATE_LIMIT"`
	RateLimitSlots      int               `envconfig:"RATE_LIMIT_SLOTS" default:"65536" desc:"cells of the shared rate-limit table; clients hashed to one cell share a budget"`
	RateLimitIPv4Prefix int               `envconfig:"RATE_LIMIT_IPV4_PREFIX" default:"32" desc:"IPv4 clients are limited per prefix of this length: 32 is one budget per address, 24 one per /24 (nginx users mask $binary_remote_addr the same way)"`
	RateLimitIPv6Prefix int               `envconfig:"RATE_LIMIT_IPV6_PREFIX" default:"64" desc:"IPv6 clients are limited per prefix of this length: 64 (the default) is one budget per /64, the block one host usually holds, so rotating addresses inside it does not escape the limit"`
	RateLimitFallback   RateLimitFallback `envconfig:"RATE_LIMIT_FALLBACK" default:"local" desc:"what a worker does while the shared rate-limit table in /run/clusterapp cannot be opened: local limits each worker on its own (the budget becomes up to N times RATE_LIMIT), closed answers the limited routes 503; both keep retrying the shared table"`
	TrustedProxies      string            `envconfig:"TRUSTED_PROXIES" default:"" desc:"comma-separated addresses or CIDR prefixes of proxies whose X-Forwarded-For names the client (e.g. 127.0.0.1 for a local nginx)"`

	CacheEntries int           `envconfig:"CACHE_ENTRIES" default:"0" desc:"result cache for /fib: most entries kept; 0 disables the cache (the default, so /fib stays an honest CPU workload)"`
	CacheBytes   Size          `envconfig:"CACHE_BYTES" default:"16MiB" desc:"result cache: most bytes of keys and values kept"`
	CacheMaxAge  time.Duration `envconfig:"CACHE_MAX_AGE" default:"1m" desc:"result cache: max-age sent in Cache-Control, so a front cache may store cached routes"`

	Balance           bool          `envconfig:"BALANCE" default:"true" desc:"spread connections evenly: a worker holding more connections than the least-loaded live worker leaves the next accept to it (least-connections, no master); while clients open a connection per request, workers past one per CPU leave new connections to the first ones as long as those keep up; a worker whose requests wait half the admission wait while another holds two connections fewer ends keep-alive connections after their responses, so their clients reconnect there"`
	BalanceMaxDefer   time.Duration `envconfig:"BALANCE_MAX_DEFER" default:"20ms" desc:"longest a worker puts off one accept while balancing; bounds the delay when the shared table is stale"`
	KeepAliveRequests int           `envconfig:"KEEPALIVE_REQUESTS" default:"1000" desc:"close a keep-alive connection after this many requests so clients are redistributed over the workers (nginx's keepalive_requests); 0 = unlimited"`
	KeepAliveTime     time.Duration `envconfig:"KEEPALIVE_TIME" default:"30s" desc:"close a keep-alive connection at its first response after it has been open this long, so a restarted worker gets its clients back even on slow routes (nginx's keepalive_time); 0 = no limit"`

	ShutdownTimeout time.Duration `envconfig:"SHUTDOWN_TIMEOUT" default:"20s" scope:"both" desc:"how long a draining worker waits for its connections to finish before closing them (keep it below the unit's TimeoutStopSec=)"`
	DrainIdleGrace  time.Duration `envconfig:"DRAIN_IDLE_GRACE" default:"1s" desc:"while draining, a keep-alive connection idle this long is closed instead of waited for"`

	MaxRequests       int `envconfig:"MAX_REQUESTS" default:"0" desc:"recycle the worker (drain and exit 0, systemd starts a fresh one) after this many requests; 0 disables"`
	MaxRequestsJitter int `envconfig:"MAX_REQUESTS_JITTER" default:"0" desc:"random extra requests, up to this many, added to MAX_REQUESTS so workers do not recycle together"`

	MaxRSS string `envconfig:"MAX_RSS" default:"" desc:"recycle the worker (drain and exit 0, systemd starts a fresh one) once its resident memory stays over this size for a second (read every 250 ms), e.g. 512M or 10% (of the machine's memory) as MEMORY_MAX reads it; the Go heap limit is kept below it too; empty: never. Keep it under CLUSTERAPP_MEMORY_MAX, so the recycle comes before the kernel's OOM kill"`

	MemoryLimitRatio float64 `envconfig:"MEMORY_LIMIT_RATIO" default:"0.9" desc:"when GOMEMLIMIT is unset, the Go heap limit as a fraction of the cgroup memory limit (MemoryMax=/MemoryHigh=) or of CLUSTERAPP_MAX_RSS, whichever is lower"`

	LogFormat LogFormat `envconfig:"LOG_FORMAT" default:"text" desc:"log format: text or json (under journald text has no timestamps or colours)"`
	LogLevel  LogLevel  `envconfig:"LOG_LEVEL" default:"info" desc:"least severe level logged: trace, debug, info, warn, error"`
	AccessLog bool      `envconfig:"ACCESS_LOG" default:"false" desc:"log one line per request (costs throughput)"`

	WorkerHeader WorkerHeader `envconfig:"WORKER_HEADER" default:"connection" desc:"which responses carry X-Worker, the name of the worker that answered: connection (the first response on each connection; the later ones on it come from the same worker), every (every response: one more header to sort and write costs a keep-alive request of / about 2% of its CPU), off"`

	DebugEndpoints bool `envconfig:"DEBUG_ENDPOINTS" default:"false" desc:"serve the fault-injection routes /debug/crash, /debug/hang and /debug/leak (tests and demos only)"`
}

// Scope says who applies a variable, and so what an invalid value does.
type Scope string

const (
	// ScopeWorker variables are applied by the worker. An invalid one stops
	// the worker (exit 78, with back-off): these settings bound what clients
	// may do (rate limit, caps, timeouts), and serving with a default the
	// operator did not choose could open the service wider than meant.
	ScopeWorker Scope = "worker"
	// ScopeUnits variables are applied by systemd through the generator's
	// drop-ins. An invalid one falls back to its default, for that variable
	// alone, with a warning in the journal; workers ignore it.
	ScopeUnits Scope = "units"
	// ScopeBoth variables are applied by both: the generator falls back to
	// the default, the worker stops.
	ScopeBoth Scope = "both"
	// ScopeListen is CLUSTERAPP_LISTEN and CLUSTERAPP_METRICS_LISTEN. They
	// fail closed: the generator makes that socket listen nowhere rather
	// than anywhere else, and a standalone worker does not start. A socket-activated worker does not
	// use it.
	ScopeListen Scope = "listen"
)

// Var describes one variable of the specification.
type Var struct {
	Key         string // full name, e.g. CLUSTERAPP_LISTEN
	Default     string // the default as written in the struct tag
	Description string
	Scope       Scope
	field       int
}

// Vars returns every variable of the specification in declaration order.
func Vars() []Var { return slices.Clone(specVars()) }

// specVars is the specification read from Config's struct tags, once. A
// worker start asks for it for each environment variable it checks and for
// each comparison when it sorts problems; reflecting over the tags each
// time grew with the environment's size (a start with 35 variables showed
// no difference the spawn could measure, 28.6 against 30.5 ms, within the
// runs' spread). Callers inside the package must not modify it.
var specVars = sync.OnceValue(func() []Var {
	t := reflect.TypeOf(Config{})
	vars := make([]Var, 0, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		scope := Scope(f.Tag.Get("scope"))
		if scope == "" {
			scope = ScopeWorker
		}
		vars = append(vars, Var{
			Key:         Prefix + "_" + f.Tag.Get("envconfig"),
			Default:     f.Tag.Get("default"),
			Description: f.Tag.Get("desc"),
			Scope:       scope,
			field:       i,
		})
	}
	return vars
})

// varIndex maps each variable's key to its place in specVars.
var varIndex = sync.OnceValue(func() map[string]int {
	m := make(map[string]int, len(specVars()))
	for i, v := range specVars() {
		m[v.Key] = i
	}
	return m
})

// Value returns the value of v in c, formatted the way it would be written in
// an environment file.
func (c Config) Value(v Var) string {
	f := reflect.ValueOf(c).Field(v.field)
	if d, ok := f.Interface().(time.Duration); ok {
		return formatDuration(d)
	}
	if s, ok := f.Interface().(fmt.Stringer); ok {
		return s.String()
	}
	return fmt.Sprint(f.Interface())
}

// Load reads the specification from the process environment and validates it.
// Every invalid variable is set to its default in the returned Config, which
// is therefore always usable; the error, when not nil, is a *Error listing
// every invalid variable with its Scope, and the caller decides what each
// one means (see Scope).
func Load() (Config, error) {
	envMu.Lock()
	defer envMu.Unlock()
	return load()
}

// envMu serialises Load and LoadVars: LoadVars swaps the process environment
// because envconfig can only read os.Getenv.
var envMu sync.Mutex

// LoadVars validates vars (for instance an environment file) as if they were
// the whole CLUSTERAPP_* environment. The process environment is swapped for
// the duration of the call and restored afterwards.
func LoadVars(vars map[string]string) (Config, error) {
	envMu.Lock()
	defer envMu.Unlock()
	saved := map[string]string{}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		if _, set := vars[k]; set || strings.HasPrefix(k, Prefix+"_") {
			saved[k] = v       // vars' other names too (PATH, GOMAXPROCS in a file): put back as they were
			_ = os.Unsetenv(k) // Unsetenv cannot fail on unix
		}
	}
	defer func() {
		for k := range vars {
			_ = os.Unsetenv(k)
		}
		for k, v := range saved {
			_ = os.Setenv(k, v)
		}
	}()
	for k, v := range vars {
		if err := os.Setenv(k, v); err != nil {
			return Config{}, fmt.Errorf("set %s: %w", k, err)
		}
	}
	return load()
}

// load checks every raw value, then runs envconfig until every parse error
// is found (envconfig stops at the first one), then validates ranges. Each
// bad variable is recorded and masked, so the next pass sees its default;
// the last pass therefore yields a Config of valid values only.
func load() (Config, error) {
	var problems []Problem
	masked := map[string]string{}
	defer func() {
		for k, v := range masked {
			_ = os.Setenv(k, v)
		}
	}()
	mask := func(p Problem) {
		problems = append(problems, p)
		masked[p.Key] = p.Value
		_ = os.Unsetenv(p.Key) // Unsetenv cannot fail on unix
	}
	// envconfig reads a variable's bare name (LISTEN for CLUSTERAPP_LISTEN)
	// when the prefixed one is unset: a LISTEN= or DEBUG_ENDPOINTS= in the
	// environment file or the manager's environment would become a setting,
	// unchecked. Only CLUSTERAPP_* names are settings, so the bare ones are
	// hidden from it while it reads, and put back after.
	for _, v := range specVars() {
		bare := strings.TrimPrefix(v.Key, Prefix+"_")
		if raw, set := os.LookupEnv(bare); set {
			masked[bare] = raw
			_ = os.Unsetenv(bare)
		}
	}
	for _, v := range specVars() {
		raw, set := os.LookupEnv(v.Key)
		switch {
		case set && raw == "":
			// KEY= means the default, as an empty assignment resets a
			// setting in a unit file.
			masked[v.Key] = raw
			_ = os.Unsetenv(v.Key)
		case set:
			if p, bad := rawProblem(v.Key, raw); bad {
				mask(p)
			} else if p, bad := numberProblem(v, raw); bad {
				mask(p)
			} else if canonical, p, bad := boolValue(v, raw); bad {
				mask(p)
			} else if canonical != raw {
				// yes, on, ...: envconfig reads only strconv.ParseBool's
				// words, so it is given the same value in one of them.
				masked[v.Key] = raw
				_ = os.Setenv(v.Key, canonical) // Setenv of a valid name cannot fail
			}
		}
	}
	var c Config
	for range reflect.TypeOf(c).NumField() + 2 {
		c = Config{}
		err := envconfig.Process(Prefix, &c)
		var pe *envconfig.ParseError
		if errors.As(err, &pe) {
			mask(parseProblem(pe))
			continue
		}
		if err != nil {
			return Config{}, fmt.Errorf("read environment: %w", err)
		}
		invalid := c.validate()
		if len(invalid) == 0 {
			break
		}
		for _, p := range invalid {
			mask(p)
		}
	}
	if len(problems) > 0 {
		for i := range problems {
			problems[i].Scope = scopeOf(problems[i].Key)
		}
		sort.SliceStable(problems, func(i, j int) bool { return order(problems[i].Key) < order(problems[j].Key) })
		return c, &Error{Problems: problems}
	}
	return c, nil
}

// rawProblem refuses control characters and whitespace in any value: no
// setting needs them, and a carriage return that reaches a unit file is a
// line break there (a new directive).
func rawProblem(key, raw string) (Problem, bool) {
	for i, r := range raw {
		if unicode.IsControl(r) || unicode.IsSpace(r) || r == utf8.RuneError {
			return Problem{Key: key, Value: raw, Expected: fmt.Sprintf("a value without control characters, whitespace or invalid UTF-8 (found %q at byte %d)", r, i)}, true
		}
	}
	return Problem{}, false
}

// Plain decimal numbers. envconfig parses integers in base 0 and floats
// with Go's syntax, so 010 was 8 workers, 0x400 a backlog of 1024 and
// RATE_LIMIT_IPV4_PREFIX=024 a /20, while the file plainly says 10 and 24.
var (
	plainInt   = regexp.MustCompile(`^[-+]?(0|[1-9][0-9]*)$`)
	plainFloat = regexp.MustCompile(`^[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$`)
)

// numberProblem refuses a number written in anything but plain decimal
// notation, for the settings that are Go integers and floats (durations
// and sizes have their own syntax).
func numberProblem(v Var, raw string) (Problem, bool) {
	t := reflect.TypeOf(Config{}).Field(v.field).Type
	if t.PkgPath() != "" {
		return Problem{}, false
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int64, reflect.Int32, reflect.Uint, reflect.Uint64, reflect.Uint32:
		if !plainInt.MatchString(raw) {
			return Problem{Key: v.Key, Value: raw, Expected: "a whole number in decimal digits, without a leading zero, a base prefix (0x, 0o, 0b) or an underscore"}, true
		}
	case reflect.Float64, reflect.Float32:
		if !plainFloat.MatchString(raw) {
			return Problem{Key: v.Key, Value: raw, Expected: "a decimal number, such as 20 or 0.5"}, true
		}
	}
	return Problem{}, false
}

func scopeOf(key string) Scope {
	if i, ok := varIndex()[key]; ok {
		return specVars()[i].Scope
	}
	return ScopeWorker
}

func order(key string) int {
	if i, ok := varIndex()[key]; ok {
		return i
	}
	return len(specVars())
}
