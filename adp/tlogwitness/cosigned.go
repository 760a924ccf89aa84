package tlogwitness

import (
	"fmt"

	"golang.org/x/mod/sumdb/note"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/tlogproof"
)

// MaxWitnessKeys bounds the witness keys a proof file or archive may list.
const MaxWitnessKeys = 64

// Cosigned is one verified cosignature/v1 line of a checkpoint.
type Cosigned struct {
	// VKey is the witness's verifier key, Name its name.
	VKey, Name string
	// Time is the cosignature's time (seconds since the Unix epoch).
	Time uint64
}

// VerifyCosigned checks that every witness key in vkeys has a
// cosignature/v1 line on the signed checkpoint that verifies, and that
// the log's own signature verifies with logV. Lines of keys not listed are
// ignored (note.Open skips unknown signers). It returns one entry per key,
// in the order given.
func VerifyCosigned(signed []byte, logV note.Verifier, vkeys []string) ([]Cosigned, error) {
	if len(vkeys) > MaxWitnessKeys {
		return nil, adp.Reason(adp.CodeInvalidRequest, "witnesses_invalid", fmt.Sprintf("more than %d witness keys", MaxWitnessKeys))
	}
	vs := make([]*CosignatureVerifier, len(vkeys))
	seen := map[string]bool{}
	for i, k := range vkeys {
		v, err := NewCosignatureVerifier(k)
		if err != nil {
			return nil, adp.Reason(adp.CodeInvalidRequest, "witnesses_invalid", fmt.Sprintf("witness key %d: %v", i, err))
		}
		id := fmt.Sprintf("%s/%08x", v.Name(), v.KeyHash())
		if seen[id] {
			return nil, adp.Reason(adp.CodeInvalidRequest, "witnesses_invalid", fmt.Sprintf("witness key %d is listed twice", i))
		}
		seen[id] = true
		vs[i] = v
	}
	others := make([]note.Verifier, len(vs))
	for i, v := range vs {
		others[i] = v
	}
	_, n, err := tlogproof.Open(signed, logV, others...)
	if err != nil {
		return nil, err
	}
	out := make([]Cosigned, len(vs))
	for i, v := range vs {
		found := false
		for _, s := range n.Sigs {
			if s.Name == v.Name() && s.Hash == v.KeyHash() {
				t, _ := CosignatureTime(s.Base64)
				out[i], found = Cosigned{VKey: v.Key(), Name: v.Name(), Time: t}, true
				break
			}
		}
		if !found {
			return nil, adp.Reason(adp.CodeInvalidRequest, "cosignature_missing",
				fmt.Sprintf("the checkpoint carries no cosignature of witness %s that verifies", v.Name()))
		}
	}
	return out, nil
}
