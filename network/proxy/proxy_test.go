package proxy

import (
	"errors"
	"strings"
	"testing"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestResolveFromEnvEitherCase(t *testing.T) {
	for name, vars := range map[string]map[string]string{
		"upper": {"HTTP_PROXY": "http://p:1", "HTTPS_PROXY": "http://p:2", "NO_PROXY": "a,b"},
		"lower": {"http_proxy": "http://p:1", "https_proxy": "http://p:2", "no_proxy": "a,b"},
		"upper wins": {"HTTP_PROXY": "http://p:1", "http_proxy": "http://other:9", "https_proxy": "http://p:2",
			"NO_PROXY": "a,b", "no_proxy": "c"},
	} {
		e, err := Resolve(Settings{}, env(vars), nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want := Settings{HTTP: "http://p:1", HTTPS: "http://p:2", NoProxy: "a,b"}
		if e.Settings != want || e.Source != SourceEnv {
			t.Errorf("%s: got %+v, want %+v from the environment", name, e, want)
		}
	}
}

func TestResolveOrder(t *testing.T) {
	sys := func() (Settings, string, error) { return Settings{HTTPS: "http://sys:8080"}, "", nil }
	vars := env(map[string]string{"HTTPS_PROXY": "http://envp:3128"})
	e, _ := Resolve(Settings{HTTPS: "http://cfg:1"}, vars, sys)
	if e.HTTPS != "http://cfg:1" || e.Source != SourceConfig {
		t.Errorf("config first: %+v", e)
	}
	e, _ = Resolve(Settings{}, vars, sys)
	if e.HTTPS != "http://envp:3128" || e.Source != SourceEnv {
		t.Errorf("environment second: %+v", e)
	}
	e, _ = Resolve(Settings{}, env(nil), sys)
	if e.HTTPS != "http://sys:8080" || e.Source != SourceSystem {
		t.Errorf("system last: %+v", e)
	}
	e, err := Resolve(Settings{}, env(nil), nil)
	if err != nil || !e.IsZero() || e.Source != SourceNone {
		t.Errorf("nothing anywhere: %+v %v", e, err)
	}
	_, err = Resolve(Settings{}, env(nil), func() (Settings, string, error) { return Settings{}, "", errors.New("boom") })
	if err == nil {
		t.Errorf("a failing system probe: want its error")
	}
	e, _ = Resolve(Settings{}, env(nil), func() (Settings, string, error) { return Settings{}, "http://wpad/p.pac", nil })
	if e.PAC != "http://wpad/p.pac" || !e.IsZero() {
		t.Errorf("PAC only: reported, not applied: %+v", e)
	}
}

func TestValidate(t *testing.T) {
	for _, ok := range []string{"http://p:3128", "http://u:p%40ss@p:3128", "https://p", "socks5://127.0.0.1:1080"} {
		if err := (Settings{HTTPS: ok}).Validate(); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"p:3128", "ftp://p:21", "http://", "http://p :1", "http://u:secret@p:1\n"} {
		err := (Settings{HTTP: bad}).Validate()
		if err == nil {
			t.Errorf("%q: want an error", bad)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, "proxy.http") || !strings.Contains(msg, "accepted") || strings.Contains(msg, "secret") {
			t.Errorf("%q: error %q should name the field, say what is accepted, and hide credentials", bad, msg)
		}
	}
	if err := (Settings{NoProxy: "a\nb"}).Validate(); err == nil {
		t.Errorf("a newline in noProxy: want an error")
	}
}

func TestRewriteLoopback(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:3128":         "http://10.254.254.254:3128",
		"http://localhost:3128":         "http://10.254.254.254:3128",
		"http://LOCALHOST:3128/":        "http://10.254.254.254:3128/",
		"http://[::1]:3128":             "http://10.254.254.254:3128",
		"http://127.0.0.2":              "http://10.254.254.254",
		"http://user:pw@127.0.0.1:3128": "http://user:pw@10.254.254.254:3128",
		"http://proxy.corp:3128":        "http://proxy.corp:3128",
		"http://10.1.2.3:3128":          "http://10.1.2.3:3128",
	} {
		got := Settings{HTTP: in, HTTPS: in, NoProxy: "localhost"}.RewriteLoopback("10.254.254.254")
		if got.HTTP != want || got.HTTPS != want || got.NoProxy != "localhost" {
			t.Errorf("%s: got %+v, want %s", in, got, want)
		}
	}
	if got := (Settings{HTTP: "http://127.0.0.1:1"}).RewriteLoopback(""); got.HTTP != "http://127.0.0.1:1" {
		t.Errorf("no host access address: %s", got.HTTP)
	}
}

func TestMask(t *testing.T) {
	for in, want := range map[string]string{
		"http://alice:s3cret@proxy:3128":  "http://***@proxy:3128",
		"http://alice@proxy:3128":         "http://***@proxy:3128",
		"http://proxy:3128":               "http://proxy:3128",
		"http://al%20ice:p%40ss@proxy:80": "http://***@proxy:80",
		"":                                "",
	} {
		if got := Mask(in); got != want {
			t.Errorf("Mask(%q) = %q, want %q", in, got, want)
		}
	}
	m := Settings{HTTP: "http://a:b@p:1", HTTPS: "http://c:d@p:2", NoProxy: "x"}.Masked()
	if strings.Contains(m.HTTP+m.HTTPS, "a:b") || strings.Contains(m.HTTPS, "c:d") || m.NoProxy != "x" {
		t.Errorf("Masked: %+v", m)
	}
}

func TestEnv(t *testing.T) {
	e := Settings{HTTPS: "http://p:1", NoProxy: "a"}.Env()
	if len(e) != 4 || e["HTTPS_PROXY"] != "http://p:1" || e["https_proxy"] != "http://p:1" || e["no_proxy"] != "a" {
		t.Errorf("Env: %v", e)
	}
	if _, ok := e["HTTP_PROXY"]; ok {
		t.Errorf("an empty setting must not become an empty variable")
	}
}

const scutilManual = `<dictionary> {
  ExceptionsList : <array> {
    0 : *.local
    1 : 169.254/16
    2 : registry.corp
  }
  ExcludeSimpleHostnames : 1
  FTPPassive : 1
  HTTPEnable : 1
  HTTPPort : 3128
  HTTPProxy : proxy.corp
  HTTPSEnable : 1
  HTTPSPort : 3129
  HTTPSProxy : sproxy.corp
}
`

const scutilPAC = `<dictionary> {
  ExceptionsList : <array> {
    0 : *.local
  }
  FTPPassive : 1
  HTTPEnable : 0
  HTTPSEnable : 0
  ProxyAutoConfigEnable : 1
  ProxyAutoConfigURLString : http://wpad.corp/proxy.pac
}
`

func TestParseScutil(t *testing.T) {
	s, pac, err := ParseScutil(scutilManual)
	if err != nil {
		t.Fatal(err)
	}
	want := Settings{HTTP: "http://proxy.corp:3128", HTTPS: "http://sproxy.corp:3129", NoProxy: "*.local,169.254/16,registry.corp,localhost"}
	if s != want || pac != "" {
		t.Errorf("manual proxy: got %+v %q, want %+v", s, pac, want)
	}
	s, pac, err = ParseScutil(scutilPAC)
	if err != nil || !s.IsZero() || pac != "http://wpad.corp/proxy.pac" {
		t.Errorf("PAC: got %+v %q %v", s, pac, err)
	}
	s, pac, err = ParseScutil("<dictionary> {\n  HTTPEnable : 0\n}\n")
	if err != nil || !s.IsZero() || pac != "" {
		t.Errorf("nothing enabled: %+v %q %v", s, pac, err)
	}
	if _, _, err := ParseScutil("scutil: command not found"); err == nil {
		t.Errorf("not scutil's output: want an error")
	}
}
