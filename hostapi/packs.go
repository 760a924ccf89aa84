package hostapi

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/types"
)

// bundledPacksDiscovery lists the packs this node bundles beside the
// registered ones (discovery "bundled_packs"): each with the URI this node
// serves it at and the digest a room pins it by. The declaration
// {"pack": uri, "digest": digest} imports it on any host with external packs.
func (s *Server) bundledPacksDiscovery() []gin.H {
	var out []gin.H
	for _, b := range types.BundledPacks() {
		var names []string
		for _, d := range b.Pack.Types {
			names = append(names, d.Type)
		}
		out = append(out, gin.H{"id": b.ID, "title": b.Pack.Title, "pack": b.URI(s.n.Origin()), "digest": b.Digest, "types": names})
	}
	return out
}

// bundledPack serves GET /v1/packs/{name}: the exact bytes a bundled pack's
// digest is computed over, so other hosts and clients can fetch and check it.
func (s *Server) bundledPack(c *gin.Context) {
	b, ok := types.BundledPackByName(c.Param("name"))
	if !ok {
		s.fail(c, adp.Errorf(adp.CodeNotFound, "no bundled pack %q", c.Param("name")))
		return
	}
	h := c.Writer.Header()
	h.Set("Cache-Control", "public, max-age=31536000, immutable")
	h.Set("ETag", `"`+b.Digest+`"`)
	h.Set("X-Content-Type-Options", "nosniff")
	if c.GetHeader("If-None-Match") == `"`+b.Digest+`"` {
		c.Status(http.StatusNotModified)
		return
	}
	c.Data(http.StatusOK, "application/json", b.Raw)
}
