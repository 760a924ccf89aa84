package hostapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/tlogproof"
)

// LogPrefix is where the host log's tlog-tiles resources are served: its
// "monolithic prefix" (C2SP tlog-tiles), named in discovery.
const LogPrefix = "/tlog/"

// Cache lifetimes of log resources: full tiles and bundles never change;
// partial ones are replaced by full ones (and may be collected); the
// checkpoint moves with every integration.
const (
	cacheImmutable  = "public, max-age=31536000, immutable"
	cachePartial    = "public, max-age=60"
	cacheCheckpoint = "public, max-age=1, must-revalidate"
)

func (s *Server) logRoutes(e *gin.Engine, v1 *gin.RouterGroup) {
	e.GET(LogPrefix+"checkpoint", s.logResource)
	e.GET(LogPrefix+"tile/*path", s.logResource)
	v1.GET("/log/inclusion", s.logInclusion)
	v1.POST("/log/inclusions", s.logInclusions)
	v1.GET("/log/consistency", s.logConsistency)
}

func (s *Server) hostLog(c *gin.Context) HostLog {
	if s.opts.HostLog == nil {
		s.fail(c, adp.Errorf(adp.CodeNotFound, "this host keeps no host log"))
	}
	return s.opts.HostLog
}

// logResource serves GET /tlog/checkpoint and /tlog/tile/... .
func (s *Server) logResource(c *gin.Context) {
	l := s.hostLog(c)
	if l == nil {
		return
	}
	res, err := l.Read(c.Request.Context(), strings.TrimPrefix(c.Request.URL.Path, LogPrefix))
	if err != nil {
		s.fail(c, err)
		return
	}
	switch {
	case res.Checkpoint:
		if w := s.opts.Witnessed; w != nil {
			res.Body = w.CosignedFor(res.Body)
		}
		c.Header("Cache-Control", cacheCheckpoint)
		c.Data(http.StatusOK, "text/plain; charset=utf-8", res.Body)
		return
	case res.Immutable:
		c.Header("Cache-Control", cacheImmutable)
	default:
		c.Header("Cache-Control", cachePartial)
	}
	c.Data(http.StatusOK, "application/octet-stream", res.Body)
}

// sizeParam parses an optional tree size query parameter (0 when absent).
func sizeParam(c *gin.Context, name string) (uint64, error) {
	v, ok := c.GetQuery(name)
	if !ok {
		return 0, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n > 1<<63 {
		return 0, adp.Reason(adp.CodeInvalidRequest, "bad_tree_size", name+" must be a decimal tree size").WithData("param", name)
	}
	return n, nil
}

// positiveSizeParam is sizeParam for a parameter that, when given, names
// a tree to prove against: 0 is refused (absent means the latest
// checkpoint; an explicit 0 is no tree).
func positiveSizeParam(c *gin.Context, name string) (uint64, error) {
	n, err := sizeParam(c, name)
	if _, given := c.GetQuery(name); err == nil && given && n == 0 {
		return 0, adp.Reason(adp.CodeInvalidRequest, "bad_tree_size", name+" must be positive").WithData("param", name)
	}
	return n, err
}

// logInclusion serves GET /v1/log/inclusion?record_hash=…[&tree_size=N]:
// the record's inclusion proof against the latest checkpoint (which the
// answer carries) or against tree size N.
func (s *Server) logInclusion(c *gin.Context) {
	l := s.hostLog(c)
	if l == nil {
		return
	}
	leaf, err := tlogproof.RecordLeaf(c.Query("record_hash"))
	if err != nil {
		s.fail(c, err)
		return
	}
	size, err := positiveSizeParam(c, "tree_size")
	if err != nil {
		s.fail(c, err)
		return
	}
	// The answer is a self-contained proof file: `adpnode verify` checks
	// it offline (the verifier key's Ed25519 key is the host key). Without
	// tree_size it is against the newest checkpoint witnesses cosigned
	// that covers the record (their lines on the checkpoint, their keys
	// in witnesses), else the latest.
	var f tlogproof.File
	if size == 0 {
		f, err = l.ProofFile(c.Request.Context(), leaf)
	} else {
		f.RecordProof, err = l.Inclusion(c.Request.Context(), leaf, size)
		f.Type, f.VerifierKey = tlogproof.FileType, l.VerifierKey()
	}
	if err != nil {
		s.fail(c, err)
		return
	}
	writeJSON(c, http.StatusOK, f)
}

// MaxInclusionBatch bounds the record hashes of one POST /v1/log/inclusions.
const MaxInclusionBatch = 256

// InclusionBatch is the answer of POST /v1/log/inclusions: one signed
// checkpoint (with the witnesses' cosignature lines the host holds for
// it) and, per record hash asked for, in order, its inclusion proof
// against that checkpoint or why there is none.
type InclusionBatch struct {
	Type        string `json:"type"`
	Checkpoint  string `json:"checkpoint"`
	VerifierKey string `json:"verifier_key"`
	TreeSize    uint64 `json:"tree_size"`
	// PublishedAt is when the host published the checkpoint (Unix ms, the
	// host's clock; 0 when unknown). A claim, not signed.
	PublishedAt int64        `json:"published_at"`
	Proofs      []BatchProof `json:"proofs"`
}

// BatchProof is one record's entry in an InclusionBatch: Inclusion, or
// Error "not_in_log" when the checkpoint does not cover the record (yet).
type BatchProof struct {
	RecordHash string                    `json:"record_hash"`
	Inclusion  *tlogproof.InclusionProof `json:"inclusion,omitempty"`
	Error      string                    `json:"error,omitempty"`
}

// InclusionBatchType is the "type" of an InclusionBatch.
const InclusionBatchType = "adp.record-proofs"

// logInclusions serves POST /v1/log/inclusions {"record_hashes": [...]}:
// the inclusion proofs of up to MaxInclusionBatch records against the
// latest checkpoint, in one answer (the web viewer's one request per page).
func (s *Server) logInclusions(c *gin.Context) {
	l := s.hostLog(c)
	if l == nil {
		return
	}
	b, err := s.body(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	var in struct {
		RecordHashes []string `json:"record_hashes"`
	}
	if json.Unmarshal(b, &in) != nil || len(in.RecordHashes) == 0 {
		s.fail(c, adp.Reason(adp.CodeInvalidRequest, "record_hashes", `body must be {"record_hashes": ["<record hash>", ...]}`))
		return
	}
	if len(in.RecordHashes) > MaxInclusionBatch {
		s.fail(c, adp.Reason(adp.CodeInvalidRequest, "too_many_record_hashes", "at most 256 record hashes per request").
			WithData("limit", MaxInclusionBatch))
		return
	}
	leaves := make([][32]byte, len(in.RecordHashes))
	for i, h := range in.RecordHashes {
		if leaves[i], err = tlogproof.RecordLeaf(h); err != nil {
			s.fail(c, adp.Reason(adp.CodeInvalidRequest, "record_hash_invalid", "record_hashes["+strconv.Itoa(i)+"] is not 32 bytes of base64url").
				WithData("index", i))
			return
		}
	}
	ctx := c.Request.Context()
	raw, cp, err := l.Checkpoint(ctx)
	if err != nil {
		s.fail(c, err)
		return
	}
	out := InclusionBatch{Type: InclusionBatchType, Checkpoint: string(raw), VerifierKey: l.VerifierKey(), TreeSize: cp.Size,
		Proofs: make([]BatchProof, len(leaves))}
	if w := s.opts.Witnessed; w != nil {
		out.Checkpoint = string(w.CosignedFor(raw))
	}
	if at, err := l.CheckpointTime(); err == nil {
		out.PublishedAt = at.UnixMilli()
	}
	for i, leaf := range leaves {
		out.Proofs[i].RecordHash = in.RecordHashes[i]
		if cp.Size == 0 {
			out.Proofs[i].Error = "not_in_log"
			continue
		}
		rp, err := l.Inclusion(ctx, leaf, cp.Size)
		var ae *adp.Error
		switch {
		case err == nil:
			out.Proofs[i].Inclusion = &rp.Inclusion
		case errors.As(err, &ae) && (ae.Code == adp.CodeNotFound || ae.Code == adp.CodeInvalidRequest):
			// Not journalled, or beyond this checkpoint: not covered yet.
			out.Proofs[i].Error = "not_in_log"
		default:
			s.fail(c, err)
			return
		}
	}
	c.Header("Cache-Control", "no-store")
	writeJSON(c, http.StatusOK, out)
}

// logConsistency serves GET /v1/log/consistency?size1=M[&size2=N]
// (size2 defaults to the latest checkpoint's size; an explicit size2=0
// is refused as inclusion's tree_size=0 is).
func (s *Server) logConsistency(c *gin.Context) {
	l := s.hostLog(c)
	if l == nil {
		return
	}
	if _, ok := c.GetQuery("size1"); !ok {
		s.fail(c, adp.Reason(adp.CodeInvalidRequest, "bad_tree_size", "size1 is required").WithData("param", "size1"))
		return
	}
	size1, err := sizeParam(c, "size1")
	if err != nil {
		s.fail(c, err)
		return
	}
	size2, err := positiveSizeParam(c, "size2")
	if err != nil {
		s.fail(c, err)
		return
	}
	p, err := l.Consistency(c.Request.Context(), size1, size2)
	if err != nil {
		s.fail(c, err)
		return
	}
	writeJSON(c, http.StatusOK, p)
}

// logDiscovery is the discovery document's "log" member.
func (s *Server) logDiscovery() gin.H {
	l := s.opts.HostLog
	return gin.H{
		"origin":          l.Origin(),
		"verifier_key":    l.VerifierKey(),
		"url":             s.n.Origin() + LogPrefix,
		"inclusion":       s.n.Origin() + "/v1/log/inclusion",
		"consistency":     s.n.Origin() + "/v1/log/consistency",
		"leaf":            "record hash, 32 raw bytes; RFC 6962 hashing",
		"checkpoint_type": "C2SP tlog-checkpoint, signed note, Ed25519 host key",
		"witnesses":       s.witnessKeys(),
	}
}

// witnessKeys lists the cosignature/v1 keys of the witnesses the host
// submits its checkpoints to (their lines follow the host's signature
// in the checkpoint).
func (s *Server) witnessKeys() []string {
	out := []string{}
	if w := s.opts.Witnessed; w != nil {
		out = append(out, w.VerifierKeys()...)
	}
	return out
}
