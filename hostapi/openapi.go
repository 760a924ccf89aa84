package hostapi

import (
	_ "embed"
	"net/http"

	"github.com/gin-gonic/gin"
)

// openAPIDoc is the OpenAPI 3.1 description of this HTTP API
// (hostapi/openapi.json). openapi_test.go keeps it equal to the routes the
// server registers.
//
//go:embed openapi.json
var openAPIDoc []byte

// OpenAPI returns a copy of the OpenAPI document served at /openapi.json.
func OpenAPI() []byte { return append([]byte(nil), openAPIDoc...) }

// openAPI serves GET /openapi.json.
func (s *Server) openAPI(c *gin.Context) {
	c.Header("Cache-Control", "no-cache")
	c.Data(http.StatusOK, "application/json; charset=utf-8", openAPIDoc)
}
