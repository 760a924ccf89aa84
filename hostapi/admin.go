package hostapi

import (
	"github.com/gin-gonic/gin"

	"net/http"
	"time"
)

// adminRoutes are the operator endpoints on the node's storage, behind the
// one operator guard (operator: the operator token).
func (s *Server) adminRoutes() {
	s.engine.GET("/v1/admin/backup", s.adminBackup)
}

// adminBackup streams a consistent backup of the node's database
// (node.Backup: the adpnode backup file format). An error after the first
// byte can only cut the stream: the file then has no trailer and restore
// refuses it.
func (s *Server) adminBackup(c *gin.Context) {
	if !s.operator(c) {
		return
	}
	c.Header("Content-Type", "application/octet-stream")
	c.Header("Content-Disposition", `attachment; filename="adpnode-`+time.Now().UTC().Format("20060102T150405Z")+`.backup"`)
	c.Status(http.StatusOK) // sent with the first byte
	if err := s.n.Backup(c.Writer); err != nil {
		if !c.Writer.Written() {
			c.Header("Content-Disposition", "")
			s.fail(c, err)
			return
		}
		s.log.Error("backup cut short", "err", err)
	}
}
