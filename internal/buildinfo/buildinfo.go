// Package buildinfo says which adpnode build is running: the version set
// at link time, or else the module version and VCS revision Go recorded.
package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// version is set at link time:
//
//	go build -ldflags "-X github.com/adpnode/adpnode/internal/buildinfo.version=v1.2.3" ./cmd/adpnode
var version string

// Info describes the running build.
type Info struct {
	Version   string `json:"version"`
	Revision  string `json:"revision,omitempty"`
	Modified  bool   `json:"modified,omitempty"`
	GoVersion string `json:"go_version"`
}

// Get returns the running build's description.
func Get() Info {
	in := Info{Version: version, GoVersion: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if ok {
		if in.Version == "" && bi.Main.Version != "" {
			in.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				in.Revision = s.Value
			case "vcs.modified":
				in.Modified = s.Value == "true"
			}
		}
	}
	if in.Version == "" {
		in.Version = "(devel)"
	}
	return in
}

// String is one line: version, revision and Go version.
func (in Info) String() string {
	s := in.Version
	if in.Revision != "" {
		r := in.Revision
		if len(r) > 12 {
			r = r[:12]
		}
		s += " (" + r
		if in.Modified {
			s += ", modified"
		}
		s += ")"
	}
	return s + " " + in.GoVersion
}
