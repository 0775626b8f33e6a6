package loadgen

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"
)

func TestIsLoopbackHost(t *testing.T) {
	tests := []struct {
		host string
		want bool
	}{
		{"127.0.0.1", true},
		{"127.255.3.4", true},
		{"::1", true},
		{"::ffff:127.0.0.1", true},
		{"localhost", true},
		{"LocalHost.", true},
		{"0.0.0.0", false},
		{"10.0.0.1", false},
		{"192.168.1.10", false},
		{"::", false},
		{"example.com", false},
		{"localhost.example.com", false},
		{"128.0.0.1", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := isLoopbackHost(tt.host); got != tt.want {
			t.Errorf("isLoopbackHost(%q) = %v, want %v", tt.host, got, tt.want)
		}
	}
}

func TestRunRefusesNonLoopback(t *testing.T) {
	for _, target := range []string{
		"http://10.1.2.3:8080/",
		"http://example.com/",
		"http://[2001:db8::1]/",
		"http://0.0.0.0:8080/",
	} {
		res, err := Run(context.Background(), Options{URL: target, Requests: 1})
		if !errors.Is(err, ErrNotLoopback) {
			t.Errorf("Run(%s) error = %v, want ErrNotLoopback", target, err)
		}
		var optErr *OptionError
		if !errors.As(err, &optErr) || optErr.Field != "URL" {
			t.Errorf("Run(%s) error = %#v, want an *OptionError for URL", target, err)
		}
		if res != nil {
			t.Errorf("Run(%s) result = %+v, want nil", target, res)
		}
	}
}

func TestOptionsValidation(t *testing.T) {
	valid := Options{URL: "http://127.0.0.1:1/", Requests: 1}
	tests := []struct {
		name  string
		edit  func(*Options)
		field string // "" means valid
	}{
		{"defaults", func(*Options) {}, ""},
		{"duration only", func(o *Options) { o.Requests, o.Duration = 0, time.Second }, ""},
		{"max duration", func(o *Options) { o.Duration = MaxDuration }, ""},
		{"localhost", func(o *Options) { o.URL = "http://localhost:8080/x" }, ""},
		{"ipv6", func(o *Options) { o.URL = "http://[::1]:8080/" }, ""},
		{"no scheme", func(o *Options) { o.URL = "127.0.0.1:8080" }, "URL"},
		{"ftp", func(o *Options) { o.URL = "ftp://127.0.0.1/" }, "URL"},
		{"empty url", func(o *Options) { o.URL = "" }, "URL"},
		{"negative concurrency", func(o *Options) { o.Concurrency = -1 }, "Concurrency"},
		{"huge concurrency", func(o *Options) { o.Concurrency = MaxConcurrency + 1 }, "Concurrency"},
		{"negative requests", func(o *Options) { o.Requests = -1 }, "Requests"},
		{"no limit", func(o *Options) { o.Requests = 0 }, "Duration"},
		{"too long", func(o *Options) { o.Duration = MaxDuration + time.Second }, "Duration"},
		{"negative duration", func(o *Options) { o.Duration = -time.Second }, "Duration"},
		{"negative timeout", func(o *Options) { o.Timeout = -time.Second }, "Timeout"},
		{"negative rate", func(o *Options) { o.Rate = -1 }, "Rate"},
		{"NaN rate", func(o *Options) { o.Rate = math.NaN() }, "Rate"},
		{"bad header", func(o *Options) { o.Header = "X Worker" }, "Header"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := valid
			tt.edit(&opts)
			got, err := opts.withDefaults()
			var optErr *OptionError
			switch {
			case tt.field == "" && err != nil:
				t.Fatalf("withDefaults() error = %v, want nil", err)
			case tt.field == "":
				if got.Concurrency != DefaultConcurrency && opts.Concurrency == 0 ||
					got.Timeout != DefaultTimeout || got.Header != DefaultHeader {
					t.Errorf("withDefaults() = %+v, want defaults filled in", got)
				}
			case !errors.As(err, &optErr) || optErr.Field != tt.field:
				t.Fatalf("withDefaults() error = %v, want an *OptionError for %s", err, tt.field)
			}
		})
	}
}
