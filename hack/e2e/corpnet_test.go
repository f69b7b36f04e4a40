//go:build e2e

package e2e

// The corporate-network checks in the main boot: two real TLS
// registries (Debian's docker-registry) on this machine's loopback, each
// with its own throwaway CA of which only the first is in caCerts, and a
// real proxy (tinyproxy) the start finds in HTTPS_PROXY. Nothing leaves
// the machine: the instance is isolated, the guest reaches the host's
// loopback only through the agent channel, and tinyproxy resolves the
// proxied registry name to 127.0.0.1 from its own /etc/hosts.

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// proxiedName is the first registry's second name: only tinyproxy
// resolves it (to 127.0.0.1), so a pull from it works only through the
// proxy.
const proxiedName = "reg.proxied.test"

// Proxy credentials, to check that status masks them and that dockerd
// sends them (tinyproxy answers 407 without).
const proxyUser, proxyPass = "e2e", "s3cret-e2e"

type corpFixture struct {
	dir        string
	ca1        string // CA1's PEM file: the one in caCerts
	reg1, reg2 int    // registry ports on 127.0.0.1
	proxyPort  int
	proxyLog   string
}

// startCorpNet starts the two registries and the proxy; t's cleanup ends
// them.
func startCorpNet(t *testing.T, base string) *corpFixture {
	t.Helper()
	f := &corpFixture{dir: filepath.Join(base, "corpnet")}
	if err := os.MkdirAll(f.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, bin := range []string{"docker-registry", "tinyproxy", "unshare"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s missing: run hack/deps.sh (%v)", bin, err)
		}
	}
	ca1, err := newTestCA("vmdock e2e CA 1")
	if err != nil {
		t.Fatal(err)
	}
	ca2, err := newTestCA("vmdock e2e CA 2 (not trusted)")
	if err != nil {
		t.Fatal(err)
	}
	f.ca1 = filepath.Join(f.dir, "ca1.pem")
	writeFile(t, f.ca1, ca1.certPEM)
	f.reg1 = startRegistry(t, f.dir, "reg1", ca1, "host.docker.internal", proxiedName)
	f.reg2 = startRegistry(t, f.dir, "reg2", ca2, "host.docker.internal")
	f.proxyPort, f.proxyLog = startTinyproxy(t, f.dir)
	return f
}

// configYAML is what the instance's config gets: only CA1.
func (f *corpFixture) configYAML() string {
	return fmt.Sprintf("caCerts: [%q]\n", f.ca1)
}

// startEnv is the host environment `vmdock start` reads the proxy from.
func (f *corpFixture) startEnv() []string {
	return []string{
		fmt.Sprintf("HTTPS_PROXY=http://%s:%s@127.0.0.1:%d", proxyUser, proxyPass, f.proxyPort),
		"NO_PROXY=host.docker.internal",
	}
}

// useStartEnv puts the proxy in the environment of every command e runs
// from now on: the proxy is part of the saved state's fingerprint, so the
// later starts must see the same one to resume as they did before.
func (f *corpFixture) useStartEnv(e *env) {
	e.extraEnv = append(e.extraEnv, f.startEnv()...)
}

func startRegistry(t *testing.T, dir, name string, ca *testCA, hosts ...string) int {
	t.Helper()
	port := freeLoopbackPort(t)
	startRegistryOn(t, "", dir, name, ca, "127.0.0.1", port, hosts...)
	return port
}

// startRegistryOn runs a TLS registry on ip:port, in the network namespace
// netns ("": this one), with a certificate ca issued for hosts.
func startRegistryOn(t *testing.T, netns, dir, name string, ca *testCA, ip string, port int, hosts ...string) {
	t.Helper()
	cert, key, err := ca.issue(hosts...)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, name+"-cert.pem"), filepath.Join(dir, name+"-key.pem")
	writeFile(t, certFile, cert)
	writeFile(t, keyFile, key)
	conf := filepath.Join(dir, name+".yml")
	writeFile(t, conf, []byte(fmt.Sprintf(`version: 0.1
log:
  level: info
storage:
  filesystem:
    rootdirectory: %q
http:
  addr: %s
  tls:
    certificate: %q
    key: %q
`, filepath.Join(dir, name+"-data"), net.JoinHostPort(ip, strconv.Itoa(port)), certFile, keyFile)))
	logf := filepath.Join(dir, name+".log")
	cmd := []string{"docker-registry", "serve", conf}
	if netns != "" {
		cmd = append([]string{"ip", "netns", "exec", netns}, cmd...)
	}
	startDaemon(t, logf, cmd[0], cmd[1:]...)
	waitTLS(t, ip, port, ca, hosts[0])
}

// startTinyproxy runs tinyproxy in the foreground in its own mount
// namespace, where /etc/hosts also names proxiedName, so it connects the
// guest's CONNECT for that name to this machine's loopback.
func startTinyproxy(t *testing.T, dir string) (int, string) {
	t.Helper()
	hosts, err := os.ReadFile("/etc/hosts")
	if err != nil {
		t.Fatal(err)
	}
	hostsFile := filepath.Join(dir, "hosts")
	writeFile(t, hostsFile, append(hosts, []byte("\n127.0.0.1\t"+proxiedName+"\n")...))
	port := freeLoopbackPort(t)
	conf := filepath.Join(dir, "tinyproxy.conf")
	// No ConnectPort line: CONNECT to any port (the registry's).
	writeFile(t, conf, []byte(fmt.Sprintf("Port %d\nListen 127.0.0.1\nTimeout 600\nMaxClients 50\nLogLevel Connect\nBasicAuth %s %s\n", port, proxyUser, proxyPass)))
	logf := filepath.Join(dir, "tinyproxy.log")
	startDaemon(t, logf, "unshare", "-m", "sh", "-c",
		fmt.Sprintf("mount --bind '%s' /etc/hosts && exec tinyproxy -d -c '%s'", hostsFile, conf))
	waitTCP(t, port)
	return port, logf
}

// startDaemon runs a foreground daemon with its output in logf until the
// test ends.
func startDaemon(t *testing.T, logf string, name string, args ...string) {
	t.Helper()
	out, err := os.Create(logf)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		out.Close()
	})
}

func writeFile(t *testing.T, p string, b []byte) {
	t.Helper()
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func readLog(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// checkCorpNet runs after the test image is loaded.
func checkCorpNet(t *testing.T, e *env, f *corpFixture) {
	reg1 := fmt.Sprintf("host.docker.internal:%d", f.reg1)
	img := reg1 + "/vmdock/corp:1"
	e.timed("corpnet: status shows the proxy from the environment, rewritten and masked", func(t *testing.T) {
		var st struct {
			HostAgent struct {
				Proxy struct {
					HTTPS, NoProxy, Source string
				} `json:"proxy"`
				CACerts int `json:"caCerts"`
			} `json:"hostAgent"`
		}
		out := e.run(time.Minute, e.vmdock, "status", "--json")
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatalf("status --json: %v", err)
		}
		p := st.HostAgent.Proxy
		if want := fmt.Sprintf("http://***@10.254.254.254:%d", f.proxyPort); p.HTTPS != want || p.Source != "environment" || p.NoProxy != "host.docker.internal" {
			t.Errorf("status proxy %+v, want https %s from the environment", p, want)
		}
		if strings.Contains(out, proxyPass) {
			t.Errorf("status --json shows the proxy password")
		}
		if st.HostAgent.CACerts < 1 {
			t.Errorf("status counts %d CA certificates, want CA1 at least", st.HostAgent.CACerts)
		}
		t.Logf("proxy %+v, %d CA certificates", p, st.HostAgent.CACerts)
	})
	e.timed("corpnet: docker push and pull host.docker.internal (CA from caCerts), not through the proxy", func(t *testing.T) {
		e.docker(time.Minute, "tag", "vmdock-test:latest", img)
		e.docker(5*time.Minute, "push", img)
		e.docker(time.Minute, "rmi", img)
		e.docker(5*time.Minute, "pull", img)
		if log := readLog(t, f.proxyLog); strings.Contains(log, "host.docker.internal") {
			t.Errorf("the pull from host.docker.internal (in NO_PROXY) went through the proxy:\n%s", log)
		}
	})
	e.timed("corpnet: docker build FROM the caCerts registry", func(t *testing.T) {
		ctxDir := filepath.Join(f.dir, "build")
		if err := os.MkdirAll(ctxDir, 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(ctxDir, "Dockerfile"), []byte("FROM "+img+"\nRUN [\"/bin/busybox\", \"touch\", \"/built-from-corp\"]\n"))
		e.docker(time.Minute, "rmi", img)
		// BuildKit needs the CLI's buildx plugin; without it the classic
		// builder pulls FROM through the same dockerd.
		buildkit := "1"
		if _, _, err := e.try(time.Minute, "docker", "buildx", "version"); err != nil {
			buildkit = "0"
			t.Logf("the docker CLI has no buildx plugin: the classic builder (DOCKER_BUILDKIT=0) pulls FROM")
		}
		n := len(e.extraEnv)
		e.extraEnv = append(e.extraEnv, "DOCKER_BUILDKIT="+buildkit)
		e.docker(10*time.Minute, "build", "--pull", "-t", "vmdock-corp-built:1", ctxDir)
		e.extraEnv = e.extraEnv[:n]
		out := e.docker(3*time.Minute, "run", "--rm", "vmdock-corp-built:1", "/bin/busybox", "ls", "/built-from-corp")
		if !strings.Contains(out, "/built-from-corp") {
			t.Fatalf("the built image lacks its RUN step's file: %q", out)
		}
	})
	e.timed("corpnet: docker pull "+proxiedName+" goes through the proxy (CONNECT in its log)", func(t *testing.T) {
		proxied := fmt.Sprintf("%s:%d/vmdock/corp:1", proxiedName, f.reg1)
		e.docker(5*time.Minute, "pull", proxied)
		log := readLog(t, f.proxyLog)
		if want := fmt.Sprintf("CONNECT %s:%d", proxiedName, f.reg1); !strings.Contains(log, want) {
			t.Errorf("tinyproxy's log lacks %q:\n%s", want, log)
		}
		if strings.Contains(log, "host.docker.internal") {
			t.Errorf("a host.docker.internal request reached the proxy:\n%s", log)
		}
	})
	e.timed("corpnet: docker push to a registry whose CA is not trusted fails with x509", func(t *testing.T) {
		img2 := fmt.Sprintf("host.docker.internal:%d/vmdock/corp:1", f.reg2)
		e.docker(time.Minute, "tag", "vmdock-test:latest", img2)
		out, errOut, err := e.try(3*time.Minute, "docker", "--context", "vmdock", "push", img2)
		if err == nil {
			t.Fatalf("push to the registry of the untrusted CA2 succeeded:\n%s", out)
		}
		if !strings.Contains(out+errOut, "x509") {
			t.Fatalf("push failed, but not with a certificate error:\n%s\n%s", out, errOut)
		}
		t.Logf("as expected: %s", strings.TrimSpace(errOut))
	})
}
