//go:build e2e

package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// unitPath is the shipped systemd unit, relative to this package.
var unitPath = filepath.Join("..", "..", "configs", "adpnode.service")

// maxExposure is the highest `systemd-analyze security` rating the shipped
// unit may have (0 is fully locked down, 10 fully exposed).
const maxExposure = 3.0

var exposureRE = regexp.MustCompile(`Overall exposure level for \S+: ([0-9]+(?:\.[0-9]+)?) `)

// analyzeExposure runs `systemd-analyze security --offline=true` on a unit
// file and returns its overall exposure and anything it said on stderr. It
// skips the test where systemd-analyze is missing or too old for --offline.
func analyzeExposure(t *testing.T, unit string) (float64, string) {
	t.Helper()
	bin, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed (Debian: apt-get install systemd); the unit's security rating is not checked")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "security", "--offline=true", "--no-pager", unit)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if strings.Contains(stderr.String(), "offline") {
			t.Skipf("this systemd-analyze has no --offline (systemd 250 or later needed): %s", strings.TrimSpace(stderr.String()))
		}
		t.Fatalf("systemd-analyze security %s: %v\nstdout:\n%s\nstderr:\n%s", unit, err, out, stderr.String())
	}
	m := exposureRE.FindSubmatch(out)
	if m == nil {
		t.Fatalf("no overall exposure in systemd-analyze output:\n%s", out)
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatalf("exposure %q: %v", m[1], err)
	}
	return v, stderr.String()
}

// TestSystemdUnitSecurity keeps the shipped unit's sandbox rated at most
// 3.0 by systemd's own analyzer, and makes sure every directive in it is
// one systemd knows (a misspelt hardening option is silently ignored).
func TestSystemdUnitSecurity(t *testing.T) {
	v, stderr := analyzeExposure(t, unitPath)
	t.Logf("systemd-analyze security --offline=true %s: overall exposure %.1f", unitPath, v)
	if v > maxExposure {
		t.Errorf("configs/adpnode.service is rated %.1f by systemd-analyze security; it must be at most %.1f", v, maxExposure)
	}
	for _, line := range rejectedLines(stderr) {
		t.Errorf("systemd does not accept a line of the unit: %s", line)
	}
}

// rejectedLines returns what systemd-analyze said about unit lines it
// ignores (unknown keys, values it cannot parse).
func rejectedLines(stderr string) []string {
	var bad []string
	for _, line := range strings.Split(stderr, "\n") {
		l := strings.ToLower(line)
		if strings.Contains(l, "unknown") || strings.Contains(l, "failed to parse") || strings.Contains(l, "invalid") {
			bad = append(bad, line)
		}
	}
	return bad
}

// TestSystemdAnalyzeReportsAMisspeltKey: a misspelt hardening option is
// ignored by systemd, and the check above must notice it.
func TestSystemdAnalyzeReportsAMisspeltKey(t *testing.T) {
	b, err := os.ReadFile(unitPath)
	if err != nil {
		t.Fatal(err)
	}
	typo := strings.Replace(string(b), "ProtectClock=", "ProtectClok=", 1)
	if typo == string(b) {
		t.Fatal("the unit has no ProtectClock= to misspell")
	}
	p := filepath.Join(t.TempDir(), "typo.service")
	if err := os.WriteFile(p, []byte(typo), 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr := analyzeExposure(t, p)
	if bad := rejectedLines(stderr); len(bad) != 1 || !strings.Contains(bad[0], "ProtectClok") {
		t.Fatalf("a misspelt key was not reported: %q (stderr %q)", bad, stderr)
	}
}

// TestSystemdAnalyzeRatesAWeakUnitExposed shows the measure above means
// something: a unit with no sandbox at all is rated far above the bound.
func TestSystemdAnalyzeRatesAWeakUnitExposed(t *testing.T) {
	weak := filepath.Join(t.TempDir(), "weak.service")
	body := "[Unit]\nDescription=no sandbox\n\n[Service]\nExecStart=/usr/local/bin/adpnode serve\n"
	if err := os.WriteFile(weak, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	v, _ := analyzeExposure(t, weak)
	if v <= maxExposure {
		t.Fatalf("an unsandboxed unit is rated %.1f, not above %.1f: the exposure is not being read", v, maxExposure)
	}
}

// parseUnit reads a unit file into its [Service] (and other sections')
// assignments; a key set twice keeps every value in order.
func parseUnit(t *testing.T, path string) map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	kv := map[string][]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' || line[0] == '[' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: not a key=value line: %q", path, line)
		}
		kv[k] = append(kv[k], v)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return kv
}

func one(t *testing.T, kv map[string][]string, key string) string {
	t.Helper()
	v := kv[key]
	if len(v) != 1 {
		t.Fatalf("configs/adpnode.service: %s is set %d times, want once", key, len(v))
	}
	return v[0]
}

// TestSystemdUnitRunnable checks, without systemd, that the hardening
// leaves a node that starts, writes where it may and stops gracefully,
// and that the operator guide creates the user the unit runs as.
func TestSystemdUnitRunnable(t *testing.T) {
	kv := parseUnit(t, unitPath)

	argv := strings.Fields(one(t, kv, "ExecStart"))
	if len(argv) < 2 || argv[0] != "/usr/local/bin/adpnode" || argv[1] != "serve" {
		t.Fatalf("ExecStart = %q, want /usr/local/bin/adpnode serve …", argv)
	}
	flag := func(name string) string {
		for i, a := range argv {
			if a == name && i+1 < len(argv) {
				return argv[i+1]
			}
		}
		t.Fatalf("ExecStart has no %s: %q", name, argv)
		return ""
	}
	if c := flag("--config"); !strings.HasPrefix(c, "/etc/") {
		t.Errorf("--config %s: want a file under /etc", c)
	}
	// The only writable place is the state dir: --data must be it, whatever the config file says.
	if d, want := flag("--data"), "/var/lib/"+one(t, kv, "StateDirectory"); d != want {
		t.Errorf("--data %s is not the StateDirectory %s (ProtectSystem=strict makes everything else read-only)", d, want)
	}
	if one(t, kv, "ProtectSystem") != "strict" {
		t.Error("ProtectSystem is not strict")
	}
	if got := one(t, kv, "Restart"); got != "on-failure" {
		t.Errorf("Restart=%s, want on-failure", got)
	}
	// serve's close gives HTTP shutdown 10 s, then flushes Badger: the stop timeout must cover both.
	stop, err := time.ParseDuration(strings.TrimSpace(one(t, kv, "TimeoutStopSec")) + "s")
	if err != nil || stop < 30*time.Second {
		t.Errorf("TimeoutStopSec=%s: want at least 30 (s) for a graceful stop (%v)", kv["TimeoutStopSec"], err)
	}
	if got := one(t, kv, "KillSignal"); got != "SIGTERM" {
		t.Errorf("KillSignal=%s: the node drains on SIGTERM", got)
	}
	if got := one(t, kv, "CapabilityBoundingSet"); got != "" {
		t.Errorf("CapabilityBoundingSet=%s, want empty", got)
	}
	// libp2p lists interfaces and routes over netlink (RTM_GETADDR, go-netroute).
	fams := strings.Fields(one(t, kv, "RestrictAddressFamilies"))
	for _, want := range []string{"AF_INET", "AF_INET6", "AF_NETLINK"} {
		found := false
		for _, f := range fams {
			found = found || f == want
		}
		if !found {
			t.Errorf("RestrictAddressFamilies lacks %s (have %v)", want, fams)
		}
	}
	// Go's listener reads /proc/sys/net/core/somaxconn and the process metrics /proc/stat:
	// ProcSubset=pid would hide both.
	if v := kv["ProcSubset"]; len(v) > 0 && v[len(v)-1] == "pid" {
		t.Error("ProcSubset=pid hides /proc/sys/net/core/somaxconn and /proc/stat, which the node reads")
	}
	if len(kv["DynamicUser"]) > 0 {
		t.Error("DynamicUser is set: the operator guide documents a fixed adpnode user that the CLI runs as")
	}

	user := one(t, kv, "User")
	readme, err := os.ReadFile(filepath.Join("..", "..", "docs", "operator.md"))
	if err != nil {
		t.Fatal(err)
	}
	create := regexp.MustCompile(`useradd --system[^\n]*(\\\n[^\n]*)*\b` + regexp.QuoteMeta(user) + `\b`)
	if !create.Match(readme) {
		t.Errorf("docs/operator.md does not create the unit's user %q with useradd --system", user)
	}
	if !strings.Contains(string(readme), "configs/adpnode.service") {
		t.Error("docs/operator.md does not name configs/adpnode.service")
	}
}

// TestOperatorGuideNginxConfigParses runs the operator guide's nginx block through
// `nginx -t` where nginx is installed (its certificate paths replaced by a
// throwaway self-signed pair), so the documented config stays loadable.
func TestOperatorGuideNginxConfigParses(t *testing.T) {
	nginx, err := exec.LookPath("nginx")
	if err != nil {
		t.Skip("nginx is not installed (Debian: apt-get install nginx-light); the operator guide's nginx config is not checked")
	}
	openssl, err := exec.LookPath("openssl")
	if err != nil {
		t.Skip("openssl is not installed; no certificate for nginx -t")
	}
	readme, err := os.ReadFile(filepath.Join("..", "..", "docs", "operator.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```nginx\n(.*?)```").FindSubmatch(readme)
	if m == nil {
		t.Fatal("docs/operator.md has no nginx block")
	}
	site := string(m[1])
	for _, want := range []string{"proxy_buffering off", "proxy_read_timeout", "proxy_http_version 1.1"} {
		if !strings.Contains(site, want) {
			t.Errorf("operator guide's nginx config lacks %q", want)
		}
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	crt, key := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	if out, err := exec.CommandContext(ctx, openssl, "req", "-x509", "-newkey", "ed25519", "-nodes",
		"-keyout", key, "-out", crt, "-days", "1", "-subj", "/CN=adp.example.org").CombinedOutput(); err != nil {
		t.Fatalf("openssl: %v\n%s", err, out)
	}
	site = regexp.MustCompile(`ssl_certificate\s+\S+;`).ReplaceAllString(site, "ssl_certificate "+crt+";")
	site = regexp.MustCompile(`ssl_certificate_key\s+\S+;`).ReplaceAllString(site, "ssl_certificate_key "+key+";")
	site = strings.ReplaceAll(site, "listen 443 ssl", "listen 127.0.0.1:443 ssl") // nginx -t binds nothing
	conf := "pid " + filepath.Join(dir, "nginx.pid") + ";\nerror_log " + filepath.Join(dir, "error.log") + ";\n" +
		"events {}\nhttp {\naccess_log off;\n" + tempPaths(dir) + site + "\n}\n"
	cf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(cf, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.CommandContext(ctx, nginx, "-t", "-q", "-p", dir, "-c", cf).CombinedOutput(); err != nil {
		t.Fatalf("nginx -t rejects the operator guide's config: %v\n%s", err, out)
	}
}

// tempPaths keeps nginx -t from creating its temp dirs under /var/lib/nginx.
func tempPaths(dir string) string {
	var b strings.Builder
	for _, k := range []string{"client_body", "proxy", "fastcgi", "uwsgi", "scgi"} {
		b.WriteString(k + "_temp_path " + filepath.Join(dir, k) + ";\n")
	}
	return b.String()
}

// TestOperatorGuideCaddyConfigAdapts loads the operator guide's Caddyfile with `caddy
// adapt` where Caddy is installed and checks what it proxies and refuses.
func TestOperatorGuideCaddyConfigAdapts(t *testing.T) {
	caddy, err := exec.LookPath("caddy")
	if err != nil {
		t.Skip("caddy is not installed (Debian: apt-get install caddy); the operator guide's Caddyfile is not checked")
	}
	readme, err := os.ReadFile(filepath.Join("..", "..", "docs", "operator.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```caddy\n(.*?)```").FindSubmatch(readme)
	if m == nil {
		t.Fatal("docs/operator.md has no caddy block")
	}
	cf := filepath.Join(t.TempDir(), "Caddyfile")
	if err := os.WriteFile(cf, m[1], 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, caddy, "adapt", "--config", cf, "--adapter", "caddyfile")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("caddy adapt rejects the operator guide's Caddyfile: %v\n%s", err, stderr.String())
	}
	if strings.Contains(stderr.String(), "not formatted") {
		t.Errorf("the operator guide's Caddyfile is not in `caddy fmt` form: %s", stderr.String())
	}
	for _, want := range []string{`"dial":"127.0.0.1:8080"`, `"read_timeout":3600000000000`, `"status_code":403`, `"/v1/admin/*"`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("adapted Caddyfile lacks %s:\n%s", want, out)
		}
	}
}
