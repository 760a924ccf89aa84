package main

import (
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

type discoveryEff struct {
	Federation struct {
		Listen    []string `yaml:"listen"`
		ListenAll bool     `yaml:"listen_all_interfaces"`
		Bootstrap []string `yaml:"bootstrap"`
		DHT       string   `yaml:"dht"`
		ConnLow   int      `yaml:"conn_low"`
		ConnHigh  int      `yaml:"conn_high"`
		NAT       struct {
			HolePunching bool   `yaml:"hole_punching"`
			RelayClient  bool   `yaml:"relay_client"`
			RelayService bool   `yaml:"relay_service"`
			PortMap      bool   `yaml:"port_map"`
			AutoNAT      bool   `yaml:"autonat"`
			Reachability string `yaml:"reachability"`
		} `yaml:"nat"`
	} `yaml:"federation"`
}

func checkDiscovery(t *testing.T, args ...string) discoveryEff {
	t.Helper()
	out := mustCLI(t, append([]string{"config", "check"}, args...)...)
	var eff discoveryEff
	if err := yaml.Unmarshal([]byte(out), &eff); err != nil {
		t.Fatal(err, out)
	}
	return eff
}

// Discovery settings: bootstrap from the file or the flag (the flag
// replaces), the DHT mode, watermarks, NAT switches; a public URL that is
// not loopback makes libp2p listen on all interfaces unless listen is set.
func TestConfigDiscovery(t *testing.T) {
	const fileBoot = "/ip4/203.0.113.7/tcp/4001/p2p/12D3KooWJqGAcHmYqcnWAoXkyPxsAEdbWs8DvH5N5niabUaH731o"
	const flagBoot = "/dns4/boot.example.org/tcp/4001/p2p/12D3KooWAdpbpKnFhLRQkpmGvjQxyzAt45ffbhkyNYjksG6W919o"
	file := writeFile(t, "node.yaml", `listen: 127.0.0.1:8080
public_url: https://adp.example.org
data: ./data
federation:
  bootstrap:
    - `+fileBoot+`
  dht: client
  conn_low: 16
  conn_high: 32
  nat:
    hole_punching: false
    relay_service: true
`)
	eff := checkDiscovery(t, "--config", file)
	f := eff.Federation
	if len(f.Bootstrap) != 1 || f.Bootstrap[0] != fileBoot || f.DHT != "client" || f.ConnLow != 16 || f.ConnHigh != 32 {
		t.Errorf("file's discovery settings lost: %+v", f)
	}
	if f.NAT.HolePunching || !f.NAT.RelayClient || !f.NAT.RelayService || f.NAT.PortMap || !f.NAT.AutoNAT || f.NAT.Reachability != "" {
		t.Errorf("nat %v", f.NAT)
	}
	if !f.ListenAll || len(f.Listen) == 0 || !strings.HasPrefix(f.Listen[0], "/ip4/0.0.0.0/") {
		t.Errorf("public_url https://adp.example.org: libp2p should listen on all interfaces, got %v (all=%v)", f.Listen, f.ListenAll)
	}
	eff = checkDiscovery(t, "--config", file, "--bootstrap", flagBoot, "--dht", "server", "--p2p-listen", "/ip4/127.0.0.1/tcp/4001")
	if f := eff.Federation; len(f.Bootstrap) != 1 || f.Bootstrap[0] != flagBoot || f.DHT != "server" || f.ListenAll ||
		len(f.Listen) != 1 || f.Listen[0] != "/ip4/127.0.0.1/tcp/4001" {
		t.Errorf("flags must replace the file's: %+v", f)
	}
	// A loopback public URL keeps the loopback default.
	eff = checkDiscovery(t, "--listen", "127.0.0.1:18401", "--data", t.TempDir())
	if f := eff.Federation; f.ListenAll || !strings.HasPrefix(f.Listen[0], "/ip4/127.0.0.1/") || f.DHT != "auto" || len(f.Bootstrap) != 0 {
		t.Errorf("loopback defaults: %+v", f)
	}
}

// Bad discovery settings are usage errors that name the setting.
func TestConfigDiscoveryRejects(t *testing.T) {
	for name, c := range map[string]struct{ args []string }{
		"dht mode":          {[]string{"--dht", "sometimes"}},
		"bootstrap no p2p":  {[]string{"--bootstrap", "/ip4/203.0.113.7/tcp/4001"}},
		"bootstrap garbage": {[]string{"--bootstrap", "boot.example.org:4001"}},
		"placeholder":       {[]string{"--bootstrap", "/ip4/203.0.113.7/tcp/4001/p2p/<peer id>"}},
	} {
		t.Run(name, func(t *testing.T) {
			code, _, errOut := cli(t, append([]string{"config", "check", "--listen", "127.0.0.1:18401"}, c.args...)...)
			if code != 2 || !(strings.Contains(errOut, "dht") || strings.Contains(errOut, "bootstrap")) {
				t.Errorf("exit %d, stderr %q", code, errOut)
			}
		})
	}
	file := writeFile(t, "wm.yaml", "federation:\n  conn_low: 200\n  conn_high: 100\n")
	if code, _, errOut := cli(t, "config", "check", "--config", file); code != 2 || !strings.Contains(errOut, "conn_low") {
		t.Errorf("low > high: exit %d, %q", code, errOut)
	}
	file = writeFile(t, "nat.yaml", "federation:\n  nat:\n    reachability: sometimes\n")
	if code, _, errOut := cli(t, "config", "check", "--config", file); code != 2 || !strings.Contains(errOut, "reachability") {
		t.Errorf("bad reachability: exit %d, %q", code, errOut)
	}
}
